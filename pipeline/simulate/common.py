"""What every synthetic store shares: the checks of its layout, and its chunks written in
parallel, one Dask task per chunk, as a job of the run path (:class:`SyntheticStore`: the
run opens the client, builds the store under a temporary name and publishes it complete).

A chunk's writer is a function ``writer(path, *args)`` that generates the chunk's rows from
a pure generator of :mod:`streamlsq.kernels.synthetic` (its numbers depend on the seed and
the row index only) and writes them into the store at ``path``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.codecs import check_codec
from streamlsq.io.results import published
from streamlsq.jobs import Context, Job, Run
from streamlsq.runtime.progress import track_futures

__all__ = ["SyntheticStore", "checked_chunk_size", "checked_codec", "checked_float_dtype",
           "chunk_ranges", "write_chunks"]


def checked_codec(codec: str | None, command: str) -> str:
    """The codec's name (:data:`streamlsq.io.codecs.CODECS`; None: the default), or an
    InputError naming ``command``."""
    try:
        return check_codec(codec)
    except ValueError as exc:
        raise InputError(f"{command}: {exc}") from None


def checked_chunk_size(size: int, command: str) -> int:
    """``size`` (rows or blocks per chunk) if positive, else an InputError naming ``command``."""
    if size < 1:
        raise InputError(f"{command}: chunk size must be positive, got {size}")
    return size


def checked_float_dtype(dtype, command: str) -> None:
    """Refuse (InputError naming ``command``) a dtype other than a float."""
    if np.dtype(dtype).kind != "f":
        raise InputError(f"{command}: dtype must be float32 or float64, got {dtype}")


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
    futures = [ctx.client.submit(writer, ctx.store, *args, pure=False,
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
