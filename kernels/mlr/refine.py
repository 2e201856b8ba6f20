"""Refinement: per-cluster sufficient statistics and the refined parameters (Algorithm 1).

Each light task classified into cluster j contributes XᵀX, Xᵀy, yᵀy and its row
count to cluster j's sums (:func:`cluster_sufficient_stats`); the sums are additive
over task chunks (:func:`combine_stats`), and :func:`refine_from_stats` solves
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
    "cluster_sufficient_stats",
    "combine_stats",
    "refine_from_stats",
]


# -- refinement (step 5) -----------------------------------------------------------
_STAT_KEYS = ("xtx", "xty", "yty", "rows", "tasks")


def cluster_sufficient_stats(X, y, task_ptr, labels, k: int) -> dict[str, np.ndarray]:
    """Per-cluster sufficient statistics of one chunk of labelled tasks.

    Returns {"xtx": (k, d, d), "xty": (k, d), "yty": (k,), "rows": (k,) int64,
    "tasks": (k,) int64} over the rows of the tasks with each label. Additive
    over chunks (:func:`combine_stats`). A loop over the k clusters, not tasks.
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


def _rss(yty: float, xty: np.ndarray, xtx: np.ndarray, w: np.ndarray) -> float:
    return float(yty - 2.0 * (w @ xty) + w @ xtx @ w)


def refine_from_stats(stats: dict, n_tasks_total: int):
    """Per-cluster least squares from combined statistics: (W (k, d), s2 (k,), p (k,)).

    ŵ_ℓ solves XᵀX w = Xᵀy (Cholesky, :func:`~.linalg.spd_solve`); ŝ²_ℓ =
    RSS_ℓ/(rows_ℓ − d); p̂_ℓ = tasks_ℓ/n_tasks_total. Refuses a cluster with
    rows ≤ d or a singular XᵀX, naming the cluster.
    """
    missing = [key for key in _STAT_KEYS if key not in stats]
    if missing:
        raise ValueError(f"stats lacks {missing}; expected the keys {list(_STAT_KEYS)}")
    xtx = np.asarray(stats["xtx"], dtype=np.float64)
    xty = np.asarray(stats["xty"], dtype=np.float64)
    yty = np.asarray(stats["yty"], dtype=np.float64)
    rows = np.asarray(stats["rows"])
    tasks = np.asarray(stats["tasks"])
    k, d = xty.shape
    n_total = int(n_tasks_total)
    if n_total < int(tasks.sum()) or n_total < 1:
        raise ValueError(
            f"n_tasks_total = {n_total} is smaller than the {int(tasks.sum())} tasks in stats"
        )
    W = np.zeros((k, d))
    s2 = np.zeros(k)
    for ell in range(k):
        if rows[ell] <= d:
            raise ValueError(
                f"cluster {ell} has {int(rows[ell])} rows; refinement needs more than "
                f"d = {d} rows (rows - d residual degrees of freedom)"
            )
        try:
            W[ell] = spd_solve(xtx[ell], xty[ell])
        except SingularMatrixError as err:
            raise SingularMatrixError(
                f"cluster {ell}: X^T X of its rows is singular ({err})",
                rank=err.rank,
                size=err.size,
            ) from err
        s2[ell] = max(_rss(yty[ell], xty[ell], xtx[ell], W[ell]), 0.0) / (rows[ell] - d)
    return W, s2, tasks / n_total
