"""Kernels added for the pipeline: task selection, held-out splits, errors against the truth.

References are loops over tasks and brute force over permutations.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels import mlr

SETTINGS = settings(max_examples=25, deadline=None)


def _ragged(seed, sizes, d=3):
    rng = np.random.default_rng(seed)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return rng.standard_normal((int(ptr[-1]), d)), rng.standard_normal(int(ptr[-1])), ptr


@SETTINGS
@given(st.lists(st.integers(0, 6), min_size=1, max_size=10), st.integers(0, 2**16))
def test_select_tasks_equals_a_loop(sizes, seed):
    X, y, ptr = _ragged(seed, sizes)
    mask = np.random.default_rng(seed + 1).random(len(sizes)) < 0.5
    Xs, ys, ps = mlr.select_tasks(X, y, ptr, mask)
    keep = [i for i in range(len(sizes)) if mask[i]]
    np.testing.assert_array_equal(Xs, np.concatenate([X[ptr[i]:ptr[i + 1]] for i in keep])
                                  if keep else np.empty((0, 3)))
    assert ps[0] == 0 and list(np.diff(ps)) == [sizes[i] for i in keep]
    assert ys.shape == (ps[-1],)


@SETTINGS
@given(st.lists(st.integers(2, 8), min_size=1, max_size=10), st.integers(0, 2), st.integers(0, 99))
def test_holdout_split_keeps_first_rows_and_holds_out_last(sizes, n_out, seed):
    X, y, ptr = _ragged(seed, sizes)
    (Xf, yf, pf), (Xo, yo, po) = mlr.holdout_split(X, y, ptr, n_out)
    for i, t in enumerate(sizes):
        np.testing.assert_array_equal(Xf[pf[i]:pf[i + 1]], X[ptr[i]:ptr[i] + t - n_out])
        np.testing.assert_array_equal(yo[po[i]:po[i + 1]], y[ptr[i] + t - n_out:ptr[i + 1]])
    with pytest.raises(ValueError, match="task 0 has 2 rows, fewer than the 3"):
        mlr.holdout_split(X[:2], y[:2], [0, 2], 3)


def test_matching_accuracy_and_parameter_errors_against_brute_force():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 5))
    perm = np.array([2, 0, 3, 1])
    W_est = np.empty_like(W)
    W_est[perm] = W + 0.01 * rng.standard_normal(W.shape)
    best = min(itertools.permutations(range(4)),
               key=lambda q: sum(((W_est[list(q)][h] - W[h]) ** 2).sum() for h in range(4)))
    np.testing.assert_array_equal(mlr.match_components(W_est, W), best)
    np.testing.assert_array_equal(mlr.match_components(W_est, W), perm)
    truth = rng.integers(0, 4, 200)
    labels = perm[truth].copy()
    labels[:10] = (labels[:10] + 1) % 4
    brute = max(np.mean(np.array(q)[truth] == labels) for q in itertools.permutations(range(4)))
    assert mlr.label_accuracy(labels, truth) == pytest.approx(brute)
    assert mlr.label_accuracy(labels, truth, perm) == pytest.approx(np.mean(perm[truth] == labels))
    s, p = np.array([1.0, 2, 3, 4]), np.full(4, 0.25)
    err = mlr.parameter_errors(W_est, s[np.argsort(perm)] + 0.1, p[np.argsort(perm)], W, s, p)
    assert err["coef"] == pytest.approx(np.linalg.norm(W_est[perm] - W, axis=1).max())
    assert err["noise"] == pytest.approx(0.1) and err["weight"] == 0


def test_task_prediction_sse_equals_a_loop():
    X, y, ptr = _ragged(3, [3, 0, 5, 2])
    C = np.random.default_rng(4).standard_normal((4, 3))
    sse, rows = mlr.task_prediction_sse(X, y, ptr, C)
    for i in range(4):
        r = y[ptr[i]:ptr[i + 1]] - X[ptr[i]:ptr[i + 1]] @ C[i]
        assert sse[i] == pytest.approx(r @ r) and rows[i] == ptr[i + 1] - ptr[i]


def test_em_init_random_has_the_scale_of_y():
    W0, s0, p0 = mlr.em_init_random(5, 3, 400, 2.0)
    assert np.linalg.norm(W0, axis=1) == pytest.approx(np.full(3, 2.0), rel=0.15)
    np.testing.assert_array_equal(s0, 2.0)
    np.testing.assert_array_equal(p0, 1 / 3)
    np.testing.assert_array_equal(W0, mlr.em_init_random(5, 3, 400, 2.0)[0])
