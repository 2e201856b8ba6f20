"""Getting a Dask client: a running scheduler when named, else an embedded LocalCluster.

Order of precedence: an explicit ``client``; an explicit ``scheduler`` address;
the ``DASK_SCHEDULER_ADDRESS`` environment variable; a client that is already
the default in this process (a notebook user's ``Client(...)``); otherwise a
new :class:`distributed.LocalCluster` that lives only as long as the ``with``
block.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from distributed import Client, LocalCluster

__all__ = ["dask_client"]


@contextlib.contextmanager
def dask_client(
    client: Client | None = None,
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | float | None = None,
) -> Iterator[Client]:
    """Yield a connected :class:`distributed.Client`; close only what this call opened."""
    if client is not None:
        yield client
        return
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        with Client(address, set_as_default=False) as c:
            yield c
        return
    existing = _default_client()
    if existing is not None:
        yield existing
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
        yield c


def _default_client() -> Client | None:
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client has been created in this process
        return None
