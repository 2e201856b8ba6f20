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
m, the suffix factors F are rebuilt from the rows [s, e) backwards, so each window position
costs one merge of two p × p factors and a few rows rotated in, whatever the window's
length. A row enters a factor by p Givens rotations, O(p²) (compiled, :func:`_rotate_in`),
and the merge rotates B's rows into a copy of F(s), O(p³); the suffix factors are kept at
about every √D-th start of the D starts of a front and rebuilt a block of √D at a time, so
a front holds about 2√D factors instead of D, and each row is rotated into two suffix
factors and one back factor in all. Every factor is an orthogonal reduction of the given
rows (Givens rotations are backward stable as Householder QR is: Higham 2002, §19.6), so
each window's coefficients are as accurate as a batch QR of its rows (ε·κ), where
``RollingOLS`` loses ε·κ². The windows are taken :data:`WINDOW_BATCH` at a time: the queue
keeps its state between batches and each batch's statistics are computed together.

The statistics of each window are those of :func:`~.classical.classical_statistics`, named
as statsmodels' ``RollingRegressionResults`` names them (``params``, ``bse``, ``tvalues``,
``rsquared``, ``rsquared_adj``, ``ssr``, ``nobs``, ``llf``, ``aic``, ``bic``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numba
import numpy as np

from streamlsq.kernels.linalg import has_full_column_rank

__all__ = ["RANK_MARGIN", "ROLLING_STATISTICS", "WINDOW_BATCH", "merge_summaries",
           "rolling_fit", "rows_summary", "sliding_factors", "window_ends"]

#: the statistics of each window: statsmodels' ``RollingRegressionResults`` names
ROLLING_STATISTICS = ("params", "bse", "tvalues", "rsquared", "rsquared_adj", "ssr", "nobs",
                      "llf", "aic", "bic")
#: windows whose factors and statistics are computed per call of the compiled queue: the
#: memory of a run is this many p × p factors, whatever the number of windows
WINDOW_BATCH = 4096
#: a window whose bound on σ_min/σ_max of its equilibrated factor (from R⁻¹, computed for
#: the statistics anyway) exceeds this many times the rank tolerance has full column rank
#: by the SVD of :func:`~streamlsq.kernels.linalg.has_full_column_rank` too (see
#: :func:`_full_column_rank`); the others are decided by that SVD
RANK_MARGIN = 1e3
#: the squares between which √(a² + b²) neither overflows nor loses digits to underflow
_TINY, _HUGE = 1e-290, 1e290


# no fastmath: the rotations' rounding is what the accuracy of every window rests on
@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rotate_in(R, v, lo):  # pragma: no cover - compiled
    """Rotate the row ``v`` (zero before column ``lo``) into the upper-triangular ``R``
    (non-negative diagonal, kept so) by one Givens rotation per diagonal entry (Golub &
    Van Loan 2013, §5.1.8): R then factors the rows of R and v. ``v`` is overwritten.
    O(p²) for a full row, against a QR of the p + 1 stacked rows."""
    p = R.shape[0]
    for i in range(lo, p):
        b = v[i]
        if b == 0.0:
            continue
        a = R[i, i]
        r2 = a * a + b * b
        # hypot's care for overflow and underflow only where the squares need it
        r = math.sqrt(r2) if _TINY < r2 < _HUGE else math.hypot(a, b)
        c = a / r
        s = b / r
        R[i, i] = r
        for j in range(i + 1, p):
            t = R[i, j]
            u = v[j]
            R[i, j] = c * t + s * u
            v[j] = c * u - s * t


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _add_rows(R, M, a, b, v):  # pragma: no cover - compiled
    """Rows a..b−1 of M rotated into R, the last first (the order changes no digit that
    matters: each is an exact orthogonal step up to rounding)."""
    p = R.shape[0]
    for r in range(b - 1, a - 1, -1):
        for j in range(p):
            v[j] = M[r, j]
        _rotate_in(R, v, 0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _slide(M, starts, ends, j0, j1, state, back, marks, block, tstarts,
           out):  # pragma: no cover - compiled
    """The factors of the windows j0..j1−1 (rows ``M[starts[j]:ends[j]]``) into
    ``out[:j1 − j0]``, by the two-stack queue of the module's docstring, continuing from
    ``state`` (kept between calls).

    state: [mid, hi, count, slot, loaded]: the front's boundary m, the rows appended so
    far, the front's distinct window starts (``tstarts[:count]``, and ``tstarts[count]`` =
    m), the slot of the current window's start in them and the block of suffix factors
    held in ``block`` (−1: none). The suffix factors F(t) are not all kept: ``marks[q]``
    holds F(tstarts[q·b]) (b = len(block)), and a block's b factors are rebuilt from the
    next mark when the windows reach it; each row then enters two suffix factors and one
    back factor, and the queue keeps about 2√(window) factors, not one per window start."""
    p = M.shape[1]
    nb = block.shape[0]
    v = np.empty(p)
    run = np.empty((p, p))
    mid, hi, count, slot, loaded = state[0], state[1], state[2], state[3], state[4]
    n_windows = starts.shape[0]
    for j in range(j0, j1):
        s = starts[j]
        e = ends[j]
        if s >= mid:  # the front is spent: suffix factors of the windows to come, in [s, e)
            count = 0
            jj = j
            while jj < n_windows and starts[jj] < e:
                if count == 0 or starts[jj] != tstarts[count - 1]:
                    tstarts[count] = starts[jj]
                    count += 1
                jj += 1
            tstarts[count] = e
            run[:, :] = 0.0
            for i in range(count - 1, -1, -1):  # backwards: F(t_i) = qr[rows t_i..t_i+1; F]
                _add_rows(run, M, tstarts[i], tstarts[i + 1], v)
                if i % nb == 0:
                    marks[i // nb, :, :] = run
                if i < nb:
                    block[i, :, :] = run
            mid, hi, slot, loaded = e, e, 0, 0
            back[:, :] = 0.0
        elif e > hi:  # the rows appended since: rotated into the back factor
            _add_rows(back, M, hi, e, v)
            hi = e
        F = out[j - j0]
        if s < mid:
            while tstarts[slot] < s:
                slot += 1
            q = slot // nb
            if loaded != q:  # the block's suffix factors, from the mark after it
                last = min(count, (q + 1) * nb)
                if last < count:
                    run[:, :] = marks[q + 1]
                else:
                    run[:, :] = 0.0
                for i in range(last - 1, q * nb - 1, -1):
                    _add_rows(run, M, tstarts[i], tstarts[i + 1], v)
                    block[i - q * nb, :, :] = run
                loaded = q
            F[:, :] = block[slot - q * nb]
            # merged with the back factor: its rows rotated in (a zero row, as B's last rows
            # while fewer than p rows were appended, costs p tests, no rotation)
            for i in range(p):
                for c in range(p):
                    v[c] = back[i, c]
                _rotate_in(F, v, i)
        else:
            F[:, :] = back
    state[0], state[1], state[2], state[3], state[4] = mid, hi, count, slot, loaded


class _Queue:
    """The two-stack queue's state over the windows (``starts``, ``ends``) of rows ``M``,
    advanced :data:`WINDOW_BATCH` windows at a time by :meth:`factors`."""

    def __init__(self, M: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.M = np.ascontiguousarray(M, np.float64)
        self.starts = np.ascontiguousarray(starts, np.int64)
        self.ends = np.ascontiguousarray(ends, np.int64)
        p = self.M.shape[1]
        span = int((self.ends - self.starts).max()) if len(self.ends) else 0
        cap = max(1, min(span, len(self.ends)))  # distinct starts a front holds at most
        nb = math.isqrt(cap - 1) + 1  # ⌈√cap⌉ suffix factors a block
        self.state = np.array([0, 0, 0, 0, -1], np.int64)
        self.back = np.zeros((p, p))
        self.marks = np.zeros(((cap + nb - 1) // nb + 1, p, p))
        self.block = np.zeros((nb, p, p))
        self.tstarts = np.zeros(cap + 1, np.int64)

    def factors(self, j0: int, j1: int) -> np.ndarray:
        """The factors (j1 − j0, p, p) of the windows j0..j1−1 (called in order)."""
        p = self.M.shape[1]
        out = np.empty((j1 - j0, p, p))
        _slide(self.M, self.starts, self.ends, j0, j1, self.state, self.back, self.marks,
               self.block, self.tstarts, out)
        return out


def sliding_factors(M: np.ndarray, starts: Sequence[int], ends: Sequence[int]
                    ) -> Iterator[np.ndarray]:
    """The factor R (p, p) of the rows ``M[s:e]`` for each window (s, e) of ``starts`` and
    ``ends`` (both non-decreasing), by the two-stack queue of the module's docstring:
    every R an orthogonal reduction of its window's rows (non-negative diagonal), none
    downdated.

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
    queue = _Queue(np.asarray(M, np.float64), np.asarray(starts, np.int64),
                   np.asarray(ends, np.int64))
    m = len(queue.ends)
    if len(queue.starts) != m:
        raise ValueError(f"{len(queue.starts)} window starts for {m} window ends")
    for j0 in range(0, m, WINDOW_BATCH):
        yield from queue.factors(j0, min(m, j0 + WINDOW_BATCH))


def _constant_part(X: np.ndarray, w: np.ndarray) -> tuple:
    """(first, same) of the rows of positive weight: the first such row and which columns
    equal it on all of them; (None, None) when no row weighs."""
    rows = X[w > 0]
    if not len(rows):
        return None, None
    return rows[0].copy(), (rows == rows[:1]).all(axis=0)


def _constant_column(X: np.ndarray, w: np.ndarray, prior: dict | None = None) -> int | None:
    """The index of a column constant (and not zero) on the rows of positive weight (those
    of ``prior`` too, the summary of earlier rows), or None: whether the windows' R² is
    centred, as statsmodels' ``k_constant`` decides."""
    first, same = _merge_constant_parts(
        (None, None) if prior is None else (prior["first"], prior["same"]),
        _constant_part(X, w))
    if first is None:
        return None
    same = same & (first != 0)
    return int(np.flatnonzero(same)[0]) if same.any() else None


def _merge_constant_parts(a: tuple, b: tuple) -> tuple:
    """(first, same) of two runs of rows, the first before the second."""
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return a[0], a[1] & b[1] & (a[0] == b[0])


def _factor(M: np.ndarray) -> np.ndarray:
    """The (p, p) upper-triangular factor of the rows ``M`` (fewer than p rows: zero rows
    below), by Householder QR."""
    p = M.shape[1]
    R = np.zeros((p, p))
    if len(M):
        r = np.linalg.qr(M, mode="r")
        R[:min(len(M), p)] = r[:p]
    return R


def rows_summary(X, Y, weights=None) -> dict:
    """The summary of a run of rows that expanding windows hold whole, a ``prior`` of
    :func:`rolling_fit` for the rows after them: the factor of [W^½X W^½Y] (``factor``),
    the rows (``rows``), those of positive weight (``nobs``) and their Σ log w
    (``sum_log_w``), and the first such row with the columns equal to it on all of them
    (``first``, ``same``: the constant column's decision). Summaries of consecutive runs
    merge by :func:`merge_summaries`.

    >>> import numpy as np
    >>> from streamlsq.kernels.inference.rolling import merge_summaries, rows_summary
    >>> X = np.column_stack([np.ones(9), np.arange(9.0)]); y = X @ [1.0, 2.0]
    >>> s = merge_summaries(rows_summary(X[:4], y[:4]), rows_summary(X[4:], y[4:]))
    >>> s["rows"], s["nobs"], bool(np.allclose(s["factor"].T @ s["factor"],
    ...     np.c_[X, y].T @ np.c_[X, y])), s["same"].tolist()
    (9, 9, True, [True, False])
    """
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    w = np.ones(len(X)) if weights is None else np.asarray(weights, np.float64)
    positive = w > 0
    first, same = _constant_part(X, w)
    return {"factor": _factor(np.hstack([X, Y]) * np.sqrt(w)[:, None]), "rows": len(X),
            "nobs": int(positive.sum()), "sum_log_w": float(np.log(w[positive]).sum()),
            "first": first, "same": same}


def merge_summaries(a: dict, b: dict) -> dict:
    """The summary (:func:`rows_summary`) of the rows of ``a`` followed by those of ``b``:
    the factor of both factors stacked (a QR of 2p rows), the counts added."""
    first, same = _merge_constant_parts((a["first"], a["same"]), (b["first"], b["same"]))
    return {"factor": _factor(np.vstack([a["factor"], b["factor"]])),
            "rows": a["rows"] + b["rows"], "nobs": a["nobs"] + b["nobs"],
            "sum_log_w": a["sum_log_w"] + b["sum_log_w"], "first": first, "same": same}


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _triangular_solves(factors, k, coef, normalized):  # pragma: no cover - compiled
    """For each factor [[R, z], [0, S]] of ``factors`` (m, p, p), R (k, k): ``coef`` =
    R⁻¹z by back substitution and ``normalized`` = the row sums of (R⁻¹)², the diagonal
    of (RᵀR)⁻¹ = R⁻¹R⁻ᵀ (R⁻¹ column by column, each a back substitution). A zero
    diagonal gives inf or NaN (the window is not recorded)."""
    m = factors.shape[0]
    K = factors.shape[1] - k
    col = np.empty(k)
    for w in range(m):
        R = factors[w]
        for t in range(K):
            for i in range(k - 1, -1, -1):
                acc = R[i, k + t]
                for j in range(i + 1, k):
                    acc -= R[i, j] * coef[w, j, t]
                coef[w, i, t] = acc / R[i, i]
        for i in range(k):
            normalized[w, i] = 0.0
        for c in range(k):
            col[c] = 1.0 / R[c, c]
            for i in range(c - 1, -1, -1):
                acc = 0.0
                for j in range(i + 1, c + 1):
                    acc -= R[i, j] * col[j]
                col[i] = acc / R[i, i]
            for i in range(c + 1):
                normalized[w, i] += col[i] * col[i]


def _full_column_rank(Rx: np.ndarray, nobs: np.ndarray, normalized: np.ndarray
                      ) -> np.ndarray:
    """The decision of :func:`~streamlsq.kernels.linalg.has_full_column_rank` for each
    factor of ``Rx`` (m, k, k), its SVD taken only where a bound cannot settle it.

    With D the columns' norms and T = R⁻¹ (``normalized``: the row sums of T²), the
    equilibrated factor F = RD⁻¹ has σ_max ≤ ‖F‖_F = √k and σ_min ≥ 1/‖DT‖_F, so
    σ_min/σ_max ≥ β = 1/(√k‖DT‖_F). T as computed by back substitution has the residual
    ‖I − FDT‖ ≤ γ_k‖|F|‖‖DT‖ ≤ kε/β (Higham 2002, §8.1 and ch. 14): where β exceeds
    :data:`RANK_MARGIN` times the rank tolerance τ ≥ kε, the residual is below 1/1000, the
    true ratio at least 0.999β, and the SVD (backward stable) puts it far above τ as
    well. Every other window (β not finite, or near τ) is decided by that SVD."""
    k = Rx.shape[-1]
    counts = np.maximum(np.maximum(nobs, k), 1)
    tol = np.sqrt(counts * float(k)) * np.finfo(np.float64).eps  # rank_tolerance, batched
    with np.errstate(all="ignore"):
        spread = np.sqrt(k * np.einsum("mj,mj->m", np.einsum("mij,mij->mj", Rx, Rx),
                                       normalized))  # 1/β
        clear = np.isfinite(spread) & (spread * (RANK_MARGIN * tol) < 1.0)
    full = clear.copy()
    unsure = np.flatnonzero(~clear)
    if len(unsure):
        full[unsure] = has_full_column_rank(Rx[unsure], nobs[unsure])
    return full


def _window_statistics(factors: np.ndarray, k: int, nobs: np.ndarray,
                       sum_log_w: np.ndarray, constant: int | None, min_nobs: int) -> dict:
    """The statistics of :data:`ROLLING_STATISTICS` of m windows from their factors
    (m, p, p) of [W^½X W^½Y] (the formulas of :func:`~.classical.classical_statistics`,
    batched): NaN for a window of fewer than ``min_nobs`` rows or whose columns are
    aliased by the rank rule of every least-squares solve
    (:func:`~streamlsq.kernels.linalg.has_full_column_rank`)."""
    m, p, _ = factors.shape
    K = p - k
    factors = np.ascontiguousarray(factors, np.float64)
    Rx, z, S = factors[:, :k, :k], factors[:, :k, k:], factors[:, k:, k:]
    # coefficients and diag((RᵀR)⁻¹) by back substitution (compiled), for every window
    coef, normalized = np.empty((m, k, K)), np.empty((m, k))
    _triangular_solves(factors, k, coef, normalized)
    enough = (nobs >= min_nobs) & (nobs > k)
    # the one rank rule of every least-squares solve (column_rank), for every window
    ok = np.zeros(m, bool)
    ok[enough] = _full_column_rank(Rx[enough], nobs[enough], normalized[enough])
    coef[~ok], normalized[~ok] = 0.0, 1.0  # a singular window: dropped below
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
            u = np.where(ok[:, None], Rx[:, :, constant], 1.0)
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
                ends=None, prior: dict | None = None) -> dict:
    """Least squares over every recorded window of ``window`` rows of (X, Y): ``ends`` (the
    exclusive row ends of the windows) and the statistics of :data:`ROLLING_STATISTICS`
    per window, ``params``/``bse``/``tvalues`` (m, k, K), the others (m, K); a window whose
    rows do not identify the coefficients (fewer than ``min_nobs`` rows of positive weight,
    default k, or aliased columns by the one rank rule) gets NaN, as in ``RollingOLS``.
    ``weights``: precision weights of the rows (as WLS); ``constant`` the index of the
    intercept column if known; ``ends`` the windows' ends (exclusive, sorted) instead of
    every ``step`` rows. ``prior``: the summary (:func:`rows_summary`) of the rows before
    X, which every window then holds whole (expanding windows that begin before X: the
    windows' ends count from X's first row, and none may start after the prior's first
    row); their rows are not needed again.

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
    if prior is not None:  # its factor's p rows stand for the rows before X
        if len(ends) and int((ends - int(window)).max()) + prior["rows"] > 0:
            raise ValueError(f"a window of {window} rows ending at row "
                             f"{int(ends.max()) + prior['rows']} does not hold the prior's "
                             f"{prior['rows']} rows whole")
        p = k + K
        M = np.vstack([prior["factor"], M])
        count = np.concatenate([[0], np.full(p, prior["nobs"]), prior["nobs"] + count[1:]])
        sum_log_w = np.concatenate([[0.0], np.full(p, prior["sum_log_w"]),
                                    prior["sum_log_w"] + sum_log_w[1:]])
        rows_end, starts = ends + p, np.zeros_like(ends)
    else:
        rows_end = ends
    m = len(ends)
    constant = _constant_column(X, w, prior) if constant is None else constant
    queue = _Queue(M, starts, rows_end)
    parts = []
    for j0 in range(0, m, WINDOW_BATCH):  # a batch of factors at a time: bounded memory
        j1 = min(m, j0 + WINDOW_BATCH)
        parts.append(_window_statistics(queue.factors(j0, j1), k, count[rows_end[j0:j1]]
                                        - count[starts[j0:j1]], sum_log_w[rows_end[j0:j1]]
                                        - sum_log_w[starts[j0:j1]], constant, min_nobs))
    if not parts:
        parts.append(_window_statistics(np.zeros((0, k + K, k + K)), k,
                                        np.zeros(0, np.int64), np.zeros(0), constant,
                                        min_nobs))
    out = {name: np.concatenate([part[name] for part in parts]) if len(parts) > 1
           else parts[0][name] for name in ROLLING_STATISTICS}
    out["ends"] = ends
    return out
