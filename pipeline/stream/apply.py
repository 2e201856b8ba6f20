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

import uuid
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.location import locate
from streamlsq.io.sources import StreamSource
from streamlsq.io.stores import DROP_REMEDY
from streamlsq.jobs import Context, Job, Run, RunOptions
from streamlsq.kernels.inference.prediction import PREDICTION_COLUMNS, prediction_intervals
from streamlsq.kernels.recursions.registry import RECURSIONS
from streamlsq.options.fit import PREDICT_STREAM
from streamlsq.runtime.progress import track_futures
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.layout import intercept_label
from streamlsq.stream.statistics import checked_alpha

__all__ = ["StreamPrediction", "check_names_of_rows", "is_stream_fit", "predict_stream"]


def is_stream_fit(attrs: dict) -> bool:
    """Whether a result's attributes are those of a stream fit (a registered recursion)."""
    return str(attrs.get("method", "")) in RECURSIONS.stream_methods()


def check_names_of_rows(attrs: dict, shown: str, x=None, y=None) -> None:
    """Refuse new rows' variables named anew (``x``, ``y``: ``--x``, ``--y``) for a formula
    fit (its attribute ``formula``): the formula builds the features and the targets from
    the rows' columns, and names given beside it would be ignored."""
    given = [name for name, value in (("x", x), ("y", y)) if value is not None]
    formula = attrs.get("formula")
    if formula and given:
        flags = " and ".join(f"--{name}" for name in given)
        keywords = ", ".join(f"{name}=" for name in given)
        raise InputError(f"{shown}: a fit of the formula {formula!r}, which builds the "
                         f"features and the targets from the columns of the new rows: leave "
                         f"out {flags} ({keywords})")


#: what a refused NaN in the new rows advises: a prediction has no ``--missing``
PREDICT_REMEDY = ("remove or impute the missing values, or leave their rows out of DATA: "
                  "predict gives every row a prediction (it has no --missing)")


def read_new_rows(read, a: int, b: int) -> np.ndarray:
    """``read(a, b)`` (the new rows' features or targets); a refused NaN advises what
    predict offers, not a fit's ``--missing drop``."""
    try:
        return read(a, b)
    except InputError as exc:
        if DROP_REMEDY not in str(exc):
            raise
        raise InputError(str(exc).replace(DROP_REMEDY, PREDICT_REMEDY)) from None


def _apply_chunk(source: StreamSource, a: int, b: int, W: np.ndarray, store,
                 intervals: dict | None = None):
    X = read_new_rows(source.read_features, a, b)
    out = {"yhat": X @ W}
    sums = {"sse": np.zeros(W.shape[1]), "rows": 0}
    if source.y_vars:
        out["residual"] = read_new_rows(source.read_targets, a, b) - out["yhat"]
        sums = {"sse": (out["residual"]**2).sum(axis=0), "rows": b - a}
    if intervals is not None:  # statsmodels' summary frame: the mean is yhat
        frame = prediction_intervals(X, W, **intervals)
        out.update({name: frame[name] for name in PREDICTION_COLUMNS})
    if store is None:
        return out, sums
    g = zarr.open_group(store, mode="r+")
    for name, values in out.items():
        g[name][a:b] = values
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
    intervals: bool = False,
    alpha: float | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Apply the stream fit ``result`` to the rows of ``data``: ŷ and, with targets, residuals.

    ``result`` is a stream fit's result store (path, URL or zarr store) or its Dataset;
    ``data`` a stream store or Dataset holding the fit's feature variables (``x``, ``y``
    and ``sample_dim`` name them when they differ); its targets are optional. Returns (and
    with ``out`` writes, chunk by chunk and atomically) ``yhat (sample, target)`` and,
    where ``data`` has the targets, ``residual (sample, target)`` with the pooled
    ``mse`` per target as an attribute. The IRMA family's coefficients belong to basis
    functions, not to the columns of X: it is refused.

    ``intervals=True`` (a least-squares fit with statistics) also writes the columns of
    statsmodels' ``get_prediction().summary_frame(alpha)`` beside ``yhat`` (its mean):
    ``mean_se``, ``mean_ci_lower``, ``mean_ci_upper``, ``obs_ci_lower``, ``obs_ci_upper``
    ``(sample, target)``, from the fit's covariance (robust when it has one) and scale;
    ``alpha`` defaults to the fit's (``conf_int_alpha``).

    ``**run``: the options of the run around the job (:class:`streamlsq.jobs.RunOptions`).

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
    given = {name: value for name, value in locals().items() if name in PREDICT_STREAM}
    return Run(out, **run).execute(StreamPrediction(result, data, **given))


@dataclass
class FitCoefficients:
    """What applying a stream fit reads from it: the coefficients ``W (feature, target)`` of
    one recorded ``step``, their labels and targets, whether the first is an intercept."""

    W: np.ndarray
    step: int
    method: str
    labels: list[str]
    target: np.ndarray
    formula: str | None = None

    @property
    def intercept(self) -> bool:
        return bool(self.labels) and self.labels[0] == intercept_label(self.formula)


def fit_coefficients(fit: xr.Dataset, step: int | None, shown: str) -> FitCoefficients:
    """The coefficients of the recorded ``step`` (default the last) of the stream fit ``fit``
    (named ``shown`` in refusals); the IRMA family's, of basis functions, are refused."""
    attrs = dict(fit.attrs)
    if not is_stream_fit(attrs):
        raise InputError(f"{shown}: not the result of a stream fit (method "
                         f"{attrs.get('method')!r})")
    declaration = RECURSIONS.declaration(attrs["method"])
    if declaration.intercept_kind == "basis":
        raise InputError(f"{shown}: a {declaration.name} fit has coefficients of basis "
                         "functions, not of the columns of X; apply it with the kernel's "
                         "basis (streamlsq.kernels.make_basis)")
    if step is not None:
        check_recorded_step(step, fit.step.values, shown)
    coef = fit.coef.isel(step=-1) if step is None else fit.coef.sel(step=step)
    return FitCoefficients(
        W=np.asarray(coef.transpose("feature", "target").values, dtype=np.float64),
        step=int(coef.step), method=attrs["method"],
        labels=[str(v) for v in fit.feature.values], target=fit.target.values,
        formula=attrs.get("formula") or None)


def check_recorded_step(step: int, recorded, shown: str) -> None:
    """Refuse a ``step`` (``--step``) that the fit ``shown`` did not record, naming the steps
    it recorded (all of them when few, else the first, the last and how many)."""
    recorded = [int(s) for s in np.asarray(recorded).ravel()]
    if step in recorded:
        return
    if len(recorded) == 1:
        raise InputError(f"{shown}: step {step} was not recorded; the fit recorded one step, "
                         f"{recorded[0]}: leave out --step (step=)")
    steps = ", ".join(map(str, recorded)) if len(recorded) <= 10 else (
        f"{recorded[0]}, {recorded[1]}, … {recorded[-1]} ({len(recorded)} in all, its "
        "coordinate step)")
    raise InputError(f"{shown}: step {step} was not recorded; the fit recorded the steps "
                     f"{steps}: give one of them to --step (step=), or leave it out for the "
                     "last")


def prediction_uncertainty(fit: xr.Dataset, step: int, alpha: float | None,
                           shown: str) -> dict:
    """What the intervals of predictions need from the fit: the covariance of its final
    coefficients, its scale, df_resid, whether it uses t (not for a robust covariance) and
    α (default the fit's)."""
    if "cov_params" not in fit or "scale" not in fit:
        why = fit.attrs.get("statistics_unavailable", "it holds no statistics")
        raise InputError(f"{shown}: --intervals needs the statistics of a least-squares fit; "
                         f"this fit has none: {why}")
    if step != int(fit.step.values[-1]):
        raise InputError(f"{shown}: --intervals come from the covariance of the final "
                         f"coefficients (step {int(fit.step.values[-1])}); leave out --step")
    return {"cov_params": np.asarray(fit.cov_params.transpose("feature", "feature2",
                                                              "target").values),
            "scale": np.asarray(fit.scale.values),
            "df_resid": float(fit.df_resid.values[0]),
            "alpha": checked_alpha(fit.attrs.get("conf_int_alpha") if alpha is None
                                   else alpha),
            "use_t": bool(fit.attrs.get("use_t", True))}


def check_new_rows(source: StreamSource, coef: FitCoefficients, shown: str,
                   targets: bool = True) -> None:
    """Refuse new rows whose features or (``targets``) targets are not those the fit was
    fitted on."""
    W, intercept = coef.W, coef.intercept
    if source.n_features != W.shape[0]:
        raise InputError(f"{source.label}: has {source.n_data_features} feature column(s) "
                         f"but {shown} was fitted on {W.shape[0] - int(intercept)}")
    fitted = coef.labels[int(intercept):]
    if source.features and all(not v.isdigit() for v in fitted) and \
            [str(v) for v in source.features] != fitted:
        raise InputError(f"{source.label}: its features "
                         f"{list(map(str, source.features))} are not those {shown} was "
                         f"fitted on ({fitted}): its coefficients apply to its features by "
                         "name and in order; give the new rows those columns (renamed if "
                         "need be) and leave out --x (x=), or name them in that order")
    if targets and source.y_vars and source.n_targets != W.shape[1]:
        raise InputError(f"{source.label}: has {source.n_targets} target(s) but {shown} "
                         f"predicts {W.shape[1]}")


def create_prediction_arrays(store, source: StreamSource, columns: list[str],
                             target: np.ndarray, dims) -> None:
    """The result's arrays ``columns (sample, target)`` in the temporary store, which the
    Dask tasks fill chunk by chunk, and the target labels."""
    K = len(target)
    g = zarr.open_group(store, mode="w", zarr_format=3)
    for name in columns:
        g.create_array(name, shape=(source.n_rows, K), chunks=(source.chunk_rows, K),
                       dtype="float64", dimension_names=dims, fill_value=np.nan)
    labels = np.asarray(target)
    # stored even when it equals the fill value (target 0): every chunk of a result is
    g.create_array("target", shape=(K,), dtype=str if labels.dtype.kind in "UO"
                   else labels.dtype, dimension_names=["target"],
                   config={"write_empty_chunks": True})[...] = labels


def prediction_columns(source: StreamSource, intervals: bool) -> list[str]:
    """The arrays (sample, target) of a prediction: ŷ, the residuals where the rows have
    targets, the columns of statsmodels' summary frame with intervals."""
    return (["yhat"] + (["residual"] if source.y_vars else [])
            + (list(PREDICTION_COLUMNS) if intervals else []))


def predict_chunks(ctx: Context, source, name: str, task) -> list:
    """Each chunk of ``source`` predicted by one task, ``task(a, b)`` giving the function
    and its arguments for rows a:b (keys ``name-TAG-i``), with the progress bar; the
    tasks' results in the chunks' order."""
    edges = source.chunk_edges()
    tag = uuid.uuid4().hex[:8]
    futures = [ctx.submit(*task(a, b), key=f"{name}-{tag}-{i}", pure=False)
               for i, (a, b) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist(),
                                              strict=True))]
    return track_futures(ctx.client, futures, source.n_rows, "predict", enabled=ctx.progress)


@dataclass(eq=False)
class StreamPrediction(Job):
    """A stream fit applied to new rows: reads the fit's coefficients and the rows, computes
    ŷ (and residuals where the rows have targets) chunk by chunk, writes ``yhat`` and
    ``residual (sample, target)`` (:func:`predict_stream`)."""

    result: Any
    data: Any
    group: str | None = None
    x: Any = None
    y: Any = None
    sample_dim: str | None = None
    step: int | None = None
    intervals: bool = False
    alpha: float | None = None

    options = PREDICT_STREAM
    name = "predict"
    writes_chunks = True

    def open(self, run: Run) -> list:
        fit = self.result if isinstance(self.result, xr.Dataset) else run.open_input(
            "result", self.result)
        self.model = None if isinstance(self.result, xr.Dataset) else locate(self.result)
        self.shown = (self.model.shown or self.model.url) if self.model is not None \
            else "the fit"
        self.coef = fit_coefficients(fit, self.step, self.shown)
        self.uncertainty = None
        if self.intervals:
            self.uncertainty = prediction_uncertainty(fit, self.coef.step, self.alpha,
                                                      self.shown)
            self.alpha = self.uncertainty["alpha"]
        self.source = self.open_rows(fit.attrs, run)
        check_new_rows(self.source, self.coef, self.shown)
        return [self.source] + ([self.model] if self.model is not None else [])

    def open_rows(self, attrs: dict, run: Run) -> StreamSource:
        """The new rows, opened by ``run``, read as the fit read its data unless named anew
        (a formula fit's: through its formula, with its levels)."""
        read, intercept = FitInputs.from_attrs(attrs), self.coef.intercept
        saved_x, saved_y = list(read.x_vars), list(read.y_vars)
        dim = self.sample_dim or read.sample_dim
        check_names_of_rows(attrs, self.shown, self.x, self.y)
        if read.formula is not None:  # the fit's design applied to the new rows
            return run.open_input("stream", self.data, self.group, formula=read.formula,
                                  levels=read.levels, fit_intercept=intercept, targets=False,
                                  sample_dim=self.sample_dim)
        x_given = self.x is not None or saved_x != ["X"]
        return run.open_input(
            "stream", self.data, self.group,
            x=self.x if self.x is not None else (saved_x if x_given else None),
            y=self.y if self.y is not None else (saved_y if saved_y != ["y"] or x_given
                                                 else None),
            sample_dim=dim if (self.sample_dim or x_given or dim != "sample") else None,
            fit_intercept=intercept, targets=False)

    def parameters(self) -> dict:
        params = {"step": self.step, "x": list(self.source.x_vars),
                  "y": list(self.source.y_vars), "sample_dim": self.source.sample_dim}
        if self.intervals:
            params.update(intervals=True, alpha=self.alpha)
        return params

    def compute(self, ctx: Context) -> xr.Dataset:
        source, coef = self.source, self.coef
        dims, columns = [source.sample_dim, "target"], prediction_columns(source, self.intervals)
        if ctx.store is not None:
            create_prediction_arrays(ctx.store, source, columns, coef.target, dims)
        # hash=False: a key of its own, so the release of an earlier scatter of the same
        # coefficients cannot take it away while this pass uses it (as in mlr/predict.py)
        W = ctx.client.scatter(coef.W, broadcast=True, hash=False)
        parts = predict_chunks(ctx, source, "predict-stream",
                               lambda a, b: (_apply_chunk, source, a, b, W, ctx.store,
                                             self.uncertainty))
        ds = xr.Dataset(coords={"target": coef.target})
        if ctx.store is None:
            for name in columns:
                ds[name] = (dims, np.concatenate([p[0][name] for p in parts]))
            ds.attrs["complete"] = True
        if self.intervals:
            ds.attrs.update({"conf_int_alpha": self.alpha, "use_t": self.uncertainty["use_t"]})
        ds.attrs.update({"model": self.shown, "model_method": coef.method,
                         "model_step": coef.step, "fit_intercept": coef.intercept})
        if source.y_vars:
            sse = np.sum([p[1]["sse"] for p in parts], axis=0)
            rows = int(sum(p[1]["rows"] for p in parts))
            ds.attrs.update({"mse": [float(v) for v in np.atleast_1d(sse / max(rows, 1))],
                             "rows": rows})
        return ds
