"""``streamlsq fit glm``: a generalised linear model by exact IRLS over a stream store or a
table (a subcommand of ``fit``, imported when asked for:
:data:`streamlsq.cli.fit.FIT_COMMANDS`)."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _check_formula,
    _client,
    _command_values,
    _done_line,
    _friendly_errors,
)
from streamlsq.cli.options import click_options
from streamlsq.options import Options
from streamlsq.options.glm import GLM
from streamlsq.options.run import CHECKPOINT, CLUSTER, OUTPUT

__all__ = ["glm"]

#: the options of ``streamlsq fit glm``: the job's, the output's, the checkpoint's
OPTIONS = Options(GLM, OUTPUT.without("out"), CHECKPOINT)


@click.command(context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Result store to create.")
@click_options(OPTIONS)
@click_options(CLUSTER)
@_friendly_errors
def glm(data, out, **given):
    """Fit a generalised linear model to DATA (a stream store or a table) by exact IRLS,
    one parallel pass over the rows per iteration, as statsmodels' GLM.

    \b
    Examples:
      streamlsq fit glm flights.parquet --out late.zarr --family binomial \\
          --formula "late ~ distance + C(carrier)"
      streamlsq fit glm claims.zarr --out claims-fit.zarr --family poisson \\
          --x age,power --y claims --exposure years --intercept
    """
    from streamlsq.stream.glm import fit_glm

    options, cluster = _command_values(OPTIONS, given)  # checked before any cluster starts
    _check_formula(options)
    with _client(**cluster, data=data) as client:
        ds = fit_glm(data, out=out, client=client, **options)
    done = _done_line(out, ds)
    if done:
        click.echo(done)
        return
    a = ds.attrs
    state = "converged" if a["converged"] else "NOT converged"
    # the rows left out are said, as a linear fit's line says them, with why: a weight of 0
    # (--weights) or a missing value (--missing drop)
    dropped = int(a.get("rows_dropped") or 0)
    why = [w for w, on in (("a missing value (--missing drop)", a.get("missing") == "drop"),
                           ("a weight of 0", a.get("weights_variable") is not None)) if on]
    fitted = (f" ({a['n_rows'] - dropped} fitted, {dropped} left out: {' or '.join(why)})"
              if dropped else "")
    click.echo(f"wrote {out}: GLM {a['family']} ({a['link']}) over {a['n_rows']} rows{fitted}, "
               f"{state} after {a['iterations']} iterations ({a['passes']} passes), "
               f"deviance {float(ds.deviance.values[0]):.6g} "
               "(streamlsq info RESULT: the summary)")
