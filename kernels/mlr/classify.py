"""Classification, refinement and prediction (Algorithm 1, steps 4–6 of Kong et al., 2020;
``docs/algorithms.md#classification`` to ``#prediction``).

Everything is vectorised over the tasks of a chunk of work: per-task, per-cluster
residual sums are one matrix product ``X @ Wᵀ`` followed by a sum per task
(:func:`~streamlsq.kernels.mlr.tasks.range_sums`).

Classification (step 4) of a task with t rows, given initial ŵ_ℓ and r̂²_ℓ:

    ℓᵢ = argmax_ℓ [ −Σⱼ(yⱼ − ŵ_ℓᵀxⱼ)²/(2r̂²_ℓ) − t·log r̂_ℓ ]

(the Gaussian log-likelihood; the authors' code divides by 2r̂⁴ by mistake).

Refinement (step 5): least squares per cluster on all rows of its tasks, from the
additive sufficient statistics XᵀX, Xᵀy, yᵀy, rows, tasks:

    ŵ_ℓ = (XᵀX)⁻¹Xᵀy ,  ŝ²_ℓ = RSS_ℓ/(rows_ℓ − d),  p̂_ℓ = tasks_ℓ/n_L2,
    RSS_ℓ = yᵀy − 2ŵ_ℓᵀXᵀy + ŵ_ℓᵀXᵀXŵ_ℓ

(RSS from sums loses about log10(yᵀy/RSS) digits; harmless when the noise is
not tiny compared with the signal).

Prediction (step 6) for a new task with τ rows:

    log P(ℓ | D) = log p̂_ℓ − τ log ŝ_ℓ − Σⱼ(yⱼ − ŵ_ℓᵀxⱼ)²/(2ŝ²_ℓ) − log Z

normalised with log-sum-exp. MAP: ŵ of the argmax; Bayes: Σ_ℓ P(ℓ|D) ŵ_ℓ.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.mlr.linkage import _check_coef
from streamlsq.kernels.mlr.tasks import (
    as_task_rows,
    range_sums,
    task_sizes,
)

__all__ = [
    "classification_log_likelihood",
    "classify",
    "task_cluster_sse",
]


def positive_vector(v, k: int, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (k,):
        raise ValueError(f"{name} must have one value per cluster ({k}), got shape {v.shape}")
    bad = ~(np.isfinite(v) & (v > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {float(v[i])!r} must be a finite positive number")
    return v


def check_weights(p, k: int) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (k,):
        raise ValueError(f"p must have one weight per cluster ({k}), got shape {p.shape}")
    bad = ~(np.isfinite(p) & (p >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"p[{i}] = {float(p[i])!r} must be a finite weight >= 0")
    if abs(p.sum() - 1.0) > 1e-8 * max(1, k):
        raise ValueError(f"p must sum to 1, got {float(p.sum())!r}")
    return p


def task_cluster_sse(X, y, task_ptr, W):
    """Per-task residual sums under every cluster: (SSE (n_tasks, k), t (n_tasks,)).

    SSE[i, ℓ] = Σ_{j ∈ task i} (yⱼ − ŵ_ℓᵀxⱼ)², computed directly from the rows
    (no cancellation), one product X @ Wᵀ and a sum per task.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    W = _check_coef(W, X.shape[1])
    R = y[:, None] - X @ W.T
    return range_sums(R * R, ptr), task_sizes(ptr)


def classification_log_likelihood(X, y, task_ptr, W, r2) -> np.ndarray:
    """(n_tasks, k): −SSE_iℓ/(2r̂²_ℓ) − tᵢ·log r̂_ℓ, the classification score (step 4).

    W (k, d) initial cluster estimates, r2 (k,) their mean squared residuals
    r̂²_ℓ (noise plus estimation error). Constants common to all clusters are
    dropped; :func:`classify` takes the argmax.
    """
    sse, t = task_cluster_sse(X, y, task_ptr, W)
    r2 = positive_vector(r2, sse.shape[1], "r2")
    return -sse / (2.0 * r2) - 0.5 * t[:, None] * np.log(r2)


def classify(log_likelihood) -> np.ndarray:
    """Labels ℓᵢ = argmax_ℓ of a (n_tasks, k) score (ties: the lowest ℓ); int64."""
    L = np.asarray(log_likelihood)
    if L.ndim != 2 or L.shape[1] == 0:
        raise ValueError(f"log_likelihood must be (n_tasks, k) with k >= 1, got {L.shape}")
    return np.argmax(L, axis=1).astype(np.int64)


