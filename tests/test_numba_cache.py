"""Numba's compiled kernels are cached on disk (``cache=True``) and loaded, not compiled
again, by the next process: a command or a worker process that runs a compiled kernel pays
its compilation once per installation, not once per process."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys

import streamlsq.kernels

RUN = """
import numpy as np
from streamlsq.kernels import KF4LLS, LMS, block_edges
from streamlsq.kernels.recursions import givens, lms

rng = np.random.default_rng(0)
X, Y = rng.standard_normal((60, 3)), rng.standard_normal((60, 1))
rec = KF4LLS(ridge=1.0)  # blocks of one row: the compiled Givens rotations
rec.fold(rec.init(3, 1), X, Y, block_edges(60, 1), 1, 10)
rec = LMS(rate=0.01)
rec.fold(rec.init(3, 1), X, Y, block_edges(60, 10), 1, 1)
for kernel in (givens.givens_kernel, lms._lms_loop):
    print(sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values()))
"""


def _dispatchers():
    from numba.core.dispatcher import Dispatcher

    for info in pkgutil.walk_packages(streamlsq.kernels.__path__, "streamlsq.kernels."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, Dispatcher) and obj.__module__ == module.__name__:
                yield f"{info.name}.{name}", obj


def test_every_compiled_kernel_is_cached_on_disk():
    kernels = dict(_dispatchers())
    assert len(kernels) >= 10
    uncached = [name for name, d in kernels.items() if type(d._cache).__name__ == "NullCache"]
    assert uncached == []


def test_the_next_process_loads_the_compiled_kernels_from_the_cache(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr
        return [tuple(map(int, line.split())) for line in out.stdout.split("\n") if line]

    first = run()
    assert all(hits + misses >= 1 for hits, misses in first)  # each kernel ran
    second = run()
    assert all(hits >= 1 and misses == 0 for hits, misses in second), second


NO_NUMBA = """
import sys
import numpy as np
from streamlsq.kernels import KF4LLS, block_edges

rng = np.random.default_rng(0)
X, Y = rng.standard_normal((5_000, 3)), rng.standard_normal((5_000, 1))
rec = KF4LLS()
result = rec.fold(rec.init(3, 1), X, Y, block_edges(5_000, 1_000), 1, 1)
assert np.isfinite(result.diagnostics["normalized_variance"]).all()
print("numba" in sys.modules, len(result.steps))
"""


def test_a_fit_by_block_qr_never_starts_numba():
    """Blocks of more than GIVENS_MAX_ROWS rows are folded by block QR and their variances
    come from LAPACK: such a fit (the command line's default) imports no Numba, whose
    import and first call cost a process about a third of a second."""
    out = subprocess.run([sys.executable, "-c", NO_NUMBA], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "5"]
