"""What every synthetic store shares: the checks of its layout, and its chunks written in
parallel, one Dask task per chunk, as a job of the run path (:class:`SyntheticStore`: the
run opens the client, builds the store under a temporary name and publishes it complete).

A chunk's writer is a function ``writer(path, *args)`` that generates the chunk's rows from
a pure generator of :mod:`streamlsq.kernels.synthetic` (its numbers depend on the seed and
the row index only) and writes them into the store at ``path``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import xarray as xr
import zarr

from streamlsq.io.results import published
from streamlsq.jobs import Context, Job, Run
from streamlsq.options import Options
from streamlsq.options.common import STORE
from streamlsq.runtime.progress import track_futures

__all__ = ["SyntheticStore", "checked_options", "chunk_ranges", "write_chunks"]


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


def write_chunks(ctx: Context, writer: Callable, chunk_args: Sequence[tuple], *, name: str,
                 rows: int, desc: str = "simulate") -> list:
    """Run ``writer(ctx.store, *args)`` for every chunk's ``args``, one Dask task each on
    ``ctx.client``; returns their results in chunk order. ``rows``: the rows all chunks
    write, for the progress bar ``desc``; ``name`` goes into the Dask tasks' keys."""
    tag = uuid.uuid4().hex[:6]
    futures = [ctx.submit(writer, ctx.store, *args, pure=False,
                          key=f"simulate-{name}-{tag}-{i}")
               for i, args in enumerate(chunk_args)]
    return track_futures(ctx.client, futures, total=rows, desc=desc, unit="rows",
                         enabled=ctx.progress)


@dataclass(eq=False)
class SyntheticStore(Job):
    """A synthetic store, written by a run (:meth:`streamlsq.jobs.Run.execute`) chunk by
    chunk into its temporary store and published complete.

    ``lay_out(group)`` creates the store's attributes and arrays (the small ones written);
    ``writer(store, *args)`` is the Dask task that fills one chunk, for every ``args`` of
    ``chunk_args``; ``finish(group, results)`` (optional) writes what the chunks' results
    give. ``rows``: the rows all chunks write (progress); ``nbytes``: the bytes the store
    holds (an embedded cluster is sized for them); ``name``: the kind of store.
    """

    lay_out: Callable
    writer: Callable
    chunk_args: Sequence[tuple]
    rows: int
    nbytes: int
    name: str = "simulate"
    finish: Callable | None = None
    desc: str = "simulate"

    writes_chunks = True

    def open(self, run: Run) -> list:
        return []  # generated, not read

    def data_bytes(self) -> int:
        return self.nbytes

    def annotate(self, result, provenance: dict, run: dict) -> None:
        """None: a data store is not a result (a ``method`` attribute marks a result), its
        attributes are the generator's."""

    def published(self, out, storage_options: dict | None):
        return published(out, storage_options)

    def compute(self, ctx: Context) -> xr.Dataset:
        group = zarr.open_group(ctx.store, mode="w", zarr_format=3)
        self.lay_out(group)
        results = write_chunks(ctx, self.writer, self.chunk_args, name=self.name,
                               rows=self.rows, desc=self.desc)
        if self.finish is not None:
            self.finish(group, results)
        return xr.Dataset()
