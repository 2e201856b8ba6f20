"""Stream stores: ``X (sample, feature)`` and ``y (sample, target)``, validated and read.

:func:`open_stream` checks the layout (names, dims, dtypes, lengths, every chunk
present) before any work or output and returns a :class:`StreamSource`, a small
picklable description that any worker uses to read a row range; values (NaN/Inf)
are checked chunk by chunk as they are read, and an error names the store, the
variable and the chunk. See ``docs/stores.md``.

The data may be a Zarr store (a local folder, an fsspec URL such as ``s3://…``, or a
zarr store object) or an :class:`xarray.Dataset`, lazy (dask-backed: opened from NetCDF
files, a Zarr store in a bucket) or in memory. Instead of one matrix ``X`` the features
may be several variables along one dimension (``x=["a", "b"]``, the layout of most tabular
Zarr and NetCDF datasets), the targets likewise (``y="d"``), along a dimension of any name
(``sample_dim="time"``). ``fit_intercept=True`` prepends a constant column to what the
recursion reads. The labels of the features (variable names, or the coordinate of X's
feature dimension) and of the targets travel with the source into every result.

One path from any input to the source: the input is opened as an
:class:`~streamlsq.io.parts.OpenedInput` — a :class:`StoreInput`, a :class:`DatasetInput`, a
table's :class:`~streamlsq.io.tables.TableInput`, any of them wrapped in a formula's
:class:`~streamlsq.io.formulas.DesignInput` (what differs: where the variables are found, how
their rows are read) — the same checks run on the selected variables of any, and one
:class:`StreamSource` is built from three parts: where the rows come from (a
:class:`~streamlsq.io.parts.RowsReader`: :class:`~streamlsq.io.stores.StoreRows`,
:class:`DatasetRows`, a table's or a formula's), which variables along which dimension
(:class:`StreamVariables`) and their labels (:class:`ColumnLabels`).

Values are those xarray gives: a store streamlsq opens itself is read as ``xr.open_zarr``
would decode it with its defaults (CF ``scale_factor``/``add_offset``, ``_FillValue`` and
``missing_value`` masked to NaN, ``_Unsigned``, ``dtype: bool``; see
:class:`~streamlsq.io.stores.CFDecoding`), and a Dataset is taken as its user decoded it. A
decoded fill value is a missing value, refused like any NaN.

How the workers read a Dataset: a dask-backed variable is read through its own dask
array, each Dask task computing the rows it needs with the synchronous scheduler (the
files behind it, NetCDF or Zarr, are opened by the worker itself, as a store path is);
the arrays of an in-memory Dataset travel with the source (they are pickled into the
tasks that read them, as dask does for arrays wrapped by ``dask.array.from_array``). No
temporary copy of the data is ever written.
"""

from __future__ import annotations

import contextlib
import numbers
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass, field, replace

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.formulas import DESIGN, RESPONSE, DesignInput
from streamlsq.io.location import check_storage_options, locate
from streamlsq.io.names import look_alike
from streamlsq.io.parts import TARGET_CHUNK_ELEMENTS, Column, OpenedInput, RowsReader
from streamlsq.io.stores import (
    StoreRows,
    StoreSource,
    array_names,
    cf_decodings,
    check_complete,
    check_numeric,
    check_weights,
    dimension_names,
    forwarded,
    get_array,
    missing_labels,
    nonfinite,
    open_group,
    require_dimension_names,
    split_group,
    store_label,
    store_token,
)
from streamlsq.io.tables import (
    column_of_later_files,
    is_parquet_folder_url,
    is_table,
    open_table,
    partition_note,
)

__all__ = [
    "MISSING",
    "ColumnLabels",
    "DatasetInput",
    "DatasetRows",
    "StoreInput",
    "StreamSource",
    "StreamVariables",
    "open_stream",
]


STREAM_DIMS = {"X": ("sample", "feature"), "y": ("sample", "target")}


@dataclass(frozen=True)
class DatasetRows:
    """Where the rows of an xarray Dataset come from: its selected variables, sample
    dimension first, as NumPy arrays (in memory: they travel with the source) or dask arrays
    (lazy: each task computes the rows it reads with the synchronous scheduler).

    Values are taken as the Dataset holds them (its user decoded it); ``chunk_rows`` names
    the chunks in messages, ``extras`` holds small whole variables (``coef_true``).
    """

    arrays: dict = field(compare=False, hash=False, repr=False)
    path: str
    shown: str
    token: str
    chunk_rows: int
    extras: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    #: a Dataset has no group, no chunk files and no stamps
    group = None

    @property
    def in_memory(self) -> bool:
        """A Dataset's rows have no files behind them."""
        return True

    @property
    def from_table(self) -> bool:
        return False

    @property
    def label(self) -> str:
        return store_label(self.shown or self.path, None)

    def array(self, name: str):
        raise InputError(f"{self.label}: variable '{name}' belongs to an xarray Dataset, not "
                         "to a store")

    def rows_per_chunk(self, name: str) -> int:
        return self.chunk_rows

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of variable ``name``, computed here when dask-backed."""
        arr = self.arrays[name][start:stop]
        if hasattr(arr, "compute"):  # dask: this task computes its rows itself
            arr = arr.compute(scheduler="sync")
        return np.asarray(arr)

    def reading(self, names, start: int, stop: int):
        """Each variable is its own array: its reads share nothing."""
        return contextlib.nullcontext()

    def chunk_stamps(self, names, contents: bool = False) -> dict:
        return {}

    def read_variable(self, name: str) -> np.ndarray | None:
        value = self.extras.get(name)
        return None if value is None else np.asarray(value)


#: what ``missing=`` may be: refuse a NaN (as every reader does by default), or drop its row
MISSING = ("raise", "drop")


@dataclass(frozen=True)
class StreamVariables:
    """Which variables hold a stream's features (``x_vars``) and targets (``y_vars``), along
    which dimension, and whether a constant column is prepended to the features
    (``intercept``); the precision weights of the rows (``weights``), their group labels
    (``groups``, for cluster-robust covariances) and what a missing value does
    (``missing``), and the formula that builds the features and targets from the input's
    columns (``formula``, :mod:`streamlsq.io.formulas`): what a result records and a continued
    or resumed fit must match."""

    x_vars: tuple[str, ...] = ("X",)
    y_vars: tuple[str, ...] = ("y",)
    sample_dim: str = "sample"
    intercept: bool = False
    weights: str | None = None
    groups: str | None = None
    missing: str = "raise"
    formula: str | None = None

    def selection(self) -> dict:
        """What was selected: the entries of :data:`DEFAULT_SELECTION`, and those of
        :data:`SELECTION_DEFAULTS` given other values."""
        out = {"x": list(self.x_vars), "y": list(self.y_vars), "sample_dim": self.sample_dim,
               "fit_intercept": bool(self.intercept)}
        # only when given: the fingerprints of the fits without them stay as they were
        out.update({k: v for k, v in (("weights", self.weights), ("groups", self.groups),
                                      ("formula", self.formula)) if v is not None})
        if self.missing != "raise":
            out["missing"] = self.missing
        return out


#: the selection of a plain stream store (a fit's fingerprint leaves it out, and stays as
#: before), and what each entry a selection leaves out means (a checkpoint's refusal of a
#: resume compares them: a selection left out is this one)
DEFAULT_SELECTION = {"x": ["X"], "y": ["y"], "sample_dim": "sample", "fit_intercept": False}
SELECTION_DEFAULTS = {**DEFAULT_SELECTION, "weights": None, "groups": None, "formula": None,
                      "missing": "raise"}


@dataclass(frozen=True)
class ColumnLabels:
    """Labels of the data's own feature and target columns (variable names, or the values of
    the coordinate of a 2-D variable's second dimension); empty when the data do not name
    them."""

    features: tuple = ()
    targets: tuple = ()


@dataclass(frozen=True)
class StreamSource(StoreSource):
    """A validated stream: enough to read any row range from any worker (picklable).

    ``rows`` says where the rows come from (a store, or an xarray Dataset's arrays),
    ``variables`` which variables hold the features and targets along which dimension,
    ``column_labels`` their labels. ``n_features`` counts the columns the recursion reads
    (with the constant column of ``intercept``).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3)
    >>> source = streamlsq.open_stream(path)
    >>> X, Y = source.read(0, 5)
    >>> X.shape, Y.shape
    ((5, 3), (5, 1))
    >>> tmp.cleanup()
    """

    rows: RowsReader
    variables: StreamVariables
    column_labels: ColumnLabels
    n_rows: int
    n_features: int
    n_targets: int
    chunk_rows: int
    block_size: int
    attrs: dict = field(default_factory=dict, compare=False, hash=False)

    weights = forwarded("variables", "weights", "The variable of the rows' precision weights.")
    groups = forwarded("variables", "groups", "The variable of the rows' group labels.")
    missing = forwarded("variables", "missing", "What a missing value (NaN) does: 'raise' "
                        "refuses it, 'drop' drops its row (weight 0).")
    x_vars = forwarded("variables", "x_vars", "The variables holding the features.")
    y_vars = forwarded("variables", "y_vars", "The variables holding the targets.")
    sample_dim = forwarded("variables", "sample_dim", "The dimension rows are read along.")
    intercept = forwarded("variables", "intercept",
                          "Whether a constant column is prepended to the features.")
    features = forwarded("column_labels", "features", "Labels of the data's feature columns.")
    targets = forwarded("column_labels", "targets", "Labels of the data's target columns.")

    @property
    def n_data_features(self) -> int:
        """Columns of the data (without the constant column of ``intercept``)."""
        return self.n_features - int(self.intercept)

    def selection(self) -> dict:
        """Which variables, along which dimension, with or without the constant column: what
        a result records and a continued or resumed fit must match."""
        return self.variables.selection()

    def chunk_edges(self) -> np.ndarray:
        """Row offsets of the storage chunks of X: [0, c, 2c, ..., n_rows]."""
        edges = np.arange(0, self.n_rows, self.chunk_rows, dtype=np.int64)
        return np.append(edges, self.n_rows)

    def _stack(self, names, start, stop, dtype, check, allow_nan=False) -> np.ndarray:
        if not names:  # new rows without targets
            return np.zeros((stop - start, 0), dtype=dtype)
        parts = [self.read_rows(n, start, stop, dtype, check, allow_nan) for n in names]
        if len(parts) == 1:
            return parts[0]
        return np.column_stack([p[:, None] if p.ndim == 1 else p for p in parts])

    def read(self, start: int, stop: int, dtype=np.float64, check: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start:stop`` as (X (n, q), Y (n, K)) in ``dtype``; refuses NaN/Inf by chunk.

        ``check=False`` skips the value check, for callers that check what they
        computed from the rows instead (and re-read with the check to name the row).
        """
        with self.rows.reading((*self.x_vars, *self.y_vars), start, stop):
            return (self.read_features(start, stop, dtype, check),
                    self.read_targets(start, stop, dtype, check))

    def read_features(self, start: int, stop: int, dtype=np.float64, check: bool = True,
                      allow_nan: bool = False, with_constant: bool = True) -> np.ndarray:
        """Rows ``start:stop`` of the features alone (with the constant column first when
        ``intercept``, unless ``with_constant=False``: for a kernel that makes the column
        itself; values checked like :meth:`read`, NaN let through with ``allow_nan``)."""
        X = self._stack(self.x_vars, start, stop, dtype, check, allow_nan)
        if X.ndim == 1:
            X = X[:, None]
        if self.intercept and with_constant:
            out = np.empty((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
            out[:, 0] = 1
            out[:, 1:] = X
            X = out
        return X

    def read_targets(self, start: int, stop: int, dtype=np.float64, check: bool = True,
                     allow_nan: bool = False) -> np.ndarray:
        """Rows ``start:stop`` of the targets alone, (n, K) (values checked like
        :meth:`read`, NaN let through with ``allow_nan``)."""
        Y = self._stack(self.y_vars, start, stop, dtype, check, allow_nan)
        return Y[:, None] if Y.ndim == 1 else Y

    def read_weighted(self, start: int, stop: int, dtype=np.float64, check: bool = True,
                      with_constant: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Rows ``start:stop`` as (X, Y, w): the rows' precision weights ``w`` (None when
        every row weighs 1: no weights and nothing dropped).

        A weight must be finite and ≥ 0 (refused naming its chunk and row). With
        ``missing="drop"`` a row with a NaN in any selected variable (features, targets,
        weights, groups) gets weight 0 and zeros for its values: it is left out of the fit
        without changing the blocks (a fill value decodes to NaN: a missing value); an Inf
        is still refused. ``check=False`` skips the refusal of Inf (and of NaN when
        nothing is dropped), for callers that check what they computed from the rows.
        ``with_constant`` as :meth:`read_features`'."""
        drop = self.missing == "drop"
        # every column of these rows read at once (a table's part decoded once for all)
        names = (*self.x_vars, *self.y_vars, *(() if self.weights is None else (self.weights,)),
                 *(_group_names(self.groups) if drop else ()))
        with self.rows.reading(names, start, stop):
            X = self.read_features(start, stop, dtype, check, allow_nan=drop,
                                   with_constant=with_constant)
            Y = self.read_targets(start, stop, dtype, check, allow_nan=drop)
            w = None
            if self.weights is not None:
                w = self.read_rows(self.weights, start, stop, np.float64, check=False)
                check_weights(self.label, self.weights, w, start,
                              self.rows.rows_per_chunk(self.weights), allow_nan=drop)
            if not drop:
                return X, Y, w
            labels = self.read_label_columns(start, stop) if self.groups is not None else ()
        dropped = np.zeros(stop - start, dtype=bool)
        for values in (X, Y):
            bad = nonfinite(values)
            if bad is not None:
                dropped |= (bad & np.isnan(values)).any(axis=1)
        if w is not None:
            dropped |= np.isnan(w)
        for column in labels:
            dropped |= missing_labels(column)
        if dropped.any():  # new arrays: the rows read may be a view of the user's data
            w = np.where(dropped, 0.0, 1.0 if w is None else w)
            X = np.where(dropped[:, None], X.dtype.type(0), X)
            Y = np.where(dropped[:, None], Y.dtype.type(0), Y)
        return X, Y, w

    def read_labels(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of the group labels (integers, numbers or strings, as
        decoded); a missing label (NaN, or an empty string) is refused naming its row
        unless ``missing="drop"`` (its row is then dropped: :meth:`read_weighted`); those of
        the first group variable when there are two (:meth:`read_label_columns` reads
        each)."""
        return self.read_label_columns(start, stop)[0]

    def read_label_columns(self, start: int, stop: int) -> tuple[np.ndarray, ...]:
        """Rows ``start:stop`` of each group variable (``groups``, comma-separated), as
        :meth:`read_labels` checks them."""
        out = []
        for name in _group_names(self.groups):
            labels = np.asarray(self.rows.read(name, start, stop))
            if self.missing != "drop":
                gone = missing_labels(labels)
                if gone.any():
                    row = start + int(np.flatnonzero(gone)[0])
                    chunk = row // self.rows.rows_per_chunk(name)
                    raise InputError(f"{self.label}: variable '{name}' chunk {chunk} has no "
                                     f"label at row {row}; give every row a group, or drop "
                                     "the rows without one with --missing drop "
                                     '(missing="drop")')
            if labels.dtype.kind == "O":
                self._check_label_kinds(labels, start, name)
            out.append(labels)
        return tuple(out)

    def _check_label_kinds(self, labels: np.ndarray, start: int, name: str) -> None:
        """Labels of Python objects (a pandas column of object dtype) must all be strings:
        a number among them is refused naming its row (the groups are sorted and merged by
        label, and a number does not compare with a string; as text, 1 and '1' would become
        one group unseen)."""
        for i, v in enumerate(labels.ravel()):
            if v is None or isinstance(v, str) or (isinstance(v, float) and v != v):
                continue
            row = start + i
            chunk = row // self.rows.rows_per_chunk(name)
            raise InputError(f"{self.label}: variable '{name}' chunk {chunk} has the "
                             f"group label {v!r} of type {type(v).__name__} at row {row} among "
                             "labels of Python objects; the labels of one variable are all "
                             "numbers or all strings: convert them (e.g. .astype(str))")


def _names(value, default: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return default
    if isinstance(value, tuple) and not value:  # new rows without targets
        return ()
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")] if "," in value else [value]
    else:
        items = [str(v) for v in value]
    items = [v for v in items if v]
    if not items:
        raise InputError("name at least one variable")
    return tuple(items)


def _label_values(values) -> tuple:
    out = []
    for v in np.asarray(values).tolist():
        out.append(v.decode() if isinstance(v, bytes) else v)
    return tuple(out)


class StoreInput:
    """An :class:`~streamlsq.io.parts.OpenedInput`: a Zarr group opened to be read as a stream:
    variables are its arrays, their sample dimension must come first (the one they are chunked
    along), the values are read as xarray decodes them, and every chunk must be written."""

    sample_first = True

    def __init__(self, loc, group: str | None):
        self.loc, self.group = loc, group
        self.label = store_label(loc.shown or loc.url, group)
        self.g = open_group(loc, group)
        self.members = array_names(self.g, self.label)
        self.found = sorted(self.members)
        self.attrs = dict(self.g.attrs)
        self.arrays: dict = {}
        self.decodings: dict = {}

    def default_sample_dim(self, names) -> str:
        return "sample"

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        """The arrays ``names`` as they are stored."""
        self.arrays = {name: get_array(self.g, self.label, name) for name in names}
        for name, arr in self.arrays.items():
            require_dimension_names(arr, self.label, self.loc.shown or self.loc.url,
                                    self.group, name, dim)
        return {name: Column(dimension_names(a), tuple(a.shape), a.dtype)
                for name, a in self.arrays.items()}

    def as_read(self, columns: dict[str, Column], labels: tuple = (),
                options: dict | None = None) -> dict[str, Column]:
        """The columns with the dtypes xarray decodes them to, refused unless real numbers
        (``labels``: the variables of group labels, which may be strings)."""
        self.decodings = cf_decodings(self.loc, self.group, self.arrays, self.label)
        for name, column in columns.items():
            if name not in labels:
                check_numeric(self.label, name, column.dtype, self.decodings.get(name))
        return {name: replace(c, dtype=self.decodings[name].dtype)
                if name in self.decodings else c for name, c in columns.items()}

    def check_complete(self) -> None:
        for name, arr in self.arrays.items():
            check_complete(self.label, name, arr, self.attrs, self.loc.url, self.group)

    def coordinate(self, dim: str, size: int) -> tuple | None:
        """The labels stored in the 1-D coordinate array ``dim`` of length ``size``."""
        if dim not in self.members:
            return None
        c = self.g[dim]
        return _label_values(c[...]) if c.ndim == 1 and c.shape[0] == size else None

    def chunk_rows(self, first: str, n: int, width: int) -> int:
        return int(self.arrays[first].chunks[0])

    def rows(self, chunk_rows: int) -> StoreRows:
        return StoreRows(self.loc, self.group, store_token(self.loc), self.decodings)

    def categories(self, name: str) -> tuple | None:
        """The levels of a column of strings that a store declares (``streamlsq convert``
        writes them in its ``categories`` attribute), else None."""
        if name not in self.arrays:
            return None
        arr = self.arrays[name]
        return declared_levels(arr.attrs, arr.shape[0], f"{self.label}: variable '{name}'")


def declared_levels(attrs, n_rows: int, where: str = "") -> tuple | None:
    """The levels a variable's ``categories`` attribute declares, else None. When the
    attribute says over how many rows they were found (``categories_rows``, as ``streamlsq
    convert`` writes it) and the variable has grown since, the levels are stale (the rows
    appended may hold new ones): None, so that a pass over the rows finds them. Attributes
    that are not what ``convert`` writes (a list of distinct strings or numbers, a count of
    rows) are refused naming the variable (``where``)."""
    levels = attrs.get("categories")
    if levels is None:
        return None
    counted = attrs.get("categories_rows")
    if isinstance(levels, (tuple, np.ndarray)):  # a Dataset's own attribute
        levels = list(levels)
    counts = counted is None or (isinstance(counted, numbers.Integral)
                                 and not isinstance(counted, bool))
    if not (isinstance(levels, list) and all(isinstance(v, (str, numbers.Real)) and
                                             not isinstance(v, bool) for v in levels)
            and len(set(levels)) == len(levels)) or not counts:
        bad = "categories" if counts else "categories_rows"
        raise InputError(f"{where or 'a variable'}: its attribute {bad} "
                         f"({str(attrs.get(bad))[:60]!r}) is not what streamlsq convert writes "
                         "(a list of distinct levels, the rows they were found over); the "
                         "store is damaged: remove the attribute (the levels are then found "
                         "by a pass over the rows) or convert the table again")
    if counted is not None and int(counted) != int(n_rows):
        return None
    return tuple(levels)


class DatasetInput:
    """An :class:`~streamlsq.io.parts.OpenedInput`: an xarray Dataset opened to be read as a stream:
    variables are its variables, the sample dimension may be anywhere in their dims (they are
    read transposed) and is found by itself when it is the only one they share; values are taken
    as the Dataset holds them."""

    sample_first = False

    def __init__(self, ds):
        self.ds = ds
        source = ds.encoding.get("source")
        self.path = str(source) if source else "<xarray.Dataset>"
        self.label = f"xarray Dataset ({source})" if source else "xarray Dataset"
        self.members = set(map(str, ds.variables))
        self.found = sorted(map(str, ds.data_vars))
        self.attrs = dict(ds.attrs)
        self.selected: dict = {}

    def default_sample_dim(self, names) -> str:
        dims = {d for v in names for d in self.ds[v].dims}
        shared = [d for d in self.ds[names[0]].dims if all(d in self.ds[v].dims for v in names)]
        if "sample" in dims:
            return "sample"
        if len(shared) == 1:
            return shared[0]
        raise InputError(f"{self.label}: name the sample dimension with sample_dim= "
                         f"(--sample-dim); the variables have dims {sorted(dims)}")

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        """The variables ``names``, with the sample dimension ``dim`` first where they have it
        (the rows are read along it)."""
        self.selected = {name: self.ds[name].transpose(dim, ...) if dim in self.ds[name].dims
                         else self.ds[name] for name in names}
        return {name: Column(tuple(v.dims), tuple(v.shape), v.dtype)
                for name, v in self.selected.items()}

    def as_read(self, columns: dict[str, Column], labels: tuple = (),
                options: dict | None = None) -> dict[str, Column]:
        """The columns as they are (the Dataset's user decoded them), refused unless real
        numbers (``labels``: the variables of group labels, which may be strings)."""
        for name, column in columns.items():
            if name not in labels:
                check_numeric(self.label, name, column.dtype)
        return columns

    def check_complete(self) -> None:
        """A Dataset has no chunk that could be missing."""

    def coordinate(self, dim: str, size: int) -> tuple | None:
        return _label_values(self.ds.coords[dim].values) if dim in self.ds.coords else None

    def chunk_rows(self, first: str, n: int, width: int) -> int:
        """Rows of the first feature variable's dask chunks, or of about 25 MB in memory."""
        chunks = self.selected[first].chunks
        if chunks is not None:
            return int(chunks[0][0])
        return int(max(1, min(n, TARGET_CHUNK_ELEMENTS // max(width, 1))))

    def rows(self, chunk_rows: int) -> DatasetRows:
        from dask.base import tokenize

        arrays = {name: v.data for name, v in self.selected.items()}
        extras = {}
        if "coef_true" in self.ds.variables and self.ds["coef_true"].size <= 1_000_000:
            extras["coef_true"] = np.asarray(self.ds["coef_true"].values)
        return DatasetRows(arrays, self.path, self.label, tokenize(*arrays.values()),
                           chunk_rows, extras)

    def categories(self, name: str) -> tuple | None:
        """The levels a variable declares (its ``categories`` attribute), else None."""
        return declared_levels(self.ds[name].attrs, self.ds[name].shape[0],
                               f"{self.label}: variable '{name}'")


def _shown(value) -> str:
    """A short text of a Python value given as data (an array's first values only)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _open_input(data, group: str | None, storage_options: dict | None) -> OpenedInput:
    """The input opened: a store by its location, a Dataset as it is, and a zarr store
    without a location (e.g. a ``MemoryStore``) as xarray opens it."""
    # a Dataset exists only if xarray was imported: a store opens without importing it
    # (`streamlsq info` starts fast)
    xr = sys.modules.get("xarray")
    if xr is not None and isinstance(data, xr.DataArray):
        raise InputError("pass an xarray Dataset (ds[['a', 'b']] or da.to_dataset()), "
                         "not a DataArray")
    if xr is not None and isinstance(data, xr.Dataset):
        return DatasetInput(data)
    if is_table(data):  # Parquet, CSV, a pandas, polars or dask DataFrame
        return open_table(data, storage_options)
    loc = locate(data, storage_options)
    if loc is not None:
        try:
            return StoreInput(loc, group)
        except InputError:
            # a folder of Parquet files by URL (s3://bucket/flights/: no suffix tells it from
            # a store; it was refused as "not a readable Zarr group")
            if group is None and isinstance(data, str) and is_parquet_folder_url(
                    data, storage_options):
                return open_table(data, storage_options, file_kind="parquet")
            raise
    import xarray as xr
    import zarr

    if not isinstance(data, zarr.abc.store.Store | MutableMapping):
        # not "No group found in store None", nor zarr's "Unsupported type for store_like"
        raise InputError(f"{type(data).__name__} {_shown(data)}: not the data of a fit: give "
                         "a store's path or URL, a zarr store, an xarray Dataset, or a table "
                         "(Parquet or CSV path, pandas, polars or dask DataFrame)")
    try:
        return DatasetInput(xr.open_zarr(data, group=group, consolidated=None))
    except Exception as exc:
        raise InputError(f"{data!r}: not a readable Zarr store ({exc})") from None


def open_stream(data, group: str | None = None, *, x=None, y=None,
                sample_dim: str | None = None, fit_intercept: bool = False,
                storage_options: dict | None = None, targets: bool = True,
                weights: str | None = None, groups: str | None = None,
                missing: str = "raise", formula: str | None = None,
                levels: dict | None = None, named_by: dict | None = None) -> StreamSource:
    """Open and validate a stream store's layout; raise :class:`InputError` on any defect.

    ``data`` is a path, an fsspec URL (``s3://bucket/data.zarr``; ``storage_options`` for
    its filesystem), a zarr store object or an :class:`xarray.Dataset`; ``PATH#GROUP``
    names the group ``GROUP`` of a store, as ``group=`` does. ``x`` names the
    feature variables (one 2-D variable, default ``"X"``, or several 1-D ones) and ``y``
    the target variables (default ``"y"``), all along the dimension ``sample_dim`` (default
    ``sample``); ``fit_intercept`` prepends a constant column to the features.
    ``targets=False`` opens new rows whose targets may be missing (applying a fit: then
    ``y_vars`` is empty and ``n_targets`` 0). A store is read as ``xr.open_zarr`` decodes it;
    a Dataset as it is. ``weights`` names a variable of the rows' precision weights,
    ``groups`` one of their group labels (numbers or strings), both one value per row;
    ``missing="drop"`` drops the rows with a NaN in any of these variables
    (:meth:`StreamSource.read_weighted`) instead of refusing them.

    ``data`` may also be a table (:mod:`streamlsq.io.tables`: Parquet or CSV files by path,
    glob or URL, a pandas, polars or dask DataFrame), whose columns are variables along
    ``row``. ``formula`` (``"y ~ x + C(k)"``) builds the features and targets from the
    columns (:mod:`streamlsq.io.formulas`): ``x`` and ``y`` are then the variables
    ``design`` and ``response``, and ``levels`` ({column: levels}) fixes the categories'
    levels (a fit's, applied to new rows) instead of finding them.

    ``named_by`` ({variable: (what named it, remedy)}): for the refusal of a missing
    variable of ``x`` named by another option (a GLM's ``--exposure``, its fit's exposure
    in new rows), that option and what to do, rather than ``--x``'s.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3,
    ...                                  chunk_rows=4_000)
    >>> source = streamlsq.open_stream(path)
    >>> source.n_rows, source.n_features, source.n_targets, source.chunk_rows
    (10000, 3, 1, 4000)
    >>> import numpy as np, xarray as xr
    >>> ds = xr.Dataset({"a": ("time", np.arange(4.0)), "b": ("time", np.ones(4)),
    ...                  "d": ("time", np.arange(4.0) * 2)})
    >>> source = streamlsq.open_stream(ds, x=["a", "b"], y="d", sample_dim="time")
    >>> source.features, source.read(0, 2)[0].tolist()
    (('a', 'b'), [[0.0, 1.0], [1.0, 1.0]])
    >>> tmp.cleanup()
    """
    if missing not in MISSING:
        raise InputError(f"missing must be 'raise' or 'drop', got {missing!r}")
    check_storage_options(storage_options, [data])  # a local path would ignore them
    data, group = split_group(data, group)  # PATH#GROUP, as the command line reads it
    table = _open_input(data, group, storage_options)
    if formula is not None:
        if x is not None or y is not None:
            raise InputError("--formula names the features and the targets: leave out --x "
                             "and --y (x=, y=)")
        table, x, y = DesignInput(table, formula, levels, targets), DESIGN, RESPONSE
    x_vars, y_vars = _names(x, ("X",)), _names(y, ("y",))
    if not targets:
        y_vars = _present(y_vars, table.members)
    names = (*x_vars, *y_vars)
    group_vars = _group_names(groups)
    per_row = tuple(v for v in (weights, *group_vars) if v is not None)
    taken = [v for v in per_row if formula is not None and v in (DESIGN, RESPONSE)]
    if taken:  # the formula's two sides by name: a column so named was read as one of them
        raise InputError(f"{table.label}: the variable '{taken[0]}' of the rows' weights or "
                         f"labels is, with a formula, the formula's {taken[0]} matrix; "
                         f"rename the column '{taken[0]}' of the input to use it so")
    strict = table.sample_first and x is None and y is None and sample_dim is None and targets
    named = {name: (f"--{option} ({option}=)",
                    f"name one of the variables found with --{option}")
             for option, given in (("weights", (weights,)), ("groups", group_vars))
             for name in given if name is not None}
    if x is not None and formula is None:
        named.update({name: ("--x (x=)", "name the feature variables with --x (x=)")
                      for name in x_vars})
    if y is not None and formula is None:
        named.update({name: ("--y (y=)", "name the targets with --y (y=)") for name in y_vars})
    _require(table, names + per_row, strict, named | dict(named_by or {}))
    dim = sample_dim or table.default_sample_dim(names)
    columns = table.columns(names + per_row, dim)
    if strict:
        _check_stream_dims(table.label, columns)
    for name, column in columns.items():
        if not strict or name in per_row:
            _check_sample_dim(table.label, name, column, dim, table.sample_first,
                              sample_dim is not None)
    for name in per_row:
        if len(columns[name].shape) != 1:
            raise InputError(f"{table.label}: variable '{name}' has dims "
                             f"{columns[name].dims}, expected ('{dim}',): one value per row")
    # a column an option other than --x reads (--offset, --exposure, ...): its text is
    # refused naming that option, not advised into a formula as a feature
    options = {name: option for name, (option, _) in named.items()
               if name == weights} | {name: option for name, (option, _)
                                       in dict(named_by or {}).items()}
    columns = table.as_read(columns, labels=group_vars, options=options)
    n, width, n_targets, y_is_vector = _column_counts(table.label, columns, x_vars, y_vars,
                                                      formula is not None and fit_intercept)
    table.check_complete()
    labels = ColumnLabels(
        _labels(x_vars, columns, table),
        () if y_is_vector or not y_vars else _labels(y_vars, columns, table))
    if fit_intercept and formula is None and "intercept" in map(str, labels.features):
        # the constant is labelled 'intercept': two coefficients of one label, which
        # predict, summary and wald_test cannot tell apart
        raise InputError(f"{table.label}: the feature 'intercept' has the name the fit gives "
                         "its constant column (--intercept, fit_intercept=True): two "
                         "coefficients would be labelled 'intercept'; rename the column, or "
                         "leave out --intercept")
    chunk_rows = table.chunk_rows(x_vars[0], n, width)
    return StreamSource(
        rows=table.rows(chunk_rows),
        variables=StreamVariables(x_vars, y_vars, dim, bool(fit_intercept), weights, groups,
                                  missing, formula),
        column_labels=labels,
        n_rows=n,
        n_features=width + int(bool(fit_intercept)),
        n_targets=n_targets,
        chunk_rows=chunk_rows,
        block_size=int(table.attrs.get("block_size", chunk_rows)),
        attrs=table.attrs,
    )


def _group_names(groups: str | None) -> tuple[str, ...]:
    """The group variables of ``groups``: none, one, or two comma-separated (two-way)."""
    if groups is None:
        return ()
    names = tuple(name.strip() for name in str(groups).split(",") if name.strip())
    # a third variable used to fail after the fit (exit 1), a variable named twice made a
    # two-way covariance of one way
    if len(names) > 2:
        raise InputError(f"--groups {groups}: names {len(names)} variables; a cluster-robust "
                         "covariance takes one group variable, or two (A,B: two-way)")
    if len(names) == 2 and names[0] == names[1]:
        raise InputError(f"--groups {groups}: names '{names[0]}' twice; two-way clusters "
                         "take two different variables (one: --groups "
                         f"{names[0]})")
    return names


def _present(names: tuple[str, ...], members: set) -> tuple[str, ...]:
    """The target variables to read from new rows: all of them, or none when one is
    missing (the rows are then only predicted)."""
    return names if all(n in members for n in names) else ()


def _comma_note(name: str, members) -> str:
    """For a name cut from a variable whose name holds a comma (``--x 'a,b'`` reads 'a' and
    'b'): that variable, and how to name it."""
    whole = sorted(m for m in map(str, members) if "," in m and name in m.split(","))
    if not whole:
        return ""
    return (f"; the variable '{whole[0]}' has a comma in its name, where --x and --y (and "
            "the other options of names) cut a list: name it in a formula, in backticks "
            f"(--formula \"... ~ `{whole[0]}`\"), or rename it")


def _groups_note(table: OpenedInput) -> str:
    """For a store (or group) holding no array but groups, the groups to name: its data
    lie in one of them (``pop.zarr#lvl`` of ``lvl/t``)."""
    g = getattr(table, "g", None)
    if g is None or table.members:
        return ""
    from streamlsq.io.stores import group_paths

    groups = group_paths(g)
    if not groups:
        return ""
    base = str(table.loc.shown or table.loc.url).rstrip("/")
    inner = f"{table.group}/" if table.group else ""
    leaf = next(p for p in groups if not any(q.startswith(p + "/") for q in groups))
    return (f"; it holds groups, not arrays ({', '.join(groups[:6])}"
            f"{', ...' if len(groups) > 6 else ''}): name one, as {base}#{inner}{leaf}")


def _require(table: OpenedInput, names, strict: bool, named: dict) -> None:
    """Refuse the first of ``names`` the input does not hold, naming what it holds and the
    option that named it with its remedy (``named``: name -> (option, remedy)), else the
    layout it should have."""
    layout = ("a stream store needs X (sample, feature) and y (sample, target)" if strict
              else "name the feature variables with --x (x=) and the targets with --y (y=)")
    for name in names:
        if name not in table.members:
            similar = (look_alike(name, table.members, "variable")
                       or partition_note(table, name) or _comma_note(name, table.members)
                       or _groups_note(table))
            option, remedy = named.get(name, (None, layout))
            given = f" named by {option}" if option else ""
            raise InputError(column_of_later_files(table, name) or
                             f"{table.label}: variable '{name}'{given} is missing (found: "
                             f"{table.found or 'none'}){similar or '; ' + remedy}")


def _check_stream_dims(label: str, columns: dict[str, Column]) -> None:
    """The dims of a stream store named by default: X (sample, feature), y (sample, target)
    or (sample,)."""
    X, y = columns["X"], columns["y"]
    for name, column in columns.items():
        _check_sample_first(label, name, column, "sample")
    if X.dims != STREAM_DIMS["X"] or len(X.shape) != 2:
        raise InputError(
            f"{label}: variable 'X' has dims {X.dims or X.shape}, expected ('sample', "
            "'feature'); name another layout with --x, --y and --sample-dim")
    if y.dims not in (STREAM_DIMS["y"], ("sample",)):
        raise InputError(f"{label}: variable 'y' has dims {y.dims or y.shape}, expected "
                         "('sample', 'target')")


def _check_sample_first(label: str, name: str, column: Column, dim: str) -> None:
    """Refuse a store's variable that has the sample dimension ``dim`` after another: a
    store is read in chunks along its variables' first dimension (no option names another),
    so the remedy is the store rewritten with ``dim`` first, or the Dataset given from
    Python (:class:`DatasetInput` reads its variables transposed)."""
    if dim not in column.dims[1:]:
        return
    raise InputError(
        f"{label}: variable '{name}' has dims {column.dims}: a store is read along its "
        f"variables' first dimension, and '{dim}' is not first; rewrite the store with "
        f"'{dim}' first (xarray: xr.open_zarr(STORE).transpose('{dim}', ...)"
        ".drop_encoding().to_zarr(NEW)), or from Python give streamlsq the Dataset "
        "xr.open_zarr(STORE), which it reads transposed")


def _check_sample_dim(label: str, name: str, column: Column, dim: str, sample_first: bool,
                      given: bool) -> None:
    """A selected variable has one or two dims, the first the sample dimension (a Dataset's
    variables come with it moved first; a store's must be chunked along it)."""
    if sample_first:
        _check_sample_first(label, name, column, dim)
    if column.dims[:1] != (dim,) or len(column.shape) > 2:
        raise InputError(
            f"{label}: variable '{name}' has dims {column.dims or column.shape}, expected "
            f"('{dim}',) or ('{dim}', ...)"
            + (": the sample dimension first" if sample_first else "")
            + ("" if given else "; name it with --sample-dim"
               + (f" (its first dimension: --sample-dim {column.dims[0]})"
                  if column.dims else "")))


def _labels(names, columns: dict[str, Column], table: OpenedInput) -> tuple:
    """Labels of the columns of the variables ``names``: a 1-D variable is labelled by its
    name, a 2-D one by the coordinate of its other dimension (or not at all: ``()`` when the
    only variable has no such coordinate)."""
    out: list = []
    for name in names:
        column = columns[name]
        if len(column.shape) == 1:
            out.append(name)
            continue
        values = table.coordinate(column.dims[1], column.width) if len(column.dims) == 2 \
            else None
        if values is None:
            if len(names) == 1:
                return ()
            values = tuple(f"{name}{j}" for j in range(column.width))
        out.extend(values)
    return tuple(out)


def _column_counts(label: str, columns: dict[str, Column], x_vars, y_vars,
                   intercept_alone: bool = False) -> tuple[int, int, int, bool]:
    """Rows, feature columns and target columns of the variables ``columns`` (1-D: one
    column, 2-D: its other axis), and whether y is one 1-D variable; refuses variables of
    different lengths and a stream without rows or features (but for a formula's intercept
    alone, ``intercept_alone``: ``y ~ 1``)."""
    first = columns[x_vars[0]]
    n = first.n_rows
    for name, column in columns.items():
        if column.n_rows != n:
            raise InputError(f"{label}: variable '{name}' has {column.n_rows} samples but "
                             f"'{x_vars[0]}' has {n}")

    def width(names) -> int:
        return int(sum(columns[v].width for v in names))

    if n == 0 or (width(x_vars) == 0 and not intercept_alone):
        raise InputError(f"{label}: variable '{x_vars[0]}' is empty (shape {first.shape})")
    if y_vars and width(y_vars) == 0:
        raise InputError(f"{label}: variable '{y_vars[0]}' has no target column (shape "
                         f"{columns[y_vars[0]].shape}); a stream store needs at least one "
                         "target")
    y_is_vector = len(y_vars) == 1 and len(columns[y_vars[0]].shape) == 1
    return n, width(x_vars), width(y_vars), y_is_vector
