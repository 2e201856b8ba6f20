"""Interleaved KF4LLS kernel (docs/algorithms.md): recursion, α estimation, Figure 1."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels import KF4LLS
from streamlsq.kernels.recursions import interleaved as il
from streamlsq.kernels.recursions.contract import block_edges
from streamlsq.kernels.studies import interleaved as ils
from streamlsq.kernels.synthetic import interleaved as ilg


def paper_blocks(rng, m, n, q, K=1, alpha=0.25, mu=(3.0, -4.0)):
    """m A-blocks and m B-blocks from the paper's model (non-zero feature means)."""
    r_b = rng.uniform(-5, 5, (q, K))
    r_f = rng.uniform(-5, 5, (q, K))
    A = [rng.normal(mu[0], 1.0, (n, q)) for _ in range(m)]
    B = [rng.normal(mu[1], 1.0, (n, q)) for _ in range(m)]
    a = [X @ r_b + rng.standard_normal((n, K)) for X in A]
    b = [X @ r_f + rng.standard_normal((n, K)) for X in B]
    return A, a, B, b


def stream(A, a, B, b, start):
    """The alternating stream A1, B1, A2, ... (or B1, A1, ...) as (X, Y) pairs."""
    first, second = ((A, a), (B, b)) if start == "a" else ((B, b), (A, a))
    out = []
    for i in range(len(A)):
        out.append((first[0][i], first[1][i]))
        out.append((second[0][i], second[1][i]))
    return out


def weighted_lstsq(blocks, weights):
    """Oracle: least squares on the stacked, centred, weighted blocks seen so far."""
    X = np.vstack([w * (Xi - Xi.mean(0)) for (Xi, _), w in zip(blocks, weights, strict=True)])
    Y = np.vstack([w * (Yi - Yi.mean(0)) for (_, Yi), w in zip(blocks, weights, strict=True)])
    return np.linalg.lstsq(X, Y, rcond=None)[0]


def run(model, blocks):
    state = model.init(blocks[0][0].shape[1], blocks[0][1].shape[1])
    psis = []
    for X, Y in blocks:
        state = model.update(state, X, Y)
        psis.append(model.coef(state))
    return state, psis


# ---------------------------------------------------------------------------
# α, populations, parity
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0, 0.0, 0.25, 1, 1.0])
def test_validate_alpha_accepts_closed_unit_interval(alpha):
    assert il.validate_alpha(alpha) == float(alpha)


@pytest.mark.parametrize("alpha", [-0.01, 1.0001, float("nan"), float("inf"), "x", None])
def test_validate_alpha_refuses_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        il.validate_alpha(alpha)


def test_population_weight():
    assert il.population_weight(0.25, "a") == pytest.approx(0.5)
    assert il.population_weight(0.25, "b") == pytest.approx(np.sqrt(0.75))
    assert il.population_weight(1.0, "b") == 0.0
    with pytest.raises(ValueError, match="population"):
        il.population_weight(0.5, "c")
    with pytest.raises(ValueError, match="alpha"):
        il.population_weight(2.0, "a")


def test_block_order_and_parity():
    assert il.interleaved_block_order(3, 2, "a") == [
        ("a", 0),
        ("b", 0),
        ("a", 1),
        ("b", 1),
        ("a", 2),
    ]
    assert il.interleaved_block_order(3, 2, "b") == [("b", 0), ("a", 0), ("b", 1), ("a", 1)]
    assert [il.population_of_step(s, "b") for s in (1, 2, 3)] == ["b", "a", "b"]
    model = il.InterleavedKF4LLS(0.3, start="b")
    state = model.init(2, 1)
    assert model.next_population(state) == "b"
    state = model.update(state, np.random.default_rng(0).standard_normal((5, 2)), np.ones((5, 1)))
    assert model.next_population(state) == "a"
    with pytest.raises(ValueError, match="start"):
        il.InterleavedKF4LLS(0.3, start="c")


# ---------------------------------------------------------------------------
# Step 0(a) and the closed form
# ---------------------------------------------------------------------------
def test_center_block_zero_means_and_no_mutation():
    rng = np.random.default_rng(1)
    X = rng.normal(5, 2, (7, 3))
    Y = rng.normal(-3, 1, (7, 2))
    X0, Y0 = X.copy(), Y.copy()
    Xc, Yc = il.center_block(X, Y)
    np.testing.assert_allclose(Xc.mean(0), 0, atol=1e-14)
    np.testing.assert_allclose(Yc.mean(0), 0, atol=1e-14)
    np.testing.assert_allclose(Xc, X - X.mean(0))
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)
    _, yc = il.center_block(X, Y[:, 0])
    assert yc.shape == (7,)
    Xf, _ = il.center_block(X.astype(np.float32), Y.astype(np.float32))
    assert Xf.dtype == np.float32


def test_center_block_refuses_bad_input():
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="rows"):
        il.center_block(X, np.ones(3))
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X has a non-finite value .* \(2, 1\)"):
        il.center_block(bad, np.ones(4))
    with pytest.raises(ValueError, match="2-D"):
        il.center_block(np.ones(4), np.ones(4))


@pytest.mark.parametrize("start", ["a", "b"])
@pytest.mark.parametrize("K", [1, 3])
def test_psi2_equals_closed_form(start, K):
    rng = np.random.default_rng(2)
    A, a, B, b = paper_blocks(rng, 1, 40, 4, K)
    model = il.InterleavedKF4LLS(0.3, start=start)
    _, psis = run(model, stream(A, a, B, b, start))
    expected = il.interleaved_closed_form(A[0], a[0], B[0], b[0], 0.3)
    np.testing.assert_allclose(psis[1], expected, rtol=1e-10, atol=1e-12)
    # 1-D targets give a 1-D closed form with the same numbers
    np.testing.assert_allclose(
        il.interleaved_closed_form(A[0], a[0][:, 0], B[0], b[0][:, 0], 0.3), expected[:, 0]
    )


@settings(max_examples=25, deadline=None)
@given(
    alpha=st.floats(0.05, 0.95),
    q=st.integers(1, 4),
    K=st.integers(1, 2),
    m=st.integers(1, 3),
    extra=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_step_is_weighted_least_squares_and_orders_agree(alpha, q, K, m, extra, seed):
    rng = np.random.default_rng(seed)
    A, a, B, b = paper_blocks(rng, m, q + 1 + extra, q, K, alpha)
    results = {}
    for start in ("a", "b"):
        blocks = stream(A, a, B, b, start)
        model = il.InterleavedKF4LLS(alpha, start=start)
        _, psis = run(model, blocks)
        weights = [model.step_weight(s + 1) for s in range(len(blocks))]
        for t in range(len(blocks)):
            oracle = weighted_lstsq(blocks[: t + 1], weights[: t + 1])
            scale = np.abs(oracle).max()
            np.testing.assert_allclose(psis[t], oracle, rtol=1e-7, atol=1e-9 * scale)
        results[start] = psis
    for t in range(1, 2 * m, 2):  # even steps 2, 4, ...
        np.testing.assert_allclose(results["a"][t], results["b"][t], rtol=1e-8, atol=1e-10)


def test_alpha_one_is_centred_fit_on_a_blocks_alone():
    rng = np.random.default_rng(3)
    A, a, B, b = paper_blocks(rng, 3, 30, 3)
    _, psis = run(il.InterleavedKF4LLS(1.0, start="a"), stream(A, a, B, b, "a"))
    oracle = weighted_lstsq(list(zip(A, a, strict=True)), [1.0] * 3)
    np.testing.assert_allclose(psis[-1], oracle, rtol=1e-9)
    # the weight-0 population may not open the stream without a ridge start...
    with pytest.raises(ValueError, match="weight 0"):
        il.InterleavedKF4LLS(0.0, start="a")
    # ...but may with one, and then leaves ψ at ψ₀ = 0 until a B-block arrives
    _, psis = run(il.InterleavedKF4LLS(0.0, start="a", ridge=1.0), stream(A, a, B, b, "a"))
    np.testing.assert_array_equal(psis[0], 0.0)


@pytest.mark.parametrize(("solver", "key"), [("normal", "H"), ("qr", "R")])
def test_update_is_pure_and_float32_works(solver, key):
    rng = np.random.default_rng(4)
    A, a, B, b = paper_blocks(rng, 2, 25, 3)
    model = il.InterleavedKF4LLS(0.4, solver=solver)
    state = model.init(3, 1)
    X, Y = A[0].copy(), a[0].copy()
    new = model.update(state, X, Y)
    np.testing.assert_array_equal(state[key], 0.0)
    np.testing.assert_array_equal(X, A[0])
    assert new["blocks"] == 1 and new["rows"] == 25
    blocks = stream(A, a, B, b, "a")
    _, psi64 = run(model, blocks)
    blocks32 = [(X.astype(np.float32), Y.astype(np.float32)) for X, Y in blocks]
    s32 = model.init(3, 1, np.float32)
    for X, Y in blocks32:
        s32 = model.update(s32, X, Y)
    assert s32["psi"].dtype == np.float32
    # float32 carries ~7 digits; H has condition ~1e2 here
    np.testing.assert_allclose(s32["psi"], psi64[-1], rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------
# scan == fold
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("start", "ridge", "pieces", "cuts"),
    [
        ("a", 0.0, [3, 3], [[1, 3], [2, 3]]),  # first piece odd: parity carried over
        ("b", 0.0, [1, 2, 3], [[1], [1, 2], [3]]),
        ("a", 0.5, [6], [[2, 5, 6]]),
    ],
)
def test_scan_equals_fold(start, ridge, pieces, cuts):
    rng = np.random.default_rng(5)
    A, a, B, b = paper_blocks(rng, 3, 20, 3, K=2)
    blocks = stream(A, a, B, b, start)
    model = il.InterleavedKF4LLS(0.25, start=start, ridge=ridge)
    _, psis = run(model, blocks)
    info = model.to_info(model.init(3, 2))
    done = 0
    for size, piece_cuts in zip(pieces, cuts, strict=True):
        X = np.vstack([blk[0] for blk in blocks[done : done + size]])
        Y = np.vstack([blk[1] for blk in blocks[done : done + size]])
        edges = block_edges(X.shape[0], 20)
        states = model.scan(info, model.summarize(X, Y, edges, np.array(piece_cuts)))
        for c, s in zip(piece_cuts, states, strict=True):
            assert int(s["blocks"]) == done + c
            np.testing.assert_allclose(
                model.finish(s)["psi"], psis[done + c - 1], rtol=1e-9, atol=1e-11
            )
        info = states[-1]
        done += size


def test_fold_records_like_update():
    rng = np.random.default_rng(6)
    A, a, B, b = paper_blocks(rng, 3, 15, 2)
    blocks = stream(A, a, B, b, "a")
    model = il.InterleavedKF4LLS(0.6)
    _, psis = run(model, blocks)
    X = np.vstack([blk[0] for blk in blocks])
    Y = np.vstack([blk[1] for blk in blocks])
    res = model.fold(model.init(2, 1), X, Y, block_edges(90, 15), 1, 2)
    np.testing.assert_array_equal(res.steps, [2, 4, 6])
    np.testing.assert_allclose(res.coefs, np.stack([psis[1], psis[3], psis[5]]), rtol=1e-12)


# ---------------------------------------------------------------------------
# α estimation
# ---------------------------------------------------------------------------
def test_estimate_alpha_means_exact_and_combined():
    mU = np.array([1.0, -2.0, 5.0, 0.5])
    mV = np.array([3.0, 4.0, -1.0, 0.0])
    alphas = np.array([0.2, 0.25, 0.3, 0.35])
    mZ = alphas * mU + (1 - alphas) * mV
    est = il.estimate_alpha_means(mU, mV, mZ)
    np.testing.assert_allclose(est.per_column, alphas, rtol=1e-12)
    # combined = the single α that best explains all columns (an independent lstsq)
    d, e = mU - mV, mZ - mV
    expected = np.linalg.lstsq(d[:, None], e, rcond=None)[0][0]
    assert est.combined == pytest.approx(expected, rel=1e-12)
    # one α for all columns is recovered exactly
    assert il.estimate_alpha_means(mU, mV, 0.3 * mU + 0.7 * mV).combined == pytest.approx(0.3)


def test_estimate_alpha_means_refuses_coinciding_column_and_clips():
    with pytest.raises(ValueError, match="column 1"):
        il.estimate_alpha_means([1.0, 2.0], [0.0, 2.0], [0.5, 2.0])
    with pytest.raises(ValueError, match="same length"):
        il.estimate_alpha_means([1.0, 2.0], [0.0, 1.0], [0.5])
    est = il.estimate_alpha_means([1.0], [0.0], [1.2])  # beyond A: α = 1.2
    assert est.per_column[0] == pytest.approx(1.2)
    assert est.combined == 1.0


def _mean_only_se(mU_, mV_, mZ_, alpha):
    """Delta-method standard error of the ratio-of-means estimate, per column."""
    s2 = mZ_.var / mZ_.count + alpha**2 * mU_.var / mU_.count
    s2 = s2 + (1 - alpha) ** 2 * mV_.var / mV_.count
    return np.sqrt(s2) / np.abs(mU_.mean - mV_.mean)


def test_estimate_alpha_grid_recovers_alpha_from_independent_populations():
    rng = np.random.default_rng(7)
    alpha, n, q = 0.25, 20000, 3
    mu1, mu2 = np.array([2.0, -1.0, 6.0]), np.array([-3.0, 4.0, 1.0])
    U = rng.normal(mu1, 1.0, (n, q))
    V = rng.normal(mu2, 1.0, (n, q))
    # penguins: fresh rows of the mixture of eq. (1), not paired with U and V
    Z = alpha * rng.normal(mu1, 1.0, (n, q)) + (1 - alpha) * rng.normal(mu2, 1.0, (n, q))
    mom = [il.column_moments(M) for M in (U, V, Z)]
    est = il.estimate_alpha_grid(*mom, grid_size=1001)
    # the mean term alone has this standard error; the grid criterion also
    # uses the variances, so it is at least as precise (5 se + one grid step)
    tol = 5 * _mean_only_se(*mom, alpha) + 1e-3
    assert np.all(np.abs(est.per_column - alpha) <= tol)
    assert abs(est.combined - alpha) <= tol.max()
    means = il.estimate_alpha_means(mom[0].mean, mom[1].mean, mom[2].mean)
    assert np.all(np.abs(means.per_column - alpha) <= 5 * _mean_only_se(*mom, alpha))


def test_estimate_alpha_grid_uses_variances_when_means_coincide():
    rng = np.random.default_rng(8)
    alpha, n = 0.25, 20000
    U = rng.normal(3.0, 1.0, (n, 1))
    V = rng.normal(3.0, 2.0, (n, 1))
    Z = alpha * rng.normal(3.0, 1.0, (n, 1)) + (1 - alpha) * rng.normal(3.0, 2.0, (n, 1))
    mom = [il.column_moments(M) for M in (U, V, Z)]
    est = il.estimate_alpha_grid(*mom)
    # var Z(α) = α²·1 + (1−α)²·4 has slope 2α − 8(1−α) = −5.5 at α = 1/4 and is
    # one-to-one on [0, 1] near it; delta-method se of α̂ from the three sample variances
    vZ, vU, vV = alpha**2 * 1 + (1 - alpha) ** 2 * 4, 1.0, 4.0
    var_err = 2 * vZ**2 / n + alpha**4 * 2 * vU**2 / n + (1 - alpha) ** 4 * 2 * vV**2 / n
    se = np.sqrt(var_err) / 5.5
    assert abs(est.per_column[0] - alpha) <= 5 * se + 1e-3


def test_estimate_alpha_grid_refuses_uninformative_column():
    const = np.full((10, 2), 4.0)
    const[:, 1] = np.arange(10.0)
    other = const.copy()
    other[:, 1] = np.arange(10.0) * 3
    mom = [il.column_moments(M) for M in (const, other, const)]
    with pytest.raises(ValueError, match="column 0"):
        il.estimate_alpha_grid(*mom)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), cut=st.integers(1, 29), seed=st.integers(0, 2**32 - 1))
def test_column_moments_merge_equals_whole(n, cut, seed):
    cut = min(cut, n - 1)
    X = np.random.default_rng(seed).normal(10, 3, (n, 3))
    merged = il.merge_column_moments(il.column_moments(X[:cut]), il.column_moments(X[cut:]))
    whole = il.column_moments(X)
    assert merged.count == n
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-12)
    np.testing.assert_allclose(merged.var, X.var(axis=0, ddof=1), rtol=1e-10)


# ---------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------
def test_bias_per_coordinate():
    out = il.bias_per_coordinate(np.array([[1.0], [2.0]]), np.array([1.5, 1.0]))
    np.testing.assert_allclose(out, [[0.5], [1.0]])
    with pytest.raises(ValueError, match="r_p"):
        il.bias_per_coordinate(np.zeros(3), np.zeros(2))


def test_test_mse_against_stacked_residuals():
    rng = np.random.default_rng(9)
    Zs = [rng.standard_normal((n, 3)) for n in (4, 6, 5)]
    psi = rng.standard_normal((3, 2))
    ps = [Z @ psi + rng.standard_normal((Z.shape[0], 2)) for Z in Zs]
    resid = np.vstack(ps) - np.vstack(Zs) @ psi
    assert il.test_mse(psi, Zs, ps) == pytest.approx(np.mean(resid**2), rel=1e-12)
    assert il.test_mse(psi, Zs, [Z @ psi for Z in Zs]) == pytest.approx(0.0, abs=1e-28)
    with pytest.raises(ValueError, match="as many"):
        il.test_mse(psi, Zs, ps[:2])


# ---------------------------------------------------------------------------
# Figure 1
# ---------------------------------------------------------------------------
def test_figure1_parameters_drawn_once_and_overrides_keep_the_rest():
    p1 = ilg.figure1_parameters(np.random.default_rng(10))
    p2 = ilg.figure1_parameters(np.random.default_rng(10), mu1=1.5)
    np.testing.assert_array_equal(p1.r_b, p2.r_b)
    np.testing.assert_array_equal(p1.r_f, p2.r_f)
    assert p2.mu1 == 1.5 and p2.mu2 == p1.mu2
    assert np.all(np.abs(p1.r_b) <= 5) and abs(p1.mu1) <= 10
    np.testing.assert_allclose(p1.r_p, 0.25 * p1.r_b + 0.75 * p1.r_f)
    assert p1.D == pytest.approx(np.mean(np.abs(p1.r_b - p1.r_f)))
    with pytest.raises(ValueError, match="0 < alpha < 1"):
        ilg.figure1_parameters(np.random.default_rng(0), alpha=0.0)
    with pytest.raises(ValueError, match="n must be at least"):
        ilg.figure1_parameters(np.random.default_rng(0), n=7, q=6)
    with pytest.raises(ValueError, match="r_b"):
        ilg.figure1_parameters(np.random.default_rng(0), r_b=np.zeros(5))


def test_figure1_vectorised_fit_matches_the_recursion_objects():
    params = ilg.figure1_parameters(np.random.default_rng(11), n=20, q=3, steps=5)
    data = ilg.figure1_draw(np.random.default_rng(12), 3, params)
    psi, mse = ils.figure1_fit(data, params)
    assert psi.shape == (3, 5, 5, 3) and mse.shape == (3, 5, 5)
    for i in range(3):
        U, V, Z = data["U"][i], data["V"][i], data["Z"][i]
        b, f, p = (data[k][i][..., None] for k in ("b", "f", "p"))
        for s, (X, Y) in enumerate(((U, b), (V, f), (Z, p))):
            _, psis = run(KF4LLS(), list(zip(X, Y, strict=True)))
            np.testing.assert_allclose(psi[i, s], np.hstack(psis).T, rtol=1e-9)
        for s, start in ((3, "a"), (4, "b")):
            blocks = stream(list(U[:3]), list(b[:3]), list(V[:3]), list(f[:3]), start)
            _, psis = run(il.InterleavedKF4LLS(params.alpha, start=start), blocks[:5])
            np.testing.assert_allclose(psi[i, s], np.hstack(psis).T, rtol=1e-9, atol=1e-12)
        for s in range(5):
            for t in range(5):
                expected = il.test_mse(psi[i, s, t], Z[: t + 1], p[: t + 1, :, 0])
                assert mse[i, s, t] == pytest.approx(expected, rel=1e-10)


def test_figure1_sums_split_and_batch_size_do_not_matter():
    params = ilg.figure1_parameters(np.random.default_rng(13), n=12, q=2, steps=4)
    whole = ils.figure1_sums(np.random.default_rng(14), 50, params, batch_size=50)
    rng = np.random.default_rng(14)
    parts = [ils.figure1_sums(rng, 30, params, batch_size=7), ils.figure1_sums(rng, 20, params)]
    combined = ils.combine_figure1_sums(parts)
    assert combined.count == whole.count == 50
    for name in ("dpsi_sum", "dpsi_sq_sum", "mse_sum", "mse_sq_sum"):
        np.testing.assert_allclose(
            getattr(combined, name), getattr(whole, name), rtol=1e-12, atol=1e-12
        )
    with pytest.raises(ValueError, match="combine"):
        whole + ils.figure1_sums(
            np.random.default_rng(0),
            2,
            ilg.figure1_parameters(np.random.default_rng(0), n=12, q=2, steps=3),
        )


def test_figure1_draw_follows_the_model():
    params = ilg.figure1_parameters(np.random.default_rng(15), n=50, q=3, steps=2)
    d = ilg.figure1_draw(np.random.default_rng(16), 400, params)
    a = params.alpha
    np.testing.assert_allclose(d["Z"], a * d["U"] + (1 - a) * d["V"], rtol=1e-14)  # eq. (1)
    N = d["U"][..., 0].size  # 40000 draws per column
    for X, mu in ((d["U"], params.mu1), (d["V"], params.mu2)):
        assert np.all(np.abs(X.mean(axis=(0, 1, 2)) - mu) < 5 / np.sqrt(N))
        assert np.all(np.abs(X.var(axis=(0, 1, 2)) - 1) < 5 * np.sqrt(2 / N))
    for y, X, r in (
        (d["b"], d["U"], params.r_b),
        (d["f"], d["V"], params.r_f),
        (d["p"], d["Z"], params.r_p),
    ):
        noise = y - X @ r
        assert abs(noise.mean()) < 5 / np.sqrt(N) and abs(noise.var() - 1) < 5 * np.sqrt(2 / N)


def test_figure1_curves_equal_direct_statistics_of_the_iterations():
    params = ilg.figure1_parameters(np.random.default_rng(17), n=15, q=2, steps=3)
    psi, mse = ils.figure1_fit(ilg.figure1_draw(np.random.default_rng(18), 40, params), params)
    curves = ils.figure1_curves(ils.figure1_sums(np.random.default_rng(18), 40, params), params)
    np.testing.assert_allclose(curves.psi_mean, psi.mean(0), rtol=1e-12)
    np.testing.assert_allclose(curves.bias, np.abs(psi.mean(0) - params.r_p).mean(-1), rtol=1e-10)
    np.testing.assert_allclose(
        curves.bias_se, (psi.std(0, ddof=1) / np.sqrt(40)).mean(-1), rtol=1e-8
    )
    np.testing.assert_allclose(curves.mse, mse.mean(0), rtol=1e-12)
    np.testing.assert_allclose(curves.mse_se, mse.std(0, ddof=1) / np.sqrt(40), rtol=1e-8)


def test_expected_bias_first_order_reproduces_the_quoted_values():
    e = ils.figure1_expected_bias(0.25, 6, 100, 6, order=1)
    np.testing.assert_allclose(e[0], 0.75)
    np.testing.assert_allclose(e[1], 0.25)
    np.testing.assert_allclose(e[2], 0.0)
    # docs/studies.md: odd steps 0.15, 0.083 (birds first), 0.107, 0.068 (fish first)
    np.testing.assert_allclose(e[3], [0.75, 0, 0.15, 0, 1 / 12, 0], atol=1e-12)
    np.testing.assert_allclose(e[4], [0.25, 0, 3 / 28, 0, 3 / 44, 0], atol=1e-12)
    e2 = ils.figure1_expected_bias(0.25, 6, 100, 6, order=2)
    # second order: |c - α| = α(1−α)(1−2α)(q+1)/ν at step 2 (ν = n − 1 per population)
    assert e2[3, 1] == pytest.approx(0.25 * 0.75 * 0.5 * 7 / 99)
    assert e2[4, 1] == pytest.approx(e2[3, 1])


def test_figure1_curves_have_the_papers_shape():
    result = ils.interleaved_figure1(np.random.default_rng(2026), 2000)
    c, params = result.curves, result.params
    assert c.n_iter == 2000 and c.D == pytest.approx(params.D)
    e1 = ils.figure1_expected_bias(0.25, 6, 100, 6, order=1) * c.D
    e2 = ils.figure1_expected_bias(0.25, 6, 100, 6, order=2) * c.D
    np.testing.assert_allclose(result.expected_bias, e2)
    # E ψ − r_p = (c − α)(r_b − r_f) for every scheme (exact for birds, fish and
    # penguins; second-order expansion for interleaved, whose O((q/n)²)
    # remainder is below the size |e2 − e1| of the second-order term itself).
    # bias_se bounds the Monte-Carlo sd of each bias value: allow 5 of them.
    tol = 5 * c.bias_se + np.abs(e2 - e1)
    assert np.all(np.abs(c.bias - e2) <= tol), (c.bias / c.D, e2 / c.D)
    # both starting orders: identical rows, hence identical ψ at even steps
    np.testing.assert_allclose(c.psi_mean[3, 1::2], c.psi_mean[4, 1::2], rtol=1e-9)
    # penguins-only, in-sample: E MSE = 1 − q/(n t) exactly
    t = np.arange(1, 7)
    assert np.all(np.abs(c.mse[2] - (1 - 6 / (100 * t))) <= 5 * c.mse_se[2])
    # interleaving beats the wrong population alone at every even step
    assert np.all(c.mse[3, 1::2] < c.mse[0, 1::2])
    rows = c.records()
    assert len(rows) == 30 and rows[0]["scheme"] == "birds" and rows[0]["step"] == 1


# ---------------------------------------------------------------------------
# Kernels the pipeline uses for the test population and simulated stores
# ---------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    q=st.integers(1, 4),
    K=st.integers(1, 3),
    scale=st.sampled_from([1.0, 1e3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_residual_factor_mse_equals_test_mse_on_the_rows(sizes, q, K, scale, seed):
    rng = np.random.default_rng(seed)
    Zs = [scale * rng.standard_normal((n, q)) for n in sizes]
    psi = rng.standard_normal((q, K))
    ps = [Z @ psi + rng.standard_normal((Z.shape[0], K)) for Z in Zs]
    R = il.residual_factor(Zs[0], ps[0])
    for Z, p in zip(Zs[1:], ps[1:], strict=True):
        R = il.merge_residual_factors(R, il.residual_factor(Z, p))
    assert R.shape == (q + K, q + K)
    got = il.residual_factor_mse(psi, R, sum(sizes))
    assert got == pytest.approx(il.test_mse(psi, Zs, ps), rel=1e-9)
    # the factor of all rows at once is the same statistic
    whole = il.residual_factor(np.vstack(Zs), np.vstack(ps))
    assert il.residual_factor_mse(psi, whole, sum(sizes)) == pytest.approx(got, rel=1e-9)


def test_residual_factor_keeps_a_small_mse_next_to_large_targets():
    rng = np.random.default_rng(12)
    Z = rng.normal(50.0, 1.0, (400, 3))
    psi = np.array([[3e3], [-2e3], [1e3]])
    p = Z @ psi + 1e-4 * rng.standard_normal((400, 1))
    exact = il.test_mse(psi, [Z], [p])  # ~1e-8 next to targets ~1e5
    got = il.residual_factor_mse(psi, il.residual_factor(Z, p), 400)
    assert got == pytest.approx(exact, rel=1e-4)


def test_residual_factor_summaries_split_at_cuts():
    rng = np.random.default_rng(13)
    Z, P = rng.standard_normal((30, 2)), rng.standard_normal((30, 1))
    edges = np.array([0, 4, 10, 17, 30])
    parts = il.residual_factor_summaries(Z, P, edges, [1, 3, 4])
    assert [int(s["rows"]) for s in parts] == [4, 13, 13]
    assert [int(s["blocks"]) for s in parts] == [1, 2, 1]
    psi = rng.standard_normal((2, 1))
    got = il.residual_factor_mse(psi, il.merge_residual_factors(parts[0]["R"], parts[1]["R"]),
                                 17)
    assert got == pytest.approx(il.test_mse(psi, [Z[:17]], [P[:17]]), rel=1e-10)
    with pytest.raises(ValueError, match="cuts"):
        il.residual_factor_summaries(Z, P, edges, [2, 2])


def test_bias_of_run_is_mean_absolute_deviation():
    psi = np.array([[1.0], [2.0], [-1.0]])
    assert il.bias_of_run(psi, [0.0, 2.5, 1.0]) == pytest.approx((1.0 + 0.5 + 2.0) / 3)


def test_simulated_store_blocks_follow_figure1_and_depend_on_block_only():
    params = ilg.figure1_store_parameters(5, alpha=0.3, n=40, q=3, steps=5)
    assert params.alpha == 0.3 and params.r_b.shape == (3,)
    again = ilg.figure1_store_parameters(5, alpha=0.3, n=40, q=3, steps=5)
    np.testing.assert_array_equal(params.r_f, again.r_f)
    whole = ilg.figure1_population_blocks(5, params, 0, 5)
    parts = [ilg.figure1_population_blocks(5, params, j, j + 1) for j in range(5)]
    for pop in "abc":
        np.testing.assert_array_equal(whole[pop][0], np.vstack([p[pop][0] for p in parts]))
        np.testing.assert_array_equal(whole[pop][1], np.vstack([p[pop][1] for p in parts]))
    (U, b), (V, f), (Z, p) = whole["a"], whole["b"], whole["c"]
    assert U.shape == (200, 3) and b.shape == (200, 1)
    np.testing.assert_allclose(Z, 0.3 * U + 0.7 * V, rtol=1e-14)  # eq. (1), paired rows
    np.testing.assert_allclose(U.mean(0), params.mu1, atol=4 / np.sqrt(200))
    for X, y, r in ((U, b, params.r_b), (V, f, params.r_f), (Z, p, params.r_p)):
        resid = y[:, 0] - X @ r
        assert abs(resid.std() - 1.0) < 0.15  # unit noise
    with pytest.raises(ValueError, match="blocks"):
        ilg.figure1_population_blocks(5, params, 0, 6)
