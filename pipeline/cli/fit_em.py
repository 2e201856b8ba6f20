"""``streamlsq fit em``: the EM baseline over a multi-task store (a subcommand of ``fit``,
imported when asked for: :data:`streamlsq.cli.fit.FIT_COMMANDS`)."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _command_values,
    _done_line,
    _friendly_errors,
)
from streamlsq.cli.options import click_options
from streamlsq.errors import InputError
from streamlsq.options import Options
from streamlsq.options.mlr import EM
from streamlsq.options.run import CHECKPOINT, CLUSTER, OUTPUT

__all__ = ["em"]

#: the options of ``streamlsq fit em``: the job's, the output's, the checkpoint's
OPTIONS = Options(EM, OUTPUT.without("out").replace(
    "overwrite", help="Replace an existing model store (only one streamlsq wrote)."),
    CHECKPOINT)


@click.command(context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to create.")
@click_options(OPTIONS)
@click_options(CLUSTER)
@_friendly_errors
def em(data, out, **given):
    """Fit a mixture of K linear regressions to the task store DATA by task-level EM.

    \b
    Examples:
      streamlsq fit em tasks.zarr --out em.zarr --k 4 --init truth
      streamlsq fit em tasks.zarr --out em.zarr --k 4 --init perturbed --scale 1.0 --seed 3
    """
    from streamlsq.mlr.em import fit_em

    options, cluster = _command_values(OPTIONS, given)  # checked before any cluster starts
    if "k" not in options:
        raise InputError("--k is required: the number of components")
    with _client(**cluster, data=data) as client:
        ds = fit_em(data, out=out, client=client, **options)
    done = _done_line(out, ds)
    if done:
        click.echo(done)
        return
    a = ds.attrs
    line = f"wrote {out}: EM {a['status']} after {a['n_iterations']} iterations"
    if a["failure"]:
        line += f" ({a['failure']})"
    if "coef_error" in a:
        line += f"; coef error {a['coef_error']:.3g}, weight error {a['weight_error']:.3g}"
    click.echo(line)
