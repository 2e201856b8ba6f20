"""The estimators hand their kernels whole blocks in pieces of about 4 MB (to build the
design in cache): the numbers are those of one fold over all rows."""

from __future__ import annotations

import numpy as np
import pytest

from streamlsq import IncrementalBFGSRegressor, KF4LLSRegressor, LMSRegressor, RLSRegressor
from streamlsq.estimators.base import RecursionRegressor
from streamlsq.kernels import LMS


@pytest.mark.parametrize("make", [
    lambda: KF4LLSRegressor(block_size=7),
    lambda: KF4LLSRegressor(block_size=7, solver="normal"),
    lambda: RLSRegressor(block_size=5, forgetting=0.99, ridge=1e-2),
    lambda: LMSRegressor(rate=0.01, block_size=3, epochs=2, shuffle=True, random_state=1),
    lambda: IncrementalBFGSRegressor(block_size=11),
])
def test_pieces_give_the_numbers_of_one_fold(make, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    y = X @ [1.0, -2.0, 0.5, 3.0] + 1.0 + 0.1 * rng.standard_normal(500)
    whole = make().fit(X, y)
    monkeypatch.setattr(RecursionRegressor, "_PIECE_BYTES", 8 * 4 * 20)  # 20 rows a piece
    pieces = make().fit(X, y)
    np.testing.assert_allclose(pieces.coef_, whole.coef_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pieces.intercept_, whole.intercept_, rtol=1e-12, atol=1e-12)
    assert (pieces.n_steps_, pieces.rows_seen_) == (whole.n_steps_, whole.rows_seen_)


def test_lms_names_the_first_non_finite_value_found_on_the_error_path():
    X = np.ones((100, 2))
    Y = np.ones((100, 1))
    X[37, 1] = np.nan
    k = LMS(rate=0.01)
    with pytest.raises(ValueError, match=r"X has a non-finite value \(nan\) at index \(37, 1\)"):
        k.fold(k.init(2, 1), X, Y, np.array([0, 50, 100]), 1, 10)
    X[37, 1] = 1.0
    Y[80, 0] = np.inf
    with pytest.raises(ValueError, match=r"Y has a non-finite value \(inf\) at index \(80, 0\)"):
        k.fold(k.init(2, 1), X, Y, np.array([0, 50, 100]), 1, 10)
