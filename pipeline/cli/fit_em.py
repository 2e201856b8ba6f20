"""``streamlsq fit em``: the EM baseline over a multi-task store (a subcommand of ``fit``,
imported when asked for: :data:`streamlsq.cli.fit.FIT_COMMANDS`)."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _checkpoint_options,
    _chunk_tasks_option,
    _client,
    _done_line,
    _friendly_errors,
    _scheduler_options,
)

__all__ = ["em"]


@click.command(context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to create.")
@click.option("--k", "k", required=True, type=int, help="Number of components.")
@click.option("--init", type=click.Choice(["truth", "perturbed", "random"]),
              default="perturbed", show_default=True,
              help="Start at the store's truth, the truth perturbed (paper E.5), or at random.")
@click.option("--scale", default=0.5, show_default=True,
              help="Relative size of the perturbation of --init perturbed.")
@click.option("--iterations", default=100, show_default=True, help="Most EM iterations.")
@click.option("--tol", default=1e-8, show_default=True,
              help="Stop when the log-likelihood changes by at most tol*|log-likelihood|.")
@click.option("--seed", default=0, show_default=True, help="Seed of the initialisation.")
@_chunk_tasks_option
@click.option("--overwrite", is_flag=True, help="Replace an existing model store.")
@_checkpoint_options
@_scheduler_options
@_friendly_errors
def em(data, out, k, init, scale, iterations, tol, seed, chunk_tasks, overwrite, checkpoint,
       resume, scheduler, n_workers, memory_limit):
    """Fit a mixture of K linear regressions to the task store DATA by task-level EM.

    \b
    Examples:
      streamlsq fit em tasks.zarr --out em.zarr --k 4 --init truth
      streamlsq fit em tasks.zarr --out em.zarr --k 4 --init perturbed --scale 1.0 --seed 3
    """
    from streamlsq.mlr.em import fit_em

    with _client(scheduler, n_workers, memory_limit, data=data) as client:
        ds = fit_em(data, k, out=out, init=init, scale=scale, iterations=iterations, tol=tol,
                    seed=seed, chunk_tasks=chunk_tasks, overwrite=overwrite, client=client,
                    checkpoint=checkpoint, resume=resume)
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
