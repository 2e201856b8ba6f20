"""``streamlsq example``: a real multilevel dataset converted to a multi-task store."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _friendly_errors

__all__ = ["example"]


@click.command(context_settings=CONTEXT)
@click.argument("name", type=click.Choice(["exam", "hsb82", "radon"]))
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--seed", default=0, show_default=True,
              help="Seed of the shuffle of rows within each task.")
@click.option("--min-rows", default=1, show_default=True,
              help="Leave out tasks with fewer rows than this.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_friendly_errors
def example(name, out, seed, min_rows, overwrite):
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
    from streamlsq.mlr.examples import example_tasks

    path, info = example_tasks(name, out, seed=seed, min_rows=min_rows, overwrite=overwrite)
    click.echo(f"wrote {path}: {info['n_tasks']} tasks, {info['n_rows']} rows, features "
               f"{', '.join(info['features'])}; target {info['target']}")
