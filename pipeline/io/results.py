"""Result stores: written under a temporary name, marked complete, then renamed into place.

:func:`atomic_store` and :func:`write_result` build a store next to its destination,
set ``complete=True`` last and rename it into place, so an interrupted run never
leaves a store that looks complete; :func:`open_result` refuses one without the
mark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import sys
import threading
import uuid
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import zarr

from streamlsq.errors import InputError, OutputError
from streamlsq.io.location import Location, check_storage_options, is_url, locate, not_a_url
from streamlsq.io.outputs import (
    BESIDE,
    STORE_MARKS,
    WRITTEN_BY,
    BesideFiles,
    OwnedTemporary,
    RemoteTemporary,
    check_apart,
    check_only_ours,
    check_remote_writable,
    check_writable,
    output_failure,
    publish,
    publish_objects,
    publish_remote,
    reclaim_leftovers,
    remote_written_by_streamlsq,
    store_above,
    written_by_streamlsq,
)
from streamlsq.io.provenance import _version
from streamlsq.io.stores import (
    EVERY_CHUNK_WRITTEN,
    consolidate,
    dimension_names,
    open_dataset,
    open_group,
    read_checked,
    store_keys,
    unwritten_chunks,
)

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = [
    "atomic_store",
    "check_result",
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
        _check_remote_place(loc, shown)
        try:
            found = loc.exists()
        except Exception as exc:  # an unreachable object store, missing credentials, ...
            raise _unreachable(shown, exc) from None
        if found:
            if not overwrite:
                raise InputError(f"{shown}: already exists; choose another --out or pass "
                                 "--overwrite")
            if not remote_written_by_streamlsq(loc):
                raise InputError(f"{shown}: exists and was not written by streamlsq; "
                                 "--overwrite replaces only streamlsq's own results: choose "
                                 "another --out")
            check_only_ours(loc, shown)
        check_remote_writable(loc)
        return loc
    typo = not_a_url(loc.shown, output=True)  # refused, though a legal local name
    if typo:
        raise InputError(typo)
    out = Path(loc.shown or loc.url)
    check_apart(out, inputs, "--out")
    reclaim_leftovers(out)  # a killed run's, also when this one is refused below
    if os.path.lexists(out):
        if not overwrite:
            raise InputError(f"{out}: already exists; choose another --out or pass --overwrite")
        if out.is_symlink():  # the link is the user's, whatever it points to
            raise InputError(f"{out}: is a symbolic link; streamlsq never writes through or "
                             "over a link: give the path it points to, or choose another "
                             "--out")
        if not written_by_streamlsq(out):
            raise InputError(f"{out}: exists and was not written by streamlsq; --overwrite "
                             "replaces only streamlsq's own results: choose another --out")
        check_only_ours(out)
    # first: inside a store is the reason, whether or not the folders below it exist
    outer = store_above(out)
    _check_not_inside_a_store(out, [] if outer is None else [outer])
    if not out.parent.exists():
        raise InputError(f"{out.parent}: output folder does not exist")
    if not out.parent.is_dir():
        raise InputError(f"{out}: {out.parent.name} is a file, not a folder; choose another "
                         "--out")
    check_writable(out.parent)
    if beside:
        BesideFiles(out, beside).check(overwrite)
    return out


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, cut to a line's length."""
    return (str(exc).strip().splitlines() or ["no message"])[0][:200]


def _unreachable(shown: str, exc: BaseException) -> InputError:
    reason = _reason(exc)
    if isinstance(exc, PermissionError):
        return InputError(f"{shown}: cannot write here ({type(exc).__name__}: {reason}); "
                          "check the credentials or choose another output")
    return InputError(f"{shown}: cannot be reached ({type(exc).__name__}: {reason}); check "
                      "the URL, the credentials and the storage options")


#: the libraries that raise the failures of a request to an object store (a vanished endpoint,
#: a connection reset, an expired token) with types of their own, not OSError
_STORE_CLIENTS = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "adlfs",
                  "azure", "fsspec")


def remote_failure(exc: BaseException, out: Location, tmp: Location | None
                   ) -> OutputError | None:
    """The one-line error for a run writing ``out`` on an object store (through its temporary
    prefix ``tmp``; None: straight to ``out``) whose store stopped answering; None when
    ``exc`` is something else."""
    from streamlsq.errors import RunError

    if isinstance(exc, InputError | RunError):
        return None
    if not isinstance(exc, OSError) and \
            type(exc).__module__.partition(".")[0] not in _STORE_CLIENTS:
        return None
    reason = _reason(exc)
    left = (f"remove {tmp.url} if it remains" if tmp is not None else
            "an incomplete store left there is replaced by --overwrite")
    return OutputError(f"{out.shown or out.url}: the object store failed while the result was "
                       f"written ({type(exc).__name__}: {reason}); nothing was published: "
                       f"{left}, and run the command again")


def _check_remote_place(loc: Location, shown: str) -> None:
    """Refuse an output URL that names a bucket (``s3://name.zarr``: a result is a prefix in
    a bucket), or whose folder is an object (``s3://b/notes.txt/fit.zarr``, where
    ``notes.txt`` would become both an object and a prefix)."""
    fs, path = loc.filesystem()
    path = path.strip("/")
    protocol = loc.url.partition("://")[0]
    if fs.root_marker == "" and "/" not in path:  # a filesystem of buckets: S3, GCS, Azure
        raise InputError(f"{shown}: names a bucket; a result is written inside one: write "
                         f"{protocol}://BUCKET/NAME")
    parent = posixpath.dirname(path)
    if fs.root_marker == "" and "/" not in parent:
        return  # the bucket itself: reached, or refused, by the probe of check_remote_writable
    try:
        is_file = bool(parent) and fs.isfile(fs.root_marker + parent)
    except Exception as exc:
        raise _unreachable(shown, exc) from None
    if is_file:
        raise InputError(f"{shown}: {posixpath.basename(parent)} is a file, not a folder; "
                         "choose another --out")
    # the prefixes above the output, below the bucket: a store there would take it in
    above, prefixes = parent, []
    while above and (fs.root_marker != "" or "/" in above):
        prefixes.append(above)
        above = posixpath.dirname(above)
    try:
        stores = [p for p in prefixes
                  if any(fs.isfile(fs.root_marker + f"{p}/{m}") for m in STORE_MARKS)]
    except Exception as exc:
        raise _unreachable(shown, exc) from None
    _check_not_inside_a_store(shown, stores)


def _check_not_inside_a_store(shown, stores: list) -> None:
    """Refuse an output inside a Zarr store (``fit.zarr/inner.zarr``; ``stores``: the
    folders above it that are stores, the nearest first): written there, it would become a
    group of that store, changing a store the command does not write (an input is refused
    as such before, :func:`~streamlsq.io.outputs.check_apart`)."""
    if stores:
        name = posixpath.basename(str(stores[-1]).rstrip("/"))  # the outermost
        raise InputError(f"{shown}: {name} is a Zarr store; a store is not written inside "
                         "another (it would become one of its groups): choose another --out")


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
            try:
                store = tmp.store
                yield store
                _mark_complete(store, list_once=True)
                consolidate(tmp.location)
                publish_remote(tmp, out, overwrite)
            except Exception as exc:
                failure = remote_failure(exc, out, tmp.location)
                if failure is None:
                    raise
                raise failure from None
        return
    files = BesideFiles(out, beside or {})
    with OwnedTemporary(out, "partial") as tmp, contextlib.closing(files), \
            _output_failures(out, tmp):
        yield tmp.path
        g = zarr.open_group(str(tmp.path), mode="r+")
        mark = {"complete": True, WRITTEN_BY: f"streamlsq {_version()}",
                EVERY_CHUNK_WRITTEN: _every_chunk_written(g)}
        if beside:
            mark[BESIDE] = files.write()
        g.attrs.update(mark)
        consolidate(tmp.path)
        _publish_local(tmp, files, out, overwrite)


@contextlib.contextmanager
def _output_failures(out: Path, tmp: OwnedTemporary) -> Iterator[None]:
    """A local write that fails for lack of space or permission: one line
    (:func:`~streamlsq.io.outputs.output_failure`)."""
    try:
        yield
    except OSError as exc:
        failure = output_failure(exc, out, tmp.path)
        if failure is None:
            raise
        raise failure from None


def _publish_local(tmp: OwnedTemporary, files: BesideFiles, out: Path, overwrite: bool) -> None:
    """Rename the finished temporary store ``tmp`` and its beside ``files`` into place; with
    ``overwrite``, remove the replaced result's beside files this one does not list."""
    stale = files.stale() if overwrite else []
    files.publish(overwrite)
    try:
        publish(tmp, out, overwrite)
    except BaseException:
        files.withdraw()
        raise
    for path in stale:  # the replaced result's, which this one does not list
        path.unlink(missing_ok=True)


def _write_encoded(ds: xr.Dataset, out, overwrite: bool, inputs, storage_options,
                   beside: dict | None) -> None:
    """:func:`atomic_store` for a dataset held in memory: encoded, marked and consolidated
    in a zarr ``MemoryStore`` (:func:`_encoded`), its objects written as the temporary
    store's files, then published. zarr's own writes to a local store go through its event
    loop once per object; a result's 40-odd small arrays took 0.17–0.25 s that way against
    0.12–0.14 s encoded in memory and written as files (``docs/performance.md#exit``)."""
    out = prepare_output(out, overwrite, inputs, storage_options, beside)
    files = BesideFiles(out, beside or {})
    with OwnedTemporary(out, "partial") as tmp, contextlib.closing(files), \
            _output_failures(out, tmp):
        if beside:
            ds.attrs[BESIDE] = files.write()
        for key, data in _encoded(ds).items():
            path = tmp.path.joinpath(*key.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)  # inside the owned temporary
            path.write_bytes(data)
        _publish_local(tmp, files, out, overwrite)


@contextlib.contextmanager
def imports_ahead() -> Iterator[None]:
    """Import, in a daemon thread while the block runs (a fit's tasks), what building and
    encoding its result first imports; joined when the block ends.

    The fit path imports neither xarray nor pandas (about a third of its imports), so a
    command sends its first task that much sooner; xarray, on its first ``Dataset``, then
    imports every duck-array library it finds (dask.array with scipy.sparse and scipy.fft,
    pint and cupy when installed), and pandas its Arrow strings on the first string index
    (``docs/performance.md#exit``). A one-value result is built and encoded in memory for
    that, nothing is written; should it fail, the real result's build raises the error
    itself. The block must import neither package itself: two threads importing one
    package's modules can each hold a lock the other waits for, and Python then hands one
    of them the half-imported module. Joining at the block's end keeps every later import
    of them in one thread. A process that has imported xarray already (a notebook) starts
    no thread."""
    if "xarray" in sys.modules:
        yield
        return
    thread = threading.Thread(target=_import_by_encoding, name="streamlsq-import-ahead",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import_by_encoding() -> None:
    with contextlib.suppress(Exception):  # see imports_ahead: the real build reports it
        import xarray as xr

        ds = xr.Dataset({"coef": (("step", "feature"), np.zeros((1, 1)))},
                        coords={"step": [0], "feature": np.array(["x"], dtype=object)},
                        attrs={"complete": False})
        _encoded(ds)


def _encoded(ds: xr.Dataset) -> dict[str, bytes]:
    """The objects (key → bytes) of the finished store of ``ds``, held in memory:
    written, marked complete and consolidated in a zarr ``MemoryStore``."""
    from zarr.storage import MemoryStore

    objects: dict = {}
    store = MemoryStore(objects)
    _write_dataset(ds, store)
    _mark_complete(store, list_once=True)
    consolidate(store)
    return {key: buf.to_bytes() for key, buf in objects.items()}


def _mark_complete(store, list_once: bool = False) -> None:
    """Set the root attributes of a finished store: ``complete=True``, the ``written_by``
    mark and whether every chunk was written (``list_once``: the store's keys listed once
    for all its arrays, :func:`_every_chunk_written`)."""
    g = zarr.open_group(store, mode="r+")
    g.attrs.update({"complete": True, WRITTEN_BY: f"streamlsq {_version()}",
                    EVERY_CHUNK_WRITTEN: _every_chunk_written(g, list_once)})


def _every_chunk_written(g: zarr.Group, list_once: bool = False) -> bool:
    """Whether no chunk of any array of the finished store ``g`` was left unwritten (what
    lets :func:`check_result` take a missing chunk later for damage). ``list_once``: list
    the store's keys once for all its arrays (an object store, where each listing is a
    request; a zarr ``MemoryStore``, whose listing of an array ``a`` would also hold an
    array ``a2``'s keys), rather than each array's."""
    listing = store_keys(g.store_path.store, g.store_path.path) if list_once else None
    return all(unwritten_chunks(arr, listing=listing).count == 0 for _, arr in g.arrays())


def for_workers(tmp):
    """A temporary store of :func:`atomic_store` as Dask tasks take it: the local path as an
    absolute string (a worker of a running scheduler has its own working folder: a relative
    ``--out`` was written there, or not found), or the ``FsspecStore`` itself (both open with
    ``zarr.open_group``)."""
    return os.path.abspath(tmp) if isinstance(tmp, str | os.PathLike) else tmp


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
    into place; on an object store claimed, copied and marked complete last). When ``ds`` is
    held in memory, it is encoded in memory (:func:`_encoded`) and its objects written as
    the temporary store's files (:func:`_write_encoded`), or on an object store straight to
    the claimed destination (:func:`~streamlsq.io.outputs.publish_objects`). ``beside``: the
    files that belong to it (:func:`atomic_store`)."""
    ds = ds.copy()
    # zarr v3 has a specified variable-length string type, not numpy's fixed-width one
    strings = {n: ds[n].astype(object) for n, v in ds.variables.items() if v.dtype.kind == "U"}
    ds = ds.assign_coords({n: v for n, v in strings.items() if n in ds.coords})
    ds = ds.assign({n: v for n, v in strings.items() if n not in ds.coords})
    ds.attrs["complete"] = False
    loc = locate(out, storage_options)
    in_memory = all(v.chunks is None for v in ds.variables.values())
    if loc is not None and loc.remote and in_memory:
        # encoded in memory, and its objects written straight to the claimed destination
        # (publish_objects), where a temporary prefix would cost a request per object to
        # write it, list it, read its metadata back, copy it and remove it
        target = prepare_output(out, overwrite, inputs, storage_options, beside)
        try:
            publish_objects(_encoded(ds), target, overwrite)
        except Exception as exc:
            failure = remote_failure(exc, target, None)
            if failure is None:
                raise
            raise failure from None
        return loc
    if in_memory:
        _write_encoded(ds, out, overwrite, inputs, storage_options, beside)
        return Path(loc.url)
    with atomic_store(out, overwrite, inputs, storage_options, beside) as tmp:
        _write_dataset(ds, tmp)
    return loc if loc.remote else Path(loc.url)


def _write_dataset(ds: xr.Dataset, store) -> None:
    # every chunk stored, also one equal to the fill value (a chunk of zeros): a chunk
    # found missing later is damage (check_result)
    ds.to_zarr(store, mode="w", zarr_format=3, consolidated=False, write_empty_chunks=True)


def open_result(path, *, storage_options: dict | None = None, lazy: bool = True
                ) -> xr.Dataset:
    """Open a result store (a path, an fsspec URL or a zarr store object); refuse one that an
    interrupted run left incomplete, or that was damaged since (:func:`check_result`: a
    chunk missing, unreadable or holding a non-finite value, named by variable and chunk).
    ``storage_options`` reach a URL; for a local path they are refused (as a run refuses
    them).

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
    if isinstance(path, str | os.PathLike) and not os.fspath(path):
        # else read as the working folder, and named so
        raise InputError("'': an empty path; give the path (or URL) of a result store")
    _check_not_a_group(path)
    check_storage_options(storage_options, [path])
    loc = locate(path, storage_options)
    if loc is not None and loc.url.startswith("memory://"):
        # read here: the workers of a distributed client, other processes, would read their
        # own, empty, memory filesystem, and every value as the fill value NaN
        lazy = False
    if loc is None and not isinstance(path, zarr.abc.store.Store | MutableMapping):
        raise InputError(f"{path!r}: not a path, URL or zarr store of a result (a "
                         f"{type(path).__name__})")
    if loc is None:  # an in-memory zarr store: read as xarray reads it
        ds = open_dataset(path, lazy=lazy)
        if ds.attrs.get("complete") is not True:
            raise InputError(f"{path}: result store is incomplete (no complete=True attribute)")
        check_kept_formula(ds.attrs, str(path), variables=set(ds.variables))
        check_layout(ds.attrs, {n: v.dims for n, v in ds.variables.items()}, str(path))
        check_coefficient_labels(ds.attrs, str(path), *(
            ds[n].values.tolist() if n in ds.variables else None for n in ("feature", "target")))
        check_model(ds.attrs, lambda name: ds[name].values, str(path))
        return ds
    g = open_group(loc, None)
    if g.attrs.get("complete") is not True:
        raise InputError(f"{path}: result store is incomplete (no complete=True attribute)")
    check_kept_formula(dict(g.attrs), loc.shown or loc.url,
                       variables={n for n, _ in g.arrays()})
    check_layout(dict(g.attrs), {n: dimension_names(a) for n, a in g.arrays()},
                 loc.shown or loc.url)
    large = check_result(g, loc, whole=not lazy)
    check_model(dict(g.attrs), lambda name: g[name][...], loc.shown or loc.url)
    check_coefficient_labels(dict(g.attrs), loc.shown or loc.url, _labels(g, "feature"),
                         _labels(g, "target"))
    ds = open_dataset(loc, lazy=lazy)
    for name in large:
        if name in ds.data_vars and ds[name].chunks is not None:
            ds[name] = ds[name].copy(data=_checked_lazily(loc, name, g[name],
                                                          ds[name].data.chunks))
    return ds


def _check_not_a_group(path) -> None:
    """Refuse ``PATH#GROUP`` (a group of a store, as the commands that read data name one)
    given for a result, which is a store of its own (a result is never written inside
    another store), rather than say ``no such store``."""
    if not isinstance(path, str | os.PathLike) or is_url(os.fspath(path)):
        return
    text = os.fspath(path)
    if not isinstance(text, str) or "#" not in text or os.path.lexists(text):
        return
    # the store is the shortest part that exists (as split_group reads it); none existing,
    # the part up to the first '#', whose absence (or mistyped URL) is the first thing to mend
    cuts = [i for i, ch in enumerate(text) if ch == "#"]
    cut = next((i for i in cuts if os.path.lexists(text[:i])), None)
    if cut is None:
        store = text[:cuts[0]]
        if not store.strip("/"):
            raise InputError(f"{text}: names no store before '#', and a result is a store of "
                             "its own, never a group: give the result's path")
        raise InputError(not_a_url(store) or f"{text}: no such store {store} (and a result "
                         "is a store of its own, never a group: give its path)")
    store, group = text[:cut], text[cut + 1:].strip("/")
    if not group:
        raise InputError(f"{text}: names no group after '#', and a result is a store of its "
                         "own, never a group: leave out the '#'")
    raise InputError(f"{text}: names the group '{group}' of {store}; a result is a store "
                     "of its own, never a group: give its path (open_dataset(PATH, "
                     "group=GROUP) reads a group of a store)")


def check_kept_formula(attrs: dict, label: str, variables: set | None = None) -> None:
    """Refuse a result whose attribute ``formula`` holds anything a formula may not (a name,
    call or attribute outside the declared transforms: :func:`~streamlsq.io.formulas.
    check_formula`), naming the result; the formula is checked, never evaluated.
    ``variables``: the store's variables, when known (:func:`check_method`)."""
    from streamlsq.io.formulas import check_formula

    check_method(attrs, label, variables)
    _check_kept_record(attrs, label)
    formula = attrs.get("formula")
    if formula is None:
        return
    if not isinstance(formula, str):
        raise InputError(f"{label}: its attribute formula is {type(formula).__name__}, not a "
                         "formula's text; the result is damaged")
    try:
        check_formula(formula)
    except InputError as exc:
        raise InputError(f"{label}: its attribute formula is refused: {exc}") from None


def _labels(g: zarr.Group, name: str) -> list | None:
    """The labels of the result's coordinate ``name`` (``feature``, ``target``), if it has
    one."""
    return g[name][...].tolist() if name in g.array_keys() else None


def check_coefficient_labels(attrs: dict, label: str, features: list | None,
                             targets: list | None) -> None:
    """Refuse a fit whose coefficients' labels are not those its record makes
    (:func:`_check_labels`), then one whose record was edited since the fit in any other
    way its digest shows (:func:`_check_digest`)."""
    _check_labels(attrs, label, features, targets)
    _check_digest(attrs, label, features)


def _check_labels(attrs: dict, label: str, features: list | None,
                  targets: list | None) -> None:
    """Refuse a fit whose coefficients' labels are no longer those its attributes describe:
    a fit of named variables whose labels are not its ``x_variables``
    (:func:`_check_variable_labels`), or a formula fit whose attributes ``formula`` and
    ``formula_levels`` no longer make the labels of its coefficients (``features``) and
    targets (``targets``): an attribute edited since the fit (a term added or removed, a
    level renamed, removed or reordered), which would read new rows into a design the
    coefficients do not belong to.
    The attribute is named: the formula when the terms differ (or the intercept), the
    levels when only the levels within the terms do. Nothing is evaluated
    (:func:`~streamlsq.io.formulas.design_labels`); a fit whose coefficients belong to
    basis functions (the IRMA family) is not labelled by its formula and passes."""
    import json
    import re

    from streamlsq.io.formulas import design_labels
    from streamlsq.kernels.recursions.registry import RECURSIONS

    formula = attrs.get("formula")
    if features is None:
        return
    method = str(attrs.get("method", ""))
    if method in RECURSIONS and RECURSIONS.declaration(method).intercept_kind == "basis":
        return
    if method in RECURSIONS or method == "glm":
        _check_intercept_label(attrs, label, [str(v) for v in features],
                               isinstance(formula, str) and bool(formula))
    if not isinstance(formula, str) or not formula:
        _check_variable_labels(attrs, label, [str(v) for v in features])
        return
    levels = json.loads(attrs.get("formula_levels") or "{}")
    stored = [str(v) for v in features]
    # the intercept's label: formulaic's "Intercept"; "intercept" in a GLM formula fit
    # written before a GLM labelled it as a linear fit does
    has_constant = bool(stored) and stored[0] in ("Intercept", "intercept")
    shown_levels = attrs.get("formula_levels") or "{}"
    try:
        terms, responses, intercept = design_labels(formula, levels)
    except ValueError as exc:
        raise InputError(f"{label}: its attributes formula ({formula!r}) and formula_levels "
                         f"({shown_levels[:80]}) make no design ({exc}); {_DAMAGED}") from None
    kept = stored[int(has_constant):]
    made = list(terms)

    def bare(names):  # the terms without their levels ('C(g)[T.B]' -> 'C(g)')
        return [re.sub(r"\[[^\]]*\]", "", n) for n in names]

    if intercept != has_constant or kept != made:
        if intercept == has_constant and bare(kept) and \
                list(dict.fromkeys(bare(kept))) == list(dict.fromkeys(bare(made))):
            said = f"formula_levels ({shown_levels[:80]})"
        else:
            said = f"formula ({formula!r})"
        constant = [stored[0] if has_constant else "Intercept"] if intercept else []
        raise InputError(f"{label}: its attribute {said} makes the columns "
                         f"{_listed(constant + made)}, but its coefficients are those of "
                         f"{_listed(stored)}: the attribute was edited since the fit; "
                         f"{_DAMAGED}")
    fitted = [str(v) for v in targets or ()]
    # a GLM's binomial response of two columns (successes + failures) predicts the first
    made = list(responses)[:len(fitted)] if method == "glm" else list(responses)
    if targets is not None and all(isinstance(v, str) for v in targets) and fitted != made:
        raise InputError(f"{label}: its attribute formula ({formula!r}) makes the response "
                         f"{_listed(list(responses))}, but its targets are {_listed(fitted)}: "
                         f"the attribute was edited since the fit; {_DAMAGED}")


def _check_intercept_label(attrs: dict, label: str, stored: list[str], formula: bool) -> None:
    """Refuse a fit whose attribute ``fit_intercept`` (which tells ``predict`` to put a
    constant column before the new rows' features) does not say what its coefficients'
    labels say: edited since the fit, it made ``predict`` blame the new rows (``has 2
    feature column(s) but fit.zarr was fitted on 2``) and ``info --check`` pass. A fit of
    named variables without an intercept may have a column of its own named 'intercept':
    its labels are then the variables (``x_variables``) alone."""
    import json

    given = attrs.get("fit_intercept")
    if not isinstance(given, bool):
        return
    constant = bool(stored) and stored[0] in ("Intercept", "intercept")
    if given and constant or not given and not constant:
        return
    if not given and not formula:
        try:
            names = json.loads(attrs.get("x_variables") or "[]")
        except ValueError:
            return  # checked with the other kept attributes
        if not (isinstance(names, list) and len(stored) == len(names) + 1
                and stored[0] not in names):
            return  # variables of several columns: the labels alone cannot tell
    raise InputError(f"{label}: its attribute fit_intercept is {given}, but its coefficients "
                     f"are those of {_listed(stored)}: the attribute was edited since the "
                     f"fit; {_DAMAGED}")


def _check_variable_labels(attrs: dict, label: str, stored: list[str]) -> None:
    """Refuse a fit of several 1-D feature variables (``--x a,b,c``) whose coefficients'
    labels are not those variables in their order (the intercept aside): a label or the
    attribute ``x_variables`` edited since the fit, which would apply each coefficient to
    another column of new rows. Labels that name none of the variables (the basis
    functions of the IRMA family, a 2-D X's coordinate) are not the variables' and pass."""
    import json

    try:
        names = json.loads(attrs.get("x_variables") or "[]")
    except ValueError:
        return  # checked with the other kept attributes
    if not isinstance(names, list) or len(names) < 2:
        return
    names = [str(n) for n in names]
    kept = stored
    if len(stored) == len(names) + 1 and stored[0] in ("intercept", "Intercept"):
        kept = stored[1:]
    if not set(kept) & set(names) or kept == names:
        return
    raise InputError(f"{label}: its coefficients are labelled {_listed(kept)}, but its "
                     f"attribute x_variables says {_listed(names)}: one of them was edited "
                     f"since the fit; {_DAMAGED}")


def _listed(names: list) -> str:
    shown = ", ".join(map(repr, names[:8]))
    return f"[{shown}{f', … ({len(names)} in all)' if len(names) > 8 else ''}]"


#: what a result's ``method`` attribute names besides a registered recursion (a stream fit):
#: the jobs whose results are not a recursion's (``Job.name``: a GLM, the models of tasks, a
#: prediction) and the stores of tables ``convert`` writes
OTHER_METHODS = ("glm", "metalearn", "pooled", "em", "predict", "convert")


def result_methods() -> list[str]:
    """Every value a result's ``method`` attribute may hold: the registered recursions'
    names (those found by discovery and plugins too), then :data:`OTHER_METHODS`."""
    from streamlsq.kernels.recursions.registry import RECURSIONS

    return [*RECURSIONS, *OTHER_METHODS]


def check_method(attrs: dict, label: str, variables: set | None = None) -> None:
    """Refuse a result whose ``method`` attribute (what made it, which decides how it is read
    and applied) is missing or names nothing streamlsq writes (edited by hand, damaged, or
    of a recursion not registered here), naming the value and the accepted ones, before
    anything reads it as the kind of result it is not. ``variables``: the store's variables,
    when known; a store without a ``method`` and without fitted coefficients (``coef``) is
    data streamlsq wrote (a simulated stream, a task store of examples), not a result, and
    passes."""
    from streamlsq.kernels.recursions.registry import RECURSIONS

    method = attrs.get("method")
    if method is None and variables is not None and "coef" not in variables:
        return
    if isinstance(method, str) and (method in OTHER_METHODS or method in RECURSIONS):
        return  # a known name: the registry is listed (and searched) on a refusal only
    said = ("is missing" if method is None
            else f"is {method!r}, which names no method streamlsq knows")
    raise InputError(f"{label}: its attribute method {said} (one of: "
                     f"{', '.join(result_methods())}); {_DAMAGED}")


#: the variables (and their dims, None: any) each kind of result holds, by its method
_FIT_LAYOUT = {"coef": ("step", "feature", "target")}
_MODEL_LAYOUT = {"coef": None, "noise_var": None, "weight": None}


def check_layout(attrs: dict, dims: dict, label: str) -> None:
    """Refuse a result whose variables (``dims``: name -> dims) are not those its ``method``
    attribute makes (a stream fit's or a GLM's ``coef (step, feature, target)``, a model's
    ``coef``, ``noise_var`` and ``weight``): a method edited into another kind's, read as
    that kind, used to fail with Python's errors (exit 1)."""
    from streamlsq.kernels.recursions.registry import RECURSIONS

    method = attrs.get("method")
    if attrs.get("model") == "glm" and method != "glm":  # a GLM's coefficients read as linear
        raise InputError(f"{label}: its attribute method is {method!r}, but its attribute "
                         f"model says a GLM (whose method is 'glm'); {_DAMAGED}")
    if method == "glm" and attrs.get("model") != "glm":  # named before the digest sees it
        raise InputError(f"{label}: its attribute model is {attrs.get('model')!r}, where a "
                         f"GLM's (method 'glm') is 'glm'; {_DAMAGED}")
    layout = (_MODEL_LAYOUT if method in ("metalearn", "pooled", "em") else _FIT_LAYOUT
              if method == "glm" or (isinstance(method, str) and method in RECURSIONS) else {})
    for name, wanted in layout.items():
        if name not in dims or (wanted is not None and tuple(dims[name]) != wanted):
            found = f"{name} {tuple(dims[name])}" if name in dims else f"no {name}"
            need = name if wanted is None else f"{name} {wanted}"
            raise InputError(f"{label}: its attribute method is {method!r}, whose results hold "
                             f"{need}, but it holds {found}; {_DAMAGED}")


#: the methods whose results are models of a mixture (coef, noise_var, weight per component)
_MODEL_METHODS = ("metalearn", "pooled", "em")


def check_model(attrs: dict, read, label: str) -> None:
    """Refuse a model (a result of :data:`_MODEL_METHODS`) whose mixture cannot be one: a
    weight below 0, weights not summing to 1, a noise variance not above 0. A model is
    written so (every run checks it): one found otherwise was edited since, and is named so
    when it is opened rather than when a prediction reads it (blamed on the tasks). ``read``:
    a variable's values by name (finite: :func:`check_result` read them first)."""
    from streamlsq.kernels.mlr.classify import check_weights

    if attrs.get("method") not in _MODEL_METHODS:
        return
    damaged = "the model is damaged (edited since it was written); compute it again"
    values = {name: np.asarray(read(name), dtype=np.float64).ravel()
              for name in ("weight", "noise_var")}  # each read once
    for name, ok, what in (("weight", np.greater_equal, "a weight >= 0"),
                           ("noise_var", np.greater, "a variance > 0")):
        bad = np.flatnonzero(~ok(values[name], 0))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"{label}: variable '{name}' [{i}] is {values[name][i]:.6g}, "
                             f"not {what}: {damaged}")
    weight = values["weight"]
    try:  # the tolerance the mixture's kernels hold the weights to
        check_weights(weight, weight.size)
    except ValueError:
        raise InputError(f"{label}: variable 'weight' sums to {weight.sum():.6g}, not 1: "
                         f"{damaged}") from None


#: the attributes (numbers) a result's summary reads, and the values each may take
_KEPT_NUMBERS = {"n_rows": "a count", "rows_dropped": "a count", "iterations": "a count",
                 "conf_int_alpha": "a number in (0, 1)"}

#: the attributes (JSON text) a result keeps of what its fit read, and what each holds
_KEPT_JSON = {"x_variables": "a list of names", "y_variables": "a list of names",
              "parameters": "an object", "formula_levels": "an object of lists of levels",
              "formula_contrasts": "an object"}


def _check_kept_record(attrs: dict, label: str) -> None:
    """Refuse a result whose record of what its fit read (JSON attributes: variables,
    parameters, a formula's levels) is no longer what streamlsq wrote (edited by hand or
    damaged), naming the attribute, before anything is read with it."""
    import json
    import numbers

    for name, holds in _KEPT_NUMBERS.items():
        value = attrs.get(name)
        if value is None:
            continue
        count = isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and value >= 0
        level = isinstance(value, numbers.Real) and not isinstance(value, bool) \
            and 0 < value < 1
        if not (count if holds == "a count" else level):
            raise InputError(f"{label}: its attribute {name} is {value!r}, not {holds}; "
                             f"{_DAMAGED}")
    flag = attrs.get("fit_intercept")
    if flag is not None and not isinstance(flag, bool | np.bool_):
        # read as Python reads a value: 'yes', and 'no' too, would be an intercept
        raise InputError(f"{label}: its attribute fit_intercept is {flag!r}, not true or "
                         f"false; {_DAMAGED}")
    for name, holds in _KEPT_JSON.items():
        text = attrs.get(name)
        if text is None or (name == "parameters" and isinstance(text, dict)):
            continue
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError as exc:
            value, why = None, f"not JSON: {exc}"
        else:
            why = f"{type(text).__name__}, not JSON text" if value is None else None
        if why is None:
            names = (isinstance(value, list) and all(isinstance(v, str) for v in value))
            objects = isinstance(value, dict) and all(isinstance(k, str) for k in value)
            levels = objects and all(
                isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v)
                and len(set(v)) == len(v)
                for v in value.values())
            ok = {"a list of names": names, "an object": objects,
                  "an object of lists of levels": levels}[holds]
            why = None if ok else f"not {holds}"
        if why is not None:
            raise InputError(f"{label}: its attribute {name} is {why} ({str(text)[:60]!r}); "
                             f"{_DAMAGED}")
    _check_glm_record(attrs, label)


def _check_glm_record(attrs: dict, label: str) -> None:
    """Refuse a GLM whose ``family``, ``link``, ``offset_variable`` or ``exposure_variable``
    (what its prediction applies: the offset and exposure are columns of the new rows added
    to the linear predictor) is not what its ``parameters`` record: edited to another valid
    family or to another real column of the data, it would be applied without a word. A GLM
    written before its parameters recorded the offset and exposure has nothing to compare
    for them. A family or link no GLM has is refused in the words of ``predict``
    (:func:`glm_spec`); an edit of a record and its parameters alike, by the digest
    (:func:`_check_digest`)."""
    import json

    if attrs.get("method") != "glm":
        return
    glm_spec(attrs, label)  # a family or link no GLM has: refused when opened, as predict did
    if attrs.get("parameters") is None:
        return
    recorded = attrs["parameters"]
    recorded = recorded if isinstance(recorded, dict) else json.loads(recorded)
    for key, name in (("family", "family"), ("link", "link"), ("offset", "offset_variable"),
                      ("exposure", "exposure_variable")):
        if key not in recorded:
            continue
        kept = attrs.get(name)
        if kept != recorded[key]:
            said = "is missing" if kept is None else f"is {kept!r}"
            was = "none" if recorded[key] is None else repr(recorded[key])
            raise InputError(f"{label}: its attribute {name} {said}, but its attribute "
                             f"parameters records the {key} {was}: one of them was edited "
                             f"since the fit; {_DAMAGED}")


def glm_spec(attrs: dict, label: str):
    """The :class:`~streamlsq.kernels.glm.GLMSpec` a GLM's attributes ``family``, ``link``,
    ``nb_alpha`` and ``var_power`` make, or the one-line refusal of a family or link no GLM
    has (edited by hand): the same when the result is opened (``info --check``,
    :func:`open_result`) as when ``predict`` applies it."""
    from streamlsq.kernels.glm import GLMSpec

    spec = GLMSpec(family=str(attrs.get("family")), link=attrs.get("link"),
                   alpha=attrs.get("nb_alpha"), power=attrs.get("var_power"))
    try:
        spec.fam.link(spec.link)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{label}: its attributes family and link ({attrs.get('family')!r}, "
                         f"{attrs.get('link')!r}) are refused: {exc}; {_DAMAGED}") from None
    return spec


#: the attribute holding the digest of a fit's record of its model (:func:`record_digest`)
DIGEST = "model_digest"

#: the attribute that marks a fit written with :data:`DIGEST` (its value, the layout's
#: version, is 2): a fit that has it and no digest had the digest removed, where one that
#: has neither was written before the digest (which ``streamlsq_version`` cannot tell)
SEALED = "streamlsq_layout"
SEALED_LAYOUT = 2

#: the attributes that say what model a result's coefficients belong to, and how ``predict``
#: builds the new rows' design for them: the digest binds them to the coefficients' labels
DIGESTED = ("method", "model", "family", "link", "nb_alpha", "var_power", "formula",
            "formula_levels", "formula_contrasts", "x_variables", "y_variables", "sample_dim",
            "fit_intercept", "k_constant", "offset_variable", "exposure_variable",
            "trials_variable", "weights_variable", "groups_variable", "parameters")


def record_digest(attrs: dict, features: list | None) -> str:
    """The sha256 (hex) of a fit's record of its model: the attributes of :data:`DIGESTED`
    it has (JSON text read as its value, so that its spacing does not count) and the labels
    of its coefficients (``features``). Written at the fit as the attribute
    :data:`DIGEST`; every reader computes it again (:func:`check_coefficient_labels`)."""
    import hashlib
    import json

    record = {}
    for name in DIGESTED:
        if name not in attrs:
            continue
        value = attrs[name]
        if name in _KEPT_JSON and isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        record[name] = value
    record["feature"] = None if features is None else [str(v) for v in features]
    text = json.dumps(record, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value):
    """A NumPy scalar as the Python value a store's attribute reads back as."""
    return value.item() if isinstance(value, np.generic) else str(value)


def seal(result) -> None:
    """Record :data:`DIGEST` on a fit (a Dataset, or the zarr group of a store written chunk
    by chunk) holding coefficients; other results (data, a study's files) have none."""
    if isinstance(result, zarr.Group):
        if "coef" in result.array_keys():
            result.attrs[DIGEST] = record_digest(dict(result.attrs), _labels(result, "feature"))
            result.attrs[SEALED] = SEALED_LAYOUT
        return
    import xarray as xr  # a Dataset was built: imported already

    if isinstance(result, xr.Dataset) and "coef" in result.variables:
        features = result["feature"].values.tolist() if "feature" in result.variables else None
        result.attrs[DIGEST] = record_digest(dict(result.attrs), features)
        result.attrs[SEALED] = SEALED_LAYOUT


def _check_digest(attrs: dict, label: str, features: list | None) -> None:
    """Refuse a fit whose record of its model (:data:`DIGESTED`, the coefficients' labels)
    is no longer the one its :data:`DIGEST` was computed from at the fit: an attribute
    edited since, even consistently with the others (the exposure in both
    ``exposure_variable`` and ``parameters``), which the comparisons of one attribute with
    another cannot see. An integrity check against edits that leave the digest as it was,
    not a signature: whoever computes it again can forge it. A result written before the
    digest has none and is read as before; one marked as written with it (:data:`SEALED`)
    but without it had it removed, and is refused (who removes both is not caught)."""
    kept = attrs.get(DIGEST)
    if kept is None:
        if attrs.get(SEALED) is not None:
            raise InputError(f"{label}: its attribute {DIGEST} is missing (its attribute "
                             f"{SEALED} says the fit wrote one); {_DAMAGED}")
        return
    if kept != record_digest(attrs, features):
        names = [name for name in DIGESTED if name in attrs]
        raise InputError(f"{label}: its attributes ({', '.join(names)}) or its coefficients' "
                         f"labels are not those its attribute {DIGEST} was computed from at "
                         f"the fit: they were edited since the fit; {_DAMAGED}")


#: arrays of a result up to this many bytes are read and checked when the result is opened
#: (every array of a fit or a model); larger ones (the rows of a prediction) are checked
#: chunk by chunk as they are read, so that opening a prediction reads none of its rows
CHECKED_WHEN_OPENED = 64 * 2**20
_DAMAGED = "the result is damaged: compute it again"


def check_result(g: zarr.Group, location: Location, whole: bool = False) -> list[str]:
    """Check the arrays of the result store ``g`` (at ``location``): every chunk
    written, readable and finite, else an :class:`~streamlsq.errors.InputError` naming the
    result, the variable and the chunk. Results never hold NaN or Inf (every run checks
    what it publishes), so one is damage. A chunk never written reads as the array's fill
    value: damage in a result whose root says every chunk was written
    (``every_chunk_written``, set on publication), and always where the fill value is NaN;
    in an integer array of an earlier result it is a chunk of zeros zarr did not store
    (``write_empty_chunks=False``), read as such.

    Arrays up to :data:`CHECKED_WHEN_OPENED` bytes (all of them with ``whole``) are read
    and checked here; returns the names of the larger floating-point ones (``yhat``,
    ``residual``, a prediction's ``coef``), whose chunks the caller checks as they are read
    (:func:`open_result` gives them dask arrays that do)."""
    label = location.shown or location.url
    every = g.attrs.get(EVERY_CHUNK_WRITTEN) is True
    large = []
    listing = None  # an object store's keys, listed once for all its arrays
    for name, arr in g.arrays():
        fill = np.asarray(arr.fill_value) if arr.fill_value is not None else None
        strict = every or (fill is not None and fill.dtype.kind in "fc"
                           and not np.isfinite(fill).all())
        if strict and listing is None and location.remote:
            listing = store_keys(g.store_path.store, g.store_path.path)
        gaps = unwritten_chunks(arr, listing=listing) if strict else None
        if gaps is not None and gaps.count:
            coords, (a, b) = gaps.found[0]
            dims = dimension_names(arr)
            span = f" ({dims[0] if dims else 'index'} {a}-{b - 1})" if arr.ndim else ""
            raise InputError(f"{label}: variable '{name}' chunk {coords}{span} is missing "
                             f"({gaps.count} of {gaps.total} chunks; it would read as "
                             f"{arr.fill_value}); {_DAMAGED}")
        if arr.nbytes <= CHECKED_WHEN_OPENED or whole or arr.dtype.kind not in "fc":
            _finite(label, name, arr, read_checked(location.url, None, name, arr, 0, _length(arr),
                                                   label, _DAMAGED, not strict), 0)
        else:
            large.append(name)
    return large


def _length(arr) -> int:
    return int(arr.shape[0]) if arr.ndim else 1


def _finite(label: str, name: str, arr, values: np.ndarray, start: int) -> None:
    """Refuse a NaN or Inf in ``values`` (rows ``start:`` of the result's array ``arr``)."""
    if values.dtype.kind not in "fc" or np.isfinite(values).all():
        return
    where = tuple(int(i) for i in np.argwhere(~np.isfinite(values))[0])
    kind = "NaN" if np.isnan(values[where]) else "Inf"
    if not arr.ndim:
        raise InputError(f"{label}: variable '{name}' (one value) is {kind}; {_DAMAGED}")
    row = start + where[0]
    dims = dimension_names(arr)
    raise InputError(f"{label}: variable '{name}' chunk {row // int(arr.chunks[0])} has {kind} "
                     f"at {dims[0] if dims else 'index'} {row}; {_DAMAGED}")


@dataclasses.dataclass
class _CheckedRows:
    """A large array of a result read as :func:`check_result` reads a small one (its chunks
    named when missing or unreadable, its values checked finite), row range by row range as
    dask asks for them."""

    arr: zarr.Array
    location: Location
    name: str

    @property
    def shape(self):
        return self.arr.shape

    @property
    def dtype(self):
        return self.arr.dtype

    @property
    def ndim(self):
        return self.arr.ndim

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        rows = key[0] if key else slice(None)
        start, stop, _ = rows.indices(self.arr.shape[0])
        label = self.location.shown or self.location.url
        values = read_checked(self.location.url, None, self.name, self.arr, start, stop,
                              label, _DAMAGED)
        _finite(label, self.name, self.arr, values, start)
        return values[(slice(None), *key[1:])]


def _checked_lazily(loc: Location, name: str, arr, chunks):
    import dask.array as da

    return da.from_array(_CheckedRows(arr, loc, name), chunks=chunks,
                         name=f"checked-{name}-{uuid.uuid4().hex[:8]}", asarray=False)
