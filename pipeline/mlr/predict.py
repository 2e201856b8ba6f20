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

import contextlib
import os
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from distributed import Client

from streamlsq.errors import InputError, check_int
from streamlsq.io.codecs import compressors
from streamlsq.io.location import locate
from streamlsq.io.provenance import provenance
from streamlsq.io.results import atomic_store, for_workers, open_result, prepare_output
from streamlsq.io.tasks import (
    CHUNK_TASKS,
    TaskChunk,
    TaskSource,
    open_tasks,
    plan_chunks,
    reading_chunk,
)
from streamlsq.kernels import mlr
from streamlsq.runtime.client import dask_client
from streamlsq.runtime.reduce import map_chunks, tree_reduce, wait_progress

__all__ = ["ESTIMATORS", "predict"]

ESTIMATORS = ("bayes", "map", "lstsq")


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


def _predict_rows(cl, source: TaskSource, coef, path, name, progress):
    """ŷ for every row of ``source`` (a map over its storage chunks of rows)."""
    ptr = cl.scatter(source.task_ptr(), broadcast=True)
    W = None if coef is None else cl.scatter(coef, broadcast=True)
    chunks = _row_chunks(source)
    futures = [cl.submit(_yhat_chunk, a, b, source, ptr, W, path, name, pure=False)
               for a, b in chunks]
    wait_progress(cl, futures, [b - a for a, b in chunks], f"predict {name}", "rows",
                  enabled=progress)
    parts = cl.gather(futures)
    return None if path is not None else np.concatenate(parts) if parts else np.empty(0)


def _load_model(model) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    ds = open_result(model)
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
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
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
    if estimator not in ESTIMATORS:
        raise InputError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    holdout = check_int("holdout", holdout, 0)
    W, s2, p, model_attrs = _load_model(model)
    source = open_tasks(tasks, group)
    if W.shape[1] != source.n_features:
        raise InputError(
            f"{source.label}: variable 'X' has {source.n_features} features but the model "
            f"{model} has {W.shape[1]}"
        )
    ptr = source.task_ptr()
    sizes = np.diff(ptr)
    if holdout and (sizes < holdout).any():
        i = int(np.flatnonzero(sizes < holdout)[0])
        raise InputError(
            f"{source.label}: task {i} has {int(sizes[i])} row(s), fewer than the {holdout} "
            "to hold out"
        )
    covariates = None
    if new_rows is not None:
        covariates = open_tasks(new_rows, targets=False)
        if covariates.n_tasks != source.n_tasks or covariates.n_features != source.n_features:
            raise InputError(
                f"{covariates.label}: variable 'task_ptr' has {covariates.n_tasks} tasks and 'X' "
                f"{covariates.n_features} features; {source.label} has {source.n_tasks} tasks "
                f"and {source.n_features} features"
            )
    inputs = [source, locate(model) or model] + ([covariates] if covariates is not None
                                                 else [])
    if out is not None:
        out = prepare_output(out, overwrite, inputs=inputs)
    # uniform task ranges: chunk j of the plan is chunk j of every output array
    chunks = plan_chunks(ptr, None, chunk_tasks, max_rows=source.n_rows + 1)
    K, d, n = W.shape[0], W.shape[1], source.n_tasks
    attrs = provenance("predict", {"estimator": estimator, "holdout": int(holdout),
                                   "chunk_tasks": int(chunk_tasks), "yhat": bool(yhat),
                                   "new_rows": None if new_rows is None else str(new_rows)},
                       [source])
    attrs.update({
        "estimator": estimator,
        "model": str(getattr(locate(model), "shown", "") or model),
        "model_method": str(model_attrs.get("method", "")),
        "holdout": int(holdout),
    })
    target = (atomic_store(out, overwrite, inputs) if out is not None
              else contextlib.nullcontext())
    with target as tmp:
        if tmp is not None:
            _create_result(tmp, n, d, K, chunk_tasks, holdout)
            if yhat:
                _create_rows(tmp, "yhat", "row", source)
            if covariates is not None:
                _create_rows(tmp, "new_yhat", "new_row", covariates)
        with dask_client(client, scheduler) as cl:
            futures = map_chunks(cl, _predict_chunk, chunks, source, W, s2, p, estimator,
                                 int(holdout), None if tmp is None else for_workers(tmp),
                                 name="predict")
            total = tree_reduce(cl, futures, mlr.combine_stats, leaf=_sums, name="predict-sse")
            wait_progress(cl, futures, [c.n for c in chunks], "predict", enabled=progress)
            sums = total.result()
            parts = None if tmp is not None else [f[0] for f in cl.gather(futures)]
            coef = None if parts is None else np.concatenate([q["coef"] for q in parts])
            rows = {}
            for name, store, wanted in (("yhat", source, yhat),
                                        ("new_yhat", covariates, covariates is not None)):
                if wanted:
                    rows[name] = _predict_rows(cl, store, coef,
                                               None if tmp is None else for_workers(tmp),
                                               name, progress)
        if holdout:
            attrs["holdout_mse"] = float(sums["sse"] / sums["rows"])
            attrs["holdout_rows"] = int(sums["rows"])
        if tmp is None:
            ds = _in_memory(parts, attrs)
            for name, values in rows.items():
                ds[name] = (("row" if name == "yhat" else "new_row",), values)
            return ds
        zarr.open_group(for_workers(tmp), mode="r+").attrs.update(attrs)
    return open_result(out)


def _sums(result):
    return result[1]


def _create_result(path: Path, n: int, d: int, K: int, chunk_tasks: int, holdout: int) -> None:
    g = zarr.open_group(for_workers(path), mode="w", zarr_format=3)
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


def _create_rows(path: Path, name: str, dim: str, source: TaskSource) -> None:
    g = zarr.open_group(for_workers(path), mode="r+")
    g.create_array(name, shape=(source.n_rows,), chunks=(max(1, source.chunk_rows),),
                   dtype="float64", dimension_names=[dim], fill_value=np.nan,
                   compressors=compressors())


def _in_memory(parts, attrs) -> xr.Dataset:
    dims = {"coef": ("task", "feature"), "posterior": ("task", "cluster"),
            "holdout_sse": ("task",), "holdout_rows": ("task",)}
    ds = xr.Dataset({name: (dims[name], np.concatenate([p[name] for p in parts]))
                     for name in parts[0]})
    ds.attrs.update(attrs)
    ds.attrs["complete"] = True
    return ds
