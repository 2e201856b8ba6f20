"""SIGKILL at a random point inside the computation, then --resume: the result is the one of
an uninterrupted run (docs/faults.md, "Kills"). The kill point is drawn at random among the
commits of the run (printed with a failure), and the command is killed right after the
chosen commit, while it still runs: never in start-up or tear-down.

The killed command runs in a new interpreter with its own LocalCluster (--workers 1), and the
whole process group is SIGKILLed; the resumed command, whose start is not what is tested, runs
in this process on the session cluster (the result does not depend on the cluster).

The sequential fit is killed the same way in tests/test_checkpoint_resume.py."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamlsq import fit_em, fit_stream, metalearn, open_result, simulate_mlr, simulate_stream

from faultkit import cli, commits, invoke, kill_session, leftovers, start, wait_for

#: seeds the kill points: a failure prints the point it drew, to rerun it
DRAW = random.Random()


def _kill_after_a_random_commit(args, ckpt, lo: int, hi: int, client) -> int:
    """Run ``streamlsq ARGS --workers 1`` (a new interpreter and its own cluster), SIGKILL
    it (and its cluster) right after commit k, k drawn in [lo, hi]; then the same command
    with --resume (on ``client``'s cluster) must succeed. Returns k."""
    k = DRAW.randint(lo, hi)
    proc = start(cli(*args, "--workers", 1))
    wait_for(lambda: commits(ckpt) >= k, proc, what=f"commit {k} (drawn in {lo}..{hi})")
    assert proc.poll() is None, f"the run ended before it could be killed after commit {k}"
    kill_session(proc)
    resumed = invoke(*args, "--resume", scheduler=client.scheduler.address)
    assert resumed.exit_code == 0, f"resume after commit {k}: {resumed.output}"
    return k


@pytest.fixture(scope="module")
def stream(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("kill") / "s.zarr"
    # 101 scan pieces (commits) of 0.12 MiB: a kill after commit 2..20 lands mid-run
    return simulate_stream(path, 100_000, 8, 1, chunk_rows=2_000, seed=7, client=client)


def test_scan_fit_killed_at_a_random_point_resumes_to_the_same_result(stream, tmp_path,
                                                                      client):
    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    args = ["fit", "kf4lls", stream, "--out", out, "--engine", "scan", "--block-size", 1000,
            "--record-every", 1, "--segment-size", 0.12, "--checkpoint", ckpt]
    k = _kill_after_a_random_commit(args, ckpt, 2, 20, client)
    reference = fit_stream(stream, "kf4lls", engine="scan", block_size=1000, record_every=1,
                           segment_bytes=int(0.12 * 2**20), client=client)
    got = open_result(out)
    np.testing.assert_array_equal(got.coef, reference.coef, err_msg=f"killed after commit {k}")
    states = [name for name in reference.data_vars if name.startswith("state_")]
    assert states  # the final state of the recursion, whatever the solver
    for name in states:
        np.testing.assert_array_equal(got[name], reference[name])
    assert not ckpt.exists() and leftovers(out) == []


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("kill") / "t.zarr"
    # metalearn's last step and EM's last iterations still take a second or more after the
    # latest commit a kill is drawn at
    return simulate_mlr(path, k=3, d=6, n_light=20_000, t_light=4, n_heavy=150, t_heavy=60,
                        n_light2=6_000, t_light2=8, seed=4, client=client)


def test_metalearn_killed_at_a_random_point_resumes_to_the_same_model(tasks, tmp_path, client):
    out, ckpt = tmp_path / "m.zarr", tmp_path / "ckpt"
    args = ["metalearn", tasks, "--out", out, "--k", 3, "--chunk-tasks", 150, "--checkpoint",
            ckpt]
    k = _kill_after_a_random_commit(args, ckpt, 1, 4, client)  # 5 steps: subspace ... refinement
    reference = metalearn(tasks, 3, chunk_tasks=150, client=client)
    got = open_result(out)
    for name in ("basis", "coef", "noise_var", "weight", "light_cluster", "heavy_cluster",
                 "initial_coef"):
        np.testing.assert_array_equal(got[name], reference[name],
                                      err_msg=f"{name}, killed after commit {k}")
    assert not ckpt.exists()


def test_em_killed_at_a_random_point_resumes_to_the_same_result(tasks, tmp_path, client):
    out, ckpt = tmp_path / "em.zarr", tmp_path / "ckpt"
    args = ["fit", "em", tasks, "--out", out, "--k", 3, "--init", "perturbed", "--scale", 1.0,
            "--iterations", 15, "--tol", 0, "--chunk-tasks", 2_000, "--checkpoint", ckpt]
    k = _kill_after_a_random_commit(args, ckpt, 2, 11, client)  # commit k: iteration k
    reference = fit_em(tasks, 3, init="perturbed", scale=1.0, iterations=15, tol=0,
                       chunk_tasks=2_000, client=client)
    got = open_result(out)
    np.testing.assert_array_equal(got.log_likelihood, reference.log_likelihood,
                                  err_msg=f"killed after commit {k}")
    np.testing.assert_array_equal(got.coef, reference.coef)


def test_a_study_killed_at_a_random_point_resumes_to_the_same_tables(tmp_path, client):
    from streamlsq.studies import run_study

    out, ckpt = tmp_path / "study", tmp_path / "ckpt"
    args = ["study", "bfgs", "--quick", "--streams", 100, "--out", out, "--checkpoint", ckpt]
    k = _kill_after_a_random_commit(args, ckpt, 2, 6, client)  # 8 batches of 25 streams
    reference = run_study("bfgs", tmp_path / "reference", quick=True, streams=100,
                          client=client)
    for name, table in reference.tables.items():
        pd.testing.assert_frame_equal(pd.read_csv(out / f"{name}.csv"),
                                      pd.read_csv(tmp_path / "reference" / f"{name}.csv"),
                                      obj=f"{name}.csv, killed after commit {k}")
        assert len(table)
    assert not ckpt.exists() and leftovers(out) == []
