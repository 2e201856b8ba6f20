"""The statistics of a least-squares fit from the factor a recursion keeps
(streamlsq.kernels.inference), against statsmodels' OLS and WLS on the real data sets it
ships, against 50-digit arithmetic where statsmodels loses digits, and as invariants."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.regression.recursive_ls import RecursiveLS

from streamlsq.kernels import KF4LLS
from streamlsq.kernels.inference import (
    RegressionFactor,
    classical_statistics,
    cluster_meat,
    cluster_score_sums,
    combine_meats,
    constant_in_span,
    hc_meat,
    merge_score_sums,
    prediction_intervals,
    recursive_bands,
    robust_statistics,
    wald_test,
)
from streamlsq.kernels.recursions.contract import block_edges

EPS = np.finfo(np.float64).eps
RTOL = 1e-9
#: statsmodels' names of the statistics compared (conf_int: its two columns)
SCALARS = ("nobs", "df_model", "df_resid", "ssr", "ess", "scale", "rsquared", "rsquared_adj",
           "fvalue", "f_pvalue", "llf", "aic", "bic")
PER_COEF = ("bse", "tvalues", "pvalues")


def _grunfeld():
    d = sm.datasets.grunfeld.load_pandas().data
    return (np.column_stack([np.ones(len(d)), d[["value", "capital"]].to_numpy()]),
            d["invest"].to_numpy(), d["firm"].to_numpy().astype(str))


def _longley():
    d = sm.datasets.longley.load_pandas().data
    return (np.column_stack([np.ones(len(d)), d.drop(columns="TOTEMP").to_numpy()]),
            d["TOTEMP"].to_numpy())


def _fold(X, y, weights=None, solver="qr", block=7):
    """A KF4LLS fit folded block by block (short early blocks: it starts once identified),
    as the pipeline runs it; its factor."""
    rec = KF4LLS(solver=solver, identify=True)
    Y = y[:, None]
    res = rec.fold(rec.init(X.shape[1], 1), X, Y, block_edges(len(X), block), 1, 10**9,
                   weights=weights)
    return rec.regression(res.state)


def _assert_matches(stats, ref, rtol=RTOL):
    for name in SCALARS:
        np.testing.assert_allclose(stats[name][0], getattr(ref, name), rtol=rtol, err_msg=name)
    for name in PER_COEF:
        np.testing.assert_allclose(stats[name][:, 0], getattr(ref, name), rtol=rtol,
                                   err_msg=name)
    np.testing.assert_allclose(stats["cov_params"][:, :, 0], ref.cov_params(), rtol=rtol)
    alpha = stats["alpha"]
    np.testing.assert_allclose(stats["conf_int_lower"][:, 0], ref.conf_int(alpha)[:, 0],
                               rtol=rtol)
    np.testing.assert_allclose(stats["conf_int_upper"][:, 0], ref.conf_int(alpha)[:, 1],
                               rtol=rtol)


@pytest.mark.parametrize("solver", ["qr", "normal"])
@pytest.mark.parametrize("weighted", [False, True])
def test_classical_statistics_equal_statsmodels_ols_and_wls(solver, weighted):
    X, y, _ = _grunfeld()
    w = np.random.default_rng(0).uniform(0.2, 3.0, len(y)) if weighted else None
    fac = _fold(X, y, w, solver)
    ref = (sm.WLS(y, X, weights=w) if weighted else sm.OLS(y, X)).fit()
    stats = classical_statistics(fac, alpha=0.1)
    assert stats["k_constant"] == 1 and stats["const_idx"] == 0 and stats["use_t"]
    _assert_matches(stats, ref)


@pytest.mark.parametrize("cov_type", ["HC0", "HC1", "HC2", "HC3", "cluster"])
@pytest.mark.parametrize("weighted", [False, True])
def test_robust_covariances_equal_statsmodels(cov_type, weighted):
    X, y, firm = _grunfeld()
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(y)) if weighted else None
    fac = _fold(X, y, w)
    model = sm.WLS(y, X, weights=w) if weighted else sm.OLS(y, X)
    chunks = [slice(0, 70), slice(70, 150), slice(150, None)]  # parts that add up
    part = (lambda s: cluster_score_sums(X[s], y[s, None], fac.coef, firm[s],
                                         None if w is None else w[s])) \
        if cov_type == "cluster" else \
        (lambda s: hc_meat(X[s], y[s, None], fac.coef, fac.R, cov_type,
                           None if w is None else w[s]))
    parts = [part(s) for s in chunks]
    if cov_type == "cluster":
        meat, n_groups = cluster_meat(merge_score_sums(merge_score_sums(*parts[:2]), parts[2]))
        codes = np.unique(firm, return_inverse=True)[1]
        ref = model.fit(cov_type="cluster", cov_kwds={"groups": codes})
        assert n_groups == 11
    else:
        meat, n_groups = combine_meats(combine_meats(*parts[:2]), parts[2])["meat"], None
        ref = model.fit(cov_type=cov_type)
    stats = robust_statistics(fac, meat, cov_type, n_groups)
    assert not stats["use_t"] and not ref.use_t
    _ = ref.fvalue  # statsmodels keeps the Wald p-value once the F value is computed
    _assert_matches(stats, ref)
    if cov_type == "cluster":
        assert stats["df_resid_inference"] == ref.df_resid_inference == 10


@pytest.mark.parametrize("cov_type", ["HC1", "HC3"])
def test_a_chunk_of_several_slices_has_the_meat_of_statsmodels(cov_type):
    """hc_meat sums a chunk slice by slice (SLICE_ROWS rows; the row-sized temporaries stay
    small): a chunk of 2.3 slices, weighted, with the leverages of HC3, gives
    statsmodels' robust standard errors, and the meat of one slice at a time."""
    from streamlsq.kernels.inference.robust import SLICE_ROWS

    rng = np.random.default_rng(5)
    n = int(2.3 * SLICE_ROWS)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, 3))])
    y = X @ [1.0, 2.0, -1.0, 0.5] + (1 + np.abs(X[:, 1])) * rng.standard_normal(n)
    w = rng.uniform(0.2, 3.0, n)
    fac = _fold(X, y, w, block=5_000)
    meat = hc_meat(X, y[:, None], fac.coef, fac.R, cov_type, w)["meat"]
    by_slice = combine_meats(*(hc_meat(X[a:a + SLICE_ROWS], y[a:a + SLICE_ROWS, None],
                                       fac.coef, fac.R, cov_type, w[a:a + SLICE_ROWS])
                               for a in range(0, n, SLICE_ROWS)))["meat"]
    np.testing.assert_array_equal(meat, by_slice)
    ref = sm.WLS(y, X, weights=w).fit(cov_type=cov_type)
    np.testing.assert_allclose(robust_statistics(fac, meat, cov_type)["bse"][:, 0], ref.bse,
                               rtol=1e-10)


def _mp_ols(X, y):
    """OLS in 50-digit arithmetic: coefficients, standard errors, R² and SSR."""
    with mpmath.workdps(50):
        A = mpmath.matrix(X.tolist())
        b = mpmath.matrix(y.tolist())
        gram = A.T * A
        beta = mpmath.lu_solve(gram, A.T * b)
        resid = b - A * beta
        n, k = X.shape
        ssr = sum(r**2 for r in resid)
        inverse = mpmath.inverse(gram)
        bse = [mpmath.sqrt(ssr / (n - k) * inverse[i, i]) for i in range(k)]
        mean = sum(b) / n
        r2 = 1 - ssr / sum((v - mean) ** 2 for v in b)
        return (np.array([float(v) for v in beta]), np.array([float(v) for v in bse]),
                float(r2), float(ssr))


def _polynomial(n=400, degree=8, seed=3):
    x = np.linspace(0.0, 1.0, n)
    X = np.vander(x, degree + 1, increasing=True)  # 1, x, ..., x^8: κ ≈ 1e7 equilibrated
    y = np.sin(3 * x) + 0.01 * np.random.default_rng(seed).standard_normal(n)
    return X, y


@pytest.mark.parametrize("data", ["longley", "polynomial"])
def test_statistics_keep_the_digits_of_the_coefficients(data):
    """Against 50 digits, on ill-conditioned designs: the standard errors, R² and SSR of
    the square-root form are as accurate as its coefficients, within 1e3·ε·κ (κ of the
    equilibrated design, the condition that the QR factorisation's error depends on)."""
    X, y = _longley() if data == "longley" else _polynomial()
    kappa = np.linalg.cond(X / np.linalg.norm(X, axis=0))
    assert kappa > 1e4
    beta, bse, r2, ssr = _mp_ols(X, y)
    fac = _fold(X, y, block=4)
    stats = classical_statistics(fac, constant=0)
    bound = 1e3 * EPS * kappa

    def rel(a, b):
        return np.max(np.abs(a - b) / np.abs(b))

    assert rel(fac.coef[:, 0], beta) <= bound
    assert rel(stats["bse"][:, 0], bse) <= bound
    assert rel(stats["rsquared"][0], r2) <= bound
    assert rel(1 - stats["rsquared"][0], 1 - r2) <= bound  # the digits of 1 - R² too
    assert rel(stats["ssr"][0], ssr) <= bound


def test_a_constant_column_or_an_implicit_constant_is_found():
    """statsmodels' k_constant: a stored column of ones (anywhere) or dummies summing to 1
    make the R² centred; the explained sum of squares is the same as with the intercept
    first."""
    X, y, _ = _grunfeld()
    moved = X[:, [1, 2, 0]]  # the constant last
    stats = classical_statistics(_fold(moved, y))
    ref = sm.OLS(y, moved).fit()
    assert stats["k_constant"] == 1 and stats["const_idx"] == 2
    _assert_matches(stats, ref)
    firms = np.unique(_grunfeld()[2], return_inverse=True)[1]
    dummies = np.column_stack([X[:, 1:], np.eye(11)[firms]])  # no constant column: implicit
    stats = classical_statistics(_fold(dummies, y, block=20))
    ref = sm.OLS(y, dummies).fit()
    assert stats["k_constant"] == 1 and stats["const_idx"] == -1
    for name in ("rsquared", "rsquared_adj", "fvalue", "llf", "aic", "bic"):
        np.testing.assert_allclose(stats[name][0], getattr(ref, name), rtol=RTOL)
    stats = classical_statistics(_fold(X[:, 1:], y))  # no constant at all: uncentred R²
    ref = sm.OLS(y, X[:, 1:]).fit()
    assert stats["k_constant"] == 0
    _assert_matches(stats, ref)


def test_prediction_intervals_equal_statsmodels_summary_frame():
    X, y, firm = _grunfeld()
    fac = _fold(X, y)
    new = X[::7] * 1.1
    for cov_type in ("nonrobust", "HC3"):
        if cov_type == "nonrobust":
            stats = classical_statistics(fac, alpha=0.1)
            ref = sm.OLS(y, X).fit()
        else:
            meat = hc_meat(X, y[:, None], fac.coef, fac.R, "HC3")["meat"]
            stats = robust_statistics(fac, meat, "HC3", alpha=0.1)
            ref = sm.OLS(y, X).fit(cov_type="HC3")
        out = prediction_intervals(new, fac.coef, stats["cov_params"], stats["scale"],
                                   stats["df_resid"][0], 0.1, stats["use_t"])
        frame = ref.get_prediction(new).summary_frame(alpha=0.1)
        for column in frame.columns:
            np.testing.assert_allclose(out[column][:, 0], frame[column], rtol=RTOL,
                                       err_msg=column)


def test_wald_tests_equal_statsmodels_f_test():
    X, y, firm = _grunfeld()
    fac = _fold(X, y)
    R = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, -1.0]])
    q = np.array([0.1, 0.0])
    for cov_type in ("nonrobust", "HC1", "cluster"):
        if cov_type == "nonrobust":
            stats, ref = classical_statistics(fac), sm.OLS(y, X).fit()
            df = stats["df_resid"][0]
        elif cov_type == "HC1":
            meat = hc_meat(X, y[:, None], fac.coef, fac.R, "HC1")["meat"]
            stats, ref = robust_statistics(fac, meat, "HC1"), sm.OLS(y, X).fit(cov_type="HC1")
            df = stats["df_resid"][0]
        else:
            meat, g = cluster_meat(cluster_score_sums(X, y[:, None], fac.coef, firm))
            stats = robust_statistics(fac, meat, "cluster", g)
            codes = np.unique(firm, return_inverse=True)[1]
            ref = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": codes})
            df = stats["df_resid_inference"]
        res = wald_test(fac.coef[:, 0], stats["cov_params"][:, :, 0], R, q, df)
        expected = ref.f_test((R, q))
        np.testing.assert_allclose(res.fvalue, float(np.squeeze(expected.fvalue)), rtol=RTOL)
        np.testing.assert_allclose(res.pvalue, float(expected.pvalue), rtol=RTOL)
        assert (res.df_num, res.df_denom) == (expected.df_num, expected.df_denom)


def test_recursive_bands_equal_statsmodels_recursive_ls():
    """The bands along the trajectory are RecursiveLS's: ψ_t ± z·√(σ̂²·diag((X_tᵀX_t)⁻¹)),
    with the final scale; the fold records diag((X_tᵀX_t)⁻¹) at every step."""
    X, y, _ = _grunfeld()
    rec = KF4LLS(identify=True)
    res = rec.fold(rec.init(3, 1), X, y[:, None], block_edges(len(y), 1), 1, 1)
    stats = classical_statistics(rec.regression(res.state))
    bands = recursive_bands(res.coefs, res.diagnostics["normalized_variance"], stats["scale"])
    ref = RecursiveLS(y, X).fit()
    coefs = ref.recursive_coefficients
    t = res.steps - 1  # the first steps are not identified: not recorded
    assert res.steps[0] == 3
    for i in (0, 10, len(t) - 1):  # lstsq on the rows up to the step
        n = int(res.rows_seen[i])
        np.testing.assert_allclose(res.coefs[i, :, 0], np.linalg.lstsq(X[:n], y[:n])[0],
                                   rtol=1e-12)
    # RecursiveLS's Kalman filter loses a few digits on the first rows (1e-8): the
    # definition of the bands is what it is a reference for
    np.testing.assert_allclose(res.coefs[:, :, 0], coefs.filtered[:, t].T, rtol=1e-6)
    for j in range(3):
        np.testing.assert_allclose(bands["bse"][:, j, 0], np.sqrt(coefs.filtered_cov[j, j, t]),
                                   rtol=1e-6)
        z = 1.6448536269514722  # the 95% two-sided quantile of the normal distribution
        np.testing.assert_allclose(bands["upper"][:, j, 0] - bands["lower"][:, j, 0],
                                   2 * 1.959963984540054 * bands["bse"][:, j, 0], rtol=1e-12)
        assert z < 1.96


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(12, 60), st.integers(1, 9),
       st.sampled_from(["qr", "normal"]))
def test_zero_weights_equal_dropping_and_integer_weights_repeating(seed, n, block, solver):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, 2))])
    y = X @ [1.0, -2.0, 0.5] + rng.standard_normal(n)
    w = rng.integers(0, 4, n).astype(float)
    w[:4] = 1.0  # rows enough to identify
    repeated = np.repeat(np.arange(n), w.astype(int))
    fac = _fold(X, y, w, solver, block)
    a = classical_statistics(fac)
    rep = _fold(X[repeated], y[repeated], None, solver, block)
    # precision weights are not frequencies: the fit and its sums of squares are those of
    # the repeated rows, the degrees of freedom are not (statsmodels' WLS alike)
    np.testing.assert_allclose(fac.coef, rep.coef, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(a["ssr"], classical_statistics(rep)["ssr"], rtol=1e-8)
    keep = w > 0
    c = classical_statistics(_fold(X[keep], y[keep], w[keep], solver, block))
    for name in ("bse", "rsquared", "fvalue", "llf", "nobs"):
        np.testing.assert_allclose(a[name], c[name], rtol=1e-10, err_msg=name)
    assert int(a["nobs"][0]) == int(keep.sum())


def test_the_reference_factor_and_the_recursion_agree():
    X, y, _ = _grunfeld()
    a, b = RegressionFactor.from_rows(X, y), _fold(X, y)
    np.testing.assert_allclose(np.abs(a.R), np.abs(b.R), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(a.ssr, b.ssr, rtol=1e-12)
    assert constant_in_span(a).index == constant_in_span(b).index == 0
