"""The study kernels (kernels/study_*.py) against independent references.

References: the recursion classes' own compiled loops (a different code path
from the vectorised sequence runners), numpy.polyfit / lstsq on explicitly
weighted rows, the LMS loop written out as in the sample-by-sample lecture notes,
closed forms, and the theory of the interleaved study against its Monte Carlo.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels.recursions.basis import LegendreBasis, MonomialBasis
from streamlsq.kernels.recursions.bfgs import IncrementalBFGS
from streamlsq.kernels.recursions.irma import IRMA, IRMARLS, IRMAGradientDescent
from streamlsq.kernels.recursions.kf4lls import KF4LLS
from streamlsq.kernels.recursions.lms import LMS, StepSchedule, lms_fold_arrays
from streamlsq.kernels.studies.bfgs import (
    binary_stream,
    binary_study,
    class_weighted_lstsq_path,
    classification_rates,
    fold_path,
    regression_stream,
    regression_study,
    stacked_lstsq_path,
)
from streamlsq.kernels.studies.common import distribution_summary
from streamlsq.kernels.studies.interleaved import (
    figure1_findings,
    figure1_records,
    interleaved_figure1,
    penguin_expected_mse,
)
from streamlsq.kernels.studies.irma import (
    TABLE1_PUBLISHED,
    figure1_cumulative_losses,
    paper_sequences,
    paper_target,
    paper_test_points,
    table1_mse,
    table1_records,
)
from streamlsq.kernels.studies.lms import (
    excess_mse,
    least_squares_line,
    lms_convergence,
    lms_trajectory,
    paper_cloud,
    update_grid,
)


# --------------------------------------------------------------------------
# interleaved
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def figure1_small():
    res = interleaved_figure1(np.random.default_rng(3), 600, batch_size=300)
    return res.params, res.curves


def test_interleaved_monte_carlo_matches_second_order_theory(figure1_small):
    params, curves = figure1_small
    rows = figure1_records(curves, params)
    assert len(rows) == 5 * params.steps
    for r in rows:
        assert r["bias_over_D"] * curves.D == pytest.approx(r["bias"])
        # theory neglects O((q/n)^2) ~ 0.004·D; allow that beside 5 standard errors
        tol = 5 * r["bias_se_over_D"] + 0.004
        assert abs(r["bias_over_D"] - r["expected_bias_over_D_2nd"]) < tol, r


def test_interleaved_findings(figure1_small):
    params, curves = figure1_small
    f = figure1_findings(curves, params)
    assert f["even_steps_max_abs_diff"] < 1e-9
    assert f["birds"]["expected"] == pytest.approx(1 - params.alpha)
    assert f["mean_abs_dev_second_order"] < f["mean_abs_dev_first_order"]
    # in-sample residual of least squares: sigma^2 (1 - q / (t n)), within 5 s.e.
    expected = penguin_expected_mse(params.n, params.q, params.steps)
    np.testing.assert_allclose(expected, 1 - 0.06 / np.arange(1, 7))
    assert np.all(np.abs(curves.mse[2] - expected) < 5 * curves.mse_se[2])


# --------------------------------------------------------------------------
# IRMA
# --------------------------------------------------------------------------
def test_paper_sequences_follow_the_papers_design():
    x, y = paper_sequences(np.random.default_rng(0), 50, 30)
    assert x.shape == y.shape == (50, 30)
    assert x.min() >= 0 and x.max() <= 3
    assert np.abs(y - x * np.exp(-(x**2))).max() <= 0.05
    x2, y2 = paper_sequences(np.random.default_rng(0), 50, 30)
    np.testing.assert_array_equal(y, y2)
    assert paper_target(np.array([0.0, 1 / np.sqrt(2)]))[1] == pytest.approx(0.4289, abs=1e-4)


def _fold_loss(model, x):
    return model.fold(model.init(1, 1), x[:, None], x[:, None] * 0, np.arange(x.size + 1), 1, 1)


def test_figure1_losses_equal_the_recursions_compiled_loops():
    rng = np.random.default_rng(1)
    x, y = paper_sequences(rng, 3, 40)
    losses = figure1_cumulative_losses(x, y, order=4)
    mono, leg = MonomialBasis(4, (0, 3)), LegendreBasis(4, (0, 3))
    models = {"gd": IRMAGradientDescent(mono), "rls": IRMARLS(mono, forgetting=0.9),
              "irma": IRMA(leg)}
    for name, model in models.items():
        for s in range(3):
            res = model.fold(model.init(1, 1), x[s][:, None], y[s][:, None],
                             np.arange(41), 1, 1)
            np.testing.assert_allclose(losses[name][s], res.diagnostics["cumulative_loss"],
                                       rtol=1e-9, atol=1e-14)


def test_table1_mse_against_per_sequence_fits():
    rng = np.random.default_rng(2)
    x, y = paper_sequences(rng, 3, 60)
    orders, examples = (2, 4), (10, 60)
    mse = table1_mse(x, y, orders, examples, n_test=200)
    grid = np.linspace(0, 3, 200)
    for i, order in enumerate(orders):
        leg = LegendreBasis(order, (0, 3))
        model = IRMA(leg)
        for s in range(3):
            res = model.fold(model.init(1, 1), x[s][:, None], y[s][:, None],
                             np.arange(61), 1, 1)
            for j, n in enumerate(examples):
                f_incr = leg.expand(grid) @ res.coefs[n - 1, :, 0]
                assert mse[s, i, j, 0] == pytest.approx(
                    np.mean((f_incr - paper_target(grid)) ** 2), rel=1e-9)
                c = np.polyfit(x[s, :n], y[s, :n], order)  # an independent batch fit
                assert mse[s, i, j, 1] == pytest.approx(
                    np.mean((np.polyval(c, grid) - paper_target(grid)) ** 2), rel=1e-6)


def test_table1_records_carry_every_published_entry():
    mse = np.abs(np.random.default_rng(3).normal(size=(5, 3, 3, 2))) + 1e-3
    rows = table1_records(mse)
    assert len(rows) == 18 == len(TABLE1_PUBLISHED)
    for r in rows:
        pub = TABLE1_PUBLISHED[(r["order"], r["examples"], r["method"])]
        assert (r["published_mean"], r["published_pm"]) == pub
        assert r["ratio_to_published"] == pytest.approx(r["mse_mean"] / pub[0])
        assert r["factor_to_published"] >= 1
    assert paper_test_points().shape == (1000,)
    with pytest.raises(ValueError, match="mse must have shape"):
        table1_records(mse[:, :2])


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**31 - 1))
def test_distribution_summary_invariants(n, seed):
    v = np.random.default_rng(seed).exponential(size=(n, 4))
    s = distribution_summary(v)
    np.testing.assert_allclose(s["mean"], v.mean(axis=0))
    np.testing.assert_allclose(s["std"], v.std(axis=0))
    # the two semi-deviations split the variance
    np.testing.assert_allclose(s["upper_sd"] ** 2 + s["lower_sd"] ** 2, s["var"], rtol=1e-9,
                               atol=1e-15)
    assert np.all((s["max_share"] > 0) & (s["max_share"] <= 1))
    assert np.all(s["p05"] <= s["median"]) and np.all(s["median"] <= s["p95"])


# --------------------------------------------------------------------------
# LMS
# --------------------------------------------------------------------------
def test_lms_trajectory_equals_the_papers_loop():
    X, T = paper_cloud(np.random.default_rng(4), curvature=0.05)
    updates, W = lms_trajectory(X, T, StepSchedule("constant", 0.01), epochs=2)
    # the notes' code: w += rho * X1[n:n+1, :].T * (T[n:n+1, :] - predicted)
    X1 = np.insert(X, 0, 1, axis=1)
    w = np.zeros((2, 1))
    ws = [w.copy()]
    for _ in range(2):
        for n in range(X.shape[0]):
            predicted = X1[n:n + 1, :] @ w
            w += 0.01 * X1[n:n + 1, :].T * (T[n:n + 1, :] - predicted)
            ws.append(w.copy())
    np.testing.assert_array_equal(updates, np.arange(201))
    np.testing.assert_allclose(W, np.array(ws), rtol=1e-12, atol=1e-14)
    sub_u, sub_W = lms_trajectory(X, T, StepSchedule("constant", 0.01), 2, record_at=[0, 7, 200])
    np.testing.assert_allclose(sub_W, np.array(ws)[[0, 7, 200]], rtol=1e-12, atol=1e-14)


def test_least_squares_line_and_excess_mse():
    X, T = paper_cloud(np.random.default_rng(5), curvature=0.05)
    W_ls = least_squares_line(X, T)
    np.testing.assert_allclose(W_ls[::-1, 0], np.polyfit(X[:, 0], T[:, 0], 1), rtol=1e-10)
    W = W_ls + np.random.default_rng(6).normal(size=(4, 2, 1)) * 0.1
    X1 = np.insert(X, 0, 1, axis=1)
    direct = [np.mean((T - X1 @ w) ** 2) - np.mean((T - X1 @ W_ls) ** 2) for w in W]
    np.testing.assert_allclose(excess_mse(W, X, T), direct, rtol=1e-8)
    assert np.all(excess_mse(W, X, T) > 0)


def test_lms_convergence_reproducible_and_starts_at_the_ls_norm():
    sch = [StepSchedule("constant", 0.01), StepSchedule("inverse", 0.01, tau=1000.0)]
    rec = update_grid(300, 20)
    assert rec[0] == 0 and rec[1] == 1 and rec[-1] == 300
    a = lms_convergence(np.random.default_rng(7), 3, sch, 3, rec)
    b = lms_convergence(np.random.default_rng(7), 3, sch, 3, rec)
    np.testing.assert_array_equal(a["distance"], b["distance"])
    X, T = paper_cloud(np.random.default_rng(7))
    assert a["distance"][0, 0, 0] == pytest.approx(np.linalg.norm(least_squares_line(X, T)))


def test_lms_divergence_is_refused():
    X, T = paper_cloud(np.random.default_rng(8))
    with pytest.raises(ValueError, match="diverged"):
        lms_trajectory(X, T, StepSchedule("constant", 0.5), 5)


# --------------------------------------------------------------------------
# BFGS
# --------------------------------------------------------------------------
def test_stacked_lstsq_path_equals_kf4lls_and_lms_path_drops_the_ones():
    X, y, _ = regression_stream(np.random.default_rng(9), 120, 3)
    assert np.all(X[:, 0] == 1)
    np.testing.assert_allclose(fold_path(KF4LLS(), X, y, 30), stacked_lstsq_path(X, y, 30),
                               rtol=1e-9, atol=1e-12)
    W, _, coefs = lms_fold_arrays(np.zeros((4, 1)), 0, X[:, 1:], y, np.arange(0, 121, 30),
                                  np.arange(4), StepSchedule("constant", 0.01))
    np.testing.assert_array_equal(fold_path(LMS("constant", 0.01), X, y, 30), coefs)


def test_class_weighted_lstsq_path_against_weighted_rows():
    X, y = binary_stream(np.random.default_rng(10), 300, 3, 0.2)
    path = class_weighted_lstsq_path(X, y, 100)
    for k, e in enumerate((100, 200, 300)):
        pos = y[:e, 0] == 1
        p, n = pos.sum(), (~pos).sum()
        w = np.sqrt(np.where(pos, n / (p + n), p / (p + n)))
        ref = np.linalg.lstsq(X[:e] * w[:, None], y[:e] * w[:, None], rcond=None)[0]
        np.testing.assert_allclose(path[k], ref, rtol=1e-9, atol=1e-12)


def test_classification_rates_by_hand():
    X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    y = np.array([[0.0], [0.0], [1.0], [1.0]])
    W = np.array([[[0.0], [0.3]], [[1.0], [0.0]]])  # threshold at x > 5/3; everything positive
    r = classification_rates(W, X, y)
    np.testing.assert_allclose(r["tpr"], [1.0, 1.0])
    np.testing.assert_allclose(r["tnr"], [1.0, 0.0])
    np.testing.assert_allclose(r["balanced_accuracy"], [1.0, 0.5])
    with pytest.raises(ValueError, match="0/1"):
        classification_rates(W, X, y * 2)


def test_regression_and_binary_study_shapes_and_references():
    methods = {"kf4lls": KF4LLS(), "bfgs": IncrementalBFGS()}
    r = regression_study(np.random.default_rng(11), 2, methods, n_blocks=4, block_rows=30,
                         n_features=3, n_test=50)
    assert r["error_to_truth"].shape == (2, 2, 4)
    assert r["distance_to_lstsq"][:, 0].max() < 1e-10  # KF4LLS is the stacked fit
    np.testing.assert_allclose(r["error_to_truth"][:, 0], r["lstsq_error_to_truth"], rtol=1e-8)
    # BFGS starts from the least-squares fit of block 1
    assert r["distance_to_lstsq"][:, 1, 0].max() < 1e-10
    assert np.isnan(r["inverse_hessian_ratio"][:, 0]).all()  # KF4LLS keeps no B
    assert np.all(r["inverse_hessian_ratio"][:, 1] > 1)  # B is one block's, H^-1 all rows'

    b = binary_study(np.random.default_rng(12), 2, {"bal": IncrementalBFGS(1.0, balanced=True)},
                     n_blocks=3, block_rows=60, n_features=2, n_test=300)
    assert b["balanced_accuracy"].shape == (2, 2, 3)
    assert np.all(b["distance_to_weighted_lstsq"][:, -1] == 0)
