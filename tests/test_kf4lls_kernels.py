"""KF4LLS / RLS kernels against batch least squares, and the two forms against each other."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels import KF4LLS, RLS, SingularMatrixError, block_edges, spd_solve
from streamlsq.kernels.recursions.contract import BlockGrid


def _data(seed, n=600, q=5, K=2, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q)).astype(dtype)
    Y = (X @ rng.standard_normal((q, K)) + rng.standard_normal((n, K))).astype(dtype)
    return X, Y


def _weighted_lstsq(X, Y, edges, g, ridge=0.0):
    """Direct solve of min Σ_j g^(m-j) ||Y_j - X_j ψ||² + g^m ridge ||ψ||² over blocks 1..m."""
    m = len(edges) - 1
    w = np.repeat(g ** np.arange(m - 1, -1, -1.0), np.diff(edges))
    sw = np.sqrt(w)[:, None]
    A, B = X[: edges[-1]] * sw, Y[: edges[-1]] * sw
    if ridge:
        A = np.vstack([A, np.sqrt(ridge * g**m) * np.eye(X.shape[1])])
        B = np.vstack([B, np.zeros((X.shape[1], Y.shape[1]))])
    return np.linalg.lstsq(A, B, rcond=None)[0]


def test_kf4lls_every_step_is_batch_least_squares():
    X, Y = _data(0)
    edges = block_edges(len(X), 37, first_block_size=50)
    res = KF4LLS().fold(KF4LLS().init(5, 2), X, Y, edges, 1, 1)
    assert list(res.steps) == list(range(1, len(edges)))
    for i, step in enumerate(res.steps):
        n = edges[step]
        assert res.rows_seen[i] == n
        np.testing.assert_allclose(res.coefs[i], np.linalg.lstsq(X[:n], Y[:n], rcond=None)[0],
                                   rtol=1e-11, atol=1e-12)


def test_kf4lls_final_does_not_depend_on_psi0_when_h0_is_zero():
    X, Y = _data(1)
    edges = block_edges(len(X), 100)
    a = KF4LLS().fold(KF4LLS().init(5, 2), X, Y, edges, 1, 1)
    k = KF4LLS(coef0=np.full((5, 2), 7.0))
    b = k.fold(k.init(5, 2), X, Y, edges, 1, 1)
    np.testing.assert_allclose(a.coefs, b.coefs, rtol=1e-10, atol=1e-12)


def test_ridge_start_is_ridge_regression():
    X, Y = _data(2)
    delta = 3.0
    k = KF4LLS(ridge=delta)
    res = k.fold(k.init(5, 2), X, Y, block_edges(len(X), 64), 1, 1)
    closed = np.linalg.solve(X.T @ X + delta * np.eye(5), X.T @ Y)
    np.testing.assert_allclose(res.coefs[-1], closed, rtol=1e-11)


@pytest.mark.parametrize("g", [0.5, 0.9, 0.999])
def test_rls_forgetting_is_weighted_least_squares_at_every_step(g):
    X, Y = _data(3, n=300)
    edges = block_edges(len(X), 20, first_block_size=40)
    rls = RLS(forgetting=g)
    res = rls.fold(rls.init(5, 2), X, Y, edges, 1, 1)
    for i, step in enumerate(res.steps):
        ref = _weighted_lstsq(X, Y, edges[: step + 1], g)
        np.testing.assert_allclose(res.coefs[i], ref, rtol=1e-8, atol=1e-10)


def test_per_sample_rls_with_ridge_matches_weighted_ridge_solve():
    X, Y = _data(4, n=200, q=4, K=1)
    g, mu = 0.95, 0.5
    edges = block_edges(len(X), 1)
    rls = RLS(forgetting=g, ridge=mu)
    res = rls.fold(rls.init(4, 1), X, Y, edges, 1, 1)
    for step in (1, 2, 3, 10, 57, 200):
        ref = _weighted_lstsq(X, Y, edges[: step + 1], g, ridge=mu)
        np.testing.assert_allclose(res.coefs[step - 1], ref, rtol=1e-8, atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(30, 400),
    block=st.integers(1, 60),
    first=st.integers(10, 80),
    every=st.integers(1, 7),
    g=st.sampled_from([1.0, 0.97, 0.6]),
    ridge=st.sampled_from([0.0, 0.1]),
    seed=st.integers(0, 2**16),
)
def test_scan_form_equals_sequential_form(n, block, first, every, g, ridge, seed):
    X, Y = _data(seed, n=n, q=4, K=2)
    k = KF4LLS(ridge=ridge, forgetting=g)
    grid = BlockGrid(n, block, first)
    seq = k.fold(k.init(4, 2), X, Y, grid.edges(0, grid.n_blocks), 1, every)
    # the same run as a parallel map over two pieces, then an in-order prefix
    mid = grid.n_blocks // 2
    summaries = []
    for k0, k1 in ((0, mid), (mid, grid.n_blocks)):
        if k1 == k0:
            continue
        r0 = grid.edge(k0)
        rec = [s - k0 for s in range(k0 + 1, k1 + 1) if s % every == 0 or s == k1]
        summaries += k.summarize(X[r0 : grid.edge(k1)], Y[r0 : grid.edge(k1)],
                                 grid.edges(k0, k1) - r0, np.array(rec))
    states = k.scan(k.to_info(k.init(4, 2)), summaries)
    by_step = {int(s["blocks"]): s for s in states}
    for i, step in enumerate(seq.steps):
        np.testing.assert_allclose(k.finish(by_step[int(step)])["psi"], seq.coefs[i],
                                   rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize(("solver", "key"), [("normal", "H"), ("qr", "R")])
def test_update_is_pure(solver, key):
    X, Y = _data(5, n=50)
    k = KF4LLS(solver=solver)
    s0 = k.init(5, 2)
    s1 = k.update(s0, X, Y)
    copies = {n: np.copy(v) for n, v in s1.items()}
    Xc, Yc = X.copy(), Y.copy()
    k.update(s1, X, Y)
    assert all(np.array_equal(copies[n], s1[n]) for n in s1)
    assert np.array_equal(X, Xc) and np.array_equal(Y, Yc)
    assert np.all(s0[key] == 0)


def test_rank_deficient_first_block_is_refused_with_its_rank():
    X, Y = _data(6, n=40)
    X[:, 3] = X[:, 0] + X[:, 1]  # collinear column
    with pytest.raises(SingularMatrixError) as err:
        KF4LLS().update(KF4LLS().init(5, 2), X, Y)
    assert err.value.rank == 4 and err.value.size == 5
    # a ridge start removes the singularity
    KF4LLS(ridge=1e-6).update(KF4LLS(ridge=1e-6).init(5, 2), X, Y)


def test_float32_is_accepted_and_stays_float32():
    X, Y = _data(7, dtype=np.float32)
    k = KF4LLS()
    res = k.fold(k.init(5, 2, np.float32), X, Y, block_edges(len(X), 100), 1, 1)
    assert res.coefs.dtype == np.float32
    ref = np.linalg.lstsq(X.astype(np.float64), Y.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(res.coefs[-1], ref, rtol=1e-3, atol=1e-4)


def test_spd_solve_refuses_singular_and_solves_spd():
    rng = np.random.default_rng(8)
    A = rng.standard_normal((6, 6))
    H = A @ A.T + 6 * np.eye(6)
    B = rng.standard_normal((6, 2))
    np.testing.assert_allclose(H @ spd_solve(H, B), B, atol=1e-12)
    v = rng.standard_normal((6, 3))
    with pytest.raises(SingularMatrixError):
        spd_solve(v @ v.T, B)


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="forgetting"):
        RLS(forgetting=1.5)
    with pytest.raises(ValueError, match="forgetting"):
        KF4LLS(forgetting=0.0)
    with pytest.raises(ValueError, match="ridge"):
        KF4LLS(ridge=-1)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 500), b=st.integers(1, 80), f=st.one_of(st.none(), st.integers(1, 90)))
def test_block_grid_matches_explicit_edges(n, b, f):
    grid = BlockGrid(n, b, f)
    edges = block_edges(n, b, f)
    assert grid.n_blocks == len(edges) - 1
    np.testing.assert_array_equal(grid.edges(0, grid.n_blocks), edges)
    for row in range(0, n + 1, max(1, n // 17)):
        k = grid.floor_edge(row)
        assert edges[k] <= row and (k == grid.n_blocks or edges[k + 1] > row)
