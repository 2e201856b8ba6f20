"""The square-root (QR) form of KF4LLS/RLS at the numerical limit, the compiled per-row
updates, and the recursive residuals against statsmodels' RecursiveLS.

Tolerances come from the error bounds. Householder QR (and Givens rotations) solve a
least-squares problem with a backward error of a modest multiple of ε per column, so the
relative forward error of ψ is ≲ c·ε·κ(X) plus a κ²·tanθ·ε term that is of the same
order for data whose residual is noise (the noise is then also what makes ψ large along
the weak directions); numpy.linalg.lstsq has the same bound, so two exact methods differ
by a few ε·κ. A streaming QR adds the rounding of each merge: c grows like √(merges)
for a chain (per-sample RLS), like √(log merges) for the fixed tree of slices and of
the scan prefix. The tests ask for 1e3·ε·κ, the bound we promise, which covers c for
every configuration here (measured: 0.1–10 ε·κ). The normal equations lose ε·κ²
instead (and are refused from κ ≈ 1e8 on): the contrast is checked too.
"""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq import KF4LLSRegressor, RLSRegressor
from streamlsq.kernels import KF4LLS, RLS, SingularMatrixError, block_edges
from streamlsq.kernels.recursions import irma as irma_kernels
from streamlsq.kernels.recursions import sqrtinfo
from streamlsq.kernels.recursions.stability import (
    cusum,
    cusum_bound,
    cusum_squares,
    cusum_squares_bounds,
)

EPS = np.finfo(np.float64).eps


def ill_conditioned(n_rows, n, kappa, seed=0, noise=1e-3, dtype=np.float64):
    """Rows X = U·diag(s)·Vᵀ with singular values log-spaced from 1 to 1/κ (U orthonormal
    columns, V a random rotation: every column is a mix of strong and weak directions),
    y = Xβ + noise."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n_rows, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    X = (U * np.logspace(0, -np.log10(kappa), n)) @ V.T
    Y = X @ rng.standard_normal((n, 1)) + noise * rng.standard_normal((n_rows, 1))
    return X.astype(dtype), Y.astype(dtype)


def reference(X, Y):
    """lstsq on the same rows, in float64, with no truncation of small singular values
    (numpy's default rcond = ε·rows would drop κ > 1e11 directions of 20,000 rows)."""
    return np.linalg.lstsq(X.astype(np.float64), Y.astype(np.float64), rcond=1e-15)[0]


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def scan_form(rec, X, Y, edges, record_every):
    """The scan engine's computation in memory: two pieces, a prefix, independent solves."""
    nb = len(edges) - 1
    summaries, ends = [], []
    for k0, k1 in ((0, nb // 2), (nb // 2, nb)):
        cuts = np.unique(np.r_[np.arange(record_every - k0 % record_every, k1 - k0 + 1,
                                         record_every), k1 - k0])
        cuts = cuts[cuts > 0]
        summaries += rec.summarize(X[edges[k0]:edges[k1]], Y[edges[k0]:edges[k1]],
                                   edges[k0:k1 + 1] - edges[k0], cuts)
        ends += list(k0 + cuts)
    infos = rec.scan(rec.to_info(rec.init(X.shape[1], Y.shape[1], X.dtype)), summaries)
    return ends, infos


# ---------------------------------------------------------------------------
# κ sweep: both forms of the QR solver against lstsq on the same rows
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kappa", [1e2, 1e4, 1e6, 1e8, 1e10, 1e12])
def test_qr_solver_is_exact_to_eps_kappa_up_to_1e12(kappa):
    X, Y = ill_conditioned(20_000, 10, kappa, seed=int(np.log10(kappa)))
    ref = reference(X, Y)
    tol = 1e3 * EPS * kappa
    rec = KF4LLS()
    for block in (20_000, 3_000, 7):  # one block; slices of a block; per-row Givens
        edges = block_edges(20_000, block, first_block_size=max(block, 10))
        res = rec.fold(rec.init(10, 1), X, Y, edges, 1, 10**9)
        assert rel(res.state["psi"], ref) <= tol, f"block {block}"
    ends, infos = scan_form(rec, X, Y, block_edges(20_000, 1_000), 4)
    assert rel(rec.finish(infos[-1])["psi"], ref) <= tol, "scan form"
    assert rec.result_attrs(res.state)["condition_number"] == pytest.approx(kappa, rel=1e-3)


def test_normal_equations_lose_kappa_squared_and_refuse_what_qr_solves():
    X, Y = ill_conditioned(20_000, 10, 1e6, seed=3)
    ref = reference(X, Y)
    edges = block_edges(20_000, 5_000)
    qr = KF4LLS().fold(KF4LLS().init(10, 1), X, Y, edges, 1, 10**9).state["psi"]
    normal = KF4LLS(solver="normal")
    err_normal = rel(normal.fold(normal.init(10, 1), X, Y, edges, 1, 10**9).state["psi"], ref)
    assert rel(qr, ref) <= 1e3 * EPS * 1e6 < err_normal  # ~ε·κ² = 1e-4 for the normal form
    X8, Y8 = ill_conditioned(20_000, 10, 1e8, seed=4)
    with pytest.raises(SingularMatrixError):
        normal.fold(normal.init(10, 1), X8, Y8, edges, 1, 10**9)
    assert rel(KF4LLS().fold(KF4LLS().init(10, 1), X8, Y8, edges, 1, 10**9).state["psi"],
               reference(X8, Y8)) <= 1e3 * EPS * 1e8


def test_data_that_are_rank_deficient_are_still_refused():
    X, Y = ill_conditioned(5_000, 6, 10.0)
    X = np.hstack([X, X[:, :1] * 3.0])  # a column that repeats another: rank 6 of 7
    rec = KF4LLS()
    with pytest.raises(SingularMatrixError) as info:
        rec.fold(rec.init(7, 1), X, Y, block_edges(5_000, 1_000), 1, 1)
    assert (info.value.rank, info.value.size) == (6, 7)


def test_columns_scaled_from_1e_minus_6_to_1e6():
    """κ(X) ≈ 1e12 from the units alone: the QR form is not affected by column scaling
    (Householder QR is backward stable column by column), so every coefficient is as
    exact as on the rescaled columns: componentwise ≲ ε·κ(equilibrated X)."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((50_000, 6))
    Y = A @ rng.standard_normal((6, 1)) + 0.1 * rng.standard_normal((50_000, 1))
    d = np.logspace(-6, 6, 6)
    X = A * d
    assert np.linalg.cond(X) > 1e11
    exact = np.linalg.lstsq(A, Y, rcond=None)[0] / d[:, None]  # the fit on rescaled columns
    for rec, edges in ((KF4LLS(), block_edges(50_000, 8_000)),
                       (RLS(forgetting=1.0, ridge=0.0), block_edges(50_000, 1, 6))):
        psi = rec.fold(rec.init(6, 1), X, Y, edges, 1, 10**9).state["psi"]
        assert np.max(np.abs(psi - exact) / np.abs(exact)) <= 1e3 * EPS * np.linalg.cond(A)
    with pytest.raises(SingularMatrixError):  # what the normal equations did with it
        normal = KF4LLS(solver="normal")
        normal.fold(normal.init(6, 1), X, Y, block_edges(50_000, 8_000), 1, 10**9)


@pytest.mark.parametrize("kappa", [1e2, 1e4])
def test_float32_input(kappa):
    X, Y = ill_conditioned(20_000, 5, kappa, seed=5, dtype=np.float32)
    ref = reference(X, Y)  # float64 lstsq on the same (float32) rows
    for block in (20_000, 1):
        rec = KF4LLS(ridge=0.0 if block > 1 else 1e-6)
        edges = block_edges(20_000, block, first_block_size=max(block, 5))
        state = rec.fold(rec.init(5, 1, np.float32), X, Y, edges, 1, 10**9).state
        assert state["psi"].dtype == np.float32 and state["R"].dtype == np.float32
        assert rel(state["psi"], ref) <= 1e3 * np.finfo(np.float32).eps * kappa


def test_ten_million_per_sample_updates_with_forgetting():
    """10⁷ rows one at a time, g = 0.999: R stays triangular with a positive diagonal and
    finite, and ψ is the float64 batch weighted least-squares fit (row weight g^(T−t);
    rows older than 60,000 weigh < 1e-26 and are left out of the reference)."""
    n, g, T, chunk = 4, 0.999, 10_000_000, 1_000_000
    rec = RLS(forgetting=g, ridge=1e-6)
    state = rec.init(n, 1)
    beta = np.array([[1.0], [-2.0], [0.5], [3.0]])
    scale = np.array([1.0, 10.0, 0.1, 1e3])  # unequal units: κ ≈ 1e4
    for c in range(T // chunk):
        rng = np.random.default_rng(c)
        X = rng.standard_normal((chunk, n)) * scale
        Y = X @ (beta / scale[:, None]) + 0.01 * rng.standard_normal((chunk, 1))
        state = rec.fold(state, X, Y, block_edges(chunk, 1), c * chunk + 1, 10**9,
                         c * chunk).state
    R = state["R"]
    assert np.isfinite(R).all() and np.isfinite(state["psi"]).all()
    assert np.all(np.tril(R, -1) == 0) and np.all(np.diag(R) > 0)
    last = 60_000
    w = np.sqrt(g ** np.arange(last - 1, -1, -1))[:, None]
    Xl, Yl = X[-last:], Y[-last:]
    ref = np.linalg.lstsq(Xl * w, Yl * w, rcond=None)[0]
    kappa = np.linalg.cond(Xl * w)
    assert rel(state["psi"], ref) <= 1e3 * EPS * kappa
    assert int(state["rows"]) == T and int(state["blocks"]) == T


# ---------------------------------------------------------------------------
# invariants of the factorisations
# ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 3_000), n=st.integers(1, 6), k=st.integers(1, 3),
       slice_rows=st.sampled_from([3, 64, 1024]), seed=st.integers(0, 2**16))
def test_qr_append_is_a_factor_of_the_rows_whatever_the_slicing(rows, n, k, slice_rows, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((rows, n)), rng.standard_normal((rows, k))
    prior = np.triu(rng.standard_normal((n + k, n + k)))
    old = sqrtinfo.QR_ROWS
    sqrtinfo.QR_ROWS = slice_rows
    try:
        A = sqrtinfo.qr_append(prior, X, Y, scale=0.5)
    finally:
        sqrtinfo.QR_ROWS = old
    M = np.vstack([0.5 * prior, np.hstack([X, Y])])
    assert np.all(np.tril(A, -1) == 0) and np.all(np.diag(A) >= 0)
    # AᵀA = MᵀM to the rounding of a QR: ~ε·‖M‖² per entry
    np.testing.assert_allclose(A.T @ A, M.T @ M, rtol=0, atol=1e3 * EPS * np.sum(M**2))


@settings(max_examples=30, deadline=None)
@given(n_blocks=st.integers(2, 40), block=st.integers(1, 30), g=st.sampled_from([1.0, 0.9]),
       record_every=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_scan_prefix_equals_the_sequential_fold(n_blocks, block, g, record_every, seed):
    rng = np.random.default_rng(seed)
    N = n_blocks * block
    X, Y = rng.standard_normal((N, 3)), rng.standard_normal((N, 2))
    rec = RLS(forgetting=g, ridge=0.5)
    edges = block_edges(N, block)
    seq = rec.fold(rec.init(3, 2), X, Y, edges, 1, 1)
    ends, infos = scan_form(rec, X, Y, edges, record_every)
    for end, info in zip(ends, infos, strict=True):
        # the same rows, grouped otherwise: agreement to a few ε·κ (κ ≈ 10 here)
        np.testing.assert_allclose(rec.finish(info)["psi"], seq.coefs[end - 1], rtol=1e-11,
                                   atol=1e-12)


def test_givens_and_block_qr_and_normal_equations_agree():
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((500, 4)), rng.standard_normal((500, 2))
    for g in (1.0, 0.97):
        coefs = []
        for solver, block in (("qr", 1), ("qr", 50), ("normal", 1)):
            rec = RLS(forgetting=g, ridge=1e-2, solver=solver)
            # blocks of 50 and of 1 weigh rows differently when g < 1: compare like with like
            edges = block_edges(500, block if g == 1.0 else 1)
            coefs.append(rec.fold(rec.init(4, 2), X, Y, edges, 1, 10**9).state["psi"])
        np.testing.assert_allclose(coefs[0], coefs[1], rtol=1e-11)
        np.testing.assert_allclose(coefs[0], coefs[2], rtol=1e-11)


def test_estimators_take_the_solver():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((300, 3))
    y = X @ [1.0, 2.0, -1.0] + 0.5 + 0.01 * rng.standard_normal(300)
    a = KF4LLSRegressor(block_size=50).fit(X, y)
    b = KF4LLSRegressor(block_size=50, solver="normal").fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    assert "R" in a.state_ and "H" in b.state_
    r = RLSRegressor(forgetting=0.99).fit(X, y)  # one row per step: the Givens kernel
    assert r.get_params()["solver"] == "qr" and "R" in r.state_
    with pytest.raises(ValueError, match="solver"):
        KF4LLSRegressor(solver="cholesky").fit(X, y)


def test_compiled_irma_rls_equals_the_checked_loop():
    rng = np.random.default_rng(12)
    Phi = rng.standard_normal((400, 5))
    y = Phi @ rng.standard_normal(5) + 0.1 * rng.standard_normal(400)
    rows = np.array([0, 7, 400], dtype=np.int64)
    H0 = 2.0 * np.eye(5)
    t1, H1, e1, s1, bad = irma_kernels._rls_loop_compiled(np.zeros(5), H0.copy(), Phi, y, 0.9,
                                                         0.05, rows)
    t2, H2, e2, s2 = irma_kernels._rls_loop(np.zeros(5), H0.copy(), Phi, y, 0.9, 0.05, rows)
    assert bad == -1
    # two Cholesky solves of the same well-conditioned systems (κ(H) < 1e3): rounding
    np.testing.assert_allclose(t1, t2, rtol=1e-12)
    np.testing.assert_allclose(s1, s2, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(e1, e2, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# recursive residuals and the stability tests
# ---------------------------------------------------------------------------
def _macrodata():
    """A real regression shipped with statsmodels: US quarterly inflation on the
    unemployment rate and the real interest rate, 1959–2009 (203 quarters)."""
    data = sm.datasets.macrodata.load_pandas().data
    X = sm.add_constant(data[["unemp", "realint"]]).to_numpy(np.float64)
    return X, data["infl"].to_numpy(np.float64)


def test_recursive_residuals_and_cusum_equal_statsmodels_recursive_ls():
    X, y = _macrodata()
    T, k = X.shape
    sm_res = sm.RecursiveLS(y, X).fit()
    d = sm_res.nobs_diffuse
    assert d == k
    rec = RLS(forgetting=1.0, ridge=0.0, diagnostics=True)
    # the first k rows determine ψ (statsmodels' diffuse start), then one row per step
    res = rec.fold(rec.init(k, 1), X, y[:, None], block_edges(T, 1, k), 1, 1)
    diag = {name: v[1:] for name, v in res.diagnostics.items()}  # steps after the first block
    counts = diag["recursive_count"]
    np.testing.assert_array_equal(counts, np.arange(1, T - d + 1))
    w, e = diag["recursive_residual"][:, 0], diag["prediction_error"][:, 0]
    N = int(counts[-1])
    s1, s2 = diag["recursive_sum"][:, 0], diag["recursive_sumsq"][:, 0]
    W, S = cusum(s1, N, s1[-1], s2[-1]), cusum_squares(s2, s2[-1])
    points = np.arange(d, T) + 1  # our steps end after rows d+1..T
    lo, hi = sm_res._cusum_significance_bounds(0.05, points=points)
    lo2, hi2 = sm_res._cusum_squares_significance_bounds(0.05, points=points)

    # statsmodels' Kalman filter works on the covariance form (rounding ~ε·κ² with
    # κ(X) ≈ 27 here, ~1e-13), ours on the square-root form (~ε·κ): 1e-8 is the promised
    def close(ours, theirs, name):
        np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-8 * np.abs(theirs).max(),
                                   err_msg=name)

    close(w, sm_res.resid_recursive[d:], "recursive residuals")
    close(e, sm_res.filter_results.forecasts_error[0, d:], "prediction errors")
    close(W, sm_res.cusum, "CUSUM")
    close(S, sm_res.cusum_squares, "CUSUM of squares")
    close(cusum_bound(counts, N), hi, "CUSUM bound")
    close(-cusum_bound(counts, N), lo, "CUSUM lower bound")
    close(cusum_squares_bounds(counts, N)[0], lo2, "CUSUMSQ lower bound")
    close(cusum_squares_bounds(counts, N)[1], hi2, "CUSUMSQ upper bound")
    close(res.coefs[1:, :, 0], sm_res.recursive_coefficients.filtered.T[d:], "coefficients")


def test_sum_of_squared_recursive_residuals_is_the_residual_sum_of_squares():
    """Σ w_t² over t > k = ‖y − Xψ_T‖² (g = 1, ridge 0; Brown, Durbin & Evans 1975),
    and S of the state is its square root, for several targets at once."""
    rng = np.random.default_rng(13)
    X, Y = rng.standard_normal((2_000, 4)), rng.standard_normal((2_000, 2))
    rec = KF4LLS(diagnostics=True)
    state = rec.fold(rec.init(4, 2), X, Y, block_edges(2_000, 37, 4), 1, 10**9).state
    rss = ((Y - X @ np.linalg.lstsq(X, Y, rcond=None)[0]) ** 2).sum(axis=0)
    np.testing.assert_allclose(state["rr_sumsq"], rss, rtol=1e-10)
    np.testing.assert_allclose(np.diag(state["S"].T @ state["S"]), rss, rtol=1e-10)
    assert int(state["rr_count"]) == 2_000 - 4


def test_diagnostics_need_the_qr_solver():
    with pytest.raises(ValueError, match="solver='qr'"):
        RLS(solver="normal", diagnostics=True)
    assert KF4LLS(diagnostics=True).scan_unavailable()
    assert KF4LLS().scan_unavailable() is None


def test_per_sample_folds_cut_anywhere_give_the_numbers_of_one_fold():
    """The compiled kernel rotates rows two at a time; folds cut at odd rows (as a
    pipeline cuts a stream at chunk edges) must still round exactly alike."""
    rng = np.random.default_rng(14)
    X, Y = rng.standard_normal((1_001, 5)), rng.standard_normal((1_001, 2))
    rec = RLS(forgetting=0.99, ridge=1e-3)
    edges = block_edges(1_001, 1)
    whole = rec.fold(rec.init(5, 2), X, Y, edges, 1, 7)
    state, coefs = rec.init(5, 2), []
    for a, b in ((0, 1), (1, 4), (4, 333), (333, 1_001)):
        part = rec.fold(state, X[a:b], Y[a:b], edges[a:b + 1] - a, a + 1, 7, a)
        state = part.state
        coefs.append(part.coefs)
    np.testing.assert_array_equal(np.concatenate(coefs), whole.coefs)
    for key in whole.state:
        np.testing.assert_array_equal(state[key], whole.state[key], err_msg=key)
