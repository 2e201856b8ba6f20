"""Algorithm 1 of Kong et al. (2020) on in-memory task sets (``docs/algorithms.md#meta-learning``).

:func:`meta_learn` chains the kernels exactly as the pipeline does over chunks of
work, but on one chunk of work per task set: it is the reference the Dask version
must reproduce (to rounding, since sums are re-associated across chunks of work), and
it documents the order of the calls. It adds no math of its own.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.mlr.classify import classification_log_likelihood, classify
from streamlsq.kernels.mlr.kselect import choose_k, heldout_loglik_sums, validation_tasks
from streamlsq.kernels.mlr.linkage import (
    average_linkage_labels,
    cluster_residual_sums,
    initial_cluster_estimates,
    pairwise_distance_block,
    projected_split_estimates,
    residual_variance,
    single_linkage_labels,
)
from streamlsq.kernels.mlr.refine import (
    cluster_sufficient_stats,
    refine_from_stats,
    refine_with_fallback,
)
from streamlsq.kernels.mlr.subspace import subspace_basis, subspace_moment_sum
from streamlsq.kernels.mlr.tasks import select_tasks

__all__ = ["meta_learn", "select_k"]


def meta_learn(
    light1,
    heavy,
    light2,
    k: int,
    *,
    n_splits: int = 1,
    method: str = "single",
    threshold: float | None = None,
) -> dict[str, np.ndarray]:
    """Meta-learn (W, s², p) from three task sets, each a tuple (X, y, task_ptr).

    1. subspace: U = top-k eigenvectors of M̂ from ``light1`` (D_L1);
    2. clustering of ``heavy`` (D_H): H from 2·n_splits groups per task, then
       ``method`` ("single" or "average") linkage cut at k clusters, or at
       ``threshold`` when given (Δ²/2 for a known separation Δ);
    3. initial ŵ_ℓ, p̂_ℓ, r̂²_ℓ from the heavy clusters;
    4. classification of ``light2`` (D_L2) tasks;
    5. refinement: per-cluster least squares on D_L2's classified rows.

    Returns {"basis" (d, k), "eigenvalues" (k,), "heavy_cluster" (n_H,),
    "initial_coef" (K, d), "initial_weight" (K,), "initial_r2" (K,),
    "light_cluster" (n_L2,), "coef" (K, d), "noise_var" (K,), "weight" (K,)};
    K = k unless a threshold cut finds another number of clusters.
    """
    if method not in ("single", "average"):
        raise ValueError(f"method must be 'single' or 'average', got {method!r}")
    M_sum, n_tasks = subspace_moment_sum(*light1)
    if n_tasks == 0:
        raise ValueError("light1 has no tasks")
    U, eigenvalues = subspace_basis(M_sum / n_tasks, k, return_eigenvalues=True)

    a, c = projected_split_estimates(*heavy, U, n_splits)
    H = pairwise_distance_block(a, c, a, c)
    cut = {"n_clusters": k} if threshold is None else {"threshold": threshold}
    link = single_linkage_labels if method == "single" else average_linkage_labels
    heavy_cluster = link(H, **cut)
    n_clusters = int(heavy_cluster.max()) + 1
    W0, p0 = initial_cluster_estimates(a, c, heavy_cluster, U, n_clusters)
    r2 = residual_variance(*cluster_residual_sums(*heavy, heavy_cluster, W0))

    light_cluster = classify(classification_log_likelihood(*light2, W0, r2))
    n_light2 = np.asarray(light2[2]).size - 1
    stats = cluster_sufficient_stats(*light2, light_cluster, n_clusters)
    W, s2, p = refine_from_stats(stats, n_light2)
    return {
        "basis": U,
        "eigenvalues": eigenvalues,
        "heavy_cluster": heavy_cluster,
        "initial_coef": W0,
        "initial_weight": p0,
        "initial_r2": r2,
        "light_cluster": light_cluster,
        "coef": W,
        "noise_var": s2,
        "weight": p,
    }


def select_k(
    light1,
    heavy,
    light2,
    k_max: int,
    *,
    n_splits: int = 1,
    method: str = "average",
    every: int = 4,
) -> dict:
    """The choice of k of ``metalearn(k="auto")`` on in-memory task sets (``.kselect``).

    Every ``every``-th light2 task is held out; for k = 1..k_max: the heavy
    tasks' projections on the top-k eigenvectors are clustered into k clusters
    (``method`` linkage), initial estimates and r̂² come from them, the other
    light2 tasks are classified and refined (:func:`~.refine.refine_with_fallback`),
    and the held-out tasks are scored by the mixture's log-likelihood. Returns
    :func:`~.kselect.choose_k`'s dict (``k``, ``best``, ``mean``, ``se``).
    """
    if method not in ("single", "average"):
        raise ValueError(f"method must be 'single' or 'average', got {method!r}")
    M_sum, n_tasks = subspace_moment_sum(*light1)
    if n_tasks == 0:
        raise ValueError("light1 has no tasks")
    d = light1[0].shape[1]
    U_all = subspace_basis(M_sum / n_tasks, d)
    a_all, c_all = projected_split_estimates(*heavy, U_all[:, :k_max], n_splits)
    val = validation_tasks(np.asarray(light2[2]).size - 1, every)
    fit_set, val_set = select_tasks(*light2, ~val), select_tasks(*light2, val)
    link = single_linkage_labels if method == "single" else average_linkage_labels
    models = []
    for k in range(1, k_max + 1):
        a, c, U = a_all[:, :, :k], c_all[:, :, :k], U_all[:, :k]
        labels = link(pairwise_distance_block(a, c, a, c), n_clusters=k)
        W0, _ = initial_cluster_estimates(a, c, labels, U, k)
        r2 = residual_variance(*cluster_residual_sums(*heavy, labels, W0))
        lab2 = classify(classification_log_likelihood(*fit_set, W0, r2))
        stats = cluster_sufficient_stats(*fit_set, lab2, k)
        W, s2, p, _ = refine_with_fallback(stats, int((~val).sum()), W0, r2)
        models.append((W, s2, p))
    return choose_k(heldout_loglik_sums(*val_set, models), list(range(1, k_max + 1)))
