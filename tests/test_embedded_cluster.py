"""Which workers the embedded cluster gets: threads of this process for small inputs and
for scripts that worker processes would re-run, processes otherwise."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import dask
import pytest

from streamlsq.cli.common import _stores_bytes
from streamlsq.errors import InputError
from streamlsq.runtime.client import dask_client, embedded_workers


@pytest.fixture
def auto():
    with dask.config.set({"streamlsq.embedded-workers": "auto"}):
        yield


def test_auto_decides_from_the_size_and_the_options(auto):
    assert embedded_workers(10**6) == "threads"
    assert embedded_workers(2**30 + 1) == "processes"
    assert embedded_workers(None) == "processes"  # unknown size: as before
    assert embedded_workers(10**6, n_workers=2) == "processes"
    assert embedded_workers(10**6, memory_limit="1GB") == "processes"
    with dask.config.set({"streamlsq.in-process-bytes": 100}):
        assert embedded_workers(10**6) == "processes"


def test_a_stream_fit_on_few_cores_gets_threads_whatever_its_size(auto, monkeypatch):
    import streamlsq.runtime.client as runtime_client

    for cores, kind in ((1, "threads"), (2, "threads"), (3, "processes"), (64, "processes")):
        monkeypatch.setattr(runtime_client, "CPU_COUNT", cores)
        assert embedded_workers(2**40, threads_keep_up=True) == kind
        assert embedded_workers(None, threads_keep_up=True) == kind
        assert embedded_workers(2**40) == "processes"  # a job not measured on threads
        # a memory limit, or a number of workers, is per process
        assert embedded_workers(2**40, n_workers=2, threads_keep_up=True) == "processes"
    monkeypatch.setattr(runtime_client, "CPU_COUNT", 8)
    with dask.config.set({"streamlsq.in-process-cores": 8}):
        assert embedded_workers(2**40, threads_keep_up=True) == "threads"
    with dask.config.set({"streamlsq.in-process-cores": -1}), \
            pytest.raises(InputError, match="in-process-cores"):
        embedded_workers(2**40, threads_keep_up=True)


def test_the_config_forces_either_kind():
    for kind in ("threads", "processes"):
        with dask.config.set({"streamlsq.embedded-workers": kind}):
            assert embedded_workers(10**12) == kind == embedded_workers(1)
    with dask.config.set({"streamlsq.embedded-workers": "gpus"}), \
            pytest.raises(InputError, match="embedded-workers"):
        embedded_workers(1)


def test_a_small_input_gets_an_in_process_cluster(auto, monkeypatch):
    import streamlsq.runtime.client as runtime_client

    monkeypatch.setattr(runtime_client, "_default_client", lambda: None)  # another test's
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask_client(data_bytes=10**6) as client:
        workers = client.scheduler_info()["workers"]
        assert all(a.startswith("inproc://") for a in workers)
        assert client.submit(sum, [1, 2]).result() == 3


def _imported(name: str) -> bool:
    return name in sys.modules


def test_worker_processes_import_the_preloaded_modules_as_they_start(monkeypatch):
    import streamlsq.runtime.client as runtime_client

    monkeypatch.setattr(runtime_client, "_default_client", lambda: None)  # another test's
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    module = "streamlsq.kernels.recursions.kf4lls"
    with dask_client(n_workers=1, preload=(module,)) as client:
        assert all(client.run(_imported, module).values())


SCRIPT = """
from streamlsq.runtime.client import embedded_workers
print("top", embedded_workers(None))

def from_a_function():
    return embedded_workers(None)

if __name__ == "__main__":
    print("guarded", from_a_function(), embedded_workers(10**12))
else:
    print("re-imported")
"""


def test_a_script_without_a_main_guard_gets_threads(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # outside the guard, worker processes would re-run the script: threads; inside it,
    # large or unknown inputs get processes
    assert run.stdout.split("\n")[:2] == ["top threads", "guarded processes processes"]
    code = "from streamlsq.runtime.client import embedded_workers; print(embedded_workers())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.strip() == "processes"  # python -c is never re-run by a worker
    run = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.strip() == "threads"  # '<stdin>' cannot be re-imported


def test_store_bytes_come_from_the_metadata(tmp_path):
    import numpy as np
    import zarr

    g = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=3)
    g.create_array("X", shape=(1000, 4), chunks=(100, 4), dtype="float64")
    g.create_group("a").create_array("y", shape=(1000,), dtype="float32")[...] = np.ones(1000)
    assert _stores_bytes(str(tmp_path / "s.zarr")) == 1000 * 4 * 8 + 1000 * 4
    assert _stores_bytes([str(tmp_path / "s.zarr") + "#a", None]) == 1000 * 4 * 8 + 1000 * 4
    assert _stores_bytes(str(tmp_path / "missing.zarr")) is None


_ALLOCATOR = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "OMP_NUM_THREADS",
              "PYTHONHASHSEED")


def _environ_of_the_worker() -> dict:
    import os

    return {k: os.environ.get(k) for k in _ALLOCATOR}


def test_an_embedded_cluster_of_processes_leaves_the_environment_as_it_found_it(monkeypatch):
    """distributed's nanny writes its pre-spawn variables (MALLOC_TRIM_THRESHOLD_,
    OMP_NUM_THREADS, PYTHONHASHSEED...) into the starting process's os.environ, at the
    start and at each worker restart; every process spawned later would inherit them.
    The embedded cluster's workers get them; this process keeps its own."""
    import os

    import streamlsq.runtime.client as runtime_client

    monkeypatch.setattr(runtime_client, "_default_client", lambda: None)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    for name in _ALLOCATOR:
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    with dask_client(n_workers=1) as client:
        assert dict(os.environ) == before  # while the cluster runs, too
        (seen,) = client.run(_environ_of_the_worker).values()
        client.restart()  # the nanny writes its variables again
        (again,) = client.run(_environ_of_the_worker).values()
    assert dict(os.environ) == before
    expected = {k: str(v) for k, v in runtime_client.WORKER_MALLOC.items()}
    assert {k: seen[k] for k in expected} == expected == {k: again[k] for k in expected}
    assert seen["OMP_NUM_THREADS"] == "1"


def test_a_users_allocator_setting_reaches_the_embedded_workers(monkeypatch):
    import streamlsq.runtime.client as runtime_client

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1234567")
    assert "MALLOC_MMAP_THRESHOLD_" not in runtime_client.embedded_worker_environ()
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 999}):
        monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
        environ = runtime_client.embedded_worker_environ()
        assert environ["MALLOC_TRIM_THRESHOLD_"] == 999
        assert "MALLOC_MMAP_THRESHOLD_" not in environ
