"""The defaults the README and the docs state are the code's.

The ninth re-test found the README's ``96 MB per scan piece`` where the code's pieces are
``PIECE_BYTES`` (32 MiB) and ``--help`` says 32, and ``docs/clusters.md`` saying the workers
use distributed's ``MALLOC_TRIM_THRESHOLD_=65536`` where the embedded cluster's start with
``WORKER_MALLOC``. Each sentence stating a default is checked here against the constant.
"""

from __future__ import annotations

import re

import pytest

from streamlsq.io.formulas import DESIGN_STATE_BYTES
from streamlsq.options.common import DEFAULT_CODEC
from streamlsq.options.fit import _SEGMENT_BYTES
from streamlsq.runtime import client, reduce
from streamlsq.stream.engines import MEMORY_SHARE, PIECE_BYTES, SEGMENT_BYTES

from conftest import ROOT


def _mib(n: int) -> str:
    return f"{n // 2**20}"


def _text(name: str) -> str:
    """The file's text with its line breaks as spaces (a sentence may span lines)."""
    return re.sub(r"\s+", " ", (ROOT / name).read_text())


def test_the_readme_states_the_codes_sizes_and_timeouts():
    readme = _text("README.md")
    assert MEMORY_SHARE == 1 / 16
    assert (f"a task reads at most a sixteenth of the smallest worker memory limit (and at "
            f"most {_mib(SEGMENT_BYTES)} MB per sequential segment, {_mib(PIECE_BYTES)} MB per "
            "scan piece; set it with `fit --segment-size`)") in readme
    assert f"with nothing running for {client.PAUSED_TIMEOUT:g} s" in readme
    assert f"A run with no live worker for {client.NO_WORKERS_TIMEOUT:g} s" in readme
    assert client.IN_PROCESS_BYTES == 2**30 and "for inputs up to 1 GiB" in readme
    assert DEFAULT_CODEC == "blosc-lz4" and "the stores streamlsq writes use Blosc-LZ4" in readme


def test_the_help_of_segment_size_states_the_codes_sizes():
    assert (f"sequential {_mib(SEGMENT_BYTES)}; scan sized from the data and the workers, in "
            f"pieces of {_mib(PIECE_BYTES)}; at most a sixteenth of the smallest worker memory "
            "limit") in _SEGMENT_BYTES.help


def test_the_docs_state_the_codes_sizes_and_timeouts():
    clusters = _text("docs/clusters.md")
    assert f"piece (up to {_mib(PIECE_BYTES)} MiB of X" in clusters
    assert f"segment at most {_mib(SEGMENT_BYTES)} MiB" in clusters
    assert client.IN_PROCESS_BYTES == 2**30 and "(default 1 GiB," in clusters
    malloc = client.WORKER_MALLOC
    assert (f"start instead with `MALLOC_MMAP_THRESHOLD_` "
            f"{_mib(malloc['MALLOC_MMAP_THRESHOLD_'])} MiB and `MALLOC_TRIM_THRESHOLD_` "
            f"{_mib(malloc['MALLOC_TRIM_THRESHOLD_'])} MiB") in clusters
    performance = _text("docs/performance.md")
    assert (f"sequential segment folds up to {_mib(SEGMENT_BYTES)} MiB of X; the scan engine "
            f"summarises pieces of up to {_mib(PIECE_BYTES)} MiB") in performance
    assert reduce.MOST_TASK_BYTES == 2 * 2**30
    assert (f"as make {reduce.TASKS_PER_WORKER} tasks per worker thread, at least "
            f"{_mib(reduce.LEAST_TASK_BYTES)} MiB and at most 2 GiB of data each") in performance


@pytest.mark.parametrize("setting, value", [
    ("no-workers-timeout", f"{client.NO_WORKERS_TIMEOUT:g} s"),
    ("connect-timeout", f"{client.CONNECT_TIMEOUT:g} s"),
    ("paused-timeout", f"{client.PAUSED_TIMEOUT:g} s"),
    ("in-process-bytes", "1 GiB" if client.IN_PROCESS_BYTES == 2**30 else "?"),
    ("in-process-cores", f"{client.IN_PROCESS_CORES}"),
    ("design-state-bytes", "1 GiB" if DESIGN_STATE_BYTES == 2**30 else "?"),
])
def test_the_faults_table_of_settings_states_the_codes_defaults(setting, value):
    assert f"| `streamlsq.{setting}` | {value} |" in _text("docs/faults.md")
