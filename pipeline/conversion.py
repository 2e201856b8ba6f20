"""A table written as a stream store (``streamlsq convert TABLE --out STORE.zarr``), for the
fastest repeated fits: one 1-D variable per column along ``row``, chunked, the default codec.

Numbers are stored as float64 (a missing value as NaN, which xarray and streamlsq read as
missing); strings as Zarr strings (a missing one as the empty string, as xarray writes it),
with their sorted levels (a pandas category's in its order) in the variable's ``categories``
attribute and the rows they were found over in ``categories_rows``, so that a formula reads
them without a pass until the store grows. Every chunk is written, also one of missing
values alone (zarr would leave it out, and the store would read as incomplete). One Dask
task reads the rows of one chunk of the store (from the parts of the table it overlaps) and
writes them: the table never passes through the client.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.codecs import compressors
from streamlsq.io.formulas import find_levels
from streamlsq.io.location import csv_folder_remedy
from streamlsq.io.names import look_alike
from streamlsq.io.tables import (
    ROW_DIM,
    column_of_later_files,
    forget_parts,
    is_parquet_folder_url,
    is_table,
    numbers_as_text,
    partition_note,
    read_frame,
    text_for_numbers,
)
from streamlsq.jobs import Context, Job, Run, RunOptions
from streamlsq.options.fit import CONVERT
from streamlsq.runtime.progress import track_futures

__all__ = ["TableConversion", "convert"]


def convert(data, out, *, columns=None, chunk_rows: int | None = None,
            **run: Unpack[RunOptions]) -> xr.Dataset:
    """Write the table ``data`` (Parquet or CSV files by path, glob or URL; a pandas, polars or
    dask DataFrame) as the stream store ``out``: one variable per column along ``row``.

    ``columns`` picks the columns (default: all); ``chunk_rows`` the rows of a chunk (default:
    those of the table's parts, a Parquet row group). Numbers are stored as float64 with NaN
    for a missing value, strings as strings with their levels in the attribute
    ``categories`` (a missing string as ""). A fit of the store gives the numbers a fit of the
    table gives (``fit_stream(out, formula=...)``). ``**run``: the options of the run
    (:class:`streamlsq.jobs.RunOptions`).

    Examples
    --------
    >>> import tempfile, pandas as pd, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> frame = pd.DataFrame({"y": [1.0, 2.0, 4.0, 3.0], "k": ["a", "b", "a", None]})
    >>> ds = streamlsq.convert(frame, f"{tmp.name}/t.zarr", progress=False)
    >>> ds.y.dims, ds.k.values.tolist(), ds.k.attrs["categories"]
    (('row',), ['a', 'b', 'a', ''], ['a', 'b'])
    >>> tmp.cleanup()
    """
    if out is None:
        raise InputError("convert writes a store: give --out (out=)")
    given = {name: value for name, value in locals().items() if name in CONVERT}
    return Run(out, **run).execute(TableConversion(data, **given))


def _write_chunk(rows, names: tuple, strings: frozenset, a: int, b: int, store) -> int:
    frame = read_frame(rows, names, a, b)
    g = zarr.open_group(store, mode="r+")
    for name in names:
        # every chunk written, also one of missing values alone (equal to the fill value),
        # or the store would read as incomplete (zarr's write_empty_chunks=False)
        array = g[name].with_config({"write_empty_chunks": True})
        column = frame[name]
        if name in strings:  # a missing string as xarray writes it: ""
            values = np.asarray(["" if missing else str(v) for v, missing
                                 in zip(column.to_numpy(), column.isna().to_numpy(),
                                        strict=True)], dtype=object)
        else:
            values = np.asarray(column.to_numpy(), dtype=np.float64)
        array[a:b] = values
    forget_parts()
    return b - a


def _time_kind(dtype) -> str | None:
    """'date' or 'duration' for a pandas dtype of times (datetime64, with a time zone,
    periods) or durations (timedelta64), else None."""
    import pandas as pd

    if dtype is None:
        return None
    if pd.api.types.is_datetime64_any_dtype(dtype) or isinstance(dtype, pd.PeriodDtype):
        return "date"
    if pd.api.types.is_timedelta64_dtype(dtype):
        return "duration"
    return None


#: the longest name of a variable in bytes: a folder's name on common filesystems
LONGEST_NAME = 255


def _unstorable(name: str) -> str | None:
    """Why a column's name cannot name an array of a Zarr v3 group (a node's name is a path
    segment: not empty, not ``.`` or ``..``, without ``/``, not starting with ``__``, which
    Zarr reserves; nor ``zarr.json``, the group's own file, nor longer than a file's name),
    else None."""
    if name in ("", ".", ".."):
        return "an empty, '.' or '..' name is not a path segment"
    if "/" in name:
        return "a '/' would nest it in a group of its own"
    if name.startswith("__"):
        return "names starting with '__' are reserved by Zarr"
    if name == "zarr.json":
        return "it is the name of the group's own metadata file"
    if len(name.encode()) > LONGEST_NAME:
        return f"{len(name.encode())} bytes, above the {LONGEST_NAME} of a file's name"
    return None


@dataclass(eq=False)
class TableConversion(Job):
    """A table written as a stream store (:func:`convert`)."""

    data: Any
    columns: Any = None
    chunk_rows: int | None = None

    options = CONVERT
    name = "convert"
    writes_chunks = True

    def open(self, run: Run) -> list:
        # a folder of Parquet files by URL has no suffix to tell it by: asked of the store
        folder = (not is_table(self.data) and isinstance(self.data, str)
                  and is_parquet_folder_url(self.data, run.storage_options))
        if not is_table(self.data) and not folder:
            # a path as given; an object by its type (its repr spans many lines)
            shown = (repr(self.data) if isinstance(self.data, (str, os.PathLike))
                     else f"a {type(self.data).__module__.split('.')[0]} "
                          f"{type(self.data).__name__}")
            hint = ("; a Dataset is already a stream: fit it as it is, or write it with "
                    "to_zarr" if type(self.data).__name__ == "Dataset" else "")
            if isinstance(self.data, (str, os.PathLike)) and (
                    str(self.data).rstrip("/").endswith(".zarr")
                    or any(os.path.isfile(os.path.join(self.data, n))
                           for n in ("zarr.json", ".zgroup"))):
                # convert writes a store from a table; a store is read by the fits as it is
                hint = ("; a Zarr store is already a stream: fit it as it is (--x, --y or "
                        "--formula name its variables; streamlsq info describes it)")
            raise InputError(f"{shown}: not a table (Parquet or CSV files, a pandas, "
                             f"polars or dask DataFrame){hint}{csv_folder_remedy(self.data)}")
        table = run.open_input("table", self.data, file_kind="parquet" if folder else None)
        names = table.found if self.columns is None else [str(c) for c in (
            [self.columns] if isinstance(self.columns, str) else self.columns)]
        if not names:  # --columns ""
            raise InputError(f"{table.label}: --columns names no column (found: "
                             f"{table.found})")
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:  # a second array of one name: zarr's ContainsArrayError
            raise InputError(f"{table.label}: --columns names '{twice}' twice; name each "
                             "column once")
        keys = getattr(table, "partitions", {})
        if keys and self.columns is None:
            # its partition keys are not in its files: a store of "all the columns" would
            # go without them, without a word
            raise InputError(
                f"{table.label}: its files lie in partition folders "
                f"({', '.join(f'{v}/' for v in keys.values())}...), whose "
                f"key{'s' if len(keys) > 1 else ''} {', '.join(map(repr, keys))} streamlsq "
                "does not read as a column (pandas does), so the store would go without "
                f"{'them' if len(keys) > 1 else 'it'}; convert the frame "
                "pd.read_parquet(folder) from Python (streamlsq.convert), or name the files' "
                "columns to convert with --columns (columns=)")
        for name in names:
            if name not in table.members:
                raise InputError(column_of_later_files(table, name) or
                                 f"{table.label}: column '{name}' is missing (found: "
                                 f"{table.found}){look_alike(name, table.members)}"
                                 f"{partition_note(table, name)}")
            why = _unstorable(name)
            if why:
                raise InputError(f"{table.label}: column {name[:60]!r}"
                                 f"{'…' if len(name) > 60 else ''} cannot be a variable of a "
                                 f"Zarr store ({why}); rename it, or leave it out (--columns)")
        for name in names:
            kind = _time_kind(table.dtypes.get(name)) if hasattr(table, "dtypes") else None
            if kind:
                # written as text, a time's levels (pandas' str) and its stored strings
                # (NumPy's) differ: the store would refuse its own values
                raise InputError(
                    f"{table.label}: column '{name}' holds {table.dtypes[name]} values ({kind}"
                    "s), neither the numbers nor the text a store holds: make it numbers (e.g. "
                    "days since a date) or text (astype(str)) before converting, or leave it "
                    "out (--columns)")
        read = table.as_read(table.columns(names, ROW_DIM), labels=tuple(names))
        self.names = tuple(names)
        self.strings = frozenset(n for n, c in read.items() if getattr(c.dtype, "kind", "O") == "O")
        self.rows = table.rows(table.chunk_rows(names[0], table.n, len(names)))
        self.n = table.n
        self.chunk = min(self.chunk_rows or self.rows.chunk_rows, max(self.n, 1))
        self.levels = {name: table.categories(name) for name in self.strings}
        return [self.rows]

    def published(self, out, storage_options: dict | None) -> xr.Dataset:
        """The store written: a stream store, whose missing values are NaN (not a result,
        which never holds one)."""
        from streamlsq.io.location import options_for
        from streamlsq.io.stores import open_dataset

        # the run's options may be its remote input's alone (open_dataset refuses them for a
        # local path)
        return open_dataset(out, storage_options=options_for(out, storage_options))

    def parameters(self) -> dict:
        return {"columns": list(self.names), "chunk_rows": self.chunk}

    def compute(self, ctx: Context) -> xr.Dataset:
        missing = sorted(n for n, v in self.levels.items() if v is None)
        self.levels.update(find_levels(self.rows, missing, self.n, self.chunk))
        for name in self.names:
            # numbers written with thousands separators (all of its values numbers, some so
            # written): stored as text they would be categories to every fit of the store
            counted = numbers_as_text(self.levels.get(name) or ())
            if counted is not None and counted[0] == counted[1] and counted[2]:
                raise InputError(text_for_numbers(self.rows, name, self.n, self.chunk,
                                                  "convert", counted))
        g = zarr.open_group(ctx.store, mode="w", zarr_format=3)
        for name in self.names:
            text = name in self.strings
            arr = g.create_array(name, shape=(self.n,), chunks=(self.chunk,),
                                 dtype=str if text else "float64",
                                 fill_value="" if text else np.nan,
                                 compressors=compressors(None, 8) if not text else "auto",
                                 dimension_names=[ROW_DIM],
                                 config={"write_empty_chunks": True})
            if text:  # the levels of these rows: a store grown since must not trust them
                arr.attrs.update({"categories": [str(v) for v in self.levels[name]],
                                  "categories_rows": int(self.n)})
        tag = uuid.uuid4().hex[:8]
        spans = [(a, min(a + self.chunk, self.n)) for a in range(0, self.n, self.chunk)]
        futures = [ctx.submit(_write_chunk, self.rows, self.names, self.strings, a, b,
                              ctx.store, key=f"convert-{tag}-{i}", pure=False)
                   for i, (a, b) in enumerate(spans)]
        track_futures(ctx.client, futures, self.n, "convert", enabled=ctx.progress)
        return xr.Dataset(attrs={"n_rows": int(self.n), "chunk_rows": int(self.chunk),
                                 "block_size": int(self.chunk)})
