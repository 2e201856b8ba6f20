"""scikit-learn estimator classes: numbers against independent references, the
kernels they drive, scikit-learn's own estimator checks and its tooling."""

from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.utils.estimator_checks import estimator_checks_generator

from streamlsq import (
    IncrementalBFGSRegressor,
    InterleavedKF4LLSRegressor,
    IRMAGradientDescentRegressor,
    IRMARegressor,
    IRMARLSRegressor,
    KF4LLSRegressor,
    LMSRegressor,
    RLSRegressor,
)
from streamlsq.estimators.glm import GLMRegressor
from streamlsq.kernels import (
    IRMA,
    KF4LLS,
    LMS,
    RLS,
    IncrementalBFGS,
    InterleavedKF4LLS,
    LegendreBasis,
    MonomialBasis,
    QuadratureBasis,
    StiffnessSchedule,
    block_edges,
    chunk_row_permutation,
    epoch_chunk_order,
)

#: linear models on any feature matrix, one or several targets
ALL_CLASSES = [
    KF4LLSRegressor,
    RLSRegressor,
    LMSRegressor,
    InterleavedKF4LLSRegressor,
    IncrementalBFGSRegressor,
]
#: function approximators on the raw inputs of a basis, one target
IRMA_CLASSES = [IRMARegressor, IRMAGradientDescentRegressor, IRMARLSRegressor]


def linear_data(n=60, q=4, K=None, seed=0, noise=0.1, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q)) + offset
    shape = (q,) if K is None else (q, K)
    w = rng.uniform(-2, 2, size=shape)
    b = rng.uniform(-1, 1, size=() if K is None else (K,))
    y = X @ w + b + noise * rng.standard_normal((n,) if K is None else (n, K))
    return X, y


# ---------------------------------------------------------------------------
# scikit-learn's estimator checks
# ---------------------------------------------------------------------------
_FIXED_INPUT_DIMENSION = (
    "X must hold the basis' raw inputs, one column per interval of `domain` (1 here); "
    "this check fits X with several columns"
)
#: checks that fit on X with more than one column (sklearn 1.9.1)
_MULTI_COLUMN_CHECKS = [
    "check_dict_unchanged",
    "check_dont_overwrite_parameters",
    "check_dtype_object",
    "check_estimators_dtypes",
    "check_estimators_fit_returns_self",
    "check_estimators_nan_inf",
    "check_estimators_overwrite_params",
    "check_estimators_partial_fit_n_features",
    "check_estimators_pickle",
    "check_f_contiguous_array_estimator",
    "check_fit2d_1sample",
    "check_fit2d_predict1d",
    "check_fit_check_is_fitted",
    "check_fit_idempotent",
    "check_fit_score_takes_y",
    "check_methods_sample_order_invariance",
    "check_methods_subset_invariance",
    "check_n_features_in",
    "check_n_features_in_after_fitting",
    "check_pipeline_consistency",
    "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input",
    "check_regressor_data_not_an_array",
    "check_regressors_int",
    "check_regressors_no_decision_function",
    "check_regressors_train",
    "check_supervised_y_2d",
]
#: class name -> {check name: why it cannot apply}; documented in docs/algorithms.md (IRMA).
#: The same properties are tested on one-column data in the IRMA section below.
EXPECTED_FAILED_CHECKS: dict[str, dict[str, str]] = {
    cls.__name__: dict.fromkeys(_MULTI_COLUMN_CHECKS, _FIXED_INPUT_DIMENSION)
    for cls in IRMA_CLASSES
}


def _expected_failed(estimator):
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


#: The estimators that take sample_weight meet scikit-learn's
#: check_sample_weight_equivalence_on_dense_data: a fit on rows weighted by integers (in a
#: shuffled order) against the fit on the rows repeated that many times. Its data are 15
#: rows of 30 columns whose weights leave 9 distinct rows (27 repeated), so the check can
#: only pass where those rows determine the fit: with a prior (ridge > 0) and no forgetting.
#: Where it cannot, the function below says why; the properties themselves are tested on
#: data that identify the coefficients (test_zero_and_integer_weights_equal_dropped_and_
#: repeated_rows, test_rls_weights_are_precision_weights_within_a_step).
WEIGHT_EQUIVALENCE = "check_sample_weight_equivalence_on_dense_data"


def _weight_equivalence_failure(estimator) -> str | None:
    """Why scikit-learn's weight-equivalence check cannot pass for ``estimator`` (None: it
    passes)."""
    if isinstance(estimator, GLMRegressor):  # no penalty: the rank rule refuses
        return "9 rows of positive weight do not identify 31 coefficients"
    if isinstance(estimator, KF4LLSRegressor):
        if estimator.forgetting < 1:
            return ("forgetting per row: w repeated rows are w steps, a weighted row one, "
                    "and the check shuffles the weighted rows")
        if estimator.ridge == 0:  # H_0 = 0, no prior: the rank rule refuses
            return (f"9 rows of positive weight do not identify "
                    f"{30 + bool(estimator.fit_intercept)} coefficients")
    return None


def _expected_failed_checks(estimator):
    """Every check expected to fail for ``estimator``, with the reason."""
    reason = _weight_equivalence_failure(estimator)
    return {**_expected_failed(estimator), **({WEIGHT_EQUIVALENCE: reason} if reason else {})}


def _check_name(check) -> str:
    check = getattr(check, "__wrapped__", check)  # the skip wrapper of an expected failure
    return getattr(check, "func", check).__name__


def _check_id(value) -> str:
    if hasattr(value, "get_params"):
        return "".join(repr(value).split())
    check = getattr(value, "__wrapped__", value)
    kwargs = getattr(check, "keywords", {})
    args = ",".join(f"{k}={v!r}" for k, v in kwargs.items())
    return _check_name(check) + (f"({args})" if args else "")


CHECKED_ESTIMATORS = [
        KF4LLSRegressor(),
        KF4LLSRegressor(block_size=4, first_block_size=12, fit_intercept=False),
        # a ridge start (a prior): well-defined on fewer rows than coefficients
        KF4LLSRegressor(ridge=1e-3, solver="normal", block_size=4),
        RLSRegressor(),
        RLSRegressor(forgetting=1.0),  # the default ridge start, no forgetting
        LMSRegressor(),
        LMSRegressor(
            schedule="inverse", rate=0.5, tau=50.0, normalized=True, epochs=2, shuffle=True,
            block_size=7,
        ),
        InterleavedKF4LLSRegressor(),
        InterleavedKF4LLSRegressor(alpha=0.25, start="b", ridge=1e-6, block_size=8),
        IncrementalBFGSRegressor(),
        IncrementalBFGSRegressor(block_size=15, first_block_size=25),
        # the defaults: the domain is the range of the first fit's single column
        IRMARegressor(),
        IRMAGradientDescentRegressor(),
        IRMARLSRegressor(),
        # a given domain wide enough for the checks' one-column data (check_fit2d_1feature)
        IRMARegressor(domain=(-100.0, 100.0)),
        IRMAGradientDescentRegressor(domain=(-100.0, 100.0)),
        IRMARLSRegressor(domain=(-100.0, 100.0)),
        # IRLS: a gaussian, a count and a positive amount's family (the checks' responses
        # follow the positive_only tag)
        GLMRegressor(),
        GLMRegressor(family="poisson"),
        GLMRegressor(family="gamma", link="log"),
]


# parametrize_with_checks marks expected failures as xfail, and pytest then spends
# ~0.25 s formatting each traceback; the same generator with mark="skip" skips
# them, and test_expected_failed_checks_do_fail below runs them (strictly).
@pytest.mark.parametrize(
    "estimator, check",
    [
        pair
        for est in CHECKED_ESTIMATORS
        for pair in estimator_checks_generator(
            est, legacy=True, expected_failed_checks=_expected_failed_checks(est), mark="skip"
        )
    ],
    ids=_check_id,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "estimator", [e for e in CHECKED_ESTIMATORS if _expected_failed(e)], ids=_check_id
)
def test_expected_failed_checks_do_fail(estimator):
    """Every check listed as expected to fail does fail, for the stated reason."""
    expected = _expected_failed(estimator)
    seen = set()
    for est, check in estimator_checks_generator(estimator, legacy=True):
        name = _check_name(check)
        if name not in expected:
            continue
        seen.add(name)
        with pytest.raises((ValueError, AssertionError)) as info:
            check(est)
        chain = [info.value, info.value.__cause__, info.value.__context__]
        assert any("basis' input dimension" in str(e) for e in chain if e is not None), name
    assert seen == set(expected)


@pytest.mark.parametrize("estimator", [e for e in CHECKED_ESTIMATORS
                                       if _weight_equivalence_failure(e) is not None],
                         ids=_check_id)
def test_the_weight_equivalence_check_fails_for_its_reason(estimator):
    """scikit-learn's weight-equivalence check fits 15 rows of 30 columns: KF4LLS without a
    ridge start and the GLM refuse them (singular), RLS fits them with forgetting, and the
    predictions of its weighted fit are not those of the repeated rows."""
    for est, check in estimator_checks_generator(estimator, legacy=True):
        if _check_name(check) == WEIGHT_EQUIVALENCE:
            with pytest.raises((ValueError, AssertionError)) as info:
                check(est)
            if isinstance(estimator, KF4LLSRegressor) and not isinstance(estimator,
                                                                        RLSRegressor):
                assert "singular" in str(info.value)
            if isinstance(estimator, GLMRegressor):  # the rank rule refuses the design
                assert "numerical rank 9" in str(info.value)
            if isinstance(estimator, RLSRegressor):
                assert info.type is AssertionError
                assert "not equivalent to fitting with removed or repeated" in str(info.value)


def test_tags():
    for cls in ALL_CLASSES + IRMA_CLASSES:
        tags = cls().__sklearn_tags__()
        assert tags.estimator_type == "regressor"
        assert tags.target_tags.multi_output == (cls not in IRMA_CLASSES)
        assert tags.target_tags.single_output
        assert tags.target_tags.required
        assert not tags.input_tags.allow_nan
        assert not tags.input_tags.sparse
        assert not tags.input_tags.positive_only
        assert not tags.target_tags.positive_only


# ---------------------------------------------------------------------------
# KF4LLS against LinearRegression / Ridge
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K", [None, 3])
@pytest.mark.parametrize("block_size", [None, 1, 7])
def test_kf4lls_equals_linear_regression(K, block_size):
    X, y = linear_data(n=53, q=5, K=K, offset=2.0)
    first = None if block_size is None else 6  # full-rank first block (5 slopes + intercept)
    est = KF4LLSRegressor(block_size=block_size, first_block_size=first).fit(X, y)
    ref = LinearRegression().fit(X, y)
    assert est.coef_.shape == ref.coef_.shape
    assert np.shape(est.intercept_) == np.shape(ref.intercept_)
    assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-10)
    assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-10)
    assert_allclose(est.predict(X), ref.predict(X), rtol=0, atol=1e-9)
    assert est.predict(X).shape == np.shape(y)
    assert est.rows_seen_ == 53
    n_blocks = 1 if block_size is None else block_edges(53, block_size, first).size - 1
    assert est.n_steps_ == n_blocks == int(est.state_["blocks"])


def test_kf4lls_without_intercept_and_ridge():
    X, y = linear_data(n=40, q=3, K=2, offset=1.0)
    est = KF4LLSRegressor(fit_intercept=False, block_size=5, first_block_size=3).fit(X, y)
    ref = LinearRegression(fit_intercept=False).fit(X, y)
    assert_allclose(est.coef_, ref.coef_, atol=1e-10)
    assert_array_equal(est.intercept_, np.zeros(2))
    # ridge start H0 = δI: ridge regression (no intercept, so nothing unpenalised)
    est = KF4LLSRegressor(ridge=3.0, fit_intercept=False, block_size=4).fit(X, y)
    ref = Ridge(alpha=3.0, fit_intercept=False, solver="cholesky").fit(X, y)
    assert_allclose(est.coef_, ref.coef_, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(8, 40),
    q=st.integers(1, 4),
    K=st.sampled_from([None, 1, 2]),
    cuts=st.lists(st.integers(1, 39), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_kf4lls_partial_fit_pieces_equal_fit(n, q, K, cuts, seed):
    """Least squares on all rows seen, whatever the pieces (first piece full rank)."""
    X, y = linear_data(n=n, q=q, K=K, seed=seed)
    bounds = sorted({0, n, *(c for c in cuts if q + 1 <= c < n)})
    if bounds[1] < q + 1:
        bounds = [0, *bounds[2:]] if len(bounds) > 2 else [0, n]
    est = KF4LLSRegressor()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        est.partial_fit(X[a:b], y[a:b])
    full = KF4LLSRegressor().fit(X, y)
    ref = np.linalg.lstsq(np.hstack([np.ones((n, 1)), X]), y, rcond=None)[0]
    assert_allclose(full.intercept_, ref[0], atol=1e-9)
    assert_allclose(full.coef_, ref[1:].T, atol=1e-9)
    assert_allclose(est.coef_, full.coef_, atol=1e-9)
    assert_allclose(est.intercept_, full.intercept_, atol=1e-9)
    assert est.rows_seen_ == n and est.n_steps_ == len(bounds) - 1


def test_partial_fit_whole_blocks_is_bitwise_fit():
    X, y = linear_data(n=48, q=3)
    est = RLSRegressor(forgetting=0.95, block_size=4)
    for a in range(0, 48, 12):
        est.partial_fit(X[a : a + 12], y[a : a + 12])
    full = RLSRegressor(forgetting=0.95, block_size=4).fit(X, y)
    for k in full.state_:
        assert_array_equal(est.state_[k], full.state_[k])
    assert est.n_steps_ == full.n_steps_ == 12


# ---------------------------------------------------------------------------
# RLS
# ---------------------------------------------------------------------------
def test_rls_forgetting_one_is_expanding_window_least_squares():
    n, q = 40, 3
    X, y = linear_data(n=n, q=q, K=2, seed=3)
    est = RLSRegressor(forgetting=1.0, ridge=0.0, block_size=1, first_block_size=q + 1)
    D = np.hstack([np.ones((n, 1)), X])
    seen = 0
    for piece in (q + 1, 1, 5, 2, 13, n - (q + 1) - 21):
        est.partial_fit(X[seen : seen + piece], y[seen : seen + piece])
        seen += piece
        ref = np.linalg.lstsq(D[:seen], y[:seen], rcond=None)[0]
        assert_allclose(est.intercept_, ref[0], atol=1e-8)
        assert_allclose(est.coef_, ref[1:].T, atol=1e-8)
    assert seen == n and est.rows_seen_ == n
    assert est.n_steps_ == 1 + (n - q - 1)  # first block, then one row per step


def test_rls_forgetting_is_exponentially_weighted_least_squares():
    n, q, g, b = 37, 2, 0.9, 3
    X, y = linear_data(n=n, q=q, seed=5)
    est = RLSRegressor(forgetting=g, ridge=0.0, block_size=b, first_block_size=4).fit(X, y)
    edges = block_edges(n, b, 4)
    m = edges.size - 1
    block_of_row = np.repeat(np.arange(1, m + 1), np.diff(edges))
    sw = np.sqrt(g ** (m - block_of_row))
    D = np.hstack([np.ones((n, 1)), X])
    ref = np.linalg.lstsq(D * sw[:, None], y * sw, rcond=None)[0]
    assert_allclose(est.intercept_, ref[0], atol=1e-9)
    assert_allclose(est.coef_, ref[1:], atol=1e-9)


def test_rls_default_per_sample_with_small_ridge():
    """Defaults: one row per step from H0 = 1e-6·I; close to the weighted fit."""
    X, y = linear_data(n=300, q=3, noise=0.0)
    est = RLSRegressor(forgetting=1.0).fit(X, y)
    ref = LinearRegression().fit(X, y)
    assert est.n_steps_ == 300
    assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)


# ---------------------------------------------------------------------------
# Sample weights
# ---------------------------------------------------------------------------
def _weighted_data(n=60, q=4, K=2, seed=31):
    """Rows whose first 20 have positive weight (a full-rank first block of 20 rows, whether
    weighted or repeated), then weights 0..3."""
    X, y = linear_data(n=n, q=q, K=K, seed=seed, offset=1.0)
    rng = np.random.default_rng(seed + 1)
    w = np.r_[rng.integers(1, 4, 20), rng.integers(0, 4, n - 20)]
    return X, y, w


@pytest.mark.parametrize(
    "est",
    [
        KF4LLSRegressor(),
        KF4LLSRegressor(block_size=7, first_block_size=20, solver="normal", fit_intercept=False),
        KF4LLSRegressor(ridge=2.0, block_size=3),
        RLSRegressor(forgetting=1.0),
        RLSRegressor(forgetting=1.0, ridge=0.5, block_size=4, solver="normal"),
    ],
    ids=_check_id,
)
def test_zero_and_integer_weights_equal_dropped_and_repeated_rows(est):
    """Without forgetting, a row of integer weight w is w copies of it and weight 0 drops
    it, in any order and any blocks: the ridge (or least-squares) fit on the repeated rows,
    solved here from the normal equations."""
    X, y, w = _weighted_data()
    D = np.hstack([np.ones((60, 1)), X]) if est.fit_intercept else X
    Dr, yr = D.repeat(w, axis=0), y.repeat(w, axis=0)
    ref = np.linalg.solve(Dr.T @ Dr + est.ridge * np.eye(D.shape[1]), Dr.T @ yr)
    weighted = clone(est).fit(X, y, sample_weight=w)
    coef = np.hstack([weighted.intercept_[:, None], weighted.coef_]) if est.fit_intercept \
        else weighted.coef_
    assert_allclose(coef, ref.T, rtol=0, atol=1e-10)
    repeated = clone(est).fit(X.repeat(w, axis=0), yr)
    kept = w > 0
    dropped = clone(est).fit(X[kept], y[kept], sample_weight=w[kept])
    # in another order (blocks after the first: the first block must identify without a ridge)
    order = np.r_[np.arange(20), 20 + np.random.default_rng(5).permutation(40)]
    shuffled = clone(est).fit(X[order], y[order], sample_weight=w[order])
    for other in (repeated, dropped, shuffled):
        assert_allclose(other.coef_, weighted.coef_, rtol=0, atol=1e-10)
        assert_allclose(other.intercept_, weighted.intercept_, rtol=0, atol=1e-10)
        assert_allclose(other.predict(X), weighted.predict(X), rtol=0, atol=1e-9)


def test_rls_weights_are_precision_weights_within_a_step():
    """With forgetting g < 1 a weight scales a row within its step (one row per step): the
    fit minimises Σ w_i g^(n−1−i)‖y_i − x_iψ‖² + g^n μ‖ψ‖², a row of weight 0 still being
    a step of forgetting. w repeated rows are w steps, each decaying the rows before it, so
    a weight is not a repetition once g < 1 (why scikit-learn's weight-equivalence check does
    not apply to RLS with forgetting): the coefficients differ by far more than rounding."""
    n, g, mu = 50, 0.95, 0.5
    X, y = linear_data(n=n, q=2, seed=33)
    w = np.random.default_rng(34).integers(0, 4, n)
    est = RLSRegressor(forgetting=g, ridge=mu).fit(X, y, sample_weight=w)
    c = w * g ** (n - 1 - np.arange(n))
    D = np.hstack([np.ones((n, 1)), X])
    ref = np.linalg.solve(D.T @ (c[:, None] * D) + g**n * mu * np.eye(3), D.T @ (c * y))
    assert_allclose(est.intercept_, ref[0], rtol=0, atol=1e-10)
    assert_allclose(est.coef_, ref[1:], rtol=0, atol=1e-10)
    repeated = RLSRegressor(forgetting=g, ridge=mu).fit(X.repeat(w, axis=0), y.repeat(w))
    assert np.abs(repeated.coef_ - est.coef_).max() > 1e-3


def test_glm_integer_weights_equal_repeated_rows():
    """GLMRegressor's var_weights: integer weights give the repeated rows' coefficients and
    weight 0 drops a row (identified data: 60 rows, 3 coefficients), as statsmodels' GLM
    fits the repeated rows."""
    rng = np.random.default_rng(35)
    X = rng.standard_normal((60, 2))
    y = rng.poisson(np.exp(0.3 + X @ [0.4, -0.2])).astype(float)
    w = rng.integers(0, 4, 60)
    weighted = GLMRegressor(family="poisson").fit(X, y, sample_weight=w)
    repeated = GLMRegressor(family="poisson").fit(X.repeat(w, axis=0), y.repeat(w))
    kept = w > 0
    dropped = GLMRegressor(family="poisson").fit(X[kept], y[kept], sample_weight=w[kept])
    ref = sm.GLM(y.repeat(w), sm.add_constant(X.repeat(w, axis=0)),
                 family=sm.families.Poisson()).fit().params
    assert_allclose(weighted.intercept_, ref[0], rtol=1e-9)
    assert_allclose(weighted.coef_, ref[1:], rtol=1e-9)
    for other in (repeated, dropped):
        assert_allclose(other.coef_, weighted.coef_, rtol=1e-9, atol=1e-12)
        assert_allclose(other.intercept_, weighted.intercept_, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------
# LMS
# ---------------------------------------------------------------------------
def test_lms_matches_kernel_and_partial_fit_continues_schedule():
    X, y = linear_data(n=90, q=3, K=2, seed=7)
    params = dict(schedule="inverse", rate=0.05, tau=20.0)
    est = LMSRegressor(**params, block_size=8).fit(X, y)
    kern = LMS(**params)
    res = kern.fold(kern.init(3, 2), X, y, block_edges(90, 8), 1, 10**9)
    assert_array_equal(est.state_["W"], res.state["W"])
    assert_array_equal(est.intercept_, res.state["W"][0])
    assert_array_equal(est.coef_, res.state["W"][1:].T)
    assert int(est.state_["k"]) == 90
    # partial_fit over pieces: the step counter k continues (same schedule values)
    part = LMSRegressor(**params)
    for a, b in ((0, 31), (31, 60), (60, 90)):
        part.partial_fit(X[a:b], y[a:b])
    assert_array_equal(part.state_["W"], est.state_["W"])  # the same per-sample arithmetic
    assert_array_equal(part.predict(X), X @ part.coef_.T + part.intercept_)


def test_lms_epochs_and_shuffle_follow_the_kernel_helpers():
    X, y = linear_data(n=50, q=2, seed=8)
    kern = LMS(rate=0.02)
    est = LMSRegressor(rate=0.02, epochs=3).fit(X, y)
    state = kern.init(2, 1)
    for _ in range(3):
        state = kern.update(state, X, y)
    assert_array_equal(est.state_["W"], state["W"])
    assert est.rows_seen_ == 150 and int(est.state_["k"]) == 150
    # shuffle with block_size: chunks of block_size rows in the seeded orders
    b, seed = 16, 12
    est = LMSRegressor(rate=0.02, epochs=2, shuffle=True, random_state=seed, block_size=b)
    est.fit(X, y)
    edges = block_edges(50, b)
    state = kern.init(2, 1)
    for epoch in range(2):
        for c in epoch_chunk_order(seed, epoch, edges.size - 1, True):
            rows = edges[c] + chunk_row_permutation(
                seed, epoch, int(c), int(edges[c + 1] - edges[c]), True
            )
            state = kern.update(state, X[rows], y[rows])
    assert_array_equal(est.state_["W"], state["W"])
    assert est.n_steps_ == 2 * (edges.size - 1)
    # same seed, same numbers; another seed, other numbers
    again = clone(est).fit(X, y)
    assert_array_equal(again.state_["W"], est.state_["W"])
    other = clone(est).set_params(random_state=seed + 1).fit(X, y)
    assert not np.array_equal(other.state_["W"], est.state_["W"])


def test_lms_converges_to_least_squares_on_noiseless_data():
    X, y = linear_data(n=200, q=3, K=2, noise=0.0, seed=9)
    est = LMSRegressor(rate=0.05, epochs=60).fit(X, y)
    ref = LinearRegression().fit(X, y)
    assert_allclose(est.coef_, ref.coef_, atol=1e-8)
    assert_allclose(est.intercept_, ref.intercept_, atol=1e-8)


def test_lms_divergence_is_an_error():
    X, y = linear_data(n=300, q=3, offset=30.0)
    with pytest.raises(ValueError, match="diverged"):
        LMSRegressor(rate=0.5).fit(X, y)
    assert not hasattr(LMSRegressor(rate=0.5), "coef_")
    # normalised LMS is stable at the same rate
    LMSRegressor(rate=0.5, normalized=True).fit(X, y)


# ---------------------------------------------------------------------------
# Interleaved KF4LLS
# ---------------------------------------------------------------------------
def _two_populations(n_a=30, n_b=30, q=3, K=None, seed=11):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n_a, q)) + 2.0
    V = rng.standard_normal((n_b, q)) - 1.0
    shape = (q,) if K is None else (q, K)
    ra, rb = rng.uniform(-3, 3, shape), rng.uniform(-3, 3, shape)

    def noise(m):
        return 0.1 * rng.standard_normal((m,) if K is None else (m, K))

    return U, U @ ra + 1.0 + noise(n_a), V, V @ rb - 2.0 + noise(n_b)


def _centred_weighted_lstsq(blocks, alpha):
    """Reference: least squares on centred, √α / √(1−α)-scaled blocks, stacked."""
    Xs, Ys = [], []
    for pop, X, Y in blocks:
        w = np.sqrt(alpha if pop == "a" else 1 - alpha)
        Xs.append(w * (X - X.mean(axis=0)))
        Ys.append(w * (Y - Y.mean(axis=0)))
    return np.linalg.lstsq(np.vstack(Xs), np.concatenate(Ys), rcond=None)[0]


@pytest.mark.parametrize("K", [None, 2])
def test_interleaved_two_steps_is_lemma_1(K):
    U, b, V, f = _two_populations(n_a=25, n_b=20, K=K)
    alpha = 0.25
    rng = np.random.default_rng(0)
    X = np.vstack([U, V])
    y = np.concatenate([b, f])
    pop = np.array(["a"] * 25 + ["b"] * 20)
    # rows of the two populations shuffled together: with block_size=None each
    # population is one block, whose row order does not matter
    perm = rng.permutation(45)
    est = InterleavedKF4LLSRegressor(alpha=alpha).fit(X[perm], y[perm], population=pop[perm])
    ref = _centred_weighted_lstsq([("a", U, b), ("b", V, f)], alpha)
    assert_allclose(est.coef_, ref.T if K else ref, atol=1e-10)
    assert est.n_steps_ == 2 and est.rows_seen_ == 45
    assert_array_equal(est.intercept_, 0.0 if K is None else np.zeros(K))
    assert_allclose(est.predict(X), X @ (ref if K else ref), atol=1e-9)


def test_interleaved_orders_agree_at_even_steps_and_stream_mode():
    U, b, V, f = _two_populations(n_a=40, n_b=40)
    X, y = np.vstack([U, V]), np.concatenate([b, f])
    pop = np.array(["a"] * 40 + ["b"] * 40)
    fits = {
        s: InterleavedKF4LLSRegressor(alpha=0.3, start=s, block_size=10).fit(X, y, population=pop)
        for s in "ab"
    }
    assert fits["a"].n_steps_ == fits["b"].n_steps_ == 8
    assert_allclose(fits["a"].coef_, fits["b"].coef_, atol=1e-10)
    blocks = [(p, (U if p == "a" else V)[i : i + 10], (b if p == "a" else f)[i : i + 10])
              for i in range(0, 40, 10) for p in "ab"]
    assert_allclose(fits["a"].coef_, _centred_weighted_lstsq(blocks, 0.3), atol=1e-10)
    # population=None: X is the interleaved stream itself (A1, B1, A2, B2, ...)
    Xs = np.vstack([blk[1] for blk in blocks])
    ys = np.concatenate([blk[2] for blk in blocks])
    stream = InterleavedKF4LLSRegressor(alpha=0.3, block_size=10).fit(Xs, ys)
    for k in stream.state_:
        assert_array_equal(stream.state_[k], fits["a"].state_[k])


def test_interleaved_partial_fit_continues_the_alternation():
    U, b, V, f = _two_populations(n_a=30, n_b=30)
    full = InterleavedKF4LLSRegressor(alpha=0.6, block_size=10).fit(
        np.vstack([U, V]), np.concatenate([b, f]), population=["a"] * 30 + ["b"] * 30
    )
    est = InterleavedKF4LLSRegressor(alpha=0.6, block_size=10)
    est.partial_fit(U[:10], b[:10], population=["a"] * 10)  # A1
    assert est.n_steps_ == 1
    # next due: b; this call holds B1 and A2, B2 and A3, B3
    X2 = np.vstack([U[10:], V])
    est.partial_fit(X2, np.concatenate([b[10:], f]), population=["a"] * 20 + ["b"] * 30)
    assert est.n_steps_ == 6 and est.rows_seen_ == 60
    assert_allclose(est.coef_, full.coef_, atol=1e-10)


def test_interleaved_unequal_populations_warn_and_drop_the_surplus():
    U, b, V, f = _two_populations(n_a=30, n_b=12)
    X, y = np.vstack([U, V]), np.concatenate([b, f])
    pop = ["a"] * 30 + ["b"] * 12
    with pytest.warns(UserWarning, match="12 of 42 rows were not used"):
        est = InterleavedKF4LLSRegressor(alpha=0.5, block_size=6).fit(X, y, population=pop)
    # A1 B1 A2 B2 A3, then B is out of blocks
    assert est.n_steps_ == 5 and est.rows_seen_ == 30
    blocks = [("a", U[0:6], b[0:6]), ("b", V[0:6], f[0:6]), ("a", U[6:12], b[6:12]),
              ("b", V[6:12], f[6:12]), ("a", U[12:18], b[12:18])]
    assert_allclose(est.coef_, _centred_weighted_lstsq(blocks, 0.5), atol=1e-10)


def test_interleaved_bad_population_labels():
    U, b, V, f = _two_populations()
    X, y = np.vstack([U, V]), np.concatenate([b, f])
    est = InterleavedKF4LLSRegressor()
    with pytest.raises(ValueError, match="row 3 has 'c'"):
        est.fit(X, y, population=["a"] * 3 + ["c"] + ["b"] * 56)
    with pytest.raises(ValueError, match="one label per row"):
        est.fit(X, y, population=["a"] * 5)
    with pytest.raises(ValueError, match="no block to fold"), pytest.warns(UserWarning):
        est.fit(X, y, population=["b"] * 60)  # start="a", and population a is empty
    with pytest.raises(ValueError, match="alpha must be in"):
        InterleavedKF4LLSRegressor(alpha=1.5).fit(X, y)
    with pytest.raises(ValueError, match="start must be 'a' or 'b'"):
        InterleavedKF4LLSRegressor(start="c").fit(X, y)


# ---------------------------------------------------------------------------
# The estimators drive the kernels exactly as the pipeline does
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "est, kernel",
    [
        (KF4LLSRegressor(block_size=6, fit_intercept=False), KF4LLS()),
        (RLSRegressor(forgetting=0.97, ridge=1e-3, block_size=3, fit_intercept=False),
         RLS(forgetting=0.97, ridge=1e-3)),
        (LMSRegressor(schedule="power", power=0.75, rate=0.1, block_size=9),
         LMS(schedule="power", power=0.75, rate=0.1)),
        (InterleavedKF4LLSRegressor(alpha=0.2, start="b", block_size=8),
         InterleavedKF4LLS(alpha=0.2, start="b")),
    ],
    ids=lambda v: type(v).__name__,
)
def test_estimator_state_equals_kernel_fold(est, kernel):
    X, y = linear_data(n=61, q=4, K=2, seed=13)
    est.fit(X, y)
    res = kernel.fold(kernel.init(4, 2), X, y, block_edges(61, est.block_size), 1, 10**9)
    assert set(est.state_) == set(res.state)
    for k in res.state:
        assert_array_equal(est.state_[k], res.state[k])
    coef = kernel.coef(res.state)
    if isinstance(est, LMSRegressor):
        coef = coef[1:]
    assert_array_equal(est.coef_, coef.T)


def test_intercept_column_is_the_kernels_first_row():
    X, y = linear_data(n=30, q=2, seed=14)
    est = KF4LLSRegressor(block_size=5, first_block_size=3).fit(X, y)
    kern = KF4LLS()
    D = np.hstack([np.ones((30, 1)), X])
    res = kern.fold(kern.init(3, 1), D, y[:, None], block_edges(30, 5, 3), 1, 10**9)
    assert_array_equal(est.state_["psi"], res.state["psi"])
    assert est.intercept_ == res.state["psi"][0, 0]
    assert_array_equal(est.coef_, res.state["psi"][1:, 0])


# ---------------------------------------------------------------------------
# Shapes, dtypes, feature names
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_shapes_one_and_several_targets(cls):
    X, y = linear_data(n=40, q=3, K=2)
    est = cls().fit(X, y)
    assert est.coef_.shape == (2, 3) and est.intercept_.shape == (2,)
    assert est.predict(X).shape == (40, 2)
    est = cls().fit(X, y[:, 0])
    assert est.coef_.shape == (3,) and isinstance(est.intercept_, float)
    assert est.predict(X).shape == (40,)
    est = cls().fit(X, y[:, :1])
    assert est.coef_.shape == (1, 3) and est.predict(X).shape == (40, 1)
    assert est.n_features_in_ == 3


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_float32_is_upcast_to_float64(cls):
    X, y = linear_data(n=40, q=3)
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    a = cls().fit(X32, y32)
    b = cls().fit(X32.astype(np.float64), y32.astype(np.float64))
    assert a.coef_.dtype == np.float64 and a.predict(X32).dtype == np.float64
    assert_array_equal(a.coef_, b.coef_)
    assert_array_equal(a.predict(X32), b.predict(X32.astype(np.float64)))


def test_feature_names_from_a_dataframe():
    X, y = linear_data(n=30, q=3)
    df = pd.DataFrame(X, columns=["u", "v", "w"])
    est = KF4LLSRegressor().fit(df, y)
    assert_array_equal(est.feature_names_in_, ["u", "v", "w"])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        assert_allclose(est.predict(df), est.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[["w", "v", "u"]])
    assert not hasattr(KF4LLSRegressor().fit(X, y), "feature_names_in_")


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_not_fitted_and_input_errors(cls):
    X, y = linear_data(n=30, q=3)
    with pytest.raises(NotFittedError):
        cls().predict(X)
    Xn = X.copy()
    Xn[4, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        cls().fit(Xn, y)
    with pytest.raises(ValueError, match="Input y contains infinity"):
        cls().fit(X, np.where(np.arange(30) == 2, np.inf, y))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        cls().fit(X, y[:-1])
    est = cls().fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
        est.partial_fit(X[:, :2], y)
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="y has 2 target"):
        est.partial_fit(X, np.c_[y, y])


@pytest.mark.parametrize(
    "est, match",
    [
        (KF4LLSRegressor(block_size=0), "block_size must be a positive integer or None"),
        (KF4LLSRegressor(first_block_size=2.5), "first_block_size must be"),
        (KF4LLSRegressor(ridge=-1.0), "ridge must be a finite number >= 0"),
        (KF4LLSRegressor(fit_intercept="yes"), "fit_intercept must be True or False"),
        (RLSRegressor(forgetting=0.0), r"forgetting factor must be in \(0, 1\]"),
        (RLSRegressor(forgetting=1.5), r"forgetting factor must be in \(0, 1\]"),
        (LMSRegressor(rate=-0.1), "rate"),
        (LMSRegressor(schedule="sometimes"), "schedule must be one of"),
        (LMSRegressor(schedule="power", power=0.4), "power must be in"),
        (LMSRegressor(tau=3.0), "tau only applies"),
        (LMSRegressor(epochs=0), "epochs must be a positive integer"),
        (LMSRegressor(shuffle=True, random_state=-1), "random_state must be >= 0"),
        (InterleavedKF4LLSRegressor(alpha=0.0, start="a"), "weight 0"),
        (IncrementalBFGSRegressor(balance_counts="all"), "balance_counts must be"),
        (IncrementalBFGSRegressor(balanced=1), "balanced must be True or False"),
        (IRMARLSRegressor(forgetting=2.0), r"forgetting factor must be in \(0, 1\]"),
        (IRMAGradientDescentRegressor(mu=-1.0), "mu must be >= 0"),
        (IRMARegressor(domain=(1.0, 0.0)), "domain must be a finite interval"),
        (IRMARegressor(block_size=-2), "block_size must be a positive integer"),
    ],
    ids=lambda v: v if isinstance(v, str) else repr(v),
)
def test_bad_parameters_raise_in_fit_not_init(est, match):
    X, y = linear_data(n=30, q=3)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    with pytest.raises(ValueError, match=match):
        clone(est).partial_fit(X, y)


@pytest.mark.parametrize(("solver", "key"), [("normal", "H"), ("qr", "R")])
def test_singular_first_block_is_a_clear_error(solver, key):
    X, y = linear_data(n=30, q=3)
    with pytest.raises(ValueError, match="first_block_size") as info:
        KF4LLSRegressor(block_size=2, solver=solver).fit(X, y)
    assert "H became singular" in str(info.value)
    est = KF4LLSRegressor(solver=solver).fit(X, y)  # a failed partial_fit keeps the state
    before = {k: v.copy() for k, v in est.state_.items()}
    Xc = X.copy()
    Xc[:, 2] = 0.0
    with pytest.raises(ValueError):
        KF4LLSRegressor(solver=solver).fit(Xc, y)
    est.partial_fit(X[:3], y[:3])
    assert est.rows_seen_ == 33
    assert not np.array_equal(est.state_[key], before[key])


# ---------------------------------------------------------------------------
# scikit-learn tooling: clone, params, pickle, Pipeline, cross_val_score
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_clone_params_and_pickle(cls):
    X, y = linear_data(n=60, q=3, K=2)
    est = cls()
    init = list(inspect.signature(cls.__init__).parameters)
    assert set(est.get_params()) == set(init[1:])
    est.set_params(block_size=15)
    assert est.get_params()["block_size"] == 15
    fitted = clone(est).fit(X[:30], y[:30])
    copy = clone(fitted)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "coef_")
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.predict(X), fitted.predict(X))
    # a restored estimator continues the stream exactly like the original
    fitted.partial_fit(X[30:], y[30:])
    restored.partial_fit(X[30:], y[30:])
    assert_array_equal(restored.coef_, fitted.coef_)
    assert restored.rows_seen_ == fitted.rows_seen_ == 60


@pytest.mark.parametrize("cls", [*ALL_CLASSES, *IRMA_CLASSES])
def test_init_takes_the_declared_parameters(cls):
    """``__init__`` takes the recursion's declared parameters, then the estimator's own, with
    their defaults (the class statement's where it overrides them), positional or by name,
    as its signature says; anything else is a TypeError naming the class."""
    declared = [*cls._kernel_params, *cls._estimator_params]
    params = list(inspect.signature(cls.__init__).parameters.values())
    assert [p.name for p in params] == ["self", *(p.name for p in declared)]
    assert cls().get_params() == {p.name: p.default for p in params[1:]}
    overridden = {"RLSRegressor": {"ridge": 1e-6, "block_size": 1},  # the class statements'
                  **{c.__name__: {"order": 4} for c in IRMA_CLASSES}}.get(cls.__name__, {})
    for p in declared:
        assert cls().get_params()[p.name] == overridden.get(p.name, p.default), p.name
    first = params[1].name
    assert getattr(cls("given"), first) == "given"
    with pytest.raises(TypeError, match=rf"{cls.__name__}\(\): .*unexpected keyword.*'nope'"):
        cls(nope=1)
    with pytest.raises(TypeError, match=rf"{cls.__name__}\(\): multiple values .*'{first}'"):
        cls(1, **{first: 2})
    with pytest.raises(TypeError, match="too many positional arguments"):
        cls(*range(len(declared) + 1))


@pytest.mark.parametrize(
    "est",
    [
        KF4LLSRegressor(block_size=16),
        RLSRegressor(forgetting=1.0),
        LMSRegressor(rate=0.02, epochs=20, shuffle=True, random_state=0),
        InterleavedKF4LLSRegressor(block_size=16),
        IncrementalBFGSRegressor(block_size=16),
    ],
    ids=lambda e: type(e).__name__,
)
def test_pipeline_and_cross_val_score(est):
    X, y = linear_data(n=120, q=4, noise=0.05, offset=5.0)
    X = X * np.array([1.0, 10.0, 0.1, 100.0])  # scales LMS could not take unscaled
    y = y - y.mean()  # interleaved KF4LLS has no intercept
    pipe = make_pipeline(StandardScaler(), est)
    scores = cross_val_score(pipe, X, y, cv=KFold(4, shuffle=True, random_state=0))
    assert scores.min() > 0.95
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.95


def test_interleaved_population_through_cross_val_score_and_pipeline():
    U, b, V, f = _two_populations(n_a=60, n_b=60, seed=21)
    X, y = np.vstack([U, V]), np.concatenate([b, f])
    pop = np.array(["a"] * 60 + ["b"] * 60)
    est = InterleavedKF4LLSRegressor(alpha=0.5, block_size=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # folds hold unequal populations
        scores = cross_val_score(
            est, X, y, cv=KFold(3, shuffle=True, random_state=1), params={"population": pop}
        )
    assert np.isfinite(scores).all()
    pipe = make_pipeline(StandardScaler(with_std=False), clone(est))
    pipe.fit(X, y, interleavedkf4llsregressor__population=pop)
    direct = clone(est).fit(X - X.mean(axis=0), y, population=pop)
    assert_allclose(pipe[-1].coef_, direct.coef_, atol=1e-10)


# ---------------------------------------------------------------------------
# Incremental BFGS
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K", [None, 3])
def test_bfgs_one_block_is_least_squares(K):
    X, y = linear_data(n=45, q=4, K=K, offset=1.5)
    est = IncrementalBFGSRegressor().fit(X, y)
    ref = LinearRegression().fit(X, y)
    assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-10)
    assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-10)
    assert est.n_steps_ == 1 and est.n_skipped_ == 0 and not est.ridge_used_


def test_bfgs_blocks_follow_the_kernel_and_report_skips():
    X, y = linear_data(n=70, q=3, K=2, seed=17)
    est = IncrementalBFGSRegressor(block_size=10, fit_intercept=False).fit(X, y)
    kern = IncrementalBFGS()
    res = kern.fold(kern.init(3, 2), X, y, block_edges(70, 10), 1, 10**9)
    for k in res.state:
        assert_array_equal(est.state_[k], res.state[k])
    assert est.n_skipped_ == kern.n_skipped(res.state)
    # two identical targets: the K×K curvature zᵀδW is singular at every step after
    # the first block, so every B update is skipped (and counted)
    Xn, yn = linear_data(n=50, q=3, seed=18)
    est = IncrementalBFGSRegressor(block_size=10).fit(Xn, np.c_[yn, yn])
    assert est.n_steps_ == 5 and est.n_skipped_ == 4
    # the two targets' coefficients agree to rounding on every BLAS kernel: the K×K line
    # search of identical targets is exactly singular, and their columns' rounding
    # differences (which OpenBLAS' SkylakeX kernels made large enough to pass lstsq's own
    # cut, and the columns ended 4.5e-6 apart) are below the line search's cut
    assert_allclose(est.coef_[0], est.coef_[1], rtol=1e-13)


def test_bfgs_ridge_start_and_singular_first_block():
    X, y = linear_data(n=40, q=5, seed=19)
    with pytest.raises(ValueError, match="first_block_size"):
        IncrementalBFGSRegressor(block_size=4).fit(X, y)
    est = IncrementalBFGSRegressor(block_size=4, ridge=1e-3).fit(X, y)
    assert est.ridge_used_ and est.n_steps_ == 10
    with pytest.raises(ValueError, match="balanced rates need a reference rate"):
        IncrementalBFGSRegressor(balanced=True).fit(X, y)
    with pytest.raises(ValueError, match="rate must be 'exact' or a positive number"):
        IncrementalBFGSRegressor(rate=-1.0).fit(X, y)


# ---------------------------------------------------------------------------
# IRMA and its baselines
# ---------------------------------------------------------------------------
def _irma_data(n=60, seed=23, domain=(0.0, 3.0)):
    rng = np.random.default_rng(seed)
    x = rng.uniform(*domain, size=n)
    y = np.sin(2 * x) + 0.5 * x + 0.05 * rng.standard_normal(n)
    return x[:, None], y


def _irma_reference(Phi, y, lam, A=None):
    """θ += A⁻¹φ e/(λ + φᵀA⁻¹φ), sample by sample, written out with NumPy."""
    theta = np.zeros(Phi.shape[1])
    for phi, target, lt in zip(Phi, y, lam, strict=True):
        v = phi if A is None else np.linalg.solve(A, phi)
        theta = theta + v * (target - phi @ theta) / (lt + phi @ v)
    return theta


def test_irma_matches_the_update_written_out():
    X, y = _irma_data()
    est = IRMARegressor(order=6, domain=(0.0, 3.0), block_size=7).fit(X, y)
    basis = LegendreBasis(6, (0.0, 3.0))
    lam = 0.1 * 1.05 ** np.arange(60)
    ref = _irma_reference(basis.expand(X), y, lam)
    assert_allclose(est.coef_, ref, rtol=1e-12, atol=1e-12)
    assert est.basis_.names == basis.names and est.coef_.shape == (7,)
    assert not hasattr(est, "intercept_")
    assert_allclose(est.predict(X), basis.expand(X) @ ref, atol=1e-11)
    assert est.n_steps_ == 9 and est.rows_seen_ == 60
    # the kernel's fold on the same rows gives the same state
    kern = IRMA(basis, StiffnessSchedule("multiplicative", 0.1, 1.05))
    res = kern.fold(kern.init(1, 1), X, y, block_edges(60, 7), 1, 10**9)
    for k in res.state:
        assert_array_equal(est.state_[k], res.state[k])


def test_irma_monomial_and_legendre_give_the_same_function():
    X, y = _irma_data(n=40)
    leg = IRMARegressor(order=4, domain=(0.0, 3.0), basis="legendre").fit(X, y)
    mono = IRMARegressor(order=4, domain=(0.0, 3.0), basis="monomial").fit(X, y)
    grid = np.linspace(0, 3, 31)[:, None]
    assert_allclose(mono.predict(grid), leg.predict(grid), rtol=0, atol=1e-8)
    A = MonomialBasis(4, (0.0, 3.0)).gramian()
    ref = _irma_reference(MonomialBasis(4, (0.0, 3.0)).expand(X), y, 0.1 * 1.05 ** np.arange(40), A)
    assert_allclose(mono.coef_, ref, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="Gramian"):
        IRMARegressor(order=12, domain=(0.0, 3.0), basis="monomial").fit(X, y)


def test_irma_stiffness_schedules_and_partial_fit():
    X, y = _irma_data(n=50)
    for kind, rate, lam in (
        ("additive", 0.2, 0.5 + 0.2 * np.arange(50)),
        ("constant", 1.05, np.full(50, 0.5)),
    ):
        est = IRMARegressor(order=3, domain=(0.0, 3.0), stiffness=kind,
                            stiffness_initial=0.5, stiffness_rate=rate).fit(X, y)
        ref = _irma_reference(LegendreBasis(3, (0.0, 3.0)).expand(X), y, lam)
        assert_allclose(est.coef_, ref, rtol=1e-12, atol=1e-12)
    full = IRMARegressor(order=5, domain=(0.0, 3.0)).fit(X, y)
    part = IRMARegressor(order=5, domain=(0.0, 3.0))
    for a, b in ((0, 1), (1, 17), (17, 50)):
        part.partial_fit(X[a:b], y[a:b])  # λ_t continues from the rows seen
    assert_allclose(part.coef_, full.coef_, rtol=1e-13, atol=1e-13)
    assert part.rows_seen_ == 50 and part.n_steps_ == 3
    with pytest.raises(ValueError, match="stiffness kind must be one of"):
        IRMARegressor(stiffness="sometimes").fit(X, y)


def test_irma_gd_and_rls_baselines_match_their_definitions():
    X, y = _irma_data(n=30)
    mu, g = 0.05, 0.9
    Phi = MonomialBasis(3, (0.0, 3.0)).expand(X)
    gd = IRMAGradientDescentRegressor(order=3, domain=(0.0, 3.0), basis="monomial").fit(X, y)
    theta = np.zeros(4)
    for phi, target in zip(Phi, y, strict=True):
        grad = -phi * (target - phi @ theta) + mu * theta
        theta = theta - grad * (grad @ grad) / ((phi @ grad) ** 2 + mu * (grad @ grad))
    assert_allclose(gd.coef_, theta, rtol=1e-10, atol=1e-12)
    rls = IRMARLSRegressor(order=3, domain=(0.0, 3.0), basis="monomial").fit(X, y)
    # θ_t minimises Σ g^(t−i)(y_i − φ_iᵀθ)² + g^t θᵀθ (P0 = I) + μ θᵀθ
    t = len(y)
    w = g ** (t - 1 - np.arange(t))
    H = (Phi * w[:, None]).T @ Phi + (g**t + mu) * np.eye(4)
    ref = np.linalg.solve(H, (Phi * w[:, None]).T @ y)
    assert_allclose(rls.coef_, ref, rtol=1e-8, atol=1e-10)


def test_irma_inputs_domain_and_targets():
    X, y = _irma_data(n=30)
    est = IRMARegressor(order=3, domain=(0.0, 3.0))
    with pytest.raises(ValueError, match=r"X row 0 \(\[4\.0\]\) is outside the basis domain"):
        est.fit(np.r_[[[4.0]], X], np.r_[0.0, y])
    est.fit(X, y)
    with pytest.raises(ValueError, match="outside the basis domain"):
        est.predict([[-0.5]])
    with pytest.raises(ValueError, match="input dimension 1"):
        IRMARegressor(domain=(0.0, 3.0)).fit(np.c_[X, X], y)
    with pytest.raises(ValueError, match="X has 2 features, but IRMARegressor is expecting 1"):
        est.predict(np.c_[X, X])
    with pytest.warns(DataConversionWarning):
        column = IRMARegressor(order=3, domain=(0.0, 3.0)).fit(X, y[:, None])
    assert_array_equal(column.coef_, est.coef_)
    assert column.predict(X).shape == (30,)
    with pytest.raises(ValueError, match="y should be a 1d array"):
        IRMARegressor(domain=(0.0, 3.0)).fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match="basis must be 'legendre', 'monomial'"):
        IRMARegressor(basis="fourier").fit(X, y)
    with pytest.raises(ValueError, match="order must be an integer"):
        IRMARegressor(order=-1).fit(X, y)
    with pytest.raises(NotFittedError):
        IRMARLSRegressor().predict(X)
    # a change of basis between partial fits is refused, not silently mixed
    est.set_params(order=5)
    with pytest.raises(ValueError, match="no longer match the fitted state"):
        est.partial_fit(X, y)


def test_irma_box_domain_and_user_basis():
    rng = np.random.default_rng(29)
    X = rng.uniform(0, 1, size=(80, 2))
    y = X[:, 0] * X[:, 1] + X[:, 1] ** 2
    est = IRMARegressor(order=2, domain=((0.0, 1.0), (0.0, 1.0))).fit(X, y)
    assert est.coef_.shape == (9,) and est.n_features_in_ == 2
    # the tensor product of two orthonormal Legendre bases of degree 2 (A = I)
    Phi = np.einsum("ni,nj->nij", *(LegendreBasis(2, (0.0, 1.0)).expand(X[:, [c]])
                                    for c in (0, 1))).reshape(80, 9)
    ref = _irma_reference(Phi, y, 0.1 * 1.05 ** np.arange(80))
    assert_allclose(est.coef_, ref, rtol=1e-12, atol=1e-12)
    basis = QuadratureBasis(lambda x: np.stack([np.ones_like(x), np.cos(x)], axis=1), (0.0, 3.0))
    X1, y1 = _irma_data(n=20)
    user = IRMARegressor(basis=basis, order=99).fit(X1, y1)  # order/domain ignored
    assert user.basis_ is basis and user.coef_.shape == (2,)
    A = basis.gramian()
    lam = 0.1 * 1.05 ** np.arange(20)
    assert_allclose(user.coef_, _irma_reference(basis.expand(X1), y1, lam, A), atol=1e-10)


@pytest.mark.parametrize("cls", IRMA_CLASSES)
def test_irma_estimators_in_sklearn_tooling(cls):
    X, y = _irma_data(n=90, domain=(-4.0, 6.0))
    est = cls(order=4, domain=(-1.0, 1.0))
    pipe = make_pipeline(MinMaxScaler(feature_range=(-1, 1), clip=True), est)
    scores = cross_val_score(pipe, X, y, cv=KFold(3, shuffle=True, random_state=0))
    assert np.isfinite(scores).all()
    fitted = clone(est).fit(X[:40] / 6.0, y[:40])
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.predict(X / 6.0), fitted.predict(X / 6.0))
    restored.partial_fit(X[40:] / 6.0, y[40:])
    fitted.partial_fit(X[40:] / 6.0, y[40:])
    assert_array_equal(restored.coef_, fitted.coef_)
    assert clone(fitted).get_params() == est.get_params()
    Xn = X[:10] / 6.0
    Xn[3, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        clone(est).fit(Xn, y[:10])
