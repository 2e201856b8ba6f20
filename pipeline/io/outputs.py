"""Where streamlsq writes, and how it publishes: nothing of the user's is ever deleted.

The rules (``docs/faults.md``):

- an output (``--out``), a checkpoint folder or a temporary folder never equals,
  contains or lies inside an input store (:func:`check_apart`);
- ``--overwrite`` replaces only a store streamlsq wrote (:func:`written_by_streamlsq`:
  its root attributes say so), never a folder or store of the user's, and only while it
  holds nothing but what streamlsq wrote there (:func:`check_only_ours`: its metadata and
  the chunk keys of the arrays it records; a user's file put inside is never removed);
- a result is built in an *owned temporary* next to its destination
  (:class:`OwnedTemporary`: ``.NAME.partial-XXXXXXXX`` with a sibling
  ``.NAME.partial-XXXXXXXX.owner`` file locked for as long as the run lives) and
  published by one atomic rename that never replaces what another run published in
  the meantime (:func:`publish`: ``renameat2`` with ``RENAME_NOREPLACE``, or
  ``RENAME_EXCHANGE`` with ``--overwrite``, so the destination is never missing);
- the destination folder is checked writable before any computation
  (:func:`check_writable`), and a write that fails for lack of space or permission
  is one line (:func:`output_failure`);
- temporaries left by killed runs (their owner file is no longer locked) are removed
  by the next run on the same output (:func:`reclaim_leftovers`);
- a file a command writes beside its output (``OUT.k-curve.csv``) is the output's: reserved
  by name with the same rules, checked with the output before any work, written under an
  owned temporary and renamed into place with it (:class:`BesideFiles`); the output's root
  attribute ``beside_files`` keeps each file's digest, which is how ``--overwrite`` knows a
  file beside the output as streamlsq's own.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from streamlsq.errors import InputError, OutputError, check_interrupted, note_published
from streamlsq.io.location import not_a_url
from streamlsq.io.locks import FileLock
from streamlsq.io.stores import StoreSource

__all__ = [
    "BesideFiles",
    "OwnedTemporary",
    "write_file",
    "RemoteTemporary",
    "check_apart",
    "check_only_ours",
    "check_writable",
    "file_digest",
    "folder_above",
    "foreign_in_store",
    "output_failure",
    "publish",
    "publish_objects",
    "reclaim_leftovers",
    "written_by_streamlsq",
]

#: kinds of temporaries streamlsq makes next to an output
KINDS = ("partial", "old", "stores")
#: root attribute that marks a store as written by streamlsq (set when it is published)
WRITTEN_BY = "written_by"
#: root attribute of a result: {name of a file beside it: sha256 of the file's bytes}
BESIDE = "beside_files"
#: errors of a write that no retry fixes: the output is unusable, say so in one line
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
_ACCESS_ERRNOS = {errno.EACCES, errno.EPERM}


def _resolved(path) -> Path:
    return Path(os.path.realpath(os.fspath(path)))


def _place(path) -> str | Path:
    """A local path resolved, or a URL as it is (without a trailing slash)."""
    text = str(getattr(path, "url", path))
    if "://" in text and not text.startswith("file://"):
        return text.rstrip("/")
    return _resolved(text[len("file://"):] if text.startswith("file://") else text)


def _inside(a, b) -> bool:
    """Whether place ``a`` lies inside place ``b``."""
    if isinstance(a, Path) and isinstance(b, Path):
        return b in a.parents
    return isinstance(a, str) and isinstance(b, str) and a.startswith(b + "/")


def check_apart(path, inputs: Iterable, what: str, of: str = "input store") -> None:
    """Refuse ``path`` (a ``what``: "--out", "--checkpoint", ...) if it equals, contains or
    lies inside one of ``inputs`` (paths, URLs or sources with ``path``), which are ``of``:
    the input stores, or the output a checkpoint must stay apart from."""
    p = _place(path)
    for src in inputs:
        if src is None or (isinstance(src, StoreSource) and src.in_memory):
            continue
        i = _place(getattr(src, "path", src))
        name = getattr(src, "shown", "") or getattr(src, "path", src)
        if p == i:
            raise InputError(f"{what} {path} is the {of} {name}; choose another path"
                             + (" (streamlsq never writes over its input)"
                                if of == "input store" else ""))
        if _inside(p, i):
            raise InputError(f"{what} {path} lies inside the {of} {name}; choose a path "
                             "outside it")
        if _inside(i, p):
            raise InputError(f"{what} {path} contains the {of} {name}; choose a path that "
                             "does not hold it")


def written_by_streamlsq(path) -> bool:
    """True for a Zarr store whose root attributes mark it as written by streamlsq: the
    ``written_by`` mark set on publication, or (stores of earlier versions) the
    ``streamlsq_version`` provenance attribute or a ``streamlsq.*`` generator."""
    try:
        meta = json.loads((Path(path) / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    attrs = meta.get("attributes") or {} if isinstance(meta, dict) else {}
    if not isinstance(attrs, dict):
        return False
    return (str(attrs.get(WRITTEN_BY, "")).startswith("streamlsq")
            or "streamlsq_version" in attrs
            or str(attrs.get("generator", "")).startswith("streamlsq."))


# -- what inside a result store is streamlsq's ------------------------------------------------


def _chunk_key_of(meta: dict, key: str) -> bool:
    """Whether ``key`` (relative to an array) is a chunk key the array of metadata ``meta``
    (its ``zarr.json``) can hold: its encoding's form, one index per dimension, each within
    the chunk grid."""
    shape = meta.get("shape")
    grid = (meta.get("chunk_grid") or {}).get("configuration") or {}
    chunks = grid.get("chunk_shape")
    encoding = meta.get("chunk_key_encoding") or {}
    name = encoding.get("name", "default")
    separator = (encoding.get("configuration") or {}).get(
        "separator", "/" if name == "default" else ".")
    if not isinstance(shape, list):
        return False
    parts = key.split(separator)
    if name == "default":
        if parts[0] != "c":
            return False
        parts = parts[1:]
    elif name == "v2" and not shape:
        return key == "0"
    else:
        return False
    if len(parts) != len(shape) or not all(p.isdigit() for p in parts):
        return False
    if not isinstance(chunks, list) or len(chunks) != len(shape):
        return True  # an irregular grid: the form is all there is to check
    return all(int(i) < -(-int(n) // max(int(c), 1))
               for i, n, c in zip(parts, shape, chunks, strict=True))


def _claim_chunk_key(key: str) -> bool:
    """A chunk key of the default encoding under a top-level array (``X/c/0/1``): what a run
    killed while publishing may have copied before the array's own ``zarr.json``."""
    parts = key.split("/")
    return len(parts) >= 2 and parts[1] == "c" and all(p.isdigit() for p in parts[2:])


def foreign_entries(keys: Iterable[str], read: Callable[[str], dict | None],
                    folders: Iterable[str] = ()) -> list[str]:
    """The entries of a result store that streamlsq did not write, in name order: of its
    ``keys`` (files or objects, relative to the store, ``/``-separated) those that are not
    the root ``zarr.json``, the ``zarr.json`` of a node the result records, or a chunk key of
    one of its arrays; of its ``folders`` (a local store's) those that hold none of these and
    are no node of it. ``read(key)``: the JSON object stored at ``key``, or None.

    The nodes are those of the root's consolidated metadata, which streamlsq writes last; a
    store without it (a publication's claim, an interrupted run's) records each node in its
    own ``zarr.json``, and a claim may hold chunk keys copied before their array's metadata.
    """
    keys = set(keys)
    root = read("zarr.json") or {}
    consolidated = root.get("consolidated_metadata")
    nodes = (consolidated or {}).get("metadata") if isinstance(consolidated, dict) else None
    claim = not isinstance(nodes, dict)
    if claim:
        nodes = {}
        for key in sorted(keys):
            if key.endswith("/zarr.json") and (meta := read(key)) is not None:
                nodes[key[:-len("/zarr.json")]] = meta
    arrays = {path: meta for path, meta in nodes.items()
              if isinstance(meta, dict) and meta.get("node_type") == "array"}
    attrs = root.get("attributes") if isinstance(root.get("attributes"), dict) else {}
    claim = claim and attrs.get("complete") is not True

    def ours(key: str) -> bool:
        if key == "zarr.json" or (key.endswith("/zarr.json")
                                  and key[:-len("/zarr.json")] in nodes):
            return True
        for path, meta in arrays.items():
            if key.startswith(path + "/") and _chunk_key_of(meta, key[len(path) + 1:]):
                return True
        return claim and _claim_chunk_key(key)

    kept = {key for key in keys if ours(key)}
    within = set(nodes) | {key.rsplit("/", i)[0] for key in kept
                           for i in range(1, key.count("/") + 1)}
    foreign = sorted([key for key in keys if key not in kept]
                     + [folder for folder in folders if folder not in within])
    # a folder of the user's is named, not each file in it
    return [entry for entry in foreign
            if not any(entry.startswith(other + "/") for other in foreign)]


def _local_entries(out: Path) -> tuple[list[str], list[str]]:
    """The files (and links, which streamlsq never writes in a store) and folders under the
    local store ``out``, relative and ``/``-separated."""
    files, folders = [], []
    for root, dirs, names in os.walk(out):
        rel = Path(root).relative_to(out)
        for d in dirs:
            (files if Path(root, d).is_symlink() else folders).append((rel / d).as_posix())
        files.extend((rel / n).as_posix() for n in names)
    return files, folders


def _read_local(out: Path) -> Callable[[str], dict | None]:
    def read(key: str) -> dict | None:
        path = out / key
        if path.is_symlink():
            return None
        try:
            value = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None
    return read


def foreign_in_store(out) -> list[str]:
    """The entries of the local store ``out`` that streamlsq did not write
    (:func:`foreign_entries`), relative to it."""
    files, folders = _local_entries(Path(out))
    return foreign_entries(files, _read_local(Path(out)), folders)


def check_only_ours(out, shown=None, listing: Iterable[str] | None = None) -> None:
    """Refuse to replace the result store ``out`` (a local path, or a
    :class:`~streamlsq.io.location.Location` on an object store) that holds anything
    streamlsq did not write there (:func:`foreign_entries`): ``--overwrite`` removes the
    whole store, and would take a user's file with it. ``listing``: the store's objects
    (full paths in its filesystem), when the caller listed them already."""
    shown = shown or getattr(out, "shown", "") or getattr(out, "url", out)
    if getattr(out, "remote", False):
        fs, path = out.filesystem()
        path = path.rstrip("/")
        found = list(fs.find(path) if listing is None else listing)
        keys = [k.rstrip("/")[len(path) + 1:] for k in found
                if k.rstrip("/").startswith(path + "/")]
        foreign = foreign_entries(keys, lambda key: out.read_json(key))
    else:
        files, folders = _local_entries(Path(out))
        foreign = foreign_entries(files, _read_local(Path(out)), folders)
    if not foreign:
        return
    more = len(foreign) - 1
    what = foreign[0] if not more else f"{foreign[0]} and {more} more"
    raise InputError(f"{shown}: holds {what}, which streamlsq did not write; move "
                     f"{'them' if more else 'it'} or choose another --out")


def check_writable(folder) -> None:
    """Write and remove a small file in ``folder``: a read-only or full folder is refused
    before any computation rather than after it."""
    folder = Path(folder)
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".streamlsq-probe-")
        try:
            os.write(fd, b"streamlsq")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot write here ({exc.strerror}); choose another "
                          "output folder") from None


def folder_above(path, option: str = "--out") -> Path:
    """The nearest existing folder above ``path`` (where the missing ones would be made),
    as the path spells it; a file there is refused in one line (``option``: the option that
    named ``path``), before any work, rather than when the folder is made."""
    for parent in Path(path).parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise InputError(f"{path}: {parent} is a file, not a folder; choose another "
                                 f"{option}")
            return parent
    return Path(".")


def make_parents(path) -> list[Path]:
    """Create the missing folders above ``path`` (a study's folder: the notebooks name one
    under a folder of results they do not make) and return those created, outermost first,
    for :func:`remove_made` to take back if the run fails; a parent that cannot be made is
    refused in one line, with what was made removed."""
    missing = []
    for parent in Path(path).absolute().parents:
        if parent.exists() or parent.is_symlink():
            break
        missing.append(parent)
    made: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except OSError as exc:
            remove_made(made)
            raise OutputError(f"{path}: cannot make its folder {folder} ({exc.strerror}); "
                              "choose another --out") from None
        made.append(folder)
    return made


def remove_made(made: list[Path]) -> None:
    """Remove the folders :func:`make_parents` made, innermost first, each only if still
    empty (anything the user put there since stays, and the folders above it)."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return


def output_failure(exc: BaseException, out, tmp=None) -> OutputError | None:
    """The one-line error for a write into ``tmp`` (the temporary of ``out``) that failed for
    lack of space or permission; None when ``exc`` is not such a failure."""
    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    name = getattr(exc, "filename", None)
    inside = False
    if name and tmp is not None:
        with contextlib.suppress(OSError, ValueError):
            inside = _resolved(tmp) in _resolved(name).parents or _resolved(name) == _resolved(tmp)
    if exc.errno not in WRITE_ERRNOS and not (exc.errno in _ACCESS_ERRNOS and inside):
        return None
    return OutputError(f"{out}: writing the result failed ({os.strerror(exc.errno)}); "
                       "nothing was written: free space or choose another --out")


# -- owned temporaries and leftovers -------------------------------------------------------


class OwnedTemporary:
    """A temporary path ``.NAME.KIND-XXXXXXXX`` next to ``out``, owned by this process.

    The owner file (same name + ``.owner``) is created and locked before the temporary
    exists and removed after it is gone, so a temporary without a live owner is always
    a leftover of a killed run (:func:`reclaim_leftovers`). ``create()`` makes the folder;
    ``close()`` removes whatever is at the path, then the owner file.
    """

    def __init__(self, out, kind: str = "partial"):
        if kind not in KINDS:
            raise ValueError(f"unknown temporary kind {kind!r}")
        out = Path(out)
        self.path = out.with_name(f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}")
        self.lock = FileLock(self.path.with_name(self.path.name + ".owner"))
        if not self.lock.acquire():  # a fresh random name: only a clash of 32 bits
            raise OutputError(f"{self.path}: temporary name in use; rerun")

    def create(self) -> Path:
        self.path.mkdir()
        return self.path

    def close(self) -> None:
        if not self.lock.held:
            return
        _remove(self.path)
        self.lock.release(unlink=True)

    def __enter__(self) -> OwnedTemporary:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def reclaim_leftovers(out) -> list[Path]:
    """Remove the temporaries of ``out`` whose owner is no longer alive (a killed run's
    ``.NAME.partial-*``, ``.NAME.old-*``, ``.NAME.stores-*``); returns what was removed.
    A temporary whose owner file is locked belongs to a live run and is left alone; a
    folder of that name without an owner file was not made by this version and is kept."""
    out = Path(out)
    removed = []
    if not out.parent.is_dir():
        return removed
    for kind in KINDS:
        for owner in out.parent.glob(f".{_glob_escape(out.name)}.{kind}-*.owner"):
            lock = FileLock(owner)
            try:
                taken = lock.acquire(describe=False)
            except OSError:
                continue
            if not taken:
                continue  # a live run
            leftover = owner.with_name(owner.name[: -len(".owner")])
            _remove(leftover)
            lock.release(unlink=True)
            removed.append(leftover)
    return removed


def _glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


# -- atomic, exclusive publication ----------------------------------------------------------

_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100


def _libc_renameat2():
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
    fn = getattr(lib, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]
    return fn


_RENAMEAT2 = _libc_renameat2()


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(2); False when the system or filesystem does not support the flags."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; FileExistsError if ``dst`` exists (atomically where the
    system can: a rename never replaces a non-empty folder either)."""
    if _renameat2(src, dst, _RENAME_NOREPLACE):
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    try:
        os.rename(src, dst)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from None
        raise


def publish(tmp: OwnedTemporary, out, overwrite: bool,
            ours: Callable[[Path], bool] = written_by_streamlsq) -> None:
    """Rename the finished temporary into place as ``out``.

    Without ``overwrite`` nothing that exists at ``out`` is replaced, even when another
    run published it while this one computed (one line, :class:`OutputError`). With
    ``overwrite`` a previous result that ``ours`` accepts is swapped out atomically (the
    destination is never missing) and removed; anything else is refused."""
    _publish(tmp, out, overwrite, ours)
    note_published(out)


def _publish(tmp: OwnedTemporary, out, overwrite: bool, ours: Callable[[Path], bool]) -> None:
    check_interrupted()  # a Ctrl-C swallowed on its way: nothing is published
    out = Path(out)
    if not overwrite or not os.path.lexists(out):
        try:
            rename_noreplace(tmp.path, out)
        except FileExistsError:
            raise OutputError(
                f"{out}: another run published a result here while this one was running; "
                "nothing was replaced and this run's result was discarded (pass --overwrite "
                "to replace it)") from None
        return
    if not ours(out):
        raise InputError(f"{out}: exists and was not written by streamlsq; --overwrite "
                         "replaces only streamlsq's own results: choose another --out")
    if ours is written_by_streamlsq and out.is_dir():  # a user's file put in since the check
        check_only_ours(out)
    if _renameat2(tmp.path, out, _RENAME_EXCHANGE):
        return  # the previous result now sits at the temporary path, removed with it
    with OwnedTemporary(out, "old") as trash:
        os.rename(out, trash.path)
        try:
            rename_noreplace(tmp.path, out)
        except BaseException:
            with contextlib.suppress(OSError):
                rename_noreplace(trash.path, out)  # put the previous result back
            raise


# -- object stores: no rename, no flock ------------------------------------------------------
#
# An object store (S3, GCS, Azure, …, through fsspec) has neither an atomic rename of a prefix
# nor advisory locks. A result is therefore built under a temporary prefix next to its
# destination (``.NAME.partial-XXXXXXXX/``, as on a filesystem) and published in three steps:
#
# 1. the destination is *claimed* by creating its root ``zarr.json`` with a conditional write
#    that fails when the object exists (S3's ``If-None-Match: *``, fsspec's ``mode="create"``):
#    of two runs publishing at once, exactly one wins; the claim is a Zarr group marked
#    ``complete=False``, which readers refuse;
# 2. every other object is copied from the temporary prefix (server-side copies);
# 3. the root ``zarr.json`` with ``complete=True`` is written last (one PUT: a reader sees the
#    claim or the finished store, never a mixture that looks complete), and the temporary
#    prefix is removed.
#
# A result computed in memory (a fit, a model: ``write_result``) is not built under a temporary
# prefix: it is encoded, marked complete and consolidated in memory, then published by the same
# three steps with its objects written straight to the destination in step 2
# (:func:`publish_objects`). Every request to an object store is a round trip: this spares the
# writing, listing, re-reading, copying and removal of a temporary prefix.
#
# ``--overwrite`` replaces only a store streamlsq wrote; the destination is marked incomplete
# first, its objects removed, then the new ones copied: readers get a refusal, never a mixture,
# but the earlier result is gone before the new one is complete. Where the store has no
# conditional writes, step 1 is an existence check followed by a write: two runs that publish
# within the same instant may both pass it (the second's copy then overwrites the first's).
# A run killed while its workers write a store leaves its ``.NAME.partial-*`` prefix behind:
# without locks no later run can tell it from a live one, so none is removed automatically
# (they are named in ``docs/faults.md``); a run killed while publishing leaves the claim,
# refused by readers and replaced by ``--overwrite``.


class RemoteTemporary:
    """A temporary prefix ``.NAME.KIND-XXXXXXXX/`` next to ``out`` on an object store."""

    def __init__(self, out, kind: str = "partial"):
        self.location = out.sibling(f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}")
        self.path = self.location

    @property
    def store(self):
        return self.location.zarr_store()

    def close(self) -> None:
        # best effort: a store that stopped answering keeps the prefix (named by the error)
        with contextlib.suppress(Exception):
            fs, path = self.location.filesystem()
            fs.rm(path, recursive=True)

    def __enter__(self) -> RemoteTemporary:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remote_written_by_streamlsq(location) -> bool:
    """``written_by_streamlsq`` for a store on an object store: its root attributes."""
    meta = location.read_json("zarr.json")
    attrs = (meta or {}).get("attributes") or {}
    if not isinstance(attrs, dict):
        return False
    return (str(attrs.get(WRITTEN_BY, "")).startswith("streamlsq")
            or "streamlsq_version" in attrs
            or str(attrs.get("generator", "")).startswith("streamlsq."))


def check_remote_writable(location) -> None:
    """Write and remove a small object next to ``location``: missing credentials or a
    read-only bucket are refused before any computation."""
    probe = location.sibling(f".streamlsq-probe-{uuid.uuid4().hex[:8]}")
    fs, path = probe.filesystem()
    try:
        fs.pipe_file(path, b"streamlsq")
        fs.rm_file(path)
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or ["no message"])[0][:200]
        raise OutputError(f"{location.shown or location.url}: cannot write here "
                          f"({type(exc).__name__}: {reason}); check the credentials or "
                          "choose another output") from None


def _claim(fs, path: str, data: bytes) -> bool:
    """Create the object ``path`` only if it does not exist; False if it does. Uses the
    store's conditional write where fsspec offers one, else checks first."""
    try:
        fs.pipe_file(path, data, mode="create")
        return True
    except FileExistsError:
        return False
    except (TypeError, NotImplementedError, ValueError):
        if fs.exists(path):
            return False
        fs.pipe_file(path, data)
        return True


def _claim_destination(fs, dst: str, root: bytes, out, overwrite: bool,
                       source: str | None) -> None:
    """Step 1 of a publication on an object store (see the comment above): claim ``dst`` (the
    destination's path in ``fs``) with a conditional write of the finished ``root``
    ``zarr.json`` marked incomplete; with ``overwrite``, a store streamlsq wrote there is
    marked incomplete and its objects removed. ``source``: the temporary prefix the result
    is published from (recorded in the claim), None for a result held in memory."""
    meta = json.loads(root)
    claim = dict(meta)
    attrs = meta.get("attributes", {})
    claim["attributes"] = {"complete": False, WRITTEN_BY: attrs.get(WRITTEN_BY, "streamlsq")}
    if "method" in attrs:  # what `info` names a claim left by a killed run by
        claim["attributes"]["method"] = attrs["method"]
    if source is not None:
        claim["attributes"]["publishing_from"] = source
    claim.pop("consolidated_metadata", None)
    claim_bytes = json.dumps(claim).encode()
    shown = out.shown or out.url
    if _claim(fs, f"{dst}/zarr.json", claim_bytes):
        return
    if not overwrite:
        raise OutputError(
            f"{shown}: another run published a result here while this one was running; "
            "nothing was replaced and this run's result was discarded (pass --overwrite "
            "to replace it)")
    if not remote_written_by_streamlsq(out):
        raise InputError(f"{shown}: exists and was not written by streamlsq; --overwrite "
                         "replaces only streamlsq's own results: choose another --out")
    found = fs.find(dst)
    check_only_ours(out, shown, found)  # before anything of the earlier result is touched
    fs.pipe_file(f"{dst}/zarr.json", claim_bytes)  # readers now refuse it as incomplete
    old = [k for k in found if k.rstrip("/") != f"{dst}/zarr.json"]
    if old:
        fs.rm(old)


def publish_remote(tmp: RemoteTemporary, out, overwrite: bool) -> None:
    """Publish the finished store under ``tmp`` as ``out`` (both on one object store); see the
    comment above for what holds."""
    check_interrupted()  # a Ctrl-C swallowed on its way: nothing is published
    fs, src = tmp.location.filesystem()
    _, dst = out.filesystem()
    src, dst = src.rstrip("/"), dst.rstrip("/")
    root = fs.cat_file(f"{src}/zarr.json")
    _claim_destination(fs, dst, root, out, overwrite, tmp.location.url)
    keys = [k for k in fs.find(src) if k.rstrip("/") != f"{src}/zarr.json"]
    if keys:
        fs.copy(keys, [dst + k[len(src):] for k in keys])
    fs.pipe_file(f"{dst}/zarr.json", root)
    note_published(out.shown or out.url)


def publish_objects(objects: dict[str, bytes], out, overwrite: bool) -> None:
    """Publish a finished store held in memory (``objects``: key → bytes, its root
    ``zarr.json`` among them, marked complete) as ``out`` on an object store: claimed as
    :func:`publish_remote` claims, every other object written straight to the destination
    (no temporary prefix: nothing to write twice, list, copy or remove), the root last."""
    check_interrupted()  # a Ctrl-C swallowed on its way: nothing is published
    fs, dst = out.filesystem()
    dst = dst.rstrip("/")
    root = objects["zarr.json"]
    _claim_destination(fs, dst, root, out, overwrite, None)
    others = {f"{dst}/{key}": data for key, data in objects.items() if key != "zarr.json"}
    if others:
        fs.pipe(others)  # concurrent PUTs, all done before the root is written
    fs.pipe_file(f"{dst}/zarr.json", root)
    note_published(out.shown or out.url)


# -- files beside an output ----------------------------------------------------------------


def beside_path(out, suffix: str) -> Path:
    """The file ``suffix`` beside the output ``out``: OUT without its extension, then the
    suffix (``model.zarr`` → ``model.k-curve.csv``)."""
    out = Path(out)
    return out.with_name(out.with_suffix("").name + suffix)


def file_digest(path) -> str:
    """``sha256:`` and the hex digest of the bytes of the file at ``path``: how streamlsq
    records a file it wrote, to know it later as its own (unchanged since)."""
    import hashlib

    with open(path, "rb") as f:
        return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()


def _root_attrs(out) -> dict:
    try:
        meta = json.loads((Path(out) / "zarr.json").read_text())
    except (OSError, ValueError):
        return {}
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    return attrs if isinstance(attrs, dict) else {}


#: the files that make a folder (or a prefix) a Zarr store: v3's, v2's group and array
STORE_MARKS = ("zarr.json", ".zgroup", ".zarray")


def store_above(path) -> Path | None:
    """The outermost Zarr store among the local folders above ``path`` (None: none), where
    nothing but that store's own writer should write: a folder created there becomes part
    of it."""
    stores = [p for p in Path(path).absolute().parents
              if any((p / mark).is_file() for mark in STORE_MARKS)]
    return stores[-1] if stores else None


def check_outside_stores(path, what: str, option: str) -> None:
    """Refuse a folder ``what`` (a study's folder, the demo's, a checkpoint) at ``path``
    inside a Zarr store, before any work: it would become part of that store, which the
    command does not write (``option``: the option that named ``path``)."""
    outer = store_above(path)
    if outer is not None:
        raise InputError(f"{path}: {outer.name} is a Zarr store; {what} is not written inside "
                         f"a store: choose another {option}")


def beside_is_ours(path: Path, out) -> bool:
    """Whether the file ``path`` beside ``out`` is the one streamlsq wrote with the result at
    ``out``: that result lists it with the digest of its present bytes."""
    listed = _root_attrs(out).get(BESIDE)
    if not written_by_streamlsq(out) or not isinstance(listed, dict) or \
            path.name not in listed:
        return False
    try:
        return listed[path.name] == file_digest(path)
    except OSError:
        return False


class BesideFiles:
    """Files a command writes beside its output ``out`` (``writers``: suffix → a function
    writing the file at the path it is given), with the output's rules.

    :meth:`check` (before any work, with the output): each name is free, or with
    ``overwrite`` a regular file that the result at ``out`` lists with its digest; never a
    link, a folder or a file of the user's. :meth:`write` writes each file under an owned
    temporary next to it and returns their digests (the result's ``beside_files``);
    :meth:`publish` renames them into place (never over what appeared since, unless it is
    streamlsq's and ``overwrite``), and :meth:`withdraw` takes them back when the output
    itself could not be published. :meth:`close` removes the temporaries.
    """

    def __init__(self, out, writers: dict[str, Callable[[Path], None]]):
        self.out = Path(out)
        self.writers = {beside_path(out, suffix): write for suffix, write in writers.items()}
        self.temporaries: dict[Path, OwnedTemporary] = {}
        self.published: list[Path] = []

    def stale(self) -> list[Path]:
        """The files beside the result at ``out`` that it lists and that this one does not
        write (a ``metalearn --k auto`` model replaced by one of a given k: its curve), each
        unchanged since streamlsq wrote it: replaced with the result, they are removed with
        it (left, they described a model that no longer was, and were then refused as the
        user's)."""
        listed = _root_attrs(self.out).get(BESIDE) if written_by_streamlsq(self.out) else None
        if not isinstance(listed, dict):
            return []
        ours = [self.out.parent / name for name in listed
                if isinstance(name, str) and name == Path(name).name]
        return [path for path in ours if path not in self.writers and path.is_file()
                and not path.is_symlink() and beside_is_ours(path, self.out)]

    def check(self, overwrite: bool) -> None:
        for path in self.writers:
            reclaim_leftovers(path)
            if path.is_symlink():
                raise InputError(f"{path}: is a symbolic link; streamlsq writes its files "
                                 f"beside {self.out} but never through a link: remove it or "
                                 "choose another --out")
            if not os.path.lexists(path):
                continue
            if not path.is_file():
                raise InputError(f"{path}: exists and is not a file; streamlsq writes a file "
                                 f"of that name beside {self.out}: choose another --out")
            if not overwrite:
                raise InputError(f"{path}: already exists; streamlsq writes it beside "
                                 f"{self.out}: choose another --out or pass --overwrite")
            if not beside_is_ours(path, self.out):
                raise InputError(f"{path}: exists and was not written by streamlsq (or was "
                                 "changed since); --overwrite replaces only streamlsq's own "
                                 "files: choose another --out")

    def write(self) -> dict[str, str]:
        digests = {}
        for path, write in self.writers.items():
            tmp = self.temporaries[path] = OwnedTemporary(path, "partial")
            write(tmp.path)
            digests[path.name] = file_digest(tmp.path)
        return digests

    def publish(self, overwrite: bool) -> None:
        for path, tmp in self.temporaries.items():
            publish(tmp, path, overwrite, ours=lambda p: beside_is_ours(p, self.out))
            self.published.append(path)

    def withdraw(self) -> None:
        """Undo :meth:`publish`: the previous file back where it was swapped out, else the
        new file removed (it is this run's)."""
        for path in reversed(self.published):
            tmp = self.temporaries[path]
            with contextlib.suppress(OSError):
                if os.path.lexists(tmp.path):  # the previous file, swapped out
                    _renameat2(tmp.path, path, _RENAME_EXCHANGE)
                else:
                    path.unlink()
        self.published = []

    def close(self) -> None:
        for tmp in self.temporaries.values():
            tmp.close()
        self.temporaries = {}


def write_file(path, write: Callable[[Path], None], ours: Callable[[Path], bool],
               what: str = "the file") -> None:
    """Write a file a command is told to write (``info --plot PNG``) as outputs are written:
    never through a link, never over a folder or a file streamlsq did not write (``ours``
    tells its own), checked before ``write`` runs; written under an owned temporary next to
    it and renamed into place."""
    text = os.fspath(path)
    if not text.strip():  # else the working folder, refused as a file not streamlsq's
        raise InputError(f"{what} is empty: name the file to write")
    typo = not_a_url(text, output=True)  # refused, though a legal local name
    if typo:
        raise InputError(typo)
    path = Path(path)
    if text.endswith(("/", os.sep)) or path.is_dir() and not path.is_symlink():
        # Path() drops the slash: a file would be written where a folder was meant
        raise InputError(f"{text}: names a folder; {what} is the file to write (such as "
                         f"{path / 'plot.png'})")
    check_outside_stores(path, "a file", what)
    reclaim_leftovers(path)
    if path.is_symlink():
        raise InputError(f"{path}: is a symbolic link; streamlsq never writes through a link: "
                         f"choose another path for {what}")
    if os.path.lexists(path) and not (path.is_file() and ours(path)):
        raise InputError(f"{path}: exists and was not written by streamlsq; streamlsq replaces "
                         f"only its own files: choose another path for {what}")
    if not path.parent.is_dir():
        raise InputError(f"{path.parent}: folder does not exist")
    check_writable(path.parent)
    with OwnedTemporary(path, "partial") as tmp:
        write(tmp.path)
        publish(tmp, path, overwrite=True, ours=ours)
