"""Shared statistics of the paper studies: describe many runs (sequences, streams, clouds).

Pure NumPy; used by :mod:`~streamlsq.kernels.studies.irma`,
:mod:`~streamlsq.kernels.studies.lms` and :mod:`~streamlsq.kernels.studies.bfgs`.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import check_finite

__all__ = ["distribution_summary"]


def distribution_summary(values, axis: int = 0) -> dict[str, np.ndarray]:
    """Statistics of ``values`` over ``axis`` (the runs: sequences, streams, clouds), in float64.

    ``mean``, ``std`` and ``var`` (ddof = 0: a description of the sample, as the
    paper's table), ``upper_sd`` and ``lower_sd`` (root mean square of the
    deviations above / below the mean, over all values: the "upper and lower
    standard deviation" of the paper's Figure 1), ``median``, ``p05``,
    ``p95``, ``max`` and ``max_share`` (the largest value's share of the sum: how
    far one run dominates the mean; meaningful for non-negative values such as
    errors and losses, 0 when the sum is not positive).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.shape[axis] < 1:
        raise ValueError("need at least one value along the summary axis")
    check_finite("values", v)
    mean = v.mean(axis=axis)
    dev = v - np.expand_dims(mean, axis)
    n = v.shape[axis]
    total = v.sum(axis=axis)
    vmax = v.max(axis=axis)
    return {
        "mean": mean,
        "std": v.std(axis=axis),
        "var": v.var(axis=axis),
        "upper_sd": np.sqrt((np.where(dev > 0, dev, 0.0) ** 2).sum(axis=axis) / n),
        "lower_sd": np.sqrt((np.where(dev < 0, dev, 0.0) ** 2).sum(axis=axis) / n),
        "median": np.median(v, axis=axis),
        "p05": np.percentile(v, 5, axis=axis),
        "p95": np.percentile(v, 95, axis=axis),
        "max": vmax,
        "max_share": np.divide(vmax, total, out=np.zeros_like(total), where=total > 0),
    }
