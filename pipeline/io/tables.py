"""Tables as users keep them, read as streams: Parquet files, CSV files, pandas, polars and
dask DataFrames (``docs/tables.md``).

A table is read as *parts in order* (not to be confused with the blocks of a
recursion's steps) through the readers the ecosystem keeps: a Parquet
file's row groups (pyarrow, by path or fsspec URL, one file after another in name order), a
CSV file's byte ranges and a dask DataFrame's partitions (dask.dataframe), a pandas frame's
slices of rows (a polars frame becomes one). Each table column is a variable of one dimension,
``row``; ``x=`` and ``y=`` name the columns as they name a Dataset's variables.

The plans and the engines know storage chunks of equal rows (``chunk_rows``). A table's parts
need not be equal (row groups of a last file, CSV byte ranges), so its rows are cut into
*virtual chunks* of equal rows (the rows of a row group when all of them but the last are
equal, else their mean): a virtual chunk is read from the parts it overlaps, and each process
keeps the last few parts it read, so that consecutive chunks and the several columns of one
chunk read each part once. Equal chunks keep every piece of arithmetic above the source as it
is, and a prediction's output chunks one to one with the tasks that write them.

What identifies the rows read (``--resume``): the files' sizes and modification stamps (an
object's ETag) and, for Parquet, each row group's rows and bytes, in the input's token; a
DataFrame's token is a hash of its values. ``--continue-from`` is refused in one line: a table
that grew is written as a store (``streamlsq convert``) to be continued.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.location import is_url
from streamlsq.io.parts import TARGET_CHUNK_ELEMENTS, Column, RowsReader
from streamlsq.io.stores import object_stamp

__all__ = ["TableRows", "forget_parts", "is_table", "open_table", "read_frame"]

#: the dimension of every column of a table
ROW_DIM = "row"
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".tsv")
#: rows of a pandas frame in one part (about 25 MB of float64 in ten columns)
FRAME_PART_ROWS = TARGET_CHUNK_ELEMENTS // 10
#: parts a process keeps after reading them (the chunks of one task, and the columns of one
#: chunk, share parts), and the bytes they may hold at most: the last part read is kept
KEPT_PARTS = 4
KEPT_BYTES = 32 * 2**20
_kept: OrderedDict = OrderedDict()
_kept_lock = threading.Lock()


def _frame_kind(data) -> str | None:
    """'pandas', 'polars' or 'dask' for a DataFrame of those libraries (without importing
    one that is not already loaded), else None."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(data, pd.DataFrame):
        return "pandas"
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(data, pl.DataFrame):
        return "polars"
    dd = sys.modules.get("dask.dataframe")
    if dd is not None and isinstance(data, dd.DataFrame):
        return "dask"
    return None


def _file_kind(text: str) -> str | None:
    """'parquet' or 'csv' for a path, glob or URL of such files, else None."""
    name = text.rstrip("/").lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    if not is_url(text) and os.path.isdir(text) and not os.path.exists(
            os.path.join(text, "zarr.json")) and not os.path.exists(os.path.join(text, ".zgroup")):
        with os.scandir(text) as entries:
            if any(e.name.lower().endswith(PARQUET_SUFFIXES) for e in entries):
                return "parquet"
    return None


def is_table(data) -> bool:
    """Whether ``data`` is a table this module reads (a DataFrame, or a path, glob or URL of
    Parquet or CSV files)."""
    if _frame_kind(data) is not None:
        return True
    if isinstance(data, str | os.PathLike):
        return _file_kind(os.fspath(data)) is not None
    return False


# -- where the rows come from -------------------------------------------------------------------


@dataclass(frozen=True)
class TableRows:
    """A :class:`~streamlsq.io.parts.RowsReader`: where the rows of a table come from: its parts
    (``parts``: Parquet row groups as (file, row group), or the partitions of a dask DataFrame,
    or slices of a pandas frame), the row offsets of the parts (``edges``) and the virtual chunk
    of equal rows the plans see (``chunk_rows``). Small and picklable, but for a DataFrame,
    which travels with it as an xarray Dataset's in-memory arrays do."""

    kind: str
    parts: tuple
    edges: tuple
    path: str
    shown: str
    token: str
    chunk_rows: int
    frame: object = field(default=None, compare=False, hash=False, repr=False)
    storage_options: dict | None = field(default=None, compare=False, hash=False)
    stamps: tuple = ()
    #: every column the fit reads (features, targets, weights, groups, a formula's): a part
    #: of a CSV file or a dask DataFrame is read once for all of them, not parsed or
    #: computed again for each column (:meth:`read_part`)
    columns: tuple = ()

    group = None

    @property
    def in_memory(self) -> bool:
        """A DataFrame's rows have no files (nothing to stamp, nothing to keep apart)."""
        return not self.stamps

    @property
    def from_table(self) -> bool:
        """A table's rows are not continued (``--continue-from``): its parts are cut anew
        whenever it grows."""
        return True

    @property
    def label(self) -> str:
        return self.shown or self.path

    def array(self, name: str):
        raise InputError(f"{self.label}: column '{name}' belongs to a table, not to a store")

    def rows_per_chunk(self, name: str) -> int:
        return self.chunk_rows

    def read_part(self, i: int, names: tuple):
        """Part ``i``'s columns ``names`` as a pandas DataFrame, kept for the next reads (the
        next chunk often starts in the same part)."""
        if names and set(names) <= set(self.columns) and self._whole_part_fits(i):
            # a CSV byte range is parsed, a dask partition computed, a row group decoded:
            # once for every column the fit reads, not once per column
            names = self.columns
        key = (self.token, self.path, i, names)
        with _kept_lock:
            if key in _kept:
                _kept.move_to_end(key)
                return _kept[key]
        frame = self._read_part(i, list(names))
        with _kept_lock:
            _kept[key] = frame
            while len(_kept) > 1 and (len(_kept) > KEPT_PARTS or sum(
                    int(f.memory_usage(deep=False).sum()) for f in _kept.values()) > KEPT_BYTES):
                _kept.popitem(last=False)
        return frame

    def _whole_part_fits(self, i: int) -> bool:
        """Whether part ``i`` may be read for every column of the fit at once. A CSV byte
        range or a dask partition is parsed or computed whole whatever the columns asked
        for: always. A Parquet row group is columnar: at once when its columns of the fit,
        as float64, are at most :func:`part_budget` bytes (a row group of every column held
        at once, and copied on its way to the chunks, paused workers of 600 MB:
        tests/test_table_memory.py); else one column at a time, at no extra cost."""
        if self.kind != "parquet":
            return True
        rows = self.edges[i + 1] - self.edges[i]
        return rows * len(self.columns) * 8 <= part_budget()

    def _read_part(self, i: int, names: list):
        kind = self.kind
        try:
            if kind == "parquet":
                import pyarrow as pa

                file, group = self.parts[i]
                frame = _parquet_file(file, self.token, _options_key(self.storage_options),
                                      self.storage_options).read_row_group(
                    group, columns=names).to_pandas()
                # the pages of the Arrow buffers go back to the system, not to Arrow's pool:
                # a worker's memory stays that of the chunks it holds
                pa.default_memory_pool().release_unused()
                return frame
            if kind == "pandas":
                a, b = self.edges[i], self.edges[i + 1]
                return self.frame.iloc[a:b][names]
            return self.frame[names].partitions[i].compute(scheduler="sync")
        except (InputError, MemoryError):
            raise
        except Exception as exc:
            where = self.parts[i] if kind == "parquet" else f"partition {i}"
            raise InputError(f"{self.label}: {where} (rows {self.edges[i]}-"
                             f"{self.edges[i + 1] - 1}) cannot be read ({type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0][:200] if str(exc) else ''})"
                             ) from None

    def frame_rows(self, names, start: int, stop: int):
        """Rows ``start:stop`` of the columns ``names`` as a pandas DataFrame (index 0..)."""
        import pandas as pd

        names = tuple(names)
        first = int(np.searchsorted(self.edges, start, side="right")) - 1
        parts = []
        i = max(first, 0)
        while i < len(self.parts) and self.edges[i] < stop:
            a, b = self.edges[i], self.edges[i + 1]
            part = self.read_part(i, names)
            if len(part) != b - a:
                raise InputError(f"{self.label}: part {i} has {len(part)} rows where it had "
                                 f"{b - a} when the table was opened: it changed since")
            # only the columns asked for: a kept part holds every column the fit reads
            parts.append(part.iloc[max(start, a) - a:min(stop, b) - a][list(names)])
            i += 1
        out = parts[0] if len(parts) == 1 else pd.concat(parts)
        return out.reset_index(drop=True)

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of column ``name``: numbers as floats with NaN where missing,
        strings (and categories) as an object array with None where missing."""
        return column_values(self.frame_rows((name,), start, stop)[name])

    def chunk_stamps(self, names) -> dict:
        """(first row, end row, stamp) of each part, the same for every column: the stamp of
        its file(s) and, for a row group, its rows and bytes; none for a DataFrame."""
        if not self.stamps:
            return {}
        entries = [(int(a), int(b), s) for a, b, s in zip(self.edges[:-1], self.edges[1:],
                                                            self.stamps, strict=True)]
        return {name: entries for name in names}

    def read_variable(self, name: str) -> np.ndarray | None:
        return None


def part_budget() -> int:
    """Bytes of one Parquet part read for all the fit's columns at once: a 32nd of the
    memory limit of the Dask worker running this (a task reads at most a 16th of it, and
    up to three parts are in flight in a task's reading threads), else
    :data:`KEPT_BYTES`."""
    try:
        from distributed import get_worker

        limit = getattr(get_worker().memory_manager, "memory_limit", None)
    except (ImportError, ValueError, AttributeError):
        limit = None
    return int(limit) // 32 if limit else KEPT_BYTES


def forget_parts() -> None:
    """Drop the parts this process keeps (a task that read each part once, as ``convert``'s,
    leaves the worker's memory as it found it)."""
    with _kept_lock:
        _kept.clear()


def column_values(series) -> np.ndarray:
    """A pandas column as the readers above give it: floats (NaN for a missing value) for
    numbers and booleans, an object array (None for a missing value) for anything else."""
    import pandas as pd

    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                            and not isinstance(dtype, pd.CategoricalDtype)):
        if dtype.kind in "iufb" and not series.hasnans:
            return series.to_numpy()
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    values = series.astype(object).to_numpy(copy=True)
    values[pd.isna(values)] = None
    return values


def read_frame(rows: RowsReader, names, start: int, stop: int):
    """Rows ``start:stop`` of the variables ``names`` of any rows part as a pandas DataFrame
    (columns as :func:`column_values` gives them): a table's own columns, or a store's or
    Dataset's variables read one by one."""
    import pandas as pd

    if isinstance(rows, TableRows):
        frame = rows.frame_rows(names, start, stop)
        return pd.DataFrame({name: column_values(frame[name]) for name in names})
    return pd.DataFrame({name: _as_column(rows.read(name, start, stop)) for name in names})


def _as_column(values: np.ndarray) -> np.ndarray:
    """A store's column as a frame column: bytes decoded, the empty string (how xarray writes
    a missing string) a missing value."""
    values = np.asarray(values)
    if values.dtype.kind in "OSUT":
        out = values.astype(object)
        for i, v in enumerate(out):
            if isinstance(v, bytes):
                out[i] = v = v.decode()
            if v == "":
                out[i] = None
        return out
    return values


# -- Parquet ------------------------------------------------------------------------------------


def _options_key(options: dict | None) -> str:
    return "" if not options else repr(sorted(options.items()))


#: the open Parquet files of each thread (a ``ParquetFile`` is not to be read by two
#: threads at once: a task reads its next chunks in background threads)
_opened = threading.local()


def _parquet_file(file: str, token: str, options_key: str, options: dict | None):
    """The pyarrow ``ParquetFile`` of ``file``, opened once per thread and version."""
    cache = getattr(_opened, "files", None)
    if cache is None:
        cache = _opened.files = OrderedDict()
    key = (file, token, options_key)
    if key in cache:
        return cache[key]
    import pyarrow.parquet as pq

    fs, path = _filesystem(file, options)
    handle = cache[key] = pq.ParquetFile(fs.open(path, "rb"))
    while len(cache) > 16:
        cache.popitem(last=False)
    return handle


def _filesystem(url: str, options: dict | None):
    import fsspec

    return fsspec.core.url_to_fs(url, **(options or {}))


def _list_files(text: str, options: dict | None, suffixes) -> list[tuple[str, str]]:
    """(URL or absolute path, stamp) of the files ``text`` names: one file, a folder of them
    (in name order, recursively) or a glob."""
    fs, path = _filesystem(text, options)
    if any(c in path for c in "*?["):
        found = fs.glob(path, detail=True)
    elif fs.isdir(path):
        found = {p: info for p, info in fs.find(path, detail=True).items()
                 if p.lower().endswith(suffixes) and not os.path.basename(p).startswith((".", "_"))}
    else:
        found = {path: fs.info(path)}
    files = [(fs.unstrip_protocol(p) if is_url(text) else p, object_stamp(info))
             for p, info in sorted(found.items()) if info.get("type", "file") != "directory"]
    if not files:
        raise InputError(f"{text}: no {suffixes[0].lstrip('.')} file found")
    return files


def _parquet_rows(text: str, options: dict | None) -> tuple[TableRows, dict]:
    """The row groups of the Parquet files ``text`` names, and the columns' pandas dtypes."""
    files = _list_files(text, options, PARQUET_SUFFIXES)
    token = _digest(s for _, s in files)
    parts, sizes, stamps, dtypes = [], [], [], None
    for file, stamp in files:
        try:
            handle = _parquet_file(file, token, _options_key(options), options)
        except Exception as exc:
            raise InputError(f"{file}: not a readable Parquet file ({type(exc).__name__}: "
                             f"{exc})") from None
        meta = handle.metadata
        schema = handle.schema_arrow
        frame_dtypes = dict(schema.empty_table().to_pandas().dtypes)
        if dtypes is None:
            dtypes = frame_dtypes
        elif set(frame_dtypes) != set(dtypes):
            raise InputError(f"{file}: its columns {sorted(frame_dtypes)} are not those of "
                             f"{files[0][0]} ({sorted(dtypes)}); the files of one table share "
                             "their columns")
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            if rg.num_rows == 0:
                continue
            parts.append((file, g))
            sizes.append(rg.num_rows)
            stamps.append(f"{stamp}:{g}:{rg.num_rows}:{rg.total_byte_size}")
    rows = TableRows("parquet", tuple(parts), _edges(sizes), text, text, token,
                     _virtual_chunk(sizes), storage_options=options, stamps=tuple(stamps))
    return rows, dtypes


def _digest(parts) -> str:
    return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()[:24]


def _edges(sizes) -> tuple:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))


def _virtual_chunk(sizes) -> int:
    """Rows of the virtual chunks: those of the parts when all but the last are equal (and
    the last is not larger), else their mean rounded up."""
    sizes = [int(s) for s in sizes] or [1]
    first = sizes[0]
    if all(s == first for s in sizes[:-1]) and sizes[-1] <= first:
        return max(first, 1)
    return max(1, -(-sum(sizes) // len(sizes)))


# -- DataFrames and CSV files -------------------------------------------------------------------


def _dask_rows(ddf, path: str, shown: str, token: str, stamp: str | None) -> TableRows:
    """The partitions of a dask DataFrame, their rows counted by one parallel pass."""
    import dask

    try:
        sizes = dask.compute(ddf.map_partitions(len))[0]
    except Exception as exc:
        raise InputError(f"{shown}: cannot be read ({type(exc).__name__}: "
                         f"{str(exc).strip().splitlines()[0][:200] if str(exc) else ''})"
                         ) from None
    sizes = [int(s) for s in np.asarray(sizes).ravel()]
    stamps = tuple(f"{stamp}:{i}:{n}" for i, n in enumerate(sizes)) if stamp else ()
    return TableRows("dask", tuple(range(len(sizes))), _edges(sizes), path, shown, token,
                     _virtual_chunk([s for s in sizes if s] or [1]), frame=ddf, stamps=stamps)


def _pandas_rows(frame, shown: str) -> TableRows:
    from dask.base import tokenize

    n = len(frame)
    part = max(1, min(n, FRAME_PART_ROWS))
    edges = tuple(range(0, n, part)) + (n,)
    frame = frame.reset_index(drop=True)
    return TableRows("pandas", tuple(range(len(edges) - 1)), edges, shown, shown,
                     tokenize(frame), part, frame=frame)


def _csv_rows(text: str, options: dict | None) -> TableRows:
    import dask.dataframe as dd

    files = _list_files(text, options, CSV_SUFFIXES)
    token = _digest(s for _, s in files)
    sep = "\t" if text.lower().endswith(".tsv") else ","
    # numbers as floats: a column with a missing value further down then reads as it began
    ddf = dd.read_csv([f for f, _ in files], sep=sep, assume_missing=True,
                      storage_options=options, blocksize="64MB")
    return _dask_rows(ddf, text, text, token, token)


# -- the table opened as a stream -------------------------------------------------------------


class TableInput:
    """A table opened to be read as a stream (an :class:`~streamlsq.io.parts.OpenedInput`):
    its columns are variables of one dimension, ``row``; numbers are read as floats with NaN
    for a missing value, strings as objects (they are categories: a formula encodes them)."""

    sample_first = False

    def __init__(self, rows: TableRows, dtypes: dict, label: str):
        self.table_rows, self.dtypes, self.label = rows, dtypes, label
        self.read_columns: dict[str, None] = {}  # the columns as_read was given, in order
        self.members = set(map(str, dtypes))
        self.found = sorted(self.members)
        self.attrs: dict = {}
        self.n = int(rows.edges[-1])

    def default_sample_dim(self, names) -> str:
        return ROW_DIM

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        return {name: Column((ROW_DIM,), (self.n,), self.dtypes[name]) for name in names}

    def as_read(self, columns: dict[str, Column], labels: tuple = ()) -> dict[str, Column]:
        """Numbers (and booleans) read as float64; other columns refused unless they are
        ``labels`` (group labels, or a formula's categories)."""
        import pandas as pd

        self.read_columns.update(dict.fromkeys(columns))
        out = {}
        for name, column in columns.items():
            dtype = column.dtype
            numeric = pd.api.types.is_bool_dtype(dtype) or (
                pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype,
                                                                        pd.CategoricalDtype))
            if not numeric and name not in labels:
                raise InputError(f"{self.label}: column '{name}' holds {dtype} values, not "
                                 "numbers; a category enters the fit through a formula "
                                 f"(--formula \"... ~ C({name})\")")
            out[name] = Column(column.dims, column.shape,
                                np.dtype(np.float64) if numeric else np.dtype(object))
        return out

    def check_complete(self) -> None:
        """A table has no chunk that could be missing."""

    def coordinate(self, dim: str, size: int) -> tuple | None:
        return None

    def chunk_rows(self, first: str, n: int, width: int) -> int:
        return self.table_rows.chunk_rows

    def rows(self, chunk_rows: int) -> TableRows:
        return replace(self.table_rows, columns=tuple(self.read_columns))

    def categories(self, name: str) -> tuple | None:
        """The levels a column declares itself (a pandas category), else None."""
        import pandas as pd

        dtype = self.dtypes.get(name)
        if isinstance(dtype, pd.CategoricalDtype) and dtype.categories is not None:
            return tuple(dtype.categories.tolist())
        return None


def open_table(data, storage_options: dict | None = None) -> TableInput:
    """A table (see :func:`is_table`) opened and its parts counted."""
    kind = _frame_kind(data)
    if kind == "polars":
        data, kind = data.to_pandas(), "pandas"
    if kind == "pandas":
        if not data.columns.map(lambda c: isinstance(c, str)).all():
            raise InputError("pandas DataFrame: name its columns with strings")
        rows = _pandas_rows(data, "pandas DataFrame")
        return TableInput(rows, dict(rows.frame.dtypes), rows.shown)
    if kind == "dask":
        from dask.base import tokenize

        rows = _dask_rows(data, "dask DataFrame", "dask DataFrame", tokenize(data), None)
        return TableInput(rows, dict(data.dtypes), rows.shown)
    text = os.fspath(data)
    if not is_url(text) and not any(c in text for c in "*?[") and not os.path.exists(text):
        raise InputError(f"{text}: no such file or folder")
    if _file_kind(text) == "parquet":
        rows, dtypes = _parquet_rows(text, storage_options)
    else:
        rows = _csv_rows(text, storage_options)
        dtypes = dict(rows.frame.dtypes)
    return TableInput(rows, dtypes, text)
