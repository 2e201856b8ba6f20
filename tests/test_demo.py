"""``streamlsq demo`` at small sizes: every step runs, its figures and summary are written,
and its printed accuracies are the ones it claims (the demo is run once, by the session
fixture ``demo`` of tests/conftest.py)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from test_faults_user_files import DEMO

from streamlsq import open_result
from streamlsq.cli.main import main
from streamlsq.studies.demo import ESTIMATORS, TAUS, demo_names

from conftest import lstsq, read_all
from faultkit import invoke, snapshot


def test_writes_stores_summary_and_figures(demo):
    out, report, printed = demo
    for name in ("stream", "tasks", "model", "kf4lls-sequential", "kf4lls-scan", "rls-g0.9999",
                 "lms-normalized"):
        assert (out / f"{name}.zarr").is_dir(), name
    for fig in ("stream.png", "metalearn.png"):
        assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(report["figures"]) == {"stream", "metalearn"}
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# streamlsq demo") and printed.splitlines()[-1] in summary
    for step in ("1. simulated", "2. fitted", "3. simulated a multi-task store",
                 "4. meta-learned", "5. predicted", "6. figures"):
        assert step in printed, step
    assert "rows/s" in printed and "dashboard" in printed


def test_the_demo_writes_only_the_names_a_rerun_knows_as_its_own(demo):
    """A rerun replaces an earlier demo's entries by these names only (re-test round 14: an
    edited demo.json listing a user's file had it deleted): an entry added to the demo
    without its name would be refused as the user's."""
    out = demo[0]
    assert {p.name for p in out.iterdir()} == demo_names() | {"demo.json"}


def test_stream_fits_against_lstsq_and_truth(demo):
    out, report, printed = demo
    X, Y = read_all(out / "stream.zarr")
    ref = lstsq(X, Y)
    truth = zarr.open_group(str(out / "stream.zarr"), mode="r")["coef_true"][:].reshape(6, -1)
    for name in ("kf4lls-sequential", "kf4lls-scan"):
        assert report[name]["rel_error_vs_lstsq"] < 1e-10
        # independent check of the reported number: the stored result against lstsq
        coef = zarr.open_group(str(out / f"{name}.zarr"), mode="r")["coef"][-1]
        np.testing.assert_allclose(coef, ref, rtol=1e-9, atol=1e-12)
        assert report[name]["error_vs_truth"] == pytest.approx(np.abs(ref - truth).max(),
                                                               rel=1e-6)
    assert report["engines_max_abs_difference"] < 1e-10
    # LMS (one pass, decreasing normalised step) and RLS near but not at least squares;
    # 40,000 rows, noise 1, 6 features: lstsq is within ~0.02 of the truth
    assert report["lms-normalized"]["error_vs_truth"] < 0.2
    assert report["rls-g0.9999"]["error_vs_truth"] < 0.1
    for name in ("kf4lls-sequential", "rls-g0.9999", "lms-normalized"):
        assert report[name]["rows_per_second"] > 0
        assert f"{report[name]['rows_per_second']:.3e}" in printed


def test_metalearning_and_prediction_against_truth(demo):
    _, report, printed = demo
    m = report["metalearn"]
    assert m["n_clusters"] == 4 and m["heavy_accuracy"] == 1.0
    assert m["coef_error"] < 0.25 and m["classification_accuracy"] > 0.8
    pred = report["prediction"]
    assert set(pred) == set(ESTIMATORS) and all(set(v) == set(TAUS) for v in pred.values())
    small = min(TAUS)
    assert pred["bayes"][small] <= pred["map"][small] <= pred["lstsq"][small]
    # 1,000 tasks x 20 held-out rows: s² = 1 within a few hundredths once τ ≫ d
    assert pred["bayes"][max(TAUS)] == pytest.approx(1.0, abs=0.1)
    assert f"{pred['bayes'][small]:.3f}" in printed


def test_cli_help_lists_the_demo_options():
    r = CliRunner().invoke(main, ["demo", "--help"])
    assert r.exit_code == 0 and "--tasks" in r.output and "Examples:" in r.output


# here rather than in test_faults_user_files.py: pytest-xdist runs a file in one process,
# so the session fixture ``demo`` (37 s) is computed once, not once per process
def test_the_demo_replaces_only_its_own_folder_and_restores_it_when_it_fails(tmp_path, client,
                                                                            demo):
    out = tmp_path / "demo"
    # an earlier demo's folder: a copy of the session's (tests/conftest.py), rather than a
    # demo run of its own (the replacing run below is the command line's)
    shutil.copytree(demo[0], out)
    assert json.loads((out / "demo.json").read_text())["complete"] is True
    truth = zarr.open_group(str(out / "stream.zarr"), mode="r")["coef_true"][:]
    before = snapshot(tmp_path)
    failed = invoke("demo", "--out", out, "--rows", 5_000, "--features", 0,
                    scheduler=client.scheduler.address)
    assert failed.exit_code == 2 and "features" in failed.stderr
    assert snapshot(tmp_path) == before  # the earlier demo put back, nothing else left
    again = invoke("demo", "--out", out, *DEMO, "--seed", 1, scheduler=client.scheduler.address)
    assert again.exit_code == 0, again.output
    assert not np.array_equal(zarr.open_group(str(out / "stream.zarr"), mode="r")["coef_true"][:],
                              truth)  # the new demo's (seed 1), not a mixture
    assert open_result(out / "model.zarr").attrs["complete"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
