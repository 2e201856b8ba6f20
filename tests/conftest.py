"""Shared fixtures: one real LocalCluster per test session, a loopback cluster on demand,
and small synthetic stores written by streamlsq itself."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "cluster"))

#: the files that take longest (1-4 minutes each in two processes, measured with
#: --durations=0 on 26 November 2026), run first: the suite's processes (pytest-xdist,
#: one whole file each) take the other files meanwhile, so that no long file runs alone
#: at the end (test_object_store did: 295 s of a 1,396 s run)
LONGEST_FIRST = ("test_object_store", "test_faults_cluster", "test_memory_bound",
                 "test_faults_runs", "test_timeseries_inference", "test_faults_user_files",
                 "test_inference_pipeline", "test_doctests", "test_tables", "test_kill_resume",
                 "test_studies", "test_estimators", "test_faults_property", "test_faults_stores",
                 "test_hac_panel", "test_glm")


def pytest_collection_modifyitems(config, items):
    """The files of LONGEST_FIRST first, in that order; each file's tests as they were."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


@contextlib.contextmanager
def moto_server(env=None):
    """moto's S3 server on a free loopback port, in a process of its own (sharing the test
    process, its request threads compete for the interpreter with the Dask client that
    drives the fit: a fit on S3 took twice as long); yields its endpoint."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, **(env or {})})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=60)


#: the bucket of the :func:`s3` fixture
S3_BUCKET = "streamlsq-test"


@pytest.fixture(scope="module")
def s3():
    """An S3 server on loopback (moto's, one per test module), the bucket
    :data:`S3_BUCKET`, and the storage options that reach it: (endpoint, options)."""
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with moto_server() as endpoint:
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": endpoint}}
        s3fs.S3FileSystem(**options).mkdir(S3_BUCKET)
        yield endpoint, options


def s3_filesystem(options):
    """The S3 filesystem of ``options``, its listings read afresh."""
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    fs.invalidate_cache()
    return fs


@pytest.fixture(scope="session")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
        silence_logs=logging.ERROR,
    ) as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(scope="session")
def loopback_address():
    from loopback import LoopbackCluster

    with LoopbackCluster(n_workers=2, memory_limit="2GB") as address:
        yield address


@pytest.fixture(scope="session")
def stream_200k(tmp_path_factory, client):
    """The reference store: 200,000 x 20, several chunks, one target."""
    from streamlsq import simulate_stream

    path = tmp_path_factory.mktemp("stores") / "stream200k.zarr"
    simulate_stream(path, 200_000, 20, 1, chunk_rows=27_000, seed=11, client=client)
    return path


@pytest.fixture(scope="session")
def demo(tmp_path_factory, client):
    """The demo at small sizes, run once: ``(its folder, its report, what it printed)``
    (tests/test_demo.py checks them; tests/test_faults_user_files.py replaces a copy of the
    folder, as a user reruns the demo over an earlier one)."""
    from streamlsq.studies.demo import run_demo

    out = tmp_path_factory.mktemp("demo") / "demo"
    printed: list[str] = []
    report = run_demo(out, rows=40_000, features=6, seed=3, client=client,
                      echo=printed.append, tasks=4_000)
    return out, report, "\n".join(printed)


@pytest.fixture
def cli(client):
    """``cli(*args)``: the ``streamlsq`` command line, run on the session cluster."""
    from click.testing import CliRunner

    from streamlsq.cli.main import main

    address = client.scheduler.address

    def _run(*args):
        return CliRunner().invoke(main, [*map(str, args), "--scheduler", address])

    return _run


def one_line(result) -> str:
    """The one line on stderr of a command refused with exit code 2."""
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def read_all(path):
    g = zarr.open_group(str(path), mode="r")
    X, y = g["X"][:], g["y"][:]
    return X, (y[:, None] if y.ndim == 1 else y)


def write_stream(path, X, y, chunk_rows, dims=(("sample", "feature"), ("sample", "target")),
                 attrs=None):
    """Write arrays as a stream store (used to build bad stores on purpose)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    g.attrs.update(attrs or {})
    for name, arr, d in (("X", X, dims[0]), ("y", y, dims[1])):
        a = g.create_array(name, shape=arr.shape, dtype=arr.dtype,
                           chunks=(chunk_rows,) + arr.shape[1:], dimension_names=list(d))
        a[...] = arr
    return path


def write_weighted_stream(path, X, y, w, chunk_rows=5):
    """A stream store with a precision weight per row (``w``), every chunk written (a chunk
    of zero weights too)."""
    write_stream(path, X, y, chunk_rows)
    g = zarr.open_group(str(path), mode="r+")
    g.create_array("w", shape=w.shape, chunks=(chunk_rows,), dtype="f8",
                   dimension_names=["sample"], config={"write_empty_chunks": True})[...] = w
    return path


def write_aliased_columns_store(path, rows=40, chunk_rows=5):
    """A store of variables along ``row``: x1, one (a constant), x1copy (x1 again) and y."""
    import warnings

    import xarray as xr

    rng = np.random.default_rng(1)
    x1 = rng.normal(0.01, 0.1, rows)
    cols = {"x1": x1, "one": np.ones(rows), "x1copy": x1.copy(),
            "y": 2 * x1 + rng.standard_normal(rows)}
    ds = xr.Dataset({k: ("row", v) for k, v in cols.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.chunk({"row": chunk_rows}).to_zarr(path, mode="w", zarr_format=3,
                                              consolidated=False)
    return path


def lstsq(X, Y):
    return np.linalg.lstsq(X, Y, rcond=None)[0]


def stored_notebook(name):
    """``notebooks/NAME.ipynb`` as committed, executed at quick size without errors
    (``python notebooks/make_notebooks.py``), with its outputs cleared in memory: a test
    executes it afresh and checks only what this run printed and drew, and the committed
    file is never rewritten."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code) and not any(
        o.output_type == "error" for c in code for o in c.outputs), \
        f"{name}.ipynb is stored executed; regenerate it: python notebooks/make_notebooks.py"
    for cell in code:
        cell.outputs, cell.execution_count = [], None
    return nb


class CheckpointStop(RuntimeError):
    """Raised by :func:`stop_after_commits` in place of a kill."""


@pytest.fixture
def stop_after_commits(monkeypatch):
    """``with stop_after_commits(n): fit(...)`` ends the run like a kill right after its
    n-th committed segment (client side, deterministic); the checkpoint stays behind."""
    import contextlib

    import streamlsq.stream.fit as fit_module
    from streamlsq.io.checkpoint import Checkpoint

    @contextlib.contextmanager
    def stop(n):
        class Stopping(Checkpoint):
            def save(self, i, part):
                super().save(i, part)
                if i + 1 >= n:
                    raise CheckpointStop(f"stopped after segment {i}")

        with monkeypatch.context() as m:
            m.setattr(fit_module, "Checkpoint", Stopping)
            with pytest.raises(CheckpointStop):
                yield

    return stop


@pytest.fixture
def kernel_env(tmp_path, monkeypatch, client):
    """A ``python3`` kernelspec for THIS interpreter, quick mode, and the session cluster;
    returns the folder the notebooks write into (``STREAMLSQ_STUDY_OUT``)."""
    import json

    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (streamlsq tests)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("STREAMLSQ_QUICK", "1")
    monkeypatch.setenv("STREAMLSQ_STUDY_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", client.scheduler.address)
    return tmp_path / "out"


#: the fit the re-test rounds' checkpoints are started by (``stopped_fit``)
CHECKPOINTED_FIT = dict(block_size=100, segment_bytes=2**12, progress=False)


@pytest.fixture(scope="module")
def checkpointed_rows(tmp_path_factory, client):
    """A 3,001 × 3 stream store in chunks of 500 rows, the data of ``stopped_fit``."""
    import streamlsq

    root = tmp_path_factory.mktemp("rows")
    return streamlsq.simulate_stream(root / "rows.zarr", n_rows=3_001, n_features=3,
                                     chunk_rows=500, client=client)


@pytest.fixture
def stopped_fit(checkpointed_rows, tmp_path, client, stop_after_commits):
    """The checkpoint (``tmp_path / "ck"``) of a sequential KF4LLS fit of
    ``checkpointed_rows`` stopped right after its first commit."""
    import streamlsq

    ckpt = tmp_path / "ck"
    with stop_after_commits(1):
        streamlsq.fit_stream(checkpointed_rows, "kf4lls", checkpoint=ckpt, client=client,
                             **CHECKPOINTED_FIT)
    assert (ckpt / "progress.json").exists()
    return ckpt


def groups_store(path, groups, n=300, seed=0):
    """A store of stream groups (``groups``: their paths, nested ones too), each X (n, 2)
    and y (n, 1) in chunks of 100 rows."""
    rng = np.random.default_rng(seed)
    zarr.open_group(str(path), mode="w", zarr_format=3)
    for name in groups:
        parts = name.split("/")
        for depth in range(1, len(parts)):  # the groups above it, explicitly
            zarr.open_group(str(path / "/".join(parts[:depth])), mode="a", zarr_format=3)
        X = rng.standard_normal((n, 2))
        write_stream(path / name, X, X @ np.array([[1.0], [-2.0]]) + 0.1 *
                     rng.standard_normal((n, 1)), 100)
    return path
