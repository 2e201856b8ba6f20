"""Time-series covariances through the pipeline, against statsmodels on real data sets that
packages ship: HAC (Newey–West, several lags, a halo longer than a chunk) on statsmodels'
quarterly macrodata; hac-groupsum (Driscoll–Kraay) and two-way clusters on its grunfeld
panel (firms as strings, years as integers); from stores in small chunks and from Parquet
files in small row groups, on both engines, the same numbers whatever the chunking."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import xarray as xr

from streamlsq import fit_stream, robust_covariance
from streamlsq.kernels import inference
from streamlsq.stream.statistics import summary_text

RTOL = 1e-9
SAME = 1e-12


def _store(path, frame: pd.DataFrame, chunk_rows: int):
    ds = xr.Dataset({c: ("row", frame[c].to_numpy()) for c in frame.columns})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a chunk of missing values only is written too (a store, not a sparse array)
        ds.chunk({"row": chunk_rows}).to_zarr(path, mode="w", zarr_format=3,
                                              consolidated=False, write_empty_chunks=True)
    return str(path)


def _parquet(path, frame: pd.DataFrame, row_group: int):
    frame.to_parquet(path, row_group_size=row_group, index=False)
    return str(path)


@pytest.fixture(scope="module")
def macro(tmp_path_factory):
    """statsmodels' macrodata (203 quarters): inflation on unemployment and the T-bill rate,
    as stores of 7 and 50 rows a chunk and a Parquet file of 16-row row groups."""
    d = sm.datasets.macrodata.load_pandas().data[["infl", "unemp", "tbilrate"]]
    root = tmp_path_factory.mktemp("macro")
    inputs = [_store(root / "m7.zarr", d, 7), _store(root / "m50.zarr", d, 50),
              _parquet(root / "m.parquet", d, 16)]
    return d, inputs


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """statsmodels' grunfeld (11 firms × 20 years, stacked by firm): invest on value and
    capital; firms as strings, years as integers."""
    d = sm.datasets.grunfeld.load_pandas().data
    frame = pd.DataFrame({"invest": d.invest, "value": d.value, "capital": d.capital,
                          "firm": d.firm.to_numpy().astype(str),
                          "year": d.year.to_numpy().astype(np.int64)})
    root = tmp_path_factory.mktemp("panel")
    inputs = [_store(root / "g9.zarr", frame, 9), _store(root / "g64.zarr", frame, 64),
              _parquet(root / "g.parquet", frame, 25)]
    return frame, inputs


MACRO = dict(x=["unemp", "tbilrate"], y="infl", sample_dim="row", fit_intercept=True)
PANEL = dict(x=["value", "capital"], y="invest", sample_dim="row", fit_intercept=True)
COMPARED = ("bse", "tvalues", "pvalues", "conf_int_lower", "conf_int_upper")


def _like(ds, ref, rtol=RTOL):
    np.testing.assert_allclose(ds.coef.values[-1, :, 0], ref.params, rtol=rtol)
    np.testing.assert_allclose(ds.cov_params.values[:, :, 0], ref.cov_params(), rtol=rtol)
    for name in ("bse", "tvalues", "pvalues"):
        np.testing.assert_allclose(ds[name].values[:, 0], getattr(ref, name), rtol=rtol,
                                   err_msg=name)
    ci = ref.conf_int(0.05)
    np.testing.assert_allclose(ds.conf_int_lower.values[:, 0], ci[:, 0], rtol=rtol)
    np.testing.assert_allclose(ds.conf_int_upper.values[:, 0], ci[:, 1], rtol=rtol)
    np.testing.assert_allclose(ds.fvalue.values[0], ref.fvalue, rtol=rtol)
    np.testing.assert_allclose(ds.f_pvalue.values[0], ref.f_pvalue, rtol=rtol)
    assert ds.attrs["use_t"] == ref.use_t is False


def _runs(inputs):
    """Both engines on the store of small chunks, one each on the others (the engines give
    the same numbers: the covariance pass is the same)."""
    return [(inputs[0], "sequential"), (inputs[0], "scan"), (inputs[1], "scan"),
            (inputs[2], "sequential")]


def _same(a, b):
    for name in COMPARED:
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=SAME, err_msg=name)


@pytest.mark.parametrize("maxlags,correction", [(4, None), (12, True), (60, False)])
def test_hac_equals_statsmodels_from_stores_and_parquet_on_both_engines(
        macro, client, maxlags, correction):
    """Lags 12 and 60 reach across several 7-row chunks (the halo spans chunks)."""
    d, inputs = macro
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    kwds = {"maxlags": maxlags}
    if correction is not None:
        kwds["use_correction"] = correction
    ref = sm.OLS(d.infl.to_numpy(), X).fit(cov_type="HAC", cov_kwds=kwds)
    _ = ref.fvalue
    fits = []
    for data, engine in _runs(inputs):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=11, client=client,
                        cov_type="HAC", maxlags=maxlags, use_correction=correction,
                        segment_bytes=64, **MACRO)
        _like(ds, ref)
        fits.append(ds)
    for ds in fits[1:]:
        _same(ds, fits[0])
    assert ds.attrs["cov_type"] == "HAC" and ds.attrs["maxlags"] == maxlags
    assert f"bartlett kernel, {maxlags} lags" in ds.attrs["cov_description"]


def test_hac_uniform_kernel_and_a_published_fit(macro, client):
    d, inputs = macro
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    ref = sm.OLS(d.infl.to_numpy(), X).fit(cov_type="HAC", cov_kwds={
        "maxlags": 3, "kernel": "uniform"})
    _ = ref.fvalue
    fit = fit_stream(inputs[0], "kf4lls", client=client, **MACRO)
    ds = robust_covariance(fit, inputs[0], cov_type="HAC", maxlags=3, kernel="uniform",
                           client=client)
    _like(ds, ref)
    assert "uniform kernel, 3 lags" in summary_text(ds)


def _panel_reference(frame, cov_type, **kwds):
    X = sm.add_constant(frame[["value", "capital"]].to_numpy())
    ref = sm.OLS(frame.invest.to_numpy(), X).fit(cov_type=cov_type, cov_kwds=kwds)
    _ = ref.fvalue
    return ref


@pytest.mark.parametrize("maxlags", [0, 2, 5])
def test_driscoll_kraay_equals_statsmodels_hac_groupsum(panel, client, maxlags):
    frame, inputs = panel
    codes = np.unique(frame.year, return_inverse=True)[1]  # statsmodels: periods 0..T-1
    ref = _panel_reference(frame, "hac-groupsum", time=codes, maxlags=maxlags)
    fits = []
    for data, engine in _runs(inputs):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=7, client=client,
                        cov_type="hac-groupsum", time="year", maxlags=maxlags,
                        segment_bytes=64, **PANEL)
        _like(ds, ref)
        assert ds.attrs["df_resid_inference"] == ref.df_resid_inference == 10
        fits.append(ds)
    for ds in fits[1:]:
        _same(ds, fits[0])
    assert "periods of 'year'" in ds.attrs["cov_description"]


def test_two_way_clusters_equal_statsmodels_on_string_and_integer_labels(panel, client):
    frame, inputs = panel
    firm = np.unique(frame.firm, return_inverse=True)[1]
    ref = _panel_reference(frame, "cluster", groups=np.column_stack([firm, frame.year]))
    fits = []
    for data, engine in _runs(inputs):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=7, client=client,
                        cov_type="cluster", groups="firm,year", segment_bytes=64, **PANEL)
        _like(ds, ref)
        assert ds.attrs["df_resid_inference"] == ref.df_resid_inference == 10
        assert list(ds.attrs["n_groups"]) == [11, 20]
        fits.append(ds)
    for ds in fits[1:]:
        _same(ds, fits[0])
    assert "two-way: 'firm', 'year'" in summary_text(ds)


def test_two_way_is_the_sum_of_one_way_covariances_less_the_intersection(panel, client):
    """V_A + V_B − V_{A∩B} from the pipeline's one-way covariances of the same fit, the
    intersection given as a variable of its own."""
    frame, inputs = panel
    both = frame.assign(pair=frame.firm + "/" + frame.year.astype(str))
    data = xr.Dataset({c: ("row", both[c].to_numpy()) for c in both.columns})
    fit = fit_stream(data, "kf4lls", client=client, **PANEL)
    cov = {g: robust_covariance(fit, data, cov_type="cluster", groups=g, client=client)
           .cov_params.values for g in ("firm", "year", "pair", "firm,year")}
    np.testing.assert_allclose(cov["firm,year"], cov["firm"] + cov["year"] - cov["pair"],
                               rtol=1e-10)


def test_the_halo_kernel_is_independent_of_the_cut():
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((100, 3)), rng.standard_normal((100, 2))
    coef = rng.standard_normal((3, 2))
    whole = inference.hac_meat(X, Y, coef, 30)["meat"]
    for cut in (1, 10, 29, 30, 31, 99):  # a halo shorter than the lags at the start
        halo = min(30, cut)
        parts = (inference.hac_meat(X[:cut], Y[:cut], coef, 30)["meat"]
                 + inference.hac_meat(X[cut - halo:], Y[cut - halo:], coef, 30,
                                      halo=halo)["meat"])
        np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)
    from statsmodels.stats.sandwich_covariance import S_hac_simple
    scores = X * (Y[:, 1] - X @ coef[:, 1])[:, None]
    np.testing.assert_allclose(whole[:, :, 1], S_hac_simple(scores, nlags=30), rtol=1e-12)
    white = inference.hac_meat(X, Y, coef, 0)["meat"]  # no lag: White's HC0 meat
    np.testing.assert_allclose(white, inference.hc_meat(X, Y, coef, np.eye(3), "HC0")["meat"],
                               rtol=1e-12)


# -- rolling windows ---------------------------------------------------------------------


@pytest.mark.parametrize("window,step", [(12, 1), (40, 3), (203, 1)])
def test_rolling_windows_equal_rolling_ols_on_macrodata(window, step):
    """Windows shorter than, equal to and (the whole series) longer than a chunk of the
    stores above; every recorded window as statsmodels' RollingOLS gives it."""
    from statsmodels.regression.rolling import RollingOLS

    from streamlsq.kernels.inference.rolling import rolling_fit

    d = sm.datasets.macrodata.load_pandas().data
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    y = d.infl.to_numpy()
    fit = rolling_fit(X, y, window, step=step, constant=0)
    ref = RollingOLS(y, X, window=window).fit()
    rows = fit["ends"] - 1
    assert rows[0] == window - 1 and np.all(np.diff(rows) == step)
    for name in ("params", "bse", "tvalues"):
        np.testing.assert_allclose(fit[name][:, :, 0], np.asarray(getattr(ref, name))[rows],
                                   rtol=RTOL, err_msg=name)
    for name in ("rsquared", "rsquared_adj", "ssr", "nobs", "llf", "aic", "bic"):
        np.testing.assert_allclose(fit[name][:, 0], np.asarray(getattr(ref, name))[rows],
                                   rtol=RTOL, err_msg=name)


def test_rolling_windows_keep_the_digits_rolling_ols_loses():
    """A polynomial design of κ ≈ 1e10: each window's coefficients within 1e3·ε·κ of a
    batch lstsq of its rows and of 50-digit references, where RollingOLS (rolling XᵀX,
    added and subtracted) loses about κ² worth."""
    import mpmath
    from statsmodels.regression.rolling import RollingOLS

    from streamlsq.kernels.inference.rolling import rolling_fit

    rng = np.random.default_rng(7)
    n, window = 400, 60
    t = np.linspace(0.0, 1.0, n)
    X = np.column_stack([t ** j for j in range(7)])
    y = X @ rng.standard_normal(7) + 1e-3 * rng.standard_normal(n)
    fit = rolling_fit(X, y, window, step=20)
    kappa = np.array([np.linalg.cond(X[e - window:e]) for e in fit["ends"]])
    assert 1e10 < kappa.max() < 1e11
    eps = np.finfo(float).eps
    ours, theirs = [], []
    ref = RollingOLS(y, X, window=window).fit()
    for i, e in enumerate(fit["ends"]):
        batch = np.linalg.lstsq(X[e - window:e], y[e - window:e], rcond=None)[0]
        err = np.abs(fit["params"][i, :, 0] - batch).max() / np.abs(batch).max()
        assert err <= 1e3 * eps * kappa[i], (e, err, kappa[i])
    bound = 1e3 * eps * kappa.max()
    mpmath.mp.dps = 50
    for e in fit["ends"][[0, len(fit["ends"]) // 2, -1]]:
        A = mpmath.matrix(X[e - window:e].tolist())
        b = mpmath.matrix(y[e - window:e].tolist())
        exact = np.array(mpmath.lu_solve(A.T * A, A.T * b).tolist(), float).ravel()
        i = int(np.flatnonzero(fit["ends"] == e)[0])
        scale = np.abs(exact).max()
        ours.append(np.abs(fit["params"][i, :, 0] - exact).max() / scale)
        theirs.append(np.abs(np.asarray(ref.params)[e - 1] - exact).max() / scale)
    assert max(ours) <= bound
    # RollingOLS' rolling sums keep fewer digits: at least 100 times the error here
    assert max(theirs) > 100 * max(ours), (ours, theirs)


def test_a_window_with_an_aliased_column_is_never_recorded():
    """The windows' rank is the one rule of every least-squares solve (the equilibrated
    factor's, column_rank): a column that is a combination of others (x3 = 0.3·x2 + 7·x1 +
    1.1 up to row 2000) gets no coefficients in any window that holds only those rows,
    however the rounding of its factor falls (a test of R's diagonal against k·ε published
    about half of them with coefficients of order 1e13); later windows, where x3 carries
    its own noise, are fitted as a batch solve of their rows."""
    from streamlsq.kernels.inference.rolling import rolling_fit

    rng = np.random.default_rng(5)
    n, window = 4000, 400
    x1, x2 = rng.normal(0.01, 0.1, n), rng.standard_normal(n)
    x3 = 0.3 * x2 + 7 * x1 + 1.1
    x3[2000:] += 1e-2 * rng.standard_normal(2000)
    X = np.column_stack([np.ones(n), x1, x2, x3])
    y = x1 - x2 + rng.standard_normal(n)
    fit = rolling_fit(X, y, window, step=25)
    fitted = np.isfinite(fit["params"]).all(axis=(1, 2))
    aliased = fit["ends"] <= 2000
    assert aliased.sum() == 65 and not fitted[aliased].any()
    assert fitted[~aliased].all()
    for i in np.flatnonzero(~aliased)[::20]:
        e = fit["ends"][i]
        batch = np.linalg.lstsq(X[e - window:e], y[e - window:e], rcond=None)[0]
        kappa = np.linalg.cond(X[e - window:e])
        np.testing.assert_allclose(fit["params"][i, :, 0], batch,
                                   atol=1e2 * np.finfo(float).eps * kappa * np.abs(batch).max())


def test_the_batched_rank_rule_decides_as_column_rank():
    """has_full_column_rank on a stack of factors: the decision of column_rank on each
    (aliased, zero, scaled, non-finite and ill-conditioned but well-posed columns)."""
    from streamlsq.kernels.linalg import column_rank, has_full_column_rank

    rng = np.random.default_rng(2)
    t = np.linspace(2.0, 6.0, 82)
    designs = [np.vander(t, 11), np.vander(t, 11) * np.logspace(-8, 8, 11)]
    for n in (6, 40, 400):
        a, b = rng.standard_normal(n), rng.standard_normal(n)
        designs += [np.column_stack([np.ones(n), a, b]),
                    np.column_stack([np.ones(n), a, 2 * a - 3]),
                    np.column_stack([np.ones(n), 1e9 * a, b]),
                    np.column_stack([np.ones(n), np.zeros(n), b]),
                    np.column_stack([np.ones(n), a, b + 1e-9 * a])]
    factors = [np.linalg.qr(D, mode="r") for D in designs]
    rows = [len(D) for D in designs]
    for k in {F.shape[1] for F in factors}:
        idx = [i for i, F in enumerate(factors) if F.shape[1] == k]
        stack = np.stack([factors[i] for i in idx] + [np.full((k, k), np.nan)])
        counts = [rows[i] for i in idx] + [10]
        expected = [column_rank(F, r).rank == k for F, r in zip(stack, counts, strict=True)]
        assert has_full_column_rank(stack, counts).tolist() == expected
    assert {column_rank(np.linalg.qr(D, mode="r"), len(D)).rank == D.shape[1]
            for D in designs} == {True, False}


@pytest.mark.parametrize("window", [5, 7, 30])
def test_rolling_windows_through_the_pipeline_equal_rolling_ols(macro, client, window):
    """Windows shorter than, equal to and longer than the 7-row chunks, read from the store
    and from Parquet, on both engines; each recorded window (every 4 rows) as RollingOLS
    gives it, and the windows cut into several groups (tasks) give the same numbers."""
    from statsmodels.regression.rolling import RollingOLS

    import streamlsq.stream.rolling as rolling

    d, inputs = macro
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    ref = RollingOLS(d.infl.to_numpy(), X, window=window).fit()
    rows = np.arange(window - 1, len(d), 4)
    fits = []
    for data, engine in ((inputs[0], "sequential"), (inputs[0], "scan"),
                         (inputs[2], "sequential")):
        ds = fit_stream(data, "kf4lls", engine=engine, client=client, window=window,
                        window_step=4, **MACRO)
        np.testing.assert_array_equal(ds.window_end.values, rows)
        for name in ("params", "bse", "tvalues"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, :, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                       err_msg=name)
        for name in ("rsquared", "rsquared_adj", "ssr", "llf", "aic", "bic"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                       err_msg=name)
        assert (ds.rolling_nobs.values == window).all()
        fits.append(ds)
    small = pytest.MonkeyPatch()
    small.setattr(rolling, "WINDOWS_PER_TASK", 3)
    try:
        grouped = fit_stream(inputs[1], "kf4lls", client=client, window=window,
                             window_step=4, **MACRO)
    finally:
        small.undo()
    for ds in (*fits[1:], grouped):
        np.testing.assert_allclose(ds.rolling_params.values, fits[0].rolling_params.values,
                                   rtol=SAME)


TS_REFUSALS = [
    (("--cov-type", "HAC"), "--cov-type HAC needs the number of lags: --maxlags L"),
    (("--cov-type", "hac-groupsum", "--maxlags", "2"),
     "--cov-type hac-groupsum needs the rows' time labels and the number of lags: --time VAR "
     "--maxlags L"),
    (("--time", "t"), "--time VAR goes with --cov-type hac-groupsum"),
    (("--min-nobs", "3"), "--min-nobs N goes with --window N"),
    (("--expanding",), "--expanding goes with --window N"),
    (("--window", "5", "--forgetting", "0.99"),
     "--window does not apply: no statistics, as a forgetting factor below 1 (0.99) weighs "
     "the rows unequally"),
    (("--cov-type", "hac-groupsum", "--time", "one", "--maxlags", "1"),
     "variable 'one' holds 1 period(s): hac-groupsum needs at least 2"),
    (("--cov-type", "cluster", "--groups", "t,one"),
     "variable 'one' holds 1 group(s): a cluster-robust covariance needs at least 2"),
]


@pytest.mark.parametrize("args, message", TS_REFUSALS, ids=[" ".join(a) for a, _ in TS_REFUSALS])
def test_time_series_options_are_refused_in_one_line(tmp_path, cli, args, message):
    from conftest import one_line

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.standard_normal(30), "y": rng.standard_normal(30),
                          "t": np.arange(30) % 6, "one": np.full(30, 7, np.int64)})
    data = _store(tmp_path / "d.zarr", frame, 10)
    out = tmp_path / "out.zarr"
    method = "rls" if "--forgetting" in args else "kf4lls"
    line = one_line(cli("fit", method, data, "--x", "a", "--y", "y", "--sample-dim", "row",
                        "--intercept", *args, "--out", out))
    assert message in line
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.zarr"]


def test_the_command_line_fits_hac_and_windows_and_the_summary_and_plot_say_so(
        macro, cli, tmp_path):
    from streamlsq.stream.stability import plot_fit

    d, inputs = macro
    out = tmp_path / "fit.zarr"
    ok = cli("fit", "kf4lls", inputs[0], "--x", "unemp,tbilrate", "--y", "infl",
             "--sample-dim", "row", "--intercept", "--cov-type", "HAC", "--maxlags", "4",
             "--use-correction", "--window", "40", "--window-step", "10", "--out", out)
    assert ok.exit_code == 0, ok.output
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    ref = sm.OLS(d.infl.to_numpy(), X).fit(cov_type="HAC", cov_kwds={
        "maxlags": 4, "use_correction": True})
    info = cli("info", out, "--plot", tmp_path / "fit.png")
    assert info.exit_code == 0, info.output
    assert "HAC (bartlett kernel, 4 lags, with small-sample correction)" in info.output
    ds = xr.open_zarr(out)
    np.testing.assert_allclose(ds.bse.values[:, 0], ref.bse, rtol=RTOL)
    assert ds.window_end.values.tolist() == list(range(39, len(d), 10))
    assert (tmp_path / "fit.png").stat().st_size > 10_000
    fig = plot_fit(ds)
    assert fig.axes[-1].get_title() == "windows of 40 rows (target 0, 95% bands)"


def test_info_plot_draws_the_windows_with_rolling_ols_bands(macro, cli, tmp_path, monkeypatch):
    """`streamlsq info RESULT --plot` draws each window's coefficients and the band of
    RollingOLS' ``conf_int(alpha)`` (normal quantiles, the fit's --alpha) around them, at
    the windows' last rows."""
    from statsmodels.regression.rolling import RollingOLS

    import streamlsq.stream.stability as stability

    d, inputs = macro
    out = tmp_path / "fit.zarr"
    ok = cli("fit", "kf4lls", inputs[2], "--x", "unemp,tbilrate", "--y", "infl",
             "--sample-dim", "row", "--intercept", "--window", "24", "--window-step", "5",
             "--alpha", "0.1", "--out", out)
    assert ok.exit_code == 0, ok.output
    drawn = []

    def plot_fit(*args, **kwargs):
        drawn.append(fig := stability.plot_fit.__wrapped__(*args, **kwargs))
        return fig

    plot_fit.__wrapped__ = stability.plot_fit
    monkeypatch.setattr(stability, "plot_fit", plot_fit)
    info = cli("info", out, "--plot", tmp_path / "fit.png")
    assert info.exit_code == 0, info.output
    assert "the coefficients of its windows of 24 rows with their bands" in info.output
    ax = drawn[0].axes[-1]
    assert ax.get_title() == "windows of 24 rows (target 0, 90% bands)"
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    ref = RollingOLS(d.infl.to_numpy(), X, window=24).fit()
    rows = np.arange(23, len(d), 5)
    ci = ref.conf_int(0.1)  # (row, lower/upper, feature)
    lines, bands = ax.get_lines(), ax.collections
    assert len(lines) == len(bands) == 3
    for j, (line, band) in enumerate(zip(lines, bands, strict=True)):
        np.testing.assert_array_equal(line.get_xdata(), rows + 1)
        np.testing.assert_allclose(line.get_ydata(), np.asarray(ref.params)[rows, j],
                                   rtol=RTOL)
        xy = band.get_paths()[0].vertices
        for i, row in enumerate(rows):
            at = xy[xy[:, 0] == row + 1, 1]
            # a bound near 0 is the difference of ψ and q·bse: relative to the larger
            np.testing.assert_allclose([at.min(), at.max()], ci[row, :, j], rtol=RTOL,
                                       atol=RTOL * np.abs(ci[row, :, j]).max(),
                                       err_msg=f"feature {j}, window {i}")
    assert (tmp_path / "fit.png").stat().st_size > 10_000


@pytest.mark.parametrize("window,min_nobs", [(40, None), (203, 5), (10_000, None)])
def test_expanding_windows_equal_rolling_ols_expanding(macro, client, window, min_nobs):
    """``expanding=True``: windows from row 0 growing from min_nobs rows to ``window``, then
    rolling, as ``RollingOLS(..., expanding=True)``; a window of at least the rows is the
    expanding fit, the rows seen so far at every row (the trajectory at every row, with
    RollingOLS' statistics), and its last window the fit of all the rows."""
    from statsmodels.regression.rolling import RollingOLS

    d, inputs = macro
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    n = len(d)
    ref = RollingOLS(d.infl.to_numpy(), X, window=min(window, n), min_nobs=min_nobs,
                     expanding=True).fit()
    # the first window RollingOLS fits holds min_nobs rows (default 3, the coefficients):
    # with no residual degree of freedom its bse is NaN, and such a window is not recorded
    first = 4 if min_nobs is None else min_nobs
    rows = np.arange(first - 1, n)
    for data, engine in ((inputs[0], "scan"), (inputs[2], "sequential")):
        ds = fit_stream(data, "kf4lls", engine=engine, client=client, window=window,
                        min_nobs=min_nobs, expanding=True, **MACRO)
        np.testing.assert_array_equal(ds.window_end.values, rows)
        assert ds.attrs["rolling_expanding"] is True or ds.attrs["rolling_expanding"] == 1
        for name in ("params", "bse", "tvalues"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, :, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                       err_msg=name)
        for name in ("rsquared", "rsquared_adj", "ssr", "nobs", "llf", "aic", "bic"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=RTOL,
                                       err_msg=name)
        np.testing.assert_array_equal(ds.rolling_nobs.values[:, 0],
                                      np.minimum(rows + 1, window))
    if window >= n:  # the expanding fit's last window is the fit of all the rows
        np.testing.assert_allclose(ds.rolling_params.values[-1], ds.coef.values[-1],
                                   rtol=1e-12)
        np.testing.assert_allclose(ds.rolling_bse.values[-1], ds.bse.values, rtol=1e-12)
        steps = ds.rows_seen.values - 1  # and at every recorded step, the trajectory's
        np.testing.assert_allclose(ds.rolling_params.values[steps - first + 1],
                                   ds.coef.values, rtol=1e-10)


@pytest.fixture(scope="module")
def macro_missing(tmp_path_factory):
    """macrodata with missing values: single rows, a run of 20 rows (longer than the lags,
    three 7-row chunks of which one wholly missing) and the first rows; as a store of 7-row
    chunks and a Parquet file of 16-row row groups."""
    d = sm.datasets.macrodata.load_pandas().data[["infl", "unemp", "tbilrate"]].copy()
    d.loc[[0, 1, 10, 13, 14, 50, 69, 70], "infl"] = np.nan
    d.loc[[30, 101], "unemp"] = np.nan
    d.loc[120:139, "tbilrate"] = np.nan
    root = tmp_path_factory.mktemp("macro-missing")
    return d, [_store(root / "m7.zarr", d, 7), _parquet(root / "m.parquet", d, 16)]


@pytest.mark.parametrize("maxlags", [4, 12])
def test_hac_with_missing_drop_pairs_the_remaining_rows_as_statsmodels(
        macro_missing, client, maxlags):
    """--missing drop: the rows with a missing value leave the series and the rows around
    them are neighbours, as statsmodels' OLS(missing="drop") with HAC; the halo of a piece
    reaches back past dropped rows (a run of 20, whole chunks) to its lags' partners."""
    d, inputs = macro_missing
    X = sm.add_constant(d[["unemp", "tbilrate"]].to_numpy())
    ref = sm.OLS(d.infl.to_numpy(), X, missing="drop").fit(cov_type="HAC",
                                                           cov_kwds={"maxlags": maxlags})
    _ = ref.fvalue
    assert ref.nobs == len(d) - 30
    fits = []
    for data, engine in ((inputs[0], "sequential"), (inputs[0], "scan"),
                         (inputs[1], "sequential")):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=11, client=client,
                        cov_type="HAC", maxlags=maxlags, missing="drop", segment_bytes=64,
                        **MACRO)
        _like(ds, ref)
        assert int(ds.nobs.values[0]) == ref.nobs and ds.attrs["rows_dropped"] == 30
        fits.append(ds)
    for ds in fits[1:]:
        _same(ds, fits[0])


def test_the_halo_kernel_closes_up_the_rows_of_weight_zero():
    """Rows of weight 0 leave the series: the meat is S_hac_simple of the other rows'
    scores, whatever the cut, the halo holding the lags' partners of positive weight."""
    from statsmodels.stats.sandwich_covariance import S_hac_simple

    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((80, 3)), rng.standard_normal((80, 1))
    w = rng.uniform(0.5, 2.0, 80)
    w[[3, 4, 5, 6, 7, 8, 9, 20, 41, 42, 79]] = 0.0
    coef = rng.standard_normal((3, 1))
    kept = w > 0
    scores = (X * (w * (Y[:, 0] - X @ coef[:, 0]))[:, None])[kept]
    whole = inference.hac_meat(X, Y, coef, 5, weights=w)
    np.testing.assert_allclose(whole["meat"][:, :, 0], S_hac_simple(scores, nlags=5),
                               rtol=1e-12)
    assert whole["nobs"] == kept.sum()
    for cut in (4, 10, 21, 43, 79):
        # the halo: back to the 5th row of positive weight before the cut
        positive = np.flatnonzero(kept[:cut])
        begin = positive[-5] if len(positive) >= 5 else 0
        parts = (inference.hac_meat(X[:cut], Y[:cut], coef, 5, weights=w[:cut])["meat"]
                 + inference.hac_meat(X[begin:], Y[begin:], coef, 5, weights=w[begin:],
                                      halo=cut - begin)["meat"])
        np.testing.assert_allclose(parts, whole["meat"], rtol=1e-12, atol=1e-12)


def test_driscoll_kraay_with_missing_drop_equals_statsmodels(panel, tmp_path, client):
    """--missing drop with hac-groupsum: the dropped rows are in no period (a year missing
    for every firm leaves the series of periods, the others consecutive), as statsmodels'
    OLS(missing="drop") with the time codes of the remaining rows."""
    frame, _ = panel
    frame = frame.copy()
    # the ends of firms' runs; 179: the row before a piece (rows 180-188) and a firm
    frame.loc[[0, 19, 20, 45, 46, 47, 100, 179, 219], "value"] = np.nan
    frame.loc[frame.year == 1940, "invest"] = np.nan  # a whole period
    data = [_store(tmp_path / "g9.zarr", frame, 9), _parquet(tmp_path / "g.parquet", frame, 25)]
    kept = frame.dropna()
    codes = np.unique(kept.year, return_inverse=True)[1]
    ref = _panel_reference(kept, "hac-groupsum", time=codes, maxlags=2)
    for source, engine in ((data[0], "scan"), (data[1], "sequential")):
        ds = fit_stream(source, "kf4lls", engine=engine, block_size=7, client=client,
                        cov_type="hac-groupsum", time="year", maxlags=2, missing="drop",
                        segment_bytes=64, **PANEL)
        _like(ds, ref)
        assert int(ds.nobs.values[0]) == len(kept)
        assert ds.attrs["df_resid_inference"] == ref.df_resid_inference
