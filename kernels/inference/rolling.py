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

from streamlsq.kernels.linalg import has_full_column_rank

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


def _constant_column(X: np.ndarray, w: np.ndarray) -> int | None:
    """The index of a column constant (and not zero) on the rows of positive weight, or
    None: whether the windows' R² is centred, as statsmodels' ``k_constant`` decides."""
    rows = X[w > 0]
    if not len(rows):
        return None
    same = (rows == rows[:1]).all(axis=0) & (rows[0] != 0)
    return int(np.flatnonzero(same)[0]) if same.any() else None


def _window_statistics(factors: np.ndarray, k: int, nobs: np.ndarray,
                       sum_log_w: np.ndarray, constant: int | None, min_nobs: int) -> dict:
    """The statistics of :data:`ROLLING_STATISTICS` of m windows from their factors
    (m, p, p) of [W^½X W^½Y] (the formulas of :func:`~.classical.classical_statistics`,
    batched): NaN for a window of fewer than ``min_nobs`` rows or whose columns are
    aliased by the rank rule of every least-squares solve
    (:func:`~streamlsq.kernels.linalg.has_full_column_rank`)."""
    m, p, _ = factors.shape
    K = p - k
    Rx, z, S = factors[:, :k, :k], factors[:, :k, k:], factors[:, k:, k:]
    # the one rank rule of every least-squares solve (column_rank), for every window
    ok = (nobs >= min_nobs) & (nobs > k) & has_full_column_rank(Rx, nobs)
    Rs = np.where(ok[:, None, None], Rx, np.eye(k))  # a singular window: solved with I, dropped
    # triangular systems solved by LU (batched): partial pivoting takes no pivot on an
    # upper-triangular matrix (zeros below a nonzero diagonal), so it is back substitution
    coef = np.linalg.solve(Rs, z)
    T = np.linalg.solve(Rs, np.broadcast_to(np.eye(k), Rs.shape))  # R⁻¹: (RᵀR)⁻¹ = R⁻¹R⁻ᵀ
    normalized = np.einsum("mij,mij->mi", T, T)
    n = nobs.astype(np.float64)[:, None]
    ssr = np.einsum("mij,mij->mj", S, S)
    k_c = 0 if constant is None else 1
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = ssr / (n - k)
        bse = np.sqrt(scale[:, None, :] * normalized[:, :, None])
        tvalues = coef / bse
        total = np.einsum("mij,mij->mj", z, z)
        if constant is None:
            ess = total
        elif constant == 0:  # u = r₀₀e₁: the rotation has taken the mean out already
            ess = np.einsum("mij,mij->mj", z[:, 1:], z[:, 1:])
        else:  # z less its part along the constant's direction u = R[:, c]
            u = Rs[:, :, constant]
            ess = total - np.einsum("mi,mij->mj", u, z) ** 2 / np.einsum("mi,mi->m", u,
                                                                              u)[:, None]
        rsquared = ess / (ess + ssr)
        rsquared_adj = 1.0 - (n - k_c) / (n - k) * (1.0 - rsquared)
        llf = -n / 2.0 * (np.log(2.0 * np.pi) + np.log(ssr / n) + 1.0) + sum_log_w[:, None] / 2
    out = {"params": coef, "bse": bse, "tvalues": tvalues, "rsquared": rsquared,
           "rsquared_adj": rsquared_adj, "ssr": ssr, "nobs": np.repeat(n, K, axis=1),
           "llf": llf, "aic": -2.0 * llf + 2.0 * k, "bic": -2.0 * llf + np.log(n) * k}
    for values in out.values():
        values[~ok] = np.nan
    return out


def window_ends(n_rows: int, window: int, min_nobs: int, step: int = 1,
                expanding: bool = False) -> np.ndarray:
    """The ends (exclusive) of the recorded windows: every ``step`` rows from the first
    window of ``window`` rows (``expanding``: of ``min_nobs`` rows, the windows growing to
    ``window`` rows as statsmodels' ``RollingOLS(expanding=True)``), up to the last row."""
    first = min_nobs if expanding else window
    return np.arange(first, n_rows + 1, step, dtype=np.int64)


def rolling_fit(X, Y, window: int, *, min_nobs: int | None = None, step: int = 1,
                expanding: bool = False, weights=None, constant: int | None = None,
                ends=None) -> dict:
    """Least squares over every recorded window of ``window`` rows of (X, Y): ``ends`` (the
    exclusive row ends of the windows) and the statistics of :data:`ROLLING_STATISTICS`
    per window, ``params``/``bse``/``tvalues`` (m, k, K), the others (m, K); a window whose
    rows do not identify the coefficients (fewer than ``min_nobs`` rows of positive weight,
    default k, or aliased columns by the one rank rule) gets NaN, as in ``RollingOLS``.
    ``weights``: precision weights of the rows (as WLS); ``constant`` the index of the
    intercept column if known; ``ends`` the windows' ends (exclusive, sorted) instead of
    every ``step`` rows.

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
    # the windows' counts from prefix sums of integers (exact), and Σ log w of the llf
    positive = w > 0
    count = np.concatenate([[0], np.cumsum(positive)])
    sum_log_w = np.concatenate([[0.0], np.cumsum(np.where(positive, np.log(np.where(
        positive, w, 1.0)), 0.0))])
    m = len(ends)
    factors = np.stack(list(sliding_factors(M, starts, ends))) if m else np.zeros((0, k + K,
                                                                                  k + K))
    out = _window_statistics(factors, k, count[ends] - count[starts],
                             sum_log_w[ends] - sum_log_w[starts],
                             _constant_column(X, w) if constant is None else constant, min_nobs)
    out["ends"] = ends
    return out
