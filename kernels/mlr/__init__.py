"""Meta-learning for mixed linear regression: the kernels of Algorithm 1, in one namespace.

Kong et al. (2020), Algorithm 1 (``docs/algorithms.md#meta-learning``; full reference in
``docs/references.md``). The code lives in a few modules; this one re-exports their
public names so the pipeline can ``from streamlsq.kernels import mlr`` and call
``mlr.<step>`` (steps numbered as in ``docs/algorithms.md``):

- :mod:`.tasks`      CSR task layout: validation, task ids, groups, sums over row ranges
- :mod:`.subspace`   step 1: subspace moment and basis
- :mod:`.linkage`    step 2: projected split estimates, distances, linkage, tiled
                     single linkage; step 3: initial estimates
- :mod:`.classify`   step 4: classification scores and labels
- :mod:`.refine`     step 5: per-cluster sufficient statistics and refinement
- :mod:`.predict`    step 6: posterior, MAP and posterior-mean prediction
- :mod:`.em`         the task-level EM baseline
- :mod:`.kselect`    the choice of k by held-out likelihood
- :mod:`.metrics`    errors against a known truth; held-out prediction error
- :mod:`.whitening`  whitening from additive moment sums
- :mod:`.reference`  Algorithm 1 on in-memory task sets: the reference wiring

Every per-task kernel works on one chunk of work (rows X, y and a local
``task_ptr`` starting at 0) and is vectorised over its tasks; every "sum" or
"stats" result is additive over chunks of work (``combine_stats``).
"""

from __future__ import annotations

from streamlsq.kernels.mlr.classify import classification_log_likelihood, classify, task_cluster_sse
from streamlsq.kernels.mlr.em import (
    em_accumulate,
    em_e_step,
    em_init_perturbed,
    em_init_random,
    em_m_step,
    project_to_simplex,
    task_stats,
)
from streamlsq.kernels.mlr.kselect import (
    choose_k,
    heldout_loglik_sums,
    mixture_log_likelihood,
    validation_tasks,
)
from streamlsq.kernels.mlr.linkage import (
    average_linkage_labels,
    cluster_residual_sums,
    hierarchical_linkage,
    initial_cluster_estimates,
    linkage_labels,
    merge_spanning_forests,
    minimum_spanning_forest,
    pairwise_distance_block,
    projected_split_estimates,
    residual_variance,
    single_linkage_labels,
    spanning_forest_labels,
    tile_spanning_forest,
)
from streamlsq.kernels.mlr.metrics import (
    label_accuracy,
    match_components,
    parameter_errors,
    task_prediction_sse,
)
from streamlsq.kernels.mlr.predict import (
    per_task_lstsq,
    posterior_log_probs,
    predict_coef,
    predict_rows,
)
from streamlsq.kernels.mlr.reference import meta_learn, select_k
from streamlsq.kernels.mlr.refine import (
    REFINEMENT_STATUS,
    cluster_sufficient_stats,
    combine_stats,
    refine_from_stats,
    refine_with_fallback,
)
from streamlsq.kernels.mlr.subspace import (
    split_mean_estimates,
    subspace_basis,
    subspace_error,
    subspace_moment_sum,
)
from streamlsq.kernels.mlr.tasks import (
    canonical_labels,
    default_heavy_rows,
    holdout_split,
    range_sums,
    select_tasks,
    split_groups,
    task_ids,
    task_sizes,
    validate_task_ptr,
)
from streamlsq.kernels.mlr.whitening import (
    moment_sums,
    unwhiten_coef,
    unwhiten_intercept,
    whiten,
    whiten_coef,
    whitening_from_moments,
)

__all__ = [
    "REFINEMENT_STATUS",
    "average_linkage_labels",
    "canonical_labels",
    "choose_k",
    "classification_log_likelihood",
    "classify",
    "cluster_residual_sums",
    "cluster_sufficient_stats",
    "combine_stats",
    "default_heavy_rows",
    "em_accumulate",
    "em_e_step",
    "em_init_perturbed",
    "em_init_random",
    "em_m_step",
    "heldout_loglik_sums",
    "hierarchical_linkage",
    "holdout_split",
    "initial_cluster_estimates",
    "label_accuracy",
    "linkage_labels",
    "match_components",
    "merge_spanning_forests",
    "meta_learn",
    "minimum_spanning_forest",
    "mixture_log_likelihood",
    "moment_sums",
    "pairwise_distance_block",
    "parameter_errors",
    "per_task_lstsq",
    "posterior_log_probs",
    "predict_coef",
    "predict_rows",
    "project_to_simplex",
    "projected_split_estimates",
    "refine_from_stats",
    "refine_with_fallback",
    "residual_variance",
    "range_sums",
    "select_k",
    "select_tasks",
    "single_linkage_labels",
    "spanning_forest_labels",
    "split_groups",
    "split_mean_estimates",
    "subspace_basis",
    "subspace_error",
    "subspace_moment_sum",
    "task_cluster_sse",
    "task_ids",
    "task_prediction_sse",
    "task_sizes",
    "task_stats",
    "tile_spanning_forest",
    "unwhiten_coef",
    "unwhiten_intercept",
    "validate_task_ptr",
    "validation_tasks",
    "whiten",
    "whiten_coef",
    "whitening_from_moments",
]
