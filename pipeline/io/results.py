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
from streamlsq.io.location import Location, locate
from streamlsq.io.outputs import (
    BESIDE,
    WRITTEN_BY,
    BesideFiles,
    OwnedTemporary,
    RemoteTemporary,
    check_apart,
    check_remote_writable,
    check_writable,
    output_failure,
    publish,
    publish_remote,
    reclaim_leftovers,
    remote_written_by_streamlsq,
    written_by_streamlsq,
)
from streamlsq.io.provenance import _version
from streamlsq.io.stores import consolidate, open_dataset

__all__ = [
    "atomic_store",
    "for_workers",
    "published",
    "open_result",
    "prepare_output",
    "write_result",
]


def prepare_output(out, overwrite: bool = False, inputs=(), storage_options=None,
                   beside: dict | None = None):
    """Check ``out`` before any work: it is apart from every input store (``inputs``: paths
    or sources), it does not exist unless ``overwrite`` (and then it is a store streamlsq
    wrote), its folder exists and is writable; leftovers of killed runs on ``out`` are
    reclaimed. ``beside`` (suffix → writer): the files written beside ``out``, checked by the
    same rules (:class:`~streamlsq.io.outputs.BesideFiles`; a local output only). Returns the
    local :class:`~pathlib.Path`, or the :class:`~streamlsq.io.location.Location` of an
    output on an object store (an fsspec URL or a zarr ``FsspecStore``; ``storage_options``
    for a URL)."""
    loc = locate(out, storage_options)
    if loc is None:
        raise InputError(f"{out!r}: an output is a path, an fsspec URL or a zarr store object "
                         "(LocalStore, FsspecStore)")
    if loc.remote:
        if beside:
            raise InputError(f"{loc.shown or loc.url}: the files {', '.join(beside)} are "
                             "written beside a local output only")
        check_apart(loc.url, inputs, "--out")
        shown = loc.shown or loc.url
        if loc.exists():
            if not overwrite:
                raise InputError(f"{shown}: already exists; choose another --out or pass "
                                 "--overwrite")
            if not remote_written_by_streamlsq(loc):
                raise InputError(f"{shown}: exists and was not written by streamlsq; "
                                 "--overwrite replaces only streamlsq's own results: choose "
                                 "another --out")
        check_remote_writable(loc)
        return loc
    out = Path(loc.shown or loc.url)
    check_apart(out, inputs, "--out")
    reclaim_leftovers(out)  # a killed run's, also when this one is refused below
    if os.path.lexists(out):
        if not overwrite:
            raise InputError(f"{out}: already exists; choose another --out or pass --overwrite")
        if not written_by_streamlsq(out):
            raise InputError(f"{out}: exists and was not written by streamlsq; --overwrite "
                             "replaces only streamlsq's own results: choose another --out")
    if not out.parent.exists():
        raise InputError(f"{out.parent}: output folder does not exist")
    check_writable(out.parent)
    if beside:
        BesideFiles(out, beside).check(overwrite)
    return out


@contextlib.contextmanager
def atomic_store(out, overwrite: bool = False, inputs=(), storage_options=None,
                 beside: dict | None = None) -> Iterator:
    """Build a store under a temporary name next to ``out``; publish it only when complete.

    Yields the temporary store to write into (a local :class:`~pathlib.Path`, or a zarr
    ``FsspecStore`` on an object store; both are what ``zarr.open_group`` and
    ``Dataset.to_zarr`` take, and both travel to the workers). When the block finishes,
    the store's root gets ``complete=True`` (and the ``written_by`` mark), its metadata is
    consolidated and it is published (:func:`~streamlsq.io.outputs.publish`: renamed into
    place, never over another run's result unless ``overwrite``, and then only over a
    store streamlsq wrote; on an object store
    :func:`~streamlsq.io.outputs.publish_remote`: claimed by a conditional write, copied,
    ``complete=True`` last). If the block raises, the temporary store is removed: nothing
    that looks complete is left. A write that fails for lack of space or permission
    becomes one line (:class:`~streamlsq.errors.OutputError`).

    ``beside`` (suffix → a function writing the file at the path it is given): files that
    belong to the output (``OUT.k-curve.csv``), checked with it before any work, written
    when the block finishes, listed with their digests in the root attribute
    ``beside_files`` and renamed into place just before the store (taken back if the store
    cannot be published).
    """
    out = prepare_output(out, overwrite, inputs, storage_options, beside)
    if isinstance(out, Location):
        with RemoteTemporary(out, "partial") as tmp:
            store = tmp.store
            yield store
            g = zarr.open_group(store, mode="r+")
            g.attrs.update({"complete": True, WRITTEN_BY: f"streamlsq {_version()}"})
            consolidate(tmp.location)
            publish_remote(tmp, out, overwrite)
        return
    files = BesideFiles(out, beside or {})
    with OwnedTemporary(out, "partial") as tmp, contextlib.closing(files):
        try:
            yield tmp.path
            g = zarr.open_group(str(tmp.path), mode="r+")
            mark = {"complete": True, WRITTEN_BY: f"streamlsq {_version()}"}
            if beside:
                mark[BESIDE] = files.write()
            g.attrs.update(mark)
            consolidate(tmp.path)
            files.publish(overwrite)
            try:
                publish(tmp, out, overwrite)
            except BaseException:
                files.withdraw()
                raise
        except OSError as exc:
            failure = output_failure(exc, out, tmp.path)
            if failure is None:
                raise
            raise failure from None


def for_workers(tmp):
    """A temporary store of :func:`atomic_store` as Dask tasks take it: the local path as a
    string, or the ``FsspecStore`` itself (both open with ``zarr.open_group``)."""
    return str(tmp) if isinstance(tmp, str | os.PathLike) else tmp


def published(out, storage_options=None):
    """Where :func:`atomic_store` published ``out``: a local ``Path``, or the URL of an output
    on an object store."""
    loc = locate(out, storage_options)
    if loc is None:
        return out
    return loc.url if loc.remote else Path(loc.url)


def write_result(ds: xr.Dataset, out, overwrite: bool = False, inputs=(),
                 storage_options=None, beside: dict | None = None):
    """Write ``ds`` atomically: temporary path, ``complete=True`` last, then published (renamed
    into place; on an object store claimed, copied and marked complete last); ``beside``: the
    files that belong to it (:func:`atomic_store`)."""
    ds = ds.copy()
    # zarr v3 has a specified variable-length string type, not numpy's fixed-width one
    strings = {n: ds[n].astype(object) for n, v in ds.variables.items() if v.dtype.kind == "U"}
    ds = ds.assign_coords({n: v for n, v in strings.items() if n in ds.coords})
    ds = ds.assign({n: v for n, v in strings.items() if n not in ds.coords})
    ds.attrs["complete"] = False
    with atomic_store(out, overwrite, inputs, storage_options, beside) as tmp:
        ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False)
    loc = locate(out, storage_options)
    return loc if loc.remote else Path(loc.url)


def open_result(path, *, storage_options: dict | None = None, lazy: bool = True
                ) -> xr.Dataset:
    """Open a result store (a path, an fsspec URL or a zarr store object); refuse one that an
    interrupted run left incomplete.

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
    ds = open_dataset(path, storage_options=storage_options, lazy=lazy)
    if ds.attrs.get("complete") is not True:
        raise InputError(f"{path}: result store is incomplete (no complete=True attribute)")
    return ds
