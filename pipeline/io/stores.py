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

import contextlib
import functools
import glob
import hashlib
import itertools
import json
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import zarr

from streamlsq.errors import InputError
from streamlsq.io.chunk_decoding import DamagedChunk, direct_rows
from streamlsq.io.location import (
    Location,
    check_storage_options,
    csv_folder_remedy,
    locate,
    not_a_url,
    streamlsq_folder,
)
from streamlsq.io.names import look_alike
from streamlsq.io.parts import RowsReader

if TYPE_CHECKING:  # xarray is imported where a Dataset is made: opening a store stays light
    import xarray as xr

__all__ = [
    "consolidate",
]


def store_label(path: str, group: str | None) -> str:
    return f"{path}" if not group else f"{path} (group '{group}')"


@functools.lru_cache(maxsize=64)
def cached_array(path: str | Location, group: str | None, name: str, token: str = ""
                 ) -> zarr.Array:
    # one open per process and array: metadata reads are not free on remote stores;
    # ``token`` identifies the store's version, so a store rewritten at the same path
    # (e.g. ``simulate --overwrite``) is opened afresh, never read with stale metadata
    # never the consolidated copy of the metadata: rows appended to an array without
    # re-consolidating would be invisible (the arrays' own zarr.json are the truth)
    loc = locate(path)
    g = zarr.open_group(store=loc.zarr_store(read_only=True), mode="r", path=group or None,
                        use_consolidated=False)
    return g[name]


def store_token(path: str | Location) -> str:
    """A version stamp of a store: inode, size and mtime of its metadata files (the root's
    and its arrays' ``zarr.json``) for a local folder; their ETags (or sizes and times) for
    an object store; "" when none can be had.

    A store rewritten in place (``simulate --overwrite``, xarray ``mode="w"``) or an array
    resized (rows appended) gets a new token: caches keyed by it are never stale, and a
    checkpoint records it to refuse a rewritten input (see also :func:`chunk_stamps`).
    """
    loc = locate(path)
    if loc is not None and loc.remote:
        return _remote_token(loc)
    path = loc.url if loc is not None else str(path)
    root = Path(path)
    metas = [root / "zarr.json"]
    for pattern in ("*/zarr.json", "*/*/zarr.json"):
        metas += sorted(Path(p) for p in glob.glob(os.path.join(glob.escape(path), pattern)))
    parts = []
    for meta in metas:
        try:
            st = os.stat(meta)
        except OSError:
            if meta == metas[0]:  # not a local store: no cheap version stamp
                return ""
            continue
        parts.append(f"{meta.relative_to(root)}:{st.st_ino}-{st.st_size}-{st.st_mtime_ns}")
    if len(parts) == 1:
        return parts[0].split(":", 1)[1]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def object_stamp(info: dict) -> str:
    """The version of one stored object from its fsspec ``info``: its ETag where the store
    has one (a content hash on S3 and GCS), else its size and modification time."""
    etag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    if etag:
        return str(etag).strip('"')
    return f"{info.get('size')}-{info.get('LastModified') or info.get('mtime') or ''}"


def _remote_token(loc: Location) -> str:
    try:
        fs, path = loc.filesystem()
        metas = [path.rstrip("/") + "/zarr.json"]
        for child in fs.ls(path, detail=False):
            metas.append(child.rstrip("/") + "/zarr.json")
        parts = []
        for meta in metas:
            try:
                parts.append(f"{meta}:{object_stamp(fs.info(meta))}")
            except (FileNotFoundError, OSError):
                continue
    except Exception:
        return ""
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:24] if parts else ""


@dataclass(frozen=True)
class CFDecoding:
    """How xarray decodes one stored variable when it opens the store (``xr.open_zarr`` with its
    defaults): the variable's dimension names and attributes as xarray reads them (in zarr v2
    the array's ``fill_value`` is its ``_FillValue``), the dtype it is stored in and the dtype
    xarray decodes it to (e.g. int16 with ``scale_factor`` to float64).

    Decoding is xarray's: :meth:`decode` hands the stored values of a row range with these
    attributes to :func:`xarray.conventions.decode_cf_variable`, so that a store read by path
    gives the numbers ``xr.open_zarr`` gives (scale and offset, fill values and
    ``missing_value`` masked to NaN, ``_Unsigned``, ``dtype: bool``, times).
    """

    dims: tuple[str, ...]
    attrs: dict = field(compare=False, hash=False)
    stored: np.dtype
    dtype: np.dtype

    def variable(self, name: str, values: np.ndarray):
        """The decoded :class:`xarray.Variable` of the stored ``values``."""
        from xarray import Variable
        from xarray.conventions import decode_cf_variable

        return decode_cf_variable(name, Variable(self.dims, values, self.attrs))

    def decode(self, name: str, values: np.ndarray) -> np.ndarray:
        """The stored ``values`` of variable ``name`` (any row range) as xarray decodes them."""
        return self.variable(name, values).values

    def describe(self) -> str:
        """The stored dtype and the attributes that decode it, for messages."""
        shown = {k: v.item() if isinstance(v, np.generic) else v
                 for k, v in self.attrs.items() if k in _DECODING_ATTRIBUTES}
        return f"stored as {self.stored}" + (f" with {shown}" if shown else "")


#: dtype kinds whose stored values xarray's decoding may turn into numbers (bool, integers,
#: floats); others are refused as stored
NUMBER_KINDS = ("b", "i", "u", "f")
#: the attributes of xarray's CF decoding, named in messages (xarray decides what applies)
_DECODING_ATTRIBUTES = ("scale_factor", "add_offset", "_FillValue", "missing_value",
                        "_Unsigned", "dtype", "units", "calendar")
#: where xarray keeps a zarr v2 array's dimension names: an attribute it does not decode
_DIMENSIONS_ATTRIBUTE = "_ARRAY_DIMENSIONS"


def _xarray_may_decode(arr: zarr.Array) -> bool:
    """Whether xarray's CF decoding can act on ``arr`` at all: it has attributes (besides
    zarr v2's dimension names), or it is a zarr v2 array with a fill value, which xarray
    reads as its ``_FillValue``. Without either, xarray reads it as stored, and so do we
    without importing xarray (``streamlsq info`` starts fast)."""
    if set(arr.attrs) - {_DIMENSIONS_ATTRIBUTE}:
        return True
    return arr.metadata.zarr_format == 2 and arr.fill_value is not None


def cf_decodings(location: Location, group: str | None, arrays: dict[str, zarr.Array],
                 label: str) -> dict[str, CFDecoding]:
    """The :class:`CFDecoding` of each variable of ``arrays`` that xarray does not read as
    stored; a variable it reads as stored is absent and read without decoding.

    Each variable is opened as xarray opens it (``xarray.backends.ZarrStore``, which applies
    xarray's rules for zarr v2 and v3 fill values) and one stored value is decoded: when
    xarray hands back that very array, its decoding leaves the variable as stored (no CF
    attribute, or only a NaN fill value of a float array). A variable xarray cannot decode
    is refused in one line naming the store and the variable.
    """
    names = [name for name, arr in arrays.items()
             if _xarray_may_decode(arr) and getattr(arr.dtype, "kind", None) in NUMBER_KINDS]
    if not names:
        return {}
    from xarray.backends import ZarrStore

    out = {}
    try:
        store = ZarrStore.open_group(location.zarr_store(read_only=True), mode="r", group=group,
                                     consolidated=False)
    except Exception as exc:
        raise InputError(f"{label}: cannot be opened with xarray to decode its variables "
                         f"({type(exc).__name__}: {_first_line(exc)})") from None
    for name in names:
        try:
            stored = store.open_store_variable(name)
            decoding = CFDecoding(tuple(map(str, stored.dims)), dict(stored.attrs),
                                  np.dtype(stored.dtype), np.dtype(stored.dtype))
            probe = np.zeros((1,) * stored.ndim, dtype=decoding.stored)
            decoded = decoding.variable(name, probe)
            unchanged = decoded.values is probe
        except Exception as exc:
            raise InputError(f"{label}: variable '{name}' cannot be decoded as xarray decodes "
                             f"it ({type(exc).__name__}: {_first_line(exc)})") from None
        if not unchanged:
            out[name] = replace(decoding, dtype=np.dtype(decoded.dtype))
    return out


@dataclass(frozen=True)
class StoreRows:
    """Where the rows of a validated store come from: its place (a local folder or an
    object-store URL with its options), group and version (:func:`store_token`), and how xarray
    decodes each variable it does not read as stored (:class:`CFDecoding`).

    Small and picklable: it travels with every task, and the workers open each array once
    per process (:func:`cached_array`).
    """

    location: Location
    group: str | None
    token: str = ""
    decodings: dict[str, CFDecoding] = field(default_factory=dict, compare=False, hash=False)

    @property
    def in_memory(self) -> bool:
        """A store's rows have chunk files and stamps."""
        return False

    @property
    def from_table(self) -> bool:
        return False

    @property
    def path(self) -> str:
        """The store's absolute path or URL (the workers' working folder is not the client's)."""
        return self.location.url

    @property
    def shown(self) -> str:
        """The store as the user wrote it, for messages."""
        return self.location.shown or self.location.url

    @property
    def label(self) -> str:
        return store_label(self.shown, self.group)

    def array(self, name: str) -> zarr.Array:
        """The store's array ``name``, opened once per process and store version."""
        try:
            return cached_array(self.location, self.group, name, self.token)
        except Exception as exc:  # e.g. a worker that does not see the client's files
            raise InputError(
                f"{self.label}: variable '{name}' cannot be opened here "
                f"({type(exc).__name__}: {_first_line(exc)}); every worker must see the "
                f"store at {self.path}") from None

    def rows_per_chunk(self, name: str) -> int:
        """Rows of one storage chunk of variable ``name`` (chunks are named in messages)."""
        return int(self.array(name).chunks[0])

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of variable ``name`` as xarray decodes them (as stored when
        it reads the variable as stored: no extra pass). A chunk file that vanished, or that
        cannot be decoded (truncated, corrupt), is refused naming the variable, chunk and rows
        (:func:`read_checked`)."""
        values = read_checked(self.path, self.group, name, self.array(name), start, stop,
                              self.label)
        decoding = self.decodings.get(name)
        if decoding is None:
            return values
        try:
            return decoding.decode(name, values)
        except Exception as exc:
            raise InputError(f"{self.label}: variable '{name}' rows {start}-{stop - 1} cannot "
                             f"be decoded ({type(exc).__name__}: {_first_line(exc)})") from None

    def reading(self, names, start: int, stop: int):
        """Each variable is its own array of chunks: its reads share nothing."""
        return contextlib.nullcontext()

    def chunk_stamps(self, names, contents: bool = False) -> dict:
        """Stamps of the stored chunks of ``names`` (:func:`chunk_stamps`; a chunk file's
        stamp is its size and time whatever ``contents``: its bytes are not hashed)."""
        return chunk_stamps(self.location, self.group, names)

    def read_variable(self, name: str) -> np.ndarray | None:
        """A small whole variable of the store (e.g. ``coef_true``) as xarray decodes it, or
        None if absent."""
        g = open_group(self.location, self.group)
        if name not in set(g.array_keys()):
            return None
        arr = g[name]
        decoding = cf_decodings(self.location, self.group, {name: arr}, self.label).get(name)
        values = np.asarray(arr[...])
        return values if decoding is None else decoding.decode(name, values)


def forwarded(part: str, name: str, doc: str) -> property:
    """A read-only attribute ``name`` of a source that is its part ``part``'s own (a source
    groups what belongs together and keeps the names callers use)."""
    return property(lambda self: getattr(getattr(self, part), name), doc=doc)


#: what a refused NaN advises a fit (whose ``--missing drop`` leaves its rows out), named as
#: the command line and Python both spell it; a job without ``--missing`` (a prediction)
#: replaces it with its own advice
DROP_REMEDY = ('remove or impute non-finite values, or drop their rows with --missing drop '
               '(missing="drop")')


class StoreSource:
    """What every validated input shares: where its rows come from (``rows``: a
    :class:`~streamlsq.io.parts.RowsReader`, a :class:`StoreRows` or for a stream any other:
    an xarray Dataset's, a table's, a formula's) and how a row range of one variable is read
    and its values checked.

    Subclasses are frozen dataclasses with the fields ``rows`` and ``chunk_rows``; they
    travel to the workers.
    """

    rows: RowsReader
    chunk_rows: int
    #: what a refused NaN advises (a class attribute, not a field)
    nan_remedy = DROP_REMEDY

    path = forwarded("rows", "path", "The store's absolute path or URL (a Dataset's source).")
    group = forwarded("rows", "group", "The group inside the store (None: its root).")
    token = forwarded("rows", "token", "The input's version (:func:`store_token`; a "
                      "Dataset's: a hash of its arrays).")
    shown = forwarded("rows", "shown", "The input as the user gave it, for messages.")
    label = forwarded("rows", "label", "The input (and group) as messages name it.")
    in_memory = forwarded("rows", "in_memory",
                          "Whether the rows have no files behind them (an xarray Dataset, a "
                          "DataFrame) rather than a store's or a table's files.")
    from_table = forwarded("rows", "from_table", "Whether the rows are a table's (not "
                           "continued: --continue-from).")

    def array(self, name: str) -> zarr.Array:
        """The store's array ``name``, opened once per process and store version."""
        return self.rows.array(name)

    def read_rows(self, name: str, start: int, stop: int, dtype=np.float64,
                  check: bool = True, allow_nan: bool = False) -> np.ndarray:
        """Rows ``start:stop`` of variable ``name`` as xarray decodes them, in ``dtype``;
        NaN/Inf (a decoded fill value is a NaN: a missing value) refused by chunk and row
        unless ``check=False`` (Inf alone with ``allow_nan``: missing values dropped)."""
        stored = np.asarray(self.rows.read(name, start, stop))
        values = np.asarray(stored, dtype=dtype)
        if check:
            try:
                check_finite_rows(self.label, name, values, start,
                                  self.rows.rows_per_chunk(name), stored, allow_nan,
                                  getattr(self.rows, "described", None), self.nan_remedy)
            except InputError as exc:
                raise InputError(f"{exc}{self._fill_value_note(name, values, start)}") from None
        return values

    def _fill_value_note(self, name: str, values: np.ndarray, start: int) -> str:
        """Where a refused NaN was stored as a number xarray decodes as missing (the
        variable's ``_FillValue`` or ``missing_value``; in Zarr v2 the array's own
        ``fill_value``, zeros by zarr-python's default): that number and why, since the
        user's store holds no NaN there."""
        decoding = getattr(self.rows, "decodings", {}).get(name)
        if decoding is None:
            return ""
        nan = np.isnan(values.reshape(len(values), -1)).any(axis=1)
        if not nan.any():
            return ""
        row = start + int(np.flatnonzero(nan)[0])
        raw = np.asarray(self.array(name)[row]).ravel()
        fills = [decoding.attrs.get(k) for k in ("_FillValue", "missing_value")]
        fills = [v for f in fills if f is not None for v in np.ravel(f)]
        hit = next((v for v in raw if any(v == f for f in fills)), None)
        if hit is None:
            return ""
        v2 = self.array(name).metadata.zarr_format == 2 and "_FillValue" not in \
            self.array(name).attrs
        whose = ("the array's fill_value, which xarray reads as missing in Zarr v2 (write "
                 "the array with fill_value=None, or in Zarr v3)" if v2
                 else "a value its attributes declare missing (_FillValue, missing_value)")
        return (f"; the store holds {np.asarray(hit).item()!r} there, {whose}: "
                "docs/stores.md#values")

    def chunk_stamps(self, names, contents: bool = False) -> dict:
        """Stamps of the stored chunks of ``names`` (:func:`chunk_stamps`; none for a
        Dataset)."""
        return self.rows.chunk_stamps(names, contents)

    def identity(self) -> str:
        """The store's place as a fingerprint names it (a resolved local path, or the URL)."""
        return identity(self.path)

    def read_variable(self, name: str) -> np.ndarray | None:
        """A small whole variable (e.g. ``coef_true``), or None if absent."""
        return self.rows.read_variable(name)


def identity(path) -> str:
    """A store's place in a fingerprint: the resolved local path, or the URL."""
    text = str(path)
    return text if "://" in text else str(Path(text).resolve())


def read_checked(path: str, group: str | None, name: str, arr: zarr.Array, start: int,
                 stop: int, label: str | None = None,
                 remedy: str = "restore it or rewrite the store",
                 unwritten_ok: bool = False) -> np.ndarray:
    """``arr[start:stop]`` of a store's variable ``name``, where a missing chunk file, an
    inner chunk of a shard that was never written, or a chunk that cannot be decoded is an
    :class:`InputError` naming the chunk and its rows (never a traceback, never fill values
    read in place of data); ``remedy`` ends the message of a chunk that cannot be read.
    ``unwritten_ok``: a chunk never written reads as the fill value, as zarr reads it (an
    array whose fill value is a value it holds)."""
    label = label or store_label(path, group)
    if not arr.ndim:  # one value, one chunk
        try:
            return np.asarray(arr[...])
        except Exception as exc:
            raise InputError(f"{label}: variable '{name}' (one value) cannot be read "
                             f"({type(exc).__name__}: {_first_line(exc)}); {remedy}") from None
    files = [] if unwritten_ok else list(chunk_files(path, group, name, arr, start, stop))
    for coords, rows, file in files:
        if file is not None and not file.exists():
            raise InputError(
                f"{label}: variable '{name}' chunk {coords} (rows {rows[0]}-{rows[1] - 1}) is "
                f"missing: its file {file} was removed; restore it (a checkpointed run then "
                "continues with --resume)")
    if not unwritten_ok and _shard_layout(arr)[0] is not None:
        gaps = unwritten_chunks(arr, start, stop)
        if gaps.count:
            coords, (a, b) = gaps.found[0]
            raise InputError(
                f"{label}: variable '{name}' chunk {coords} (rows {a}-{b - 1}) was never "
                "written: its shard's index has no entry for it (it would read as the fill "
                f"value {arr.fill_value}); {remedy}")
    try:
        values = direct_rows(arr, files, start, stop) if files else None
    except DamagedChunk as exc:
        raise _unreadable_chunk(label, name, exc.coords[0], exc.rows, exc.reason,
                                remedy) from None
    if values is not None:
        return values
    try:
        return arr[start:stop]
    except (InputError, MemoryError):
        raise
    except Exception as exc:
        first = exc
    rows = int(arr.chunks[0]) if arr.ndim else max(stop, 1)
    for c in range(start // rows, -(-stop // rows)):
        a, b = c * rows, min((c + 1) * rows, int(arr.shape[0]) if arr.ndim else 1)
        try:
            arr[max(a, start):min(b, stop)]
        except (InputError, MemoryError):
            raise
        except Exception as exc:
            raise _unreadable_chunk(label, name, c, (a, b),
                                    f"{type(exc).__name__}: {_first_line(exc)}",
                                    remedy) from None
    raise InputError(f"{label}: variable '{name}' rows {start}-{stop - 1} cannot be read "
                     f"({type(first).__name__}: {_first_line(first)})") from None


def _unreadable_chunk(label: str, name: str, chunk: int, rows: tuple[int, int], reason: str,
                      remedy: str) -> InputError:
    """The refusal of a chunk whose file is there but cannot be decoded, or is not what the
    array's metadata says (whether zarr or :mod:`~streamlsq.io.chunk_decoding` found it)."""
    return InputError(f"{label}: variable '{name}' chunk {chunk} (rows {rows[0]}-{rows[1] - 1})"
                      f" cannot be read ({reason}); the chunk file is truncated or corrupt: "
                      f"{remedy}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else "no message"


def chunk_files(path: str, group: str | None, name: str, arr: zarr.Array, start: int = 0,
                stop: int | None = None):
    """(chunk coordinates, (first row, end row), file path or None) of the stored objects
    (chunks, or shards) of ``arr`` holding rows ``start:stop``. The file is None where the
    store is not a local folder."""
    grid = getattr(arr.metadata, "chunk_grid", None)
    outer = tuple(getattr(grid, "chunk_shape", None) or arr.chunks)
    shape = arr.shape
    stop = shape[0] if stop is None else stop
    if not shape or stop <= start:
        return
    rows = outer[0]
    local = Path(path).is_dir()
    base = Path(path, group or "", name)
    others = [range(-(-n // c)) for n, c in zip(shape[1:], outer[1:], strict=True)]
    for c in range(start // rows, -(-stop // rows)):
        span = (c * rows, min((c + 1) * rows, shape[0]))
        for rest in itertools.product(*others):
            coords = (c, *rest)
            file = base / arr.metadata.encode_chunk_key(coords) if local else None
            yield coords, span, file


def chunk_stamps(path, group: str | None, names) -> dict[str, list[tuple[int, int, str]]]:
    """For each variable in ``names``: (first row, end row, stamp) of each stored chunk, the
    stamp being its file's size and modification time (an object store: its ETag, or size
    and time; ``""`` if it has no file). A checkpoint keeps them to tell which rows changed
    since it was written, a stream fit to tell whether the rows it read are still the same
    (``continue_from``)."""
    loc = locate(path)
    g = open_group(loc, group)
    listed: dict[str, dict[str, str]] = {}
    if loc.remote:
        fs, root = loc.filesystem()
        for name in names:
            prefix = "/".join(p.strip("/") for p in (root, group or "", name) if p)
            try:
                found = fs.find(prefix, detail=True)
            except (FileNotFoundError, OSError):
                found = {}
            listed[name] = {key[len(prefix) + 1:]: object_stamp(info)
                            for key, info in found.items()}
    out = {}
    for name in names:
        arr = g[name]
        stamps = {}
        for coords, rows, file in chunk_files(loc.url, group, name, arr):
            stamp = ""
            if name in listed:
                stamp = listed[name].get(arr.metadata.encode_chunk_key(coords), "missing")
            elif file is not None:
                try:
                    st = os.stat(file)
                    stamp = f"{st.st_size}-{st.st_mtime_ns}"
                except OSError:
                    stamp = "missing"
            stamps[rows] = stamps.get(rows, "") + stamp + ";"
        out[name] = [(a, b, stamp) for (a, b), stamp in sorted(stamps.items())]
    return out


def require_variables(g: zarr.Group, label: str, names, layout: str) -> set[str]:
    """The group's array names; InputError naming the first of ``names`` that is missing
    and the ``layout`` the store should have."""
    members = array_names(g, label)
    for name in names:
        if name not in members:
            raise InputError(
                f"{label}: variable '{name}' is missing (found: {sorted(members) or 'none'})"
                f"{look_alike(name, members, 'variable') or '; ' + layout}")
    return members


def _group_path(group: str | None) -> str | None:
    """A group's path as zarr reads it, from the store's root: without the ``/`` before or
    after it (``--group /a`` was opened, and its chunks then looked for under ``/a/X``)."""
    if group is None or not isinstance(group, str):
        return group
    path = group.strip("/")
    if not path:
        raise InputError(f"--group (group=) {group!r} names no group: give a group's path "
                         "in the store (as info lists them), or leave it out to read the "
                         "store itself")
    return path


def split_group(data, group: str | None = None) -> tuple:
    """``PATH#GROUP`` (docs/stores.md: a group inside a store, on the command line) as
    ``(PATH, GROUP)``; anything else, or a local path whose name holds a ``#`` and exists,
    as ``(data, group)``. A group named both ways must be the same one.

    >>> split_group("pop.zarr#a")
    ('pop.zarr', 'a')
    >>> split_group("pop.zarr", "a")
    ('pop.zarr', 'a')
    >>> split_group("pop.zarr#x#y")
    ('pop.zarr', 'x#y')
    >>> split_group("pop.zarr", "/lvl/t/")
    ('pop.zarr', 'lvl/t')
    """
    group = _group_path(group)
    if not isinstance(data, str | os.PathLike):
        return data, group
    text = os.fspath(data)
    if isinstance(text, bytes) or "#" not in text or os.path.lexists(text):
        return data, group
    # the store is the shortest part that exists (a group's own name may hold a '#', as
    # info spells it: odd.zarr#x#y); none existing, the part up to the first '#'
    cuts = [i for i, ch in enumerate(text) if ch == "#"]
    cut = next((i for i in cuts if os.path.lexists(text[:i])), cuts[0])
    path, named = text[:cut], text[cut + 1:].strip("/")
    if not path:
        raise InputError(f"{text}: names no store before '#': give the store's path, as "
                         f"data.zarr{text[cut:]}")
    if not named:
        raise InputError(f"{text}: names no group after '#': give a group's path, as "
                         f"{path}#GROUP (as info lists them), or leave out the '#' to read the "
                         "store itself")
    if group is not None and group != named:
        raise InputError(f"{text} names the group '{named}', and --group (group=) "
                         f"'{group}': name the group once")
    return path, named


def open_group(path, group: str | None) -> zarr.Group:
    """The store's group (a path, URL, zarr store object or :class:`Location`), read from the
    arrays' own metadata (never a consolidated copy, which goes stale when rows are appended
    without re-consolidating)."""
    loc = locate(path)
    if loc is None:
        raise InputError(f"{path!r}: not a path, URL or zarr store of a Zarr group")
    shown = loc.shown or loc.url
    try:
        found = loc.exists()
    except Exception as exc:  # an unreachable object store, missing credentials, ...
        raise InputError(f"{shown}: cannot be reached ({type(exc).__name__}: "
                         f"{_first_line(exc)})") from None
    if not found:
        raise InputError(not_a_url(shown) or f"{shown}: no such store")
    try:
        return zarr.open_group(store=loc.zarr_store(read_only=True), mode="r",
                               path=group or None, use_consolidated=False)
    except Exception as exc:  # zarr raises several types for "not a group here"
        raise InputError(_not_a_group(loc, shown, group, exc)) from None


def _not_a_group(loc: Location, shown: str, group: str | None, exc: Exception) -> str:
    """Why the store ``shown`` (or its ``group``) cannot be opened as a Zarr group, in one
    line: a group the store does not have (its groups named), an array named as a group, a
    folder of streamlsq's that is no store, else zarr's reason."""
    label = store_label(shown, group)
    if not group:
        folder = None if loc.remote else streamlsq_folder(shown)
        if folder is not None:
            return f"{shown}: {folder}, not a Zarr store"
        if not loc.remote and os.path.isdir(shown) and not os.listdir(shown):
            return f"{shown}: an empty folder, not a Zarr store"
        return (f"{label}: not a readable Zarr group ({_first_line(exc)})"
                f"{'' if loc.remote else csv_folder_remedy(shown)}")
    try:
        root = zarr.open_group(store=loc.zarr_store(read_only=True), mode="r",
                               use_consolidated=False)
        groups = group_paths(root)
        inner = root.get(group.strip("/"))
    except Exception:
        return f"{label}: not a readable Zarr group ({_first_line(exc)})"
    found = f"its groups: {', '.join(groups)}" if groups else "it has no group"
    if isinstance(inner, zarr.Array):
        return (f"{label}: '{group}' is an array of {shown}, not a group ({found}); give the "
                "store without a group, and name its arrays with --x and --y (x=, y=)")
    if inner is None:
        return f"{label}: {shown} has no group '{group}' ({found})"
    return f"{label}: not a readable Zarr group ({_first_line(exc)})"


def group_paths(g: zarr.Group, prefix: str = "") -> list[str]:
    """The paths of every group of ``g`` at any depth (``lvl``, ``lvl/t``), each group before
    the groups it holds."""
    paths = []
    for sub in sorted(g.group_keys()):
        paths += [prefix + sub, *group_paths(g[sub], f"{prefix}{sub}/")]
    return paths


def array_names(g: zarr.Group, label: str) -> set[str]:
    """The names of the group's arrays; a member whose metadata cannot be read is refused
    by name."""
    try:
        return set(g.array_keys())
    except Exception as exc:
        raise InputError(f"{label}: {_bad_member(g, exc)}") from None


def get_array(g: zarr.Group, label: str, name: str) -> zarr.Array:
    """The group's array ``name``; unreadable metadata is refused by name."""
    try:
        return g[name]
    except KeyError:
        raise InputError(f"{label}: variable '{name}' is missing") from None
    except Exception as exc:
        raise InputError(f"{label}: variable '{name}': metadata cannot be read "
                         f"({type(exc).__name__}: {_first_line(exc)})") from None


def _bad_member(g: zarr.Group, exc: Exception) -> str:
    """Which member's metadata broke the listing of a local group (error path only)."""
    root = getattr(getattr(g, "store_path", None), "store", None)
    folder = Path(str(getattr(root, "root", "")), g.path or "")
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            meta = child / "zarr.json"
            if meta.is_file():
                try:
                    json.loads(meta.read_text())
                except (OSError, ValueError) as e:
                    return (f"variable '{child.name}': metadata {meta} cannot be read "
                            f"({type(e).__name__}: {_first_line(e)})")
    return f"metadata cannot be read ({type(exc).__name__}: {_first_line(exc)})"


def check_numeric(label: str, name: str, dtype, decoding: CFDecoding | None = None) -> None:
    """Refuse a dtype the kernels cannot compute in: complex, float16 (too few digits and a
    range that overflows at 65504), strings, booleans, objects, times. With ``decoding`` the
    dtype is the one xarray decodes the stored values to (e.g. datetime64 from ``units:
    "days since ..."``), and the message says how they are stored."""
    try:
        dt = np.dtype(decoding.dtype if decoding is not None else dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in "fiu" or (dt.kind == "f" and dt.itemsize < 4):
        how = f" as xarray decodes it ({decoding.describe()})" if decoding is not None else ""
        raise InputError(
            f"{label}: variable '{name}' has dtype {dt if dt is not None else dtype}{how}, "
            "expected a real numeric dtype (float64, float32 or an integer type)"
        )


def dimension_names(arr: zarr.Array) -> tuple[str, ...]:
    names = getattr(arr.metadata, "dimension_names", None)
    if names is None:  # zarr v2 stores written by xarray keep dims in an attribute
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(names) if names is not None else ()


def require_dimension_names(arr: zarr.Array, label: str, shown: str, group: str | None,
                            name: str, first: str | None = None, wanted=None) -> None:
    """Refuse an array without dimension names (a Zarr v2 array written by zarr-python
    without xarray's attribute ``_ARRAY_DIMENSIONS``, a v3 one without ``dimension_names``):
    streamlsq, as xarray, reads dimensions by name, and its shape would be all a message could
    print. The remedy names the attribute and the names of the documented layout (``wanted``,
    else ``first`` (the sample dimension) and ``feature``, ``target`` for ``y``)."""
    if dimension_names(arr) or arr.ndim == 0:
        return
    if wanted is None:
        first = first or "sample"
        wanted = ((first,) if arr.ndim == 1 else
                  (first, "target" if name == "y" else "feature", *(
                      f"dim_{i}" for i in range(2, arr.ndim))))
    where = f"{group.strip('/')}/{name}" if group else name
    if arr.metadata.zarr_format == 2:
        raise InputError(
            f"{label}: variable '{name}' (shape {tuple(arr.shape)}) has no dimension names: a "
            f"Zarr v2 array without the attribute {_DIMENSIONS_ATTRIBUTE}, where xarray keeps "
            f"them; name them, e.g. zarr.open_group({shown!r}, mode='r+')[{where!r}].attrs"
            f"[{_DIMENSIONS_ATTRIBUTE!r}] = {list(wanted)}, or write the store with xarray's "
            "to_zarr")
    raise InputError(
        f"{label}: variable '{name}' (shape {tuple(arr.shape)}) has no dimension names: write "
        f"the array with them, e.g. zarr's create_array(..., dimension_names={list(wanted)}), "
        "or the store with xarray's to_zarr")


@dataclass(frozen=True)
class UnwrittenChunks:
    """The storage chunks of an array that were never written (they would read as its fill
    value): the first few found (``found``: chunk coordinates, with their rows) and how many
    there are in all (``count``, of ``total``)."""

    found: list[tuple[tuple[int, ...], tuple[int, int]]]
    count: int
    total: int


def _shard_layout(arr: zarr.Array):
    """(sharding codec, chunks per shard) of an array stored in shards (zarr's sharding codec,
    which keeps in every shard an index whose empty entries mark inner chunks never written),
    or (None, None)."""
    shards = getattr(arr, "shards", None)
    if shards is None:
        return None, None
    from zarr.codecs import ShardingCodec

    codec = next((c for c in getattr(arr.metadata, "codecs", ())
                  if isinstance(c, ShardingCodec)), None)
    if codec is None:
        return None, None
    return codec, tuple(s // c for s, c in zip(shards, arr.chunks, strict=True))


def _chunk_rows(arr: zarr.Array, coords) -> tuple[int, int]:
    rows = int(arr.chunks[0]) if arr.ndim else 1
    first = int(coords[0]) * rows if arr.ndim else 0
    return first, min(first + rows, int(arr.shape[0])) if arr.ndim else 1


async def _unwritten_in(arr: zarr.Array, outer: list[tuple[int, ...]], listed: set | None):
    """Coordinates of the storage chunks never written among those of the stored objects
    ``outer`` (chunks, or shards of inner chunks); ``listed``: the keys known to exist (a
    listing), else each object is asked for."""
    import asyncio

    codec, per_shard = _shard_layout(arr)
    grid = [-(-int(n) // int(c)) for n, c in zip(arr.shape, arr.chunks, strict=True)]

    async def one(coords):
        key = arr.metadata.encode_chunk_key(coords)
        if codec is None:
            if listed is not None:
                return [] if key in listed else [coords]
            return [] if await arr.store_path.store.exists(_key(arr, key)) else [coords]
        inner = [tuple(o * n + i for o, n, i in zip(coords, per_shard, local, strict=True))
                 for local in np.ndindex(*per_shard)]
        inner = [c for c in inner if all(ci < g for ci, g in zip(c, grid, strict=True))]
        if listed is not None and key not in listed:
            return inner
        index = await codec._load_shard_index_maybe(arr.store_path / key, per_shard)
        if index is None:
            return inner
        written = index.get_full_chunk_map()
        return [c for c in inner
                if not written[tuple(ci % n for ci, n in zip(c, per_shard, strict=True))]]

    out = []
    for i in range(0, len(outer), 256):  # bounded concurrency: one small read per object
        for part in await asyncio.gather(*(one(c) for c in outer[i:i + 256])):
            out.extend(part)
    return out


def _key(arr: zarr.Array, key: str) -> str:
    prefix = arr.store_path.path
    return f"{prefix}/{key}" if prefix else key


def unwritten_chunks(arr: zarr.Array, start: int = 0, stop: int | None = None,
                     limit: int = 1, listing: set[str] | None = None) -> UnwrittenChunks:
    """The storage chunks of ``arr`` holding rows ``start:stop`` that were never written.

    Zarr reads a chunk that was never written as the fill value, without an error. A chunk
    of an unsharded array is never written when its object is missing; in a sharded array
    (zarr's sharding codec) also when its entry in its shard's index is empty, which a
    store written with ``write_empty_chunks=False``, or one whose writing was interrupted
    inside a shard, leaves behind (the shard's file exists: listing the objects cannot
    tell). The whole array (the default) is checked with one listing of its objects and,
    when sharded, one read of each shard's index; ``listing``: the keys of every object of
    the array's store (:func:`store_keys`), listed once for all its arrays (on an object
    store each listing is a request)."""
    from zarr.core.sync import sync

    whole = start == 0 and stop is None
    stop = int(arr.shape[0]) if arr.ndim and stop is None else stop
    codec, _ = _shard_layout(arr)
    if codec is None and whole and listing is None and arr.nchunks_initialized == arr.nchunks:
        return UnwrittenChunks([], 0, arr.nchunks)
    outer_rows = int(getattr(arr.metadata.chunk_grid, "chunk_shape", arr.chunks)[0]) \
        if arr.ndim else 1
    others = [range(-(-int(n) // int(c))) for n, c in
              zip(arr.shape[1:], getattr(arr.metadata.chunk_grid, "chunk_shape",
                                         arr.chunks)[1:], strict=True)]
    first, last = (0, 1) if not arr.ndim else (start // outer_rows, -(-stop // outer_rows))
    outer = [(c, *rest) if arr.ndim else () for c in range(first, last)
             for rest in itertools.product(*others)]
    listed = None
    if whole:
        prefix = arr.store_path.path
        if listing is None:
            listing = store_keys(arr.store_path.store, prefix)
        listed = {k[len(prefix) + 1:] if prefix else k for k in listing
                  if not prefix or k.startswith(prefix + "/")}
    try:
        gaps = sync(_unwritten_in(arr, outer, listed))
    except AttributeError as exc:  # a zarr whose sharding codec keeps its index elsewhere
        raise RuntimeError(f"cannot read the shard index with zarr {zarr.__version__} "
                           f"({exc})") from None
    if arr.ndim:
        gaps = [c for c in gaps if _chunk_rows(arr, c)[0] < stop
                and _chunk_rows(arr, c)[1] > start]
    found = [(tuple(int(v) for v in c), _chunk_rows(arr, c)) for c in gaps[:limit]]
    return UnwrittenChunks(found, len(gaps), arr.nchunks)


def store_keys(store, prefix: str = "") -> set[str]:
    """The keys of every object of the zarr ``store`` under ``prefix`` (all of them by
    default), in one listing."""
    from zarr.core.sync import sync

    async def listing():
        return {k async for k in store.list_prefix(prefix)}

    return sync(listing())


#: root attribute of a store streamlsq wrote: every chunk of every array was found written
#: when the store was published (a chunk missing since was removed)
EVERY_CHUNK_WRITTEN = "every_chunk_written"


def check_complete(label: str, name: str, arr: zarr.Array, attrs: dict | None = None,
                   path: str | None = None, group: str | None = None) -> None:
    """Refuse an array with a chunk that was never written (:func:`unwritten_chunks`),
    naming the first such chunk and its rows. ``attrs``: the store's attributes; where
    they record that every chunk was written (``every_chunk_written``, a store streamlsq
    wrote), the chunk was removed since. ``path`` and ``group``: where a local store's
    chunk files are, to name what stands in place of the missing one (a folder, a link to
    nothing)."""
    try:
        gaps = unwritten_chunks(arr)
    except RuntimeError as exc:
        raise InputError(f"{label}: variable '{name}': {exc}") from None
    if not gaps.count:
        return
    coords, (a, b) = gaps.found[0]
    where = (f"variable '{name}' chunk {coords} (rows {a}-{b - 1}; {gaps.count} of "
             f"{gaps.total} chunks missing; it would read as the fill value {arr.fill_value})")
    file = _chunk_file(path, group, name, arr, coords) \
        if path is not None and _shard_layout(arr)[0] is None else None
    written = (attrs or {}).get(EVERY_CHUNK_WRITTEN) is True
    if file is not None and file.is_symlink() and not file.exists():
        raise InputError(f"{label}: {where} is missing: its file {file} is a symbolic link to "
                         f"'{os.readlink(file)}', which does not exist; restore the chunk "
                         "file in its place")
    if file is not None and file.is_dir():
        raise InputError(f"{label}: {where} is missing: {file} is a folder, not a chunk "
                         "file; restore the chunk file in its place")
    if written:
        what = f"its file {file} was removed" if file is not None else \
            "it was removed from the store"
        raise InputError(f"{label}: {where} is missing: {what} since the store was written "
                         "(it records that every chunk was written); restore it")
    raise InputError(
        f"{label}: variable '{name}' chunk {coords} was never written (rows {a}-{b - 1}; "
        f"{gaps.count} of {gaps.total} chunks missing; it would read as the fill value "
        f"{arr.fill_value}); the store is incomplete, or was written with "
        "write_empty_chunks=False: rewrite it with write_empty_chunks=True"
    )


def _chunk_file(path: str, group: str | None, name: str, arr: zarr.Array,
                coords: tuple) -> Path | None:
    """The file of a local store's storage chunk ``coords`` of ``arr`` (None on an object
    store, or for an array of one value)."""
    if not arr.ndim:
        return None
    start = coords[0] * int(getattr(arr.metadata.chunk_grid, "chunk_shape", arr.chunks)[0])
    for at, _, file in chunk_files(path, group, name, arr, start, start + 1):
        if at == coords:
            return file
    return None


def nonfinite(values: np.ndarray) -> np.ndarray | None:
    """Where ``values`` are NaN or Inf (a boolean mask of their shape), or None when all are
    finite. A decoded fill value is a NaN: the mask marks the missing values too, for a
    caller that refuses them (:func:`check_finite_rows`) or leaves their rows out."""
    if np.isfinite(values.sum()):  # one reduction: the common, clean case costs a single pass
        return None
    bad = ~np.isfinite(values)
    return bad if bad.any() else None  # else the sum overflowed on finite values


def check_finite_rows(label: str, name: str, A: np.ndarray, start: int, chunk_rows: int,
                      stored: np.ndarray | None = None, allow_nan: bool = False,
                      described=None, remedy: str = DROP_REMEDY) -> None:
    """Refuse NaN/Inf in rows ``start:start+len(A)`` of variable ``name``, naming chunk and row
    (Inf alone with ``allow_nan``: the rows with a NaN are dropped, an Inf is never a missing
    value). ``stored``: the values before they were cast to ``A``'s dtype; a finite one that
    became Inf is too large for that dtype, and the message says so. ``described(name,
    row)``: how the message names the variable given its row at fault (a formula's design
    names its column), else ``variable 'NAME'``. ``remedy``: the advice for a NaN (a job
    without ``--missing`` has no rows to drop)."""
    bad = nonfinite(A)
    if bad is None:
        return
    if allow_nan:
        bad = np.isinf(A)
        if not bad.any():
            return
    where = tuple(np.argwhere(bad)[0])
    row = start + int(where[0])
    if stored is not None and stored.shape == A.shape and np.isfinite(stored[where]):
        raise InputError(
            f"{label}: variable '{name}' chunk {row // chunk_rows} has |value| "
            f"{abs(float(stored[where])):.3g} at row {row}, beyond the range of {A.dtype}: "
            f"compute in float64 (--dtype float64) or rescale the data")
    kind = "NaN" if np.isnan(A[bad]).any() else "Inf"
    remedy = (remedy if kind == "NaN"
              else "remove or impute non-finite values" if not allow_nan
              else "an infinity is not a missing value: remove or replace it")
    shown = (described(name, np.asarray(A[row - start]).ravel(), row) if described is not None
             else f"variable '{name}'")
    raise InputError(f"{label}: {shown} chunk {row // chunk_rows} has {kind} at row "
                     f"{row}; {remedy}")


def check_weights(label: str, name: str, w: np.ndarray, start: int, chunk_rows: int,
                  allow_nan: bool = False) -> None:
    """Refuse a precision weight that is negative or not finite (NaN allowed with
    ``allow_nan``: its row is dropped), naming the variable, chunk and row."""
    ok = np.isfinite(w) & (w >= 0)
    if allow_nan:
        ok |= np.isnan(w)
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    row = start + i
    raise InputError(f"{label}: variable '{name}' chunk {row // chunk_rows} has the weight "
                     f"{w[i].item()!r} at row {row}; precision weights are finite and >= 0 "
                     "(0 leaves the row out)")


def missing_labels(labels: np.ndarray) -> np.ndarray:
    """Where group labels are missing: NaN (numbers; an integer fill value decodes to NaN),
    None or the empty string (strings: xarray writes a missing string as '')."""
    labels = np.asarray(labels)
    kind = labels.dtype.kind
    if kind == "f":
        return np.isnan(labels)
    if kind in "iub":
        return np.zeros(labels.shape, dtype=bool)
    if kind in "UST":
        return labels == labels.dtype.type("") if kind != "T" else labels == ""
    return np.array([v is None or v == "" or (isinstance(v, float) and v != v)
                     for v in labels.ravel()], dtype=bool).reshape(labels.shape)


def open_dataset(path: str | os.PathLike, group: str | None = None, *,
                 storage_options: dict | None = None, lazy: bool = True) -> xr.Dataset:
    """Any streamlsq store (a path, an fsspec URL or a zarr store object) as a lazily
    loaded (dask-backed) xarray Dataset; ``lazy=False``: backed by the store itself, each
    variable read whole when first used, without dask (small results).

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
    import xarray as xr

    # lazy=False: NumPy arrays, read without dask; else xarray's default (dask)
    chunks = {} if lazy else {"chunks": None}
    check_storage_options(storage_options, [path])  # a local path would ignore them
    loc = locate(path, storage_options)
    if loc is None:  # an in-memory zarr store: xarray reads it itself
        return xr.open_zarr(path, group=group, consolidated=None, zarr_format=3, **chunks)
    if not loc.exists():
        raise InputError(f"{loc.shown or loc.url}: no such store")
    return xr.open_zarr(loc.zarr_store(read_only=True), group=group, consolidated=None,
                        zarr_format=3, **chunks)


# -- results -------------------------------------------------------------------


def consolidate(path) -> None:
    """Consolidate a store's metadata so that xarray opens it in one read and quietly."""
    loc = locate(path)
    with warnings.catch_warnings():
        # zarr-python supports consolidated metadata for v3 stores but warns that the
        # v3 specification does not define it; xarray relies on it for fast opening
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        zarr.consolidate_metadata(loc.zarr_store() if loc is not None else path)
