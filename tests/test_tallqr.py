"""The exact summary of the QR solver (``streamlsq.kernels.tallqr.rows_factor``) against an
independent reference: NumPy's Householder QR of the stacked rows (LAPACK geqrf on the
whole matrix), whose factor is unique once its diagonal is made non-negative.

Two backward-stable factorisations of the same rows differ by a modest multiple of
ε·κ(M) relative to ‖M‖ (Higham, *Accuracy and Stability of Numerical Algorithms*, §19.3);
the tolerances below are that bound with the constant of a chain of folds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels.tallqr import rows_factor

EPS = np.finfo(np.float64).eps


def householder(M: np.ndarray) -> np.ndarray:
    """The (p, p) factor of M with a non-negative diagonal, by numpy.linalg.qr."""
    p = M.shape[1]
    R = np.zeros((p, p))
    r = np.linalg.qr(M, mode="r")
    R[: r.shape[0]] = r
    R[np.diag(R) < 0] *= -1
    return R


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 5_000), n=st.integers(1, 6), k=st.integers(1, 3),
       slice_rows=st.sampled_from([1, 7, 64, 1024, 4096]), weighted=st.booleans(),
       prior=st.booleans(), seed=st.integers(0, 2**16))
def test_the_factor_is_householder_s_of_the_stacked_rows(rows, n, k, slice_rows, weighted,
                                                         prior, seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((rows, n)), rng.standard_normal((rows, k))
    w = rng.uniform(0.1, 2.0, rows) if weighted else None
    A = np.triu(rng.standard_normal((n + k, n + k))) if prior else None
    R = rows_factor(X, Y, w, prior=A, scale=0.5, slice_rows=slice_rows)
    M = np.hstack([X, Y]) * (1.0 if w is None else w[:, None])
    if prior:
        M = np.vstack([0.5 * A, M])
    assert R.shape == (n + k, n + k) and R.dtype == np.float64
    assert np.all(np.tril(R, -1) == 0) and np.all(np.diag(R) >= 0)
    if min(M.shape[0], n + k) == n + k and np.linalg.cond(M) < 1e8:
        # a full-rank factor is unique: the same numbers as one Householder QR
        np.testing.assert_allclose(R, householder(M), rtol=0,
                                   atol=1e3 * EPS * np.linalg.cond(M) * np.abs(M).max())
    np.testing.assert_allclose(R.T @ R, M.T @ M, rtol=0, atol=1e3 * EPS * np.sum(M**2))


def test_many_slices_folded_in_a_chain_equal_one_householder_qr():
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((1_000, 4)), rng.standard_normal((1_000, 2))
    R = rows_factor(X, Y, slice_rows=16)  # 63 slices folded one after another
    np.testing.assert_allclose(R, householder(np.hstack([X, Y])), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kappa", [1e4, 1e8, 1e12])
def test_the_solution_is_exact_to_eps_kappa(kappa):
    """ψ = R⁻¹z from the factor of [X y] against lstsq, the bound the QR solver promises."""
    rng = np.random.default_rng(int(np.log10(kappa)))
    U, _ = np.linalg.qr(rng.standard_normal((50_000, 8)))
    V, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    X = (U * np.logspace(0, -np.log10(kappa), 8)) @ V.T
    Y = X @ rng.standard_normal((8, 1)) + 1e-3 * rng.standard_normal((50_000, 1))
    R = rows_factor(X, Y, slice_rows=4096)
    psi = np.linalg.solve(R[:8, :8], R[:8, 8:])
    ref = np.linalg.lstsq(X, Y, rcond=1e-15)[0]
    assert np.linalg.norm(psi - ref) / np.linalg.norm(ref) <= 1e3 * EPS * kappa


def test_inputs_are_read_in_any_order_and_dtype_and_left_unchanged():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((9_000, 5))
    Y = rng.standard_normal((9_000, 1))
    X0, Y0 = X.copy(), Y.copy()
    ref = rows_factor(X, Y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)
    np.testing.assert_array_equal(rows_factor(np.asfortranarray(X), Y), ref)
    np.testing.assert_array_equal(rows_factor(X[::1], Y[:, :1]), ref)
    single = rows_factor(X.astype(np.float32), Y.astype(np.float32))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, ref, rtol=0, atol=1e-3 * np.abs(ref).max())
    # float32 rows summed in float64 when asked: the factor of the rounded rows
    np.testing.assert_allclose(rows_factor(X.astype(np.float32), Y, dtype=np.float64),
                               rows_factor(X.astype(np.float32).astype(np.float64), Y),
                               rtol=0, atol=1e-12)


def test_no_rows_leave_the_prior():
    A = np.triu(np.arange(1.0, 10.0).reshape(3, 3))
    A[1] *= -1  # a negative diagonal entry: the factor is returned with its sign flipped
    R = rows_factor(np.zeros((0, 2)), np.zeros((0, 1)), prior=A, scale=2.0)
    np.testing.assert_allclose(R.T @ R, 4 * A.T @ A)
    assert np.all(np.diag(R) >= 0)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 3_000), n=st.integers(0, 5), weighted=st.booleans(),
       fortran=st.booleans(), slice_rows=st.sampled_from([1, 7, 512, 4096]),
       seed=st.integers(0, 2**16))
def test_a_constant_made_in_the_slices_is_the_column_of_ones_stacked(rows, n, weighted,
                                                                     fortran, slice_rows,
                                                                     seed):
    """``constant=True`` is the factor of [1 X Y]: the same Householder factor as the rows
    with the column of ones stacked by hand, weights and the columns' sums included."""
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((rows, n)), rng.standard_normal((rows, 1))
    if fortran:
        X = np.asfortranarray(X)
    w = rng.uniform(0.1, 2.0, rows) if weighted else None
    stacked = np.hstack([np.ones((rows, 1)), X])
    sums, ref_sums = np.zeros(n + 1), np.zeros(n + 1)
    R = rows_factor(X, Y, w, slice_rows=slice_rows, sums=sums, constant=True)
    ref = rows_factor(stacked, Y, w, slice_rows=slice_rows, sums=ref_sums)
    # the same numbers in the same slices and the same order of operations
    np.testing.assert_array_equal(R, ref)
    np.testing.assert_array_equal(sums, ref_sums)
    M = np.hstack([stacked, Y]) * (1.0 if w is None else w[:, None])
    np.testing.assert_allclose(R.T @ R, M.T @ M, rtol=0, atol=1e3 * EPS * np.sum(M**2))
