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

How the workers read a Dataset: a dask-backed variable is read through its own dask
array, each Dask task computing the rows it needs with the synchronous scheduler (the
files behind it, NetCDF or Zarr, are opened by the worker itself, as a store path is);
the arrays of an in-memory Dataset travel with the source (they are pickled into the
tasks that read them, as dask does for arrays wrapped by ``dask.array.from_array``). No
temporary copy of the data is ever written.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.location import locate
from streamlsq.io.stores import (
    StoreSource,
    check_complete,
    check_finite_rows,
    check_numeric,
    dimension_names,
    get_array,
    open_group,
    require_variables,
    store_label,
    store_token,
)

__all__ = [
    "StreamSource",
    "open_stream",
]


STREAM_DIMS = {"X": ("sample", "feature"), "y": ("sample", "target")}
#: rows of an in-memory Dataset read at once by default: about 25 MB of float64 features
TARGET_CHUNK_ELEMENTS = 3_200_000


@dataclass
class DatasetColumns:
    """The selected variables of an xarray Dataset, sample dimension first: NumPy arrays
    (in memory) or dask arrays (lazy), read by row range on any worker."""

    arrays: dict
    extras: dict = field(default_factory=dict)

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        arr = self.arrays[name][start:stop]
        if hasattr(arr, "compute"):  # dask: this task computes its rows itself
            arr = arr.compute(scheduler="sync")
        return np.asarray(arr)


@dataclass(frozen=True)
class StreamSource(StoreSource):
    """A validated stream store: enough to read any row range from any worker (picklable).

    ``n_features`` counts the columns the recursion reads (with the constant column of
    ``intercept``); ``features`` and ``targets`` label the data's own columns (empty when
    the data do not name them); ``x_vars``, ``y_vars`` and ``sample_dim`` say which
    variables, along which dimension, hold them.

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

    path: str
    group: str | None
    n_rows: int
    n_features: int
    n_targets: int
    chunk_rows: int
    y_is_vector: bool
    block_size: int
    attrs: dict = field(default_factory=dict, compare=False, hash=False)
    token: str = ""
    shown: str = ""
    options_key: str = ""
    storage_options: dict | None = field(default=None, compare=False, hash=False)
    x_vars: tuple[str, ...] = ("X",)
    y_vars: tuple[str, ...] = ("y",)
    sample_dim: str = "sample"
    intercept: bool = False
    features: tuple = ()
    targets: tuple = ()
    columns: DatasetColumns | None = field(default=None, compare=False, hash=False,
                                           repr=False)

    @property
    def n_data_features(self) -> int:
        """Columns of the data (without the constant column of ``intercept``)."""
        return self.n_features - int(self.intercept)

    @property
    def in_memory(self) -> bool:
        """Whether the data come from an xarray Dataset rather than a store."""
        return self.columns is not None

    def selection(self) -> dict:
        """Which variables, along which dimension, with or without the constant column: what
        a result records and a continued or resumed fit must match."""
        return {"x": list(self.x_vars), "y": list(self.y_vars), "sample_dim": self.sample_dim,
                "fit_intercept": bool(self.intercept)}

    def chunk_edges(self) -> np.ndarray:
        """Row offsets of the storage chunks of X: [0, c, 2c, ..., n_rows]."""
        edges = np.arange(0, self.n_rows, self.chunk_rows, dtype=np.int64)
        return np.append(edges, self.n_rows)

    def read_rows(self, name: str, start: int, stop: int, dtype=np.float64,
                  check: bool = True) -> np.ndarray:
        if self.columns is None:
            return super().read_rows(name, start, stop, dtype, check)
        A = np.asarray(self.columns.read(name, start, stop), dtype=dtype)
        if check:
            check_finite_rows(self.label, name, A, start, self.chunk_rows)
        return A

    def read_variable(self, name: str) -> np.ndarray | None:
        if self.columns is None:
            return super().read_variable(name)
        value = self.columns.extras.get(name)
        return None if value is None else np.asarray(value)

    def chunk_stamps(self, names) -> dict:
        """Stamps of the stored chunks of ``names`` (:func:`~streamlsq.io.stores.chunk_stamps`);
        none for a Dataset."""
        if self.columns is not None:
            return {}
        return super().chunk_stamps(names)

    def _stack(self, names, start, stop, dtype, check) -> np.ndarray:
        if not names:  # new rows without targets
            return np.zeros((stop - start, 0), dtype=dtype)
        parts = [self.read_rows(n, start, stop, dtype, check) for n in names]
        if len(parts) == 1:
            return parts[0]
        return np.column_stack([p[:, None] if p.ndim == 1 else p for p in parts])

    def read(self, start: int, stop: int, dtype=np.float64, check: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start:stop`` as (X (n, q), Y (n, K)) in ``dtype``; refuses NaN/Inf by chunk.

        ``check=False`` skips the value check, for callers that check what they
        computed from the rows instead (and re-read with the check to name the row).
        """
        X = self.read_features(start, stop, dtype, check)
        Y = self._stack(self.y_vars, start, stop, dtype, check)
        return X, (Y[:, None] if Y.ndim == 1 else Y)

    def read_features(self, start: int, stop: int, dtype=np.float64, check: bool = True
                      ) -> np.ndarray:
        """Rows ``start:stop`` of the features alone (with the constant column first when
        ``intercept``; values checked like :meth:`read`)."""
        X = self._stack(self.x_vars, start, stop, dtype, check)
        if X.ndim == 1:
            X = X[:, None]
        if self.intercept:
            out = np.empty((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
            out[:, 0] = 1
            out[:, 1:] = X
            X = out
        return X

    def read_targets(self, start: int, stop: int, dtype=np.float64, check: bool = True
                     ) -> np.ndarray:
        Y = self._stack(self.y_vars, start, stop, dtype, check)
        return Y[:, None] if Y.ndim == 1 else Y


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


def open_stream(data, group: str | None = None, *, x=None, y=None,
                sample_dim: str | None = None, fit_intercept: bool = False,
                storage_options: dict | None = None, targets: bool = True) -> StreamSource:
    """Open and validate a stream store's layout; raise :class:`InputError` on any defect.

    ``data`` is a path, an fsspec URL (``s3://bucket/data.zarr``; ``storage_options`` for
    its filesystem), a zarr store object or an :class:`xarray.Dataset`. ``x`` names the
    feature variables (one 2-D variable, default ``"X"``, or several 1-D ones) and ``y``
    the target variables (default ``"y"``), all along the dimension ``sample_dim`` (default
    ``sample``); ``fit_intercept`` prepends a constant column to the features.
    ``targets=False`` opens new rows whose targets may be missing (applying a fit: then
    ``y_vars`` is empty and ``n_targets`` 0).

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
    # a Dataset exists only if xarray was imported: a store opens without importing it
    # (`streamlsq info` starts fast)
    xr = sys.modules.get("xarray")
    if xr is not None and isinstance(data, xr.DataArray):
        raise InputError("pass an xarray Dataset (ds[['a', 'b']] or da.to_dataset()), "
                         "not a DataArray")
    if xr is not None and isinstance(data, xr.Dataset):
        if not targets:
            y = _present(_names(y, ("y",)), set(data.variables))
        return _open_dataset(data, x, y, sample_dim, fit_intercept)
    loc = locate(data, storage_options)
    if loc is None:  # e.g. a zarr MemoryStore: read it as a lazy Dataset
        import xarray as xr

        try:
            ds = xr.open_zarr(data, group=group, consolidated=None)
        except Exception as exc:
            raise InputError(f"{data!r}: not a readable Zarr store ({exc})") from None
        return _open_dataset(ds, x, y, sample_dim, fit_intercept)
    shown = loc.shown or loc.url
    label = store_label(shown, group)
    g = open_group(loc, group)
    strict = x is None and y is None and sample_dim is None and targets
    dim = sample_dim or "sample"
    x_vars, y_vars = _names(x, ("X",)), _names(y, ("y",))
    if not targets:
        y_vars = _present(y_vars, set(g.array_keys()))
    if strict:
        require_variables(g, label, ("X", "y"),
                          "a stream store needs X (sample, feature) and y (sample, target)")
    else:
        require_variables(g, label, (*x_vars, *y_vars),
                          f"name the feature variables with --x and the targets with --y, "
                          f"all along --sample-dim ({dim})")
    arrays = {name: get_array(g, label, name) for name in (*x_vars, *y_vars)}
    for name, arr in arrays.items():
        check_numeric(label, name, arr)
    if strict:
        X, yv = arrays["X"], arrays["y"]
        if dimension_names(X) != STREAM_DIMS["X"] or X.ndim != 2:
            raise InputError(
                f"{label}: variable 'X' has dims {dimension_names(X) or X.shape}, "
                "expected ('sample', 'feature'); name another layout with --x, --y and "
                "--sample-dim"
            )
        ydims = dimension_names(yv)
        if ydims not in (STREAM_DIMS["y"], ("sample",)):
            raise InputError(
                f"{label}: variable 'y' has dims {ydims or yv.shape}, expected ('sample', "
                "'target')"
            )
    else:
        for name, arr in arrays.items():
            dims = dimension_names(arr)
            if not dims or dims[0] != dim or arr.ndim > 2:
                raise InputError(
                    f"{label}: variable '{name}' has dims {dims or arr.shape}, expected "
                    f"('{dim}',) or ('{dim}', ...): the sample dimension first"
                    + ("" if sample_dim else "; name it with --sample-dim"))
    n, width, n_targets, y_is_vector = _column_counts(label, arrays, x_vars, y_vars)
    for name, arr in arrays.items():
        check_complete(label, name, arr)
    members = set(g.array_keys())
    features = _labels(x_vars, arrays, g, members)
    target_labels = () if y_is_vector or not y_vars else _labels(y_vars, arrays, g, members)
    chunk_rows = int(arrays[x_vars[0]].chunks[0])
    attrs = dict(g.attrs)
    block_size = int(attrs.get("block_size", chunk_rows))
    return StreamSource(
        path=loc.url,
        shown=shown,
        group=group,
        n_rows=n,
        n_features=width + int(bool(fit_intercept)),
        n_targets=n_targets,
        chunk_rows=chunk_rows,
        y_is_vector=y_is_vector,
        block_size=block_size,
        attrs=attrs,
        token=store_token(loc),
        options_key=loc.options_key,
        storage_options=loc.storage_options,
        x_vars=x_vars,
        y_vars=y_vars,
        sample_dim=dim,
        intercept=bool(fit_intercept),
        features=features,
        targets=target_labels,
    )


def _present(names: tuple[str, ...], members: set) -> tuple[str, ...]:
    """The target variables to read from new rows: all of them, or none when one is
    missing (the rows are then only predicted)."""
    return names if all(n in members for n in names) else ()


def _labels(names, arrays, g, members) -> tuple:
    """Labels of the columns of the variables ``names`` of a store: a 1-D variable is
    labelled by its name, a 2-D one by the coordinate array of its second dimension (or
    not at all: ``()`` when the only variable has no such coordinate)."""
    out: list = []
    for name in names:
        arr = arrays[name]
        if arr.ndim == 1:
            out.append(name)
            continue
        dims = dimension_names(arr)
        coord = dims[1] if len(dims) == 2 else None
        values = None
        if coord and coord in members:
            c = g[coord]
            if c.ndim == 1 and c.shape[0] == arr.shape[1]:
                values = _label_values(c[...])
        if values is None:
            if len(names) == 1:
                return ()
            values = tuple(f"{name}{j}" for j in range(arr.shape[1]))
        out.extend(values)
    return tuple(out)


def _open_dataset(ds, x, y, sample_dim, fit_intercept) -> StreamSource:
    """A :class:`StreamSource` over the variables of an xarray Dataset."""
    from dask.base import tokenize

    x_vars, y_vars = _names(x, ("X",)), _names(y, ("y",))
    source = ds.encoding.get("source")
    shown = f"xarray Dataset ({source})" if source else "xarray Dataset"
    label = shown
    missing = [v for v in (*x_vars, *y_vars) if v not in ds.variables]
    if missing:
        raise InputError(f"{label}: variable '{missing[0]}' is missing (found: "
                         f"{sorted(map(str, ds.data_vars)) or 'none'}); name the features "
                         "with x= (--x) and the targets with y= (--y)")
    dim = sample_dim
    if dim is None:
        dims = {d for v in (*x_vars, *y_vars) for d in ds[v].dims}
        candidates = [d for d in ds[x_vars[0]].dims if all(d in ds[v].dims for v in
                                                          (*x_vars, *y_vars))]
        dim = "sample" if "sample" in dims else (candidates[0] if len(candidates) == 1 else None)
        if dim is None:
            raise InputError(f"{label}: name the sample dimension with sample_dim= "
                             f"(--sample-dim); the variables have dims {sorted(dims)}")
    arrays, columns, extras = {}, {}, {}
    for name in (*x_vars, *y_vars):
        var = ds[name]
        if dim not in var.dims or var.ndim > 2:
            raise InputError(f"{label}: variable '{name}' has dims {var.dims}, expected "
                             f"('{dim}',) or ('{dim}', ...)")
        dt = np.dtype(var.dtype)
        if dt.kind not in "fiu" or (dt.kind == "f" and dt.itemsize < 4):
            raise InputError(f"{label}: variable '{name}' has dtype {dt}, expected a real "
                             "numeric dtype (float64, float32 or an integer type)")
        var = var.transpose(dim, ...)
        arrays[name] = var
        columns[name] = var.data
    n, width, n_targets, y_is_vector = _column_counts(label, arrays, x_vars, y_vars)

    def labels(names):
        out: list = []
        for name in names:
            var = arrays[name]
            if var.ndim == 1:
                out.append(name)
                continue
            other = var.dims[1]
            if other in ds.coords:
                out.extend(_label_values(ds.coords[other].values))
            elif len(names) == 1:
                return ()
            else:
                out.extend(f"{name}{j}" for j in range(var.shape[1]))
        return tuple(out)

    chunks = getattr(arrays[x_vars[0]].data, "chunks", None)
    if chunks is not None:
        chunk_rows = int(chunks[0][0])
    else:
        chunk_rows = int(max(1, min(n, TARGET_CHUNK_ELEMENTS // max(width, 1))))
    if "coef_true" in ds.variables and ds["coef_true"].size <= 1_000_000:
        extras["coef_true"] = np.asarray(ds["coef_true"].values)
    attrs = dict(ds.attrs)
    block_size = int(attrs.get("block_size", chunk_rows))
    return StreamSource(
        path=str(source) if source else "<xarray.Dataset>",
        shown=shown,
        group=None,
        n_rows=n,
        n_features=width + int(bool(fit_intercept)),
        n_targets=n_targets,
        chunk_rows=chunk_rows,
        y_is_vector=y_is_vector,
        block_size=block_size,
        attrs=attrs,
        token=tokenize(*columns.values()),
        x_vars=x_vars,
        y_vars=y_vars,
        sample_dim=dim,
        intercept=bool(fit_intercept),
        features=labels(x_vars),
        targets=() if y_is_vector or not y_vars else labels(y_vars),
        columns=DatasetColumns(columns, extras),
    )


def _column_counts(label: str, arrays: dict, x_vars, y_vars) -> tuple[int, int, int, bool]:
    """Rows, feature columns and target columns of the variables ``arrays`` (1-D: one
    column, 2-D: its second axis), and whether y is one 1-D variable; refuses variables of
    different lengths and a stream without rows or features."""
    first = arrays[x_vars[0]]
    n = int(first.shape[0])
    for name, arr in arrays.items():
        if arr.shape[0] != n:
            raise InputError(f"{label}: variable '{name}' has {arr.shape[0]} samples but "
                             f"'{x_vars[0]}' has {n}")

    def width(names) -> int:
        return int(sum(1 if arrays[v].ndim == 1 else arrays[v].shape[1] for v in names))

    if n == 0 or width(x_vars) == 0:
        raise InputError(f"{label}: variable '{x_vars[0]}' is empty (shape {first.shape})")
    y_is_vector = len(y_vars) == 1 and arrays[y_vars[0]].ndim == 1
    return n, width(x_vars), width(y_vars), y_is_vector


def is_path_like(data) -> bool:
    """Whether ``data`` names a store (a path or URL) rather than holding data."""
    return isinstance(data, str | os.PathLike)
