"""What every synthetic store shares: the checks of its layout, and its chunks written in
parallel, one Dask task per chunk.

A chunk's writer is a function ``writer(path, *args)`` that generates the chunk's rows from
a pure generator of :mod:`streamlsq.kernels.synthetic` (its numbers depend on the seed and
the row index only) and writes them into the store at ``path``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from streamlsq.options import Options
from streamlsq.options.common import STORE
from streamlsq.runtime.client import dask_client
from streamlsq.runtime.progress import track_futures

__all__ = ["checked_options", "chunk_ranges", "write_chunks"]


def checked_options(options: Options, given: Mapping) -> dict:
    """The options of a ``simulate_*`` function (``options``: what the store is made of,
    :mod:`streamlsq.options.simulate`, and :data:`~streamlsq.options.common.STORE`) from
    its keywords ``given`` (its ``locals()``), checked and converted
    (:meth:`~streamlsq.options.Options.check`: one line naming the first bad one) before
    anything is written or a client started."""
    declared = options + STORE
    return declared.check({name: given[name] for name in declared.names})


def chunk_ranges(n: int, size: int) -> list[tuple[int, int]]:
    """``range(n)`` cut into consecutive (start, stop) of ``size`` (the last one may be
    shorter)."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def write_chunks(path: str, writer: Callable, chunk_args: Sequence[tuple], *, name: str,
                 rows: int, data_bytes: int, client=None, scheduler: str | None = None,
                 progress: bool | None = None, desc: str = "simulate") -> list:
    """Run ``writer(path, *args)`` for every chunk's ``args``, one Dask task each; returns
    their results in chunk order.

    ``client``, ``scheduler``: the cluster (default: an embedded one sized for
    ``data_bytes``, the bytes the store will hold); ``rows``: the rows all chunks write,
    for the progress bar ``desc``; ``name`` goes into the Dask tasks' keys.
    """
    tag = uuid.uuid4().hex[:6]
    with dask_client(client, scheduler, data_bytes=data_bytes) as cl:
        futures = [cl.submit(writer, path, *args, pure=False, key=f"simulate-{name}-{tag}-{i}")
                   for i, args in enumerate(chunk_args)]
        return track_futures(cl, futures, total=rows, desc=desc, unit="rows", enabled=progress)
