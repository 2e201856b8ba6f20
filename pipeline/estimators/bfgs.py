"""The incremental BFGS regressor as a scikit-learn estimator.
"""

from __future__ import annotations

from streamlsq.estimators.base import (
    BlocksMixin,
    InterceptColumnMixin,
    RecursionRegressor,
)

__all__ = [
    "IncrementalBFGSRegressor",
]


# ---------------------------------------------------------------------------
# Incremental BFGS
# ---------------------------------------------------------------------------
class IncrementalBFGSRegressor(BlocksMixin, InterceptColumnMixin, RecursionRegressor,
                               recursion="bfgs"):
    """Incremental BFGS regressor (``docs/algorithms.md#incremental-bfgs``; kernel IncrementalBFGS).

    The first block gives the least-squares start W₀ = H₀⁻¹X₀ᵀY₀, B₀ = H₀⁻¹; each
    later block takes the step δW = B X_kᵀ(Y_k − X_kW)·α (exact line search, a
    fixed rate, or class-balanced rates) and updates the inverse-Hessian
    approximation B by (2.8), skipping it when the curvature is not positive.
    With ``block_size=None`` a ``fit`` is one block, i.e. least squares (as
    :class:`~sklearn.linear_model.LinearRegression`); the recursion is not the
    least-squares fit of all blocks seen (use :class:`KF4LLSRegressor` for that).

    Parameters
    ----------
    rate : "exact" or float > 0, default "exact"
        α: exact line search on the block's loss, or a fixed rate α_r.
    balanced : bool, default False
        Class-balanced per-example rates from α_r (binary targets 0/1 or −1/1;
        with ``fit_intercept`` the constant column is part of the model).
    ridge : float >= 0, default 0
        δ of H₀ + δI, used only when the first block is rank deficient
        (``ridge_used_``); 0 refuses such a block.
    balance_counts : {"block", "cumulative"}, default "block"
        Counts of positives/negatives the balanced rates use.
    block_size, first_block_size : int or None, default None
        Rows per block (None: one block per call) and of the first block.
    fit_intercept : bool, default True
        A constant column prepended inside the estimator (see the module docstring).

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        ``state_`` holds W, B, rows, blocks, n_skipped, ridge_used (and the counts
        of balanced rates).
    n_skipped_ : int
        B updates skipped by the curvature safeguard so far.
    ridge_used_ : bool
        Whether the first block needed the ridge start.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import IncrementalBFGSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2_000, 3))
    >>> y = X @ [1.0, -1.0, 2.0] + 0.5
    >>> est = IncrementalBFGSRegressor(block_size=100).fit(X, y)  # noise-free: exact
    >>> np.round(est.coef_, 6), round(est.intercept_, 6)
    (array([ 1., -1.,  2.]), 0.5)
    """

    _singular_hint = "set ridge > 0 or a larger first_block_size"

    def _set_extra_fitted(self, kernel, state):
        self.n_skipped_ = kernel.n_skipped(state)
        self.ridge_used_ = kernel.ridge_used(state)
