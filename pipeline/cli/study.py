"""``streamlsq study NAME``: one paper's study from one command (registered in ``cli.py``).

The studies and the options each accepts come from the registry
:data:`streamlsq.studies.STUDIES`; an option given to a study that does not
take it, or a value out of range, exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _checkpoint_options,
    _friendly_errors,
    _scheduler_option,
    _workers_option,
)
from streamlsq.errors import InputError
from streamlsq.studies import STUDIES

__all__ = ["study"]

_STUDY_LIST = "\n".join(f"  {name:<12} {spec.title}" for name, spec in STUDIES.items())

_HELP = f"""Reproduce one paper's study: tidy CSV tables, PNG figures and summary.md in DIR.

\b
Studies:
{_STUDY_LIST}

Monte-Carlo work runs as fixed-size batches on the Dask cluster (an embedded
LocalCluster unless --scheduler names one); the tables depend on --seed only,
not on the number of workers. summary.md sets the paper's figures beside this
run's. --quick shrinks every size so a study runs in seconds.

\b
Examples:
  streamlsq study interleaved --out results/interleaved
  streamlsq study interleaved --out /tmp/il --alpha 0.4 --steps 8 --iterations 2000
  streamlsq study irma --out results/irma --seed 1
  streamlsq study lms --out results/lms --rates 0.002,0.01 --epochs 100
  streamlsq study bfgs --out results/bfgs --quick
  streamlsq study mlr --out results/mlr --replicates 10
  streamlsq study irma --out results/irma --scheduler tcp://10.0.0.5:8786
"""


def _rates(ctx, param, value):
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got {value!r}") from None


@click.command(context_settings=CONTEXT, help=_HELP)
@click.argument("name", metavar="NAME", type=click.Choice(list(STUDIES)))
@click.option("--out", required=True, type=click.Path(), metavar="DIR",
              help="Folder for the study's tables, figures and summary.md (replaced if it "
                   "holds an earlier run of the same study).")
@click.option("--quick", is_flag=True, help="Small sizes: seconds instead of minutes.")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed.")
@click.option("--iterations", type=int, default=None,
              help="[interleaved] Monte-Carlo iterations (default 5000; quick 500).")
@click.option("--alpha", type=float, default=None,
              help="[interleaved] mixing weight α of the test population, in (0, 1) "
                   "(default 0.25).")
@click.option("--steps", type=int, default=None,
              help="[interleaved] KF4LLS steps (blocks) per scheme (default 6).")
@click.option("--fig-sequences", type=int, default=None,
              help="[irma] sequences for Figure 1 (default 500; quick 100).")
@click.option("--table-sequences", type=int, default=None,
              help="[irma] sequences for Table I (default 1000; quick 200).")
@click.option("--clouds", type=int, default=None,
              help="[lms] clouds for the convergence curves (default 200; quick 20).")
@click.option("--epochs", type=int, default=None,
              help="[lms] epochs of the convergence runs (default 200; quick 20).")
@click.option("--rates", callback=_rates, default=None, metavar="R1,R2,...",
              help="[lms] constant step sizes (default 0.001,0.005,0.01).")
@click.option("--streams", type=int, default=None,
              help="[bfgs] streams per case (default 200; quick 20).")
@click.option("--rate", type=float, default=None,
              help="[bfgs] reference rate α_r of the class-balanced rates (default 1).")
@click.option("--replicates", type=int, default=None,
              help="[mlr] trials per grid point (default 20; quick 3).")
@_scheduler_option
@_workers_option
@_checkpoint_options
@_friendly_errors
def study(name, out, quick, seed, scheduler, n_workers, checkpoint, resume, **options):
    from streamlsq.studies import run_study

    given = {k: v for k, v in options.items() if v is not None}
    spec = STUDIES[name]
    wrong = sorted(set(given) - set(spec.options))
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        raise InputError(f"study {name} does not take {flags}")
    if n_workers is not None and n_workers < 1:
        raise InputError(f"--workers must be a positive integer, got {n_workers}")
    # the study validates its options, then starts or joins the cluster
    result = run_study(name, out, quick=quick, seed=seed, scheduler=scheduler,
                       n_workers=n_workers, checkpoint=checkpoint, resume=resume, **given)
    if result.extra.get("already_complete"):
        click.echo(f"{result.out}: already complete (the run being resumed had finished); "
                   "nothing to do")
        return
    files = sorted([f"{k}.csv" for k in result.tables] + [p.name for p in
                                                          result.figures.values()])
    click.echo(f"wrote {result.out}: {', '.join(files)}, summary.md "
               f"({result.seconds:.1f} s on {result.n_workers} workers)")
