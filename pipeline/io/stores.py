"""Opening, validating, reading and writing Zarr v3 stores (``docs/stores.md``).

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

import functools
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError

__all__ = [
    "consolidate",
]



def store_label(path: str, group: str | None) -> str:
    return f"{path}" if not group else f"{path} (group '{group}')"


@functools.lru_cache(maxsize=64)
def cached_array(path: str, group: str | None, name: str, token: str = "") -> zarr.Array:
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


class StoreSource:
    """What every validated input store shares: its place, version and how to read it.

    Subclasses are frozen dataclasses with the fields ``path``, ``group``, ``token``
    (the store's version, :func:`store_token`) and ``chunk_rows``; they travel to the
    workers, which open each array once per process (:func:`cached_array`).
    """

    path: str
    group: str | None
    token: str
    chunk_rows: int

    @property
    def label(self) -> str:
        return store_label(self.path, self.group)

    def array(self, name: str) -> zarr.Array:
        """The store's array ``name``, opened once per process and store version."""
        return cached_array(self.path, self.group, name, self.token)

    def read_rows(self, name: str, start: int, stop: int, dtype=np.float64,
                  check: bool = True) -> np.ndarray:
        """Rows ``start:stop`` of variable ``name`` in ``dtype``; NaN/Inf refused by chunk
        and row unless ``check=False``."""
        A = np.asarray(self.array(name)[start:stop], dtype=dtype)
        if check:
            check_finite_rows(self.label, name, A, start, self.chunk_rows)
        return A

    def read_variable(self, name: str) -> np.ndarray | None:
        """A small whole variable of the store (e.g. ``coef_true``), or None if absent."""
        g = open_group(self.path, self.group)
        if name not in set(g.array_keys()):
            return None
        return np.asarray(g[name][...])


def require_variables(g: zarr.Group, label: str, names, layout: str) -> set[str]:
    """The group's array names; InputError naming the first of ``names`` that is missing
    and the ``layout`` the store should have."""
    members = set(g.array_keys())
    for name in names:
        if name not in members:
            raise InputError(
                f"{label}: variable '{name}' is missing (found: {sorted(members) or 'none'}); "
                f"{layout}")
    return members


def open_group(path: str, group: str | None) -> zarr.Group:
    if not Path(path).exists():
        raise InputError(f"{path}: no such store")
    try:
        return zarr.open_group(path, mode="r", path=group or None)
    except Exception as exc:  # zarr raises several types for "not a group here"
        label = store_label(path, group)
        raise InputError(f"{label}: not a readable Zarr group ({exc})") from None


def check_numeric(label: str, name: str, arr: zarr.Array) -> None:
    dt = np.dtype(arr.dtype)
    if dt.kind not in "fiu":
        raise InputError(
            f"{label}: variable '{name}' has dtype {dt}, expected a real numeric dtype "
            "(float64, float32 or an integer type)"
        )


def dimension_names(arr: zarr.Array) -> tuple[str, ...]:
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


def check_complete(label: str, name: str, arr: zarr.Array) -> None:
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






def open_dataset(path: str | os.PathLike, group: str | None = None) -> xr.Dataset:
    """Any streamlsq store as a lazily loaded (dask-backed) xarray Dataset.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3)
    >>> ds = streamlsq.open_dataset(path)
    >>> ds.X.dims, ds.X.shape
    (('sample', 'feature'), (10000, 3))
    >>> tmp.cleanup()
    """
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








