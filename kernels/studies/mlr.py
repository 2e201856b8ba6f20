"""Trials of the meta-learning study (Appendix E of Kong et al., 2020;
``docs/studies.md#mlr``), one grid point and replicate each.

Each trial draws its task sets with :func:`~.synthetic_mlr.simulate_tasks` from
seed words that name the trial (so a trial's numbers never depend on which
batch or worker runs it) and runs the steps of Algorithm 1 it measures, in the
order and with the kernels of :func:`~streamlsq.kernels.mlr.reference.meta_learn` (which
:func:`classification_trial` calls whole). Pure NumPy; no math beyond the
kernels it wires.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.mlr.linkage import (
    pairwise_distance_block,
    projected_split_estimates,
    single_linkage_labels,
)
from streamlsq.kernels.mlr.metrics import label_accuracy, match_components, parameter_errors
from streamlsq.kernels.mlr.reference import meta_learn
from streamlsq.kernels.mlr.subspace import subspace_basis, subspace_error, subspace_moment_sum
from streamlsq.kernels.synthetic.mlr import simulate_tasks

__all__ = ["classification_trial", "clustering_trial", "subspace_trial"]

# role tags of the seed words: the three task sets of one replicate
_LIGHT1, _HEAVY, _LIGHT2 = 1, 2, 3


def _basis(words, n_light, t_light, W, s, p):
    X, y, ptr, _ = simulate_tasks([*words, _LIGHT1], 0, n_light, t_light, W, s, p)
    M_sum, n = subspace_moment_sum(X, y, ptr)
    return subspace_basis(M_sum / n, W.shape[0])


def subspace_trial(words, n_light: int, t_light: int, W, s, p) -> float:
    """max_h ‖(I − UUᵀ)w_h‖ of the basis U from ``n_light`` tasks of ``t_light`` rows (step 1)."""
    return subspace_error(_basis(words, n_light, t_light, W, s, p), W)


def clustering_trial(words, n_heavy: int, t_heavy: int, W, s, p, *, n_light: int,
                     t_light: int, n_splits: int = 1) -> float:
    """Accuracy (up to relabelling) of single linkage on ``n_heavy`` tasks of ``t_heavy`` rows.

    U from ``n_light`` tasks of ``t_light`` rows (step 1), then step 2: projected
    split estimates, H, single linkage cut at k clusters.
    """
    U = _basis(words, n_light, t_light, W, s, p)
    X, y, ptr, comp = simulate_tasks([*words, _HEAVY], 0, n_heavy, t_heavy, W, s, p)
    a, c = projected_split_estimates(X, y, ptr, U, n_splits)
    labels = single_linkage_labels(pairwise_distance_block(a, c, a, c), n_clusters=W.shape[0])
    return label_accuracy(labels, comp)


def classification_trial(words, n_light2: int, t_light2: int, W, s, p, *, n_light: int,
                         t_light: int, n_heavy: int, t_heavy: int) -> dict[str, float]:
    """Algorithm 1 whole (:func:`meta_learn`) with ``n_light2`` tasks of ``t_light2`` rows in D_L2.

    Returns {"heavy_accuracy", "classification_accuracy" (D_L2 labels against
    the truth under the matching of the initial estimates to the components),
    "coef_error", "noise_error", "weight_error" (:func:`parameter_errors` of the
    refined estimates)}.
    """
    sets = [simulate_tasks([*words, role], 0, n, t, W, s, p)
            for role, n, t in ((_LIGHT1, n_light, t_light), (_HEAVY, n_heavy, t_heavy),
                               (_LIGHT2, n_light2, t_light2))]
    res = meta_learn(*(x[:3] for x in sets), W.shape[0])
    mapping = match_components(res["initial_coef"], W)
    errors = parameter_errors(res["coef"], np.sqrt(res["noise_var"]), res["weight"], W, s, p)
    return {
        "heavy_accuracy": label_accuracy(res["heavy_cluster"], sets[1][3]),
        "classification_accuracy": label_accuracy(res["light_cluster"], sets[2][3], mapping),
        "coef_error": errors["coef"],
        "noise_error": errors["noise"],
        "weight_error": errors["weight"],
    }
