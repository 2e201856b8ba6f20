"""Worker and scheduler faults on real clusters (docs/faults.md, "Cluster"): a worker killed
mid-run changes nothing; no live worker, a restart loop, a lost or unreachable scheduler and
tasks whose workers keep dying end the command with one line (exit 2) instead of a
traceback or a wait for ever, and a checkpointed run resumes after a scheduler restart."""

from __future__ import annotations

import logging
import os
import signal
import time

import dask
import numpy as np
import psutil
import pytest
from distributed import Client, LocalCluster

from streamlsq import fit_stream, metalearn, open_result, simulate_mlr, simulate_stream
from streamlsq.errors import ClusterError
from streamlsq.runtime.client import dask_client

from conftest import write_stream
from faultkit import cli, commits, invoke, leftovers, refusal, snapshot, start, wait_for
from loopback import LoopbackCluster

pytestmark = pytest.mark.cluster


def _kill_busy_worker(client: Client, prefix: str, done: int = 0, ready=None,
                      timeout: float = 120.0) -> str:
    """Once ``done`` tasks whose key starts with ``prefix`` are held finished (or ``ready()``
    is true), SIGKILL a worker that is running one of them (its nanny starts a new one);
    returns its address."""
    pids = client.run(os.getpid)

    def finished(dask_scheduler, prefix=prefix):
        return sum(1 for k, ts in dask_scheduler.tasks.items()
                   if str(k).startswith(prefix) and ts.state == "memory")

    def busy():
        if ready is not None and not ready():
            return None
        if done and client.run_on_scheduler(finished) < done:
            return None
        for addr, keys in client.processing().items():
            if addr in pids and any(str(k).startswith(prefix) for k in keys):
                return addr
        return None

    addr = wait_for(busy, timeout=timeout, poll=0.005, what=f"a worker running {prefix}*")
    os.kill(pids[addr], signal.SIGKILL)
    return addr


def _in_background(fn, *args, **kwargs):
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(fn, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


@pytest.fixture(scope="module")
def lb_client(loopback_address):
    with Client(loopback_address) as c:
        yield c


@pytest.fixture(scope="module")
def slow_stream(tmp_path_factory, lb_client):
    path = tmp_path_factory.mktemp("cluster") / "s.zarr"
    return simulate_stream(path, 60_000, 8, 1, chunk_rows=1_500, seed=3, client=lb_client)


@pytest.mark.parametrize("engine,prefix,kw", [
    ("sequential", "fold-", dict(block_size=1, record_every=250)),
    # 1,500 records to solve, over 8 tasks (every 10th row's took 40 s of the client's scan)
    ("scan", "solve-", dict(block_size=1, record_every=40)),
])
def test_a_worker_killed_mid_fit_changes_nothing(slow_stream, lb_client, tmp_path, engine,
                                                 prefix, kw):
    kw = dict(forgetting=0.999, ridge=1.0, engine=engine, segment_bytes=100_000,
              progress=False, **kw)
    reference = fit_stream(slow_stream, "rls", client=lb_client, **kw)
    ckpt = tmp_path / "ckpt"  # its commits say how far the run is
    running = _in_background(fit_stream, slow_stream, "rls", client=lb_client,
                             checkpoint=ckpt, **kw)
    _kill_busy_worker(lb_client, prefix, ready=lambda: commits(ckpt) >= 3)
    got = running.result(timeout=300)
    np.testing.assert_array_equal(got.coef, reference.coef)
    states = [name for name in reference.data_vars if name.startswith("state_")]
    assert states  # the final state of the recursion, whatever the solver
    for name in states:
        np.testing.assert_array_equal(got[name], reference[name])
    lb_client.wait_for_workers(2, timeout=60)


def test_a_worker_killed_mid_metalearn_changes_nothing(tmp_path, lb_client):
    # 88 chunks of work of 300 tasks, 8 to a Dask task (task bytes set so: sized from the
    # data alone, this small store would be one task): a worker is killed after 3 of the 11
    # subspace tasks, holding a task of several chunks of work
    tasks = simulate_mlr(tmp_path / "t.zarr", k=3, d=6, n_light=20_000, t_light=4,
                         n_heavy=150, t_heavy=60, n_light2=6_000, t_light2=8, seed=4,
                         client=lb_client)
    kw = dict(chunk_tasks=300, client=lb_client, progress=False)
    with dask.config.set({"streamlsq.task-bytes": 400_000}):
        reference = metalearn(tasks, 3, **kw)
        running = _in_background(metalearn, tasks, 3, **kw)
        _kill_busy_worker(lb_client, "subspace-", done=3)
        got = running.result(timeout=300)
    for name in ("basis", "coef", "noise_var", "weight", "light_cluster", "heavy_cluster"):
        np.testing.assert_array_equal(got[name], reference[name])
    lb_client.wait_for_workers(2, timeout=60)


def test_a_worker_killed_mid_predict_changes_nothing(tmp_path, lb_client):
    from streamlsq import predict

    tasks = simulate_mlr(tmp_path / "t.zarr", k=2, d=4, n_light=4_000, t_light=4,
                         n_heavy=100, t_heavy=60, n_light2=1_000, t_light2=10, seed=1,
                         client=lb_client)
    model = tmp_path / "m.zarr"
    metalearn(tasks, 2, out=model, client=lb_client)
    # 25 chunks of 2,000 tasks, one to a Dask task (task bytes set so: sized from the data
    # alone, this small store would be one task): a worker is killed after 10
    new = simulate_mlr(tmp_path / "n.zarr", k=2, d=4, n_light=0, n_heavy=0, n_light2=50_000,
                       t_light2=6, seed=1, task_seed=7, client=lb_client)
    kw = dict(holdout=2, chunk_tasks=2_000, client=lb_client, progress=False)
    with dask.config.set({"streamlsq.task-bytes": 1}):
        reference = predict(model, new, out=tmp_path / "ref.zarr", **kw)
        running = _in_background(predict, model, new, out=tmp_path / "p.zarr", **kw)
        _kill_busy_worker(lb_client, "predict-", done=10)
        running.result(timeout=300)
    got = open_result(tmp_path / "p.zarr")
    np.testing.assert_array_equal(got.coef, reference.coef)
    assert got.attrs["holdout_mse"] == reference.attrs["holdout_mse"]
    lb_client.wait_for_workers(2, timeout=60)


def test_a_worker_killed_mid_study_changes_nothing(tmp_path, lb_client, client):
    import pandas as pd

    from streamlsq.studies import run_study

    # 4 regression batches of 25 streams, then 4 binary ones: a worker is killed after 2
    reference = run_study("bfgs", tmp_path / "reference", quick=True, streams=100,
                          client=client)  # the tables do not depend on the cluster
    running = _in_background(run_study, "bfgs", tmp_path / "study", quick=True, streams=100,
                             client=lb_client)
    _kill_busy_worker(lb_client, "study-bfgs-regression", done=2)
    running.result(timeout=300)
    for name in reference.tables:
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "study" / f"{name}.csv"),
                                      pd.read_csv(tmp_path / "reference" / f"{name}.csv"))
    lb_client.wait_for_workers(2, timeout=60)


def _kill_tree(pid: int) -> None:
    """SIGKILL a loopback process (a worker's nanny) and its children at once."""
    proc = psutil.Process(pid)
    for p in [*proc.children(recursive=True), proc]:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


FIT = ["fit", "rls", "--forgetting", "0.999", "--ridge", "1.0", "--block-size", "1",
       "--record-every", "250", "--segment-size", "0.1"]


def test_no_live_worker_stops_the_run_after_the_stated_time(slow_stream, tmp_path):
    out, ckpt = tmp_path / "r.zarr", tmp_path / "ckpt"
    env = dict(os.environ, DASK_STREAMLSQ__NO_WORKERS_TIMEOUT="4")
    cluster = LoopbackCluster(n_workers=1, memory_limit="1GB")
    with cluster as address:
        proc = start(cli(*FIT[:2], slow_stream, *FIT[2:], "--out", out, "--checkpoint", ckpt,
                         "--scheduler", address), env=env)
        wait_for(lambda: commits(ckpt) >= 2, proc, what="two committed segments")
        for worker in cluster.procs[1:]:  # every worker with its nanny: none comes back
            _kill_tree(worker.pid)
        started = time.monotonic()
        code = proc.wait(timeout=120)
        line = refusal(type("R", (), {"returncode": code, "stderr": proc.stderr.read()}))
        assert time.monotonic() - started < 60
        assert "no Dask worker alive for 4 s" in line and "--resume" in line
        assert not out.exists() and leftovers(out) == [] and commits(ckpt) >= 2


def test_a_lost_scheduler_stops_the_run_and_resume_continues_after_a_restart(slow_stream,
                                                                             tmp_path):
    out, ckpt = tmp_path / "r.zarr", tmp_path / "ckpt"
    args = [*FIT[:2], slow_stream, *FIT[2:], "--out", out, "--checkpoint", ckpt]
    cluster = LoopbackCluster(n_workers=1, memory_limit="1GB")
    with cluster as address:
        proc = start(cli(*args, "--scheduler", address))
        wait_for(lambda: commits(ckpt) >= 2, proc, what="two committed segments")
        cluster.procs[0].kill()  # the scheduler
        code = proc.wait(timeout=120)
        line = refusal(type("R", (), {"returncode": code, "stderr": proc.stderr.read()}))
        assert "lost the connection to the Dask scheduler" in line and "--resume" in line
        assert not out.exists() and leftovers(out) == []
    with LoopbackCluster(n_workers=1, memory_limit="1GB") as address:  # the restart
        resumed = invoke(*args, "--resume", scheduler=address)  # in this process
        assert resumed.exit_code == 0, resumed.output
        with Client(address) as c:
            reference = fit_stream(slow_stream, "rls", forgetting=0.999, ridge=1.0,
                                   block_size=1, record_every=250, segment_bytes=104_857,
                                   client=c)
    got = open_result(out)
    np.testing.assert_array_equal(got.coef, reference.coef)
    assert not ckpt.exists()


def test_an_unreachable_scheduler_is_one_line(slow_stream, tmp_path):
    import subprocess

    env = dict(os.environ, DASK_STREAMLSQ__CONNECT_TIMEOUT="2")
    started = time.monotonic()
    result = subprocess.run(cli("fit", "kf4lls", slow_stream, "--out", tmp_path / "o.zarr",
                                "--scheduler", "tcp://127.0.0.1:9"),
                            capture_output=True, text=True, env=env, timeout=120)
    line = refusal(result)
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s" in line
    assert time.monotonic() - started < 60


def _crash():
    os._exit(1)


def test_tasks_whose_workers_keep_dying_are_one_line():
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0",
                         silence_logs=logging.CRITICAL) as cluster, Client(cluster) as c:
        with pytest.raises(ClusterError, match=r"the workers running Dask task crash-0 died "
                                               r"each time it was tried \(KilledWorker\)"):
            with dask_client(c) as cl:
                cl.submit(_crash, key="crash-0", pure=False).result()


def test_a_restart_loop_ends_with_one_line(slow_stream, tmp_path):
    import subprocess

    env = dict(os.environ, DASK_STREAMLSQ__NO_WORKERS_TIMEOUT="6")
    started = time.monotonic()
    result = subprocess.run(cli("fit", "kf4lls", slow_stream, "--out", tmp_path / "o.zarr",
                                "--memory-limit", "100MB", "--workers", "1"),
                            capture_output=True, text=True, env=env, timeout=180)
    line = refusal(result)
    # workers that die as they start leave none alive; those that live long enough to take
    # a task die with it, until the scheduler gives the task up: both are one line
    assert ("no Dask worker alive for 6 s" in line and "memory limit" in line) or \
        ("(KilledWorker)" in line and "--memory-limit" in line), line
    assert time.monotonic() - started < 90
    assert not (tmp_path / "o.zarr").exists()


# -- settings and addresses ----------------------------------------------------------------


@pytest.fixture
def small_stream(tmp_path):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((2_000, 3))
    return write_stream(tmp_path / "d.zarr", X, X @ np.ones((3, 1)), chunk_rows=500)


@pytest.mark.parametrize("name, value, requirement", [
    ("streamlsq.paused-timeout", "abc", "a finite number >= 0, got 'abc'"),
    ("streamlsq.no-workers-timeout", -5, "a finite number >= 0, got -5"),
    ("streamlsq.connect-timeout", 0, "a finite number > 0, got 0"),
    ("streamlsq.in-process-bytes", "lots", "a finite number >= 0, got 'lots'"),
])
def test_a_bad_setting_is_one_line_naming_it(small_stream, tmp_path, client, name, value,
                                            requirement):
    """Used to be "unexpected error (ValueError: could not convert string to float...)", not
    naming the setting, and -5 was taken."""
    variable = "DASK_" + name.upper().replace(".", "__").replace("-", "_")
    before = snapshot(tmp_path)
    with dask.config.set({name: value}):
        line = refusal(invoke("fit", "kf4lls", small_stream, "--out", tmp_path / "o.zarr",
                              scheduler=client.scheduler.address))
    assert f"the dask config {name} ({variable}) must be {requirement}" in line
    assert snapshot(tmp_path) == before


def test_settings_take_durations_and_sizes_as_dask_writes_them(small_stream, tmp_path):
    with dask.config.set({"streamlsq.paused-timeout": "90s", "streamlsq.in-process-bytes":
                          "1GiB", "streamlsq.no-workers-timeout": None}):
        from streamlsq.runtime.client import setting

        assert (setting("streamlsq.paused-timeout"), setting("streamlsq.in-process-bytes"),
                setting("streamlsq.no-workers-timeout")) == (90.0, 2**30, 0.0)
        ok = invoke("fit", "kf4lls", small_stream, "--out", tmp_path / "o.zarr")
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_an_unusable_temporary_directory_is_one_line(small_stream, tmp_path, where):
    """Used to be "unexpected error (RuntimeError: Cluster failed to start: ...)"."""
    import subprocess

    (tmp_path / "afile").write_text("not a folder")
    folder = tmp_path / "afile" / ("" if where == "a file" else "scratch")
    before = snapshot(tmp_path)
    env = dict(os.environ, DASK_TEMPORARY_DIRECTORY=str(folder).rstrip("/"))
    env.pop("DASK_SCHEDULER_ADDRESS", None)  # the embedded cluster
    result = subprocess.run(cli("fit", "kf4lls", small_stream, "--out", tmp_path / "o.zarr",
                                "--workers", 1), capture_output=True, text=True, env=env,
                            timeout=120)
    line = refusal(result)
    assert "the dask config temporary-directory (DASK_TEMPORARY_DIRECTORY)" in line
    assert ("not a folder" if where == "a file" else "afile is not a folder") in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("address, reason", [
    ("not a url::", "invalid address 'not a url::'"),
    ("http://127.0.0.1:1", "unknown protocol 'http'"),
    ("tcp://scheduler-host", "missing port number"),
])
def test_a_malformed_scheduler_address_is_one_line(small_stream, tmp_path, address, reason):
    """Used to wait 62 s, then print one line and a 9-line Client.__del__ traceback; a
    malformed address is refused before a client is made (refusal() asserts one line)."""
    import subprocess

    before = snapshot(tmp_path)
    result = subprocess.run(cli("fit", "kf4lls", small_stream, "--out", tmp_path / "o.zarr",
                                "--scheduler", address),
                            capture_output=True, text=True, timeout=120)
    line = refusal(result)
    assert f"--scheduler (DASK_SCHEDULER_ADDRESS) {address}: not the address of a Dask " \
           f"scheduler ({reason}" in line and "tcp://HOST:PORT" in line
    assert snapshot(tmp_path) == before
