"""Incremental BFGS regressor (kernels/recursions/bfgs.py; De Melo, 2019; docs/algorithms.md).

What the paper guarantees, and what is tested here against independent
references (numpy.linalg.lstsq, the literal product form of (2.8), closed forms):
W₀ is the least-squares fit of the first block (1.2); the exact line search
(2.3–2.4) minimises the current block's loss along p_k; z_k is the change of the
block gradient (2.6) and the BFGS update (2.8) satisfies the secant equation
B_k z_k = δW_k. The paper does not claim, and the recursion does not give, the
least-squares fit of all blocks seen (that is KF4LLS); it does coincide with it
when all blocks share an exact solution.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels import SingularMatrixError
from streamlsq.kernels.recursions.bfgs import (
    IncrementalBFGS,
    balanced_rates,
    bfgs_inverse_update,
    block_bfgs_inverse_update,
)

EPS = np.finfo(np.float64).eps


def _stream(rng, n_blocks, block, q, K, noise=0.1, first=None):
    W = rng.normal(size=(q, K))
    n = (first or block) + (n_blocks - 1) * block
    X = rng.normal(size=(n, q))
    Y = X @ W + noise * rng.normal(size=(n, K))
    edges = np.r_[0, np.arange(first or block, n + 1, block)]
    return X, Y, edges, W


def _blocks(X, Y, edges):
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        yield X[a:b], Y[a:b]


def _loss(X, Y, W):
    return 0.5 * float(((Y - X @ W) ** 2).sum())


def _product_form(B, s, z):
    """(2.8) literally: (I − s zᵀ/c) B (I − z sᵀ/c) + s sᵀ/c, c = zᵀs."""
    c = float(z @ s)
    I = np.eye(B.shape[0])
    return (I - np.outer(s, z) / c) @ B @ (I - np.outer(z, s) / c) + np.outer(s, s) / c


def _spd(rng, q):
    M = rng.normal(size=(q, q))
    return M @ M.T + q * np.eye(q)


# --------------------------------------------------------------------------
# first block
# --------------------------------------------------------------------------
@pytest.mark.parametrize("K", [1, 3])
def test_first_block_is_least_squares_and_B0_inverts_H0(K):
    rng = np.random.default_rng(0)
    X, Y, _, _ = _stream(rng, 1, 40, 6, K)
    model = IncrementalBFGS()
    state = model.update(model.init(6, K), X, Y)
    ref = np.linalg.lstsq(X, Y, rcond=None)[0]
    # cond(XᵀX) ≈ 10 here: a Cholesky solve is accurate to ~cond·eps
    np.testing.assert_allclose(state["W"], ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(state["B"] @ (X.T @ X), np.eye(6), atol=1e-12)
    np.testing.assert_array_equal(state["B"], state["B"].T)
    # the paper's remark below (2.1): p₀ = H₀⁻¹X₀ᵀ(Y₀ − X₀W₀) = 0 at W₀
    p0 = state["B"] @ X.T @ (Y - X @ state["W"])
    assert np.abs(p0).max() < 1e-12
    assert not model.ridge_used(state) and model.n_skipped(state) == 0


def test_rank_deficient_first_block_needs_ridge():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3, 5))  # 3 rows, 5 features: X₀ᵀX₀ has rank 3
    Y = rng.normal(size=(3, 1))
    model = IncrementalBFGS()
    with pytest.raises(SingularMatrixError, match="ridge"):
        model.update(model.init(5, 1), X, Y)
    ridge = IncrementalBFGS(ridge=0.5)
    state = ridge.update(ridge.init(5, 1), X, Y)
    assert ridge.ridge_used(state)
    H = X.T @ X + 0.5 * np.eye(5)
    np.testing.assert_allclose(state["W"], np.linalg.solve(H, X.T @ Y), atol=1e-12)
    np.testing.assert_allclose(state["B"] @ H, np.eye(5), atol=1e-12)
    # a full-rank first block does not use the ridge even when one is given
    X2 = rng.normal(size=(20, 5))
    state2 = ridge.update(ridge.init(5, 1), X2, X2[:, :1])
    assert not ridge.ridge_used(state2)


# --------------------------------------------------------------------------
# exact line search: what (2.3)-(2.4) guarantee
# --------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    q=st.integers(1, 5),
    K=st.integers(1, 3),
    block=st.integers(1, 12),
)
def test_exact_line_search_minimises_block_loss_along_p(seed, q, K, block):
    rng = np.random.default_rng(seed)
    X, Y, edges, _ = _stream(rng, 6, block, q, K, noise=0.5, first=q + 3)
    model = IncrementalBFGS()
    state = model.init(q, K)
    for j, (Xk, Yk) in enumerate(_blocks(X, Y, edges)):
        new = model.update(state, Xk, Yk)
        if j > 0:
            W, B = state["W"], state["B"]
            E = Yk - Xk @ W
            P = B @ Xk.T @ E  # (2.2), recomputed from the previous state
            XP = Xk @ P
            M_ref = np.linalg.lstsq(XP, E, rcond=None)[0]
            E_new = Yk - Xk @ new["W"]
            # stationarity of L_k along p: the K×K derivative (XP)ᵀ(Y − XW_k) vanishes.
            # Rounding bound of a backward-stable least-squares step, plus the
            # test's own rounding of X·W_k: eps·‖XP‖(‖XP‖‖M‖ + ‖E‖ + ‖X‖‖W_k‖).
            nXP = np.linalg.norm(XP)
            scale = nXP * (nXP * np.linalg.norm(M_ref) + np.linalg.norm(E))
            scale += nXP * np.linalg.norm(Xk) * np.linalg.norm(new["W"])
            assert np.abs(XP.T @ E_new).max() <= 100 * EPS * scale
            # hence L_k(W_k) <= L_k(W_{k-1}), and equals the K×K lstsq optimum
            best = _loss(Xk, Yk, W + P @ M_ref)
            assert _loss(Xk, Yk, new["W"]) <= best + 1e-9 * (1 + best)
            assert _loss(Xk, Yk, new["W"]) <= _loss(Xk, Yk, W) * (1 + 1e-12) + 1e-300
            # secant equation of the BFGS update (2.8): B_k z_k = δW_k when not skipped.
            # Error model: the update cancels terms of size κ²(‖B_{k-1}‖+‖B_k‖)‖z‖ with
            # κ = ‖δW‖‖z‖/λ_min(C), and the test's δW = W_k − W_{k−1} carries
            # eps·‖W_k‖, which B_k·XᵀX maps to the check (observed ratio ≤ 2 over
            # 15 000 random steps; 100 is the margin).
            dW = new["W"] - W
            z = Xk.T @ (Xk @ dW)
            if new["n_skipped"] == state["n_skipped"]:
                C = (Xk @ dW).T @ (Xk @ dW)
                kappa = np.linalg.norm(dW, 2) * np.linalg.norm(z, 2) / np.linalg.eigvalsh(C)[0]
                nB = np.linalg.norm(B, 2) + np.linalg.norm(new["B"], 2)
                tol = kappa**2 * (nB * np.linalg.norm(z) + np.linalg.norm(dW))
                tol += (1 + nB * np.linalg.norm(Xk.T @ Xk, 2)) * np.linalg.norm(new["W"])
                assert np.linalg.norm(new["B"] @ z - dW) <= 100 * EPS * tol
            # B stays symmetric positive definite
            np.testing.assert_array_equal(new["B"], new["B"].T)
            assert np.linalg.eigvalsh(new["B"]).min() > 0
        state = new


def test_exact_step_with_one_feature_is_least_squares_of_the_current_block():
    # q = 1: p_k is a scalar multiple of the only direction, so the exact line
    # search minimises L_k over all of W: W_k = lstsq(X_k, Y_k) for every block.
    # This is why the recursion is not the least-squares fit of all blocks seen.
    rng = np.random.default_rng(2)
    X, Y, edges, _ = _stream(rng, 8, 15, 1, 1, noise=1.0)
    model = IncrementalBFGS()
    state = model.init(1, 1)
    for Xk, Yk in _blocks(X, Y, edges):
        state = model.update(state, Xk, Yk)
        ref = np.linalg.lstsq(Xk, Yk, rcond=None)[0]
        np.testing.assert_allclose(state["W"], ref, rtol=1e-12)
    stacked = np.linalg.lstsq(X, Y, rcond=None)[0]
    assert abs(state["W"][0, 0] - stacked[0, 0]) > 1e-3  # different fits, as derived


@pytest.mark.parametrize("rate", ["exact", 0.7])
def test_consistent_blocks_stay_at_the_stacked_least_squares_solution(rate):
    # When every block is fitted exactly by one W* (no noise), W₀ = W* and every
    # later residual is rounding, so W_k stays at lstsq of the stacked blocks.
    # Tolerance: cond(X₀ᵀX₀) ≈ 10 times eps, times the few dozen blocks.
    rng = np.random.default_rng(3)
    X, Y, edges, W_true = _stream(rng, 30, 25, 6, 2, noise=0.0)
    model = IncrementalBFGS(rate=rate)
    state = model.init(6, 2)
    for Xk, Yk in _blocks(X, Y, edges):
        state = model.update(state, Xk, Yk)
    stacked = np.linalg.lstsq(X, Y, rcond=None)[0]
    np.testing.assert_allclose(state["W"], stacked, rtol=0, atol=1e-11)


# --------------------------------------------------------------------------
# the B update (2.8): scalar and K×K forms
# --------------------------------------------------------------------------
def test_scalar_update_equals_product_form_2_8():
    rng = np.random.default_rng(4)
    for q in (1, 3, 7):
        B = np.linalg.inv(_spd(rng, q))  # reference only: an SPD test matrix
        G = _spd(rng, q)
        s = rng.normal(size=q)
        z = G @ s
        B1, skipped = bfgs_inverse_update(B, s, z)
        assert not skipped
        ref = _product_form(B, s, z)
        np.testing.assert_allclose(B1, ref, rtol=1e-12, atol=1e-14 * np.abs(ref).max())
        np.testing.assert_allclose(B1 @ z, s, rtol=1e-10)


def test_block_form_at_one_target_equals_scalar_form():
    rng = np.random.default_rng(5)
    for q in (1, 2, 6):
        B = np.linalg.inv(_spd(rng, q))
        X = rng.normal(size=(10, q))
        s = rng.normal(size=(q, 1))
        z = X.T @ X @ s
        Bs, sk1 = bfgs_inverse_update(B, s, z)
        Bm, sk2 = block_bfgs_inverse_update(B, s, z)
        assert not sk1 and not sk2
        np.testing.assert_allclose(Bm, Bs, rtol=1e-12, atol=1e-13 * np.abs(Bs).max())


def test_block_form_secant_equation_and_positive_definiteness():
    rng = np.random.default_rng(6)
    q, K = 7, 3
    B = np.linalg.inv(_spd(rng, q))
    G = _spd(rng, q)
    S = rng.normal(size=(q, K))
    Z = G @ S
    B1, skipped = block_bfgs_inverse_update(B, S, Z)
    assert not skipped
    np.testing.assert_allclose(B1 @ Z, S, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(B1, B1.T)
    assert np.linalg.eigvalsh(B1).min() > 0


def test_recursion_with_one_target_matches_matrix_form_run():
    # the recursion uses the scalar form at K = 1; a run whose B update goes
    # through the K×K form must give the same W and B to rounding
    rng = np.random.default_rng(7)
    X, Y, edges, _ = _stream(rng, 10, 20, 5, 1)
    model = IncrementalBFGS()
    state = model.init(5, 1)
    W, B = None, None
    for j, (Xk, Yk) in enumerate(_blocks(X, Y, edges)):
        state = model.update(state, Xk, Yk)
        if j == 0:
            W, B = state["W"].copy(), state["B"].copy()
            continue
        P = B @ Xk.T @ (Yk - Xk @ W)
        dW = P * (float(((Xk @ P) * (Yk - Xk @ W)).sum()) / float(((Xk @ P) ** 2).sum()))
        B, _ = block_bfgs_inverse_update(B, dW, Xk.T @ Xk @ dW)
        W = W + dW
        np.testing.assert_allclose(state["W"], W, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(state["B"], B, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------
# curvature safeguard
# --------------------------------------------------------------------------
def test_zero_residual_block_skips_the_update():
    rng = np.random.default_rng(8)
    X, Y, edges, _ = _stream(rng, 1, 30, 4, 1)
    model = IncrementalBFGS()
    state = model.update(model.init(4, 1), X, Y)
    Xk = rng.normal(size=(10, 4))
    Yk = Xk @ state["W"]  # fitted exactly: E = 0, p = 0, δW = 0, zᵀδW = 0
    new = model.update(state, Xk, Yk)
    assert model.n_skipped(new) == 1
    np.testing.assert_array_equal(new["B"], state["B"])
    np.testing.assert_array_equal(new["W"], state["W"])


@pytest.mark.parametrize("rate", ["exact", 0.5])
def test_identical_target_columns_make_the_curvature_matrix_singular(rate):
    # Y with two identical columns: δW has identical columns, C = zᵀδW (2×2) is
    # singular, so every B update after the first block is skipped; W still moves
    # and each column equals the one-target run after the first step.
    rng = np.random.default_rng(9)
    X, y, edges, _ = _stream(rng, 6, 20, 4, 1, noise=0.3)
    Y2 = np.hstack([y, y])
    model = IncrementalBFGS(rate=rate)
    s1, s2 = model.init(4, 1), model.init(4, 2)
    for j, (Xk, a, b) in enumerate(
        zip(*(np.split(M, edges[1:-1]) for M in (X, y, Y2)), strict=True)
    ):
        s1, s2 = model.update(s1, Xk, a), model.update(s2, Xk, b)
        if j == 1:
            np.testing.assert_allclose(s2["W"], np.hstack([s1["W"], s1["W"]]), rtol=1e-10)
    assert model.n_skipped(s2) == len(edges) - 2
    assert model.n_skipped(s1) == 0


# --------------------------------------------------------------------------
# fixed and class-balanced rates
# --------------------------------------------------------------------------
def test_fixed_rate_reduces_the_block_loss_when_below_twice_the_optimal_step():
    # For a fixed α the block loss along p is the parabola
    # L(α) = L(0) − α pᵀR + ½α²‖Xp‖², which decreases iff 0 < α < 2α*, α* = pᵀR/‖Xp‖².
    rng = np.random.default_rng(10)
    X, Y, edges, W_true = _stream(rng, 25, 40, 5, 1, noise=0.2, first=8)
    rate = 0.6
    model = IncrementalBFGS(rate=rate)
    state = model.init(5, 1)
    checked = 0
    for j, (Xk, Yk) in enumerate(_blocks(X, Y, edges)):
        new = model.update(state, Xk, Yk)
        if j > 0:
            E = Yk - Xk @ state["W"]
            P = state["B"] @ Xk.T @ E
            pR, curv = float(P[:, 0] @ (Xk.T @ E)[:, 0]), float(((Xk @ P) ** 2).sum())
            expected = _loss(Xk, Yk, state["W"]) - rate * pR + 0.5 * rate**2 * curv
            assert _loss(Xk, Yk, new["W"]) == pytest.approx(expected, rel=1e-9)
            if rate < 2 * pR / curv:
                assert _loss(Xk, Yk, new["W"]) < _loss(Xk, Yk, state["W"])
                checked += 1
        state = new
    assert checked > 0


def _held_out_mse(model, X, Y, edges, Xt, Yt):
    state = model.init(X.shape[1], Y.shape[1])
    mses = []
    for Xk, Yk in _blocks(X, Y, edges):
        state = model.update(state, Xk, Yk)
        mses.append(float(((Yt - Xt @ state["W"]) ** 2).mean()))
    return np.array(mses), state


def test_fixed_rate_run_reduces_the_held_out_loss():
    # A noisy 8-row first block gives a poor W₀; 200-row blocks then pull W
    # towards the truth. Held-out excess MSE ≈ ‖W − W*‖²; the first block's fit
    # error is ~σ²·q/(8 − q) = 4 times larger than a 200-row block's, ~σ²·q/200.
    rng = np.random.default_rng(11)
    X, Y, edges, W_true = _stream(rng, 30, 200, 4, 1, noise=1.0, first=8)
    Xt = rng.normal(size=(5000, 4))
    Yt = Xt @ W_true
    mses, state = _held_out_mse(IncrementalBFGS(rate=0.5), X, Y, edges, Xt, Yt)
    assert np.isfinite(mses).all()
    assert mses[-5:].mean() < 0.25 * mses[0]


def test_balanced_rates_formula():
    Y = np.array([[1.0], [0.0], [0.0], [0.0]])
    A = balanced_rates(Y, 2.0)  # p = 1, n = 3, m = 4
    np.testing.assert_allclose(A[:, 0], [2.0 * 3 / 4, 2.0 * 1 / 4, 2.0 * 1 / 4, 2.0 * 1 / 4])
    # the two rates add up to the reference rate
    assert A[0, 0] + A[1, 0] == pytest.approx(2.0)
    # −1/1 coding and several targets: each target counts its own classes
    Y2 = np.array([[1, -1], [-1, -1], [1, 1], [1, -1]], dtype=float)
    A2 = balanced_rates(Y2, 1.0)
    np.testing.assert_allclose(A2[:, 0], [0.25, 0.75, 0.25, 0.25])
    np.testing.assert_allclose(A2[:, 1], [0.25, 0.25, 0.75, 0.25])
    # cumulative counts given explicitly
    A3 = balanced_rates(Y, 1.0, n_positive=np.array([5]), n_negative=np.array([5]))
    np.testing.assert_allclose(A3[:, 0], 0.5)


def test_balanced_rates_with_equal_classes_equal_the_half_fixed_rate():
    # p = n in every block: α_p = α_n = α_r/2, so the balanced step is the
    # fixed-rate step with α_r/2 (an independent code path).
    rng = np.random.default_rng(12)
    n_blocks, half, q = 8, 10, 3
    X = rng.normal(size=(n_blocks * 2 * half, q))
    labels = np.tile(np.r_[np.ones(half), np.zeros(half)], n_blocks)[:, None]
    edges = np.arange(0, X.shape[0] + 1, 2 * half)
    bal = IncrementalBFGS(rate=0.8, balanced=True)
    fix = IncrementalBFGS(rate=0.4)
    sb, sf = bal.init(q, 1), fix.init(q, 1)
    for Xk, Yk in _blocks(X, labels, edges):
        sb, sf = bal.update(sb, Xk, Yk), fix.update(sf, Xk, Yk)
    np.testing.assert_allclose(sb["W"], sf["W"], rtol=1e-12)
    np.testing.assert_allclose(sb["B"], sf["B"], rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(sb["n_positive"], [n_blocks * half])


@pytest.mark.parametrize("counts", ["block", "cumulative"])
def test_balanced_rates_run_and_reduce_the_class_balanced_loss(counts):
    # 0/1 labels with ~20 % positives from a noisy linear score. Balanced rates
    # weight each class equally, so the loss they reduce is the class-balanced
    # squared loss ½(mean over positives + mean over negatives) of the residual;
    # its minimiser W* is weighted least squares on a large held-out sample.
    # From a poor start (a 6-row first block) the excess balanced loss must
    # shrink by 10x (observed 100-500x over seeds), and end below that of the
    # unbalanced fixed-rate run, which minimises the unweighted loss instead.
    rng = np.random.default_rng(13)
    q, n = 4, 6 + 40 * 100
    w = np.array([-1.5, 1.0, -1.0, 0.5])

    def draw(m):
        X = np.hstack([np.ones((m, 1)), rng.normal(size=(m, q - 1))])
        return X, ((X @ w + 0.3 * rng.normal(size=m)) > 0).astype(float)[:, None]

    X, Y = draw(n)
    Xt, Yt = draw(20000)
    edges = np.r_[0, np.arange(6, n + 1, 100)]
    pos = Yt[:, 0] == 1
    weights = np.where(pos, 0.5 / pos.mean(), 0.5 / (~pos).mean())[:, None]
    W_star = np.linalg.lstsq(Xt * np.sqrt(weights), Yt * np.sqrt(weights), rcond=None)[0]

    def excess(W):
        loss = (weights * (Yt - Xt @ W) ** 2).mean()
        return float(loss - (weights * (Yt - Xt @ W_star) ** 2).mean())

    def run(model):
        state = model.init(q, 1)
        out = []
        for Xk, Yk in _blocks(X, Y, edges):
            state = model.update(state, Xk, Yk)
            out.append(excess(state["W"]))
        return np.array(out), state

    assert 0.1 < Y.mean() < 0.3
    bal, state = run(IncrementalBFGS(rate=1.0, balanced=True, balance_counts=counts, ridge=1e-3))
    plain, _ = run(IncrementalBFGS(rate=1.0, ridge=1e-3))
    assert np.isfinite(bal).all()
    assert bal[-5:].mean() < 0.1 * bal[0]
    assert bal[-5:].mean() < plain[-5:].mean()
    assert state["n_positive"][0] + state["n_negative"][0] == n


# --------------------------------------------------------------------------
# contract and bad input
# --------------------------------------------------------------------------
def test_fold_matches_update_and_state_is_not_mutated():
    rng = np.random.default_rng(14)
    X, Y, edges, _ = _stream(rng, 6, 10, 3, 2)
    model = IncrementalBFGS(rate=0.9)
    s0 = model.init(3, 2)
    res = model.fold(s0, X, Y, edges, first_step=1, record_every=2)
    state = s0
    snapshot = {k: np.array(v, copy=True) for k, v in s0.items()}
    for Xk, Yk in _blocks(X, Y, edges):
        before, copy = state, {k: np.array(v, copy=True) for k, v in state.items()}
        Xc, Yc = Xk.copy(), Yk.copy()
        state = model.update(state, Xk, Yk)
        for k in copy:  # update is pure: neither the old state nor the block changed
            np.testing.assert_array_equal(before[k], copy[k])
        np.testing.assert_array_equal(Xk, Xc)
        np.testing.assert_array_equal(Yk, Yc)
    for k in snapshot:
        np.testing.assert_array_equal(s0[k], snapshot[k])
    np.testing.assert_array_equal(res.state["W"], state["W"])
    np.testing.assert_array_equal(res.steps, [2, 4, 6])
    assert res.coefs.shape == (3, 3, 2)
    assert set(model.state_dims()) == set(state)


def test_float32_is_computed_in_float32():
    rng = np.random.default_rng(15)
    X, Y, edges, _ = _stream(rng, 5, 30, 3, 1)
    model = IncrementalBFGS()
    state = model.init(3, 1, dtype=np.float32)
    for Xk, Yk in _blocks(X.astype(np.float32), Y.astype(np.float32), edges):
        state = model.update(state, Xk, Yk)
    assert state["W"].dtype == np.float32 and state["B"].dtype == np.float32
    ref = model.init(3, 1)
    for Xk, Yk in _blocks(X, Y, edges):
        ref = model.update(ref, Xk, Yk)
    np.testing.assert_allclose(state["W"], ref["W"], rtol=1e-4, atol=1e-5)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="rate"):
        IncrementalBFGS(rate=-1.0)
    with pytest.raises(ValueError, match="rate"):
        IncrementalBFGS(rate="fast")
    with pytest.raises(ValueError, match="reference rate"):
        IncrementalBFGS(balanced=True)
    with pytest.raises(ValueError, match="ridge"):
        IncrementalBFGS(ridge=-0.1)
    with pytest.raises(ValueError, match="balance_counts"):
        IncrementalBFGS(rate=1.0, balanced=True, balance_counts="total")
    model = IncrementalBFGS(rate=1.0, balanced=True)
    state = model.init(2, 1)
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(ValueError, match="binary targets.*row 2"):
        model.update(state, X, np.array([[0.0], [1.0], [0.5], [1.0], [0.0]]))
    with pytest.raises(ValueError, match="one coding"):
        model.update(state, X, np.array([[0.0], [1.0], [-1.0], [1.0], [0.0]]))
    plain = IncrementalBFGS()
    s = plain.init(2, 1)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="X has a non-finite value .* row 3"):
        plain.update(s, Xn, np.ones((5, 1)))
    with pytest.raises(ValueError, match=r"X must have shape \(n, 2\)"):
        plain.update(s, np.ones((5, 3)), np.ones((5, 1)))
    with pytest.raises(ValueError, match="same rows"):
        plain.update(s, X, np.ones((4, 1)))
    with pytest.raises(ValueError, match=r"Y must have shape \(n, 1\)"):
        plain.update(s, X, np.ones((5, 2)))
