"""Applying a stream fit to new rows: ŷ = X·coef and, where the rows have targets, the
residuals y − ŷ, chunk-parallel (``streamlsq predict RESULT DATA``).

The coefficients are those of a stream fit's last recorded step (or of ``step=``); the new
rows are read as the fit read its data: the same feature variables along the same sample
dimension, with the constant column when the fit has an ``intercept`` (names given anew
override the fit's, for data laid out differently). One Dask task reads one storage chunk of
rows and writes its own chunk of ``yhat`` and ``residual``, so the result may be larger than
memory; the pooled squared error per target is summed on the way back.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import xarray as xr
import zarr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.location import locate
from streamlsq.io.provenance import provenance
from streamlsq.io.results import atomic_store, for_workers, open_result, prepare_output
from streamlsq.io.stream import StreamSource, open_stream
from streamlsq.kernels.recursions.registry import RECURSIONS
from streamlsq.runtime.client import dask_client
from streamlsq.runtime.progress import track_futures

__all__ = ["is_stream_fit", "predict_stream"]


def is_stream_fit(attrs: dict) -> bool:
    """Whether a result's attributes are those of a stream fit (a registered recursion)."""
    return str(attrs.get("method", "")) in RECURSIONS.stream_methods()


def _apply_chunk(source: StreamSource, a: int, b: int, W: np.ndarray, store, sample_dim: str):
    X = source.read_features(a, b)
    yhat = X @ W
    sums = {"sse": np.zeros(W.shape[1]), "rows": 0}
    residual = None
    if source.y_vars:
        residual = source.read_targets(a, b) - yhat
        sums = {"sse": (residual**2).sum(axis=0), "rows": b - a}
    if store is None:
        return {"yhat": yhat, "residual": residual}, sums
    g = zarr.open_group(store, mode="r+")
    g["yhat"][a:b] = yhat
    if residual is not None:
        g["residual"][a:b] = residual
    return None, sums


def predict_stream(
    result,
    data,
    *,
    out=None,
    group: str | None = None,
    x=None,
    y=None,
    sample_dim: str | None = None,
    step: int | None = None,
    storage_options: dict | None = None,
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
) -> xr.Dataset:
    """Apply the stream fit ``result`` to the rows of ``data``: ŷ and, with targets, residuals.

    ``result`` is a stream fit's result store (path, URL or zarr store) or its Dataset;
    ``data`` a stream store or Dataset holding the fit's feature variables (``x``, ``y``
    and ``sample_dim`` name them when they differ); its targets are optional. Returns (and
    with ``out`` writes, chunk by chunk and atomically) ``yhat (sample, target)`` and,
    where ``data`` has the targets, ``residual (sample, target)`` with the pooled
    ``mse`` per target as an attribute. The IRMA family's coefficients belong to basis
    functions, not to the columns of X: it is refused.

    Examples
    --------
    >>> import tempfile, numpy as np, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=2_000, n_features=3,
    ...                                  noise=0.0, seed=2)
    >>> fit = streamlsq.fit_stream(path, "kf4lls", out=f"{tmp.name}/fit.zarr")
    >>> pred = streamlsq.predict_stream(f"{tmp.name}/fit.zarr", path)
    >>> pred.yhat.dims, float(abs(pred.residual).max()) < 1e-9
    (('sample', 'target'), True)
    >>> tmp.cleanup()
    """
    fit = result if isinstance(result, xr.Dataset) else open_result(
        result, storage_options=storage_options)
    attrs = dict(fit.attrs)
    loc = None if isinstance(result, xr.Dataset) else locate(result)
    shown = (loc.shown or loc.url) if loc is not None else "the fit"
    if not is_stream_fit(attrs):
        raise InputError(f"{shown}: not the result of a stream fit (method "
                         f"{attrs.get('method')!r})")
    cls = RECURSIONS[attrs["method"]]
    if getattr(cls, "intercept_kind", "column") == "basis":
        raise InputError(f"{shown}: a {cls.name} fit has coefficients of basis functions, "
                         "not of the columns of X; apply it with the kernel's basis "
                         "(streamlsq.kernels.make_basis)")
    coef = fit.coef.isel(step=-1) if step is None else fit.coef.sel(step=step)
    W = np.asarray(coef.transpose("feature", "target").values, dtype=np.float64)
    labels = [str(v) for v in fit.feature.values]
    intercept = bool(labels) and labels[0] == "intercept"
    saved_x = json.loads(attrs.get("x_variables", '["X"]'))
    saved_y = json.loads(attrs.get("y_variables", '["y"]'))
    dim = sample_dim or attrs.get("sample_dim") or "sample"
    x_given = x is not None or saved_x != ["X"]
    source = open_stream(
        data, group,
        x=x if x is not None else (saved_x if x_given else None),
        y=y if y is not None else (saved_y if saved_y != ["y"] or x_given else None),
        sample_dim=dim if (sample_dim or x_given or dim != "sample") else None,
        fit_intercept=intercept, storage_options=storage_options, targets=False)
    if source.n_features != W.shape[0]:
        raise InputError(f"{source.label}: has {source.n_data_features} feature column(s) but "
                         f"{shown} was fitted on {W.shape[0] - int(intercept)}")
    fitted = labels[int(intercept):]
    if source.features and all(not v.isdigit() for v in fitted) and \
            [str(v) for v in source.features] != fitted:
        raise InputError(f"{source.label}: its features {list(map(str, source.features))} are "
                         f"not those {shown} was fitted on ({fitted})")
    if source.y_vars and source.n_targets != W.shape[1]:
        raise InputError(f"{source.label}: has {source.n_targets} target(s) but {shown} "
                         f"predicts {W.shape[1]}")
    target = fit.target.values
    inputs = [source] + ([loc] if loc is not None else [])
    if out is not None:
        prepare_output(out, overwrite, inputs, storage_options)
    parameters = {"step": None if step is None else int(step), "x": list(source.x_vars),
                  "y": list(source.y_vars), "sample_dim": source.sample_dim}
    out_attrs = provenance("predict", parameters, [source])
    out_attrs.update({"model": shown, "model_method": attrs["method"],
                      "model_step": int(coef.step), "fit_intercept": intercept})
    edges = source.chunk_edges()
    spans = list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
    K = W.shape[1]
    dims = [source.sample_dim, "target"]

    def run(store):
        tag = uuid.uuid4().hex[:8]
        with dask_client(client, scheduler) as cl:
            W_ = cl.scatter(W, broadcast=True)
            futures = [cl.submit(_apply_chunk, source, a, b, W_, store, source.sample_dim,
                                 key=f"predict-stream-{tag}-{i}", pure=False)
                       for i, (a, b) in enumerate(spans)]
            return track_futures(cl, futures, source.n_rows, "predict", enabled=progress)

    if out is None:
        parts = run(None)
        ds = xr.Dataset({"yhat": (dims, np.concatenate([p[0]["yhat"] for p in parts]))},
                        coords={"target": target})
        if source.y_vars:
            ds["residual"] = (dims, np.concatenate([p[0]["residual"] for p in parts]))
        _mse(out_attrs, parts, source)
        ds.attrs.update(out_attrs)
        ds.attrs["complete"] = True
        return ds
    with atomic_store(out, overwrite, inputs, storage_options) as tmp:
        store = for_workers(tmp)
        g = zarr.open_group(store, mode="w", zarr_format=3)
        names = ["yhat"] + (["residual"] if source.y_vars else [])
        for name in names:
            g.create_array(name, shape=(source.n_rows, K), chunks=(source.chunk_rows, K),
                           dtype="float64", dimension_names=dims, fill_value=np.nan)
        labels_t = np.asarray(target)
        g.create_array("target", shape=(K,), dtype=str if labels_t.dtype.kind in "UO"
                       else labels_t.dtype, dimension_names=["target"])[...] = labels_t
        parts = run(store)
        _mse(out_attrs, parts, source)
        g.attrs.update(out_attrs | {"complete": False})
    return open_result(out, storage_options=storage_options)


def _mse(attrs: dict, parts, source) -> None:
    if not source.y_vars:
        return
    sse = np.sum([p[1]["sse"] for p in parts], axis=0)
    rows = int(sum(p[1]["rows"] for p in parts))
    attrs["mse"] = [float(v) for v in np.atleast_1d(sse / max(rows, 1))]
    attrs["rows"] = rows
