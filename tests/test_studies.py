"""``streamlsq study NAME`` and the study notebooks, in quick mode.

Each study runs once through the command line on the session's 2-worker
cluster; the checks are the shapes the papers report, with tolerances from the
Monte-Carlo standard errors the tables carry; every notebook executes, on a
1-worker cluster, and its run gives byte-identical tables.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from streamlsq.cli.main import main
from streamlsq.studies import STUDIES

from conftest import stored_notebook

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["interleaved", "irma", "lms", "bfgs"]
EXPECTED = {
    "interleaved": {"figure1": ["scheme", "step", "bias", "bias_se", "mse", "mse_se",
                                "bias_over_D", "expected_bias_over_D"]},
    "irma": {"figure1": ["method", "examples", "loss_mean", "loss_std", "loss_upper_sd",
                         "loss_lower_sd"],
             "table1": ["order", "examples", "method", "mse_mean", "mse_std", "mse_var",
                        "published_mean", "published_pm", "ratio_to_published"]},
    "lms": {"demonstration": ["curvature", "rate", "update", "epoch", "w0", "w1"],
            "fits": ["curvature", "rate", "epochs", "w0", "w1", "distance_to_ls"],
            "convergence": ["curvature", "schedule", "epoch", "metric", "mean", "median"]},
    "bfgs": {"regression": ["method", "block", "rows", "metric", "mean", "std", "median"],
             "binary": ["method", "block", "rows", "metric", "mean", "median"]},
}


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory, client):
    """Every study's ``--quick`` run through the CLI on the 2-worker session cluster."""
    root = tmp_path_factory.mktemp("studies")
    outputs = {}
    for name in NAMES:
        out = root / name
        r = CliRunner().invoke(main, ["study", name, "--out", str(out), "--quick",
                                      "--scheduler", client.scheduler.address])
        assert r.exit_code == 0, r.output + str(r.exception)
        assert f"wrote {out}" in r.output and "on 2 workers" in r.output
        outputs[name] = out
    return outputs


def table(out, name):
    return pd.read_csv(out / f"{name}.csv")


@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_tidy_tables_figures_and_summary(quick_runs, name):
    out = quick_runs[name]
    for tname, columns in EXPECTED[name].items():
        df = table(out, tname)
        assert len(df) > 0 and set(columns) <= set(df.columns), (tname, list(df.columns))
        assert df[[c for c in df.columns if df[c].dtype.kind == "f"]].notna().all().all() \
            or tname in ("table1", "fits")  # NaN only where the paper has no entry / LS row
        png = out / f"{tname}.png"
        if png.exists():
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list(out.glob("*.png"))) >= 1
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# Study `{name}`") and "paper" in summary
    meta = json.loads((out / "study.json").read_text())
    assert meta["study"] == name and meta["params"]["quick"] is True


def test_interleaved_has_the_shape_of_figure_1(quick_runs):
    t = table(quick_runs["interleaved"], "figure1")
    by = {s: g.set_index("step") for s, g in t.groupby("scheme")}
    se = 4 * t.bias_se_over_D.max()
    assert np.all(np.abs(by["birds"].bias_over_D - 0.75) < se)
    assert np.all(np.abs(by["fish"].bias_over_D - 0.25) < se)
    assert np.all(by["penguins"].bias_over_D < se)
    a, b = by["interleaved_birds_first"], by["interleaved_fish_first"]
    even = [2, 4, 6]
    # the two orders have seen the same blocks at even steps: equal to rounding
    np.testing.assert_allclose(a.loc[even, ["bias", "mse"]], b.loc[even, ["bias", "mse"]],
                               rtol=1e-9)
    # near 0 at even steps: the second-order term (<= 0.007) plus Monte-Carlo error
    assert np.all(a.loc[even].bias_over_D < 0.007 + 4 * a.loc[even].bias_se_over_D)
    # odd steps: the quoted values, within the second-order term and 4 standard errors
    for frame, quoted in ((a, {3: 0.15, 5: 0.083}), (b, {3: 0.107, 5: 0.068})):
        for step, v in quoted.items():
            assert abs(frame.loc[step].bias_over_D - v) < 0.008 + 4 * frame.loc[step].bias_se_over_D


def test_irma_reproduces_figure_1_and_table_1(quick_runs):
    fig1 = table(quick_runs["irma"], "figure1")
    final = fig1[fig1.examples == fig1.examples.max()].set_index("method")
    assert final.loss_mean.idxmin() == "irma" and final.loss_std.idxmin() == "irma"
    t1 = table(quick_runs["irma"], "table1")
    incr = t1[t1.method == "incremental"]
    # 200 sequences: the incremental means are known to ~10 %, so factor 3 is meaningful
    assert np.all((incr.ratio_to_published > 1 / 3) & (incr.ratio_to_published < 3))
    batch150 = t1[(t1.method == "batch") & (t1.examples == 150)]
    assert np.all((batch150.ratio_to_published > 1 / 3) & (batch150.ratio_to_published < 3))
    # batch least squares on 10 examples blows up (orders 6 and 10: even the medians do)
    b10 = t1[(t1.method == "batch") & (t1.examples == 10)].set_index("order")
    i10 = incr[incr.examples == 10].set_index("order")
    assert np.all(b10.loc[[6, 10]].mse_median > 3 * i10.loc[[6, 10]].mse_mean)
    summary = (quick_runs["irma"] / "summary.md").read_text()
    assert "variances" in summary and "few extreme sequences" in summary


def test_lms_converges_towards_least_squares(quick_runs):
    fits = table(quick_runs["lms"], "fits")
    lms = fits[fits.epochs > 0]
    for (_, rate), g in lms.groupby(["curvature", "rate"]):
        g = g.set_index("epochs")
        assert g.loc[20].distance_to_ls < g.loc[1].distance_to_ls, rate
    conv = table(quick_runs["lms"], "convergence")
    d = conv[conv.metric == "distance"]
    for _, g in d.groupby(["curvature", "schedule"]):
        g = g.set_index("epoch")
        assert g.loc[g.index.max(), "median"] < g.loc[1, "median"]


def test_bfgs_findings(quick_runs):
    reg = table(quick_runs["bfgs"], "regression")
    last = reg[reg.block == reg.block.max()].set_index(["method", "metric"])
    assert last.loc[("kf4lls", "distance_to_lstsq"), "p95"] < 1e-10
    # BFGS with exact line search does not reach the stacked least-squares fit
    assert last.loc[("bfgs_exact", "distance_to_lstsq"), "p05"] > 1e-3
    assert last.loc[("bfgs_exact", "error_to_truth"), "median"] > \
        last.loc[("lstsq", "error_to_truth"), "median"]
    # why: B does not shrink with the rows seen as the least-squares H^-1 does
    assert last.loc[("bfgs_exact", "inverse_hessian_ratio"), "p05"] > 5
    b = table(quick_runs["bfgs"], "binary")
    lb = b[b.block == b.block.max()].set_index(["method", "metric"])["median"]
    assert lb[("bfgs_balanced_1", "balanced_accuracy")] > 0.7
    assert lb[("bfgs_balanced_1", "balanced_accuracy")] > \
        lb[("kf4lls", "balanced_accuracy")] + 0.15
    assert lb[("weighted_lstsq", "distance_to_weighted_lstsq")] == 0


@pytest.fixture(scope="module")
def one_worker():
    """A 1-worker cluster, its worker a thread of this process (the tables depend on how
    the batches are cut, not on where they run), reachable over TCP by a notebook kernel."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


def test_bad_input_exits_2_with_one_line(tmp_path):
    def run(*args):
        return CliRunner().invoke(main, ["study", *map(str, args)])

    r = run("irma", "--out", tmp_path / "a", "--alpha", 0.3)
    assert r.exit_code == 2 and r.stderr.strip() == \
        "streamlsq: error: study irma does not take --alpha"
    r = run("interleaved", "--out", tmp_path / "a", "--alpha", 1.5)
    assert r.exit_code == 2 and "alpha must be in (0, 1)" in r.stderr
    r = run("interleaved", "--out", tmp_path / "a", "--iterations", 1)
    assert r.exit_code == 2 and "--iterations must be an integer >= 2" in r.stderr
    r = run("lms", "--out", tmp_path / "a", "--rates", "0.01,-1")
    assert r.exit_code == 2 and "--rates must be positive" in r.stderr
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "data.txt").write_text("mine")
    r = run("bfgs", "--out", tmp_path / "taken", "--quick")
    assert r.exit_code == 2 and "is not an earlier output of study 'bfgs'" in r.stderr
    assert (tmp_path / "taken" / "data.txt").read_text() == "mine"
    r = run("nosuch", "--out", tmp_path / "a")
    assert r.exit_code == 2
    assert not (tmp_path / "a").exists()


def test_help_lists_every_registered_study_with_examples():
    r = CliRunner().invoke(main, ["study", "--help"])
    assert r.exit_code == 0 and "Examples:" in r.output and "--scheduler" in r.output
    for name in STUDIES:
        assert name in r.output


# --------------------------------------------------------------------------
# notebooks
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes_in_quick_mode_on_one_worker_giving_the_tables_of_two(
        kernel_env, quick_runs, one_worker, monkeypatch, name):
    """The notebook executes, on a 1-worker cluster; the tables its quick run writes are
    byte-identical to those of the CLI's quick run on the 2-worker session cluster (one
    run of each study serves both checks; it was run a third time on its own)."""
    from nbclient import NotebookClient

    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", one_worker.scheduler.address)
    nb = stored_notebook(name)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(kernel_env.parent)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert len(images) >= 1
    assert (kernel_env / name / "summary.md").exists()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs)
    assert " s on 1 Dask workers" in printed, printed
    for tname in EXPECTED[name]:
        assert (kernel_env / name / f"{tname}.csv").read_bytes() == \
            (quick_runs[name] / f"{tname}.csv").read_bytes(), tname


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_stored_notebook_is_the_generated_one(name):
    """The committed cells are those make_notebooks.py writes now: the stored outputs
    belong to the current sources."""
    import importlib.util

    import nbformat

    spec = importlib.util.spec_from_file_location("make_notebooks",
                                                  ROOT / "notebooks" / "make_notebooks.py")
    make_notebooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_notebooks)
    generated = make_notebooks.NOTEBOOKS[name]
    stored = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    assert [(c.cell_type, c.id, c.source) for c in stored.cells] == \
        [(c.cell_type, c.id, c.source) for c in generated.cells], \
        f"{name}.ipynb is out of date; regenerate it: python notebooks/make_notebooks.py {name}"
