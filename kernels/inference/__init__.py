"""Statistics of least-squares fits, from the factor a recursion keeps (pure NumPy/SciPy).

A least-squares recursion ends with the triangular factor R of the weighted rows
(RᵀR = XᵀWX), z = Rψ and the residual sums of squares, plus a few moments of the rows
(:mod:`streamlsq.kernels.recursions.moments`): :class:`RegressionFactor`. Everything
statsmodels' ``RegressionResults`` reports follows from it without another pass over
the rows; the robust covariances need one more pass, as per-chunk sums that add up.

- :mod:`.factor`: :class:`RegressionFactor`, the constant in the columns' span, the
  covariance of the coefficients from triangular solves
- :mod:`.classical`: standard errors, t tests, intervals, R², F, log-likelihood, AIC,
  BIC (:func:`classical_statistics`) and the recursive confidence bands
- :mod:`.robust`: HC0–HC3 and cluster-robust sandwich covariances from chunked sums
- :mod:`.prediction`: the mean and the observation intervals of predictions
- :mod:`.wald`: F tests of linear restrictions Rψ = q

The formulas and where they follow or depart from statsmodels are in
``docs/inference.md``.
"""

from streamlsq.kernels.inference.classical import (
    STATISTIC_AXES,
    classical_statistics,
    recursive_bands,
)
from streamlsq.kernels.inference.factor import (
    ConstantSpan,
    RegressionFactor,
    constant_in_span,
    normalized_cov_params,
)
from streamlsq.kernels.inference.prediction import prediction_intervals
from streamlsq.kernels.inference.robust import (
    COV_TYPES,
    cluster_meat,
    cluster_score_sums,
    combine_meats,
    hc_meat,
    merge_score_sums,
    robust_statistics,
    sandwich,
)
from streamlsq.kernels.inference.wald import WaldTest, wald_test

__all__ = [
    "COV_TYPES",
    "ConstantSpan",
    "RegressionFactor",
    "STATISTIC_AXES",
    "WaldTest",
    "classical_statistics",
    "cluster_meat",
    "cluster_score_sums",
    "combine_meats",
    "constant_in_span",
    "hc_meat",
    "merge_score_sums",
    "normalized_cov_params",
    "prediction_intervals",
    "recursive_bands",
    "robust_statistics",
    "sandwich",
    "wald_test",
]
