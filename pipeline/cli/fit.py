"""``streamlsq fit``: a recursive estimator over stream stores, one subcommand per method.

The subcommands ``fit NAME`` are derived from the registry of recursions
(:mod:`streamlsq.kernels.recursions.registry`): each gets the options every fit
shares, ``--engine`` when the recursion has the scan form, and one option per
declared parameter (and per option of the recursion's own job), one argument per store
it reads. They are built from the recursions' declarations alone
(``RECURSIONS.declaration(NAME)``): the help and the check of every option import no
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
    _checkpoint_options,
    _client_while,
    _done_line,
    _friendly_errors,
    _scheduler_options,
)
from streamlsq.errors import InputError
from streamlsq.kernels.recursions.contract import Param
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = ["fit", "recursion_command"]


def _fit_options(*, engine: bool = True, first_block: bool = True):
    """The options every fit command shares, in --help order."""
    opts = [click.option("--out", required=True, type=click.Path(),
                         help="Result store to create.")]
    if engine:
        opts.append(click.option(
            "--engine", type=click.Choice(["sequential", "scan"]), default="sequential",
            show_default=True, help="In-order fold, or parallel sums + prefix scan."))
    opts.append(click.option(
        "--block-size", type=int, default=None,
        help="Rows per step (default: the store's block_size attribute or chunk size)."))
    if first_block:
        opts.append(click.option("--first-block-size", type=int, default=None,
                                 help="Rows of the first block (default: --block-size)."))
    opts += [
        click.option("--record-every", type=int, default=None,
                     help="Record coefficients every N steps (default: ~1000 steps in all)."),
        click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64",
                     show_default=True, help="Precision of the computation."),
        _checkpoint_options,
        click.option("--segment-size", type=float, default=None, metavar="MB",
                     help="MB of X per Dask task (sequential default 256, scan default 96, at "
                     "most a sixteenth of the smallest worker memory limit)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing result store."),
    ]

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def _segment_bytes(segment_size):
    if segment_size is None:
        return None
    if not (segment_size > 0 and segment_size * 2**20 < 2**62):  # also refuses nan and inf
        raise InputError(f"--segment-size must be a positive number of MB, got {segment_size}")
    return max(1, int(segment_size * 2**20))


def _summary(out, name, engine, ds) -> str:
    return (f"wrote {out}: {name} ({engine}) over {ds.attrs['n_rows']} rows in "
            f"{ds.attrs['n_blocks']} blocks, {ds.sizes['step']} recorded steps, "
            f"{ds.attrs['rows_per_second']:.3g} rows/s")


# -- commands derived from the registry -----------------------------------------------

def _option_name(p: Param) -> str:
    return "--" + p.name.replace("_", "-")


def _param_option(p: Param):
    """The click option of one declared parameter."""
    name = _option_name(p)
    if p.type is bool:
        return click.option(name, p.name, is_flag=True, default=p.default, help=p.help)
    kwargs = {"help": p.help, "metavar": p.metavar}
    if p.choices is not None and p.type not in (int, float):
        kwargs["type"] = click.Choice(list(p.choices))
    elif p.choices is not None:
        kwargs["type"] = str  # a choice or a number: the Param converts the text
    else:
        kwargs["type"] = p.type
    if p.multiple:
        return click.option(name, p.name, nargs=p.nargs, multiple=True, **kwargs)
    if p.default is not None:  # not given: the recursion's default applies (or a store's)
        kwargs["help"] = f"{p.help}  [default: {p.default}]"
    return click.option(name, p.name, default=None, nargs=p.nargs, **kwargs)


def _param_value(p: Param, value):
    """The value of one option as the recursion takes it (``None``: not given), checked by
    its declaration (refused before a cluster starts or a kernel is imported)."""
    if value is None:
        return None
    try:
        value = p.from_command_line(value)
        if value is not None:  # (an option cannot be None: its refusal does not offer it)
            p.replace(optional=False).check(value)
    except ValueError as exc:
        raise InputError(f"{_option_name(p)}: {exc}") from None
    return value


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
    (its declared ``inputs``), the options every fit shares, one option per declared
    parameter and per option of its job (interleaved KF4LLS: ``--test``,
    ``--estimate-alpha``)."""
    declaration = RECURSIONS.declaration(name)
    single = len(declaration.inputs) == 1
    # the job's options come last and take the place of a parameter of the same name
    declared = {p.name: p for p in (*declaration.params, *_job_options(name))}

    def command(out, segment_size, scheduler, n_workers, memory_limit, engine="sequential",
                intercept=None, **options):
        stores = [options.pop(role) for role in declaration.inputs]
        params = {key: value for key in declared
                  if (value := _param_value(declared[key], options.pop(key))) is not None}
        segment_bytes = _segment_bytes(segment_size)  # refused before a cluster starts
        # the fit path's and the recursion's imports (about a second) while the worker
        # processes start
        with _client_while(functools.partial(_import_fit_path, name), scheduler, n_workers,
                           memory_limit, data=stores,
                           preload=_task_modules(declaration)) as client:
            from streamlsq.stream.fit import fit_stream

            ds = fit_stream(stores[0] if single else stores, name, out=out, engine=engine,
                            client=client, segment_bytes=segment_bytes,
                            fit_intercept=intercept, **options, **params)
        done = _done_line(out, ds)
        if done:
            click.echo(done)
            return
        from streamlsq.stream.methods import job_class

        notes = job_class(name).notes(ds)
        click.echo(", ".join([_summary(out, command_name or name, engine, ds), *notes]))

    command.__doc__ = _command_help(declaration)
    arguments = [click.argument(role, type=click.Path(), metavar=role.upper())
                 for role in declaration.inputs]
    per_store = [] if not single else [
        click.option("--epochs", type=int, default=1, show_default=True,
                     help="Passes over the store (the state carries over from one to the "
                          "next)."),
        click.option("--shuffle", is_flag=True,
                     help="Visit chunks and the rows within each chunk in a seeded random "
                          "order, new in every epoch."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of --shuffle."),
        click.option("--group", default=None, help="Group of the store holding X and y."),
        *_layout_options(intercept=declaration.intercept_kind in ("column", "kernel"),
                         default_intercept=declaration.default_intercept),
        click.option("--continue-from", "continue_from", default=None, metavar="RESULT",
                     help="Continue the fit RESULT (of this method and options) on the rows "
                          "appended to DATA since: start from its final state, read only the "
                          "new rows; refused if the earlier rows changed."),
        *_inference_options(alpha="alpha" not in declared),
    ]
    decorators = [*arguments,
                  _fit_options(engine="scan" in declaration.engines, first_block=single),
                  *[_param_option(p) for p in declared.values()], *per_store,
                  _scheduler_options, _friendly_errors]
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


def _job_options(name: str) -> tuple[Param, ...]:
    """The options of a recursion's own job, as declared (the job is not imported)."""
    from streamlsq.stream.methods import JOB_OPTIONS

    return JOB_OPTIONS.get(name, ())


def _inference_options(alpha: bool = True):
    """--weights, --missing, --alpha, --cov-type and --groups: the rows' weights and missing
    values, and the statistics of a least-squares fit (refused in one line by the
    recursions they do not apply to)."""
    from streamlsq.kernels.inference import COV_TYPES

    opts = [
        click.option("--weights", default=None, metavar="VAR",
                     help="Precision weights of the rows, a variable of DATA (as statsmodels' "
                          "WLS: each row scaled by sqrt(w); 0 drops the row). Least squares "
                          "only."),
        click.option("--missing", type=click.Choice(["raise", "drop"]), default="raise",
                     show_default=True,
                     help="A NaN in a selected variable (features, targets, weights, "
                          "groups): refuse it, or drop its row. Least squares only."),
    ]
    if alpha:
        opts.append(click.option("--alpha", type=float, default=None,
                                 help="Confidence intervals of 1 - ALPHA coverage (default "
                                      "0.05). Least squares only."))
    opts += [
        click.option("--cov-type", type=click.Choice(list(COV_TYPES)), default=None,
                     help="Covariance of the coefficients (default nonrobust, from the final "
                          "state); HC0-HC3 and cluster take one more pass over the rows."),
        click.option("--groups", default=None, metavar="VAR",
                     help="Group labels of the rows (integers or strings), a variable of "
                          "DATA, for --cov-type cluster."),
    ]
    return opts


def _layout_options(intercept: bool = True, default_intercept: bool = False):
    """--x, --y, --sample-dim, --formula and --intercept/--no-intercept: which variables of
    DATA (or which formula of its columns), along which dimension, and whether to fit an
    intercept."""
    opts = [
        click.option("--x", "x", default=None, metavar="NAMES",
                     help="Feature variables: one 2-D variable (default X) or several 1-D "
                          "ones, comma-separated (a,b,c), all along --sample-dim."),
        click.option("--y", "y", default=None, metavar="NAMES",
                     help="Target variables (default y), comma-separated."),
        click.option("--sample-dim", default=None, metavar="DIM",
                     help="The dimension rows are stored along (default: sample)."),
        click.option("--formula", default=None, metavar="FORMULA",
                     help="Build the features and targets from the columns of DATA by a "
                          "formula ('y ~ a + C(k) + np.log(b) + a:k'; formulaic's syntax) "
                          "instead of --x/--y; its intercept is the fit's."),
    ]
    if intercept:
        state = "on" if default_intercept else "off"
        opts.append(click.option(
            "--intercept/--no-intercept", "intercept", default=None,
            help=f"Fit an intercept, labelled 'intercept' (default {state} for this method)."))
    else:
        opts.append(click.option("--intercept/--no-intercept", "intercept", default=None,
                                 hidden=True))
    return opts


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
FIT_COMMANDS = {"em": ("streamlsq.cli.fit_em", "em")}
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
