"""``streamlsq example``: a real multilevel dataset converted to a multi-task store."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _friendly_errors
from streamlsq.cli.options import click_options, values
from streamlsq.options.study import EXAMPLE, EXAMPLE_NAMES

__all__ = ["example"]


@click.command(context_settings=CONTEXT)
@click.argument("name", metavar=f"[{'|'.join(EXAMPLE_NAMES)}]")
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click_options(EXAMPLE)
@_friendly_errors
def example(name, out, **given):
    """Convert a real multilevel dataset (needs the 'examples' extra) to a multi-task store.

    \b
    exam   mlmRev Exam: 65 schools; normexam ~ 1 + standLRT
    hsb82  mlmRev Hsb82: 160 schools; mAch ~ 1 + cses + female + minority
    radon  HLMdiag radon: 85 counties; log.radon ~ 1 + basement
    \b
    Examples:
      streamlsq example exam --out exam.zarr
      streamlsq metalearn exam.zarr --out m.zarr --holdout 2      # defaults: k auto, roles by rows
      streamlsq predict m.zarr exam.zarr --out p.zarr --holdout 2 --yhat
    (--scheduler is not needed: the conversion runs in this process.)
    """
    options = values(EXAMPLE, given)  # checked first: the name is checked with the data
    from streamlsq.mlr.examples import example_tasks

    path, info = example_tasks(name, out, **options)
    click.echo(f"wrote {path}: {info['n_tasks']} tasks, {info['n_rows']} rows, features "
               f"{', '.join(info['features'])}; target {info['target']}")
