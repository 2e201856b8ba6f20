"""Opening, validating, reading and writing Zarr v3 stores (DESIGN.md §3).

A *stream store* holds ``X (sample, feature)`` and ``y (sample, target)`` (a
1-D ``y (sample,)`` is read as one target). Validation of the layout (names,
dims, dtypes, lengths, every chunk present) happens when a store is opened,
before any work or output; values (NaN/Inf) are checked chunk by chunk inside
the tasks that read them, and an error names the store, variable and chunk.

Result stores are written to a hidden temporary path next to the destination,
marked ``complete=True`` and then renamed into place, so an interrupted run
never leaves a store that looks complete.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from .errors import InputError

__all__ = [
    "StreamSource",
    "open_stream",
    "prepare_output",
    "write_result",
    "atomic_store",
    "open_result",
    "consolidate",
]

STREAM_DIMS = {"X": ("sample", "feature"), "y": ("sample", "target")}


def _store_label(path: str, group: str | None) -> str:
    return f"{path}" if not group else f"{path} (group '{group}')"


@functools.lru_cache(maxsize=64)
def _zarr_array(path: str, group: str | None, name: str, token: str = "") -> zarr.Array:
    # one open per process and array: metadata reads are not free on remote stores;
    # ``token`` identifies the store's version, so a store rewritten at the same path
    # (e.g. ``simulate --overwrite``) is opened afresh, never read with stale metadata
    g = zarr.open_group(path, mode="r", path=group or None)
    return g[name]


def store_token(path: str) -> str:
    """A version stamp of a local store (its root metadata file's inode and mtime), or ""."""
    meta = os.path.join(path, "zarr.json")
    try:
        st = os.stat(meta)
    except OSError:  # not a local store: no cheap version stamp
        return ""
    return f"{st.st_ino}-{st.st_mtime_ns}"


def _open_group(path: str, group: str | None) -> zarr.Group:
    if not Path(path).exists():
        raise InputError(f"{path}: no such store")
    try:
        return zarr.open_group(path, mode="r", path=group or None)
    except Exception as exc:  # zarr raises several types for "not a group here"
        label = _store_label(path, group)
        raise InputError(f"{label}: not a readable Zarr group ({exc})") from None


def _check_numeric(label: str, name: str, arr: zarr.Array) -> None:
    dt = np.dtype(arr.dtype)
    if dt.kind not in "fiu":
        raise InputError(
            f"{label}: variable '{name}' has dtype {dt}, expected a real numeric dtype "
            "(float64, float32 or an integer type)"
        )


def _dims(arr: zarr.Array) -> tuple[str, ...]:
    names = getattr(arr.metadata, "dimension_names", None)
    if names is None:  # zarr v2 stores written by xarray keep dims in an attribute
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(names) if names is not None else ()


def missing_chunks(arr: zarr.Array, limit: int = 1) -> list[tuple[int, ...]]:
    """Coordinates of chunks that were never written (they would read back as fill values)."""
    if arr.nchunks_initialized == arr.nchunks:
        return []
    from zarr.core.sync import sync

    store = arr.store_path.store
    prefix = arr.store_path.path
    out = []
    for coords in arr._iter_chunk_coords():
        key = arr.metadata.encode_chunk_key(coords)
        if not sync(store.exists(f"{prefix}/{key}" if prefix else key)):
            out.append(tuple(int(c) for c in coords))
            if len(out) >= limit:
                break
    return out


def _check_complete(label: str, name: str, arr: zarr.Array) -> None:
    gaps = missing_chunks(arr)
    if gaps:
        n_missing = arr.nchunks - arr.nchunks_initialized
        raise InputError(
            f"{label}: variable '{name}' chunk {gaps[0]} was never written "
            f"({n_missing} of {arr.nchunks} chunks missing; it would read as the fill value "
            f"{arr.fill_value}); the store is incomplete, or was written with "
            "write_empty_chunks=False: rewrite it with write_empty_chunks=True"
        )


def check_finite_rows(label: str, name: str, A: np.ndarray, start: int, chunk_rows: int) -> None:
    """Refuse NaN/Inf in rows ``start:start+len(A)`` of variable ``name``, naming chunk and row."""
    if np.isfinite(A.sum()):  # one reduction: the common, clean case costs a single pass
        return
    bad = ~np.isfinite(A)
    if not bad.any():  # the sum overflowed on finite values
        return
    row = start + int(np.argwhere(bad)[0][0])
    kind = "NaN" if np.isnan(A[bad]).any() else "Inf"
    raise InputError(
        f"{label}: variable '{name}' chunk {row // chunk_rows} has {kind} at row {row}; "
        "remove or impute non-finite values"
    )


@dataclass(frozen=True)
class StreamSource:
    """A validated stream store: enough to read any row range from any worker (picklable)."""

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

    @property
    def label(self) -> str:
        return _store_label(self.path, self.group)

    def _array(self, name: str) -> zarr.Array:
        return _zarr_array(self.path, self.group, name, self.token)

    def chunk_edges(self) -> np.ndarray:
        """Row offsets of the storage chunks of X: [0, c, 2c, ..., n_rows]."""
        edges = np.arange(0, self.n_rows, self.chunk_rows, dtype=np.int64)
        return np.append(edges, self.n_rows)

    def read(self, start: int, stop: int, dtype=np.float64, check: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start:stop`` as (X (n, q), Y (n, K)) in ``dtype``; refuses NaN/Inf by chunk.

        ``check=False`` skips the value check, for callers that check what they
        computed from the rows instead (and re-read with the check to name the row).
        """
        X = np.asarray(self._array("X")[start:stop], dtype=dtype)
        Y = np.asarray(self._array("y")[start:stop], dtype=dtype)
        if Y.ndim == 1:
            Y = Y[:, None]
        if check:
            for name, A in (("X", X), ("y", Y)):
                self._check_finite(name, A, start)
        return X, Y

    def read_features(self, start: int, stop: int, dtype=np.float64) -> np.ndarray:
        """Rows ``start:stop`` of X alone (values checked like :meth:`read`)."""
        X = np.asarray(self._array("X")[start:stop], dtype=dtype)
        self._check_finite("X", X, start)
        return X

    def read_variable(self, name: str) -> np.ndarray | None:
        """A small whole variable of the store (e.g. ``coef_true``), or None if absent."""
        g = _open_group(self.path, self.group)
        if name not in set(g.array_keys()):
            return None
        return np.asarray(g[name][...])

    def _check_finite(self, name: str, A: np.ndarray, start: int) -> None:
        check_finite_rows(self.label, name, A, start, self.chunk_rows)


def open_stream(path: str | os.PathLike, group: str | None = None) -> StreamSource:
    """Open and validate a stream store's layout; raise :class:`InputError` on any defect."""
    path = str(path)
    label = _store_label(path, group)
    g = _open_group(path, group)
    members = set(g.array_keys())
    for name in ("X", "y"):
        if name not in members:
            raise InputError(
                f"{label}: variable '{name}' is missing (found: {sorted(members) or 'none'}); "
                "a stream store needs X (sample, feature) and y (sample, target)"
            )
    X, y = g["X"], g["y"]
    for name, arr in (("X", X), ("y", y)):
        _check_numeric(label, name, arr)
    if _dims(X) != STREAM_DIMS["X"] or X.ndim != 2:
        raise InputError(
            f"{label}: variable 'X' has dims {_dims(X) or X.shape}, expected ('sample', 'feature')"
        )
    ydims = _dims(y)
    if ydims not in (STREAM_DIMS["y"], ("sample",)):
        raise InputError(
            f"{label}: variable 'y' has dims {ydims or y.shape}, expected ('sample', 'target')"
        )
    if y.shape[0] != X.shape[0]:
        raise InputError(
            f"{label}: variable 'y' has {y.shape[0]} samples but 'X' has {X.shape[0]}"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{label}: variable 'X' is empty (shape {X.shape})")
    for name, arr in (("X", X), ("y", y)):
        _check_complete(label, name, arr)
    chunk_rows = int(X.chunks[0])
    attrs = dict(g.attrs)
    block_size = int(attrs.get("block_size", chunk_rows))
    return StreamSource(
        path=path,
        group=group,
        n_rows=int(X.shape[0]),
        n_features=int(X.shape[1]),
        n_targets=1 if y.ndim == 1 else int(y.shape[1]),
        chunk_rows=chunk_rows,
        y_is_vector=y.ndim == 1,
        block_size=block_size,
        attrs=attrs,
        token=store_token(path),
    )


def open_dataset(path: str | os.PathLike, group: str | None = None) -> xr.Dataset:
    """Any streamlsq store as a lazily loaded (dask-backed) xarray Dataset."""
    path = str(path)
    if not Path(path).exists():
        raise InputError(f"{path}: no such store")
    return xr.open_zarr(path, group=group, consolidated=None, zarr_format=3)


# -- results -------------------------------------------------------------------


def consolidate(path: str | os.PathLike) -> None:
    """Consolidate a store's metadata so that xarray opens it in one read and quietly."""
    with warnings.catch_warnings():
        # zarr-python supports consolidated metadata for v3 stores but warns that the
        # v3 specification does not define it; xarray relies on it for fast opening
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        zarr.consolidate_metadata(str(path))


def prepare_output(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Refuse an existing destination unless ``overwrite``; check the parent folder exists."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise InputError(f"{out}: already exists; choose another --out or pass --overwrite")
    if not out.parent.exists():
        raise InputError(f"{out.parent}: output folder does not exist")
    return out


@contextlib.contextmanager
def atomic_store(out: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Build a store under a temporary name next to ``out``; publish it only when complete.

    Yields the temporary path to write into. When the block finishes, the
    store's root gets ``complete=True``, its metadata is consolidated and it is
    renamed into place (replacing ``out`` when ``overwrite``). If the block
    raises, the temporary store is removed: nothing that looks complete is left.
    """
    out = prepare_output(out, overwrite)
    tmp = out.with_name(f".{out.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        zarr.open_group(str(tmp), mode="r+").attrs["complete"] = True
        consolidate(tmp)
        if out.exists():
            trash = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(out, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_result(ds: xr.Dataset, out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write ``ds`` atomically: temporary path, ``complete=True`` last, then rename into place."""
    ds = ds.copy()
    # zarr v3 has a specified variable-length string type, not numpy's fixed-width one
    strings = {n: ds[n].astype(object) for n, v in ds.variables.items() if v.dtype.kind == "U"}
    ds = ds.assign_coords({n: v for n, v in strings.items() if n in ds.coords})
    ds = ds.assign({n: v for n, v in strings.items() if n not in ds.coords})
    ds.attrs["complete"] = False
    with atomic_store(out, overwrite) as tmp:
        ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False)
    return Path(out)


def open_result(path: str | os.PathLike) -> xr.Dataset:
    """Open a result store; refuse one that an interrupted run left incomplete."""
    ds = open_dataset(path)
    if ds.attrs.get("complete") is not True:
        raise InputError(f"{path}: result store is incomplete (no complete=True attribute)")
    return ds
