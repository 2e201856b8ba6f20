"""Fast large allocations inside data-reading tasks (glibc only; a no-op elsewhere).

distributed starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` so that freed
memory goes back to the OS promptly. A side effect in glibc: with that variable
set, the mmap threshold stops adapting, so every buffer above 128 KiB is a fresh
``mmap`` whose pages are faulted in and zeroed, then unmapped on ``free``.
Decoding a 25 MB Zarr chunk makes several such buffers; measured on this
project's stores, reading ran 2–3.5× slower in a worker than in a plain process.

While a Dask task streams chunks we raise the mmap and trim thresholds so the heap
reuses the same pages; afterwards we restore the thresholds and call
``malloc_trim(0)``, handing the memory back as distributed intends.

Kept pages are what makes the next read fast, and also memory the worker holds
that distributed does not manage. The policy:

- on leaving, the pages are kept for the next read, unless the worker's memory
  is above distributed's *target* share of its limit (60%; it pauses at 80%),
  in which case they are given back at once;
- when a streamlsq call ends on a cluster that lives on, one small task per
  worker gives them back (``streamlsq.runtime.client.release_worker_pages``), so the
  workers end where they started (tests/test_memory_bound.py checks both).

Giving back takes more than ``malloc_trim(0)``: the decoding runs in zarr's own
threads (the default executor of zarr's event loop), glibc gives each thread an
arena, and ``malloc_trim`` does not shrink the free top of a thread arena; only a
large ``free`` in that arena does. :func:`release_pages` therefore allocates and
frees a small probe in this thread and in each of zarr's decoder threads. Before
this, each decoder thread kept a few chunks' worth of pages for good (about
180 MB per worker for 10 MB chunks), which paused a 600 MB worker for ever.
The same holds for the threads that read chunks ahead of a task: they are kept for the
life of the process (:func:`read_ahead_pool`; threads that ended with their task left
arenas no probe could reach), and probed too. Arrow's own allocator (mimalloc) keeps the
pages of decoded Parquet row groups in a heap per thread, which only that thread or the
process's main thread can give back: each probe asks for its thread's, and the worker's
event loop (on its main thread) for the rest. Measured on two 600 MB
workers fitting a 640 MB Parquet file (tests/test_table_memory.py) with distributed's
settings, a worker idle after the sequential fit held 447-499 MB when the read-ahead
threads ended with each task (the pause is at 480 MB: such a worker stayed paused), 371 MB
once their arenas were trimmed, and about 313 MB with Arrow's pages given back (180 MB of
it the libraries the worker had imported); asked only from the task's thread, Arrow
kept about 55 MB of that (397 MB idle: the CI once had two workers paused at 483-489 MB),
asked as now, 340-357 MB.

Measured on a 1.34 GB store (7,000,000 × 24, 10 MB chunks), two workers, default
task sizes, best of 4 (seconds): with 2 GB workers, sequential 1.9 and scan 1.6
(1.8 and 1.7 when pages were kept for good; 3.1 and 2.3 without any of this);
with 600 MB workers, where every task gives its pages back, 2.1 and 2.2.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

__all__ = ["fast_large_allocations", "read_ahead_pool", "release_pages"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DEFAULT_MMAP = 128 * 1024
#: a free of this size (>= glibc's FASTBIN_CONSOLIDATION_THRESHOLD, < the mmap
#: threshold) makes glibc trim the top of the freeing thread's arena
_TRIM_PROBE = 96 * 1024
_lock = threading.Lock()
_depth = 0
_read_pool: ThreadPoolExecutor | None = None  # :func:`read_ahead_pool`
_read_threads = 0  # its size
#: seconds a thread waits for the worker's event loop to give Arrow's pages back
_MAIN_THREAD_WAIT = 2.0


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
    _release_arrow_heap()
    if barrier is not None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=0.5)


def _trim_decoder_arenas():
    """One probe in each of zarr's decoder threads (the default executor of zarr's event
    loop, whose threads asyncio names ``asyncio_N``); the barrier keeps one thread from
    taking two probes."""
    n = sum(t.name.startswith(("asyncio_", "zarr_pool")) for t in threading.enumerate())
    n = min(n, 32, (os.cpu_count() or 1) + 4)  # at most the executor's size
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


def release_pages() -> None:
    """Give the pages kept by earlier reads back to the system: a probe in this thread,
    in each of zarr's decoder threads and in each read-ahead thread, then
    ``malloc_trim(0)``, then Arrow's pages on the main thread (glibc only)."""
    if _LIBC is None:
        return
    with _lock:
        if _depth == 0:  # otherwise a read is under way and will decide on leaving
            _release()


def _release():
    _probe()  # this thread's arena
    _trim_decoder_arenas()
    _trim_read_arenas()
    _LIBC.malloc_trim(0)
    _release_arrow_on_the_main_thread()


def read_ahead_pool(per_task: int) -> ThreadPoolExecutor:
    """The threads of this process that read chunks ahead of the task folding them (the
    sequential engine's, :func:`~streamlsq.stream.engines.fold_segment`): ``per_task``
    for each task that can run at once here (each thread of this Dask worker; each core
    outside one). They live as long as the process: the pages their glibc arenas keep
    serve the next task's reads, and :func:`release_pages` can reach them (a thread that
    has ended leaves its arena, and the pages in it, where no probe reaches)."""
    global _read_pool, _read_threads
    try:
        from distributed import get_worker

        tasks = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        tasks = os.cpu_count() or 1
    threads = max(1, per_task) * max(1, tasks)
    with _lock:
        if _read_threads < threads:
            if _read_pool is not None:  # its threads end once their reads are done
                _read_pool.shutdown(wait=False)
            _read_pool = ThreadPoolExecutor(threads, thread_name_prefix="streamlsq_read")
            _read_threads = threads
        return _read_pool


def _trim_read_arenas():
    """One probe in each thread of :func:`read_ahead_pool` (idle when pages are given
    back: no read is under way); the barrier keeps one thread from taking two probes."""
    pool = _read_pool
    n = len(getattr(pool, "_threads", ()))
    if not n:
        return
    barrier = threading.Barrier(n)
    probes = [pool.submit(_probe, barrier) for _ in range(n)]
    wait(probes, timeout=2.0)


def _release_arrow_heap():
    """Arrow's allocator (mimalloc or jemalloc in pyarrow's wheels) keeps the pages of the
    Parquet row groups a table read decoded, in a heap per thread: give back this
    thread's, when pyarrow is loaded."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        with contextlib.suppress(Exception):
            pa.default_memory_pool().release_unused()


def _release_arrow_on_the_main_thread():
    """Arrow's pages of the threads no probe reaches (Arrow's own decoding threads):
    mimalloc gives those back only when asked from the process's main thread. Measured on
    a 600 MB worker after a sequential fit of a 640 MB Parquet file: 397 MB before and
    after asking from a Dask task's thread, 342 MB after asking from the worker's main
    thread. From another thread the call is made on the Dask worker's event loop, which
    runs on the main thread of a worker process, and waited for (at most
    ``_MAIN_THREAD_WAIT`` seconds)."""
    if "pyarrow" not in sys.modules:
        return
    loop = None if _on_main_thread_or_a_loop() else _worker_loop()
    if loop is None:
        _release_arrow_heap()
        return
    done = threading.Event()

    def release_and_tell():
        try:
            _release_arrow_heap()
        finally:
            done.set()

    try:
        loop.add_callback(release_and_tell)
    except Exception:  # the loop is closing
        return
    done.wait(_MAIN_THREAD_WAIT)


def _on_main_thread_or_a_loop() -> bool:
    """Is this the main thread, or a thread running an event loop (which must not wait
    for a callback it would itself have to run)?"""
    if threading.current_thread() is threading.main_thread():
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _worker_loop():
    """The event loop of this process's Dask worker (a tornado IOLoop), or None outside
    a worker."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.get_worker().loop
    except (ValueError, AttributeError):
        workers = list(getattr(distributed.Worker, "_instances", ()))
        return workers[0].loop if len(workers) == 1 else None


def _default_thresholds() -> None:
    """The mmap and trim thresholds the process was started with (glibc's 128 KiB when
    its environment names none)."""
    _LIBC.mallopt(_M_MMAP_THRESHOLD, int(os.environ.get("MALLOC_MMAP_THRESHOLD_", _DEFAULT_MMAP)))
    _LIBC.mallopt(_M_TRIM_THRESHOLD, int(os.environ.get("MALLOC_TRIM_THRESHOLD_", _DEFAULT_MMAP)))


def _memory_is_tight() -> bool:
    """In a Dask worker: is its memory above distributed's target share of its limit
    (where it starts spilling; the pause comes at 80%)? Outside a worker: yes, give back."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return True
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return False
    import dask
    import psutil

    target = dask.config.get("distributed.worker.memory.target", 0.6) or 0.6
    return psutil.Process().memory_info().rss > target * limit


@contextlib.contextmanager
def fast_large_allocations(threshold: int = 1 << 30):
    """Keep buffers up to ``threshold`` bytes on the heap for the duration of the block.

    On leaving, the pages are kept for the next read unless the worker's memory is
    tight (:func:`_memory_is_tight`); :func:`release_pages` gives them back later.
    """
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
                _default_thresholds()
                if _memory_is_tight():
                    _release()
