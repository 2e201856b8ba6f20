"""Result stores: written under a temporary name, marked complete, then renamed into place.

:func:`atomic_store` and :func:`write_result` build a store next to its destination,
set ``complete=True`` last and rename it into place, so an interrupted run never
leaves a store that looks complete; :func:`open_result` refuses one without the
mark.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.outputs import (
    WRITTEN_BY,
    OwnedTemporary,
    check_apart,
    check_writable,
    output_failure,
    publish,
    reclaim_leftovers,
    written_by_streamlsq,
)
from streamlsq.io.stores import consolidate, open_dataset

__all__ = [
    "atomic_store",
    "open_result",
    "prepare_output",
    "write_result",
]


def prepare_output(out: str | os.PathLike, overwrite: bool = False, inputs=()) -> Path:
    """Check ``out`` before any work: it is apart from every input store (``inputs``: paths
    or sources), it does not exist unless ``overwrite`` (and then it is a store streamlsq
    wrote), its folder exists and is writable; leftovers of killed runs on ``out`` are
    reclaimed."""
    out = Path(out)
    check_apart(out, inputs, "--out")
    if os.path.lexists(out):
        if not overwrite:
            raise InputError(f"{out}: already exists; choose another --out or pass --overwrite")
        if not written_by_streamlsq(out):
            raise InputError(f"{out}: exists and was not written by streamlsq; --overwrite "
                             "replaces only streamlsq's own results: choose another --out")
    if not out.parent.exists():
        raise InputError(f"{out.parent}: output folder does not exist")
    check_writable(out.parent)
    reclaim_leftovers(out)
    return out


@contextlib.contextmanager
def atomic_store(out: str | os.PathLike, overwrite: bool = False, inputs=()) -> Iterator[Path]:
    """Build a store under a temporary name next to ``out``; publish it only when complete.

    Yields the temporary path to write into. When the block finishes, the
    store's root gets ``complete=True`` (and the ``written_by`` mark), its metadata is
    consolidated and it is renamed into place (:func:`~streamlsq.io.outputs.publish`:
    never over another run's result unless ``overwrite``, and then only over a store
    streamlsq wrote). If the block raises, the temporary store is removed: nothing that
    looks complete is left. A write that fails for lack of space or permission becomes
    one line (:class:`~streamlsq.errors.OutputError`).
    """
    out = prepare_output(out, overwrite, inputs)
    with OwnedTemporary(out, "partial") as tmp:
        try:
            yield tmp.path
            g = zarr.open_group(str(tmp.path), mode="r+")
            g.attrs.update({"complete": True, WRITTEN_BY: f"streamlsq {_version()}"})
            consolidate(tmp.path)
            publish(tmp, out, overwrite)
        except OSError as exc:
            failure = output_failure(exc, out, tmp.path)
            if failure is None:
                raise
            raise failure from None


def _version() -> str:
    from streamlsq import __version__

    return __version__


def write_result(ds: xr.Dataset, out: str | os.PathLike, overwrite: bool = False,
                 inputs=()) -> Path:
    """Write ``ds`` atomically: temporary path, ``complete=True`` last, then rename into place."""
    ds = ds.copy()
    # zarr v3 has a specified variable-length string type, not numpy's fixed-width one
    strings = {n: ds[n].astype(object) for n, v in ds.variables.items() if v.dtype.kind == "U"}
    ds = ds.assign_coords({n: v for n, v in strings.items() if n in ds.coords})
    ds = ds.assign({n: v for n, v in strings.items() if n not in ds.coords})
    ds.attrs["complete"] = False
    with atomic_store(out, overwrite, inputs) as tmp:
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
