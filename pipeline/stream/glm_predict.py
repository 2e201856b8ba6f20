"""A GLM fit applied to new rows: the mean ``yhat`` and the linear predictor ``linpred``,
with ``--intervals`` their standard errors and intervals by the delta method, as
statsmodels' ``GLMResults.get_prediction().summary_frame()`` (the mean's interval is the
inverse link of the linear predictor's). The rows are read as the fit read its data
(through its formula, with its levels), chunk by chunk, and the arrays written chunk by
chunk into the result (:class:`~streamlsq.stream.apply.StreamPrediction`'s path); an
offset or exposure the fit had is read from the new rows' variable of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
import zarr

from streamlsq.errors import InputError
from streamlsq.io.location import locate
from streamlsq.io.results import glm_spec
from streamlsq.io.sources import StreamSource
from streamlsq.jobs import Context, Run
from streamlsq.kernels import glm as kernels
from streamlsq.stream.apply import (
    FitCoefficients,
    StreamPrediction,
    check_names_of_rows,
    check_new_rows,
    check_recorded_step,
    create_prediction_arrays,
    predict_chunks,
    read_new_rows,
)
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.layout import intercept_label
from streamlsq.stream.statistics import checked_alpha

__all__ = ["GLMPrediction", "INTERVAL_COLUMNS", "is_glm_fit", "predict_glm"]

#: the arrays an interval prediction adds beside ``yhat`` (the mean) and ``linpred``
INTERVAL_COLUMNS = ("mean_se", "mean_ci_lower", "mean_ci_upper", "linpred_se",
                    "linpred_ci_lower", "linpred_ci_upper")


def is_glm_fit(attrs: dict) -> bool:
    """Whether a result's attributes are those of a GLM fit (:func:`streamlsq.fit_glm`)."""
    return attrs.get("model") == "glm" and attrs.get("method") == "glm"


def predict_glm(result, data, *, out=None, group=None, x=None, y=None, sample_dim=None,
                step=None, intervals: bool = False, alpha: float | None = None,
                **run) -> xr.Dataset:
    """Apply the GLM fit ``result`` to the rows of ``data``: ``yhat`` (the mean μ) and
    ``linpred`` (η) ``(sample, target)``, with ``intervals`` the columns of
    :data:`INTERVAL_COLUMNS` at 1 − ``alpha`` (default: the fit's). Reached through
    :func:`streamlsq.predict` and ``streamlsq predict RESULT DATA``."""
    job = GLMPrediction(result, data, group=group, x=x, y=y, sample_dim=sample_dim,
                        step=step, intervals=intervals, alpha=alpha)
    return Run(out, **run).execute(job)


def _glm_chunk(source: StreamSource, aux, aux_names: dict, a: int, b: int, spec, coef, cov,
               alpha, store):
    # a NaN in the new rows advises what predict offers, not a fit's --missing drop
    X = read_new_rows(source.read_features, a, b)
    offset = None
    if aux is not None:
        offset = np.zeros(b - a)
        if "offset" in aux_names:
            offset += read_new_rows(lambda i, j: aux.read_rows(aux_names["offset"], i, j), a,
                                    b)
        if "exposure" in aux_names:
            exposure = read_new_rows(lambda i, j: aux.read_rows(aux_names["exposure"], i, j),
                                     a, b)
            if (exposure <= 0).any():
                row = a + int(np.flatnonzero(exposure <= 0)[0])
                raise InputError(f"{source.label}: variable '{aux_names['exposure']}' row "
                                 f"{row}: an exposure must be > 0 (its logarithm is the "
                                 "offset); correct the row, or leave it out of DATA")
            offset += np.log(exposure)
    frame = kernels.predict_link(spec, X, coef, cov, offset=offset, alpha=alpha)
    out = {"yhat": frame["mean"], "linpred": frame["linpred"]}
    if cov is not None:
        out.update({name: frame[name] for name in INTERVAL_COLUMNS})
    if store is None:
        return b - a, out
    g = zarr.open_group(store, mode="r+")
    for name, values in out.items():
        g[name][a:b] = values[:, None]
    return b - a, None


@dataclass(eq=False)
class GLMPrediction(StreamPrediction):
    """A GLM fit applied to new rows (:func:`predict_glm`)."""

    def open(self, run: Run) -> list:
        fit = self.result if isinstance(self.result, xr.Dataset) else run.open_input(
            "result", self.result, lazy=False)
        self.model = None if isinstance(self.result, xr.Dataset) else locate(self.result)
        self.shown = (self.model.shown or self.model.url) if self.model is not None \
            else "the fit"
        if not is_glm_fit(fit.attrs):
            raise InputError(f"{self.shown}: not the result of a GLM fit")
        if self.step is not None:
            check_recorded_step(self.step, fit.step.values, self.shown)
        check_names_of_rows(fit.attrs, self.shown, self.x, self.y)
        a = fit.attrs
        # a family or link edited by hand: one line, as when the result is opened
        self.spec = glm_spec(a, self.shown)
        self.labels = [str(v) for v in fit.feature.values]
        self.params = np.asarray(fit.coef.isel(step=-1, target=0).values, np.float64)
        self.target = fit.target.values
        self.cov = None
        if self.intervals:
            self.cov = np.asarray(fit.cov_params.isel(target=0).values, np.float64)
            self.alpha = checked_alpha(a.get("conf_int_alpha") if self.alpha is None
                                       else self.alpha)
        # the record of what the fit read rather than the label: a GLM formula fit written
        # before its intercept was labelled 'Intercept' (formulaic's) called it 'intercept'
        intercept = FitInputs.from_attrs(a).intercept if "fit_intercept" in a else \
            bool(self.labels) and self.labels[0] in ("intercept", "Intercept")
        self.coef = type("Coef", (), {"intercept": intercept})()
        self.source = self.open_rows(a, run)
        # the columns named anew (--x) must be those fitted, in their order, as a stream
        # fit's are: a GLM's coefficients applied to other columns were published (the
        # response is not compared: a binomial one of two columns predicts one target)
        formula = a.get("formula") or None
        labels = ([intercept_label(formula)] + self.labels[1:]) if intercept else self.labels
        check_new_rows(self.source, FitCoefficients(self.params[:, None], 1, "glm", labels,
                                                    self.target, formula), self.shown,
                       targets=False)
        self.aux_names = {k: a[f"{k}_variable"] for k in ("offset", "exposure")
                          if f"{k}_variable" in a}
        self.aux = None
        if self.aux_names:
            self.aux = run.open_input("stream", self.data, self.group,
                                      x=list(self.aux_names.values()), y=(), targets=False,
                                      sample_dim=self.source.sample_dim, named_by={
                                          name: (f"the fit's --{k}",
                                                 f"{self.shown} was fitted with --{k} {name}: "
                                                 f"the new rows need that variable too")
                                          for k, name in self.aux_names.items()})
        return [self.source] + ([self.model] if self.model is not None else [])

    def parameters(self) -> dict:
        params = {"x": list(self.source.x_vars), "sample_dim": self.source.sample_dim}
        if self.intervals:
            params.update(intervals=True, alpha=self.alpha)
        return params

    def compute(self, ctx: Context) -> xr.Dataset:
        source = self.source
        dims = [source.sample_dim, "target"]
        columns = ["yhat", "linpred"] + (list(INTERVAL_COLUMNS) if self.intervals else [])
        if ctx.store is not None:
            create_prediction_arrays(ctx.store, source, columns, self.target, dims)
        parts = predict_chunks(ctx, source, "predict-glm",
                               lambda a, b: (_glm_chunk, source, self.aux, self.aux_names, a,
                                             b, self.spec, self.params, self.cov,
                                             self.alpha or 0.05, ctx.store))
        ds = xr.Dataset(coords={"target": self.target})
        if ctx.store is None:
            for name in columns:
                ds[name] = (dims, np.concatenate([p[1][name] for p in parts])[:, None])
            ds.attrs["complete"] = True
        if self.intervals:
            ds.attrs.update({"conf_int_alpha": self.alpha, "use_t": False})
        ds.attrs.update({"model": self.shown, "model_method": "glm", "model_step": 1,
                         "fit_intercept": bool(self.coef.intercept),
                         "family": self.spec.family, "link": self.spec.lnk.name})
        return ds
