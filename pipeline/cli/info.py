"""``streamlsq info`` and ``streamlsq demo``: look at a store; run the whole pipeline once."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors, _scheduler_options

__all__ = [
    "demo",
    "info",
]


@click.command(context_settings=CONTEXT)
@click.argument("store", type=click.Path())
@click.option("--check", is_flag=True,
              help="Also read every chunk (a parallel pass): refuse unreadable chunks, NaN/Inf "
                   "and values so large that the least-squares sums would overflow.")
@click.option("--plot", "plot", type=click.Path(), default=None, metavar="PNG",
              help="For the result of a stream fit: draw its coefficients and, when it "
                   "recorded recursive residuals (--diagnostics), its CUSUM tests.")
@click.option("--target", type=int, default=0, show_default=True,
              help="Target drawn by --plot.")
@_scheduler_options
@_friendly_errors
def info(store, check, plot, target, scheduler, n_workers, memory_limit):
    """Describe STORE (stream, multi-task or result store) and validate it.

    \b
    Examples:
      streamlsq info data.zarr
      streamlsq info data.zarr --check
      streamlsq info rls.zarr --plot rls.png     # a fit: coefficients, CUSUM tests
    """
    from streamlsq.io.describe import check_values, describe

    click.echo(describe(store))
    if plot is not None:
        _plot_result(store, plot, target)
    if check:
        with _client(scheduler, n_workers, memory_limit, data=store) as client:
            n = check_values(store, client)
        click.echo(f"checked: every value finite in {n} rows, none so large that the "
                   "least-squares sums overflow")


def _plot_result(store, path, target):
    from streamlsq.errors import InputError
    from streamlsq.io.results import open_result
    from streamlsq.stream.stability import plot_fit

    ds = open_result(store)
    if "coef" not in ds or "rows_seen" not in ds:
        raise InputError(f"{store}: --plot needs the result of a stream fit (coef, rows_seen)")
    if not 0 <= target < ds.sizes["target"]:
        raise InputError(f"--target must be in 0..{ds.sizes['target'] - 1}, got {target}")
    plot_fit(ds, path, target=target)
    tests = "and its CUSUM tests" if "cusum" in ds else "(no recursive residuals recorded)"
    click.echo(f"wrote {path}: coefficients {tests}")


@click.command(context_settings=CONTEXT)
@click.option("--out", default="streamlsq-demo", show_default=True, type=click.Path(),
              help="Folder for the demo's stores, summary and figures.")
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
    from streamlsq.studies.demo import run_demo

    size = max(0, rows * (features + 1) * 8 + tasks * 80 * 9)  # the stream and the tasks
    with _client(scheduler, n_workers, memory_limit, data=size) as client:
        run_demo(out, rows, features, seed, client=client, echo=click.echo, tasks=tasks)


