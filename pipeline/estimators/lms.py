"""LMS (Widrow–Hoff) as a scikit-learn estimator, with epochs and seeded shuffles.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import check_random_state

from streamlsq.estimators.base import FIT_INTERCEPT, Pass, RecursionRegressor
from streamlsq.kernels import (
    chunk_row_permutation,
    epoch_chunk_order,
)
from streamlsq.kernels.recursions.contract import BLOCK_SIZE, Param

__all__ = [
    "LMSRegressor",
]


# ---------------------------------------------------------------------------
# LMS
# ---------------------------------------------------------------------------
class LMSRegressor(RecursionRegressor, recursion="lms"):
    """LMS / Widrow–Hoff: per-sample stochastic gradient descent for least squares.

    W ← W + ρ_k x̃_n(t_nᵀ − x̃_nᵀW), x̃ = [1, x] (``docs/algorithms.md#lms``; kernel
    :class:`streamlsq.kernels.LMS`, a compiled per-sample loop). The constant
    column is the kernel's: ``intercept_`` is row 0 of W, always fitted.

    Parameters
    ----------
    schedule : {"constant", "inverse", "power"}, default "constant"
        ρ_k = ρ_0; ρ_0/(1 + k/τ); ρ_0/k^a. k counts samples over all epochs and
        all ``partial_fit`` calls.
    rate : float > 0, default 0.01
        ρ_0. Plain LMS needs ρ‖x̃‖² < 2: standardise X (e.g. a ``Pipeline``
        with ``StandardScaler``) or set ``normalized=True``.
    tau : float or None
        τ of the "inverse" schedule (required there, refused otherwise).
    power : float or None
        a ∈ (½, 1] of the "power" schedule (required there, refused otherwise).
    normalized : bool, default False
        Normalised LMS: the step is ρ_k/(ε + ‖x̃‖²).
    eps : float or None, default None
        ε of normalised LMS (None: 1e-6); refused without ``normalized``.
    epochs : int, default 1
        Passes of ``fit`` over the rows (``partial_fit`` always makes one pass).
    shuffle : bool, default False
        ``fit`` only: visit the rows of each epoch in a seeded shuffled order,
        exactly as the pipeline shuffles a store whose chunks have
        ``block_size`` rows: the chunks in the order
        :func:`~streamlsq.kernels.epoch_chunk_order` (seed, epoch) and the rows
        of each chunk in the order :func:`~streamlsq.kernels.chunk_row_permutation`
        (seed, epoch, chunk). With ``block_size=None`` the rows form one chunk,
        i.e. a uniform permutation per epoch.
    random_state : int, RandomState instance or None, default None
        The shuffle's seed: an int >= 0 is the seed itself (the pipeline's
        ``--seed``); None or a RandomState draws one seed per ``fit``.
    block_size : int or None, default None
        Rows per step (and per shuffled chunk); the numbers do not depend on it
        without shuffling. None: one block per call and epoch.
    fit_intercept : bool, default True
        The kernel's constant term x̃ = [1, x] (``intercept_``); False: x̃ = x and
        ``intercept_`` is 0, as ``fit_stream(..., "lms", fit_intercept=False)``.

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        ``state_`` holds W ((n_features + 1) × K), k (samples so far) and blocks.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import LMSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((5_000, 2))
    >>> y = X @ [2.0, -1.0] + 0.5 + 0.01 * rng.standard_normal(5_000)
    >>> est = LMSRegressor(rate=0.01, epochs=2).fit(X, y)
    >>> np.round(est.coef_, 2), round(est.intercept_, 2)
    (array([ 2., -1.]), 0.5)
    """

    _own_params = (
        Param("epochs", 1, "Passes of fit over the rows.", type=int, gt=0),
        Param("shuffle", False, "fit only: visit the rows of each epoch in a seeded shuffled "
              "order.", type=bool),
        # an int seed, a RandomState or None: checked by _check_params
        Param("random_state", None, "The shuffle's seed (int >= 0), or None / a RandomState.",
              type=object, optional=True),
        BLOCK_SIZE.replace(optional=True, help="Rows per step (and per shuffled chunk)."),
        FIT_INTERCEPT.replace(help="The kernel's constant term (intercept_); False: none."),
    )

    def _has_intercept_row(self) -> bool:
        return bool(self.fit_intercept)

    def _kernel_values(self, X, first_call: bool) -> dict:
        # fit_intercept is checked by _check_params, before the kernel is made
        return {**super()._kernel_values(X, first_call), "intercept": bool(self.fit_intercept)}

    def _n_kernel_features(self, n_features: int) -> int:
        return n_features

    def _check_params(self):
        super()._check_params()
        if isinstance(self.random_state, numbers.Integral) and self.random_state < 0:
            raise ValueError(f"random_state must be >= 0 or None, got {self.random_state!r}")

    def _seed(self) -> int:
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _passes(self, kernel, state, X, Y, first_call, is_fit, **kw):
        edges = self._edges(X.shape[0], self.block_size)
        if not is_fit:
            return [Pass(X, Y, edges)]
        if not self.shuffle:
            return [Pass(X, Y, edges) for _ in range(self.epochs)]
        seed = self._seed()
        sizes = np.diff(edges)
        passes = []
        for epoch in range(self.epochs):
            order = epoch_chunk_order(seed, epoch, sizes.size, True)
            rows = np.concatenate(
                [
                    edges[c] + chunk_row_permutation(seed, epoch, int(c), int(sizes[c]), True)
                    for c in order
                ]
            )
            new_edges = np.concatenate([[0], np.cumsum(sizes[order])])
            passes.append(Pass(X[rows], Y[rows], new_edges))
        return passes
