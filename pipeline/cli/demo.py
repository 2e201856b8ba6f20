"""``streamlsq demo``: the whole pipeline once, on small synthetic stores."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors, _scheduler_options

__all__ = ["demo"]


@click.command(context_settings=CONTEXT)
@click.option("--out", default="streamlsq-demo", show_default=True, type=click.Path(),
              help="Folder the demo creates for its stores, summary and figures (a folder "
                   "of yours is refused; an earlier demo's is replaced).")
@click.option("--rows", default=2_000_000, show_default=True, help="Rows of the stream.")
@click.option("--features", default=20, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--tasks", default=100_000, show_default=True,
              help="Light tasks of the multi-task store (4 rows each; a quarter as many "
                   "tasks of 10 rows to classify, and 200 heavy tasks).")
@_scheduler_options
@_friendly_errors
def demo(out, rows, features, seed, tasks, scheduler, n_workers, memory_limit):
    """The whole pipeline: stream fits, meta-learning, prediction, with a summary and figures.

    Simulates a stream and fits it with KF4LLS (both engines), RLS and LMS;
    simulates a multi-task store, meta-learns the mixture and predicts new
    tasks; prints accuracy against the truth and rows/s, and writes
    summary.md, stream.png and metalearn.png into the demo folder.

    \b
    Examples:
      streamlsq demo
      streamlsq demo --out /tmp/demo --rows 500000 --tasks 10000
    """
    from streamlsq.studies.demo import DemoFolder, run_demo

    DemoFolder(out).check()  # a folder of the user's is refused before a cluster starts
    size = max(0, rows * (features + 1) * 8 + tasks * 80 * 9)  # the stream and the tasks
    with _client(scheduler, n_workers, memory_limit, data=size) as client:
        run_demo(out, rows, features, seed, client=client, echo=click.echo, tasks=tasks)
