"""``streamlsq fit``: a recursive estimator over stream stores, one subcommand per method.

The subcommands ``fit NAME`` are derived from the registry of recursions
(:mod:`streamlsq.kernels.recursions.registry`): each gets the options every fit
shares (declared once: :mod:`streamlsq.options.fit`), ``--engine`` when the recursion
has the scan form, and one option per declared parameter (and per option of the
recursion's own job), one argument per store it reads; every value is checked by its
declaration before a cluster starts. They are built from the recursions' declarations
alone (``RECURSIONS.declaration(NAME)``): the help and the check of every option import no
kernel (nor Numba or SciPy); the recursion's module is imported when the fit runs.
``fit em`` (a multi-task store) is written out in its own module.
"""

from __future__ import annotations

import functools
import inspect

import click

from streamlsq.cli.common import (
    CONTEXT,
    LazyCommands,
    _check_formula,
    _client_while,
    _done_line,
    _friendly_errors,
)
from streamlsq.cli.options import click_options, values
from streamlsq.kernels.recursions.registry import RECURSIONS
from streamlsq.options import Options
from streamlsq.options.fit import JOB_OPTIONS, RECURSION_RULES, fit_options
from streamlsq.options.run import CHECKPOINT, CLUSTER, OUTPUT

__all__ = ["fit", "fit_command_options", "recursion_command"]


def _summary(out, name, engine, ds) -> str:
    resumed = ds.attrs.get("rows_resumed")
    read = ds.attrs.get("rows_continued") != ds.attrs["n_rows"]  # continued: rows appended
    return (f"wrote {out}: {name} ({engine}) over {ds.attrs['n_rows']} rows in "
            f"{ds.attrs['n_blocks']} blocks, {ds.sizes['step']} recorded steps"
            + (f", {ds.attrs['rows_per_second']:.3g} rows/s" if read else "")
            + (f" (resumed: {resumed} rows from the checkpoint, the rest read now)"
               if resumed else ""))


# -- commands derived from the registry -----------------------------------------------

def fit_command_options(name: str) -> Options:
    """The options of ``fit NAME`` besides ``--out``, declared once: those of a fit
    (:func:`streamlsq.options.fit.fit_options`: of one store, or of several, with the
    recursion's parameters and its own job's options; ``--engine`` only for a recursion with
    the scan form; ``--intercept`` shown for a recursion that fits one, with its default),
    then the checkpoint's, the output's and the cluster's."""
    declaration = RECURSIONS.declaration(name)
    declared = fit_options(declaration.params, several=len(declaration.inputs) > 1,
                           own=JOB_OPTIONS.get(name), rules=RECURSION_RULES.get(name, ()))
    if "scan" not in declaration.engines:
        declared = declared.without("engine")
    if "fit_intercept" in declared:
        fits = declaration.intercept_kind in ("column", "kernel")
        state = "on" if declaration.default_intercept else "off"
        declared = declared.replace(
            "fit_intercept", hidden=not fits,
            help=f"Fit an intercept, labelled 'intercept' (default {state} for this method).")
    return Options(declared, CHECKPOINT, OUTPUT.without("out"), CLUSTER)


def _command_help(declaration) -> str:
    """The help of ``fit NAME``: the recursion's own description and examples, or its
    summary and the first paragraph of its docstring."""
    description = declaration.description
    if not description:
        return _generic_help(declaration)
    text = inspect.cleandoc(description)
    examples = declaration.examples
    if examples:
        text += "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in examples)
    return text


def recursion_command(name: str, command_name: str | None = None) -> click.Command:
    """The ``fit NAME`` command of a registered recursion: one argument per store it reads
    (its declared ``inputs``), ``--out``, and the options of :func:`fit_command_options`,
    every value checked by its declaration before a cluster starts."""
    declaration = RECURSIONS.declaration(name)
    single = len(declaration.inputs) == 1
    declared = fit_command_options(name)
    engine_default = declared.param("engine").default if "engine" in declared else "sequential"

    def command(out, **given):
        stores = [given.pop(role) for role in declaration.inputs]
        options = values(declared, given)  # refused before a cluster starts
        _check_formula(options)
        cluster = {key: options.pop(key, None) for key in CLUSTER.names}
        # the fit path's and the recursion's imports (about a second) while the worker
        # processes start
        with _client_while(functools.partial(_import_fit_path, name), cluster["scheduler"],
                           cluster["n_workers"], cluster["memory_limit"], data=stores,
                           preload=_task_modules(declaration),
                           threads_keep_up=True) as client:  # as StreamFit declares
            from streamlsq.stream.fit import fit_stream

            ds = fit_stream(stores[0] if single else stores, name, out=out, client=client,
                            **options)
        done = _done_line(out, ds)
        if done:
            click.echo(done)
            return
        from streamlsq.stream.methods import job_class

        notes = job_class(name).notes(ds)
        engine = options.get("engine", engine_default)
        click.echo(", ".join([_summary(out, command_name or name, engine, ds), *notes]))

    command.__doc__ = _command_help(declaration)
    arguments = [click.argument(role, type=click.Path(), metavar=role.upper())
                 for role in declaration.inputs]
    out = click.option("--out", required=True, type=click.Path(),
                       help=OUTPUT.param("out").help)
    decorators = [*arguments, out, click_options(declared), _friendly_errors]
    for decorate in reversed(decorators):
        command = decorate(command)
    return click.command(command_name or name, context_settings=CONTEXT,
                         short_help=declaration.summary)(command)


def _import_fit_path(name: str) -> None:
    import streamlsq.stream.fit  # noqa: F401 - imported for what it imports

    RECURSIONS[name]  # the recursion's class: its kernels, Numba and SciPy


def _task_modules(declaration) -> tuple[str, ...]:
    """The modules a fit's tasks import on a worker (the recursion's kernels with SciPy
    and Numba, the engines'), for its worker processes to import as they start; none for a
    recursion defined in a script's ``__main__`` (its tasks carry it by value)."""
    own = () if declaration.module == "__main__" else (declaration.module,)
    return (*own, "streamlsq.stream.engines")


def _generic_help(declaration) -> str:
    """The summary and the first paragraph of the class docstring (of a recursion without
    a description of its own: a plugin's, whose class is imported already)."""
    doc = (RECURSIONS[declaration.name].__doc__ or "").strip().split("\n\n")[0]
    inputs, summary = declaration.inputs, declaration.summary
    stores = ("the stream store DATA" if len(inputs) == 1 else
              f"the stream stores {' '.join(role.upper() for role in inputs)}")
    return f"{summary[:1].upper()}{summary[1:]} on {stores}.\n\n    {doc}"


#: the subcommands of ``fit`` written in modules of their own: name -> (module, attribute),
#: imported when asked for
FIT_COMMANDS = {"em": ("streamlsq.cli.fit_em", "em"), "glm": ("streamlsq.cli.fit_glm", "glm")}
#: other names of recursions' commands (``fit interleaved`` is ``fit interleaved-kf4lls``)
ALIASES = {"interleaved": "interleaved-kf4lls"}


class _RecursionGroup(click.Group):
    """``fit``: a subcommand per registered recursion, built when it is asked for, and those
    of :data:`FIT_COMMANDS`, imported when asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(FIT_COMMANDS, self.commands)

    def list_commands(self, ctx):
        return [*RECURSIONS, *sorted(super().list_commands(ctx))]

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is None and ALIASES.get(name, name) in RECURSIONS:
            command = recursion_command(ALIASES.get(name, name), name)
        return command


@click.group(cls=_RecursionGroup, context_settings=CONTEXT)
def fit():
    """Fit a recursive estimator to stream stores, block after block, in order.

    Each method is a subcommand with its own options: streamlsq fit METHOD --help.
    The methods are the registered recursions (engines sequential and, for the
    least-squares ones, scan), among them interleaved KF4LLS over two stores
    (fit interleaved-kf4lls, or fit interleaved), and EM over a multi-task store.

    \b
    Examples:
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq fit rls data.zarr --out rls.zarr --forgetting 0.999 --block-size 1 --ridge 1e-3
      streamlsq fit lms data.zarr --out lms.zarr --schedule inverse --rate 0.05 --tau 1e4
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --test p.zarr#c --out fit.zarr
      streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 1000 --rate exact
      streamlsq fit irma irma.zarr --out irma-fit.zarr --order 10 --domain 0 3
      streamlsq fit irma-rls irma.zarr --out rls-fit.zarr --basis monomial --forgetting 0.9
    """
