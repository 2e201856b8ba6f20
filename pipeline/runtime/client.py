"""Getting a Dask client: a running scheduler when named, else an embedded LocalCluster.

Order of precedence: an explicit ``client``; an explicit ``scheduler`` address;
the ``DASK_SCHEDULER_ADDRESS`` environment variable; a client that is already
the default in this process (a notebook user's ``Client(...)``); otherwise a
new :class:`distributed.LocalCluster` that lives only as long as the ``with``
block.

A worker that reaches 80% of its memory limit is *paused* by distributed: it
starts no new task until its memory drops, and the tasks already sent to it wait there
(no other worker takes them). When the memory is not data that distributed manages (it
cannot spill it), the pause can last forever and a run would wait forever. Inside
:func:`dask_client`, a watch thread handles it:

- a paused worker with nothing executing is asked to give back the memory pages its
  reads kept (:func:`streamlsq.runtime.memory.release_pages`, at most every
  ``RELEASE_EVERY`` seconds): these are most of such memory, and the worker resumes
  (measured: a 450 MB worker paused at 365 MB went to 296 MB and the run finished);
- when nothing executes anywhere while paused workers hold the run (every worker
  paused, or a paused worker holding tasks) for ``streamlsq.paused-timeout`` seconds
  (dask config, default 120; 0 turns the watch off), the futures created during the
  block are cancelled and :class:`~streamlsq.errors.WorkersPausedError` is raised with
  the paused workers' memory.

The same watch stops a run that has no live worker: when no worker has stayed
alive for ``streamlsq.no-workers-timeout`` seconds (default 60; 0 turns it off) —
all of them died and none came back, a scheduler without workers, or workers that
die as they start (a memory limit below what a worker needs) — the run's futures are
cancelled and :class:`~streamlsq.errors.ClusterError` says so. A scheduler that
cannot be reached within ``streamlsq.connect-timeout`` seconds (default 30), or
that is lost during the run, and tasks whose workers kept dying (``KilledWorker``)
end the block with a :class:`~streamlsq.errors.ClusterError` too: one line, never a
traceback or a wait for ever (``docs/faults.md``).

Reading tasks keep the memory pages of their reads for the next read, unless
their worker is short of memory (see :mod:`streamlsq.runtime.memory`). When the block ends
on a cluster that lives on, one small task per worker gives them back, so the
workers end where they started.

The embedded cluster's workers (:func:`embedded_workers`, dask config
``streamlsq.embedded-workers``: ``auto``, ``processes`` or ``threads``) are, in ``auto``:

- threads of this process when worker processes would re-run the caller's code: a
  plain script without an ``if __name__ == "__main__":`` guard around the call (spawned
  processes re-import the ``__main__`` module, which would start a cluster of its own
  and fail: "Nanny failed to start");
- processes when ``n_workers`` or ``memory_limit`` is given (a memory limit is per
  process);
- threads when the caller says how many bytes it will read (``data_bytes``) and they
  are at most ``streamlsq.in-process-bytes`` (default 1 GiB): starting worker processes
  and importing the kernels in each costs 3–4 s, more than such data take to compute;
- threads when Dask counts at most ``streamlsq.in-process-cores`` cores (default 2) and
  the caller's tasks run as fast on threads (the stream fits): each worker process would
  start an interpreter and import the kernels on a core the command itself needs
  (``docs/performance.md#embedded-cluster``);
- processes otherwise (large or unknown inputs on more cores): no shared GIL, one memory
  limit each.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dask
from dask.system import CPU_COUNT
from distributed import Client, Future, LocalCluster

from streamlsq.errors import ClusterError, InputError, RunError, WorkersPausedError, checked
from streamlsq.kernels.recursions.params import Param
from streamlsq.runtime.memory import release_pages

__all__ = ["SETTINGS", "check_address", "check_memory_limit", "check_temporary_directory",
           "cluster_failure", "dask_client", "embedded_worker_environ", "embedded_workers",
           "paused_watch", "release_worker_pages", "setting", "spawn_would_rerun_caller"]

#: seconds a run may stall on paused workers with nothing executing before it is stopped
PAUSED_TIMEOUT = 120.0
#: seconds between two requests that a paused, idle worker give back its kept pages
RELEASE_EVERY = 5.0
#: seconds a run may go without a live worker before it is stopped
NO_WORKERS_TIMEOUT = 60.0
#: seconds to reach a scheduler named by address
CONNECT_TIMEOUT = 30.0
#: a worker counts as alive once it has been seen for this long (workers in a restart
#: loop appear and vanish within a few seconds)
STABLE_WORKER = 5.0
#: bytes of input up to which the embedded cluster runs its workers as threads of this
#: process (dask config ``streamlsq.in-process-bytes``)
IN_PROCESS_BYTES = 2**30
#: cores (``dask.system.CPU_COUNT``) up to which the embedded cluster runs its workers as
#: threads of this process whatever the input's size (dask config
#: ``streamlsq.in-process-cores``)
IN_PROCESS_CORES = 2
#: distributed's default ``MALLOC_TRIM_THRESHOLD_`` for worker processes
DISTRIBUTED_TRIM_THRESHOLD = 65536
#: glibc's allocator settings of the embedded cluster's worker processes, in place of
#: distributed's default (measured: ``docs/performance.md#allocator``)
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 64 * 2**20, "MALLOC_TRIM_THRESHOLD_": 128 * 2**20}


def _setting_param(name: str, default, help: str, **bounds) -> Param:
    variable = "DASK_" + name.upper().replace(".", "__").replace("-", "_")
    return Param(name, default, help, label=f"the dask config {name} ({variable})", **bounds)


#: the dask config values of streamlsq (``docs/faults.md``), each checked when a run starts
SETTINGS = {
    "streamlsq.paused-timeout": _setting_param(
        "streamlsq.paused-timeout", PAUSED_TIMEOUT, "Seconds a run may stall on workers "
        "paused at their memory limit, with nothing running (0: no limit).", ge=0),
    "streamlsq.no-workers-timeout": _setting_param(
        "streamlsq.no-workers-timeout", NO_WORKERS_TIMEOUT, "Seconds a run may go without a "
        "live worker (0: no limit).", ge=0),
    "streamlsq.connect-timeout": _setting_param(
        "streamlsq.connect-timeout", CONNECT_TIMEOUT, "Seconds to reach a named scheduler.",
        gt=0),
    "streamlsq.in-process-bytes": _setting_param(
        "streamlsq.in-process-bytes", IN_PROCESS_BYTES, "Bytes of input up to which the "
        "embedded cluster's workers are threads.", ge=0),
    "streamlsq.in-process-cores": _setting_param(
        "streamlsq.in-process-cores", IN_PROCESS_CORES, "Cores of the machine up to which the "
        "embedded cluster's workers are threads, whatever the input's size.", ge=0),
    "streamlsq.task-bytes": _setting_param(
        "streamlsq.task-bytes", 0, "Bytes of data one Dask task of a parallel pass reads (0: "
        "sized from the data and the workers).", ge=0),
}


def setting(name: str) -> float:
    """The dask config value ``name`` of :data:`SETTINGS`, checked (one line naming the
    setting and its environment variable otherwise: an :class:`InputError`). Durations may
    be given as dask writes them ("90s", "2 minutes"), sizes as "1GiB"; ``None`` turns a
    timeout off (0)."""
    from dask.utils import parse_bytes, parse_timedelta

    param = SETTINGS[name]
    value = dask.config.get(name, param.default)
    if value is None:
        value = param.default if name == "streamlsq.connect-timeout" else 0
    if isinstance(value, str):
        try:
            value = parse_bytes(value) if name.endswith("-bytes") else \
                parse_timedelta(value, default="seconds")
        except (ValueError, TypeError, KeyError):
            pass  # refused below, as given
    return checked(param, value)


def check_temporary_directory() -> None:
    """Refuse a dask ``temporary-directory`` (``DASK_TEMPORARY_DIRECTORY``) where the embedded
    cluster's workers cannot keep their scratch space: not a folder, or no folder that can
    be written on its way (distributed creates the missing ones)."""
    folder = dask.config.get("temporary-directory", None)
    if not folder:
        return
    path = Path(os.path.expanduser(str(folder)))
    existing = next((p for p in (path, *path.parents) if os.path.lexists(p)), None)
    reason = None
    if existing is None or not existing.is_dir():
        reason = "not a folder" if existing == path else f"{existing} is not a folder"
    else:
        try:  # a file made and removed: permissions, a read-only or full filesystem
            tempfile.TemporaryFile(dir=existing).close()
        except OSError as exc:
            reason = f"{existing} cannot be written ({exc.strerror})"
    if reason is not None:
        raise InputError(f"the dask config temporary-directory (DASK_TEMPORARY_DIRECTORY) "
                         f"{folder}: {reason}; the embedded cluster's workers keep their "
                         "scratch space there: set it to a folder you can write, or unset it")


def check_address(address: str) -> None:
    """Refuse a scheduler address distributed cannot connect to at all (no protocol it
    knows, no host and port), before a client is made: one line at once, rather than a
    client that fails and then waits a minute to close."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address)
        if scheme not in registry.backends:
            raise ValueError(f"unknown protocol {scheme!r}; known: "
                             f"{', '.join(sorted(registry.backends))}")
        if scheme != "inproc":
            parse_host_port(loc)
    except ValueError as exc:
        raise InputError(f"--scheduler (DASK_SCHEDULER_ADDRESS) {address}: not the address of "
                         f"a Dask scheduler ({exc}); write it as tcp://HOST:PORT") from None


@contextlib.contextmanager
def dask_client(
    client: Client | None = None,
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | float | None = None,
    data_bytes: int | None = None,
    preload: tuple[str, ...] = (),
    threads_keep_up: bool = False,
) -> Iterator[Client]:
    """Yield a connected :class:`distributed.Client` watched by :func:`paused_watch`; close
    only what this call opened.

    ``data_bytes``: how many bytes the block will read, when known; an embedded cluster
    for small inputs runs its workers as threads of this process (:func:`embedded_workers`).
    ``preload``: modules the embedded cluster's worker processes import as they start (the
    kernels of the block's tasks), while this process is still busy, rather than when the
    first task arrives (worker threads share this process's modules; a running cluster's
    workers are left as they are; not with a ``memory_limit``, which preloading could
    exceed before the cluster is up). ``threads_keep_up``: the block's tasks run as fast
    on worker threads as on worker processes (:func:`embedded_workers`).

    Examples
    --------
    >>> from streamlsq import dask_client
    >>> with dask_client() as client:  # the current client, or a LocalCluster for this block
    ...     n = len(client.scheduler_info()["workers"])
    >>> n >= 1
    True
    """
    for name in SETTINGS:  # a bad setting is one line before a cluster is touched
        setting(name)
    with _connect(client, scheduler, n_workers, threads_per_worker, memory_limit,
                  data_bytes, preload, threads_keep_up) as (c, own):
        try:
            with paused_watch(c):
                yield c
        except (InputError, RunError, WorkersPausedError):
            raise
        except Exception as exc:
            failure = cluster_failure(exc, c)
            if failure is None:
                raise
            raise failure from None
        if not own:  # a cluster that lives on: its workers give back what the reads kept
            release_worker_pages(c)


def cluster_failure(exc: BaseException, client: Client | None = None) -> ClusterError | None:
    """The one-line error for a run the cluster could not carry, or None when ``exc`` is
    something else: a lost scheduler, tasks whose workers kept dying (KilledWorker)."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    address = getattr(getattr(client, "scheduler", None), "address", None) or "?"
    if isinstance(exc, KilledWorker):
        key = getattr(exc, "task", None) or (exc.args[0] if exc.args else "?")
        return ClusterError(
            f"the workers running Dask task {key!s} died each time it was tried "
            "(KilledWorker): a worker ran out of memory or crashed; give the workers more "
            "memory (--memory-limit) or read less per Dask task (fit's --segment-size)")
    lost = "scheduler-connection-lost" in str(getattr(exc, "reason", "") or exc)
    # a closed comm may reach the caller before the client has noticed the loss itself
    if isinstance(exc, FutureCancelledError) and lost or isinstance(exc, CommClosedError) or \
            client is not None and getattr(client, "status", "running") != "running":
        return ClusterError(
            f"lost the connection to the Dask scheduler at {address} during the run "
            f"({type(exc).__name__}); nothing was written: restart the scheduler and run the "
            "command again (with --resume if it has --checkpoint)")
    return None


def release_worker_pages(client: Client, timeout: float = 10.0) -> None:
    """One small task per worker returns the memory pages its reads kept for the next
    read (:func:`streamlsq.runtime.memory.release_pages`). Best effort: a worker busy for
    longer than ``timeout`` seconds, or gone, is skipped, and a finished run never
    fails here."""
    futures = []
    try:
        tag = uuid.uuid4().hex[:8]
        futures = [
            client.submit(release_pages, workers=[w], allow_other_workers=False, pure=False,
                          key=f"release-pages-{tag}-{i}")
            for i, w in enumerate(client.scheduler_info()["workers"])
        ]
        deadline = time.monotonic() + timeout
        for f in futures:
            f.result(timeout=max(0.0, deadline - time.monotonic()))
    except Exception:
        with contextlib.suppress(Exception):
            client.cancel(futures)


@contextlib.contextmanager
def _connect(client, scheduler, n_workers, threads_per_worker, memory_limit, data_bytes=None,
             preload=(), threads_keep_up=False):
    """Yield (client, whether this call started the cluster)."""
    if client is not None:
        yield client, False
        return
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        check_address(address)
        timeout = setting("streamlsq.connect-timeout")
        try:
            c = Client(address, set_as_default=False, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {address} within "
                               f"{timeout:.0f} s ({type(exc).__name__}); start it, or check "
                               "--scheduler / DASK_SCHEDULER_ADDRESS") from None
        try:
            yield c, False
        finally:
            _close(c)
        return
    existing = _default_client()
    if existing is not None:
        yield existing, False
        return
    if n_workers is not None:
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise InputError(f"--workers must be a positive integer, got {n_workers!r}")
    if memory_limit is not None:
        check_memory_limit(memory_limit)
    kind = embedded_workers(data_bytes, n_workers=n_workers, memory_limit=memory_limit,
                            threads_keep_up=threads_keep_up)
    # workers' own log lines would bury the one-line error a user should see
    kwargs = {"processes": kind == "processes", "dashboard_address": ":0",
              "silence_logs": logging.CRITICAL}
    for key, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker),
                       ("memory_limit", memory_limit)):
        if value is not None:
            kwargs[key] = value
    if kind == "processes" and preload and memory_limit is None:
        # a worker that outgrows a small given limit while preloading would be restarted
        # for ever before the cluster is up (and watched): such workers import on first use
        kwargs["preload"] = list(preload)
    check_temporary_directory()
    with contextlib.ExitStack() as stack:
        if kind == "threads":
            # the worker threads are the parallelism: one BLAS thread each, as distributed
            # gives worker processes (OMP/OPENBLAS/MKL_NUM_THREADS=1), not one per core each
            stack.enter_context(_one_blas_thread())
        else:
            # the nanny writes its pre-spawn variables into this process's os.environ
            # (again at each worker restart); the last callback to run puts it back
            saved = dict(os.environ)
            stack.callback(_restore_environ, saved)
        try:
            with dask.config.set({"distributed.nanny.pre-spawn-environ":
                                  embedded_worker_environ()}):
                cluster = stack.enter_context(LocalCluster(**kwargs))
        except RuntimeError as exc:  # "Cluster failed to start: ..."
            raise ClusterError(f"the embedded Dask cluster could not start ({_first_line(exc)})"
                               "; check the dask config (temporary-directory, ports) or name "
                               "a running scheduler with --scheduler") from None
        if kind == "processes":  # the workers are up: the caller's process as it was
            _restore_environ(saved)
        c = stack.enter_context(Client(cluster, set_as_default=False))
        try:
            yield c, True
        finally:
            if kind == "threads":  # the reads kept their pages in this very process
                release_pages()
            elif c.status == "running":
                with contextlib.suppress(Exception):
                    c.run(_quiet_shutdown)


def embedded_worker_environ() -> dict:
    """The dask config ``distributed.nanny.pre-spawn-environ`` the embedded cluster's
    worker processes start with: the config's own (one BLAS thread each, a user's values
    kept), with glibc's allocator settings of :data:`WORKER_MALLOC` in place of
    distributed's ``MALLOC_TRIM_THRESHOLD_=65536`` unless the user's config or
    environment changed it (``docs/performance.md#allocator``)."""
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    if str(environ.get("MALLOC_TRIM_THRESHOLD_")) == str(DISTRIBUTED_TRIM_THRESHOLD) and \
            not any(k in os.environ for k in WORKER_MALLOC):
        environ.update(WORKER_MALLOC)
    return environ


def _restore_environ(saved: dict) -> None:
    """Put ``os.environ`` back to ``saved``: the variables added since removed, the ones
    changed or removed set again."""
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@contextlib.contextmanager
def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def embedded_workers(data_bytes: int | None = None, *, n_workers: int | None = None,
                     memory_limit=None, threads_keep_up: bool = False) -> str:
    """``"threads"`` or ``"processes"``: the workers an embedded LocalCluster gets.

    The dask config ``streamlsq.embedded-workers`` (``auto``, ``processes``, ``threads``)
    decides when it is not ``auto``. In ``auto``: threads when worker processes would
    re-run the caller's code (:func:`spawn_would_rerun_caller`); processes when
    ``n_workers`` or ``memory_limit`` is given; threads when ``data_bytes`` is known and
    at most ``streamlsq.in-process-bytes`` (default 1 GiB); threads when the caller's tasks
    run as fast on threads (``threads_keep_up``: the stream fits) and Dask counts at most
    ``streamlsq.in-process-cores`` cores (default 2); processes otherwise.

    Examples
    --------
    >>> import dask
    >>> from streamlsq.runtime.client import embedded_workers
    >>> with dask.config.set({"streamlsq.embedded-workers": "auto"}):
    ...     embedded_workers(10**6), embedded_workers(10**6, n_workers=2)
    ('threads', 'processes')
    """
    chosen = str(dask.config.get("streamlsq.embedded-workers", "auto") or "auto").lower()
    if chosen in ("threads", "processes"):
        return chosen
    if chosen != "auto":
        raise InputError("the dask config streamlsq.embedded-workers must be auto, processes "
                         f"or threads, got {chosen!r}")
    if spawn_would_rerun_caller():
        return "threads"
    if n_workers is not None or memory_limit is not None:
        return "processes"
    limit = setting("streamlsq.in-process-bytes")
    if data_bytes is not None and data_bytes <= limit:
        return "threads"
    if threads_keep_up and CPU_COUNT <= setting("streamlsq.in-process-cores"):
        # each worker process would start an interpreter and import the kernels on a core
        # the command needs itself (docs/performance.md#embedded-cluster)
        return "threads"
    return "processes"


def spawn_would_rerun_caller() -> bool:
    """Would a worker process started now re-run the code that is running this call?

    distributed starts worker processes with multiprocessing's ``spawn`` (or
    ``forkserver``), which re-imports the ``__main__`` module in each new process. A
    script whose top level calls streamlsq outside an ``if __name__ == "__main__":``
    block would then call it again in every worker, start a cluster there and fail.
    True when ``__main__`` is a file that would be re-imported (not an interactive
    session, a notebook or ``python -c``; not a ``package.__main__`` module, which
    multiprocessing does not re-import) and the line of its top level being executed
    by the main thread is not inside such a guard (or cannot be read)."""
    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork":
        return False
    main = sys.modules.get("__main__")
    if main is None:
        return False
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return False
    path = getattr(main, "__file__", None)
    if path is None:
        return name is not None  # a module run by name without a file: assume re-run
    line = _main_top_level_line(main)
    return line is None or not _inside_main_guard(path, line)


def _main_top_level_line(main) -> int | None:
    """The line of ``main``'s top level that the main thread is executing, if it is."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    namespace = vars(main)
    found = None
    while frame is not None:
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            found = frame.f_lineno  # the outermost one wins
        frame = frame.f_back
    return found


def _inside_main_guard(path: str, line: int) -> bool:
    """Is ``line`` of the file ``path`` in the body of a top-level
    ``if __name__ == "__main__":``?"""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test) and node.body:
            if node.body[0].lineno <= line <= (node.body[-1].end_lineno or line):
                return True
    return False


def _is_main_test(test) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def check_memory_limit(value):
    """A memory limit distributed understands, checked here so that a typo is one line."""
    from dask.utils import parse_bytes

    try:
        limit = parse_bytes(value) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise InputError(f"--memory-limit must be a size such as 2GB, got {value!r}") from None
    if not limit > 0 or limit != limit:
        raise InputError(f"--memory-limit must be a positive size such as 2GB, got {value!r}")
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _quiet_shutdown() -> None:
    """Run on an embedded cluster's workers as it closes: asyncio's notices of the sessions
    a library left open ("Unclosed client session": s3fs keeps an aiohttp session per
    filesystem and cannot close it once the worker's event loop has stopped) are not
    printed on the stderr the workers share with the command."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)


def _close(client: Client) -> None:
    """Close a client; one whose scheduler is gone is not waited for (it would retry the
    connection for the whole connect timeout)."""
    if client.status not in ("running", "newly-created"):
        with contextlib.suppress(Exception):
            client.close(timeout=2)
        return
    client.close()


def _default_client() -> Client | None:
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client has been created in this process
        return None


@contextlib.contextmanager
def paused_watch(client: Client, timeout: float | None = None, poll: float = 2.0):
    """Stop the work of the block when it stalls on paused workers (:func:`_stalled`);
    meanwhile ask paused, idle workers to give back their kept pages.

    After ``timeout`` seconds (default: dask config ``streamlsq.paused-timeout``, else
    120) of a stall, the futures created inside the block are cancelled, so whatever
    waits on them returns, and :class:`WorkersPausedError` replaces the cancellation
    error when it leaves the block.
    """
    if timeout is None:
        timeout = setting("streamlsq.paused-timeout")
    no_workers = setting("streamlsq.no-workers-timeout")
    if timeout <= 0 and no_workers <= 0:
        yield
        return
    active = [t for t in (timeout, no_workers) if t > 0]
    watch = _PausedWatch(client, timeout, min(poll, *active), no_workers)
    watch.start()
    try:
        yield
    except BaseException:
        if watch.error is not None:
            raise watch.error from None
        raise
    finally:
        watch.stop()
    if watch.error is not None:  # the block swallowed the cancellation: still say why
        raise watch.error


class _PausedWatch(threading.Thread):
    def __init__(self, client: Client, timeout: float, poll: float, no_workers: float = 0.0):
        super().__init__(name="streamlsq-paused-watch", daemon=True)
        self.client, self.timeout, self.poll = client, timeout, poll
        self.no_workers = no_workers
        self.before = set(client.futures)
        self.error: WorkersPausedError | ClusterError | None = None
        self._done = threading.Event()
        self._seen: dict[str, float] = {}  # worker address -> when first seen
        self._gone = 0
        self._alive_at = time.monotonic()  # last time a worker counted as alive
        self._released: dict[str, float] = {}  # worker address -> when last asked to release

    def stop(self):
        self._done.set()
        self.join()

    def _halt(self, error):
        self.error = error
        keys = set(self.client.futures) - self.before
        self.client.cancel([Future(k, self.client) for k in keys], msg=str(self.error))

    def _no_live_worker(self, workers: dict, now: float) -> bool:
        """Track workers; True when none has stayed alive for ``no_workers`` seconds."""
        current = {a for a, w in workers.items() if w.get("status") in ("running", "paused")}
        self._gone += len(set(self._seen) - current)
        self._seen = {a: self._seen.get(a, now) for a in current}
        stable = min(STABLE_WORKER, self.no_workers / 2)
        if any(now - t >= stable for t in self._seen.values()):
            self._alive_at = now
            return False
        # A worker first seen at this poll gets one chance to prove itself stable: on a
        # loaded machine the first poll can come later than the timeout itself, and a
        # worker that was running all along must not count as none.
        fresh = any(t == now for t in self._seen.values())
        return now - self._alive_at >= self.no_workers + (stable if fresh else 0.0)

    def run(self):
        since = None
        while not self._done.wait(self.poll):
            try:
                workers = self.client.scheduler_info(n_workers=-1)["workers"]
            except Exception:  # closing or reconnecting: nothing to judge
                since = None
                continue
            now = time.monotonic()
            if self.no_workers > 0 and self._no_live_worker(workers, now):
                died = (f"{self._gone} worker(s) joined and died meanwhile" if self._gone
                        else "none joined, or the workers died as they started")
                self._halt(ClusterError(
                    f"no Dask worker alive for {self.no_workers:.0f} s ({died}; is the memory "
                    "limit below what a worker needs, about 300 MB?); the run was "
                    "stopped and nothing was written: start workers (--workers N for the "
                    "embedded cluster) and run the command again (with --resume if it has "
                    "--checkpoint)"))
                return
            if self.timeout <= 0:
                continue
            self._release_idle_paused(workers, now)
            if not _stalled(workers):
                since = None
                continue
            since = now if since is None else since
            if now - since >= self.timeout:
                self._halt(WorkersPausedError(_paused_message(workers, now - since)))
                return

    def _release_idle_paused(self, workers: dict, now: float) -> None:
        """Ask each paused worker with nothing executing to give back the pages its reads
        kept, at most every ``RELEASE_EVERY`` seconds (best effort, not waited for)."""
        due = [a for a, w in workers.items()
               if w.get("status") == "paused" and not _task_counts(w).get("executing", 0)
               and now - self._released.get(a, -RELEASE_EVERY) >= RELEASE_EVERY]
        if due:
            self._released.update(dict.fromkeys(due, now))
            with contextlib.suppress(Exception):
                self.client.run(_release_pages_in_a_thread, workers=due, wait=False)


async def _release_pages_in_a_thread() -> None:
    # client.run(wait=False) takes coroutines only; the worker's event loop goes on meanwhile
    await asyncio.to_thread(release_pages)


def _task_counts(worker: dict) -> dict:
    return worker.get("metrics", {}).get("task_counts", {})


def _stalled(workers: dict) -> bool:
    """Nothing executes anywhere while paused workers hold the run: every worker is
    paused, or a paused worker holds tasks ready to run (which no other worker takes)."""
    if not workers or any(_task_counts(w).get("executing", 0) for w in workers.values()):
        return False
    paused = [w for w in workers.values() if w.get("status") == "paused"]
    return len(paused) == len(workers) or any(_task_counts(w).get("ready", 0) for w in paused)


def _paused_message(workers: dict, seconds: float) -> str:
    def mb(v):
        return f"{v / 1e6:.0f} MB"

    paused = [w for w in workers.values() if w.get("status") == "paused"]
    memory = "; ".join(
        f"{mb(w['metrics']['memory'])} of {mb(w['memory_limit'])}, "
        f"{mb(w['metrics'].get('managed_bytes', 0))} of it data dask manages"
        for w in paused
    )
    which = (f"all {len(workers)} Dask workers have" if len(paused) == len(workers) else
             f"{len(paused)} of {len(workers)} Dask workers, holding tasks of the run, have")
    return (
        f"{which} been paused at their memory limit for {seconds:.0f} s with nothing "
        f"running ({memory}); the run was stopped. Give the workers more memory "
        "(--memory-limit, or the cluster's worker options) or read less per Dask task "
        "(fit's --segment-size)"
    )
