"""What the ``streamlsq`` command modules share: error handling, options (the Dask cluster's
among them) and groups whose commands are imported when used."""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Mapping, MutableMapping

import click

from streamlsq.cli.options import click_options, values
from streamlsq.errors import (
    InputError,
    RunError,
    Terminated,
    WorkersPausedError,
    check_interrupted,
    forget_interrupt,
    forget_published,
    interrupt,
    interrupt_noted,
    published_outputs,
)
from streamlsq.options import Options
from streamlsq.options.common import CODEC
from streamlsq.options.mlr import CHUNK_TASKS
from streamlsq.options.run import CHECKPOINT, CLUSTER

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def import_command(module: str, attr: str) -> click.Command:
    """The command object ``attr`` of the module ``module``, imported now."""
    return getattr(importlib.import_module(module), attr)


class LazyCommands(MutableMapping):
    """The commands of a click group: those of ``declared`` (name -> (module, attribute, ...))
    are listed at once and imported when first looked up, so that a group's ``--help`` and
    each of its commands start without importing the others; commands added to the group
    (``group.command(...)``) are held as they are."""

    def __init__(self, declared: Mapping[str, tuple],
                 added: Mapping[str, click.Command] | None = None):
        self._declared = declared
        self._loaded: dict[str, click.Command] = dict(added or {})

    def __getitem__(self, name):
        if name not in self._loaded and name in self._declared:
            self._loaded[name] = import_command(*self._declared[name][:2])
        return self._loaded[name]

    def __setitem__(self, name, command):
        self._loaded[name] = command

    def __delitem__(self, name):
        del self._loaded[name]

    def __iter__(self):
        return iter(dict.fromkeys([*self._declared, *self._loaded]))

    def __len__(self):
        return len(set(self._declared) | set(self._loaded))

    def loaded(self, name) -> bool:
        """Whether the command ``name`` is imported (listing it then needs no import)."""
        return name in self._loaded


def _debug() -> bool:
    """``streamlsq --debug`` (or STREAMLSQ_DEBUG=1): show tracebacks and warnings."""
    if os.environ.get("STREAMLSQ_DEBUG", "") not in ("", "0"):
        return True
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and (ctx.find_root().params or {}).get("debug"))


@contextlib.contextmanager
def _quiet():
    """No warnings or log lines from this process or the workers it starts: a failure is
    one line on stderr. (The embedded cluster's workers are new interpreters that read
    PYTHONWARNINGS when they start.)"""
    disabled = logging.root.manager.disable
    env = os.environ.get("PYTHONWARNINGS")
    try:
        logging.disable(logging.CRITICAL)  # distributed's loggers set their own levels
        os.environ["PYTHONWARNINGS"] = "ignore"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(disabled)
        if env is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = env


def standard_output_failed(exc: BaseException) -> bool:
    """Whether ``exc`` was raised writing to the standard output: every command writes its
    output with ``click.echo``, as click writes ``--help`` and ``--version``, and its ``err``
    tells the standard error from it."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_name == "echo" and frame.f_globals.get("__name__") == "click.utils":
            return not frame.f_locals.get("err")
    return False


def silence_standard_output() -> None:
    """What is left to write to the standard output goes nowhere (its reader stopped, or the
    device is full): the interpreter's final flush then neither fails again nor prints
    "Exception ignored" (the Python documentation's advice on SIGPIPE)."""
    stream = sys.__stdout__
    if stream is None:  # closed by the caller (>&-)
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


def report_line(text: str = "") -> None:
    """Print one line of a report written while a command runs (the demo's steps): a reader
    that stopped (``| head -1``) never stops the run; the rest of the report then goes
    nowhere, and the command completes and publishes its result."""
    try:
        click.echo(text)
    except BrokenPipeError:
        silence_standard_output()


def standard_output_failure(exc: OSError, out=None) -> str:
    """The one line of a failed write to the standard output (``> /dev/full``), saying what
    the command had written by then (``out``, the output it was given, else the first it
    published): its result is complete, only its report is lost."""
    reason = exc.strerror or " ".join(str(exc).split())[:200]
    published = published_outputs()
    written = ""
    if published:
        written = f"; {out if out is not None else published[0]} was written"
    return f"writing to the standard output failed ({reason}){written}"


def _fail(message: str, code: int, debug: bool):
    if debug:
        traceback.print_exc()
    try:
        click.echo(f"streamlsq: error: {message}", err=True)
    except OSError:  # the standard error is gone (its reader stopped, a full device):
        pass  # the exit code still tells the failure, never the success of a stopped reader
    sys.exit(code)


@contextlib.contextmanager
def _noting_interrupts():
    """SIGINT and SIGTERM handled by :func:`~streamlsq.errors.interrupt` for the block (on
    the main thread, where Python runs signal handlers): an interrupt is noted as well as
    raised, and SIGTERM (whose default ends the process at once) undoes what the run made
    as Ctrl-C does."""
    forget_interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    hook, sys.unraisablehook = sys.unraisablehook, _dropping_noted_interrupts(sys.unraisablehook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _dropping_noted_interrupts(previous):
    """A ``sys.unraisablehook`` that drops the interrupt :func:`~streamlsq.errors.interrupt`
    raised where Python cannot propagate it (a gc callback, a ``__del__``: it would print
    ``Exception ignored in ...`` and a traceback before the command's one line); noted, it is
    raised again by :func:`~streamlsq.errors.check_interrupted`. Everything else goes to
    ``previous``."""
    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and interrupt_noted():
            return
        previous(unraisable)
    return hook


def _check_not_in_memory(given: Mapping) -> None:
    """Refuse a ``memory://`` output on the command line: fsspec's memory filesystem lives in
    the process, so what the command wrote there is gone when it ends (exit 0, nothing
    left); from Python it is a store the session can read."""
    for name, option in (("out", "--out"), ("plot", "--plot")):
        value = given.get(name)
        if isinstance(value, str) and value.partition("://")[0].strip().lower() == "memory" \
                and "://" in value:
            if name == "plot":  # a PNG file, written on the local filesystem only
                raise InputError(f"{option} {value}: memory:// lives in the process and is "
                                 "gone when the command ends: name a PNG file path")
            raise InputError(f"{option} {value}: a memory:// store lives in the process that "
                             "writes it and is gone when the command ends: name a folder or "
                             "an object store URL (memory:// is for Python: "
                             "streamlsq.fit_stream(..., out='memory://...'))")


def _friendly_errors(fn):
    """Every failure is one line on stderr (a traceback only with ``streamlsq --debug``).

    Exit code 2: bad input (InputError) and runs that could not be carried out (RunError:
    output, cluster and checkpoint failures), I/O errors (named by file) and failures of
    the cluster (lost scheduler, KilledWorker); 1: every worker paused at its memory
    limit (WorkersPausedError) and unexpected errors (named by type: a bug to report)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = _debug()
        forget_published()
        try:
            _check_not_in_memory(kwargs)
            with contextlib.nullcontext() if debug else _quiet(), _noting_interrupts():
                done = fn(*args, **kwargs)
            check_interrupted()  # pressed, and its exception swallowed after publication
            return done
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except (InputError, RunError) as exc:
            _fail(str(exc), 2, debug)
        except WorkersPausedError as exc:
            _fail(str(exc), 1, debug)
        except Terminated:
            _fail("terminated", 143, debug)
        except KeyboardInterrupt:
            _fail("interrupted", 130, debug)
        except BrokenPipeError as exc:
            # the reader of the output went away (streamlsq info R | head): not a failure;
            # the rest of the output goes nowhere, and the interpreter does not complain
            silence_standard_output()
            if standard_output_failed(exc):
                sys.exit(0)
            # elsewhere (the standard error's reader, a pipe the command itself wrote to):
            # the command did not finish, whatever its message can still reach
            _fail(f"a pipe closed before the command ended ({exc.strerror})", 2, debug)
        except Exception as exc:
            from streamlsq.runtime.client import cluster_failure

            if isinstance(exc, OSError) and standard_output_failed(exc):
                silence_standard_output()
                _fail(standard_output_failure(exc, kwargs.get("out")), 2, debug)

            failure = cluster_failure(exc)
            if failure is not None:
                _fail(str(failure), 2, debug)
            if isinstance(exc, OSError):
                text = exc.strerror or " ".join(str(exc).split())[:300]
                _fail(f"{exc.filename}: {text}" if exc.filename else
                      f"input/output error ({type(exc).__name__}: {text})", 2, debug)
            text = " ".join(str(exc).split())[:300]
            _fail(f"unexpected error ({type(exc).__name__}: {text}); rerun with "
                  "'streamlsq --debug ...' for the traceback and report it", 1, debug)
        finally:  # the interrupt was the command's: a Python call after it in the same
            forget_interrupt()  # process (a notebook's, a test's) is not interrupted by it

    return wrapper


#: --scheduler, --workers and --memory-limit: the Dask cluster a command runs on
#: (declared in :data:`streamlsq.options.run.CLUSTER`; :func:`_client` converts and checks them)
_scheduler_options = click_options(CLUSTER)

#: --chunk-tasks, for the commands that map a kernel over the chunks of work of a task store
_chunk_tasks_option = click_options([CHUNK_TASKS])

#: --codec for every command that writes a data store
_codec_option = click_options([CODEC])

#: --checkpoint DIR and --resume, for every long command
_checkpoint_options = click_options(CHECKPOINT)


def _command_values(options: Options, given: dict) -> tuple[dict, dict]:
    """A command's values from what click passed (``given``): those of ``options`` converted
    and checked together (:func:`streamlsq.cli.options.values`: one line naming the first
    bad option and value, exit code 2), and the cluster's (:data:`CLUSTER`, checked too) —
    before any input is opened or any cluster started."""
    cluster = values(CLUSTER, {name: given.get(name) for name in CLUSTER.names})
    chosen = values(options, {name: value for name, value in given.items()
                              if name in options})
    return chosen, {name: cluster.get(name) for name in CLUSTER.names}


def _check_formula(options: Mapping) -> None:
    """The option ``formula``, when given, checked as data (every factor, every term reading a
    column: :func:`~streamlsq.io.formulas.check_formula`) before any cluster starts: the check
    reads the formula alone."""
    if options.get("formula") is not None:
        from streamlsq.io.formulas import check_formula

        check_formula(options["formula"])


def _client(scheduler, n_workers, memory_limit, data=None, preload=(), threads_keep_up=False):
    """The command's Dask client. ``data``: the store(s) the command reads, or the bytes
    it will write; an embedded cluster for small data runs its workers as threads of
    this process (``streamlsq.runtime.client.embedded_workers``). ``preload``: modules its
    worker processes import as they start, ``threads_keep_up`` (``dask_client``)."""
    from streamlsq.runtime.client import dask_client

    cluster = values(CLUSTER, {"scheduler": scheduler, "n_workers": n_workers,
                               "memory_limit": memory_limit})  # as click passed them: text
    n_workers = cluster.get("n_workers")
    if memory_limit is not None:  # checked even when a running cluster makes it moot
        from streamlsq.runtime.client import check_memory_limit

        check_memory_limit(memory_limit)
    data_bytes = data if isinstance(data, int) or data is None else _stores_bytes(data)
    return dask_client(None, scheduler, n_workers=n_workers, memory_limit=memory_limit,
                       data_bytes=data_bytes, preload=preload, threads_keep_up=threads_keep_up)


@contextlib.contextmanager
def _client_while(meanwhile, scheduler, n_workers, memory_limit, data=None, preload=(),
                  threads_keep_up=False):
    """:func:`_client`, started in a background thread while ``meanwhile()`` runs here: the
    heavy imports of a command overlap the start of its worker processes, or the
    connection to a scheduler. An embedded cluster of threads (small inputs) starts after
    ``meanwhile()``: it is quick to start, and the one-BLAS-thread limit of its workers
    applies only to the libraries loaded by then."""
    manager = _client(scheduler, n_workers, memory_limit, data, preload,
                      threads_keep_up)  # options checked
    n_workers = values(CLUSTER, {"n_workers": n_workers}).get("n_workers")
    from streamlsq.runtime.client import embedded_workers

    remote = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if not remote and embedded_workers(
            data if isinstance(data, int) or data is None else _stores_bytes(data),
            n_workers=n_workers, memory_limit=memory_limit,
            threads_keep_up=threads_keep_up) == "threads":
        meanwhile()
        with manager as client:
            yield client
        return
    from concurrent.futures import ThreadPoolExecutor

    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(1, thread_name_prefix="streamlsq-cluster-start") as pool:
            entering = pool.submit(manager.__enter__)
            try:
                meanwhile()
            finally:
                client = entering.result()  # the cluster is up (or its error is raised)
                stack.push(manager)
        yield client


def _stores_bytes(paths) -> int | None:
    """Uncompressed bytes of the arrays of the local Zarr store(s) ``paths`` (``PATH#GROUP``
    names a group), from their metadata alone; None when any cannot be told cheaply."""
    import json
    from pathlib import Path

    total = 0
    for path in [paths] if isinstance(paths, str | os.PathLike) else paths:
        if path is None:
            continue
        root = Path(str(path).split("#", 1)[0])
        if not root.is_dir():
            return None
        try:
            metas = [m for depth in range(1, 4)
                     for m in root.glob("/".join(["*"] * depth + ["zarr.json"]))]
            for meta in metas:
                info = json.loads(meta.read_text())
                if info.get("node_type") != "array":
                    continue
                n = 1
                for size in info.get("shape", []):
                    n *= int(size)
                dtype = str(info.get("data_type", "float64"))
                digits = "".join(c for c in dtype if c.isdigit())
                total += n * (int(digits) // 8 if digits else 8)
        except (OSError, ValueError, TypeError, AttributeError):
            return None
    return total


def _done_line(out, ds) -> str | None:
    """The line of a resumed run whose result was already published, else None."""
    if ds.attrs.get("already_complete"):
        return f"{out}: already complete (the run being resumed had finished); nothing to do"
    return None
