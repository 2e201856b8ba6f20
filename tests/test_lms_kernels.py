"""LMS / Widrow–Hoff SGD kernel (docs/algorithms.md#lms)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels import KF4LLS, LMS, Recursion, StepSchedule
from streamlsq.kernels.recursions.contract import block_edges
from streamlsq.kernels.recursions.shuffle import chunk_row_permutation, epoch_chunk_order


def lms_reference(W, k, X, Y, rho_of_k, normalized=False, eps=1e-6):
    """The paper's loop, written out: w += rho * X1[n:n+1].T * (T[n:n+1] - X1[n:n+1] @ w)."""
    W = np.array(W, dtype=np.float64)
    X1 = np.insert(np.asarray(X, dtype=np.float64), 0, 1, axis=1)
    T = np.asarray(Y, dtype=np.float64)
    for n in range(X1.shape[0]):
        k += 1
        rho = rho_of_k(k)
        if normalized:
            rho = rho / (eps + X1[n] @ X1[n])
        predicted = X1[n : n + 1] @ W
        W += rho * X1[n : n + 1].T * (T[n : n + 1] - predicted)
    return W, k


SCHEDULES = {
    "constant": (dict(schedule="constant", rate=0.02), lambda k: 0.02),
    "inverse": (dict(schedule="inverse", rate=0.05, tau=30.0), lambda k: 0.05 / (1 + k / 30.0)),
    "power": (dict(schedule="power", rate=0.05, power=0.7), lambda k: 0.05 / k**0.7),
}


def linear_data(rng, n, q, K, noise=0.0, mean=0.5):
    X = rng.normal(mean, 1.0, (n, q))
    W = rng.uniform(-2, 2, (q + 1, K))
    Y = W[0] + X @ W[1:] + noise * rng.standard_normal((n, K))
    return X, Y, W


def log_mean_square_contraction(X, rhos, normalized=False):
    """log of an upper bound on E‖W_N − W*‖²/‖W_0 − W*‖² for noiseless LMS on rows like X.

    One step maps the error e to (I − ρ x̃x̃ᵀ)e, so for i.i.d. rows
    E‖e'‖² = eᵀ(I − 2ρΣ + ρ²M)e ≤ λ_max(I − 2ρΣ + ρ²M)‖e‖², Σ = E x̃x̃ᵀ, M = E‖x̃‖²x̃x̃ᵀ
    (x̃ replaced by x̃/‖x̃‖ for normalised LMS), with Σ and M from the sample.
    """
    X1 = np.insert(X, 0, 1, axis=1)
    if normalized:
        X1 = X1 / np.linalg.norm(X1, axis=1, keepdims=True)
    Sigma = X1.T @ X1 / len(X1)
    M = (X1 * (X1**2).sum(1, keepdims=True)).T @ X1 / len(X1)
    rhos = np.asarray(rhos, dtype=np.float64)
    I = np.eye(len(Sigma))
    mats = I - 2 * rhos[:, None, None] * Sigma + rhos[:, None, None] ** 2 * M
    return float(np.sum(np.log(np.linalg.eigvalsh(mats)[:, -1])))


# ---------------------------------------------------------------------------
# Convergence
# ---------------------------------------------------------------------------
def test_decreasing_schedule_converges_to_least_squares_on_noiseless_stream():
    rng = np.random.default_rng(0)
    n, q, K = 20000, 3, 2
    X, Y, _ = linear_data(rng, n, q, K)
    X1 = np.insert(X, 0, 1, axis=1)
    W_ls = np.linalg.lstsq(X1, Y, rcond=None)[0]
    model = LMS("inverse", rate=0.05, tau=1000.0)
    res = model.fold(model.init(q, K), X, Y, block_edges(n, 1000), 1, 1)
    # The expected squared error shrinks by at least exp(log_bound); the bound
    # is astronomically small, so what is left is rounding of O(‖W‖·1e-13).
    log_bound = log_mean_square_contraction(X, model.schedule(np.arange(1, n + 1)))
    assert log_bound < np.log(1e-30)
    np.testing.assert_allclose(res.state["W"], W_ls, rtol=0, atol=1e-9 * np.abs(W_ls).max())
    assert int(res.state["k"]) == n
    # the recorded errors decrease (monotone up to the rounding floor)
    err = np.abs(res.coefs - W_ls).max(axis=(1, 2))
    assert err[0] > 1e3 * err[-1] and np.all(np.diff(err[err > 1e-10]) < 0)


def test_normalised_lms_converges_where_plain_lms_diverges():
    rng = np.random.default_rng(1)
    n, q = 20000, 3
    X, Y, _ = linear_data(rng, n, q, 1)
    X = 5.0 * X  # still noiseless-linear; ‖x̃‖² ≈ 80: plain LMS at rate 0.5 is unstable
    W_ls = np.linalg.lstsq(np.insert(X, 0, 1, axis=1), Y, rcond=None)[0]
    model = LMS("constant", rate=0.5, normalized=True)
    res = model.fold(model.init(q, 1), X, Y, block_edges(n, 500), 1, 10)
    log_bound = log_mean_square_contraction(X, np.full(n, 0.5), normalized=True)
    assert log_bound < np.log(1e-30)
    np.testing.assert_allclose(res.state["W"], W_ls, rtol=0, atol=1e-9 * np.abs(W_ls).max())
    plain = LMS("constant", rate=0.5)
    with pytest.raises(ValueError, match="diverged"):
        plain.fold(plain.init(q, 1), X, Y, block_edges(n, 500), 1, 10)


# ---------------------------------------------------------------------------
# The compiled loop against the paper's loop
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("normalized", [False, True])
def test_numba_fold_equals_python_reference(name, normalized):
    rng = np.random.default_rng(2)
    X, Y, _ = linear_data(rng, 250, 4, 2, noise=0.3)
    kwargs, rho = SCHEDULES[name]
    model = LMS(**kwargs, normalized=normalized)
    edges = block_edges(250, 40, first_block_size=25)
    res = model.fold(model.init(4, 2), X, Y, edges, 3, 2, rows_before=100)
    W_ref, k_ref = lms_reference(np.zeros((5, 2)), 0, X, Y, rho, normalized)
    np.testing.assert_allclose(res.state["W"], W_ref, rtol=1e-12, atol=1e-14)
    assert int(res.state["k"]) == k_ref == 250
    # steps 3..9 (7 blocks), recorded where step % 2 == 0
    np.testing.assert_array_equal(res.steps, [4, 6, 8])
    np.testing.assert_array_equal(res.rows_seen, 100 + edges[[2, 4, 6]])
    for step, coef in zip(res.steps, res.coefs, strict=True):
        rows = edges[step - 3 + 1]
        np.testing.assert_allclose(
            coef,
            lms_reference(np.zeros((5, 2)), 0, X[:rows], Y[:rows], rho, normalized)[0],
            rtol=1e-12,
            atol=1e-14,
        )


def test_float32_fold_matches_reference_to_float32_rounding():
    rng = np.random.default_rng(3)
    X, Y, _ = linear_data(rng, 300, 3, 2, noise=0.1)
    kwargs, rho = SCHEDULES["inverse"]
    model = LMS(**kwargs)
    res = model.fold(
        model.init(3, 2, np.float32),
        X.astype(np.float32),
        Y.astype(np.float32),
        block_edges(300, 50),
        1,
        1,
    )
    assert res.state["W"].dtype == np.float32 and res.coefs.dtype == np.float32
    W_ref, _ = lms_reference(np.zeros((4, 2)), 0, X.astype(np.float32), Y.astype(np.float32), rho)
    # a contracting recursion does not amplify rounding: ~eps32 = 6e-8 per step,
    # a few hundred steps stay far below 1e-4 of coefficients of size ~1
    np.testing.assert_allclose(res.state["W"], W_ref, rtol=1e-4, atol=1e-4)


def test_multi_output_equals_separate_single_output_runs():
    rng = np.random.default_rng(4)
    X, Y, _ = linear_data(rng, 500, 3, 3, noise=0.5)
    for kwargs, normalized in ((SCHEDULES["power"][0], False), (SCHEDULES["constant"][0], True)):
        model = LMS(**kwargs, normalized=normalized)
        edges = block_edges(500, 64)
        joint = model.fold(model.init(3, 3), X, Y, edges, 1, 3)
        for t in range(3):
            single = model.fold(model.init(3, 1), X, Y[:, t : t + 1], edges, 1, 3)
            np.testing.assert_allclose(
                joint.state["W"][:, t : t + 1], single.state["W"], rtol=1e-13, atol=1e-15
            )
            np.testing.assert_allclose(
                joint.coefs[..., t : t + 1], single.coefs, rtol=1e-13, atol=1e-15
            )


def test_fold_has_the_base_class_recording_semantics():
    rng = np.random.default_rng(5)
    X, Y, _ = linear_data(rng, 130, 2, 1, noise=0.2)
    model = LMS("inverse", rate=0.03, tau=50.0)
    edges = block_edges(130, 17, first_block_size=5)
    fast = model.fold(model.init(2, 1), X, Y, edges, 4, 3, rows_before=7)
    slow = Recursion.fold(model, model.init(2, 1), X, Y, edges, 4, 3, rows_before=7)
    np.testing.assert_array_equal(fast.steps, slow.steps)
    np.testing.assert_array_equal(fast.rows_seen, slow.rows_seen)
    np.testing.assert_allclose(fast.coefs, slow.coefs, rtol=1e-13)
    np.testing.assert_allclose(fast.state["W"], slow.state["W"], rtol=1e-13)
    assert fast.state["blocks"] == slow.state["blocks"] == len(edges) - 1
    assert fast.state["k"] == slow.state["k"] == 130


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 120),
    block=st.integers(1, 30),
    cut_frac=st.floats(0.0, 1.0),
    normalized=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_one_piece_equals_two_pieces_with_state_carried(n, block, cut_frac, normalized, seed):
    rng = np.random.default_rng(seed)
    X, Y, _ = linear_data(rng, n, 3, 2, noise=0.2)
    model = LMS("power", rate=0.05, power=0.8, normalized=normalized)
    edges = block_edges(n, block)
    whole = model.fold(model.init(3, 2), X, Y, edges, 1, 2)
    j = int(round(cut_frac * (len(edges) - 1)))  # split after block j
    r = int(edges[j])
    first = model.fold(model.init(3, 2), X[:r], Y[:r], edges[: j + 1], 1, 2)
    second = model.fold(first.state, X[r:], Y[r:], edges[j:] - r, j + 1, 2, rows_before=r)
    np.testing.assert_array_equal(np.concatenate([first.steps, second.steps]), whole.steps)
    np.testing.assert_array_equal(
        np.concatenate([first.rows_seen, second.rows_seen]), whole.rows_seen
    )
    np.testing.assert_allclose(
        np.concatenate([first.coefs, second.coefs]), whole.coefs, rtol=1e-13, atol=1e-15
    )
    np.testing.assert_allclose(second.state["W"], whole.state["W"], rtol=1e-13, atol=1e-15)
    assert second.state["k"] == whole.state["k"] == n


def test_second_epoch_continues_the_schedule():
    rng = np.random.default_rng(6)
    X, Y, _ = linear_data(rng, 80, 2, 1, noise=0.3)
    kwargs, rho = SCHEDULES["inverse"]
    model = LMS(**kwargs)
    state = model.init(2, 1)
    for _ in range(2):  # two epochs over the same rows, state carried
        state = model.fold(state, X, Y, block_edges(80, 16), 1, 100).state
    W_ref, k_ref = lms_reference(np.zeros((3, 1)), 0, np.vstack([X, X]), np.vstack([Y, Y]), rho)
    assert int(state["k"]) == k_ref == 160
    np.testing.assert_allclose(state["W"], W_ref, rtol=1e-12, atol=1e-14)


def test_update_is_one_block_fold_and_pure():
    rng = np.random.default_rng(7)
    X, Y, _ = linear_data(rng, 30, 2, 1)
    model = LMS("constant", rate=0.01, coef0=np.ones((3, 1)))
    state = model.init(2, 1)
    W0 = state["W"].copy()
    new = model.update(state, X, Y[:, 0])  # 1-D targets are one column
    np.testing.assert_array_equal(state["W"], W0)
    fold = model.fold(state, X, Y, np.array([0, 30]), 1, 1)
    np.testing.assert_array_equal(new["W"], fold.state["W"])
    assert new["k"] == 30 and new["blocks"] == 1


# ---------------------------------------------------------------------------
# Parameters and inputs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        (dict(schedule="constant", rate=0.0), "rate"),
        (dict(schedule="constant", rate=-0.1), "rate"),
        (dict(schedule="constant", rate=float("nan")), "rate"),
        (dict(schedule="inverse", rate=0.1), "tau"),
        (dict(schedule="inverse", rate=0.1, tau=0.0), "tau"),
        (dict(schedule="inverse", rate=0.1, tau=-5.0), "tau"),
        (dict(schedule="power", rate=0.1, power=0.5), "power"),
        (dict(schedule="power", rate=0.1, power=1.01), "power"),
        (dict(schedule="power", rate=0.1), "power"),
        (dict(schedule="constant", rate=0.1, tau=10.0), "tau"),
        (dict(schedule="inverse", rate=0.1, tau=10.0, power=0.8), "power"),
        (dict(schedule="adagrad", rate=0.1), "schedule"),
        (dict(schedule="constant", rate=0.1, eps=-1.0), "eps"),
    ],
)
def test_bad_schedules_are_refused(kwargs, param):
    with pytest.raises(ValueError, match=param):
        LMS(**kwargs)


def test_schedule_values():
    k = np.arange(1, 6)
    np.testing.assert_allclose(StepSchedule("inverse", 0.1, tau=10.0)(k), 0.1 / (1 + k / 10))
    np.testing.assert_allclose(StepSchedule("power", 0.1, power=1.0)(k), 0.1 / k)
    assert StepSchedule("constant", 0.3)(7) == 0.3
    with pytest.raises(ValueError, match="start at 1"):
        StepSchedule("constant", 0.3)(0)


def test_bad_inputs_are_refused():
    model = LMS()
    state = model.init(2, 1)
    X = np.ones((5, 2))
    X[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"X has a non-finite value \(inf\) at index \(3, 0\)"):
        model.update(state, X, np.ones(5))
    with pytest.raises(ValueError, match="X must have shape"):
        model.update(state, np.ones((5, 3)), np.ones(5))
    with pytest.raises(ValueError, match="Y must have shape"):
        model.update(state, np.ones((5, 2)), np.ones((4, 1)))
    with pytest.raises(ValueError, match="edges"):
        model.fold(state, np.ones((5, 2)), np.ones((5, 1)), np.array([0, 3]), 1, 1)
    with pytest.raises(ValueError, match="dtype"):
        model.init(2, 1, np.int64)


def test_coef_names_and_state_layout():
    model = LMS("power", rate=0.1, power=0.75)
    assert model.coef_names(3) == ["intercept", "x0", "x1", "x2"]
    assert KF4LLS().coef_names(3) is None  # the base-class default
    state = model.init(3, 2)
    assert set(state) == set(model.state_dims())
    assert state["W"].shape == (4, 2) and model.coef(state).shape == (4, 2)
    assert model.get_params() == {
        "schedule": "power",
        "rate": 0.1,
        "tau": None,
        "power": 0.75,
        "normalized": False,
        "eps": None,
    }


# ---------------------------------------------------------------------------
# Epochs and seeded shuffling
# ---------------------------------------------------------------------------
def test_epoch_orders_are_deterministic_permutations():
    order = epoch_chunk_order(42, 3, 20, shuffle=True)
    np.testing.assert_array_equal(order, epoch_chunk_order(42, 3, 20, shuffle=True))
    np.testing.assert_array_equal(np.sort(order), np.arange(20))
    np.testing.assert_array_equal(epoch_chunk_order(42, 3, 20, shuffle=False), np.arange(20))
    # another epoch or seed gives another order (equal with probability 1/20!)
    assert not np.array_equal(order, epoch_chunk_order(42, 4, 20, shuffle=True))
    assert not np.array_equal(order, epoch_chunk_order(43, 3, 20, shuffle=True))

    rows = chunk_row_permutation(42, 3, 7, 20, shuffle=True)
    np.testing.assert_array_equal(np.sort(rows), np.arange(20))
    # computed in any order, by any worker: a pure function of (seed, epoch, chunk)
    others = [chunk_row_permutation(42, 3, c, 20, shuffle=True) for c in (9, 0, 7)]
    np.testing.assert_array_equal(others[2], rows)
    assert not np.array_equal(others[0], rows)
    # chunk order and row order use distinct keys even when the sizes agree
    assert not np.array_equal(rows, epoch_chunk_order(42, 3, 20, shuffle=True))
    assert not np.array_equal(
        chunk_row_permutation(42, 3, 0, 20, shuffle=True), epoch_chunk_order(42, 3, 20, True)
    )
    np.testing.assert_array_equal(chunk_row_permutation(1, 0, 0, 5, shuffle=False), np.arange(5))
    with pytest.raises(ValueError, match="epoch"):
        epoch_chunk_order(1, -1, 5, True)
