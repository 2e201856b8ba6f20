"""``streamlsq study mlr --quick`` and its notebook: Appendix E's shapes at quick sizes.

Quick sizes (pipeline/studies/mlr.py QUICK): 3 replicates per grid point, 300 test
tasks per τ with 20 held-out rows each (6,000 rows: the held-out MSE of a correct
model is s² = 1 within about ±0.05), the EM store of tests/test_mlr_pipeline.py.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from streamlsq.cli.main import main

from conftest import stored_notebook

TABLES = {
    "subspace": ["n_tasks", "rows_per_task", "n_times_t", "replicate", "subspace_error"],
    "clustering": ["n_heavy", "t_heavy", "replicate", "accuracy"],
    "classification": ["t_light2", "replicate", "classification_accuracy", "coef_error",
                       "noise_error", "weight_error"],
    "parameters": ["metric", "value"],
    "prediction": ["tau", "estimator", "holdout_mse", "holdout_rows"],
    "em": ["method", "init", "scale", "init_seed", "status", "coef_error"],
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, client):
    out = tmp_path_factory.mktemp("study") / "mlr"
    r = CliRunner().invoke(main, ["study", "mlr", "--out", str(out), "--quick",
                                  "--scheduler", client.scheduler.address])
    assert r.exit_code == 0, r.output + str(r.exception)
    assert f"wrote {out}" in r.output and "on 2 workers" in r.output
    return out


def table(out, name):
    return pd.read_csv(out / f"{name}.csv")


def test_quick_run_writes_tidy_tables_figures_and_summary(run):
    for name, columns in TABLES.items():
        df = table(run, name)
        assert len(df) > 0 and set(columns) <= set(df.columns), (name, list(df.columns))
    for fig in ("grids", "prediction", "em"):
        assert (run / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# Study `mlr`") and "paper" in summary
    assert "lost" in summary and "in-memory reference" in summary
    meta = json.loads((run / "study.json").read_text())
    assert meta["study"] == "mlr" and meta["params"]["quick"] is True


def test_subspace_error_falls_with_n_times_t(run):
    sub = table(run, "subspace")
    assert (sub.n_tasks * sub.rows_per_task == sub.n_times_t).all()
    mean = sub.groupby(["n_times_t", "rows_per_task"]).subspace_error.mean().unstack()
    # 16× more rows: the error falls like (n·t)^(-1/2), i.e. about 4×; 3 replicates
    assert (mean.iloc[-1] < mean.iloc[0] / 2).all()
    # same n·t, t = 2 vs 8: within a factor 3.5 (measured ≤ 2.8; longer tasks better)
    assert (mean.max(axis=1) / mean.min(axis=1) < 3.5).all()


def test_clustering_and_classification_improve_with_rows_per_task(run):
    clus = table(run, "clustering").groupby(["n_heavy", "t_heavy"]).accuracy.mean().unstack()
    assert (clus[clus.columns.max()] == 1.0).all()  # t_H = 160: exact (Δ² = 2, s = 1)
    assert (clus[clus.columns.min()] < 0.8).all()  # t_H = 20: too few rows
    clas = table(run, "classification").groupby("t_light2").mean()
    assert clas.classification_accuracy.iloc[-1] > 0.95
    assert clas.classification_accuracy.iloc[0] < clas.classification_accuracy.iloc[-1] - 0.2
    assert clas.coef_error.iloc[-1] < clas.coef_error.iloc[0]
    params = table(run, "parameters").set_index("metric").value
    assert params["heavy_accuracy"] == 1.0 and params["coef_error"] < 0.15


def test_prediction_ordering_at_small_tau_and_limit_s2(run):
    pred = table(run, "prediction").pivot(index="tau", columns="estimator",
                                           values="holdout_mse")
    small, large = pred.iloc[0], pred.iloc[-1]
    assert small["bayes"] <= small["map"] <= small["lstsq"]
    # τ = 64: least squares' excess d/(τ − d − 1) ≈ 0.15, mixture estimators ≈ 0
    np.testing.assert_allclose(large[["bayes", "map"]], 1.0, atol=0.1)
    assert large["lstsq"] == pytest.approx(1.0, abs=0.3)
    assert (pred.loc[pred.index.max()] < pred.loc[pred.index.min()]).all()


def test_em_fails_from_the_perturbed_start_where_algorithm_1_succeeds(run):
    em = table(run, "em")
    alg1 = em[em.method == "algorithm 1"].iloc[0]
    truth = em[em.init == "truth"].iloc[0]
    known = em[(em.init == "perturbed") & (em.scale == 1.0) & (em.init_seed == 3)].iloc[0]
    assert alg1.coef_error < 0.05 and truth.coef_error < 0.05
    assert known.coef_error > 0.5 and known.status in ("converged", "collapsed")


def test_replicates_option_and_bad_values(tmp_path):
    r = CliRunner().invoke(main, ["study", "mlr", "--out", str(tmp_path / "a"),
                                  "--replicates", "0"])
    assert r.exit_code == 2 and "--replicates must be an integer >= 1" in r.stderr
    r = CliRunner().invoke(main, ["study", "lms", "--out", str(tmp_path / "a"),
                                  "--replicates", "2"])
    assert r.exit_code == 2 and "does not take --replicates" in r.stderr
    assert not (tmp_path / "a").exists()


def test_trial_kernels_agree_with_meta_learn():
    from streamlsq.kernels import mlr
    from streamlsq.kernels.studies.mlr import classification_trial, clustering_trial
    from streamlsq.kernels.synthetic.mlr import mlr_components, simulate_tasks

    W, s, p = mlr_components(1, 8, 4)
    words = [1, 2, 3]
    sizes = {"n_light": 4_000, "t_light": 4, "n_heavy": 60, "t_heavy": 60}
    res = classification_trial(words, 500, 6, W, s, p, **sizes)
    sets = [simulate_tasks([*words, role], 0, n, t, W, s, p)
            for role, n, t in ((1, 4_000, 4), (2, 60, 60), (3, 500, 6))]
    ref = mlr.meta_learn(*(x[:3] for x in sets), 4)
    assert res["heavy_accuracy"] == mlr.label_accuracy(ref["heavy_cluster"], sets[1][3])
    assert res["coef_error"] == mlr.parameter_errors(
        ref["coef"], np.sqrt(ref["noise_var"]), ref["weight"], W, s, p)["coef"]
    # the clustering trial draws the same D_L1 and D_H, so it clusters as meta_learn does
    assert clustering_trial(words, 60, 60, W, s, p, n_light=4_000, t_light=4) == \
        res["heavy_accuracy"]


def test_notebook_executes_in_quick_mode(kernel_env):
    from nbclient import NotebookClient

    nb = stored_notebook("mlr")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(kernel_env.parent)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert len(images) >= 3
    assert (kernel_env / "mlr" / "summary.md").exists()


def test_grid_tables_do_not_depend_on_the_number_of_workers(run):
    # the grids are cut in fixed batches and every trial seeds itself: one in-process worker
    # gives the same tables, byte for byte, as the 2-worker session cluster
    import logging

    from distributed import Client, LocalCluster

    from streamlsq.studies.mlr import QUICK, _grid

    reps = range(QUICK["replicates"])
    configs = {
        "subspace": [(nt, t, r) for nt in QUICK["subspace_nt"] for t in QUICK["subspace_t"]
                     for r in reps],
        "clustering": [(n, t, r) for n in QUICK["heavy_n"] for t in QUICK["heavy_t"]
                       for r in reps],
        "classification": [(t, r) for t in QUICK["light2_t"] for r in reps],
    }
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as one:
        for kind, cfg in configs.items():
            df = _grid(one, 0, kind, cfg, progress=False)
            assert df.to_csv(index=False).encode() == (run / f"{kind}.csv").read_bytes(), kind
