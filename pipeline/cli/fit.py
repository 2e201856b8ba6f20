"""``streamlsq fit``: a recursive estimator over stream stores, one subcommand per method.

The subcommands ``fit NAME`` are derived from the registry of recursions
(:mod:`streamlsq.kernels.recursions.registry`): each gets the options every fit
shares, ``--engine`` when the recursion has the scan form, and one option per
declared parameter. ``fit interleaved`` (two stores) and ``fit em`` (a multi-task
store) are written out by hand.
"""

from __future__ import annotations

import inspect

import click

from streamlsq.cli.common import (
    CONTEXT,
    LazyCommands,
    _checkpoint_options,
    _client,
    _done_line,
    _friendly_errors,
    _scheduler_options,
)
from streamlsq.errors import InputError
from streamlsq.kernels.recursions.contract import Param
from streamlsq.kernels.recursions.kf4lls import SOLVER_PARAM
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = ["fit", "fit_interleaved_command", "recursion_command"]


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
    if p.default is not None:
        kwargs["show_default"] = True
    return click.option(name, p.name, default=p.default, nargs=p.nargs, **kwargs)


def _param_value(p: Param, value):
    """The value of one option as the recursion takes it (``None``: not given)."""
    if value is None:
        return None
    try:
        return p.from_command_line(value)
    except ValueError as exc:
        raise InputError(f"{_option_name(p)}: {exc}") from None


def _command_help(cls) -> str:
    """The help of ``fit NAME``: the recursion's own description and examples, or its
    summary and the first paragraph of its docstring."""
    description = vars(cls).get("description")
    if not description:
        return _generic_help(cls)
    text = inspect.cleandoc(description)
    examples = vars(cls).get("examples", ())
    if examples:
        text += "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in examples)
    return text


def recursion_command(name: str) -> click.Command:
    """The ``fit NAME`` command of a registered recursion."""
    cls = RECURSIONS[name]
    scan = "scan" in RECURSIONS.engines(name)
    declared = {p.name: p for p in cls.params}

    def command(data, out, block_size, first_block_size, record_every, dtype, checkpoint,
                resume, segment_size, overwrite, epochs, shuffle, seed, group, x, y,
                sample_dim, intercept, continue_from, scheduler, n_workers, memory_limit,
                engine="sequential", **options):
        from streamlsq.stream.fit import fit_stream

        params = {}
        for key, value in options.items():
            value = _param_value(declared[key], value)
            if value is not None:
                params[key] = value
        segment_bytes = _segment_bytes(segment_size)  # refused before a cluster starts
        with _client(scheduler, n_workers, memory_limit, data=data) as client:
            ds = fit_stream(
                data, name, out=out, group=group, engine=engine, block_size=block_size,
                first_block_size=first_block_size, record_every=record_every, epochs=epochs,
                shuffle=shuffle, seed=seed, dtype=dtype, client=client, checkpoint=checkpoint,
                resume=resume, overwrite=overwrite, segment_bytes=segment_bytes, x=x, y=y,
                sample_dim=sample_dim, fit_intercept=intercept, continue_from=continue_from,
                **params,
            )
        done = _done_line(out, ds)
        if done:
            click.echo(done)
            return
        line = ", ".join([_summary(out, name, engine, ds), *cls.result_notes(ds.attrs)])
        if epochs != 1:
            line += f", {epochs} epoch(s)"
        if continue_from is not None:
            line += (f", continued from {continue_from} after its {ds.attrs['rows_continued']} "
                     "rows")
        click.echo(line)

    command.__doc__ = _command_help(cls)
    decorators = [
        click.argument("data", type=click.Path()),
        _fit_options(engine=scan),
        *[_param_option(p) for p in cls.params],
        click.option("--epochs", type=int, default=1, show_default=True,
                     help="Passes over the store (the state carries over from one to the "
                          "next)."),
        click.option("--shuffle", is_flag=True,
                     help="Visit chunks and the rows within each chunk in a seeded random "
                          "order, new in every epoch."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of --shuffle."),
        click.option("--group", default=None, help="Group of the store holding X and y."),
        *_layout_options(intercept=cls.intercept_kind in ("column", "kernel"),
                         default_intercept=cls.default_intercept),
        click.option("--continue-from", "continue_from", default=None, metavar="RESULT",
                     help="Continue the fit RESULT (of this method and options) on the rows "
                          "appended to DATA since: start from its final state, read only the "
                          "new rows; refused if the earlier rows changed."),
        _scheduler_options,
        _friendly_errors,
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return click.command(name, context_settings=CONTEXT, short_help=cls.summary)(command)


def _layout_options(intercept: bool = True, default_intercept: bool = False):
    """--x, --y, --sample-dim and --intercept/--no-intercept: which variables of DATA, along
    which dimension, and whether to fit an intercept."""
    opts = [
        click.option("--x", "x", default=None, metavar="NAMES",
                     help="Feature variables: one 2-D variable (default X) or several 1-D "
                          "ones, comma-separated (a,b,c), all along --sample-dim."),
        click.option("--y", "y", default=None, metavar="NAMES",
                     help="Target variables (default y), comma-separated."),
        click.option("--sample-dim", default=None, metavar="DIM",
                     help="The dimension rows are stored along (default: sample)."),
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


def _generic_help(cls) -> str:
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    return f"{cls.summary[:1].upper()}{cls.summary[1:]} on the stream store DATA.\n\n    {doc}"


#: the subcommands of ``fit`` written in modules of their own: name -> (module, attribute),
#: imported when asked for
FIT_COMMANDS = {"em": ("streamlsq.cli.fit_em", "em")}


class _RecursionGroup(click.Group):
    """``fit``: a subcommand per registered recursion, built when it is asked for, and those
    of :data:`FIT_COMMANDS`, imported when asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(FIT_COMMANDS, self.commands)

    def list_commands(self, ctx):
        return [*RECURSIONS.stream_methods(), *sorted(super().list_commands(ctx))]

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is None and name in RECURSIONS.stream_methods():
            command = recursion_command(name)
        return command


@click.group(cls=_RecursionGroup, context_settings=CONTEXT)
def fit():
    """Fit a recursive estimator to stream stores, block after block, in order.

    Each method is a subcommand with its own options: streamlsq fit METHOD --help.
    The methods are the registered recursions (engines sequential and, for the
    least-squares ones, scan), interleaved KF4LLS over two stores and EM over a
    multi-task store.

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


@fit.command("interleaved", context_settings=CONTEXT)
@click.argument("a", type=click.Path(), metavar="A")
@click.argument("b", type=click.Path(), metavar="B")
@_fit_options(first_block=False)
@click.option("--alpha", type=float, default=None,
              help="Mixing weight in [0, 1]: the test population is alpha*A + (1-alpha)*B.")
@click.option("--estimate-alpha", type=click.Choice(["means", "grid"]), default=None,
              help="Estimate alpha from the column moments of A, B and --test C instead.")
@click.option("--test", "test", type=click.Path(), default=None, metavar="C",
              help="Test population: records test_mse(step), and bias(step) if C has "
                   "coef_true.")
@click.option("--start", type=click.Choice(["a", "b"]), default="a", show_default=True,
              help="Population of the first block.")
@click.option("--ridge", type=float, default=0.0, show_default=True,
              help="Ridge start H0 = ridge*I (0: the paper's H0 = 0).")
@click.option("--solver", type=click.Choice(list(SOLVER_PARAM.choices)),
              default=SOLVER_PARAM.default, show_default=True, help=SOLVER_PARAM.help)
@_scheduler_options
@_friendly_errors
def fit_interleaved_command(a, b, out, engine, block_size, record_every, dtype, checkpoint,
                            resume, segment_size, overwrite, alpha, estimate_alpha, test, start,
                            ridge, solver, scheduler, n_workers, memory_limit):
    """Interleaved KF4LLS: blocks of populations A and B alternately, centred and weighted.

    A, B (and C) are stream stores or groups of one, written PATH#GROUP. Blocks: each
    store's block_size attribute (else its chunk size), or --block-size for all. The
    stream alternates A1, B1, A2, B2, ... (--start b: B1, A1, ...) and stops when the
    population due next has no block left: the longer population's extra blocks are not
    used (the result's attrs blocks_used_a/b and rows_unused_a/b say how many). Give
    --alpha, or --estimate-alpha with --test.

    \b
    Examples:
      streamlsq simulate interleaved --out p.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --out fit.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --test p.zarr#c --out fit.zarr
      streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --start b --out fit.zarr
      streamlsq fit interleaved b.zarr f.zarr --test p.zarr --estimate-alpha grid --out r.zarr
    """
    from streamlsq.stream.interleaved import fit_interleaved

    segment_bytes = _segment_bytes(segment_size)  # refused before a cluster starts
    with _client(scheduler, n_workers, memory_limit, data=[a, b, test]) as client:
        ds = fit_interleaved(
            a, b, alpha=alpha, estimate_alpha=estimate_alpha, test=test, start=start,
            ridge=ridge, solver=solver, out=out, engine=engine, block_size=block_size,
            record_every=record_every, dtype=dtype, client=client, checkpoint=checkpoint,
            resume=resume, overwrite=overwrite, segment_bytes=segment_bytes,
        )
    done = _done_line(out, ds)
    if done:
        click.echo(done)
        return
    line = _summary(out, "interleaved", engine, ds) + f", alpha {ds.attrs['alpha']:.4g}"
    line = ", ".join([line, *RECURSIONS["interleaved-kf4lls"].result_notes(ds.attrs)])
    if "test_mse" in ds:
        line += f", final test MSE {float(ds.test_mse[-1]):.4g}"
    click.echo(line)


