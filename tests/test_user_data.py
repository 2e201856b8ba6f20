"""The user's data where it lives: xarray Datasets (in memory and lazily opened from NetCDF),
columns as variables along any dimension, intercepts on every recursion, fits continued on
a store that grew, and stream fits applied to new rows. Every number is checked against
numpy.linalg.lstsq on the same rows, or against the same answer reached another way."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
import zarr
from click.testing import CliRunner

import streamlsq
from streamlsq import InputError, fit_stream, open_result, predict_stream
from streamlsq.cli import main

from conftest import lstsq

N = 3_000
COEF = np.array([1.5, -2.0, 0.5])
INTERCEPT = 4.0


@pytest.fixture(scope="module")
def table():
    """Columns as variables along a dimension named ``time``: features a, b, c; target d."""
    rng = np.random.default_rng(13)
    X = rng.standard_normal((N, 3))
    y = X @ COEF + INTERCEPT + 0.1 * rng.standard_normal(N)
    ds = xr.Dataset({name: ("time", X[:, j]) for j, name in enumerate("abc")})
    ds["d"] = ("time", y)
    return X, y, ds


def _final(ds):
    return ds.coef.isel(step=-1).values


def _with_ones(X):
    return np.hstack([np.ones((X.shape[0], 1)), X])


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_an_in_memory_dataset_with_columns_as_variables(table, client, engine):
    X, y, ds = table
    fit = fit_stream(ds, "kf4lls", x=["a", "b", "c"], y="d", sample_dim="time",
                     fit_intercept=True, engine=engine, block_size=700, client=client)
    assert list(fit.feature.values) == ["intercept", "a", "b", "c"]
    np.testing.assert_allclose(_final(fit), lstsq(_with_ones(X), y[:, None]), rtol=1e-10,
                               atol=1e-12)
    assert int(fit.rows_seen[-1]) == N and fit.attrs["fit_intercept"] is True
    assert json.loads(fit.attrs["x_variables"]) == ["a", "b", "c"]
    assert fit.attrs["sample_dim"] == "time"
    # without an intercept: lstsq on the columns alone, and the dimension found by itself
    plain = fit_stream(ds, x="a,b,c", y="d", engine=engine, client=client)
    assert list(plain.feature.values) == ["a", "b", "c"]
    np.testing.assert_allclose(_final(plain), lstsq(X, y[:, None]), rtol=1e-10, atol=1e-12)


def test_a_dataset_opened_lazily_from_netcdf(table, client, tmp_path):
    X, y, _ = table
    path = tmp_path / "table.nc"
    xr.Dataset({"X": (("obs", "var"), X), "y": (("obs",), y)},
               coords={"var": ["p", "q", "r"]}).to_netcdf(path)
    with xr.open_dataset(path, chunks={"obs": 512}) as lazy:
        assert lazy.X.chunks is not None  # dask-backed: the workers read their own rows
        for engine in ("sequential", "scan"):
            fit = fit_stream(lazy, "rls", forgetting=1.0, sample_dim="obs", fit_intercept=True,
                             engine=engine, block_size=1000, client=client)
            assert list(fit.feature.values) == ["intercept", "p", "q", "r"]
            np.testing.assert_allclose(_final(fit), lstsq(_with_ones(X), y[:, None]),
                                       rtol=1e-10, atol=1e-12)
        assert str(path) in fit.attrs["input"]


def test_a_store_with_columns_as_variables_and_other_dimension_names(table, client, tmp_path):
    X, y, ds = table
    store = tmp_path / "table.zarr"
    ds.chunk({"time": 400}).to_zarr(store, zarr_format=3)
    out = tmp_path / "fit.zarr"
    res = CliRunner().invoke(main, ["fit", "kf4lls", str(store), "--out", str(out), "--x",
                                    "a,b,c", "--y", "d", "--sample-dim", "time", "--intercept",
                                    "--engine", "scan", "--scheduler",
                                    client.scheduler.address])
    assert res.exit_code == 0, res.output
    fit = open_result(out)
    assert list(fit.feature.values) == ["intercept", "a", "b", "c"]
    np.testing.assert_allclose(_final(fit), lstsq(_with_ones(X), y[:, None]), rtol=1e-10,
                               atol=1e-12)
    # without --sample-dim the store's other dimension name is refused with its remedy
    res = CliRunner().invoke(main, ["fit", "kf4lls", str(store), "--out", str(tmp_path / "r"),
                                    "--x", "a,b", "--y", "d"])
    assert res.exit_code == 2
    assert "variable 'a' has dims ('time',)" in res.output and "--sample-dim" in res.output


def test_feature_labels_of_a_store_are_kept(client, tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((500, 2))
    y = X @ [2.0, 3.0]
    store = tmp_path / "labelled.zarr"
    xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample",), y)},
               coords={"feature": ["height", "weight"]}).to_zarr(store, zarr_format=3)
    fit = fit_stream(store, client=client)
    assert list(fit.feature.values) == ["height", "weight"]
    np.testing.assert_allclose(fit.coef.sel(feature="weight").values[-1], [3.0])
    lms = fit_stream(store, "lms", rate=0.05, client=client)
    assert list(lms.feature.values) == ["intercept", "height", "weight"]


@pytest.mark.parametrize("method, params", [
    ("kf4lls", {}), ("rls", {"forgetting": 1.0}), ("bfgs", {}), ("lms", {"rate": 0.02})])
def test_the_intercept_flag_means_the_same_on_every_recursion(table, client, method, params):
    X, y, ds = table
    kw = dict(x=["a", "b", "c"], y="d", block_size=N, client=client, **params)
    on = fit_stream(ds, method, fit_intercept=True, **kw)
    off = fit_stream(ds, method, fit_intercept=False, **kw)
    assert list(on.feature.values) == ["intercept", "a", "b", "c"]
    assert list(off.feature.values) == ["a", "b", "c"]
    assert on.attrs["fit_intercept"] is True and off.attrs["fit_intercept"] is False
    if method != "lms":  # one block of all rows: least squares, with and without the constant
        np.testing.assert_allclose(_final(on), lstsq(_with_ones(X), y[:, None]), rtol=1e-9)
        np.testing.assert_allclose(_final(off), lstsq(X, y[:, None]), rtol=1e-9)
    else:  # LMS approaches the same answer
        np.testing.assert_allclose(_final(on)[:, 0], [INTERCEPT, *COEF], atol=0.1)
    default = fit_stream(ds, method, **kw)
    expected = ["intercept", "a", "b", "c"] if method == "lms" else ["a", "b", "c"]
    assert list(default.feature.values) == expected  # documented per-method defaults


def test_irma_refuses_an_intercept(client, tmp_path):
    path = streamlsq.simulate_irma(tmp_path / "x.zarr", n_rows=50, client=client)
    with pytest.raises(InputError, match="constant function is one of its basis functions"):
        fit_stream(path, "irma", order=3, fit_intercept=True, client=client)


def _append_store(path, X, y, chunk):
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample",), y)})
    ds.to_zarr(path, zarr_format=3, encoding={"X": {"chunks": (chunk, X.shape[1])},
                                              "y": {"chunks": (chunk,)}})


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_a_fit_continued_on_appended_rows_equals_a_fit_from_scratch(client, tmp_path, engine):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((5_500, 4))
    y = X @ [1.0, -1.0, 2.0, 0.5] + 0.3 + 0.05 * rng.standard_normal(5_500)
    store = tmp_path / "grows.zarr"
    _append_store(store, X[:5_000], y[:5_000], chunk=700)  # its last chunk is partial
    kw = dict(block_size=250, fit_intercept=True, record_every=2, engine=engine, client=client)
    first = fit_stream(store, "kf4lls", out=tmp_path / "first.zarr", **kw)
    assert first.attrs["n_rows"] == 5_000
    xr.Dataset({"X": (("sample", "feature"), X[5_000:]),
                "y": (("sample",), y[5_000:])}).to_zarr(store, append_dim="sample")
    more = fit_stream(store, "kf4lls", continue_from=tmp_path / "first.zarr",
                      out=tmp_path / "more.zarr", **kw)
    scratch = fit_stream(store, "kf4lls", **kw)
    np.testing.assert_array_equal(more.step, scratch.step)
    np.testing.assert_array_equal(more.rows_seen, scratch.rows_seen)
    np.testing.assert_allclose(more.coef, scratch.coef, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_final(more), lstsq(_with_ones(X), y[:, None]), rtol=1e-10)
    assert more.attrs["rows_continued"] == 5_000 and more.attrs["n_rows"] == 5_500
    assert more.attrs["n_blocks"] == scratch.attrs["n_blocks"]
    stored = open_result(tmp_path / "more.zarr")
    np.testing.assert_array_equal(stored.coef.values, more.coef.values)
    # nothing appended since: the earlier result is the answer
    same = fit_stream(store, "kf4lls", continue_from=tmp_path / "more.zarr", **kw)
    np.testing.assert_array_equal(same.coef.values, more.coef.values)


def test_continuing_rls_and_lms_per_sample(client, tmp_path):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((2_200, 3))
    y = X @ [1.0, 2.0, -1.0] + 0.1 * rng.standard_normal(2_200)
    store = tmp_path / "g.zarr"
    _append_store(store, X[:2_000], y[:2_000], chunk=300)
    for method, params in (("rls", dict(forgetting=0.99, ridge=1e-3, block_size=1)),
                           ("lms", dict(rate=0.02, block_size=100))):
        first = tmp_path / f"{method}.zarr"
        fit_stream(store, method, out=first, client=client, **params)
        if method == "rls":
            xr.Dataset({"X": (("sample", "feature"), X[2_000:]),
                        "y": (("sample",), y[2_000:])}).to_zarr(store, append_dim="sample")
        more = fit_stream(store, method, continue_from=first, client=client, **params)
        scratch = fit_stream(store, method, client=client, **params)
        np.testing.assert_allclose(_final(more), _final(scratch), rtol=1e-10, atol=1e-12)
        assert int(more.rows_seen[-1]) == 2_200


def test_continue_refuses_changed_rows_and_other_options(client, tmp_path):
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((1_000, 2)), rng.standard_normal(1_000)
    store = tmp_path / "s.zarr"
    _append_store(store, X, y, chunk=300)
    first = tmp_path / "first.zarr"
    fit_stream(store, "rls", forgetting=0.9, ridge=1e-3, block_size=50, out=first,
               client=client)
    with pytest.raises(InputError, match="it was fitted by 'rls', not 'kf4lls'"):
        fit_stream(store, "kf4lls", block_size=50, continue_from=first, client=client)
    with pytest.raises(InputError, match=r"its options differ \(in: forgetting\)"):
        fit_stream(store, "rls", forgetting=0.8, ridge=1e-3, block_size=50,
                   continue_from=first, client=client)
    with pytest.raises(InputError, match="its block size is 50, not 60"):
        fit_stream(store, "rls", forgetting=0.9, ridge=1e-3, block_size=60,
                   continue_from=first, client=client)
    with pytest.raises(InputError, match="fit_intercept"):
        fit_stream(store, "rls", forgetting=0.9, ridge=1e-3, block_size=50,
                   fit_intercept=True, continue_from=first, client=client)
    zarr.open_group(str(store), mode="r+")["y"][420] = 99.0  # an earlier row changed in place
    res = CliRunner().invoke(main, ["fit", "rls", str(store), "--out", str(tmp_path / "m.zarr"),
                                    "--forgetting", "0.9", "--ridge", "1e-3", "--block-size",
                                    "50", "--continue-from", str(first), "--scheduler",
                                    client.scheduler.address])
    assert res.exit_code == 2
    assert "variable 'y' rows 300-599 changed since" in res.output
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize("intercept", [False, True])
def test_a_stream_fit_applied_to_new_rows(table, client, tmp_path, intercept):
    X, y, ds = table
    store = tmp_path / "train.zarr"
    ds.isel(time=slice(0, 2_000)).chunk({"time": 500}).to_zarr(store, zarr_format=3)
    new = tmp_path / "new.zarr"
    ds.isel(time=slice(2_000, None)).chunk({"time": 300}).to_zarr(new, zarr_format=3)
    fit = fit_stream(store, x=["a", "b", "c"], y="d", sample_dim="time",
                     fit_intercept=intercept, out=tmp_path / "fit.zarr", client=client)
    W = _final(fit)
    Xn = X[2_000:]
    expected = (_with_ones(Xn) if intercept else Xn) @ W
    out = tmp_path / "pred.zarr"
    res = CliRunner().invoke(main, ["predict", str(tmp_path / "fit.zarr"), str(new), "--out",
                                    str(out), "--scheduler", client.scheduler.address])
    assert res.exit_code == 0, res.output
    pred = open_result(out)
    assert pred.yhat.dims == ("time", "target") and pred.attrs["model_method"] == "kf4lls"
    np.testing.assert_allclose(pred.yhat.values, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pred.residual.values[:, 0], y[2_000:] - expected[:, 0],
                               rtol=1e-12, atol=1e-12)
    assert pred.attrs["mse"][0] == pytest.approx(np.mean((y[2_000:] - expected[:, 0]) ** 2))
    # new rows without the target: ŷ only; from a Dataset, through the accessor
    import streamlsq.xarray  # noqa: F401

    only_x = ds[["a", "b", "c"]].isel(time=slice(2_000, None))
    pred = only_x.streamlsq.predict(fit, client=client)
    assert "residual" not in pred
    np.testing.assert_allclose(pred.yhat.values, expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(InputError, match="has 2 feature column"):
        predict_stream(fit, ds, x=["a", "b"], client=client)


def test_the_accessor_fits_like_fit_stream(table, client):
    import streamlsq.xarray  # noqa: F401

    X, y, ds = table
    fit = ds.streamlsq.fit(x=["a", "b", "c"], y="d", fit_intercept=True, client=client)
    ref = fit_stream(ds, x=["a", "b", "c"], y="d", fit_intercept=True, client=client)
    np.testing.assert_array_equal(fit.coef.values, ref.coef.values)
    np.testing.assert_allclose(_final(fit), lstsq(_with_ones(X), y[:, None]), rtol=1e-10)


@pytest.mark.parametrize("intercept", [True, False])
def test_lms_estimator_and_pipeline_agree_with_and_without_the_intercept(table, client,
                                                                        intercept):
    from streamlsq import LMSRegressor

    X, y, ds = table
    est = LMSRegressor(rate=0.02, block_size=500, fit_intercept=intercept).fit(X, y)
    fit = fit_stream(ds, "lms", x=["a", "b", "c"], y="d", rate=0.02, block_size=500,
                     fit_intercept=intercept, client=client)
    W = _final(fit)[:, 0]
    np.testing.assert_array_equal(W[int(intercept):], est.coef_)
    assert est.intercept_ == (W[0] if intercept else 0.0)
