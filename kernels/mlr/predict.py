"""Prediction for a new task from the learned mixture: posterior, MAP and posterior mean.

The posterior over the k components of a task with rows (X, y) is
P(j | X, y) ∝ p_j·N(y; Xw_j, s_j²I) (:func:`posterior_log_probs`); the MAP estimate
takes the most likely w_j, the posterior mean Σ_j P(j | X, y)·w_j
(:func:`predict_coef`); :func:`per_task_lstsq` is the baseline that uses the task's
own rows only (Kong et al., 2020; ``docs/algorithms.md``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from streamlsq.kernels.mlr.classify import check_weights, positive_vector, task_cluster_sse
from streamlsq.kernels.mlr.tasks import (
    as_task_rows,
    padded_task_stacks,
)

__all__ = [
    "per_task_lstsq",
    "predict_rows",
    "posterior_log_probs",
    "predict_coef",
]


# -- prediction (step 6) -------------------------------------------------------------
def component_log_scores(X, y, task_ptr, W, s2, p) -> tuple[np.ndarray, np.ndarray]:
    """log p̂_ℓ − (τᵢ/2) log ŝ²_ℓ − SSE_iℓ/(2ŝ²_ℓ) (n_tasks, k) and the rows τᵢ (n_tasks,).

    The joint log-density log p̂_ℓ + log N(yᵢ; Xᵢŵ_ℓ, ŝ²_ℓ I) of each task and
    component up to −(τᵢ/2) log 2π, which is the same for every component. A cluster with
    p̂_ℓ = 0 gets −inf.
    """
    sse, t = task_cluster_sse(X, y, task_ptr, W)
    k = sse.shape[1]
    s2 = positive_vector(s2, k, "s2")
    p = check_weights(p, k)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    return log_p - 0.5 * t[:, None] * np.log(s2) - sse / (2.0 * s2), t


def posterior_log_probs(X, y, task_ptr, W, s2, p) -> np.ndarray:
    """log P(ℓ | Dᵢ) (n_tasks, k) for new tasks: :func:`component_log_scores` minus their
    log-sum-exp over ℓ. A task with no rows gets the prior log p̂."""
    score, _ = component_log_scores(X, y, task_ptr, W, s2, p)
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


def predict_rows(X, task_ptr, coef) -> np.ndarray:
    """ŷⱼ = xⱼᵀ ŵ_{task(j)} for rows of consecutive tasks: (n_rows,).

    ``task_ptr`` (n_tasks + 1,) local offsets from 0 over the rows of X (the
    first and last task may be cut by the row range), ``coef`` (n_tasks, d) the
    tasks' regression vectors in the same order.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 2.0], [1.0, 0.0], [0.0, 1.0]])
    >>> predict_rows(X, np.array([0, 2, 3]), np.array([[1.0, 1.0], [0.0, 5.0]])).tolist()
    [3.0, 1.0, 5.0]
    """
    X = np.asarray(X, dtype=np.float64)
    ptr = np.asarray(task_ptr, dtype=np.int64)
    coef = np.asarray(coef, dtype=np.float64)
    if X.ndim != 2 or ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != X.shape[0]:
        raise ValueError(f"task_ptr must run from 0 to the {X.shape[0]} rows of X")
    if coef.shape != (ptr.size - 1, X.shape[1]):
        raise ValueError(f"coef must be ({ptr.size - 1}, {X.shape[1]}), got {coef.shape}")
    ids = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    return np.einsum("nd,nd->n", X, coef[ids])
