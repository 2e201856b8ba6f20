"""``streamlsq predict``: estimate new tasks under a meta-learned model, or apply a stream fit
to new rows."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _friendly_errors,
    _scheduler_options,
)
from streamlsq.cli.options import click_options, values
from streamlsq.options.fit import PREDICT_STREAM
from streamlsq.options.mlr import PREDICT
from streamlsq.options.run import CLUSTER

__all__ = ["predict"]


@click.command(context_settings=CONTEXT)
@click.argument("model", type=click.Path())
@click.argument("tasks", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Result store to create.")
@click_options(PREDICT)  # the multi-task prediction's
@click_options(PREDICT_STREAM, exclude=("group",))  # a stream fit's options
@click.option("--overwrite", is_flag=True, help="Replace an existing result store.")
@_scheduler_options
@_friendly_errors
def predict(model, tasks, out, estimator, holdout, yhat, new_rows, chunk_tasks, x, y,
            sample_dim, step, intervals, alpha, overwrite, scheduler, n_workers, memory_limit):
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
      streamlsq predict fit.zarr new-rows.zarr --out yhat.zarr --intervals --alpha 0.1
    """
    # the multi-task options checked before any input is opened or cluster started
    tasks_options = values(PREDICT, {"estimator": estimator, "holdout": holdout, "yhat": yhat,
                                     "new_rows": new_rows, "chunk_tasks": chunk_tasks})
    values(CLUSTER, {"scheduler": scheduler, "n_workers": n_workers,
                     "memory_limit": memory_limit})
    stream = values(PREDICT_STREAM, {"x": x, "y": y, "sample_dim": sample_dim, "step": step,
                                     "intervals": intervals, "alpha": alpha})
    from streamlsq.mlr.predict import predict as run
    from streamlsq.prediction import applies_to_rows, predict_rows

    flags = _given_flags()
    if applies_to_rows(model, x=stream.get("x"), y=stream.get("y"), given=flags,
                       spelled=flags.get):
        with _client(scheduler, n_workers, memory_limit) as client:
            ds = predict_rows(model, tasks, out=out, overwrite=overwrite, client=client,
                              **stream)
        line = (f"wrote {out}: yhat for {ds.sizes[ds.yhat.dims[0]]} rows of {tasks} from the "
                f"{ds.attrs['model_method']} fit {model} (step {ds.attrs['model_step']})")
        if intervals:
            line += f", with {100 * (1 - ds.attrs['conf_int_alpha']):g}% intervals"
        if "mse" in ds.attrs:
            line += "; residual mean square " + ", ".join(f"{v:.4g}" for v in ds.attrs["mse"])
        click.echo(line)
        return

    with _client(scheduler, n_workers, memory_limit, data=tasks) as client:
        ds = run(model, tasks, out=out, overwrite=overwrite, client=client, **tasks_options)
    line = f"wrote {out}: {ds.sizes['task']} tasks, estimator {ds.attrs['estimator']}"
    if ds.attrs["holdout"]:
        line += (f"; held-out MSE {ds.attrs['holdout_mse']:.4g} over "
                 f"{ds.attrs['holdout_rows']} rows")
    if yhat:
        line += f"; yhat for {ds.sizes['row']} rows"
    if new_rows is not None:
        line += f"; new_yhat for {ds.sizes['new_row']} rows of {new_rows}"
    click.echo(line)


def _given_flags() -> dict[str, str]:
    """The options the command line was given (not left at their defaults), by name, with
    their flags (``holdout`` → ``--holdout``): what :func:`streamlsq.prediction.
    refuse_other_kind` refuses for the other kind of result."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return {p.name: p.opts[0] for p in ctx.command.params
            if ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)}
