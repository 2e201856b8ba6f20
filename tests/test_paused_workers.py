"""A run on workers that stay paused at their memory limit stops with a clear error.

distributed pauses a worker at 80% of its memory limit and starts nothing on it
until the memory drops; memory it does not manage (here: an array a worker
holds, as a leak would) never drops, and a run would wait for ever. The workers
here are really paused by their own memory monitor, not mocked.
"""

from __future__ import annotations

import logging
import time
import uuid

import dask
import numpy as np
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

from streamlsq import fit_stream
from streamlsq.cli.main import main
from streamlsq.errors import WorkersPausedError
from streamlsq.runtime import memory
from streamlsq.runtime.client import dask_client, paused_watch

from conftest import write_stream

LIMIT = 1e9  # well above a worker's libraries, which take 250-350 MB


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def _hold(nbytes, dask_worker=None):
    dask_worker._streamlsq_test_hold = np.ones(max(0, int(nbytes)) // 8)


def _release(dask_worker):
    dask_worker.__dict__.pop("_streamlsq_test_hold", None)


def _statuses(client):
    return {w["status"] for w in client.scheduler_info()["workers"].values()}


def _wait_for(client, status, seconds=20):
    deadline = time.monotonic() + seconds
    while _statuses(client) != {status}:
        assert time.monotonic() < deadline, f"workers never became {status}: {_statuses(client)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def small_cluster():
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit=LIMIT,
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster) as client:
        yield client


@pytest.fixture
def paused(small_cluster):
    client = small_cluster
    rss = next(iter(client.run(_rss).values()))
    client.run(_hold, 0.88 * LIMIT - rss)
    _wait_for(client, "paused")
    yield client
    client.run(_release)
    _wait_for(client, "running")


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2_000, 3))
    return write_stream(tmp_path / "s.zarr", X, X @ np.ones((3, 1)), chunk_rows=500)


def test_fit_on_paused_workers_stops_with_the_reason(paused, store, tmp_path):
    started = time.monotonic()
    with dask.config.set({"streamlsq.paused-timeout": 3}), \
            pytest.raises(WorkersPausedError, match=r"all 1 Dask workers have been paused at "
                          r"their memory limit .* of 1000 MB, 0 MB of it data dask manages"):
        fit_stream(store, client=paused, progress=False, out=tmp_path / "fit.zarr")
    assert time.monotonic() - started < 30
    assert not (tmp_path / "fit.zarr").exists()
    assert not paused.futures  # the run's tasks were cancelled, none left behind


def test_cli_reports_paused_workers_in_one_line(paused, store, tmp_path):
    with dask.config.set({"streamlsq.paused-timeout": 3}):
        result = CliRunner().invoke(main, [
            "fit", "kf4lls", str(store), "--out", str(tmp_path / "fit.zarr"),
            "--scheduler", paused.scheduler.address,
        ])
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1
    assert "paused at their memory limit" in result.output
    assert not (tmp_path / "fit.zarr").exists()


def _hold_then_release(nbytes, seconds):
    hold = np.ones(int(nbytes) // 8)
    time.sleep(seconds)
    return int(hold.size)


def test_a_paused_worker_still_executing_is_not_stopped(small_cluster):
    client = small_cluster
    rss = next(iter(client.run(_rss).values()))
    with dask.config.set({"streamlsq.paused-timeout": 1}), dask_client(client) as cl:
        fut = cl.submit(_hold_then_release, 0.88 * LIMIT - rss, 6, pure=False)
        _wait_for(cl, "paused")  # paused while its one task runs on
        assert fut.result() > 0
    _wait_for(client, "running")


def test_the_watch_can_be_turned_off(paused):
    with dask.config.set({"streamlsq.paused-timeout": 0}), paused_watch(paused):
        fut = paused.submit(sum, [1, 2], pure=False)
        time.sleep(3)
        assert fut.status == "pending"
        paused.cancel([fut])


def _keep_pages(nbytes):
    """Touch and free ``nbytes`` on the heap of the worker's main arena with glibc's trim
    threshold raised, as the reads of fast_large_allocations do: pages the worker keeps,
    which distributed counts as its memory and cannot spill."""
    memory._LIBC.mallopt(memory._M_TRIM_THRESHOLD, 2**31 - 1)
    memory._LIBC.mallopt(memory._M_MMAP_THRESHOLD, 1 << 30)
    pages = np.ones(max(0, int(nbytes)) // 8)
    del pages


@pytest.mark.skipif(memory._LIBC is None, reason="kept pages are a glibc matter")
def test_a_worker_paused_by_kept_pages_gives_them_back_and_the_fit_ends(small_cluster, store):
    """The pages a worker's reads kept are memory distributed cannot spill: the worker
    stayed paused for ever (a robust pass on 450 MB workers hung so). The watch asks a
    paused, idle worker to give them back; it resumes and the fit finishes."""
    client = small_cluster
    rss = next(iter(client.run(_rss).values()))
    try:
        client.run(_keep_pages, 0.88 * LIMIT - rss)
        _wait_for(client, "paused")
        with dask.config.set({"streamlsq.paused-timeout": 60}):
            ds = fit_stream(store, client=client, progress=False)
        np.testing.assert_allclose(ds.coef.isel(step=-1).values[:, 0], 1.0, rtol=1e-12)
        assert _statuses(client) == {"running"}
        assert next(iter(client.run(_rss).values())) < 0.5 * LIMIT
    finally:
        client.run(memory._default_thresholds)
    _wait_for(client, "running")


def _grow_and_keep(nbytes, next_key):
    """A task that leaves its worker holding ``nbytes`` (as a leak would) and ends, once
    the task ``next_key`` is on the same worker (a paused worker is sent nothing new)."""
    from distributed import get_worker

    worker = get_worker()
    deadline = time.monotonic() + 20
    while next_key not in worker.state.tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    worker._streamlsq_test_hold = np.ones(max(0, int(nbytes)) // 8)
    time.sleep(0.5)
    return next_key in worker.state.tasks


def test_a_run_held_by_one_paused_worker_stops_while_the_other_idles():
    """A paused worker keeps the tasks already sent to it, and no other worker takes them:
    with nothing running anywhere the run waited for ever. It is stopped, naming the
    paused worker's memory."""
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=LIMIT,
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster) as client:
        held, idle = sorted(client.scheduler_info()["workers"])
        rss = client.run(_rss, workers=[held])[held]
        started = time.monotonic()
        with dask.config.set({"streamlsq.paused-timeout": 3}), \
                pytest.raises(WorkersPausedError, match=r"^1 of 2 Dask workers, holding tasks "
                              r"of the run, have been paused at their memory limit .*\(\d+ MB "
                              r"of 1000 MB, 0 MB of it data dask manages\)"), \
                paused_watch(client):
            key = f"after-{uuid.uuid4().hex}"
            grow = client.submit(_grow_and_keep, 0.88 * LIMIT - rss, key, workers=[held],
                                 pure=False)
            after = client.submit(sum, [1, 2], workers=[held], key=key)
            assert grow.result()
            after.result()
        assert time.monotonic() - started < 30
        workers = client.scheduler_info()["workers"]
        assert (workers[held]["status"], workers[idle]["status"]) == ("paused", "running")


READ_AHEAD_SCRIPT = """
import numpy as np, psutil
from streamlsq.runtime.memory import fast_large_allocations, read_ahead_pool
rss = lambda: psutil.Process().memory_info().rss
def read(n):  # a chunk read ahead: 16 MB decoded, every page touched
    return np.ones(n)
def task(n):  # a task's reads: six chunks read ahead in two threads, then freed
    with fast_large_allocations():
        pool = read_ahead_pool(2)
        chunks = [f.result() for f in [pool.submit(read, n) for _ in range(6)]]
        del chunks
task(1_000)  # the imports and the threads' arenas, before the baseline
before = rss()
task(2_000_000)
print(rss() - before)
"""


def test_the_pages_of_the_read_ahead_threads_are_given_back():
    """The sequential engine reads chunks ahead in threads of their own, whose glibc arenas
    keep the pages of those chunks while the mmap threshold is raised (and ``malloc_trim``
    leaves the top of a thread's arena). Outside a worker the block gives them back as it
    ends, by a probe in each of those threads: without it, 64-96 MB of the 96 MB stayed
    (the CI failure of test_table_memory.py: 600 MB workers that stayed paused)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", READ_AHEAD_SCRIPT], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert int(out.split()[-1]) < 16e6, out


def _arrow_pages_kept_then_given_back(n_arrays: int, values: int):
    """In a Dask task: Arrow buffers made and freed in a read-ahead thread (as the
    sequential engine's reads of a Parquet file decode row groups there), then the
    worker's RSS before and after ``release_pages`` from the task's thread."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def decode():
        base = pa.array(np.zeros(values))
        arrays = [pc.add(base, float(i)) for i in range(n_arrays)]  # Arrow's own pool
        assert pa.total_allocated_bytes() >= n_arrays * values * 8
        del arrays

    memory.read_ahead_pool(1).submit(decode).result()
    before = _rss()
    memory.release_pages()
    return before, _rss()


def test_arrow_pages_are_given_back_from_a_tasks_thread(small_cluster):
    """Arrow's allocator (mimalloc) keeps freed pages in a heap per thread, which only
    that thread, or the process's main thread, can give back: asked from the thread of a
    task that read a Parquet file, it kept them (55 MB of a 600 MB worker after a
    sequential fit: the CI failure of test_table_memory.py, workers paused at 483-489 MB
    with nothing to spill). ``release_pages`` asks in each read-ahead thread, and on the
    worker's event loop, which runs on its main thread."""
    before, after = small_cluster.submit(_arrow_pages_kept_then_given_back, 8, 2_000_000,
                                         pure=False).result()
    assert before - after > 64e6, (before, after)  # of the 128 MB the buffers took
