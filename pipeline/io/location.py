"""Where a store lives: a local folder, an fsspec URL (``s3://``, ``gs://``, ``memory://``, …)
or a zarr store object, as one small picklable :class:`Location`.

Every function of streamlsq that takes a path also takes a URL or a zarr store object
(``zarr.storage.LocalStore``, ``zarr.storage.FsspecStore``): :func:`locate` turns any of
them into a :class:`Location`, which the workers use to open the same store again. Remote
stores are read and written through fsspec (zarr's ``FsspecStore``); credentials and
endpoints come from ``storage_options`` (a dict, or those of the store object) or from the
environment as fsspec and the cloud libraries read it (``AWS_ACCESS_KEY_ID``,
``FSSPEC_S3_ENDPOINT_URL``, …), so the workers, which inherit that environment or get the
options with the location, see the same store.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field

#: the suffixes of the CSV files a table is read from (a glob of them is one table)
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".tsv")

__all__ = ["CSV_SUFFIXES", "Location", "check_storage_options", "csv_folder_remedy", "is_url",
           "locate", "not_a_url", "options_for"]


def is_url(path) -> bool:
    """True for an fsspec URL of a store that is not a local file (``s3://…``)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return not path.startswith("file://")


#: fsspec's protocols that are also ordinary words of a local name ('data:2024.zarr'): such a
#: name is never taken for a mistyped URL (:func:`not_a_url`)
_WORDS = frozenset({"data", "dir", "root", "generic"})


def not_a_url(path, output: bool = False) -> str | None:
    """For a local path that begins as a URL with too few slashes (``memory:/f.zarr``,
    ``s3:bucket/k.zarr``: an fsspec protocol, then ``:`` without ``//``) and whose first part
    does not exist here, what it is and how to write it; else None. Such a path is a legal
    local name, read as one (a folder ``memory:``) when it exists. The local remedy is one
    that works: of an ``output``, ``./NAME`` for a name of one part, and for a path below a
    folder ``memory:`` that folder created first (an output's folder must exist); of an
    input, none (nothing of that name exists here)."""
    if not isinstance(path, str | os.PathLike):
        return None
    text = os.fspath(path)
    if not isinstance(text, str) or "://" in text:
        return None
    scheme, colon, rest = text.partition(":")
    if not colon or scheme.lower() in _WORDS or os.path.lexists(text.split("/")[0]):
        return None
    from fsspec.registry import known_implementations, registry

    if scheme.lower() not in {*known_implementations, *registry}:
        return None
    fixed = (f"{scheme}://{rest}" if scheme.lower() in ("file", "local")
             else f"{scheme}://{rest.lstrip('/')}")
    said = f"{text}: not a URL, which is scheme://... (here {fixed})"
    first = text.split("/")[0]
    if not output:
        return f"{said}, and no local file or folder '{first}' exists"
    if first == text:
        return f"{said}; to write a local path of that name, write ./{text}"
    return (f"{said}; to write into a local folder named '{first}', create it first "
            f"(mkdir './{first}')")


def _options_key(options: dict | None) -> str:
    if not options:
        return ""
    return json.dumps(options, sort_keys=True, default=repr)


@dataclass(frozen=True)
class Location:
    """A store's place: ``url`` (an absolute local path, or a URL such as ``s3://b/k.zarr``)
    and the ``storage_options`` to reach it; ``shown`` is how the user wrote it.

    Examples
    --------
    >>> from streamlsq.io.location import locate
    >>> loc = locate("s3://bucket/data.zarr", {"anon": True})
    >>> loc.remote, loc.url, loc.storage_options
    (True, 's3://bucket/data.zarr', {'anon': True})
    >>> loc.sibling(".data.zarr.partial-1").url
    's3://bucket/.data.zarr.partial-1'
    >>> locate("memory://data.zarr").sibling(".probe").url
    'memory://.probe'
    >>> locate("data.zarr").remote
    False
    """

    url: str
    options_key: str = ""
    shown: str = ""
    storage_options: dict | None = field(default=None, compare=False, hash=False)

    @property
    def remote(self) -> bool:
        return is_url(self.url)

    @property
    def name(self) -> str:
        return posixpath.basename(self.url.rstrip("/"))

    def __str__(self) -> str:
        return self.url

    def __fspath__(self) -> str:  # a local location is usable as a path
        if self.remote:
            raise TypeError(f"{self.url} is not a local path")
        return self.url

    def with_url(self, url: str) -> Location:
        return Location(url, self.options_key, url, self.storage_options)

    def sibling(self, name: str) -> Location:
        """The location ``name`` next to this one (same folder or prefix, same options)."""
        if self.remote:
            # the folder of a URL at its filesystem's root (memory://fit.zarr) is that root,
            # not the protocol ("memory:")
            protocol, _, path = self.url.rstrip("/").partition("://")
            parent = posixpath.dirname(path)
            return self.with_url(f"{protocol}://{posixpath.join(parent, name)}")
        return self.with_url(os.path.join(os.path.dirname(self.url), name))

    def child(self, *parts: str) -> Location:
        if self.remote:
            return self.with_url(posixpath.join(self.url.rstrip("/"), *parts))
        return self.with_url(os.path.join(self.url, *parts))

    def filesystem(self):
        """(fsspec filesystem, path inside it) of a remote location."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.url, **(self.storage_options or {}))
        # other processes (the workers) write here too: never answer from a stale listing
        fs.invalidate_cache()
        return fs, path

    def zarr_store(self, read_only: bool = False):
        """What ``zarr.open_group`` takes: the path of a local store, an ``FsspecStore`` of a
        remote one."""
        if not self.remote:
            return self.url
        from zarr.storage import FsspecStore

        options = dict(self.storage_options or {})
        return FsspecStore.from_url(self.url, storage_options=options or None,
                                    read_only=read_only)

    def exists(self) -> bool:
        """Whether anything is stored here (a folder, a file, or objects under the prefix)."""
        if not self.remote:
            return os.path.lexists(self.url)
        fs, path = self.filesystem()
        try:
            return bool(fs.exists(path)) or bool(fs.ls(path, detail=False))
        except FileNotFoundError:
            return False

    def read_json(self, *parts: str) -> dict | None:
        """The JSON object stored at ``parts`` under this location, or None."""
        target = self.child(*parts)
        try:
            if target.remote:
                fs, path = target.filesystem()
                text = fs.cat_file(path)
            else:
                with open(target.url, "rb") as f:
                    text = f.read()
            value = json.loads(text)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None


def locate(data, storage_options: dict | None = None) -> Location | None:
    """The :class:`Location` of a path, URL or zarr store object; None for anything else
    (an in-memory zarr store, an xarray Dataset), which the caller reads its own way."""
    if isinstance(data, Location):
        if storage_options and not data.storage_options:
            return Location(data.url, _options_key(storage_options), data.shown,
                            dict(storage_options))
        return data
    if isinstance(data, str | os.PathLike):
        text = os.fspath(data)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if is_url(text):
            opts = dict(storage_options) if storage_options else None
            return Location(text.rstrip("/"), _options_key(opts), text, opts)
        if text.startswith("file://"):
            text = text[len("file://"):]
        return Location(os.path.abspath(text), "", text, None)
    try:
        from zarr.storage import FsspecStore, LocalStore
    except ImportError:  # pragma: no cover - zarr is a dependency
        return None
    if isinstance(data, LocalStore):
        return Location(os.path.abspath(str(data.root)), "", str(data.root), None)
    if isinstance(data, FsspecStore):
        fs = data.fs
        opts = {k: v for k, v in dict(getattr(fs, "storage_options", {}) or {}).items()
                if k != "asynchronous"}
        if storage_options:
            opts.update(storage_options)
        url = fs.unstrip_protocol(data.path).rstrip("/")
        if getattr(fs, "protocol", None) in ("file", ("file", "local")) or url.startswith(
                "file://"):
            path = url[len("file://"):] if url.startswith("file://") else data.path
            return Location(os.path.abspath(path), "", path, None)
        return Location(url, _options_key(opts), url, opts or None)
    return None


def check_storage_options(storage_options: dict | None, places) -> None:
    """Refuse ``storage_options`` when every one of ``places`` (paths, URLs, zarr store
    objects or Locations) that has a location is a local path: they apply to URLs only, and
    would be ignored without a word (as pandas refuses them)."""
    if not storage_options:
        return
    from streamlsq.errors import InputError

    found = [p if isinstance(p, Location) else locate(p) for p in places]
    found = [loc for loc in found if loc is not None]
    if found and not any(loc.remote for loc in found):
        raise InputError("storage_options apply to URLs (s3://, gs://, memory://...); "
                         f"{found[0].shown or found[0].url} is a local path")


def options_for(data, storage_options: dict | None) -> dict | None:
    """The ``storage_options`` of a run for one of its places: None for a local path (a run
    may mix local paths and URLs; the options reach the URLs, and a local path refuses them:
    :func:`check_storage_options`), else as given."""
    loc = locate(data)
    return None if loc is not None and not loc.remote else storage_options


#: the file that marks a checkpoint folder (:mod:`streamlsq.io.checkpoint`'s ``MARKER``; here,
#: where every reader can tell such a folder from a store without importing checkpoints)
CHECKPOINT_MARKER = "streamlsq-checkpoint.json"


def streamlsq_folder(path) -> str | None:
    """What a local folder streamlsq wrote that is not a store is (a checkpoint, a study's
    or the demo's folder), in words with what to do with it; None for anything else."""
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if text is None or is_url(text) or not os.path.isdir(text):
        return None
    if os.path.isfile(os.path.join(text, CHECKPOINT_MARKER)):
        return (f"a checkpoint folder (continue its run with --checkpoint {text} "
                "--resume)")
    for marker, what in (("study.json", "a study's folder"), ("demo.json", "the demo's folder")):
        if os.path.isfile(os.path.join(text, marker)):
            return f"{what} (its summary.md says what it holds)"
    return None


def csv_folder_remedy(path) -> str:
    """For a local folder of CSV files given where a table or a store is read (a folder is
    read as a table for Parquet files only; CSV files are given by a glob): how to give
    them, else ``""``."""
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if text is None or is_url(text) or not os.path.isdir(text):
        return ""
    if not any(f.lower().endswith(CSV_SUFFIXES) for f in os.listdir(text)):
        return ""
    glob = os.path.join(text, "*.csv")
    return (f"; it holds CSV files, which are read as one table when given by a glob: "
            f"'{glob}' (a folder is read as a table of its Parquet files)")
