"""``streamlsq metalearn``: Algorithm 1 over a multi-task store, written as a model store."""

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

__all__ = ["metalearn"]


def _k_option(value):
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}") from None


@click.command(context_settings=CONTEXT)
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to create.")
@click.option("--k", "k", default="auto", show_default=True, callback=lambda c, p, v: _k_option(v),
              help="Number of components, or 'auto': chosen by held-out likelihood (writes "
              "OUT.k-curve.csv and .png beside the model, OUT without .zarr).")
@click.option("--k-max", type=int, default=None,
              help="With --k auto: the largest k tried (default min(d, 8, heavy tasks)).")
@click.option("--linkage", type=click.Choice(["auto", "single", "average"]), default="auto",
              show_default=True, help="Clustering of the heavy tasks (auto: average up to "
              "5,000 heavy tasks, else single).")
@click.option("--threshold", type=float, default=None,
              help="Cut the linkage at this distance (Δ²/2 for a known separation Δ) "
              "instead of at K clusters.")
@click.option("--splits", default=1, show_default=True,
              help="L: split pairs per heavy task (distances are medians over L).")
@click.option("--whiten", is_flag=True, help="Whiten the features first (coefficients are "
              "mapped back to the raw features).")
@click.option("--roles", type=click.Choice(["auto", "store", "rows"]), default="auto",
              show_default=True, help="Task sets from the store's role variable or by rows "
              "per task.")
@click.option("--heavy-rows", type=int, default=None,
              help="By rows: tasks with at least this many rows are also heavy (default: a "
              "rule on the task sizes, reported in the summary).")
@click.option("--holdout", default=0, show_default=True,
              help="Leave out the last N rows of every task (evaluate them with predict).")
@_chunk_tasks_option
@click.option("--tile", default=1024, show_default=True,
              help="Heavy tasks per side of a distance tile.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model store.")
@_checkpoint_options
@_scheduler_options
@_friendly_errors
def metalearn(data, out, k, k_max, linkage, threshold, splits, whiten, roles, heavy_rows,
              holdout, chunk_tasks, tile, overwrite, checkpoint, resume, scheduler, n_workers,
              memory_limit):
    """Meta-learn a mixture of K linear regressions (Algorithm 1) from the task store DATA.

    \b
    Examples:
      streamlsq simulate mlr --out tasks.zarr --k 4 --d 8
      streamlsq metalearn tasks.zarr --out model.zarr --k 4
      streamlsq metalearn tasks.zarr --out model.zarr            # k chosen from the data
      streamlsq metalearn tasks.zarr --out model.zarr --k 4 --linkage single --splits 3
      streamlsq metalearn exam.zarr --out m.zarr --k 2 --whiten --roles rows --heavy-rows 40
      streamlsq metalearn tasks.zarr --out model.zarr --k 4 --checkpoint ckpt/ --resume
    """
    from streamlsq.io.location import locate
    from streamlsq.io.outputs import beside_path
    from streamlsq.mlr.metalearn import metalearn as run

    # the curve's files belong to the model store: checked with it, published with it
    k_curve = k == "auto" and not getattr(locate(out), "remote", False)
    with _client(scheduler, n_workers, memory_limit, data=data) as client:
        ds = run(data, k, out=out, k_max=k_max, linkage=linkage, threshold=threshold,
                 splits=splits, whiten=whiten, roles=roles, heavy_rows=heavy_rows,
                 holdout=holdout, chunk_tasks=chunk_tasks, tile=tile, overwrite=overwrite,
                 client=client, checkpoint=checkpoint, resume=resume, k_curve=k_curve)
    done = _done_line(out, ds)
    if done:
        click.echo(done)
        return
    a = ds.attrs
    line = (f"wrote {out}: {a['n_clusters']} clusters from {a['n_light']} light, "
            f"{a['n_heavy']} heavy and {a['n_light2']} light2 tasks in {a['seconds']:.3g} s")
    if "subspace_error" in a:
        line += (f"; subspace error {a['subspace_error']:.3g}, heavy accuracy "
                 f"{a['heavy_accuracy']:.3g}, classification accuracy "
                 f"{a['classification_accuracy']:.3g}, coef error {a['coef_error']:.3g}")
    click.echo(line)
    click.echo(f"roles: {a['role_rule']}" + (f"; {a['n_unused_tasks']} task(s) with fewer "
               "than 2 rows unused" if a["n_unused_tasks"] else ""))
    if k == "auto":
        where = (f"{beside_path(out, '.k-curve.csv')} and {beside_path(out, '.k-curve.png')}"
                 if k_curve else "the model's k_loglik (no files beside an object store)")
        click.echo(f"k = {a['k_chosen']} chosen from k = 1..{ds.sizes['k_candidate']} by "
                   f"held-out likelihood on {a['n_validation_tasks']} light2 tasks "
                   f"(one-standard-error rule); curve in {where}")
    if a.get("n_fallback_clusters"):
        click.echo(f"refinement fell back for {a['n_fallback_clusters']} cluster(s): "
                   f"{a['fallback_clusters']}")
