"""The HC0 covariance of each rolling window (``--window N --cov-type HC0``), against
statsmodels' ``RollingOLS(...).fit(cov_type="HCCM")`` on its quarterly macrodata and
against a batch ``OLS(...).fit(cov_type="HC0")`` of each window's rows, and each window's
HAC covariance (``--cov-type HAC``, which ``RollingOLS`` has not) against a batch
``OLS(...).fit(cov_type="HAC")`` of each window's rows: the kernel (rolling, expanding,
weighted windows) and the pipeline (a store in small chunks and Parquet, both engines, the
windows cut into several tasks)."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
import xarray as xr
from statsmodels.regression.rolling import RollingOLS, RollingWLS
from test_timeseries_inference import MACRO, RTOL, SAME

from streamlsq import fit_stream
from streamlsq.kernels.inference.rolling import rolling_fit
from streamlsq.kernels.inference.rolling_robust import rolling_hc0, rolling_robust


def _macro():
    d = sm.datasets.macrodata.load_pandas().data
    return sm.add_constant(d[["unemp", "tbilrate"]].to_numpy()), d.infl.to_numpy()


def _robust_windows(X, y, window, weights=None, **kw):
    fit = rolling_fit(X, y, window, weights=weights, constant=0, **kw)
    return fit, rolling_hc0(X, y[:, None], fit["params"], fit["ends"], window, weights)


@pytest.mark.parametrize("window,expanding,min_nobs", [(12, False, None), (40, False, None),
                                                        (60, True, 8)])
def test_each_window_equals_rolling_ols_hccm_and_a_batch_hc0(window, expanding, min_nobs):
    X, y = _macro()
    fit, robust = _robust_windows(X, y, window, expanding=expanding, min_nobs=min_nobs)
    ref = RollingOLS(y, X, window=window, min_nobs=min_nobs, expanding=expanding).fit(
        cov_type="HCCM")
    rows = fit["ends"] - 1
    ok = np.isfinite(fit["params"]).all(axis=(1, 2))
    rows, ok_robust = rows[ok], {k: v[ok] for k, v in robust.items()}
    np.testing.assert_allclose(ok_robust["cov_params"][..., 0],
                               np.asarray(ref.cov_params())[rows], rtol=RTOL)
    for name in ("bse", "tvalues"):
        np.testing.assert_allclose(ok_robust[name][:, :, 0],
                                   np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                   err_msg=name)
    # and each window as a batch fit of its own rows with statsmodels' HC0
    for i in np.flatnonzero(ok)[::17]:
        e = int(fit["ends"][i])
        s = max(0, e - window)
        batch = sm.OLS(y[s:e], X[s:e]).fit(cov_type="HC0")
        np.testing.assert_allclose(robust["cov_params"][i, :, :, 0], batch.cov_params(),
                                   rtol=RTOL)
        np.testing.assert_allclose(robust["bse"][i, :, 0], batch.bse, rtol=RTOL)
    nonrobust = fit["bse"][ok]
    assert not np.allclose(ok_robust["bse"], nonrobust, rtol=1e-3)  # another covariance


def test_weighted_windows_equal_rolling_wls_hccm():
    X, y = _macro()
    w = np.random.default_rng(3).uniform(0.2, 3.0, len(y))
    fit, robust = _robust_windows(X, y, 30, weights=w)
    ref = RollingWLS(y, X, window=30, weights=w).fit(cov_type="HCCM")
    rows = fit["ends"] - 1
    np.testing.assert_allclose(robust["bse"][:, :, 0], np.asarray(ref.bse)[rows], rtol=RTOL)
    np.testing.assert_allclose(robust["tvalues"][:, :, 0], np.asarray(ref.tvalues)[rows],
                               rtol=RTOL)


@pytest.mark.parametrize("maxlags, use_correction, kernel", [
    (0, False, "bartlett"), (2, None, "bartlett"), (5, True, "bartlett"), (3, None, "uniform")])
@pytest.mark.parametrize("window, expanding", [(24, False), (60, True)])
def test_each_window_s_hac_equals_a_batch_hac_of_its_rows(maxlags, use_correction, kernel,
                                                          window, expanding):
    X, y = _macro()
    fit = rolling_fit(X, y, window, constant=0, expanding=expanding,
                      min_nobs=8 if expanding else None)
    robust = rolling_robust(X, y[:, None], fit["params"], fit["ends"], window,
                            cov_type="HAC", maxlags=maxlags, kernel=kernel,
                            use_correction=use_correction)
    kwds = {"maxlags": maxlags, "kernel": kernel, "use_correction": bool(use_correction)}
    for i in range(0, len(fit["ends"]), 7):
        e = int(fit["ends"][i])
        s = max(0, e - window)
        batch = sm.OLS(y[s:e], X[s:e]).fit(cov_type="HAC", cov_kwds=kwds)
        np.testing.assert_allclose(robust["cov_params"][i, :, :, 0], batch.cov_params(),
                                   rtol=RTOL)
        np.testing.assert_allclose(robust["bse"][i, :, 0], batch.bse, rtol=RTOL)
        np.testing.assert_allclose(robust["tvalues"][i, :, 0], batch.tvalues, rtol=RTOL)


def test_weighted_hac_windows_leave_a_dropped_row_out_of_the_series():
    """Precision weights scale each row as WLS does; a row of weight 0 (dropped) leaves the
    series, its neighbours become lag partners: a batch WLS-HAC of the window's other rows."""
    X, y = _macro()
    w = np.random.default_rng(5).uniform(0.2, 3.0, len(y))
    w[[30, 31, 77]] = 0.0
    fit = rolling_fit(X, y, 30, weights=w, constant=0)
    robust = rolling_robust(X, y[:, None], fit["params"], fit["ends"], 30, w,
                            cov_type="HAC", maxlags=3)
    for i in range(0, len(fit["ends"]), 5):
        e = int(fit["ends"][i])
        kept = np.flatnonzero(w[e - 30:e] > 0) + e - 30
        batch = sm.WLS(y[kept], X[kept], weights=w[kept]).fit(cov_type="HAC",
                                                              cov_kwds={"maxlags": 3})
        np.testing.assert_allclose(robust["bse"][i, :, 0], batch.bse, rtol=RTOL)


@pytest.fixture(scope="module")
def macro_inputs(tmp_path_factory):
    from test_timeseries_inference import _parquet, _store

    d = sm.datasets.macrodata.load_pandas().data[["infl", "unemp", "tbilrate"]]
    root = tmp_path_factory.mktemp("macro-hc0")
    return d, [_store(root / "m7.zarr", d, 7), _parquet(root / "m.parquet", d, 16)]


def test_hc0_windows_through_the_pipeline_equal_rolling_ols(macro_inputs, client):
    """--window 30 --window-step 4 --cov-type HC0: the fit's covariance is OLS' HC0 and each
    window's RollingOLS' HCCM, from a store of 7-row chunks and from Parquet, on both
    engines, and the same with the windows cut into tasks of 3."""
    import streamlsq.stream.rolling as rolling

    d, inputs = macro_inputs
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    y = d.infl.to_numpy()
    ref = RollingOLS(y, X, window=30).fit(cov_type="HCCM")
    whole = sm.OLS(y, X).fit(cov_type="HC0")
    rows = np.arange(29, len(d), 4)
    fits = []
    for data, engine in ((inputs[0], "sequential"), (inputs[0], "scan"),
                         (inputs[1], "sequential")):
        ds = fit_stream(data, "kf4lls", engine=engine, client=client, window=30,
                        window_step=4, cov_type="HC0", **MACRO)
        np.testing.assert_array_equal(ds.window_end.values, rows)
        for name in ("params", "bse", "tvalues"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, :, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                       err_msg=name)
        np.testing.assert_allclose(ds.bse.values[:, 0], whole.bse, rtol=RTOL)
        assert ds.attrs["rolling_cov_type"] == "HC0" and ds.attrs["cov_type"] == "HC0"
        fits.append(ds)
    small = pytest.MonkeyPatch()
    small.setattr(rolling, "WINDOWS_PER_TASK", 3)
    try:
        grouped = fit_stream(inputs[0], "kf4lls", client=client, window=30, window_step=4,
                             cov_type="HC0", **MACRO)
    finally:
        small.undo()
    for ds in (*fits[1:], grouped):
        np.testing.assert_allclose(ds.rolling_bse.values, fits[0].rolling_bse.values,
                                   rtol=SAME)


def test_hac_windows_through_the_pipeline_equal_a_batch_hac_of_each_window(macro_inputs,
                                                                           client):
    """--window 30 --window-step 4 --cov-type HAC --maxlags 9 (more lags than a chunk of the
    store has rows): the fit's covariance is OLS' HAC, each window's that of a batch HAC of
    its rows, from a store of 7-row chunks and from Parquet, on both engines."""
    d, inputs = macro_inputs
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    y = d.infl.to_numpy()
    kwds = {"maxlags": 9, "use_correction": True}
    whole = sm.OLS(y, X).fit(cov_type="HAC", cov_kwds=kwds)
    ends = np.arange(30, len(d) + 1, 4)
    reference = np.array([sm.OLS(y[e - 30:e], X[e - 30:e]).fit(cov_type="HAC",
                                                               cov_kwds=kwds).bse
                          for e in ends])
    for data, engine in ((inputs[0], "sequential"), (inputs[0], "scan"),
                         (inputs[1], "sequential")):
        ds = fit_stream(data, "kf4lls", engine=engine, client=client, window=30,
                        window_step=4, cov_type="HAC", maxlags=9, use_correction=True,
                        **MACRO)
        np.testing.assert_array_equal(ds.window_end.values, ends - 1)
        np.testing.assert_allclose(ds.rolling_bse.values[:, :, 0], reference, rtol=RTOL)
        np.testing.assert_allclose(ds.bse.values[:, 0], whole.bse, rtol=RTOL)
        assert ds.attrs["rolling_cov_type"] == "HAC"


def test_the_summary_and_info_say_which_covariance_the_windows_have(macro_inputs, cli,
                                                                     tmp_path):
    """HC0 and HAC windows say so; the windows of a fit with a covariance defined on the
    rows as a whole (HC1, cluster, …) keep the nonrobust one, and say so."""
    d, inputs = macro_inputs
    design = ("--x", "unemp,tbilrate", "--y", "infl", "--sample-dim", "row", "--intercept")
    for cov, expected in ((("--cov-type", "HC0"), "HC0"),
                          (("--cov-type", "HAC", "--maxlags", "2"), "HAC"),
                          (("--cov-type", "HC1"), "nonrobust")):
        out = tmp_path / f"{expected}.zarr"
        ok = cli("fit", "kf4lls", inputs[0], *design, *cov, "--window", "40", "--out", out)
        assert ok.exit_code == 0, ok.output
        info = cli("info", out, "--plot", tmp_path / f"{expected}.png")
        assert info.exit_code == 0, info.output
        assert f"rolling windows of 40 rows, {expected} covariance" in info.output
        assert f"windows of 40 rows with their bands ({expected} covariance)" in info.output
        assert xr.open_zarr(out).attrs["rolling_cov_type"] == expected
