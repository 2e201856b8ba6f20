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
equal, else their mean): a virtual chunk is read from the parts it overlaps. Equal chunks
keep every piece of arithmetic above the source as it is, and a prediction's output chunks
one to one with the tasks that write them.

Each part is read once for all the columns a fit takes (features, targets, weights, labels,
a formula's variables: :meth:`TableRows.reading`): a CSV byte range parsed, a dask
partition or frame slice computed, a Parquet row group decoded once, not once per column
nor once per chunk that overlaps it. A part whose rows reach beyond the range read (a
virtual chunk straddling two parts) is kept in the process until its other rows are handed
out, and a part another thread of the process is reading (the next chunk, read ahead) is
waited for rather than read twice (:meth:`TableRows.read_part`). A Parquet row group whose
columns exceed a share of the worker's memory limit is read in pieces of columns
(:func:`column_pieces`), each column chunk still decoded once.

What identifies the rows read (``--resume``): the files' sizes and modification stamps (an
object's ETag) and, for Parquet, each row group's rows and bytes, in the input's token; a
DataFrame's token is a hash of its values. A checkpoint also stamps each part with a hash of
its local file's bytes (:meth:`TableRows.chunk_stamps`), so a file replaced by one of the
same size and time is refused when committed work read it. ``--continue-from`` is refused in
one line: a table that grew is written as a store (``streamlsq convert``) to be continued.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
import os
import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.location import CSV_SUFFIXES, is_url, not_a_url
from streamlsq.io.parts import TARGET_CHUNK_ELEMENTS, Column, RowsReader
from streamlsq.io.stores import object_stamp

__all__ = ["TableRows", "column_pieces", "decimals_as_floats", "first_value", "forget_parts",
           "is_table", "kept_bytes", "numbers_as_text", "open_table", "part_budget",
           "read_frame", "text_for_numbers"]

#: the dimension of every column of a table
ROW_DIM = "row"
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
#: rows of a pandas frame in one part (about 25 MB of float64 in ten columns)
FRAME_PART_ROWS = TARGET_CHUNK_ELEMENTS // 10
#: parts a process keeps between reads, each until all its rows have been handed out (the
#: chunks that straddle it read it once), at most this many and these bytes (on a worker
#: with a memory limit, fewer: :func:`kept_bytes`): a bound for reads that leave rows of a
#: part unread here (a scan piece's last part, whose other rows another worker reads)
KEPT_PARTS = 4
KEPT_BYTES = 32 * 2**20
#: the share of a worker's memory limit a Parquet row group is decoded in at once: a row
#: group whose columns are larger is read in pieces of columns (600 MB workers: 9.4 MB)
PART_SHARE = 1 / 64
_kept: OrderedDict = OrderedDict()
_kept_lock = threading.Lock()
#: the row range each thread reads together (:meth:`TableRows.reading`)
_together = threading.local()


def _frame_kind(data) -> str | None:
    """'pandas', 'polars' or 'dask' for a DataFrame of those libraries (without importing
    one that is not already loaded), else None."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(data, pd.DataFrame):
        return "pandas"
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(data, pl.DataFrame):
        return "polars"
    if pl is not None and isinstance(data, pl.LazyFrame):
        # a query, not rows: collecting it is the user's choice of memory (it was taken for
        # a Zarr store's location)
        raise InputError("a polars LazyFrame: collect() it (a DataFrame), or write it as "
                         "Parquet (sink_parquet) and give the path")
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
        # its files are read recursively (in name order): found so too, the first one
        # enough (a folder of partitions, name=value/part.parquet, was taken for a store)
        if any(f.lower().endswith(PARQUET_SUFFIXES) for _, _, files in os.walk(text)
               for f in files):
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


def is_parquet_folder_url(text: str, storage_options: dict | None = None) -> bool:
    """Whether the URL ``text`` (no suffix of a table's files) is a folder of Parquet files
    (``s3://bucket/flights/``): asked of the object store only once ``text`` could not be
    opened as a Zarr store, so that a store by URL costs no listing."""
    if not is_url(text):
        return False
    try:
        fs, path = _filesystem(text, storage_options)
        return any(p.lower().endswith(PARQUET_SUFFIXES) for p in fs.find(path))
    except Exception:  # unreachable, or no such folder: the store's own refusal stands
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
    #: the files of a CSV glob that lack columns of its first file: (first file, {file:
    #: the columns it lacks}), refused when such a column is read (:meth:`TableInput.columns`)
    lacking: tuple = field(default=(), compare=False, hash=False)
    #: the columns of later files of a CSV glob that its first file lacks (dask reads every
    #: file with the first one's columns): (first file, {column: the first file holding it}),
    #: named in the refusal of such a column as missing (:func:`column_of_later_files`)
    beyond: tuple = field(default=(), compare=False, hash=False)
    stamps: tuple = ()
    #: the hash of each local file's bytes, once taken (:meth:`chunk_stamps`)
    digests: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

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

    @contextlib.contextmanager
    def reading(self, names, start: int, stop: int):
        """A block within which this thread's reads of rows ``start:stop`` of the columns
        ``names`` are one read: the first of them reads each part the rows overlap once
        for all of ``names`` (:meth:`read_part`: a CSV byte range parsed, a dask partition
        computed, a Parquet row group decoded), each column is then handed out once (a
        column read twice is read again alone), and nothing of the block is left after it,
        nor in any other thread, but the parts whose other rows are still to be read.
        Within a block of another range, or of other columns, a block of its own is opened;
        within one that covers it, none."""
        names = tuple(dict.fromkeys(names))
        outer = getattr(_together, "range", None)
        if outer is not None and outer.covers(self, names, start, stop):
            yield
            return
        _together.range = _RangeRead(self.token, self.path, names, start, stop)
        try:
            yield
        finally:
            _together.range = outer

    def read_part(self, i: int, names: tuple, lo: int = 0, hi: int | None = None):
        """Part ``i``'s columns ``names`` (at least) as a pandas DataFrame, of which rows
        ``lo:hi`` (of the part) are handed out: read here once for all of ``names``, or
        taken from the parts this process keeps, or from the read of another thread, waited
        for. A part is kept while some of its rows have not been handed out (the next chunk
        starts in it), within KEPT_PARTS and the kept bytes (:func:`kept_bytes`), and
        dropped once they all have been.

        No thread holds a part's turn while it waits for another's: a thread reads one part
        at a time, and waits only when it reads none, so two threads cannot wait on each
        other (reads ahead in threads share parts without a deadlock)."""
        wanted = frozenset(names)
        while True:
            with _kept_lock:
                entry = next((e for k, e in _kept.items() if k[:3] == (self.token, self.path, i)
                              and wanted <= e.names), None)
                if entry is None:
                    entry = _KeptPart((self.token, self.path, i, wanted))
                    _kept[entry.key] = entry
                    break
                if entry.frame is not None:
                    return entry.hand_out(lo, hi)
                ready = entry.ready
            ready.wait()  # another thread reads it
            with _kept_lock:
                if entry.frame is not None:  # read there (kept or not): taken from it
                    return entry.hand_out(lo, hi)
            # that read failed: read here (and fail here, in this read's words)
        try:
            frame = self._read_part(i, list(names))
        except BaseException:
            with _kept_lock:
                if _kept.get(entry.key) is entry:
                    del _kept[entry.key]
            entry.ready.set()
            raise
        with _kept_lock:
            entry.frame = frame
            frame = entry.hand_out(lo, hi)
            _bound_kept()
        entry.ready.set()
        return frame

    def _read_part(self, i: int, names: list):
        kind = self.kind
        try:
            if kind == "parquet":
                import pyarrow as pa

                file, group = self.parts[i]
                handle = _parquet_file(file, self.token, _options_key(self.storage_options),
                                       self.storage_options)
                frames = []
                for piece in column_pieces(handle.metadata.row_group(group), names,
                                           part_budget()):
                    frames.append(decimals_as_floats(handle.read_row_group(
                        group, columns=piece)).to_pandas(split_blocks=True,
                                                         self_destruct=True))
                    # the pages of the Arrow buffers go back to the system, not to Arrow's
                    # pool: a worker's memory stays that of the chunks it holds
                    pa.default_memory_pool().release_unused()
                if len(frames) == 1:
                    return frames[0]
                import pandas as pd

                return pd.concat(frames, axis=1)
            if kind == "pandas":
                a, b = self.edges[i], self.edges[i + 1]
                return self.frame.iloc[a:b][names]
            with _DASK_EXPRESSION_LOCK:
                return self.frame[names].partitions[i].compute(scheduler="sync")
        except (InputError, MemoryError):
            raise
        except Exception as exc:
            where = self.parts[i] if kind == "parquet" else f"partition {i}"
            raise InputError(f"{self.label}: {where} (rows {self.edges[i]}-"
                             f"{self.edges[i + 1] - 1}) cannot be read ({type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0][:200] if str(exc) else ''})"
                             ) from None

    def column_rows(self, names, start: int, stop: int) -> dict:
        """Rows ``start:stop`` of each of the columns ``names`` as a pandas Series (index
        0..): taken from the range this thread reads together (:meth:`reading`) when it
        covers them, else read for ``names`` alone (through :meth:`read_part`, which reads
        each part once)."""
        names = tuple(names)
        together = getattr(_together, "range", None)
        if together is not None and together.covers(self, names, start, stop):
            taken = together.take(self, names)
            if taken is not None:
                return taken
        return self._column_rows(names, start, stop)

    def _column_rows(self, names: tuple, start: int, stop: int) -> dict:
        """Rows ``start:stop`` of the columns ``names``, each part they overlap read once
        for all of them (:meth:`read_part`); the rows are copies of the part's when the
        part is kept for its other rows (they are not held by it afterwards)."""
        import pandas as pd

        first = int(np.searchsorted(self.edges, start, side="right")) - 1
        pieces = {name: [] for name in names}
        i = max(first, 0)
        while i < len(self.parts) and self.edges[i] < stop:
            a, b = self.edges[i], self.edges[i + 1]
            lo, hi = max(start, a) - a, min(stop, b) - a
            part = self.read_part(i, names, lo, hi)
            if len(part) != b - a:
                raise InputError(f"{self.label}: part {i} has {len(part)} rows where it had "
                                 f"{b - a} when the table was opened: it changed since")
            whole = lo == 0 and hi == b - a
            for name in names:
                # a part's rows outside the range are not held beyond this read
                column = part[name] if whole else part[name].iloc[lo:hi].copy(deep=True)
                pieces[name].append(column)
            del part
            i += 1
        out = {}
        for name in names:  # each column's pieces dropped once joined: the rows held once
            joined = pieces.pop(name)
            out[name] = (joined[0] if len(joined) == 1 else pd.concat(joined)).reset_index(
                drop=True)
            del joined
        return out

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of column ``name``: numbers as floats with NaN where missing,
        strings (and categories) as an object array with None where missing."""
        return column_values(self.column_rows((name,), start, stop)[name])

    def chunk_stamps(self, names, contents: bool = False) -> dict:
        """(first row, end row, stamp) of each part, the same for every column: the stamp of
        its file(s) and, for a row group, its rows and bytes; with ``contents``, then the
        hash of the bytes of its local file(s) (:func:`content_digest`; a file replaced by
        one of the same size and time, ``rsync -t``, is told apart); none for a DataFrame.
        A checkpoint stamps its inputs with their contents when it starts and compares them
        when it resumes: each local file of the table is read once more then, and once per
        table opened (the hashes are kept). A result's record of its rows does without
        them: a table is never continued."""
        if not self.stamps:
            return {}
        if not contents:
            entries = [(int(a), int(b), s) for a, b, s in zip(
                self.edges[:-1], self.edges[1:], self.stamps, strict=True)]
            return {name: entries for name in names}

        def content(file: str) -> str:
            if file not in self.digests:
                self.digests[file] = content_digest(file)
            return self.digests[file]

        if self.kind == "parquet":
            hashes = [content(file) for file, _group in self.parts]
        else:  # a CSV file's byte ranges: the hash of every file of the table
            whole = ",".join(content(file) for file, _ in _list_files(
                self.path, self.storage_options, CSV_SUFFIXES))
            hashes = [whole] * len(self.parts)
        entries = [(int(a), int(b), f"{s}:{c}") for a, b, s, c in zip(
            self.edges[:-1], self.edges[1:], self.stamps, hashes, strict=True)]
        return {name: entries for name in names}

    def read_variable(self, name: str) -> np.ndarray | None:
        return None

    def first_value(self, name: str, wanted) -> Found | None:
        """The first row of column ``name`` whose value ``wanted(value)`` holds, the parts
        read in order until it is found (a refusal's search: nothing is kept); a CSV table's
        files read again as text, file by file, to name the file and its row."""
        if self.kind == "dask" and self.stamps:
            return _csv_first_value(self.path, self.storage_options, name, wanted)
        files = len({p[0] for p in self.parts}) > 1 if self.kind == "parquet" else False
        starts: dict = {}
        for i, part in enumerate(self.parts):
            column = self._read_part(i, [name])[name]
            file = part[0] if files else self.label
            start = starts.setdefault(file, self.edges[i])
            hit = _first_hit(column, wanted)
            if hit is not None:
                at = self.edges[i] + hit
                return Found(file, at - start, at, column.iloc[hit],
                             "parquet" if self.kind == "parquet" else "frame", files)
        return None


class _RangeRead:
    """The rows ``start:stop`` of the columns ``names`` of one table that a thread reads
    together (:meth:`TableRows.reading`): read at the first request, each column handed out
    once."""

    def __init__(self, token: str, path: str, names: tuple, start: int, stop: int):
        self.key, self.names, self.start, self.stop = (token, path), names, start, stop
        self.held: dict | None = None

    def covers(self, rows: TableRows, names, start: int, stop: int) -> bool:
        return (self.key == (rows.token, rows.path) and (start, stop) == (self.start, self.stop)
                and set(names) <= set(self.names))

    def take(self, rows: TableRows, names: tuple) -> dict | None:
        """The columns ``names`` of the range, read for all of its columns at the first
        request; None for a column already handed out."""
        names = tuple(dict.fromkeys(names))
        if self.held is None:
            self.held = rows._column_rows(self.names, self.start, self.stop)
        if not all(name in self.held for name in names):
            return None
        return {name: self.held.pop(name) for name in names}


class _KeptPart:
    """A part of a table this process reads or keeps (``key``: the table, the part and the
    columns read): its frame once read (``ready`` is set then, or when the read failed) and
    the rows of it handed out so far (``handed``: (first, end) pairs, merged). Changed with
    ``_kept_lock`` held."""

    def __init__(self, key: tuple):
        self.key, self.names = key, key[3]
        self.frame, self.handed = None, []
        self.ready = threading.Event()

    def hand_out(self, lo: int, hi: int | None):
        """The frame, rows ``lo:hi`` of it handed out: the part is no longer kept once all
        of its rows have been (else it is the last used)."""
        n = len(self.frame)
        merged: list = []
        for a, b in sorted([*self.handed, (lo, n if hi is None else hi)]):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.handed = merged
        if _kept.get(self.key) is self:
            if merged[0][0] <= 0 and merged[0][1] >= n:
                del _kept[self.key]
            else:
                _kept.move_to_end(self.key)
        return self.frame

    @property
    def nbytes(self) -> int:
        return 0 if self.frame is None else int(self.frame.memory_usage(deep=False).sum())


def _bound_kept() -> None:
    """Drop the parts used longest ago (never one being read) while more than KEPT_PARTS,
    or more than :func:`kept_bytes`, are kept; with ``_kept_lock`` held."""
    limit = kept_bytes()
    while True:
        done = [(k, e) for k, e in _kept.items() if e.frame is not None]
        if not done or (len(done) <= KEPT_PARTS and sum(e.nbytes for _, e in done) <= limit):
            return
        del _kept[done[0][0]]


def kept_bytes() -> int:
    """The bytes of parts a process keeps: KEPT_BYTES, and on a worker with a memory limit
    at most two row groups' decoded at once (:func:`part_budget`): a part larger than that
    is read again by the chunk that straddles it rather than kept on a small worker."""
    budget = part_budget()
    return KEPT_BYTES if budget is None else min(KEPT_BYTES, 2 * budget)


def part_budget() -> int | None:
    """Bytes of a Parquet row group decoded at once here: PART_SHARE of the memory limit of
    this Dask worker (of the smallest of this process's workers from a thread of a task's
    reads ahead, where the task's worker is not known); None (a row group whole) outside
    a worker or without a limit."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        workers = [distributed.get_worker()]
    except ValueError:
        workers = list(distributed.Worker._instances)
    limits = [getattr(getattr(w, "memory_manager", None), "memory_limit", None)
              for w in workers]
    limits = [int(m) for m in limits if m]
    return int(min(limits) * PART_SHARE) if limits else None


def column_pieces(row_group, names: list, budget: int | None) -> list[list]:
    """The columns ``names`` of a Parquet row group (its metadata) in pieces read one
    after another: each piece's decoded bytes (a column's uncompressed bytes, at least 8
    a row) within ``budget``, one column at least; all of them at once without a budget."""
    if budget is None:
        return [list(names)]
    sizes = {}
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        sizes[column.path_in_schema] = column.total_uncompressed_size
    rows = row_group.num_rows
    pieces, size = [], 0
    for name in names:
        width = max(sizes.get(name, 0), 8 * rows)
        if pieces and size + width <= budget:
            pieces[-1].append(name)
            size += width
        else:
            pieces.append([name])
            size = width
    return pieces


#: dask's DataFrame expressions cache their properties with functools.cached_property,
#: which before Python 3.12 takes one lock per property shared by every instance: two
#: threads of a worker optimising partitions of one frame at once (a segment's chunk
#: reads run ahead in threads) can each hold one of those locks and wait on the other
#: forever (CPython gh-87634; seen as a fit hanging with idle workers). Their reads take
#: turns here; from 3.12 the locks are gone and so is this one.
_DASK_EXPRESSION_LOCK = (threading.Lock() if sys.version_info < (3, 12)
                         else contextlib.nullcontext())


def distinct_column_names(where: str, names: list[str], place: str = "") -> None:
    """Refuse a table naming a column twice (the first such name, and how often)."""
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise InputError(f"{where}: the column name {twice!r} appears {names.count(twice)} "
                         f"times{place}; the columns of a table need distinct names")


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
        columns = rows.column_rows(names, start, stop)
        return pd.DataFrame({name: column_values(columns[name]) for name in names})
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
    try:
        fs, path = _filesystem(text, options)
        if any(c in path for c in "*?["):
            found = fs.glob(path, detail=True)
        elif fs.isdir(path):
            found = {p: info for p, info in fs.find(path, detail=True).items()
                     if p.lower().endswith(suffixes)
                     and not os.path.basename(p).startswith((".", "_"))}
        else:
            found = {path: fs.info(path)}
    except FileNotFoundError:
        raise InputError(not_a_url(text) or f"{text}: no such file or folder") from None
    except Exception as exc:  # an unreachable object store, missing credentials, ...
        if not is_url(text):
            raise
        raise InputError(f"{text}: cannot be reached ({_reason(exc)}); check the URL, the "
                         "credentials and the storage options") from None
    files = [(fs.unstrip_protocol(p) if is_url(text) else p, object_stamp(info))
             for p, info in sorted(found.items()) if info.get("type", "file") != "directory"]
    if not files:
        raise InputError(f"{text}: no {suffixes[0].lstrip('.')} file found")
    return files


def _partition_keys(text: str, files: list) -> dict[str, str]:
    """The partition keys of a folder written partitioned (``g=a/part.parquet``, pandas'
    ``partition_cols``, Hive's layout): key -> the first folder naming it. pandas and
    pyarrow read such a key as a column; streamlsq reads the columns the files hold, so
    the refusals that miss one say where it is."""
    root = text.rstrip("/")
    keys: dict[str, str] = {}
    for file, _ in files:
        where = file.split("://", 1)[-1] if is_url(text) else file
        start = root.split("://", 1)[-1] if is_url(text) else os.path.abspath(root)
        if not where.startswith(start + "/"):
            continue  # a glob's or a single file's: no folder of partitions
        for part in where[len(start) + 1:].split("/")[:-1]:
            key, eq, _ = part.partition("=")
            if eq and key:
                keys.setdefault(key, part)
    return keys


def column_of_later_files(table, name: str) -> str | None:
    """The refusal of the column ``name`` as missing from ``table`` (an opened input, or one
    read through a formula) when a later file of its CSV glob holds it and the first does
    not, naming both files as the refusal the other way round does
    (:meth:`TableInput.columns`); else None."""
    while getattr(table, "inner", None) is not None:
        table = table.inner
    beyond = getattr(getattr(table, "table_rows", None), "beyond", ())
    if not beyond or name not in beyond[1]:
        return None
    first, holder = beyond[0], beyond[1][name]
    return (f"{first}: has no column {name!r}, where {holder} has it; the files of one table "
            "hold the same columns: write the column into every file, or leave it out")


def partition_note(table, name: str) -> str:
    """What to add to the refusal of the column ``name`` as missing from ``table`` when it
    is a partition key of its folders (:func:`_partition_keys`), else ``""``."""
    where = getattr(table, "partitions", {}).get(name)
    if where is None:
        return ""
    return (f"; '{name}' is a partition key of the folder's paths ({where}/...), which "
            "streamlsq does not read as a column (pandas does): give the frame "
            "pd.read_parquet(folder) from Python, or write the column into the files")


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
        frame_dtypes = _parquet_dtypes(file, handle)
        if dtypes is None:
            dtypes = frame_dtypes
        elif set(frame_dtypes) != set(dtypes):
            raise InputError(f"{file}: its columns {sorted(frame_dtypes)} are not those of "
                             f"{files[0][0]} ({sorted(dtypes)}); the files of one table share "
                             "their columns")
        else:
            for name, dtype in dtypes.items():
                if _is_number(dtype) != _is_number(frame_dtypes[name]):
                    raise InputError(_mixed_files(name, (files[0][0], dtype),
                                                  (file, frame_dtypes[name]), options))
            dtypes = {name: _same_categories(dtype, frame_dtypes[name])
                      for name, dtype in dtypes.items()}
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            if rg.num_rows == 0:
                continue
            parts.append((file, g))
            sizes.append(rg.num_rows)
            stamps.append(f"{stamp}:{g}:{rg.num_rows}:{rg.total_byte_size}")
    rows = TableRows("parquet", tuple(parts), _edges(sizes), text, text, token,
                     _virtual_chunk(sizes), storage_options=options, stamps=tuple(stamps))
    return rows, dtypes, {k: v for k, v in _partition_keys(text, files).items()
                          if k not in dtypes}


def _mixed_files(name: str, first: tuple, other: tuple, options: dict | None) -> str:
    """The refusal of a column of numbers in one Parquet file (``first`` or ``other``: (file,
    dtype)) and of text in another: the first value of the text that is not a number named
    (its row and value) when it holds numbers as text, as numbers written with separators."""
    (text_file, text_dtype), (number_file, number_dtype) = (
        (other, first) if _is_number(first[1]) else (first, other))
    said = (f"{other[0]}: column '{name}' holds {other[1]} values where {first[0]} holds "
            f"{first[1]}")
    remedy = ("the files of one table hold numbers (or text) in the same columns: rewrite "
              "the file with the column's type of the others")
    try:
        found = _parquet_first_value(text_file, options, name, _not_plain)
    except Exception:  # noqa: BLE001 - the types alone are named
        found = None
    if found is None or not _is_number(number_dtype) or str(text_dtype) == "category":
        return f"{said}; {remedy}"
    if _grouped(found.value):
        return (f"{found.where(name)}, a number written with thousands separators, where "
                f"{number_file} holds {number_dtype} numbers; the files of one table hold "
                f"numbers in the same columns: {_separators_remedy(False)} and rewrite the "
                "file")
    return (f"{found.where(name)}, which is not a number, where {number_file} holds "
            f"{number_dtype} numbers; {remedy}, or correct the value")


def _parquet_first_value(file: str, options: dict | None, name: str, wanted) -> Found | None:
    """The first row of column ``name`` of one Parquet file whose value ``wanted`` holds."""
    import pyarrow.parquet as pq

    fs, path = _filesystem(file, options)
    with fs.open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        before = 0
        for g in range(parquet.metadata.num_row_groups):
            column = parquet.read_row_group(g, columns=[name]).to_pandas()[name]
            hit = _first_hit(column, wanted)
            if hit is not None:
                return Found(file, before + hit, None, column.iloc[hit], "parquet", True)
            before += len(column)
    return None


def decimals_as_floats(table):
    """An Arrow table whose decimal columns (``decimal128``/``decimal256``: money columns as
    databases and Spark write them) are float64, each value the double nearest the decimal,
    as pandas' ``astype(float)`` gives it (pandas reads them as ``Decimal`` objects, which
    were taken for text). Through their text: Arrow's own cast to float64 is not correctly
    rounded (``20640.42`` became ``20640.420000000002``)."""
    import pyarrow as pa

    decimal = [i for i, f in enumerate(table.schema) if pa.types.is_decimal(f.type)]
    if not decimal:
        return table
    import pyarrow.compute as pc

    for i in decimal:
        name = table.schema.field(i).name
        table = table.set_column(i, name, pc.cast(pc.cast(table.column(i), pa.string()),
                                                  pa.float64()))
    return table


def _polars_as_pandas(frame):
    """A polars DataFrame as pandas, its ``Decimal`` columns float64 as a Parquet file's are
    read (:func:`decimals_as_floats`; polars' ``to_pandas`` gives ``Decimal`` objects)."""
    import polars as pl

    decimal = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.Decimal)]
    out = frame.to_pandas()
    if decimal:
        floats = decimals_as_floats(frame.select(decimal).to_arrow()).to_pandas()
        out[decimal] = floats[decimal].to_numpy()
    return out


def _decimal_objects_as_floats(frame):
    """A pandas DataFrame whose columns of ``decimal.Decimal`` objects (missing values aside)
    are float64, as :func:`decimals_as_floats` reads a decimal column; ``frame`` itself when
    it has none. A column mixing them with other objects stays as it is (and is refused,
    naming the first value that is not a number)."""
    import decimal

    import pandas as pd
    import pyarrow as pa

    floats = {}
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object:
            continue
        present = column.notna().to_numpy()
        if not present.any() or not isinstance(column.iloc[int(present.argmax())],
                                               decimal.Decimal):
            continue
        try:
            values = pa.array(column, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            continue
        if pa.types.is_decimal(values.type):
            table = decimals_as_floats(pa.table({"v": values}))
            floats[name] = pd.Series(table.column("v").to_numpy(), index=frame.index)
    return frame.assign(**floats) if floats else frame


def content_digest(file: str) -> str:
    """A hash of the bytes of the local ``file`` (SHA-256, read once in blocks); ``""`` for
    an object of an object store, whose stamp is already its ETag (the store's hash of its
    content); ``"unreadable"`` if it cannot be read (it differs from any stamp taken)."""
    if is_url(file):
        return ""
    try:
        with open(file, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()[:24]
    except OSError:
        return "unreadable"


def _parquet_dtypes(file: str, handle) -> dict:
    """The pandas dtypes of a Parquet file's columns. A column of categories (Arrow
    dictionary type) declares no levels in the schema: its dtype gets those of its first row
    group's dictionary (pyarrow writes a pandas category's whole categories, in their order,
    with every row group) when the file's pandas metadata counts as many, else no levels (a
    pass over the rows finds them)."""
    import pandas as pd

    schema = handle.schema_arrow
    names = [str(n) for n in schema.names]
    distinct_column_names(file, names)
    dtypes = dict(decimals_as_floats(schema.empty_table()).to_pandas().dtypes)
    counted = {str(c.get("name")): (c.get("metadata") or {}).get("num_categories")
               for c in (schema.pandas_metadata or {}).get("columns", [])}
    first = next((g for g in range(handle.metadata.num_row_groups)
                  if handle.metadata.row_group(g).num_rows), None)
    for name, dtype in dtypes.items():
        if not isinstance(dtype, pd.CategoricalDtype):
            continue
        dtypes[name] = pd.CategoricalDtype()
        if first is None or counted.get(name) is None:
            continue
        try:
            found = handle.read_row_group(first, columns=[name]).to_pandas()[name].dtype
        except Exception:  # noqa: BLE001 - the rows' own read names what is wrong
            continue
        if isinstance(found, pd.CategoricalDtype) and len(found.categories) == counted[name]:
            dtypes[name] = pd.CategoricalDtype(found.categories, ordered=found.ordered)
    return dtypes


def _is_number(dtype) -> bool:
    """Whether a column of this pandas dtype is read as numbers (booleans too; not a
    category, whatever its levels)."""
    import pandas as pd

    return pd.api.types.is_bool_dtype(dtype) or (
        pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype))


def _same_categories(dtype, other):
    """A column's dtype over two files: a category's levels only when both files declare the
    same (else none: a pass over the rows finds them)."""
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype) and dtype != other:
        return pd.CategoricalDtype()
    return dtype


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


def _dask_rows(ddf, path: str, shown: str, token: str, stamp: str | None,
               diagnose=None) -> TableRows:
    """The partitions of a dask DataFrame, their rows counted by one parallel pass
    (``diagnose``: a CSV's failed pass explained, naming the file, column and row)."""
    import dask

    try:
        sizes = dask.compute(ddf.map_partitions(len))[0]
    except Exception as exc:
        found = diagnose(exc) if diagnose is not None else None
        raise InputError(found or f"{shown}: cannot be read ({_reason(exc)})") from None
    sizes = [int(s) for s in np.asarray(sizes).ravel()]
    stamps = tuple(f"{stamp}:{i}:{n}" for i, n in enumerate(sizes)) if stamp else ()
    return TableRows("dask", tuple(range(len(sizes))), _edges(sizes), path, shown, token,
                     _virtual_chunk([s for s in sizes if s] or [1]), frame=ddf, stamps=stamps)


#: the first bytes of the compressed files a CSV table may be (by its name's suffix)
COMPRESSED_MAGIC = ((b"\x1f\x8b", "gz"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"),
                    (b"\x28\xb5\x2f\xfd", "zst"))


def _reason(exc: BaseException) -> str:
    """Why a table could not be read, in a few words: the innermost cause (dask wraps a
    reader's error in its own), with the remedy of an encoding or a truncated file."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, UnicodeDecodeError):
        packed = next((f".{kind}" for magic, kind in COMPRESSED_MAGIC
                       if bytes(exc.object[:len(magic)]) == magic), None)
        if packed is not None:
            return (f"UnicodeDecodeError: the file is {packed[1:]}-compressed but its name "
                    f"does not say so: name it ending in .csv{packed} (or .tsv{packed}), "
                    "or decompress it")
        return (f"UnicodeDecodeError: byte 0x{exc.object[exc.start]:02x} is not UTF-8; "
                "streamlsq reads text files as UTF-8: convert the file (e.g. iconv -f "
                "latin1 -t utf-8)")
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    if isinstance(exc, EOFError) or "end-of-stream" in text or "truncated" in text.lower():
        return (f"{type(exc).__name__}: {text}; the compressed file is truncated or corrupt: "
                "restore it")
    return f"{type(exc).__name__}: {text}"


def _not_numbers(frame, expected: dict) -> tuple[str, int, object] | None:
    """The first (column, position, value) of a CSV part read as text whose column was
    inferred as numbers (``expected``: dtypes) but holds a value that is not one."""
    import pandas as pd

    first = None
    for name, dtype in expected.items():
        if name not in frame or getattr(dtype, "kind", "O") not in "iuf":
            continue
        column = frame[name]
        bad = np.flatnonzero((pd.to_numeric(column, errors="coerce").isna()
                              & column.notna()).to_numpy())
        if bad.size and (first is None or bad[0] < first[1]):
            first = (str(name), int(bad[0]), column.iloc[int(bad[0])])
    return first


#: bytes at the start of a CSV table whose rows (all of them) decide each column's dtype
#: (dask's default sample)
CSV_SAMPLE_BYTES = 256_000

#: the column naming each row's file when a CSV table is read again to explain an error
PATH_COLUMN = "__streamlsq_path__"


def _csv_bad_values(frame, expected: dict):
    """(rows, the first value that is not a number, the file) of a CSV part read as text."""
    path = str(frame[PATH_COLUMN].iloc[0]) if len(frame) else ""
    return len(frame), _not_numbers(frame.drop(columns=PATH_COLUMN), expected), path


def _csv_diagnosis(files: list, sep: str, options: dict | None, expected: dict, shown: str):
    """A failed count of a CSV table's rows explained: dask's "Mismatched dtypes" (a column
    inferred as numbers from the first rows holds text further down) named by file, column,
    row and value, by one more pass reading every part as text."""

    def diagnose(exc: BaseException) -> str | None:
        if "Mismatched dtypes" not in str(exc):
            return None
        import dask
        import dask.dataframe as dd

        try:
            raw = dd.read_csv(files, sep=sep, dtype=object, storage_options=options,
                              blocksize="64MB", include_path_column=PATH_COLUMN)
            found = dask.compute(*[dask.delayed(_csv_bad_values)(part, expected)
                                   for part in raw.to_delayed()])
        except Exception:  # noqa: BLE001 - the first error is the one reported
            return None
        before, in_files = 0, {}
        for n, bad, path in found:
            if bad is not None:
                name, at, value = bad
                where = Found(path if len(files) > 1 else shown, in_files.get(path, 0) + at,
                              before + at, value, "csv", len(files) > 1).where(name)
                remedy = (_separators_remedy(True) if _grouped(value) else
                          "correct the value (or leave it empty: a missing value)")
                return (f"{where}, where its first rows are {expected[name]} numbers; "
                        f"{remedy}, or leave the column out")
            before += n
            in_files[path] = in_files.get(path, 0) + n
        return None

    return diagnose


# -- numbers written as text ------------------------------------------------------------------

#: a number as pandas reads one from text (and float() does)
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: a number written with thousands separators ('12,345', '1,234.5'), which pandas reads as
#: text unless told (read_csv's thousands=',')
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def number_text(value) -> str | None:
    """'plain' for a value that is a number as pandas reads one (a number itself, or its
    text), 'grouped' for the text of a number written with thousands separators, else None
    (a missing value too)."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return None if value != value else "plain"
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _PLAIN_NUMBER.fullmatch(text):
        return "plain"
    if _GROUPED_NUMBER.fullmatch(text):
        return "grouped"
    return None


def _missing(value) -> bool:
    import pandas as pd

    if value is None:
        return True
    return np.ndim(value) == 0 and bool(pd.isna(value))


def _not_plain(value) -> bool:
    """Whether a value is present but not a number as pandas reads one."""
    return not _missing(value) and number_text(value) != "plain"


def _present(value) -> bool:
    return not _missing(value)


def _grouped(value) -> bool:
    return number_text(value) == "grouped"


def numbers_as_text(levels) -> tuple[int, int, bool] | None:
    """(how many of the distinct values ``levels`` of a column holding text are numbers, how
    many there are, whether one is written with thousands separators) when more than half
    of them are numbers (once their separators are removed), else None: such a column was
    meant as numbers, or is ambiguous (codes, grades: C() says categories)."""
    if not any(isinstance(v, str) for v in levels):  # numbers made categories: meant so
        return None
    kinds = [number_text(v) for v in levels]
    found = sum(k is not None for k in kinds)
    if 2 * found <= len(kinds):
        return None
    return found, len(kinds), "grouped" in kinds


@dataclass(frozen=True)
class Found:
    """A value found in a column: the file (or the frame's or store's label) and its row in
    it, its row of the table (both from 0; None when not known), the value, what holds it
    ('csv', 'parquet', 'frame', 'store') and whether the table has other files."""

    file: str
    file_row: int
    row: int | None
    value: object
    holder: str
    files: bool = False

    def where(self, name: str) -> str:
        """'FILE: column 'x' holds the value V at row R (counted from 1 ...)'."""
        counted = ("data rows counted from 1, the header not counted" if self.holder == "csv"
                   else "counted from 1")
        if self.holder == "frame":
            at = f"at row {self.file_row + 1} (counted from 1: iloc[{self.file_row}])"
        elif self.files:
            table = "" if self.row is None else f"; row {self.row + 1} of the table"
            at = f"at row {self.file_row + 1} of the file ({counted}{table})"
        else:
            at = f"at row {self.file_row + 1} ({counted})"
        kind = "variable" if self.holder == "store" else "column"
        return f"{self.file}: {kind} '{name}' holds the value {self.value!r} {at}"


def _first_hit(column, wanted) -> int | None:
    for i, value in enumerate(column.tolist()):
        if wanted(value):
            return i
    return None


def first_value(rows: RowsReader, name: str, n_rows: int, chunk_rows: int,
                wanted) -> Found | None:
    """The first row of variable ``name`` of any rows part whose value ``wanted(value)``
    holds, read in order, chunk after chunk, until it is found."""
    if isinstance(rows, TableRows):
        return rows.first_value(name, wanted)
    inner = getattr(rows, "inner", None)
    if isinstance(inner, TableRows):
        return inner.first_value(name, wanted)
    for a in range(0, n_rows, max(chunk_rows, 1)):
        column = read_frame(rows, [name], a, min(a + chunk_rows, n_rows))[name]
        hit = _first_hit(column, wanted)
        if hit is not None:
            return Found(rows.label, a + hit, a + hit, column.iloc[hit], "store")
    return None


def _csv_first_value(text: str, options: dict | None, name: str, wanted) -> Found | None:
    """:meth:`TableRows.first_value` of a CSV table: its files read as text, in order."""
    import fsspec
    import pandas as pd

    sep = "\t" if text.lower().endswith(".tsv") else ","
    files = [f for f, _ in _list_files(text, options, CSV_SUFFIXES)]
    before = 0
    for file in files:
        in_file = 0
        with fsspec.open(file, mode="rb", compression="infer", **(options or {})) as handle:
            for piece in pd.read_csv(handle, sep=sep, usecols=[name], dtype=object,
                                     chunksize=100_000):
                hit = _first_hit(piece[name], wanted)
                if hit is not None:
                    return Found(file if len(files) > 1 else text, in_file + hit,
                                 before + in_file + hit, piece[name].iloc[hit], "csv",
                                 len(files) > 1)
                in_file += len(piece)
        before += in_file
    return None


def _separators_remedy(csv: bool) -> str:
    return ("write the numbers without separators (e.g. pandas.read_csv(path, thousands=',')"
            ".to_csv(new_path, index=False))" if csv else
            "write the numbers without separators (e.g. pandas' "
            "column.str.replace(',', '').astype(float))")


def text_for_numbers(rows: RowsReader, name: str, n_rows: int, chunk_rows: int,
                     use: str, counted: tuple[int, int, bool] | None = None,
                     factor: str | None = None) -> str:
    """The refusal of a text column where numbers are meant, naming the first value that
    is not a number as pandas reads one (its file, row and value) and the remedy. ``use``:
    'x' (named by --x/--y: read as numbers), 'formula' or 'response' (a formula would read
    it as categories, on its right- or left-hand side: ``counted`` its distinct values that
    are numbers, of how many), 'computed' (a formula's ``factor``, such as ``np.log(x)``,
    computes with it: categories would not do either), 'convert' (numbers written with
    separators, which convert would store as text) or 'option' (read as numbers by the option
    ``factor``, such as ``--offset (offset=)``)."""
    csv = _is_csv(rows)
    found = first_value(rows, name, n_rows, chunk_rows, _not_plain)
    first = first_value(rows, name, n_rows, chunk_rows, _present)
    if use == "computed":
        read = f"the column is text, which the formula's {factor} cannot compute with"
        if found is None and first is None:
            return f"{rows.label}: column '{name}' holds no value, which {factor} needs"
        if found is not None and _grouped(found.value):
            return (f"{found.where(name)}, a number written with thousands separators: "
                    f"{read}; {_separators_remedy(csv)}")
        what, fix = (("a number written as text", "") if found is None else
                     ("which is not a number", ", correcting the values that are not"))
        return (f"{(found or first).where(name)}, {what}: {read}; convert the column to "
                f"numbers (e.g. pandas' astype(float){fix}), or, if it holds categories, "
                f"write C({name}) alone, not inside a function")
    if counted is not None:
        share = (f"{counted[0]} of its {counted[1]} distinct values are numbers"
                 if counted[0] < counted[1] else f"all {counted[1]} of its distinct values "
                 "are numbers")
    if use in ("formula", "response"):
        # on the right-hand side, C() takes text as categories; a response is a number
        categories = (f", or write C({name}) in the formula to take the values as categories"
                      if use == "formula" else "")
        read = f"the column is text, which a formula reads as categories, though {share}"
        if found is None:
            return (f"{first.where(name)}, a number written as text: {read}; convert the "
                    f"column to numbers (e.g. pandas' astype(float)){categories}")
        if _grouped(found.value):
            return (f"{found.where(name)}, a number written with thousands separators: "
                    f"{read}; {_separators_remedy(csv)}{categories}")
        return (f"{found.where(name)}, which is not a number: {read}; correct the value (or "
                f"leave it empty: a missing value){categories}")
    if use == "convert":
        return (f"{found.where(name)}, a number written with thousands separators ({share}, "
                f"some written so): the column would be stored as text; "
                f"{_separators_remedy(csv)}, or leave the column out (--columns)")
    if use == "option" and found is not None and not _grouped(found.value):
        return (f"{found.where(name)}, which is not a number: {factor} reads a column of "
                "numbers; correct the value (or leave it empty: a missing value), or name "
                f"another column with {factor.split(' ')[0]}")
    if found is None:
        if first is None:
            return f"{rows.label}: column '{name}' holds no value, not numbers"
        return (f"{first.where(name)}, a {type(first.value).__name__} in a column of Python "
                "objects, not of numbers: convert the column to numbers (e.g. pandas' "
                "astype(float))")
    if _grouped(found.value):
        return (f"{found.where(name)}, a number written with thousands separators, not a "
                f"number streamlsq reads; {_separators_remedy(csv)}")
    if first is not None and first.row == found.row:
        return (f"{found.where(name)}, which is not a number; a category enters the fit "
                f"through a formula (--formula \"... ~ C({name})\")")
    return (f"{found.where(name)}, which is not a number, where the rows before it hold "
            "numbers; correct the value (or leave it empty: a missing value), or leave the "
            "column out")


def _is_csv(rows) -> bool:
    rows = getattr(rows, "inner", rows)
    return isinstance(rows, TableRows) and rows.kind == "dask" and bool(rows.stamps)


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
    names = [f for f, _ in files]
    try:
        # numbers as floats: a column with a missing value further down then reads as it
        # began; the dtypes inferred from every row of dask's sample of the first bytes, not
        # only its first 10 rows (a text column whose first 10 values were missing was read
        # as numbers, and its first text value further down refused)
        ddf = dd.read_csv(names, sep=sep, assume_missing=True, storage_options=options,
                          blocksize="64MB", sample=CSV_SAMPLE_BYTES, sample_rows=None)
    except Exception as exc:
        raise InputError(f"{text}: cannot be read as CSV ({_reason(exc)})") from None
    first = _distinct_csv_header(names[0], sep, options)
    # dask reads every file with the first one's columns (by name: the order may differ);
    # a file without one of them failed only when its rows were read, naming no file
    # ("partition 1 (rows 200-399) cannot be read (KeyError: "['w'] not in index")"):
    # what each file lacks is kept, and refused where such a column is read
    lacking, beyond = {}, {}
    for file in names[1:]:
        header = _distinct_csv_header(file, sep, options)
        lacks = tuple(n for n in first if n not in header)
        if lacks:
            lacking[file] = lacks
        for name in header:
            if name not in first:
                beyond.setdefault(name, file)
    rows = _dask_rows(ddf, text, text, token, token, diagnose=_csv_diagnosis(
        names, sep, options, dict(ddf.dtypes), text))
    if lacking:
        rows = replace(rows, lacking=(names[0], lacking))
    return replace(rows, beyond=(names[0], beyond)) if beyond else rows


def _distinct_csv_header(file: str, sep: str, options: dict | None) -> list[str]:
    """The columns a CSV file's header names; refuse one naming a column twice: pandas
    renames the second 'x' to 'x.1', and ``--x x`` then read the first of the two without a
    word."""
    import csv

    import fsspec

    try:
        with fsspec.open(file, mode="rt", compression="infer", encoding="utf-8-sig",
                         newline="", **(options or {})) as handle:
            names = next(csv.reader(handle, delimiter=sep), [])
    except Exception as exc:  # noqa: BLE001 - the reader's own error, in its words
        raise InputError(f"{file}: cannot be read as CSV ({_reason(exc)})") from None
    if len(names) == 1:
        other = next((c for c in ";\t|" if c != sep and len(names[0].split(c)) > 1), None)
        if other is not None:
            said = {";": "';'", "\t": "tabs", "|": "'|'"}[other]
            raise InputError(
                f"{file}: the header is one column, {names[0][:80]!r}, which {said} "
                f"separate: streamlsq reads CSV files separated by commas (by tabs when "
                f"named .tsv); write the file with commas (e.g. pandas' read_csv(path, "
                f"sep={other!r}).to_csv(new_path, index=False))")
    names = [name for name in names if name != ""]
    distinct_column_names(file, names, " in the header")
    return names


# -- the table opened as a stream -------------------------------------------------------------


class TableInput:
    """A table opened to be read as a stream (an :class:`~streamlsq.io.parts.OpenedInput`):
    its columns are variables of one dimension, ``row``; numbers are read as floats with NaN
    for a missing value, strings as objects (they are categories: a formula encodes them)."""

    sample_first = False

    def __init__(self, rows: TableRows, dtypes: dict, label: str,
                 partitions: dict | None = None):
        self.table_rows, self.dtypes, self.label = rows, dtypes, label
        #: the partition keys of a partitioned folder, not among its columns (not read)
        self.partitions = partitions or {}
        self.members = set(map(str, dtypes))
        self.found = sorted(self.members)
        self.attrs: dict = {}
        self.n = int(rows.edges[-1])

    def default_sample_dim(self, names) -> str:
        return ROW_DIM

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        if self.table_rows.lacking:
            first, lacking = self.table_rows.lacking
            for file, lacks in lacking.items():
                read = [n for n in names if n in lacks]
                if read:
                    raise InputError(f"{file}: has no column {read[0]!r}, where {first} has "
                                     "it; the files of one table hold the same columns: "
                                     "write the column into every file, or leave it out")
        return {name: Column((ROW_DIM,), (self.n,), self.dtypes[name]) for name in names}

    def as_read(self, columns: dict[str, Column], labels: tuple = (),
                options: dict | None = None) -> dict[str, Column]:
        """Numbers (and booleans) read as float64; other columns refused unless they are
        ``labels`` (group labels, or a formula's categories). ``options``: the columns an
        option other than --x reads as numbers (--offset, --exposure, ...) -> that option,
        named in the refusal of text there instead of the advice for a feature."""
        import pandas as pd

        out = {}
        for name, column in columns.items():
            dtype = column.dtype
            numeric = pd.api.types.is_bool_dtype(dtype) or (
                pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype,
                                                                        pd.CategoricalDtype))
            if getattr(dtype, "kind", "O") in "mM" and name not in labels:
                # not numbers, and not levels either (a formula refuses them too)
                raise InputError(f"{self.label}: column '{name}' holds {dtype} values (dates "
                                 "or durations), not numbers: compute a number of them before "
                                 "the fit (e.g. days since a date)")
            if not numeric and name not in labels:
                if isinstance(dtype, pd.CategoricalDtype):
                    raise InputError(f"{self.label}: column '{name}' holds {dtype} values, "
                                     "not numbers; a category enters the fit through a "
                                     f"formula (--formula \"... ~ C({name})\")")
                # text: the first value that is not a number named, with its remedy
                option = (options or {}).get(name)
                raise InputError(text_for_numbers(self.table_rows, name, self.n,
                                                  self.table_rows.chunk_rows,
                                                  "option" if option else "x",
                                                  factor=option))
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
        return self.table_rows

    def categories(self, name: str) -> tuple | None:
        """The levels a column declares itself (a pandas category), else None."""
        import pandas as pd

        dtype = self.dtypes.get(name)
        if isinstance(dtype, pd.CategoricalDtype) and dtype.categories is not None:
            from dask.dataframe.utils import has_known_categories

            # a dask DataFrame's categories may be unknown (read lazily): found by a pass;
            # so are none declared, as dask declares a Parquet dictionary column whose file
            # keeps no pandas metadata (polars writes it so): known, but empty
            if self.table_rows.kind == "dask" and (
                    len(dtype.categories) == 0
                    or not has_known_categories(self.table_rows.frame[name])):
                return None
            return tuple(dtype.categories.tolist())
        return None


def open_table(data, storage_options: dict | None = None, file_kind: str | None = None
               ) -> TableInput:
    """A table (see :func:`is_table`) opened and its parts counted; refused when it has no
    rows. ``file_kind``: ``"parquet"`` for files no suffix tells (a folder by URL)."""
    kind = _frame_kind(data)
    shown = f"{kind} DataFrame"  # a polars frame read as pandas is still named as given
    if kind == "polars":
        data, kind = _polars_as_pandas(data), "pandas"
    if kind in ("pandas", "dask"):
        if not data.columns.map(lambda c: isinstance(c, str)).all():
            raise InputError(f"{shown}: name its columns with strings")
        distinct_column_names(shown, [str(c) for c in data.columns])
    if kind == "pandas":
        data = _decimal_objects_as_floats(data)
        rows = _pandas_rows(data, shown)
        return _with_rows(TableInput(rows, dict(rows.frame.dtypes), rows.shown))
    if kind == "dask":
        from dask.base import tokenize

        rows = _dask_rows(data, "dask DataFrame", "dask DataFrame", tokenize(data), None)
        return _with_rows(TableInput(rows, dict(data.dtypes), rows.shown))
    text = os.fspath(data)
    if not is_url(text) and not any(c in text for c in "*?[") and not os.path.exists(text):
        raise InputError(not_a_url(text) or f"{text}: no such file or folder")
    partitions = {}
    if (file_kind or _file_kind(text)) == "parquet":
        rows, dtypes, partitions = _parquet_rows(text, storage_options)
    else:
        rows = _csv_rows(text, storage_options)
        dtypes = dict(rows.frame.dtypes)
    return _with_rows(TableInput(rows, dtypes, text, partitions))


def _with_rows(table: TableInput) -> TableInput:
    """The table, refused when it has no rows (a CSV file of a header alone: a store of no
    rows, or a fit of nothing, would follow)."""
    if table.n == 0:
        raise InputError(f"{table.label}: the table has no rows (columns: "
                         f"{', '.join(map(str, table.dtypes)) or 'none'})")
    return table
