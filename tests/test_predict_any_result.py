"""``streamlsq.predict`` applies whatever result it is given: a stream fit to rows (the numbers
of X·W, and exactly what ``predict_stream`` gives), a meta-learned model to tasks (exactly
what the multi-task ``predict`` gives); an option of the other kind is refused in one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr
import zarr

import streamlsq
from streamlsq import InputError
from streamlsq.mlr.predict import predict as predict_tasks
from streamlsq.prediction import applies_to_rows


@pytest.fixture(scope="module")
def made(tmp_path_factory, client):
    """A stream fit (with statistics) and its new rows; a model and its tasks."""
    folder = tmp_path_factory.mktemp("predict-any")
    rows = streamlsq.simulate_stream(folder / "rows.zarr", n_rows=2_400, n_features=3,
                                     n_targets=2, chunk_rows=800, seed=5, client=client)
    streamlsq.fit_stream(rows, "kf4lls", fit_intercept=True, out=folder / "fit.zarr",
                         client=client)
    tasks = streamlsq.simulate_mlr(folder / "tasks.zarr", k=2, d=4, n_light=2_000, t_light=4,
                                   n_heavy=60, t_heavy=40, n_light2=500, t_light2=8, seed=2,
                                   client=client)
    streamlsq.metalearn(tasks, 2, out=folder / "model.zarr", client=client)
    return folder


def test_a_stream_fit_is_applied_to_rows(made, client):
    fit = made / "fit.zarr"
    got = streamlsq.predict(fit, made / "rows.zarr", intervals=True, alpha=0.1, client=client)
    g = zarr.open_group(made / "rows.zarr", mode="r")
    X, Y = np.asarray(g["X"][:]), np.asarray(g["y"][:])
    W = streamlsq.open_result(fit).coef.isel(step=-1).transpose("feature", "target").values
    yhat = np.hstack([np.ones((len(X), 1)), X]) @ W  # the fit's intercept first
    np.testing.assert_allclose(got.yhat.values, yhat, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.residual.values, Y - yhat, rtol=1e-12, atol=1e-12)
    ref = streamlsq.predict_stream(fit, made / "rows.zarr", intervals=True, alpha=0.1,
                                   client=client)
    xr.testing.assert_identical(got.drop_attrs(), ref.drop_attrs())
    assert got.attrs["model_method"] == "kf4lls" and got.attrs["conf_int_alpha"] == 0.1
    opened = streamlsq.open_result(fit).load()  # a fit's Dataset is applied the same way
    assert applies_to_rows(opened) and applies_to_rows(fit)
    xr.testing.assert_identical(
        streamlsq.predict(opened, made / "rows.zarr", yhat=False, client=client).yhat,
        got.yhat)  # an option of the other kind at its default is no option


def test_a_model_is_applied_to_tasks(made, client, tmp_path):
    model, tasks = made / "model.zarr", made / "tasks.zarr"
    assert not applies_to_rows(model)
    got = streamlsq.predict(model, tasks, out=tmp_path / "pred.zarr", estimator="map",
                            holdout=2, yhat=True, client=client)
    ref = predict_tasks(model, tasks, estimator="map", holdout=2, yhat=True, client=client)
    for name in ("coef", "posterior", "holdout_sse", "yhat"):
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)
    assert got.attrs["holdout_mse"] == ref.attrs["holdout_mse"]
    assert got.attrs["model_method"] == "metalearn" and got.attrs["estimator"] == "map"
    assert streamlsq.open_result(tmp_path / "pred.zarr").attrs["complete"] is True


@pytest.mark.parametrize("result, options, message", [
    ("fit.zarr", {"holdout": 2}, "is a stream fit (method 'kf4lls'): holdout= applies to a "
     "meta-learned model's tasks, not to rows"),
    ("fit.zarr", {"estimator": "map", "new_rows": "x.zarr"}, "estimator=, new_rows= apply to"),
    ("model.zarr", {"intervals": True}, "is a meta-learned model (method 'metalearn'): "
     "intervals= applies to a stream fit's rows, not to tasks"),
    ("model.zarr", {"x": ["a"], "step": 3}, "x=, step= apply to a stream fit's rows"),
])
def test_an_option_of_the_other_kind_of_result_is_refused(made, client, tmp_path, result,
                                                           options, message):
    out = tmp_path / "pred.zarr"
    with pytest.raises(InputError, match=re.escape(message)):
        streamlsq.predict(made / result, made / "rows.zarr", out=out, client=client, **options)
    assert not out.exists()


def test_an_incomplete_result_is_refused_before_the_dispatch(made, tmp_path):
    partial = tmp_path / "partial.zarr"
    zarr.open_group(partial, mode="w", zarr_format=3).attrs["method"] = "kf4lls"
    with pytest.raises(InputError, match="incomplete"):
        streamlsq.predict(partial, made / "rows.zarr")
