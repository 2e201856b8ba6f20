"""Rolling least squares, exact at every window position: the triangular factor of each
window's rows from QR factors that are merged, never downdated.

The factor of a block of rows merges associatively (the factor of two stacked factors is
the factor of their rows) but cannot be subtracted exactly: removing the oldest rows from a
factor (downdating), or keeping XᵀX and subtracting the rows that leave (statsmodels'
``RollingOLS``), loses digits as κ² and as the window slides. A sliding window of an
associative operation needs no subtraction: the *two-stack queue* keeps

    F(s) = factor of rows [s, m)       for every window start s still to come below m
    B    = factor of rows [m, e)       the rows appended since m

and answers the window [s, e) with one merge of F(s) and B. When the window's start passes
m, the suffix factors F are rebuilt from the rows [s, e) backwards (each row enters one
suffix factor and one appended factor), so every row is factored twice in all and each
window position costs one merge of two p × p factors, whatever the window's length. Every
factor is a Householder QR of the given rows (backward stable), so each window's
coefficients are as accurate as a batch QR of its rows (ε·κ), where ``RollingOLS`` loses
ε·κ².

The statistics of each window are those of :func:`~.classical.classical_statistics`, named
as statsmodels' ``RollingRegressionResults`` names them (``params``, ``bse``, ``tvalues``,
``rsquared``, ``rsquared_adj``, ``ssr``, ``nobs``, ``llf``, ``aic``, ``bic``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.inference.classical import classical_statistics
from streamlsq.kernels.inference.factor import RegressionFactor

__all__ = ["ROLLING_STATISTICS", "rolling_fit", "sliding_factors", "window_ends"]

#: the statistics of each window: statsmodels' ``RollingRegressionResults`` names
ROLLING_STATISTICS = ("params", "bse", "tvalues", "rsquared", "rsquared_adj", "ssr", "nobs",
                      "llf", "aic", "bic")


def _factor(rows: np.ndarray, p: int) -> np.ndarray:
    """The (p, p) upper-triangular factor of ``rows`` (fewer than p rows: zero rows
    below), by Householder QR (LAPACK geqrf)."""
    R = np.zeros((p, p))
    if len(rows):
        r = sla.qr(rows, mode="r", check_finite=False)[0]
        R[:min(len(rows), p)] = r[:p]
    return R


def sliding_factors(M: np.ndarray, starts: Sequence[int], ends: Sequence[int]
                    ) -> Iterator[np.ndarray]:
    """The factor R (p, p) of the rows ``M[s:e]`` for each window (s, e) of ``starts`` and
    ``ends`` (both non-decreasing), by the two-stack queue of the module's docstring:
    every R a QR of its window's rows, none downdated.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.rolling import sliding_factors
    >>> M = np.random.default_rng(0).standard_normal((40, 3))
    >>> Rs = list(sliding_factors(M, [0, 5, 10, 30], [10, 15, 20, 40]))
    >>> all(np.allclose(R.T @ R, M[s:e].T @ M[s:e])
    ...     for R, s, e in zip(Rs, [0, 5, 10, 30], [10, 15, 20, 40]))
    True
    """
    M = np.asarray(M, np.float64)
    p = M.shape[1]
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    front: dict[int, np.ndarray] = {}  # F(s) of the starts below mid
    mid, hi = 0, 0
    back = np.zeros((p, p))
    for j, (s, e) in enumerate(zip(starts, ends, strict=True)):
        if e > hi:  # the rows appended since: merged into the back factor
            back = _factor(np.vstack([back, M[hi:e]]), p)
            hi = e
        if s >= mid:  # the front is spent: suffix factors of the windows to come, from [s, e)
            front, suffix, stop = {}, np.zeros((p, p)), e
            for t in sorted({int(x) for x in starts[j:] if s <= x < e}, reverse=True):
                suffix = _factor(np.vstack([M[t:stop], suffix]), p)
                front[t], stop = suffix, t
            mid, back = e, np.zeros((p, p))
        yield _factor(np.vstack([front[int(s)], back]), p) if s < mid else back


def window_ends(n_rows: int, window: int, min_nobs: int, step: int = 1,
                expanding: bool = False) -> np.ndarray:
    """The ends (exclusive) of the recorded windows: every ``step`` rows from the first
    window of ``window`` rows (``expanding``: of ``min_nobs`` rows, the windows growing to
    ``window`` rows as statsmodels' ``RollingOLS(expanding=True)``), up to the last row."""
    first = min_nobs if expanding else window
    return np.arange(first, n_rows + 1, step, dtype=np.int64)


def rolling_fit(X, Y, window: int, *, min_nobs: int | None = None, step: int = 1,
                expanding: bool = False, weights=None, constant: int | None = None,
                alpha: float = 0.05, ends=None) -> dict:
    """Least squares over every recorded window of ``window`` rows of (X, Y): ``ends`` (the
    exclusive row ends of the windows) and the statistics of :data:`ROLLING_STATISTICS`
    per window, ``params``/``bse``/``tvalues`` (m, k, K), the others (m, K); a window whose
    rows do not identify the coefficients (fewer than ``min_nobs`` rows of positive weight,
    default k, or a singular factor) gets NaN, as in ``RollingOLS``. ``weights``: precision
    weights of the rows (as WLS); ``constant`` the index of the intercept column if known;
    ``ends`` the windows' ends (exclusive, sorted) instead of every ``step`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.rolling import rolling_fit
    >>> X = np.column_stack([np.ones(6), np.arange(6.0)]); y = 2 * X[:, 1:] + 1
    >>> fit = rolling_fit(X, y, 3, step=2)
    >>> fit["ends"].tolist(), np.round(fit["params"][:, :, 0], 9).tolist()
    ([3, 5], [[1.0, 2.0], [1.0, 2.0]])
    """
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    n, k = X.shape
    K = Y.shape[1]
    min_nobs = k if min_nobs is None else int(min_nobs)
    w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    root = np.sqrt(w)[:, None]
    M = np.hstack([X * root, Y * root])
    if ends is None:
        ends = window_ends(n, int(window), min_nobs, int(step), expanding)
    ends = np.asarray(ends, np.int64)
    starts = np.maximum(ends - int(window), 0)
    # the windows' moments from prefix sums of exact integers (counts) and of the rows'
    # sums (only the test of an implicit constant and the llf's Σ log w read them)
    positive = w > 0
    count = np.concatenate([[0], np.cumsum(positive)])
    sum_w = np.concatenate([[0.0], np.cumsum(w)])
    sum_log_w = np.concatenate([[0.0], np.cumsum(np.where(positive, np.log(np.where(
        positive, w, 1.0)), 0.0))])
    sum_x = np.vstack([np.zeros(k), np.cumsum(X * w[:, None], axis=0)])
    out = {name: np.full((len(ends), k, K), np.nan) for name in ("params", "bse", "tvalues")}
    out.update({name: np.full((len(ends), K), np.nan)
                for name in ROLLING_STATISTICS[3:]})
    for i, (R, s, e) in enumerate(zip(sliding_factors(M, starts, ends), starts, ends,
                                      strict=True)):
        nobs = int(count[e] - count[s])
        Rx = R[:k, :k]
        diag = np.abs(np.diag(Rx))
        if nobs < min_nobs or nobs <= k or diag.min() <= k * np.finfo(float).eps * diag.max():
            continue
        z = R[:k, k:]
        S = R[k:, k:]
        coef = sla.solve_triangular(Rx, z, check_finite=False)
        fac = RegressionFactor(R=Rx, z=z, ssr=np.einsum("ij,ij->j", S, S), coef=coef,
                               nobs=nobs, sum_weights=float(sum_w[e] - sum_w[s]),
                               sum_log_weights=float(sum_log_w[e] - sum_log_w[s]),
                               feature_sums=sum_x[e] - sum_x[s])
        stats = classical_statistics(fac, alpha, constant)
        out["params"][i] = coef
        for name in ("bse", "tvalues"):
            out[name][i] = stats[name]
        for name in ROLLING_STATISTICS[3:]:
            out[name][i] = stats[name]
    out["ends"] = ends
    return out
