"""``streamlsq study NAME``: one paper's study from one command (registered in ``cli.py``).

The studies and the options each accepts come from the registry
:data:`streamlsq.studies.STUDIES`; an option given to a study that does not
take it, or a value out of range, exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _friendly_errors
from streamlsq.cli.options import click_options, values
from streamlsq.errors import InputError
from streamlsq.options import Options
from streamlsq.options.run import CHECKPOINT, CLUSTER
from streamlsq.options.study import EVERY_STUDY, STUDY
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


#: the options of ``streamlsq study``: every study's, the checkpoint's, the cluster's
#: (a study starts or joins the cluster itself: no --memory-limit)
OPTIONS = Options(EVERY_STUDY, CHECKPOINT, CLUSTER.without("memory_limit"))


@click.command(context_settings=CONTEXT, help=_HELP)
@click.argument("name", metavar="NAME")
@click.option("--out", required=True, type=click.Path(), metavar="DIR",
              help="Folder for the study's tables, figures and summary.md, made with the "
                   "folders above it (a folder of yours, even an empty one, is refused: name a "
                   "new one inside it; one holding an earlier run of the same study is "
                   "replaced).")
@click_options(OPTIONS)
@_friendly_errors
def study(name, out, **given):
    from streamlsq.studies import run_study

    options = values(OPTIONS, given)  # every option checked before the cluster starts
    if name not in STUDIES:
        raise InputError(f"unknown study {name!r}; the studies are {', '.join(STUDIES)}")
    own = set(EVERY_STUDY.names) - set(STUDY.names)
    wrong = [OPTIONS.param(k).option for k in OPTIONS.names
             if k in own and k not in STUDIES[name].options and k in options]
    if wrong:
        raise InputError(f"study {name} does not take {', '.join(wrong)}")
    result = run_study(name, out, **options)
    if result.extra.get("already_complete"):
        click.echo(f"{result.out}: already complete (the run being resumed had finished); "
                   "nothing to do")
        return
    files = sorted([f"{k}.csv" for k in result.tables] + [p.name for p in
                                                          result.figures.values()])
    click.echo(f"wrote {result.out}: {', '.join(files)}, summary.md "
               f"({result.seconds:.1f} s on {result.n_workers} workers)")
