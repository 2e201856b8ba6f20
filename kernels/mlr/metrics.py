"""Errors of a meta-learned mixture against a known truth, and held-out prediction error
(the study of Appendix E of Kong et al., 2020; ``docs/studies.md#mlr``).

Cluster labels are arbitrary, so an estimate is compared with the truth after
matching its clusters to the true components:

- :func:`match_components`: the one-to-one assignment π minimising
  Σ_h ‖ŵ_{π(h)} − w_h‖² (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``);
- :func:`label_accuracy`: the fraction of tasks whose label maps to their true
  component, under a given map or under the best one-to-one map of the
  confusion matrix;
- :func:`parameter_errors`: max_h ‖ŵ_{π(h)} − w_h‖, max_h |ŝ_{π(h)} − s_h|,
  max_h |p̂_{π(h)} − p_h| over the matched components.

:func:`task_prediction_sse` gives the per-task squared error of per-task
coefficients on (held-out) rows: additive over chunks of work like every other sum.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from streamlsq.kernels.mlr.tasks import as_task_rows, range_sums, task_ids, task_sizes

__all__ = [
    "label_accuracy",
    "match_components",
    "parameter_errors",
    "task_prediction_sse",
]


def match_components(W_est, W_true) -> np.ndarray:
    """π (k_true,) int64: estimated cluster π[h] matched to true component h.

    Minimises Σ_h ‖ŵ_{π(h)} − w_h‖² over one-to-one maps. With fewer estimated
    clusters than components, unmatched components get −1.
    """
    W_est = np.atleast_2d(np.asarray(W_est, dtype=np.float64))
    W_true = np.atleast_2d(np.asarray(W_true, dtype=np.float64))
    if W_est.shape[1] != W_true.shape[1]:
        raise ValueError(f"W_est {W_est.shape} and W_true {W_true.shape} disagree on d")
    cost = ((W_true[:, None, :] - W_est[None, :, :]) ** 2).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    perm = np.full(W_true.shape[0], -1, dtype=np.int64)
    perm[rows] = cols
    return perm


def label_accuracy(labels, truth, mapping=None) -> float:
    """Fraction of tasks with label ℓ and true component h such that ℓ = mapping[h].

    ``mapping`` (k_true,) from :func:`match_components`; without it, the
    one-to-one map maximising the matches (the confusion matrix's best
    assignment), i.e. accuracy up to a relabelling.
    """
    lab = np.asarray(labels, dtype=np.int64)
    tru = np.asarray(truth, dtype=np.int64)
    if lab.shape != tru.shape or lab.ndim != 1:
        raise ValueError(f"labels {lab.shape} and truth {tru.shape} must be matching 1-D arrays")
    if lab.size == 0:
        raise ValueError("label_accuracy needs at least one task")
    if (lab < 0).any() or (tru < 0).any():
        raise ValueError("labels and truth must be >= 0")
    if mapping is None:
        confusion = np.zeros((int(lab.max()) + 1, int(tru.max()) + 1), dtype=np.int64)
        np.add.at(confusion, (lab, tru), 1)
        r, c = linear_sum_assignment(confusion, maximize=True)
        return float(confusion[r, c].sum() / lab.size)
    mapping = np.asarray(mapping, dtype=np.int64)
    if tru.max() >= mapping.size:
        raise ValueError(f"truth names component {int(tru.max())}, mapping has {mapping.size}")
    return float(np.mean(mapping[tru] == lab))


def parameter_errors(W_est, s_est, p_est, W_true, s_true, p_true) -> dict[str, float]:
    """Max errors of (ŵ, ŝ, p̂) against (w, s, p) after :func:`match_components`.

    Returns {"coef": max_h ‖ŵ_{π(h)} − w_h‖, "noise": max_h |ŝ_{π(h)} − s_h|,
    "weight": max_h |p̂_{π(h)} − p_h|} over matched components (s as standard
    deviations, not variances). Unmatched components (fewer clusters than
    components) count as missing: the errors are then over the matched ones.
    """
    W_est = np.atleast_2d(np.asarray(W_est, dtype=np.float64))
    W_true = np.atleast_2d(np.asarray(W_true, dtype=np.float64))
    s_est, s_true = np.asarray(s_est, float), np.asarray(s_true, float)
    p_est, p_true = np.asarray(p_est, float), np.asarray(p_true, float)
    perm = match_components(W_est, W_true)
    h = np.flatnonzero(perm >= 0)
    e = perm[h]
    return {
        "coef": float(np.linalg.norm(W_est[e] - W_true[h], axis=1).max()),
        "noise": float(np.abs(s_est[e] - s_true[h]).max()),
        "weight": float(np.abs(p_est[e] - p_true[h]).max()),
    }


def task_prediction_sse(X, y, task_ptr, coef) -> tuple[np.ndarray, np.ndarray]:
    """Per-task squared prediction error Σⱼ (yⱼ − ŵᵢᵀxⱼ)² and row count, each (n_tasks,).

    ``coef`` (n_tasks, d): one regression vector per task (e.g. from
    :func:`~streamlsq.kernels.mlr.predict.predict_coef` or
    :func:`~streamlsq.kernels.mlr.predict.per_task_lstsq`).
    Mean squared error of a task: sse / rows; of a set of tasks: sum / sum.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    C = np.asarray(coef, dtype=np.float64)
    n_tasks = ptr.size - 1
    if C.shape != (n_tasks, X.shape[1]):
        raise ValueError(f"coef must be (n_tasks={n_tasks}, d={X.shape[1]}), got {C.shape}")
    resid = y - np.einsum("nd,nd->n", X, C[task_ids(ptr)])
    return range_sums(resid * resid, ptr), task_sizes(ptr)
