"""Checkpoints: a killed run resumes from its last commit and ends with the same result.

A checkpoint folder holds:

    streamlsq-checkpoint.json   the marker: this folder is a streamlsq checkpoint (kind, version,
                                whether streamlsq created the folder)
    lock                        locked (``fcntl.flock``) by the run using the folder
    progress.json               fingerprint of the run, the stamps of its input chunks and what is
                                committed (written last: this is the commit)
    inputs.json                 size and mtime of every chunk file of the inputs when the run began

and, for a sequential fit (:class:`Checkpoint`), ``state-000041.npz`` (the recursion state after
segment ``next - 1``) and ``segment-000042.npz`` (recorded steps of segment 42); for every other
run (:class:`EntryCheckpoint`: scan pieces, metalearn steps, EM iterations, study batches),
``entry-NAME.npz``, one file per committed piece of work. Any run may also commit *steps*,
the passes its job runs once its first result is known (``streamlsq.jobs.Context.run_pass``:
a robust covariance's pass, an iteration): ``step-NNN-NAME.npz``, arrays of numbers only,
listed under ``steps`` in ``progress.json``.

Every file of a checkpoint is data whose reading runs no code: JSON, or ``.npz`` read with
``allow_pickle=False``. An entry's value (numbers, strings, None, arrays of numbers or
strings, and lists, tuples and dicts of these: :func:`encode_data`) is one ``.npz``: its
arrays, and its structure as JSON in the array ``structure``. A folder holding anything
else where a checkpoint file belongs (a pickle such as an earlier version's
``entry-NAME.pkl``, an array of Python objects) is refused on ``--resume`` before anything
is read or run, the folder left as it was found.

Every file is written to a temporary name and renamed, so a kill at any moment leaves either
the previous or the new commit, never a torn one. Rules (``docs/faults.md``):

- a folder is used only when it is new, empty or holds a streamlsq checkpoint (the marker);
  anything else is refused, and only streamlsq's own files are ever removed from it;
- one run at a time: the ``lock`` is held for the whole run; a second run is refused;
- resuming checks the fingerprint (inputs with their metadata version, method, parameters,
  plan, ...) and that no chunk of the inputs that committed work read has changed since
  (a chunk repaired after a read error was never committed, so the run continues);
- a corrupt checkpoint is refused in one line, never a traceback; so is a checkpoint file
  that is not data (:meth:`CheckpointFolder.check_files`), and one holding NaN or inf
  where the run committed finite values (:meth:`CheckpointFolder.read_arrays`: every
  ``.npz`` lists its arrays that were not finite when committed), read before the resumed
  run does any work.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import zipfile
from pathlib import Path

import numpy as np

from streamlsq.errors import InputError, OutputError
from streamlsq.io.location import CHECKPOINT_MARKER
from streamlsq.io.locks import FileLock
from streamlsq.io.outputs import check_apart, check_outside_stores

__all__ = ["Checkpoint", "CheckpointFolder", "EntryCheckpoint", "check_checkpoint_parent",
           "data_digest", "decode_data", "encode_data", "fingerprint_digest"]

MARKER = CHECKPOINT_MARKER
LOCK = "lock"
#: the files streamlsq writes into a checkpoint folder (the only ones it ever removes)
OWN_FILES = re.compile(r"^(streamlsq-checkpoint\.json|lock|progress\.json|inputs\.json"
                       r"|state-\d+\.npz|segment-\d+\.npz|entry-[\w.-]+\.(?:npz|pkl)|step-[\w.-]+\.npz)"
                       r"(\.tmp.*)?$")


def _atomic_write(path: Path, data: bytes) -> None:
    with _replacing(path, ".tmp") as tmp, open(tmp, "wb") as f:
        f.write(data)


#: files of an earlier version's checkpoint that held pickles: never loaded (a pickle can run
#: any code), only removed by a run that starts afresh
PICKLED = re.compile(r"^entry-[\w.-]+\.pkl$")


#: the member of every ``.npz`` of a checkpoint naming its arrays that held a value that
#: is not finite (NaN, inf) when they were committed (a study's batch may; a fit's state or
#: coefficients never: its folds refuse them). Any other array found not finite on
#: ``--resume`` was damaged since, and the checkpoint is refused as corrupt
#: (:meth:`CheckpointFolder.read_arrays`)
NONFINITE = "_nonfinite"


def _finite(a: np.ndarray) -> bool:
    return a.dtype.kind not in "fc" or bool(np.isfinite(a).all())


def _atomic_savez(path: Path, **arrays) -> None:
    if NONFINITE in arrays:
        raise ValueError(f"a checkpoint's arrays are never named {NONFINITE!r}")
    nonfinite = sorted(k for k, a in arrays.items() if not _finite(np.asarray(a)))
    with _replacing(path, ".tmp.npz") as tmp:
        np.savez(tmp, **arrays, **{NONFINITE: np.array(nonfinite, dtype=str)})


@contextlib.contextmanager
def _replacing(path: Path, suffix: str):
    """Yield a temporary name next to ``path``, then rename it over ``path`` (a kill leaves
    the previous file or the new one, never a torn one). A write that fails (a full disk, a
    file size limit, permissions) removes the temporary and is one line naming the
    checkpoint folder (:class:`~streamlsq.errors.OutputError`); the last commit stays."""
    tmp = path.with_name(path.name + suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputError(
            f"{path.parent}: writing the checkpoint failed ({exc.strerror or exc}; "
            f"{path.name}); its last commit stays valid: free space (or choose another "
            "--checkpoint) and run the command again with --resume") from None
    except BaseException as exc:  # an interrupt (Ctrl-C) in the middle of the write
        with contextlib.suppress(OSError):
            tmp.unlink()
        # zipfile, interrupted inside np.savez, raises its own error as it closes ("Can't
        # close the ZIP file while there is an open writing handle"): the interrupt is
        # what happened, and the command ends as an interrupted one
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise exc.__context__ from None
        raise


def check_checkpoint_parent(directory: str | os.PathLike) -> None:
    """Refuse a checkpoint folder to be created where its parent folder does not exist (or
    is a file): streamlsq creates the checkpoint folder alone, never the folders above it,
    which it could not tell from the user's when it removes the checkpoint (as ``--out``
    refuses an output whose folder does not exist)."""
    d = Path(directory)
    if os.path.lexists(d):
        return
    # its folder would become part of that store while the run lasts (checked first: that
    # is the reason, whether or not the folders below the store exist)
    check_outside_stores(d, "a checkpoint", "--checkpoint")
    parent = d.parent
    if not parent.exists():
        raise InputError(f"{parent}: folder of --checkpoint {d} does not exist; streamlsq "
                         "creates the checkpoint folder only inside an existing folder: "
                         "create it first, or choose another --checkpoint")
    if not parent.is_dir():
        raise InputError(f"{d}: {parent.name} is a file, not a folder; choose another "
                         "--checkpoint")


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (a link, a named pipe, a folder...),
    which a checkpoint never holds; None for a file. A pipe would block its reader for
    ever."""
    mode = path.lstat().st_mode
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((what for test, what in kinds if test(mode)), None)


def _lock_file_is_ours(path: Path) -> bool:
    """Whether a ``lock`` file is one :class:`~streamlsq.io.locks.FileLock` wrote: empty (the
    process died as it took it) or the one line describing its owner."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return text == "" or bool(re.fullmatch(r"host .*, process \d+, since .*\n?", text))


def _progress_file_is_ours(path: Path) -> bool:
    """Whether a ``progress.json`` is one a checkpoint wrote (a JSON object with the run's
    ``fingerprint``), not a user's file of that name, which is never removed."""
    try:
        saved = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(saved, dict) and "fingerprint" in saved


def fingerprint_digest(fingerprint: dict) -> str:
    """A short hash of a run's fingerprint (stored in its result as ``run_fingerprint``)."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()
                          ).hexdigest()[:24]


# -- data without code: what an entry holds, and the digest of a study batch's arguments ------

#: the kinds of array a checkpoint holds: booleans, integers, floats, complex numbers, bytes
#: and text (never Python objects, which only pickle can read)
_ARRAY_KINDS = "biufcSU"


def encode_data(value, arrays: list[np.ndarray]):
    """``value`` as a JSON structure, its arrays appended to ``arrays`` (and named there by
    position): numbers, strings, None, NumPy arrays of :data:`_ARRAY_KINDS` and NumPy
    scalars, and lists, tuples and dicts of these. Anything else is a TypeError (a job that
    commits something that is not data is a defect of the job, not of its input).

    Containers and arrays are tagged objects (``{"list": [...]}``, ``{"tuple": [...]}``,
    ``{"dict": [[key, value], ...]}`` keeping the keys' types, ``{"array": i}``,
    ``{"scalar": i}`` for a NumPy scalar, kept as a 0-d array with its dtype), so
    :func:`decode_data` gives back values of the same types and the same bits.

    Examples
    --------
    >>> arrays = []
    >>> encode_data({"n": 3, "w": (np.zeros(2), None)}, arrays)
    {'dict': [['n', 3], ['w', {'tuple': [{'array': 0}, None]}]]}
    >>> decode_data(_, arrays)
    {'n': 3, 'w': (array([0., 0.]), None)}
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and type(value) in (int, float):
        return value
    if isinstance(value, np.ndarray | np.generic):
        a = np.asarray(value)
        if a.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"a checkpoint holds arrays of numbers or text, not {a.dtype}")
        arrays.append(a)
        return {"scalar" if isinstance(value, np.generic) else "array": len(arrays) - 1}
    if isinstance(value, list | tuple):
        kind = "list" if type(value) is list else "tuple" if type(value) is tuple else None
        if kind is not None:
            return {kind: [encode_data(v, arrays) for v in value]}
    if type(value) is dict:
        return {"dict": [[encode_data(k, arrays), encode_data(v, arrays)]
                         for k, v in value.items()]}
    raise TypeError(f"a checkpoint holds data (numbers, text, arrays, lists, tuples, dicts), "
                    f"not {type(value).__module__}.{type(value).__qualname__}")


def decode_data(node, arrays):
    """The value :func:`encode_data` encoded as ``node`` with ``arrays`` (a ValueError for
    anything it cannot have written)."""
    if node is None or isinstance(node, bool | int | float | str):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (tag, inner), = node.items()
        if tag in ("list", "tuple") and isinstance(inner, list):
            items = [decode_data(v, arrays) for v in inner]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and isinstance(inner, list) and all(
                isinstance(kv, list) and len(kv) == 2 for kv in inner):
            return {_hashable(decode_data(k, arrays)): decode_data(v, arrays) for k, v in inner}
        if tag in ("array", "scalar") and type(inner) is int and 0 <= inner < len(arrays):
            a = arrays[inner]
            return a[()] if tag == "scalar" else a
    raise ValueError(f"not an encoded value: {json.dumps(node)[:60]}")


def _hashable(key):
    if isinstance(key, list | dict | np.ndarray):
        raise ValueError("a dict key that is not hashable")
    return key


def data_digest(value) -> str:
    """A stable hash of ``value`` (no pickle: the same value gives the same digest in any
    process and Python version): the JSON of :func:`encode_data` with each array replaced by
    its dtype, shape and bytes' hash; a dataclass by its class and fields, an object with
    ``get_params`` (a recursion) by its class and parameters, a function by its name. Used
    to name a study's batches by their arguments.

    Examples
    --------
    >>> data_digest((1, np.arange(3))) == data_digest((1, np.arange(3)))
    True
    >>> data_digest((1, np.arange(3))) == data_digest((1, np.arange(3.0)))
    False
    """
    return hashlib.sha256(json.dumps(_describe(value), sort_keys=True, allow_nan=True)
                          .encode()).hexdigest()


def _describe(value):
    """``value`` as JSON-able data for :func:`data_digest`."""
    import dataclasses

    if value is None or isinstance(value, bool | str) or type(value) in (int, float):
        return value if not isinstance(value, float) else {"float": value.hex()}
    if isinstance(value, np.ndarray | np.generic):
        a = np.ascontiguousarray(value)
        if a.dtype.hasobject:
            return {"objects": [_describe(v) for v in a.ravel().tolist()],
                    "shape": list(a.shape)}
        return {"array": a.dtype.str, "shape": list(a.shape),
                "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    if isinstance(value, list | tuple):
        return {type(value).__name__: [_describe(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_describe(k), _describe(v)] for k, v in value.items()]}
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": kind, "fields": {f.name: _describe(getattr(value, f.name))
                                              for f in dataclasses.fields(value)}}
    if callable(getattr(value, "get_params", None)):
        return {"object": kind, "params": _describe(dict(value.get_params()))}
    if callable(value) and hasattr(value, "__qualname__"):
        return {"function": f"{getattr(value, '__module__', '')}.{value.__qualname__}"}
    raise TypeError(f"no stable digest of a {kind}")


def _npz_headers(path: Path) -> dict[str, np.dtype]:
    """The dtype of every array of the ``.npz`` file ``path``, read from the arrays' headers
    alone (no data, no pickle): OSError, ValueError or BadZipFile if it is not an ``.npz``
    of ``.npy`` arrays."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if not name.endswith(".npy"):
                raise ValueError(f"{name} is not an array")
            with z.open(name) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    _shape, _order, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    _shape, _order, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"{name}: array format {version} is not one streamlsq "
                                     "writes")
            out[name[:-4]] = dtype
    return out


class CheckpointFolder:
    """The folder, its marker and lock, the fingerprint and the input stamps of one run.

    ``inputs`` are the run's input sources (objects with ``path``, ``group``, ``token``);
    ``variables`` the arrays whose chunks committed work reads (stamped when a fresh run
    begins, compared on resume). Use as a context manager, or call :meth:`open` and
    :meth:`close`; :meth:`remove` deletes the checkpoint once its result is published.
    """

    kind = "run"

    def __init__(self, directory: str | os.PathLike, fingerprint: dict, resume: bool = False,
                 inputs=(), variables=("X", "y")):
        self.directory = Path(directory)
        self.fingerprint = dict(fingerprint)
        self.resume = resume
        self.inputs = tuple(inputs)
        self.variables = tuple(variables)
        self._lock = FileLock(self.directory / LOCK)
        self._opened = False
        self._created = False
        self._found = "held"  # what the folder was when opened: none, empty or held
        self.saved: dict | None = None  # progress.json of the run being resumed
        self.steps: dict[str, str] = {}  # committed steps: name -> file
        self._body: dict | None = None  # progress.json as last committed, without the steps
        self.check_arrays = True  # read the committed files on resume (check_committed)
        self._checked = False
        #: the options that shape each entry of the fingerprint, with their values, in the
        #: command line's spelling (``{"plan": {"--block-size": 500, ...}}``): kept in the
        #: marker and the progress, so that a refused resume names the options that
        #: changed and both values, where an entry keeps only a digest of them
        self.options: dict[str, dict] = {}

    # -- folder, marker, lock -----------------------------------------------------------
    def open(self) -> None:
        """Check and lock the folder; read the progress to resume (checked) or clear it."""
        if self._opened:
            return
        d = self.directory
        check_apart(d, self.inputs, "--checkpoint")
        self._check_link()
        check_checkpoint_parent(d)
        if d.exists() and not d.is_dir():
            raise InputError(f"{d}: --checkpoint must be a folder; this is a file")
        self._check_not_foreign()
        self._check_kind()
        self._check_no_folders()
        # what the folder was, for a refused run to leave it so (withdraw)
        self._found = "empty" if d.is_dir() and not any(d.iterdir()) else \
            "held" if d.exists() else "none"
        if self.resume and d.is_dir():
            self.check_files()  # before the lock: a refused folder is left as it was found
            self._check_started()
        created = self._take()
        self._opened = True
        try:
            self._created = self._read_marker(created)
            progress = d / "progress.json"
            if self.resume and progress.exists():
                self.saved = self._read_json(progress)
                if self.fingerprint_complete():
                    self._check_fingerprint(self.saved)
                self._read_steps(self.saved)
                if self.fingerprint_complete():
                    self.check_committed()
            else:
                self._start_afresh()
        except BaseException:
            self.close()
            raise

    def _check_link(self) -> None:
        """Refuse a symbolic link that is not one to a folder (which is used, as the folder
        it points to, and kept): creating the checkpoint folder would write through the
        link, or over it (as ``--out`` refuses a link)."""
        d = self.directory
        if not d.is_symlink() or d.is_dir():
            return
        target = os.readlink(d)
        if not os.path.isabs(target):  # the path it points to, as the user would write it
            target = os.path.normpath(os.path.join(d.parent, target))
        if d.exists():
            raise InputError(f"{d}: is a symbolic link to a file ('{target}'); --checkpoint is "
                             "a folder, and streamlsq never writes over a link: choose "
                             "another --checkpoint")
        raise InputError(f"{d}: is a symbolic link to '{target}', which does not exist; "
                         "streamlsq never creates a folder through a link or writes over "
                         "one: give the path it points to, or choose another --checkpoint")

    def _check_not_foreign(self) -> None:
        """Refuse a folder that holds anything but streamlsq's checkpoint files. Without the
        marker, a folder of streamlsq's files alone is still one: an earlier version's
        checkpoint (its ``progress.json``), or one whose run was killed (or whose disk was
        full) after it took the lock and before it wrote the marker (the ``lock`` file,
        which says who held it)."""
        d = self.directory
        if not d.is_dir() or (d / MARKER).is_file() and not (d / MARKER).is_symlink():
            return
        names = sorted(p.name for p in d.iterdir())
        # a link is never streamlsq's (it writes no links), whatever its name
        own = all(OWN_FILES.match(n) and not (d / n).is_symlink() for n in names)
        started = "progress.json" in names and _progress_file_is_ours(d / "progress.json") or \
            any(n.startswith(MARKER) for n in names) or \
            LOCK in names and _lock_file_is_ours(d / LOCK)
        foreign = [] if own and started else names
        if foreign:
            raise InputError(
                f"{d}: not a streamlsq checkpoint (it holds {', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); streamlsq uses only a new or "
                "empty folder for --checkpoint: choose another")

    def _check_no_folders(self) -> None:
        """Refuse, before the lock is taken, a folder where the run writes a file (a user's
        folder named ``progress.json``), with ``--resume`` or without: streamlsq writes no
        folder in a checkpoint, so it is not its own to remove, and no file can be written
        over it (started afresh, the run failed at its first commit, telling the user to
        resume, which was refused as corrupt)."""
        d = self.directory
        if not d.is_dir():
            return
        for path in sorted(d.iterdir()):
            if OWN_FILES.match(path.name) and _not_a_file(path) == "a folder":
                raise InputError(f"{d}: holds {path.name}, a folder where the run writes a "
                                 "file, which streamlsq did not make and will not remove: "
                                 "move it or choose another --checkpoint")

    def _marker(self) -> dict:
        """The folder's marker file as read before the lock is taken; empty when there is
        none, or a corrupt one (refused in one line once the folder is locked)."""
        try:
            if _not_a_file(self.directory / MARKER) is not None:  # refused by check_files
                return {}
            marker = json.loads((self.directory / MARKER).read_text())
        except (OSError, ValueError):
            return {}
        return marker if isinstance(marker, dict) else {}

    def _check_kind(self) -> None:
        """Refuse, before the lock is taken (the folder left as it was found), a checkpoint
        holding committed work of another kind of run (a metalearn's folder given to an EM
        run): resumed, it cannot be read as this run's; started afresh, another run's
        progress would be discarded unasked. A run of the same kind without ``--resume``
        starts afresh, as its option says. The same line with or without ``--resume``: either
        way the remedy is another folder."""
        d = self.directory
        if not (d / "progress.json").exists():
            return
        kind = self._marker().get("kind")
        if kind is None or kind == self.kind:
            return
        engines = {"fit": "sequential", "fit-scan": "scan"}  # a fit's kind is its engine's
        if kind in engines and self.kind in engines:
            raise InputError(f"{d}: the checkpoint of an --engine {engines[kind]} fit; this is "
                             f"--engine {engines[self.kind]}: run it with --engine "
                             f"{engines[kind]}, or choose another --checkpoint")
        theirs = self._marker().get("fingerprint")
        raise InputError(f"{d}: the checkpoint of a '{_command_of(kind, theirs)}' run; this "
                         f"is '{_command_of(self.kind, self.fingerprint)}': choose another "
                         "--checkpoint, or remove it")

    def _check_started(self) -> None:
        """Refuse to resume, before the lock is taken (the folder left as it was found), a
        checkpoint where nothing was committed yet (no ``progress.json``: the run failed or
        was stopped before its first commit) of another run: the marker keeps the
        fingerprint of the run that started the folder, compared as a commit's is, without
        the versions of the inputs (no committed work read them) and the segments (a
        resumed run cuts its own when nothing was committed)."""
        if (self.directory / "progress.json").exists():
            return
        started = self._marker().get("fingerprint")
        if not isinstance(started, dict):
            return  # an earlier version's marker: it kept no fingerprint

        def comparable(fingerprint: dict) -> dict:
            return {k: _without_tokens(v) for k, v in fingerprint.items() if k != "segments"}

        # as the marker keeps it: JSON (tuples made lists)
        ours = json.loads(json.dumps(self.fingerprint, default=str))
        old, new = comparable(started), comparable(ours)
        if old != new:
            raise self._different_run(old, new, self._marker().get("options"))

    def _different_run(self, old: dict, new: dict, options=None) -> InputError:
        """The refusal of a resume whose fingerprint ``new`` differs from the checkpoint's
        ``old``; ``options``: the checkpoint's :attr:`options` (None when it kept none: an
        earlier version's, named by its entries alone)."""
        return InputError(
            f"{self.directory}: checkpoint belongs to a different run (differs in: "
            f"{_differences(old, new, options, self.options)}); rerun without --resume or "
            "point --checkpoint elsewhere")

    def check_files(self) -> None:
        """Refuse, before anything is read, a folder holding a file where a checkpoint file
        belongs that is not data: a pickle (an earlier version's ``entry-NAME.pkl``; a
        pickle can run any code, so it is never loaded), an ``.npz`` holding an array of
        Python objects (likewise) or one that is no ``.npz`` of arrays (corrupt). Only the
        arrays' headers are read. One line naming the file; the folder is left as it was."""
        for path in sorted(self.directory.iterdir()):
            name = path.name
            other = _not_a_file(path)
            if other is not None and OWN_FILES.match(name):  # read below (a pipe: for ever)
                raise self.corrupt(path, f"{other}, where the run wrote a file")
            if PICKLED.match(name):
                raise InputError(
                    f"{path}: a pickle (an earlier version's checkpoint entry), which "
                    "streamlsq never loads: it could run code; rerun without --resume to "
                    "start afresh (this removes it)")
            if not (OWN_FILES.match(name) and name.endswith(".npz") and ".tmp" not in name
                    and path.is_file()):
                continue
            try:
                dtypes = _npz_headers(path)
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise self.corrupt(path, exc) from None
            objects = sorted(k for k, dtype in dtypes.items() if dtype.hasobject)
            if objects:
                raise InputError(
                    f"{path}: holds an array of Python objects ('{objects[0]}'), which only "
                    "pickle reads and streamlsq never loads: it could run code; a checkpoint "
                    "holds numbers and text only: rerun without --resume to start afresh")

    def _take(self) -> bool:
        """Create the folder if need be (and mark it at once: a folder streamlsq created is
        removed with the checkpoint) and take its lock; returns whether it was created."""
        d = self.directory
        created = not d.exists()
        try:
            d.mkdir(exist_ok=True)  # its parent checked (check_checkpoint_parent)
        except OSError as exc:
            raise InputError(f"{d}: cannot create the checkpoint folder ({exc.strerror})"
                             ) from None
        if created:
            self._created = True
            try:
                self._write_marker()
            except OutputError:
                shutil.rmtree(d, ignore_errors=True)  # it holds nothing but what this made
                raise
        try:
            taken = self._lock.acquire()
        except OSError as exc:
            raise InputError(f"{d}: cannot write the checkpoint folder ({exc.strerror})"
                             ) from None
        if not taken:
            raise InputError(f"{d}: checkpoint in use by another run ({self._lock.owner()}); "
                             "wait for it to end or choose another --checkpoint")
        return created

    def _start_afresh(self) -> None:
        """A run that does not resume: the folder emptied of an earlier run's files, marked,
        its inputs stamped. A write that fails here (a full disk) removes what was written
        (and the folder, if this run created it): the folder is left as it was found."""
        try:
            self._clear()
            self._write_marker()
            self._stamp_inputs()
        except OutputError:
            self._clear()
            (self.directory / MARKER).unlink(missing_ok=True)
            self._lock.release(unlink=True)
            self._opened = False
            if self._created:
                with contextlib.suppress(OSError):
                    self.directory.rmdir()
            raise

    def fingerprint_complete(self) -> bool:
        """Whether the fingerprint can be compared yet (a sequential fit adds its segments
        when it binds them)."""
        return True

    def _read_marker(self, created: bool) -> bool:
        marker = self.directory / MARKER
        if not marker.exists():
            return created
        info = self._read_json(marker)
        return bool(info.get("created_folder", created))

    def _write_marker(self) -> None:
        from streamlsq.io.provenance import _version

        # the fingerprint of the run that starts the folder: a resume before its first
        # commit is checked against it (_check_started)
        _atomic_write(self.directory / MARKER, json.dumps({
            "streamlsq_checkpoint": 1, "kind": self.kind, "streamlsq_version": _version(),
            "created_folder": self._created, "fingerprint": self.fingerprint,
            "options": self.options}, default=str).encode())

    def _clear(self) -> None:
        """Remove a previous run's files (streamlsq's own only) before starting afresh."""
        for p in self.directory.iterdir():
            if p.name not in (LOCK,) and OWN_FILES.match(p.name) and p.is_file():
                p.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the lock; the files stay for ``--resume``."""
        self._lock.release()
        self._opened = False

    def remove(self) -> None:
        """Delete the checkpoint (its result is published): streamlsq's files, then the
        folder if streamlsq created it and nothing else is in it."""
        if not self.directory.is_dir():
            return
        for p in self.directory.iterdir():
            if OWN_FILES.match(p.name) and p.name not in (LOCK,) and p.is_file():
                p.unlink(missing_ok=True)
        self._lock.release(unlink=True)
        self._opened = False
        if self._created:
            with contextlib.suppress(OSError):
                self.directory.rmdir()  # only when empty: never anything of the user's

    def withdraw(self) -> None:
        """After a refusal of the run (its input refused while it was read), when nothing
        was committed (no ``progress.json``): the folder left as the run found it, removed
        when it did not exist, emptied of streamlsq's files when it was empty; a folder
        that held a checkpoint (an earlier run's, which committed nothing either) keeps
        it. A checkpoint with committed work stays for ``--resume``."""
        d = self.directory
        if not self._opened or self._found == "held" or (d / "progress.json").exists():
            return
        self._created = self._found == "none"
        self.remove()

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading, with every failure one line ----------------------------------------------
    def corrupt(self, what, exc) -> InputError:
        """The refusal of a checkpoint file ``what`` that cannot be used: ``exc`` the error
        reading it, or what is wrong with it in words."""
        name = getattr(what, "name", what)
        if isinstance(exc, FileNotFoundError):  # not the errno and the path again
            exc = "missing (removed since it was written)"
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        reason = reason.splitlines()[0][:200]
        return InputError(f"{self.directory}: checkpoint is corrupt ({name}: {reason}); rerun "
                          "without --resume to start afresh")

    def read_arrays(self, path: Path) -> dict[str, np.ndarray]:
        """The arrays of the checkpoint file ``path``, read without pickle. A file that
        cannot be read, or holding an array with a value that is not finite (NaN, inf)
        where the committed array held none (its :data:`NONFINITE` list: a fit's folds and
        solves commit finite values only, so that NaN is damage, never a result), is
        refused as a corrupt checkpoint naming the file."""
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise self.corrupt(path, exc) from None
        # an earlier version's file has no list: it committed finite arrays alone
        listed = arrays.pop(NONFINITE, np.array([], dtype=str))
        if listed.dtype.kind != "U" or listed.ndim != 1:
            raise self.corrupt(path, f"its array '{NONFINITE}' is not a list of names")
        allowed = set(listed.tolist())
        bad = sorted(k for k, a in arrays.items() if k not in allowed and not _finite(a))
        if bad:
            raise self.corrupt(path, f"its array '{bad[0]}' holds NaN or inf, which the run "
                                     "did not commit")
        return arrays

    def committed_files(self) -> list[Path]:
        """The files of the work committed (read on resume by :meth:`check_committed`):
        the steps'."""
        return [self.directory / file for file in self.steps.values()]

    def check_committed(self) -> None:
        """Refuse, once, before the resumed run does any work, a checkpoint whose committed
        files cannot be read or hold values the run did not commit (:meth:`read_arrays`)."""
        if self._checked or not self.check_arrays:
            return
        for path in self.committed_files():
            self.read_arrays(path)
        self._checked = True

    def _read_json(self, path: Path) -> dict:
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise self.corrupt(path, exc) from None
        if not isinstance(value, dict):
            raise self.corrupt(path, ValueError("not a JSON object"))
        return value

    def _check_fingerprint(self, saved: dict) -> None:
        old = saved.get("fingerprint")
        if not isinstance(old, dict):
            raise self.corrupt("progress.json", KeyError("fingerprint"))
        if old == self.fingerprint:
            return
        diff = sorted(k for k in set(old) | set(self.fingerprint)
                      if old.get(k) != self.fingerprint.get(k))
        if set(diff) <= {"input", "inputs"} and all(
                _without_tokens(old.get(k)) == _without_tokens(self.fingerprint.get(k))
                for k in diff):
            raise InputError(
                f"{self.directory}: the input store was rewritten since this checkpoint was "
                "made (its metadata changed); resuming would mix two datasets: rerun without "
                "--resume")
        raise self._different_run(old, self.fingerprint, saved.get("options"))

    # -- steps: the passes of a run, data only ---------------------------------------------
    def _read_steps(self, saved: dict) -> None:
        steps = saved.get("steps", {})
        if not isinstance(steps, dict) or not all(
                isinstance(v, str) and re.fullmatch(r"step-[\w.-]+\.npz", v)
                for v in steps.values()):
            raise self.corrupt("progress.json", ValueError("steps is not a mapping of files"))
        self.steps = dict(steps)
        self._body = {k: v for k, v in saved.items() if k != "steps"}

    def _commit(self, body: dict) -> None:
        """Write ``progress.json``: ``body`` (what the kind of checkpoint commits) and the
        committed steps. Written last: this is the commit."""
        self._body = dict(body)
        _atomic_write(self.directory / "progress.json", json.dumps(
            body | {"options": self.options} | ({"steps": self.steps} if self.steps else {}),
            default=str).encode())

    def has_step(self, name: str) -> bool:
        """Whether the step ``name`` was committed (by this run or the one it resumes)."""
        self.open()
        return name in self.steps

    def save_step(self, name: str, arrays: dict) -> None:
        """Commit the step ``name``: its ``arrays`` (numbers only), then its name."""
        self.open()
        file = f"step-{_safe_name(name)}.npz"
        _atomic_savez(self.directory / file, **arrays)
        self.steps[name] = file
        self._commit(self._body or {"fingerprint": self.fingerprint})

    def load_step(self, name: str) -> dict:
        """The arrays of the committed step ``name`` (read without pickle)."""
        self.open()
        return self.read_arrays(self.directory / self.steps[name])

    # -- input stamps ------------------------------------------------------------------
    def _stamp_inputs(self) -> None:
        stamps = []
        for src in self.inputs:
            names = [n for n in _variables(src, self.variables) if _has_array(src, n)]
            stamps.append(src.chunk_stamps(names, contents=True) if names else {})
        _atomic_write(self.directory / "inputs.json", json.dumps(stamps).encode())

    def check_reads(self, reads) -> None:
        """Refuse to resume if a chunk that committed work read has changed since.

        ``reads`` are (input index, first row, end row) spans read by the committed work.
        """
        path = self.directory / "inputs.json"
        if not reads:
            return
        # written before the first commit: without it no changed chunk could be told, and
        # the resumed run would mix two datasets without a word
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise self.corrupt(path, exc) from None
        if not (isinstance(saved, list) and len(saved) == len(self.inputs)
                and all(map(_is_stamps, saved))):
            # valid JSON of another shape compared nothing: the resume went on unchecked
            raise self.corrupt(path, f"not the chunk stamps of the run's {len(self.inputs)} "
                                     "input(s)")
        spans: dict[int, list] = {}
        for i, a, b in reads:
            spans.setdefault(int(i), []).append((int(a), int(b)))
        for i, src in enumerate(self.inputs):
            if i not in spans:
                continue
            names = [n for n in _variables(src, self.variables) if _has_array(src, n)]
            names += [n for n in saved[i] if n not in names]
            now = src.chunk_stamps(names, contents=True) if names else {}
            for name, before in saved[i].items():
                current = {(a, b): s for a, b, s in now.get(name, [])}
                for a, b, stamp in before:
                    if current.get((a, b)) == stamp:
                        continue
                    # X and y are read by row spans; task_ptr and role shape every read
                    if name not in _row_variables(src) or any(
                            a < hi and lo < b for lo, hi in spans[i]):
                        raise InputError(
                            f"{src.label}: variable '{name}' rows {a}-{b - 1} changed since "
                            f"the checkpoint {self.directory} read them; resuming would mix "
                            "two datasets: rerun without --resume")
            # a chunk read whose stamp was not recorded could have changed unseen
            for name, entries in now.items():
                if entries and name not in saved[i]:
                    raise self.corrupt(path, f"no stamps of variable '{name}' of {src.label}")
                if name not in _row_variables(src):
                    continue  # shapes every read: recorded at all, a changed chunk is told above
                recorded = {(a, b) for a, b, _ in saved[i][name]}
                unrecorded = [(a, b) for a, b, _ in entries if (a, b) not in recorded and any(
                    a < hi and lo < b for lo, hi in spans[i])]
                if unrecorded:
                    a, b = unrecorded[0]
                    raise self.corrupt(path, f"no stamp of variable '{name}' rows {a}-{b - 1} "
                                             f"of {src.label}")


#: the commands whose runs keep each kind of checkpoint, as the user typed them (a kind is
#: an internal name: 'fit-scan', 'em')
_KIND_COMMANDS = {"fit": "streamlsq fit METHOD (--engine sequential)",
                  "fit-scan": "streamlsq fit METHOD --engine scan", "glm": "streamlsq fit glm",
                  "em": "streamlsq fit em", "metalearn": "streamlsq metalearn"}


def _command_of(kind: str, fingerprint=None) -> str:
    """The command a run of the checkpoint kind ``kind`` is started by, with the method its
    ``fingerprint`` records in place of METHOD (a fit's)."""
    if kind in _KIND_COMMANDS:
        method = fingerprint.get("method") if isinstance(fingerprint, dict) else None
        command = _KIND_COMMANDS[kind]
        return command.replace("METHOD", method) if isinstance(method, str) else command
    if kind.startswith("study-"):
        return f"streamlsq study {kind[len('study-'):]}"
    return kind


#: what the options that shape an entry of a fit's fingerprint are, where the entry keeps
#: only a digest of them (the refusal of a resume of a checkpoint that kept no
#: :attr:`CheckpointFolder.options`, an earlier version's, names them)
_FINGERPRINT_OPTIONS = {
    "plan": "the blocks: --block-size, --first-block-size, --epochs, --shuffle, --seed",
    "segments": "the rows per task: --segment-size",
    "record_every": "--record-every",
    "dtype": "--dtype",
    "parameters": "the method's parameters",
}


def _differences(old: dict, new: dict, old_options=None, new_options=None) -> str:
    """The entries in which two fingerprints differ, each with the options within it that
    differ when it holds them (``options (formula)``, ``inputs (formula)``: an input's
    selection, kept as JSON text). An entry whose options both runs kept
    (:attr:`CheckpointFolder.options`) is named by the options that changed, in the command
    line's spelling, with both values (``--block-size 500 then, 250 now``); one whose
    options did not change differs because another entry's did (the segments are cut from
    the blocks), and is named only when no option is."""
    out, consequences = [], []
    for key in sorted(set(old) | set(new), key=str):
        before, now = old.get(key), new.get(key)
        if before == now:
            continue
        changed = _option_changes(old_options, new_options, key)
        if changed is not None:
            out.extend(c for c in changed if c not in out)
            if not changed:
                consequences.append(key)
            continue
        out.append(_entry_difference(key, before, now))
    if not out:
        out = [_entry_difference(key, old.get(key), new.get(key)) for key in consequences]
    return ", ".join(out)


def _entry_difference(key, before, now) -> str:
    inner = _inner_differences(before, now) or _paths_differences(before, now) or \
        _size_differences(before, now)
    if not inner and key in _FINGERPRINT_OPTIONS:
        inner = [_FINGERPRINT_OPTIONS[key]]
    if not inner and all(isinstance(v, str) and _WORD.fullmatch(v) for v in (before, now)):
        inner = [f"{before} then, {now} now"]  # the method: 'kf4lls then, rls now'
    return f"{key} ({', '.join(inner)})" if inner else str(key)


#: a fingerprint entry shown as it is (a method's name), not a digest of hex digits
_WORD = re.compile(r"(?![0-9a-f]{16}$)[A-Za-z][\w.-]{0,39}")


def _paths_differences(before, now) -> list[str]:
    """The inputs whose stores differ between two entries of inputs (``data
    /d/a.zarr then, /d/b.zarr now``); none when the entries name no stores or the same.
    An input's entry is a list, its role then its path (a fit's inputs, a list of them)."""
    def stores(value) -> dict:
        entries = value if isinstance(value, list) and value and all(
            isinstance(v, list) for v in value) else [value]
        found = {}
        for e in entries:
            if not (isinstance(e, list) and len(e) > 1 and isinstance(e[0], str)
                    and isinstance(e[1], str)):
                continue
            if re.fullmatch(r"\w+", e[0]):  # a fit's: its role, its path
                found[e[0] + " "] = e[1]
            else:  # a store of tasks: its path, its group
                found[""] = e[0] + (f"#{e[1]}" if e[1] else "")
        return found

    old, new = stores(before), stores(now)
    if not old or not new:
        return []
    return [f"{role}{old.get(role)} then, {new.get(role)} now"
            for role in sorted(set(old) | set(new), key=str)
            if old.get(role) != new.get(role)]


def _size_differences(before, now) -> list[str]:
    """The inputs of the same path whose sizes differ between two entries of a fit's inputs
    (``data /d/t/*.csv: 1200 rows then, 1600 now``: a table's glob matching a new file, a
    store with rows appended); an input's entry is its role, path, group, then its rows,
    features and targets."""
    def inputs(value) -> list:
        return value if isinstance(value, list) and all(
            isinstance(e, list) and len(e) >= 6 and isinstance(e[0], str) for e in value) else []

    found = []
    for a, b in zip(inputs(before), inputs(now), strict=False):
        if a[:3] != b[:3]:
            continue
        sizes = [f"{x} {what} then, {y} now" for what, x, y in zip(
            ("rows", "features", "targets"), a[3:6], b[3:6], strict=True)
            if isinstance(x, int) and isinstance(y, int) and x != y]
        if sizes:
            found.append(f"{a[0]} {a[1]}{'#' + a[2] if a[2] else ''}: {', '.join(sizes)}")
    return found


def _option_changes(old_options, new_options, key) -> list[str] | None:
    """The options shaping the fingerprint entry ``key`` that differ between the two runs'
    options (``--epochs 1 then, 2 now``); None when either run did not keep them."""
    before = old_options.get(key) if isinstance(old_options, dict) else None
    now = new_options.get(key) if isinstance(new_options, dict) else None
    if not (isinstance(before, dict) and isinstance(now, dict)):
        return None
    return [f"{flag} {_shown(before.get(flag))} then, {_shown(now.get(flag))} now"
            for flag in sorted(set(before) | set(now), key=str)
            if before.get(flag) != now.get(flag)]


def _shown(value) -> str:
    """An option's value as the command line gives it (a switch: given or not)."""
    if value is None or value is False:
        return "not given"
    return "given" if value is True else str(value)


def _inner_differences(before, now) -> list[str]:
    """The keys in which two entries of a fingerprint differ, with both values, when both
    are mappings or their JSON text (a method's parameters: ``ridge 0.0 then, 1.0 now``),
    or lists of inputs whose selections, JSON text, are mappings (``missing 'raise' then,
    'drop' now``: a selection, or an entry of one, left out of the fingerprint is the
    default, so that only what differs is named); else none."""
    def mapping(value):
        if isinstance(value, str) and value.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        return value if isinstance(value, dict) else None

    before_map, now_map = mapping(before), mapping(now)
    if before_map is not None and now_map is not None:
        return [f"{k} {before_map.get(k)!r} then, {now_map.get(k)!r} now"
                for k in sorted(set(before_map) | set(now_map), key=str)
                if before_map.get(k) != now_map.get(k)]
    if isinstance(before, list) and isinstance(now, list) and len(before) == len(now):
        from streamlsq.io.sources import SELECTION_DEFAULTS  # on this refusal's path only

        changes: dict[str, str] = {}
        for a, b in zip(before, now, strict=True):
            if not (isinstance(a, list) and isinstance(b, list)):
                continue
            ma, mb = mapping(a[-1]) if a else None, mapping(b[-1]) if b else None
            if ma is not None or mb is not None:
                ma, mb = {**SELECTION_DEFAULTS, **(ma or {})}, {**SELECTION_DEFAULTS, **(mb or {})}
                for k in set(ma) | set(mb):
                    if ma.get(k) != mb.get(k):
                        changes.setdefault(str(k), f"{k} {ma.get(k)!r} then, {mb.get(k)!r} now")
        return [changes[k] for k in sorted(changes)]
    return []


def _is_stamps(entry) -> bool:
    """Whether ``entry`` has the shape of one input's stamps in ``inputs.json``:
    {variable: [[first row, end row, stamp], ...]}."""
    return isinstance(entry, dict) and all(
        isinstance(stamps, list) and all(
            isinstance(s, list) and len(s) == 3 and all(isinstance(v, int) for v in s[:2])
            and isinstance(s[2], str) for s in stamps)
        for stamps in entry.values())


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _without_tokens(value):
    """A fingerprint entry without its stores' version tokens ("token:..." strings)."""
    if isinstance(value, list | tuple):
        return [_without_tokens(v) for v in value
                if not (isinstance(v, str) and v.startswith("token:"))]
    return value


def _variables(src, default) -> tuple[str, ...]:
    """The arrays of ``src`` whose chunks committed work reads: a stream source's selected
    feature and target variables, else ``default``."""
    selected = (*getattr(src, "x_vars", ()), *getattr(src, "y_vars", ()))
    return tuple(selected) if selected else tuple(default)


def _row_variables(src) -> set[str]:
    return set(_variables(src, ("X", "y")))


def _has_array(src, name: str) -> bool:
    """Whether ``src`` has stamps of ``name``'s chunks: a store's array, or a table's
    column (its parts' stamps)."""
    if getattr(getattr(src, "rows", None), "from_table", False):
        return True
    try:
        src.array(name)
    except Exception:
        return False
    return True


class Checkpoint(CheckpointFolder):
    """Save and restore the progress of one sequential run in ``directory``.

    ``reads(K0, K1)`` (optional) gives the (input index, first row, end row) spans that
    segment K0..K1 reads, to refuse resuming over changed input chunks.
    """

    kind = "fit"

    def __init__(self, directory: str | os.PathLike, fingerprint: dict, resume: bool = False,
                 every: int = 1, inputs=(), reads=None):
        super().__init__(directory, fingerprint, resume, inputs)
        self.every = max(1, int(every))
        self.reads = reads

    def fingerprint_complete(self) -> bool:
        return "segments" in self.fingerprint

    def saved_segments(self) -> list[tuple[int, int]] | None:
        """The segments a resumable checkpoint was cut into (the default segment size
        depends on the workers' memory, which may differ on the resuming cluster)."""
        self.open()
        if not (self.resume and self.saved):
            return None
        saved = self.saved.get("segments")
        try:
            return [(int(a), int(b)) for a, b in saved] if saved else None
        except (TypeError, ValueError) as exc:
            raise self.corrupt("progress.json", exc) from None

    def bind(self, segments: list[tuple[int, int]]) -> None:
        """Fix the segment plan (part of the fingerprint); start afresh unless resuming."""
        self.segments = [[int(a), int(b)] for a, b in segments]
        digest = hashlib.sha256(json.dumps(self.segments).encode()).hexdigest()[:16]
        self.fingerprint["segments"] = digest
        self.n_segments = len(segments)
        self.open()
        if self.saved is not None:
            self._check_fingerprint(self.saved)

    def load(self):
        """(next segment, state, parts so far) from the folder, or None to start from scratch."""
        self.open()
        if not (self.resume and self.saved) or "next" not in self.saved:
            return None  # nothing committed (or steps alone: a fit's passes, recomputed)
        try:
            nxt = int(self.saved["next"])
            state_file = self.directory / self.saved["state"]
        except (KeyError, TypeError, ValueError) as exc:
            raise self.corrupt("progress.json", exc) from None
        if self.reads is not None:
            self.check_reads([r for a, b in self.segments[:nxt] for r in self.reads(a, b)])
        self.check_committed()  # the steps (the segments and the state are read here)
        state = self.read_arrays(state_file)
        parts = [self._load_part(i) for i in range(nxt)]
        return nxt, state, parts

    def _load_part(self, i: int) -> dict:
        z = self.read_arrays(self.directory / f"segment-{i:06d}.npz")
        try:
            return {"steps": z["steps"], "rows_seen": z["rows_seen"], "coefs": z.get("coefs"),
                    "diagnostics": {k[5:]: v for k, v in z.items() if k.startswith("diag_")}}
        except KeyError as exc:
            raise self.corrupt(f"segment-{i:06d}.npz", exc) from None

    def save(self, i: int, part: dict) -> None:
        """Commit segment ``i``: its recorded steps, then (every few) the state and progress."""
        arrays = {"steps": part["steps"], "rows_seen": part["rows_seen"]}
        if part["coefs"] is not None:
            arrays["coefs"] = part["coefs"]
        arrays.update({f"diag_{k}": v for k, v in part["diagnostics"].items()})
        _atomic_savez(self.directory / f"segment-{i:06d}.npz", **arrays)
        if (i + 1) % self.every and i + 1 != self.n_segments:
            return
        name = f"state-{i:06d}.npz"
        _atomic_savez(self.directory / name, **part["state"])
        self._commit({"fingerprint": self.fingerprint, "segments": self.segments,
                      "next": i + 1, "state": name})
        for old in self.directory.glob("state-*.npz"):
            if old.name != name:
                old.unlink(missing_ok=True)


class EntryCheckpoint(CheckpointFolder):
    """Committed pieces of work of a run, by name, in any order: a scan fit's piece
    summaries, a metalearn's steps, an EM run's last iteration, a study's batches.

    :meth:`save` writes the value (data only: :func:`encode_data`) as ``entry-NAME.npz``
    and then commits its name, with the input spans it read, in ``progress.json``.
    """

    def __init__(self, directory, fingerprint, resume=False, inputs=(), variables=("X", "y"),
                 kind: str = "run"):
        super().__init__(directory, fingerprint, resume, inputs, variables)
        self.kind = kind
        self.entries: dict[str, list] = {}

    def open(self) -> None:
        if self._opened:
            return
        super().open()
        if self.saved:
            entries = self.saved.get("entries", {})
            if not isinstance(entries, dict):
                self.close()
                raise self.corrupt("progress.json", ValueError("entries is not a mapping"))
            self.entries = dict(entries)
            try:
                self.check_reads([r for reads in self.entries.values() for r in reads])
            except BaseException:
                self.close()
                raise

    def committed_files(self) -> list[Path]:
        """The committed entries' files and the steps'."""
        entries = (self.saved or {}).get("entries", {})
        return [*(self.directory / f"entry-{name}.npz" for name in
                  (entries if isinstance(entries, dict) else {})),
                *super().committed_files()]

    def __contains__(self, name: str) -> bool:
        self.open()
        return name in self.entries

    def load(self, name: str):
        """The committed value of ``name`` (KeyError if none)."""
        self.open()
        if name not in self.entries:
            raise KeyError(name)
        path = self.directory / f"entry-{name}.npz"
        files = self.read_arrays(path)
        try:
            structure = json.loads(files.pop("structure").tobytes().decode())
            arrays = [files.pop(f"a{i}") for i in range(len(files))]
            return decode_data(structure, arrays)
        except (ValueError, KeyError) as exc:  # tampered with: say which file
            raise self.corrupt(path, exc) from None

    def save(self, name: str, value, reads=()) -> None:
        """Commit ``value`` (data: :func:`encode_data`) under ``name``; ``reads``: the
        (input index, first row, end row) spans of the inputs it was computed from."""
        self.open()
        arrays: list[np.ndarray] = []
        structure = json.dumps(encode_data(value, arrays)).encode()
        _atomic_savez(self.directory / f"entry-{name}.npz",
                      structure=np.frombuffer(structure, dtype=np.uint8),
                      **{f"a{i}": a for i, a in enumerate(arrays)})
        self.entries[name] = [[int(i), int(a), int(b)] for i, a, b in reads]
        self._commit({"fingerprint": self.fingerprint, "entries": self.entries})

    def discard(self, name: str) -> None:
        """Forget ``name`` (e.g. an EM iteration superseded by the next one)."""
        if self.entries.pop(name, None) is not None:
            self._commit({"fingerprint": self.fingerprint, "entries": self.entries})
            (self.directory / f"entry-{name}.npz").unlink(missing_ok=True)


# -- what a resumed run checks first (streamlsq.jobs.Run) ----------------------------------------


def finished_result(out, fingerprint: dict):
    """The published result of the run ``fingerprint`` at ``out`` (its ``run_fingerprint``
    attribute matches), with the in-memory attribute ``already_complete``; else None. A
    result of another run at ``out`` is left to ``prepare_output`` to refuse."""
    from streamlsq.io.outputs import written_by_streamlsq
    from streamlsq.io.results import open_result

    if out is None or not os.path.isdir(out) or not written_by_streamlsq(out):
        return None
    try:
        ds = open_result(out)
    except InputError:
        return None
    if ds.attrs.get("run_fingerprint") != fingerprint_digest(fingerprint):
        return None
    ds.attrs["already_complete"] = True
    return ds


def remove_finished(folder: CheckpointFolder) -> None:
    """After a resumed run found its result published, remove the checkpoint a kill between
    publication and clean-up left behind: only a streamlsq checkpoint of this very run
    (same fingerprint), never a folder or checkpoint of anything else."""
    if not folder.directory.is_dir():
        return
    folder.resume = True
    folder.check_arrays = False  # only removed: its files are not read
    try:
        CheckpointFolder.open(folder)
    except InputError:  # another run's checkpoint, or not a checkpoint: not ours to remove
        return
    saved = dict((folder.saved or {}).get("fingerprint") or {})
    saved.pop("segments", None)
    expected = dict(folder.fingerprint)
    expected.pop("segments", None)
    if saved == expected:
        folder.remove()
    else:
        folder.close()


def merge_spans(spans) -> list[tuple[int, int, int]]:
    """(input, first row, end row) spans sorted and merged where they touch."""
    out: list[list[int]] = []
    for i, a, b in sorted((int(i), int(a), int(b)) for i, a, b in spans):
        if out and out[-1][0] == i and a <= out[-1][2]:
            out[-1][2] = max(out[-1][2], b)
        else:
            out.append([i, a, b])
    return [tuple(s) for s in out]
