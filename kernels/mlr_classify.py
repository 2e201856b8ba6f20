"""Classification, refinement and prediction (ALGORITHMS.md §6.4–§6.6; Algorithm 1,
steps 4–6 of papers/meta-learning-mixed-linear-regression.txt).

Everything is vectorised over the tasks of a chunk: per-task, per-cluster
residual sums are one matrix product ``X @ Wᵀ`` followed by a segment sum.

Classification (§6.4) of a task with t rows, given initial ŵ_ℓ and r̂²_ℓ:

    ℓᵢ = argmax_ℓ [ −Σⱼ(yⱼ − ŵ_ℓᵀxⱼ)²/(2r̂²_ℓ) − t·log r̂_ℓ ]

(the Gaussian log-likelihood; the authors' code divides by 2r̂⁴ by mistake).

Refinement (§6.5): least squares per cluster on all rows of its tasks, from the
additive sufficient statistics XᵀX, Xᵀy, yᵀy, rows, tasks:

    ŵ_ℓ = (XᵀX)⁻¹Xᵀy ,  ŝ²_ℓ = RSS_ℓ/(rows_ℓ − d),  p̂_ℓ = tasks_ℓ/n_L2,
    RSS_ℓ = yᵀy − 2ŵ_ℓᵀXᵀy + ŵ_ℓᵀXᵀXŵ_ℓ

(RSS from sums loses about log10(yᵀy/RSS) digits; harmless when the noise is
not tiny compared with the signal).

Prediction (§6.6) for a new task with τ rows:

    log P(ℓ | D) = log p̂_ℓ − τ log ŝ_ℓ − Σⱼ(yⱼ − ŵ_ℓᵀxⱼ)²/(2ŝ²_ℓ) − log Z

normalised with log-sum-exp. MAP: ŵ of the argmax; Bayes: Σ_ℓ P(ℓ|D) ŵ_ℓ.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .linalg import SingularMatrixError, spd_solve, symmetrize
from .mlr_cluster import _check_coef
from .mlr_tasks import (
    as_task_rows,
    check_labels,
    padded_task_stacks,
    segment_sum,
    task_ids,
    task_sizes,
)

__all__ = [
    "classification_log_likelihood",
    "classify",
    "cluster_sufficient_stats",
    "combine_stats",
    "per_task_lstsq",
    "posterior_log_probs",
    "predict_coef",
    "refine_from_stats",
    "task_cluster_sse",
]


def _positive_vector(v, k: int, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (k,):
        raise ValueError(f"{name} must have one value per cluster ({k}), got shape {v.shape}")
    bad = ~(np.isfinite(v) & (v > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {v[i]!r} must be a finite positive number")
    return v


def _check_weights(p, k: int) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (k,):
        raise ValueError(f"p must have one weight per cluster ({k}), got shape {p.shape}")
    bad = ~(np.isfinite(p) & (p >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"p[{i}] = {p[i]!r} must be a finite weight >= 0")
    if abs(p.sum() - 1.0) > 1e-8 * max(1, k):
        raise ValueError(f"p must sum to 1, got {p.sum()!r}")
    return p


def task_cluster_sse(X, y, task_ptr, W):
    """Per-task residual sums under every cluster: (SSE (n_tasks, k), t (n_tasks,)).

    SSE[i, ℓ] = Σ_{j ∈ task i} (yⱼ − ŵ_ℓᵀxⱼ)², computed directly from the rows
    (no cancellation), one product X @ Wᵀ and a segment sum.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    W = _check_coef(W, X.shape[1])
    R = y[:, None] - X @ W.T
    return segment_sum(R * R, ptr), task_sizes(ptr)


def classification_log_likelihood(X, y, task_ptr, W, r2) -> np.ndarray:
    """(n_tasks, k): −SSE_iℓ/(2r̂²_ℓ) − tᵢ·log r̂_ℓ, the §6.4 classification score.

    W (k, d) initial cluster estimates, r2 (k,) their mean squared residuals
    r̂²_ℓ (noise plus estimation error). Constants common to all clusters are
    dropped; :func:`classify` takes the argmax.
    """
    sse, t = task_cluster_sse(X, y, task_ptr, W)
    r2 = _positive_vector(r2, sse.shape[1], "r2")
    return -sse / (2.0 * r2) - 0.5 * t[:, None] * np.log(r2)


def classify(log_likelihood) -> np.ndarray:
    """Labels ℓᵢ = argmax_ℓ of a (n_tasks, k) score (ties: the lowest ℓ); int64."""
    L = np.asarray(log_likelihood)
    if L.ndim != 2 or L.shape[1] == 0:
        raise ValueError(f"log_likelihood must be (n_tasks, k) with k >= 1, got {L.shape}")
    return np.argmax(L, axis=1).astype(np.int64)


# -- refinement (§6.5) -------------------------------------------------------------
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


# -- prediction (§6.6) ---------------------------------------------------------------
def posterior_log_probs(X, y, task_ptr, W, s2, p) -> np.ndarray:
    """log P(ℓ | Dᵢ) (n_tasks, k) for new tasks, normalised with log-sum-exp.

    log p̂_ℓ − (τᵢ/2) log ŝ²_ℓ − SSE_iℓ/(2ŝ²_ℓ), minus its log-sum-exp over ℓ.
    A task with no rows gets the prior log p̂. A cluster with p̂_ℓ = 0 gets −inf.
    """
    sse, t = task_cluster_sse(X, y, task_ptr, W)
    k = sse.shape[1]
    s2 = _positive_vector(s2, k, "s2")
    p = _check_weights(p, k)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    score = log_p - 0.5 * t[:, None] * np.log(s2) - sse / (2.0 * s2)
    return score - logsumexp(score, axis=1, keepdims=True)


def predict_coef(posterior, W, estimator: str = "bayes") -> np.ndarray:
    """Per-task regression vectors (n_tasks, d) from posterior probabilities (n_tasks, k).

    ``"bayes"``: Σ_ℓ P(ℓ|D) ŵ_ℓ (the posterior mean, optimal for squared loss);
    ``"map"``: ŵ of the most probable cluster (ties: the lowest ℓ). ``posterior``
    holds probabilities (``np.exp`` of :func:`posterior_log_probs`).
    """
    P = np.asarray(posterior, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or P.ndim != 2 or P.shape[1] != W.shape[0]:
        raise ValueError(f"posterior (n_tasks, k) and W (k, d) disagree: {P.shape}, {W.shape}")
    if not (np.isfinite(P).all() and (P >= 0).all()):
        raise ValueError("posterior must hold finite probabilities >= 0")
    sums = P.sum(axis=1)
    if P.shape[0] and np.abs(sums - 1.0).max() > 1e-6:
        i = int(np.argmax(np.abs(sums - 1.0)))
        raise ValueError(f"posterior row {i} sums to {sums[i]!r}, not 1")
    if estimator == "bayes":
        return P @ W
    if estimator == "map":
        return W[np.argmax(P, axis=1)]
    raise ValueError(f"estimator must be 'bayes' or 'map', got {estimator!r}")


def per_task_lstsq(X, y, task_ptr) -> np.ndarray:
    """Least squares on each task's own rows, batched: (n_tasks, d).

    The minimum-norm solution (pseudo-inverse by SVD, no ridge), exactly what
    ``numpy.linalg.lstsq`` returns per task, including its cutoff for small
    singular values (rcond = eps·max(tᵢ, d)). Tasks with fewer rows than d get
    the minimum-norm interpolant; tasks with no rows get 0. Tasks are batched
    in size buckets padded with zero rows, which change no solution.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    n_tasks, d = ptr.size - 1, X.shape[1]
    coef = np.zeros((n_tasks, d))
    eps = np.finfo(np.float64).eps
    for idx, Xs, ys, t in padded_task_stacks(X, y, ptr):
        if Xs.shape[1] == 0:
            continue
        rcond = eps * np.maximum(t, d).astype(np.float64)
        coef[idx] = (np.linalg.pinv(Xs, rcond=rcond) @ ys[:, :, None])[:, :, 0]
    return coef
