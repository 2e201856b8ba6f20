"""Prediction for new tasks (``docs/algorithms.md#prediction``) as a map over chunks of a
multi-task store.

Each Dask task reads a chunk of new tasks, computes the posterior over the
model's clusters (``kernels.mlr.posterior_log_probs``), the task's regression
vector under the chosen estimator — ``bayes`` (posterior mean), ``map`` (most
probable cluster's ŵ) or ``lstsq`` (the task's own least squares, the
baseline) — and writes them into its own chunk of the result store, so the
result can be larger than memory. Whitening needs no special care here: the
model stores raw-feature coefficients and the posterior depends on x only
through the residuals y − ŵᵀx.

Held-out error (``holdout=N``): the last N rows of every task are held out
(the same rule as ``metalearn(..., holdout=N)``); the estimators see the
first tᵢ − N rows, and the squared error on the held-out rows is stored per
task (``holdout_sse``, ``holdout_rows``) and pooled over all tasks in the
``holdout_mse`` attribute (Σ sse / Σ rows).

Predicted targets (``yhat=True``): ŷⱼ = xⱼᵀŵ_{task(j)} for every row of the
task store (``yhat (row,)``; with ``holdout=N`` the last N rows of each task are
the held-out ones), and with ``new_rows=STORE`` for every row of a second store
of new covariates (``X (row, feature)`` and ``task_ptr`` with the same tasks,
``y`` optional) as ``new_yhat (new_row,)``. A second map, over row chunks of
the store that holds the rows, reads each chunk's rows and its tasks'
coefficients (from the result store being written, or scattered when the result
stays in memory) and writes its own chunk of ŷ.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.codecs import compressors
from streamlsq.io.location import locate
from streamlsq.io.tasks import (
    CHUNK_TASKS,
    TaskChunk,
    TaskSource,
    plan_chunks,
    reading_chunk,
)
from streamlsq.jobs import Context, Job, Run, RunOptions
from streamlsq.kernels import mlr
from streamlsq.options.mlr import ESTIMATORS, PREDICT
from streamlsq.runtime.reduce import fold_units, map_chunks, tree_groups, tree_reduce, wait_progress

__all__ = ["ESTIMATORS", "TaskPrediction", "predict"]

# ESTIMATORS, the estimators of a task's regression vector, is declared with the options
# (streamlsq.options.mlr)


def _predict_chunk(chunk: TaskChunk, source: TaskSource, W, s2, p, estimator, holdout, path):
    with reading_chunk(source, chunk):
        X, y, ptr = source.read_tasks(chunk.lo, chunk.hi, ptr=chunk.ptr)
        held = None
        if holdout:
            (X, y, ptr), held = mlr.holdout_split(X, y, ptr, holdout)
        posterior = np.exp(mlr.posterior_log_probs(X, y, ptr, W, s2, p))
        if estimator == "lstsq":
            coef = mlr.per_task_lstsq(X, y, ptr)
        else:
            coef = mlr.predict_coef(posterior, W, estimator)
        out = {"coef": coef, "posterior": posterior}
        sums = {"sse": np.float64(0.0), "rows": np.int64(0)}
        if held is not None:
            sse, rows = mlr.task_prediction_sse(*held, coef)
            out.update(holdout_sse=sse, holdout_rows=rows)
            sums = {"sse": sse.sum(), "rows": rows.sum()}
    if path is None:
        return out, sums
    g = zarr.open_group(path, mode="r+")
    for name, values in out.items():
        g[name][chunk.lo : chunk.hi] = values
    return None, sums


def _predict_group(chunks: list, levels: int, *args):
    """Dask task: :func:`_predict_chunk` over consecutive chunks, one after another; their
    outputs in order and their sums combined as the lowest ``levels`` levels of the
    reduction tree (:class:`TreeFold`: the same bits as one Dask task per chunk)."""
    return fold_units(chunks, lambda chunk: _predict_chunk(chunk, *args), mlr.combine_stats,
                      levels, leaf=_sums, keep=_outputs)


def _outputs(result):
    return result[0]


def _yhat_chunk(r0: int, r1: int, source: TaskSource, ptr, coef, path, name):
    """ŷ for rows r0:r1 of ``source``: the tasks spanning them, their coefficients, a product."""
    t0 = int(np.searchsorted(ptr, r0, side="right")) - 1
    t1 = int(np.searchsorted(ptr, r1 - 1, side="right"))
    local = np.clip(ptr[t0 : t1 + 1], r0, r1) - r0
    X = source.read_rows("X", r0, r1)
    W = (zarr.open_group(path, mode="r")["coef"][t0:t1] if coef is None else coef[t0:t1])
    yhat = mlr.predict_rows(X, local, W)
    if path is None:
        return yhat
    zarr.open_group(path, mode="r+")[name][r0:r1] = yhat
    return None


def _row_chunks(source: TaskSource) -> list[tuple[int, int]]:
    step = max(1, source.chunk_rows)
    return [(a, min(a + step, source.n_rows)) for a in range(0, source.n_rows, step)]


def _predict_rows(ctx, source: TaskSource, coef, path, name):
    """ŷ for every row of ``source`` (a map over its storage chunks of rows)."""
    cl = ctx.client
    # hash=False: a second pass of the same job scatters the same arrays again; under a
    # content key it could be released by the first pass's clean-up while the second uses it
    ptr = cl.scatter(source.task_ptr(), broadcast=True, hash=False)
    W = None if coef is None else cl.scatter(coef, broadcast=True, hash=False)
    chunks = _row_chunks(source)
    tag = uuid.uuid4().hex[:8]
    futures = [ctx.submit(_yhat_chunk, a, b, source, ptr, W, path, name, pure=False,
                          key=f"predict-{name}-{tag}-{i}")
               for i, (a, b) in enumerate(chunks)]
    wait_progress(cl, futures, [b - a for a, b in chunks], f"predict {name}", "rows",
                  enabled=ctx.progress)
    parts = cl.gather(futures)
    return None if path is not None else np.concatenate(parts) if parts else np.empty(0)


def _load_model(run: Run, model) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The model's coefficients, noise variances, weights and attributes, opened by ``run``."""
    if isinstance(model, xr.Dataset):  # zarr's 'Unsupported type for store_like: Dataset'
        raise InputError(
            f"the model: a model of tasks (method {model.attrs.get('method')!r}) held in "
            "memory; predict reads a model of tasks from its store: write it with out=PATH "
            "and give PATH")
    ds = run.open_input("result", model)
    for name in ("coef", "noise_var", "weight"):
        if name not in ds:
            raise InputError(f"{model}: variable '{name}' is missing; not a model store")
    return (ds.coef.values.astype(np.float64), ds.noise_var.values.astype(np.float64),
            ds.weight.values.astype(np.float64), dict(ds.attrs))


def predict(
    model: str | os.PathLike,
    tasks: str | os.PathLike,
    *,
    out: str | os.PathLike | None = None,
    estimator: str = "bayes",
    holdout: int = 0,
    yhat: bool = False,
    new_rows: str | os.PathLike | None = None,
    chunk_tasks: int = CHUNK_TASKS,
    group: str | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Per-task regression vectors for the tasks of ``tasks`` under the model store ``model``.

    Returns (and with ``out`` writes, chunk-parallel and atomically) an
    xarray Dataset with ``coef (task, feature)``, ``posterior (task, cluster)``
    and, with ``holdout`` = N > 0, ``holdout_sse (task)``, ``holdout_rows
    (task)`` and the pooled ``holdout_mse`` attribute. Every task of the store
    is predicted, whatever its role. ``yhat=True`` adds ``yhat (row,)``, the
    predicted target of every row of ``tasks`` (held-out rows included);
    ``new_rows`` (a store with ``X (row, feature)`` and a ``task_ptr`` over the
    same tasks) adds ``new_yhat (new_row,)`` for its rows.

    ``**run``: the options of the run around the job (:class:`streamlsq.jobs.RunOptions`).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> train = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=4_000,
    ...                                t_light=4, n_heavy=100, t_heavy=60, n_light2=1_000,
    ...                                t_light2=10, seed=1)
    >>> model = streamlsq.metalearn(train, 2, out=f"{tmp.name}/model.zarr")
    >>> new = streamlsq.simulate_mlr(f"{tmp.name}/new.zarr", k=2, d=4, n_light=0, n_heavy=0,
    ...                              n_light2=200, t_light2=6, seed=1, task_seed=7)
    >>> pred = streamlsq.predict(f"{tmp.name}/model.zarr", new, holdout=2)
    >>> pred.coef.dims, pred.posterior.shape
    (('task', 'feature'), (200, 2))
    >>> pred = streamlsq.predict(f"{tmp.name}/model.zarr", new, holdout=2, yhat=True)
    >>> pred.yhat.dims, pred.sizes["row"]  # every row, the last 2 of each task held out
    (('row',), 1200)
    >>> tmp.cleanup()
    """
    job = TaskPrediction(model, tasks, group=group, estimator=estimator, holdout=holdout,
                         yhat=yhat, new_rows=new_rows, chunk_tasks=chunk_tasks)
    return Run(out, **run).execute(job)


@dataclass(eq=False)
class TaskPrediction(Job):
    """A meta-learned model applied to the tasks of a store (:func:`predict`): reads the
    model and the tasks by chunks of work, computes each task's posterior and regression
    vector (and ŷ of rows), writes them chunk by chunk."""

    model: Any
    tasks: Any
    group: str | None = None
    estimator: str = "bayes"
    holdout: int = 0
    yhat: bool = False
    new_rows: Any = None
    chunk_tasks: int = CHUNK_TASKS

    options = PREDICT
    name = "predict"
    writes_chunks = True

    def open(self, run: Run) -> list:
        self.W, self.s2, self.p, self.model_attrs = _load_model(run, self.model)
        source = self.source = run.open_input("tasks", self.tasks, self.group)
        if self.W.shape[1] != source.n_features:
            raise InputError(
                f"{source.label}: variable 'X' has {source.n_features} features but the model "
                f"{self.model} has {self.W.shape[1]}")
        sizes = np.diff(source.task_ptr())
        if self.holdout and (sizes < self.holdout).any():
            i = int(np.flatnonzero(sizes < self.holdout)[0])
            raise InputError(f"{source.label}: task {i} has {int(sizes[i])} row(s), fewer than "
                             f"the {self.holdout} to hold out")
        self.covariates = None
        if self.new_rows is not None:
            new = self.covariates = run.open_input("tasks", self.new_rows, targets=False)
            if new.n_tasks != source.n_tasks or new.n_features != source.n_features:
                raise InputError(
                    f"{new.label}: variable 'task_ptr' has {new.n_tasks} tasks and 'X' "
                    f"{new.n_features} features; {source.label} has {source.n_tasks} tasks "
                    f"and {source.n_features} features")
        return [source, locate(self.model) or self.model, *([self.covariates]
                                                            if self.covariates else [])]

    def parameters(self) -> dict:
        return {"estimator": self.estimator, "holdout": int(self.holdout),
                "chunk_tasks": int(self.chunk_tasks), "yhat": bool(self.yhat),
                "new_rows": None if self.new_rows is None else str(self.new_rows)}

    def compute(self, ctx: Context) -> xr.Dataset:
        source, store = self.source, ctx.store
        # uniform task ranges: chunk j of the plan is chunk j of every output array
        chunks = plan_chunks(source.task_ptr(), None, self.chunk_tasks,
                             max_rows=source.n_rows + 1)
        if store is not None:
            _create_result(store, source.n_tasks, source.n_features, self.W.shape[0],
                           self.chunk_tasks, self.holdout)
        # several chunks per Dask task, one subtree of the reduction each
        levels, groups = tree_groups(ctx.client, chunks,
                                     source.n_rows * (source.n_features + 1) * 8)
        futures = map_chunks(ctx.client, _predict_group, groups, levels, source, self.W,
                             self.s2, self.p, self.estimator, int(self.holdout), store,
                             name="predict", submit=ctx.submit)
        total = tree_reduce(ctx.client, futures, mlr.combine_stats, leaf=_sums,
                            name="predict-sse")
        wait_progress(ctx.client, futures, [sum(c.n for c in g) for g in groups], "predict",
                      enabled=ctx.progress)
        sums = total.result()
        ds = xr.Dataset()
        if store is None:
            ds = _in_memory([out for f in ctx.client.gather(futures) for out in f[0]])
        coef = None if store is not None else ds.coef.values
        for name, rows, dim in (("yhat", source if self.yhat else None, "row"),
                                ("new_yhat", self.covariates, "new_row")):
            if rows is not None:
                if store is not None:
                    _create_rows(store, name, dim, rows)
                values = _predict_rows(ctx, rows, coef, store, name)
                if values is not None:
                    ds[name] = ((dim,), values)
        ds.attrs.update({"estimator": self.estimator,
                         "model": str(getattr(locate(self.model), "shown", "") or self.model),
                         "model_method": str(self.model_attrs.get("method", "")),
                         "holdout": int(self.holdout)})
        if self.holdout:
            ds.attrs.update({"holdout_mse": float(sums["sse"] / sums["rows"]),
                             "holdout_rows": int(sums["rows"])})
        return ds


def _sums(result):
    return result[1]


def _create_result(store, n: int, d: int, K: int, chunk_tasks: int, holdout: int) -> None:
    g = zarr.open_group(store, mode="w", zarr_format=3)
    c = min(chunk_tasks, n)
    spec = {"coef": ((n, d), (c, d), "float64", ["task", "feature"]),
            "posterior": ((n, K), (c, K), "float64", ["task", "cluster"])}
    if holdout:
        spec["holdout_sse"] = ((n,), (c,), "float64", ["task"])
        spec["holdout_rows"] = ((n,), (c,), "int64", ["task"])
    for name, (shape, chunks, dtype, dims) in spec.items():
        g.create_array(name, shape=shape, chunks=chunks, dtype=dtype, dimension_names=dims,
                       fill_value=np.nan if dtype == "float64" else 0,
                       compressors=compressors(None, np.dtype(dtype).itemsize))
    g.attrs["complete"] = False


def _create_rows(store, name: str, dim: str, source: TaskSource) -> None:
    g = zarr.open_group(store, mode="r+")
    g.create_array(name, shape=(source.n_rows,), chunks=(max(1, source.chunk_rows),),
                   dtype="float64", dimension_names=[dim], fill_value=np.nan,
                   compressors=compressors())


def _in_memory(parts) -> xr.Dataset:
    dims = {"coef": ("task", "feature"), "posterior": ("task", "cluster"),
            "holdout_sse": ("task",), "holdout_rows": ("task",)}
    ds = xr.Dataset({name: (dims[name], np.concatenate([p[name] for p in parts]))
                     for name in parts[0]})
    ds.attrs["complete"] = True
    return ds
