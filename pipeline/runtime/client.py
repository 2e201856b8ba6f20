"""Getting a Dask client: a running scheduler when named, else an embedded LocalCluster.

Order of precedence: an explicit ``client``; an explicit ``scheduler`` address;
the ``DASK_SCHEDULER_ADDRESS`` environment variable; a client that is already
the default in this process (a notebook user's ``Client(...)``); otherwise a
new :class:`distributed.LocalCluster` that lives only as long as the ``with``
block.

A worker that reaches 80% of its memory limit is *paused* by distributed: it
starts no new task until its memory drops. When the memory is not data that
distributed manages (it cannot spill it), the pause can last forever and a run
would wait forever. Inside :func:`dask_client`, a watch thread stops the run
instead: when every worker has been paused with nothing executing for
``streamlsq.paused-timeout`` seconds (dask config, default 120; 0 turns the
watch off), the futures created during the block are cancelled and
:class:`~streamlsq.errors.WorkersPausedError` is raised with the workers' memory.

Reading tasks keep the memory pages of their reads for the next read, unless
their worker is short of memory (see :mod:`streamlsq.runtime.memory`). When the block ends
on a cluster that lives on, one small task per worker gives them back, so the
workers end where they started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator

import dask
from distributed import Client, Future, LocalCluster

from streamlsq.errors import WorkersPausedError
from streamlsq.runtime.memory import release_pages

__all__ = ["dask_client", "paused_watch", "release_worker_pages"]

#: seconds every worker may stay paused with nothing executing before a run is stopped
PAUSED_TIMEOUT = 120.0


@contextlib.contextmanager
def dask_client(
    client: Client | None = None,
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | float | None = None,
) -> Iterator[Client]:
    """Yield a connected :class:`distributed.Client` watched by :func:`paused_watch`; close
    only what this call opened.

    Examples
    --------
    >>> from streamlsq import dask_client
    >>> with dask_client() as client:  # the current client, or a LocalCluster for this block
    ...     n = len(client.scheduler_info()["workers"])
    >>> n >= 1
    True
    """
    with _connect(client, scheduler, n_workers, threads_per_worker, memory_limit) as (c, own):
        with paused_watch(c):
            yield c
        if not own:  # a cluster that lives on: its workers give back what the reads kept
            release_worker_pages(c)


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
def _connect(client, scheduler, n_workers, threads_per_worker, memory_limit):
    """Yield (client, whether this call started the cluster)."""
    if client is not None:
        yield client, False
        return
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        with Client(address, set_as_default=False) as c:
            yield c, False
        return
    existing = _default_client()
    if existing is not None:
        yield existing, False
        return
    # workers' own log lines would bury the one-line error a user should see
    kwargs = {"processes": True, "dashboard_address": ":0", "silence_logs": logging.CRITICAL}
    if n_workers is not None:
        kwargs["n_workers"] = n_workers
    if threads_per_worker is not None:
        kwargs["threads_per_worker"] = threads_per_worker
    if memory_limit is not None:
        kwargs["memory_limit"] = memory_limit
    with LocalCluster(**kwargs) as cluster, Client(cluster, set_as_default=False) as c:
        yield c, True


def _default_client() -> Client | None:
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client has been created in this process
        return None


@contextlib.contextmanager
def paused_watch(client: Client, timeout: float | None = None, poll: float = 2.0):
    """Stop the work of the block when every worker stays paused with nothing executing.

    After ``timeout`` seconds (default: dask config ``streamlsq.paused-timeout``, else
    120) of that, the futures created inside the block are cancelled, so whatever
    waits on them returns, and :class:`WorkersPausedError` replaces the cancellation
    error when it leaves the block.
    """
    if timeout is None:
        timeout = float(dask.config.get("streamlsq.paused-timeout", PAUSED_TIMEOUT) or 0)
    if timeout <= 0:
        yield
        return
    watch = _PausedWatch(client, timeout, min(poll, timeout))
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
    def __init__(self, client: Client, timeout: float, poll: float):
        super().__init__(name="streamlsq-paused-watch", daemon=True)
        self.client, self.timeout, self.poll = client, timeout, poll
        self.before = set(client.futures)
        self.error: WorkersPausedError | None = None
        self._done = threading.Event()

    def stop(self):
        self._done.set()
        self.join()

    def run(self):
        since = None
        while not self._done.wait(self.poll):
            try:
                workers = self.client.scheduler_info()["workers"]
            except Exception:  # closing or reconnecting: nothing to judge
                since = None
                continue
            if not _all_paused_and_idle(workers):
                since = None
                continue
            now = time.monotonic()
            since = now if since is None else since
            if now - since >= self.timeout:
                self.error = WorkersPausedError(_paused_message(workers, now - since))
                keys = set(self.client.futures) - self.before
                self.client.cancel([Future(k, self.client) for k in keys],
                                   msg=str(self.error))
                return


def _all_paused_and_idle(workers: dict) -> bool:
    return bool(workers) and all(
        w.get("status") == "paused"
        and not w.get("metrics", {}).get("task_counts", {}).get("executing", 0)
        for w in workers.values()
    )


def _paused_message(workers: dict, seconds: float) -> str:
    def mb(v):
        return f"{v / 1e6:.0f} MB"

    memory = "; ".join(
        f"{mb(w['metrics']['memory'])} of {mb(w['memory_limit'])}, "
        f"{mb(w['metrics'].get('managed_bytes', 0))} of it data dask manages"
        for w in workers.values()
    )
    return (
        f"all {len(workers)} Dask workers have been paused at their memory limit for "
        f"{seconds:.0f} s with nothing running ({memory}); the run was stopped. Give the "
        "workers more memory (--memory-limit, or the cluster's worker options) or read less "
        "per Dask task (fit's --segment-size)"
    )
