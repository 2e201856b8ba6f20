"""Fast large allocations inside data-reading tasks (glibc only; a no-op elsewhere).

distributed starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` so that freed
memory goes back to the OS promptly. A side effect in glibc: with that variable
set, the mmap threshold stops adapting, so every buffer above 128 KiB is a fresh
``mmap`` whose pages are faulted in and zeroed, then unmapped on ``free``.
Decoding a 25 MB Zarr chunk makes several such buffers; measured on this
project's stores, reading ran 2–3.5× slower in a worker than in a plain process.

While a task streams chunks we raise the mmap and trim thresholds so the heap
reuses the same pages; afterwards we restore the thresholds and call
``malloc_trim(0)``, handing the memory back as distributed intends.

The decoding runs in zarr's own threads (the default executor of zarr's event
loop), and glibc gives each thread an arena of its own. ``malloc_trim`` returns
the free pages inside every arena but not the free top of a thread arena: only
a large ``free`` in that arena does. Without more, each decoder thread kept a
few chunks' worth of pages for good (about 180 MB per worker for 10 MB chunks,
measured; enough to pause a 600 MB worker for ever). So on leaving, after the
thresholds are back, a small probe is allocated and freed in this thread and in
each of zarr's decoder threads, which trims their arenas; tests/test_memory_bound.py
checks that the workers end where they started. Measured on a 1.34 GB store with
2 GB workers (best of 4, seconds): sequential 2.0 (1.8 when pages were kept, 3.1
without any of this), scan 2.1 (1.7, 2.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import threading

__all__ = ["fast_large_allocations"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DEFAULT_MMAP = 128 * 1024
#: a free of this size (>= glibc's FASTBIN_CONSOLIDATION_THRESHOLD, < the mmap
#: threshold) makes glibc trim the top of the freeing thread's arena
_TRIM_PROBE = 96 * 1024
_lock = threading.Lock()
_depth = 0


def _libc():
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
        return lib if lib is not None and hasattr(lib, "mallopt") else None
    except OSError:
        return None


_LIBC = _libc()
if _LIBC is not None:
    _LIBC.malloc.restype = ctypes.c_void_p
    _LIBC.free.argtypes = [ctypes.c_void_p]


def _probe(barrier=None):
    _LIBC.free(_LIBC.malloc(_TRIM_PROBE))
    if barrier is not None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=0.5)


def _trim_decoder_arenas():
    """One probe in each of zarr's decoder threads (the default executor of zarr's event
    loop, whose threads asyncio names ``asyncio_N``); the barrier keeps one thread from
    taking two probes."""
    n = sum(t.name.startswith("asyncio_") for t in threading.enumerate())
    if not n:
        return
    try:
        from zarr.core.sync import sync
    except ImportError:
        return
    barrier = threading.Barrier(n)

    async def probes():
        await asyncio.gather(*(asyncio.to_thread(_probe, barrier) for _ in range(n)))

    with contextlib.suppress(Exception):
        sync(probes())


@contextlib.contextmanager
def fast_large_allocations(threshold: int = 1 << 30):
    """Keep buffers up to ``threshold`` bytes on the heap for the duration of the block."""
    global _depth
    if _LIBC is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _LIBC.mallopt(_M_MMAP_THRESHOLD, threshold)
            _LIBC.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                trim = int(os.environ.get("MALLOC_TRIM_THRESHOLD_", _DEFAULT_MMAP))
                _LIBC.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP)
                _LIBC.mallopt(_M_TRIM_THRESHOLD, trim)
                _probe()  # this thread's arena
                _trim_decoder_arenas()
                _LIBC.malloc_trim(0)
