"""Refinement: per-cluster sufficient statistics and the refined parameters (Algorithm 1).

Each light task classified into cluster j contributes XᵀX, Xᵀy, yᵀy and its row
count to cluster j's sums (:func:`cluster_sufficient_stats`); the sums are additive
over chunks of work (:func:`combine_stats`), and :func:`refine_from_stats` solves
ŵ_j = (ΣXᵀX)⁻¹ΣXᵀy, the noise ŝ_j² from the residual sum of squares and the weight
p̂_j from the task counts (Kong et al., 2020; ``docs/algorithms.md``).
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import SingularMatrixError, spd_solve, symmetrize
from streamlsq.kernels.mlr.tasks import (
    as_task_rows,
    check_labels,
    task_ids,
)

__all__ = [
    "REFINEMENT_STATUS",
    "cluster_sufficient_stats",
    "combine_stats",
    "refine_from_stats",
    "refine_with_fallback",
]

#: status code -> meaning of each cluster's refinement (:func:`refine_with_fallback`)
REFINEMENT_STATUS = ("refined", "few_rows", "singular", "no_tasks")


# -- refinement (step 5) -----------------------------------------------------------
_STAT_KEYS = ("xtx", "xty", "yty", "rows", "tasks")


def cluster_sufficient_stats(X, y, task_ptr, labels, k: int) -> dict[str, np.ndarray]:
    """Per-cluster sufficient statistics of the labelled tasks of one chunk of work.

    Returns {"xtx": (k, d, d), "xty": (k, d), "yty": (k,), "rows": (k,) int64,
    "tasks": (k,) int64} over the rows of the tasks with each label. Additive
    over chunks of work (:func:`combine_stats`). A loop over the k clusters, not tasks.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    lab = check_labels(labels, ptr.size - 1, int(k))
    row_lab = lab[task_ids(ptr)]
    d = X.shape[1]
    xtx = np.zeros((k, d, d))
    xty = np.zeros((k, d))
    yty = np.zeros(k)
    for ell in range(k):
        m = row_lab == ell
        if m.any():
            Xm, ym = X[m], y[m]
            xtx[ell] = symmetrize(Xm.T @ Xm)
            xty[ell] = Xm.T @ ym
            yty[ell] = ym @ ym
    return {
        "xtx": xtx,
        "xty": xty,
        "yty": yty,
        "rows": np.bincount(row_lab, minlength=k).astype(np.int64),
        "tasks": np.bincount(lab, minlength=k).astype(np.int64),
    }


def combine_stats(*stats: dict) -> dict:
    """Sum dicts of additive statistics key by key (any kernel's partial sums).

    All dicts must have the same keys and shapes; used for cluster statistics,
    EM sums and moment sums alike, and as the combine of a tree reduction.
    """
    if not stats:
        raise ValueError("combine_stats needs at least one dict of statistics")
    keys = set(stats[0])
    out = {}
    for i, s in enumerate(stats[1:], start=1):
        if set(s) != keys:
            raise ValueError(f"statistics {i} has keys {sorted(s)}, expected {sorted(keys)}")
    for key in stats[0]:
        first = np.asarray(stats[0][key])
        total = first.copy()
        for i, s in enumerate(stats[1:], start=1):
            v = np.asarray(s[key])
            if v.shape != first.shape:
                raise ValueError(
                    f"statistics {i}['{key}'] has shape {v.shape}, expected {first.shape}"
                )
            total = total + v
        out[key] = total
    return out


def solve_from_sums(xtx: np.ndarray, xty: np.ndarray, yty: float,
                    what: str) -> tuple[np.ndarray, float]:
    """Least squares from the sums of some rows: ŵ solving XᵀX w = Xᵀy (Cholesky, never an
    inverse) and the residual sum of squares yᵀy − 2ŵᵀXᵀy + ŵᵀXᵀXŵ, clipped at 0 against
    rounding. A singular XᵀX raises :class:`~.linalg.SingularMatrixError` naming ``what``
    (e.g. ``"cluster 2: X^T X of its rows"``)."""
    try:
        w = spd_solve(xtx, xty)
    except SingularMatrixError as err:
        raise SingularMatrixError(f"{what} is singular ({err})", rank=err.rank,
                                  size=err.size) from err
    return w, max(float(yty - 2.0 * (w @ xty) + w @ xtx @ w), 0.0)


def _unpack_stats(stats: dict, n_tasks_total: int):
    """(XᵀX, Xᵀy, yᵀy, rows, tasks, n_total) of combined statistics, checked."""
    missing = [key for key in _STAT_KEYS if key not in stats]
    if missing:
        raise ValueError(f"stats lacks {missing}; expected the keys {list(_STAT_KEYS)}")
    tasks = np.asarray(stats["tasks"])
    n_total = int(n_tasks_total)
    if n_total < int(tasks.sum()) or n_total < 1:
        raise ValueError(
            f"n_tasks_total = {n_total} is smaller than the {int(tasks.sum())} tasks in stats"
        )
    return (np.asarray(stats["xtx"], dtype=np.float64), np.asarray(stats["xty"], np.float64),
            np.asarray(stats["yty"], dtype=np.float64), np.asarray(stats["rows"]), tasks,
            n_total)


def refine_from_stats(stats: dict, n_tasks_total: int):
    """Per-cluster least squares from combined statistics: (W (k, d), s2 (k,), p (k,)).

    ŵ_ℓ solves XᵀX w = Xᵀy (Cholesky, :func:`~.linalg.spd_solve`); ŝ²_ℓ =
    RSS_ℓ/(rows_ℓ − d); p̂_ℓ = tasks_ℓ/n_tasks_total. Refuses a cluster with
    rows ≤ d or a singular XᵀX, naming the cluster.
    """
    xtx, xty, yty, rows, tasks, n_total = _unpack_stats(stats, n_tasks_total)
    k, d = xty.shape
    W = np.zeros((k, d))
    s2 = np.zeros(k)
    for ell in range(k):
        if rows[ell] <= d:
            raise ValueError(
                f"cluster {ell} has {int(rows[ell])} rows; refinement needs more than "
                f"d = {d} rows (rows - d residual degrees of freedom)"
            )
        W[ell], rss = solve_from_sums(xtx[ell], xty[ell], yty[ell],
                                      f"cluster {ell}: X^T X of its rows")
        s2[ell] = rss / (rows[ell] - d)
    return W, s2, tasks / n_total


def refine_with_fallback(stats: dict, n_tasks_total: int, W0, r2):
    """Refinement that never fails on one thin cluster: (W, s2, p, status (k,) int8).

    A cluster with more than d rows and a non-singular XᵀX is refined as in
    :func:`refine_from_stats` (status 0, "refined"). Otherwise its estimate
    falls back to the least-squares solution closest to its initial estimate
    ŵ⁰_ℓ (Kong et al. (2020), Algorithm 1 step 3; ``docs/algorithms.md``):

        ŵ_ℓ = ŵ⁰_ℓ + δ,  δ = the minimum-norm solution of XᵀX δ = Xᵀy − XᵀX ŵ⁰_ℓ

    (``lstsq`` on the normal equations: δ moves ŵ⁰ only along the directions the
    cluster's rows determine; it is the ridge estimate with prior mean ŵ⁰ in the
    limit of a vanishing penalty), and its noise variance is the initial r̂²_ℓ
    from the heavy tasks. Status 1 "few_rows" (rows ≤ d), 2 "singular"
    (XᵀX not positive definite), 3 "no_tasks" (no light2 task classified
    there: ŵ = ŵ⁰, ŝ² = r̂², p̂ = 0). p̂_ℓ = tasks_ℓ / n_tasks_total as always.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]); y = np.array([1.0, 2.0, 3.0])
    >>> stats = cluster_sufficient_stats(X, y, np.array([0, 3]), np.array([0]), 1)
    >>> W, s2, p, status = refine_with_fallback(stats, 1, np.array([[0.0, 5.0]]), np.array([0.5]))
    >>> W.round(6).tolist(), s2.tolist(), status.tolist()  # the second feature keeps its prior
    ([[2.0, 5.0]], [0.5], [2])
    """
    xtx, xty, yty, rows, tasks, n_total = _unpack_stats(stats, n_tasks_total)
    k, d = xty.shape
    W0 = np.asarray(W0, dtype=np.float64)
    r2 = np.asarray(r2, dtype=np.float64)
    if W0.shape != (k, d) or r2.shape != (k,):
        raise ValueError(f"W0 must be ({k}, {d}) and r2 ({k},), got {W0.shape} and {r2.shape}")
    W = np.zeros((k, d))
    s2 = np.zeros(k)
    status = np.zeros(k, dtype=np.int8)
    for ell in range(k):
        if tasks[ell] == 0:
            W[ell], s2[ell], status[ell] = W0[ell], r2[ell], 3
            continue
        if rows[ell] > d:
            try:
                W[ell], rss = solve_from_sums(xtx[ell], xty[ell], yty[ell], f"cluster {ell}")
            except SingularMatrixError:
                status[ell] = 2
            else:
                s2[ell] = rss / (rows[ell] - d)
                if s2[ell] > 0:
                    continue
                status[ell] = 2  # an exact fit leaves no noise to estimate
        else:
            status[ell] = 1
        rhs = xty[ell] - xtx[ell] @ W0[ell]
        delta = np.linalg.lstsq(xtx[ell], rhs, rcond=None)[0]
        W[ell], s2[ell] = W0[ell] + delta, r2[ell]
    return W, s2, tasks / n_total, status
