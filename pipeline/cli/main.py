"""The ``streamlsq`` command line (``streamlsq --help``).

Every command exits 0 on success and 2 on bad input, printing one line that
names the store, variable and chunk or row at fault.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys

import click

from streamlsq.cli.common import (
    CONTEXT,
    LazyCommands,
    _debug,
    import_command,
    silence_standard_output,
    standard_output_failed,
    standard_output_failure,
)

__all__ = [
    "console",
    "main",
]


#: command -> (module, attribute, the short help ``streamlsq --help`` lists). A command's
#: module is imported when the command runs (or its own --help is asked for), so that
#: ``streamlsq --help`` and each command start without importing the others
#: (tests/test_cli_startup.py checks that each short help is the command's own).
COMMANDS = {
    "simulate": ("streamlsq.cli.simulate", "simulate",
                 "Write a synthetic dataset for a study, chunk by chunk in parallel."),
    "fit": ("streamlsq.cli.fit", "fit",
            "Fit a recursive estimator to stream stores, block after block, in order."),
    "info": ("streamlsq.cli.info", "info",
             "Describe STORE (stream, multi-task, converted table or result store) and "
             "validate it."),
    "metalearn": ("streamlsq.cli.metalearn", "metalearn", "Meta-learn a mixture of K linear "
                  "regressions (Algorithm 1) from the task store DATA."),
    "predict": ("streamlsq.cli.predict", "predict",
                "Estimate every task of TASKS under the meta-learned MODEL, or apply the "
                "stream fit MODEL to the rows of the stream store TASKS."),
    "convert": ("streamlsq.cli.convert", "convert", "Write the table TABLE (a Parquet file or "
                "folder of files, CSV files by a glob) as the stream store OUT: one variable per "
                "column along row, numbers as float64 (NaN where missing), strings as strings "
                "with their levels (attribute categories)."),
    "example": ("streamlsq.cli.example", "example", "Convert a real multilevel dataset (needs "
                "the 'examples' extra) to a multi-task store."),
    "study": ("streamlsq.cli.study", "study",
              "Reproduce one paper's study: tidy CSV tables, PNG figures and summary.md in DIR."),
    "demo": ("streamlsq.cli.demo", "demo", "The whole pipeline: stream fits, meta-learning, "
             "prediction, with a summary and figures."),
}


def load_command(name: str) -> click.Command:
    """The command ``name`` of the ``streamlsq`` group, imported now."""
    module, attr, _ = COMMANDS[name]
    return import_command(module, attr)


class _OneLineErrors(click.Group):
    """The ``streamlsq`` group: a mistyped command line (unknown option, invalid value) is
    one line on stderr with exit code 2, like every other failure, instead of click's
    usage block. Its commands are imported when used (:data:`COMMANDS`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(COMMANDS)

    def format_commands(self, ctx, formatter):
        """The command list of ``--help`` from :data:`COMMANDS`, importing nothing."""
        limit = formatter.width - 6 - max(len(n) for n in self.commands)
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS and not self.commands.loaded(name):
                help_text = click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)
            else:
                help_text = self.commands[name].get_short_help_str(limit)
            rows.append((name, help_text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        atexit.register(_quiet_shutdown)
        stdout = sys.stdout
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except SystemExit as exc:
            if exc.code == 1 and sys.stdout is not stdout:
                # click's own end of a write to a pipe its reader closed (EPIPE: streamlsq
                # --help | head -c0), which wrapped sys.stdout to ignore it: a reader that
                # stops is not a failure
                silence_standard_output()
                sys.exit(0)
            if exc.code and args is None:  # the command itself, not a caller in Python
                _quiet_exit()
            raise
        except click.UsageError as exc:
            where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
            click.echo(f"streamlsq: error: {exc.format_message().rstrip('.')}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"streamlsq: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("streamlsq: error: aborted", err=True)
            sys.exit(1)
        except OSError as exc:  # --help or --version to a full device (> /dev/full)
            if not standard_output_failed(exc) or _debugging():
                raise
            silence_standard_output()
            click.echo(f"streamlsq: error: {standard_output_failure(exc)}", err=True)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


def _quiet_shutdown() -> None:
    """At the command's exit, asyncio's notices of sessions a library left open are not
    printed after its one line: s3fs keeps an aiohttp session per filesystem and cannot
    close it once its event loop has stopped, so the interpreter's shutdown printed
    "Unclosed client session" after every command that wrote to an object store (with
    ``--debug``, they are shown)."""
    if not _debugging():
        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)


def _debugging() -> bool:
    """``--debug`` or STREAMLSQ_DEBUG=1, once the command's context is gone (at its exit)."""
    return _debug() or "--debug" in sys.argv[1:]


def _ignore(*_) -> None:
    return None


def _quiet_exit() -> None:
    """After the one line of a failure, nothing more on stderr as the interpreter ends: the
    requests a failed run left pending (an object store that stopped answering) are
    collected then, and would print their tracebacks ("Exception ignored in ...", "Unclosed
    client session"). ``--debug`` keeps them."""
    if _debugging():
        return
    sys.unraisablehook = _ignore
    logging.disable(logging.CRITICAL)


@click.group(cls=_OneLineErrors, context_settings=CONTEXT)
@click.version_option(package_name="streamlsq")
@click.option("--debug", is_flag=True,
              help="Show the traceback of a failure (and warnings) instead of one line.")
def main(debug):
    """Incremental least squares and meta-learning of linear regressions over chunked
    Zarr stores, on a Dask cluster.

    \b
    A first session:
      streamlsq simulate stream --out data.zarr --rows 200000 --features 20
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq info fit.zarr

    Every failure is one line on stderr naming what failed and where, with exit code 2
    (bad input, or a run that could not be carried out); see docs/faults.md.
    """


def console() -> None:
    """The ``streamlsq`` console script (and ``python -m streamlsq.cli``): :func:`main`,
    and once a command has succeeded, the process ends without the interpreter's teardown.

    The teardown frees, object by object, every module a fit imported (distributed,
    pandas, xarray, SciPy): a full garbage collection that cost the command 0.3–0.5 s
    after its last line was printed (``docs/performance.md#exit``), with nothing left to
    do. The exit handlers still run (logging's flush, ``weakref.finalize`` and
    ``tempfile`` clean-ups, distributed's own) and the standard streams are flushed before
    the process ends; every file the command wrote was closed before it returned. A
    failure ends as before, through the interpreter's own exit. ``main()`` called from
    Python (a test, a notebook) returns or raises ``SystemExit`` as any click group does.
    """
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # closed by the caller (>&-): Python gave it no stream
            continue
        try:
            stream.flush()
        except BrokenPipeError:  # the reader stopped (streamlsq ... | head): not a failure
            continue
        except OSError as exc:  # a full device (> /dev/full): one line, as any failure
            if stream is sys.stdout:
                silence_standard_output()
                with contextlib.suppress(OSError, ValueError):
                    print(f"streamlsq: error: {standard_output_failure(exc)}",
                          file=sys.stderr, flush=True)
            os._exit(2)
        except ValueError:  # a stream closed under the command: nothing more can be said
            os._exit(1)
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    console()
