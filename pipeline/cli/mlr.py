"""Command line of meta-learning: ``metalearn``, ``predict``, ``example``,
``simulate mlr`` and the ``em`` command object for ``streamlsq fit em``.

:func:`register` attaches them to the main group. ``simulate`` becomes a group
with the subcommands ``stream`` (the existing command, unchanged options) and
``mlr``; ``em`` is exported for the ``fit`` command to attach.
"""

from __future__ import annotations

from pathlib import Path

import click

from streamlsq.cli.common import (
    CONTEXT,
    _checkpoint_options,
    _client,
    _codec_option,
    _done_line,
    _friendly_errors,
    _scheduler_options,
)

__all__ = ["em", "example", "metalearn", "predict", "simulate_mlr"]


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
@click.option("--chunk-tasks", default=10_000, show_default=True, help="Tasks per Dask task.")
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
    from streamlsq.mlr.metalearn import metalearn as run

    with _client(scheduler, n_workers, memory_limit, data=data) as client:
        ds = run(data, k, out=out, k_max=k_max, linkage=linkage, threshold=threshold,
                 splits=splits, whiten=whiten, roles=roles, heavy_rows=heavy_rows,
                 holdout=holdout, chunk_tasks=chunk_tasks, tile=tile, overwrite=overwrite,
                 client=client, checkpoint=checkpoint, resume=resume)
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
        from streamlsq.mlr.kcurve import write_k_curve

        csv, png = write_k_curve(ds, Path(out).with_suffix(""))
        click.echo(f"k = {a['k_chosen']} chosen from k = 1..{ds.sizes['k_candidate']} by "
                   f"held-out likelihood on {a['n_validation_tasks']} light2 tasks "
                   f"(one-standard-error rule); curve in {csv} and {png}")
    if a.get("n_fallback_clusters"):
        click.echo(f"refinement fell back for {a['n_fallback_clusters']} cluster(s): "
                   f"{a['fallback_clusters']}")


@click.command(context_settings=CONTEXT)
@click.argument("model", type=click.Path())
@click.argument("tasks", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Result store to create.")
@click.option("--estimator", type=click.Choice(["bayes", "map", "lstsq"]), default="bayes",
              show_default=True, help="Posterior mean, most probable cluster, or per-task "
              "least squares.")
@click.option("--holdout", default=0, show_default=True,
              help="Hold out the last N rows of every task and report their squared error.")
@click.option("--yhat", is_flag=True, help="Also write yhat (row,): the predicted target of "
              "every row of TASKS (the held-out rows are each task's last N).")
@click.option("--new-rows", type=click.Path(), default=None,
              help="A store of new covariates (X, task_ptr over the same tasks): write "
              "new_yhat (new_row,) for its rows.")
@click.option("--chunk-tasks", default=10_000, show_default=True, help="Tasks per Dask task.")
@click.option("--x", "x", default=None, metavar="NAMES",
              help="A stream fit: the feature variables of TASKS (default: the fit's).")
@click.option("--y", "y", default=None, metavar="NAMES",
              help="A stream fit: the target variables of TASKS, if any (default: the fit's).")
@click.option("--sample-dim", default=None, metavar="DIM",
              help="A stream fit: the dimension of the rows of TASKS (default: the fit's).")
@click.option("--step", type=int, default=None,
              help="A stream fit: apply the coefficients of this recorded step (default: the "
                   "last).")
@click.option("--overwrite", is_flag=True, help="Replace an existing result store.")
@_scheduler_options
@_friendly_errors
def predict(model, tasks, out, estimator, holdout, yhat, new_rows, chunk_tasks, x, y,
            sample_dim, step, overwrite, scheduler, n_workers, memory_limit):
    """Estimate every task of TASKS under the meta-learned MODEL, or apply the stream fit
    MODEL to the rows of the stream store TASKS.

    With a stream fit (a result of streamlsq fit METHOD) as MODEL, TASKS is a store of new
    rows holding the fit's feature variables: the result has yhat (sample, target) and,
    where TASKS has the targets, residual (sample, target) and their mean square, written
    chunk by chunk in parallel.

    \b
    Examples:
      streamlsq predict model.zarr new-tasks.zarr --out pred.zarr
      streamlsq predict model.zarr new-tasks.zarr --out pred.zarr --estimator map --holdout 10
      streamlsq predict model.zarr tasks.zarr --out pred.zarr --holdout 5 --yhat
      streamlsq predict model.zarr tasks.zarr --out pred.zarr --new-rows new-x.zarr
      streamlsq predict fit.zarr new-rows.zarr --out yhat.zarr          # a stream fit
    """
    from streamlsq.io.results import open_result
    from streamlsq.mlr.predict import predict as run
    from streamlsq.stream.apply import is_stream_fit, predict_stream

    if is_stream_fit(open_result(model).attrs):
        with _client(scheduler, n_workers, memory_limit) as client:
            ds = predict_stream(model, tasks, out=out, x=x, y=y, sample_dim=sample_dim,
                                step=step, overwrite=overwrite, client=client)
        line = (f"wrote {out}: yhat for {ds.sizes[ds.yhat.dims[0]]} rows of {tasks} from the "
                f"{ds.attrs['model_method']} fit {model} (step {ds.attrs['model_step']})")
        if "mse" in ds.attrs:
            line += "; residual mean square " + ", ".join(f"{v:.4g}" for v in ds.attrs["mse"])
        click.echo(line)
        return

    with _client(scheduler, n_workers, memory_limit, data=tasks) as client:
        ds = run(model, tasks, out=out, estimator=estimator, holdout=holdout, yhat=yhat,
                 new_rows=new_rows, chunk_tasks=chunk_tasks, overwrite=overwrite, client=client)
    line = f"wrote {out}: {ds.sizes['task']} tasks, estimator {estimator}"
    if holdout:
        line += (f"; held-out MSE {ds.attrs['holdout_mse']:.4g} over "
                 f"{ds.attrs['holdout_rows']} rows")
    if yhat:
        line += f"; yhat for {ds.sizes['row']} rows"
    if new_rows is not None:
        line += f"; new_yhat for {ds.sizes['new_row']} rows of {new_rows}"
    click.echo(line)


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
@click.option("--chunk-tasks", default=10_000, show_default=True, help="Tasks per Dask task.")
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


@click.command("mlr", context_settings=CONTEXT)
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--k", "k", default=4, show_default=True, help="Components.")
@click.option("--d", "d", default=8, show_default=True, help="Features.")
@click.option("--weights", default=None, help="Comma-separated weights p (default uniform).")
@click.option("--noise", default="1.0", show_default=True,
              help="Noise standard deviation s, one number or K comma-separated.")
@click.option("--separation", type=float, default=None,
              help="Rescale the components to this minimum distance.")
@click.option("--kind", type=click.Choice(["orthonormal", "gaussian"]), default="orthonormal",
              show_default=True, help="Orthonormal components or N(0, I/d).")
@click.option("--features", type=click.Choice(["gaussian", "polynomial", "chebyshev"]),
              default="gaussian", show_default=True,
              help="Rows x ~ N(0, I), or monomials / Chebyshev polynomials of u ~ U(-1, 1) "
              "(non-isotropic).")
@click.option("--n-light", default=10_000, show_default=True, help="Tasks in D_L1.")
@click.option("--t-light", default=4, show_default=True, help="Rows per D_L1 task.")
@click.option("--n-heavy", default=200, show_default=True, help="Tasks in D_H.")
@click.option("--t-heavy", default=100, show_default=True, help="Rows per D_H task.")
@click.option("--n-light2", default=10_000, show_default=True, help="Tasks in D_L2.")
@click.option("--t-light2", default=8, show_default=True, help="Rows per D_L2 task.")
@click.option("--seed", default=0, show_default=True, help="Seed of the mixture.")
@click.option("--task-seed", type=int, default=None,
              help="Seed of the tasks (default --seed): another value draws new tasks from "
              "the same mixture, e.g. a test set.")
@click.option("--chunk-size", type=int, default=None, help="Rows per Zarr chunk.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_codec_option
@_scheduler_options
@_friendly_errors
def simulate_mlr(out, k, d, weights, noise, separation, kind, features, n_light, t_light, n_heavy,
                 t_heavy, n_light2, t_light2, seed, task_seed, chunk_size, overwrite, codec,
                 scheduler, n_workers, memory_limit):
    """Write a multi-task store of the mixed-linear-regression model, in parallel.

    \b
    Examples:
      streamlsq simulate mlr --out tasks.zarr --k 4 --d 8 --n-light 100000 --t-light 4
      streamlsq simulate mlr --out test.zarr --n-light 0 --n-heavy 0 --t-light2 30 --task-seed 1
    """
    from streamlsq.errors import InputError
    from streamlsq.simulate.tasks import simulate_mlr as run

    def numbers(text, name):
        try:
            return [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(f"--{name} must be comma-separated numbers, got {text!r}") from None

    noise_values = numbers(noise, "noise")
    rows = max(0, n_light * t_light + n_heavy * t_heavy + n_light2 * t_light2)
    with _client(scheduler, n_workers, memory_limit, data=rows * (d + 1) * 8) as client:
        path = run(out, k=k, d=d, weights=None if weights is None else numbers(weights, "weights"),
                   noise=noise_values[0] if len(noise_values) == 1 else noise_values,
                   separation=separation, kind=kind, features=features, n_light=n_light,
                   t_light=t_light,
                   n_heavy=n_heavy, t_heavy=t_heavy, n_light2=n_light2, t_light2=t_light2,
                   seed=seed, task_seed=task_seed, chunk_rows=chunk_size, overwrite=overwrite,
                   client=client, codec=codec)
    click.echo(f"wrote {path}: {n_light} light, {n_heavy} heavy, {n_light2} light2 tasks "
               f"(k = {k}, d = {d})")


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
