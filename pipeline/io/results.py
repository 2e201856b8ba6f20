"""Result stores: written under a temporary name, marked complete, then renamed into place.

:func:`atomic_store` and :func:`write_result` build a store next to its destination,
set ``complete=True`` last and rename it into place, so an interrupted run never
leaves a store that looks complete; :func:`open_result` refuses one without the
mark.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.stores import consolidate, open_dataset

__all__ = [
    "atomic_store",
    "open_result",
    "prepare_output",
    "write_result",
]


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
    """Open a result store; refuse one that an interrupted run left incomplete.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3)
    >>> _ = streamlsq.fit_stream(path, "kf4lls", out=f"{tmp.name}/fit.zarr")
    >>> result = streamlsq.open_result(f"{tmp.name}/fit.zarr")
    >>> result.attrs["complete"], result.attrs["method"]
    (True, 'kf4lls')
    >>> tmp.cleanup()
    """
    ds = open_dataset(path)
    if ds.attrs.get("complete") is not True:
        raise InputError(f"{path}: result store is incomplete (no complete=True attribute)")
    return ds
