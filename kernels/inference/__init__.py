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
- :mod:`.timeseries`: HAC (Newey–West), HAC within panels, Driscoll–Kraay and two-way
  cluster meats
- :mod:`.rolling_robust`: the HC0 covariance of each rolling window, from its own residuals
- :mod:`.prediction`: the mean and the observation intervals of predictions
- :mod:`.wald`: F tests of linear restrictions Rψ = q

The formulas and where they follow or depart from statsmodels are in
``docs/inference.md``.
"""

# ruff: noqa: F401 - the names imported for type checkers are this package's public API

import importlib
from typing import TYPE_CHECKING

#: the covariance types: statsmodels' names (the declarations of the options hold the same
#: tuple, streamlsq.options.fit.COV_TYPES; a test holds them equal)
COV_TYPES = ("nonrobust", "HC0", "HC1", "HC2", "HC3", "cluster", "HAC", "hac-panel",
             "hac-groupsum")

#: public name -> module that defines it (imported on first use)
_PUBLIC = {
    "STATISTIC_AXES": "classical", "classical_statistics": "classical",
    "recursive_bands": "classical",
    "ConstantSpan": "factor", "RegressionFactor": "factor", "constant_in_span": "factor",
    "normalized_cov_params": "factor",
    "prediction_intervals": "prediction",
    "cluster_meat": "robust", "cluster_score_sums": "robust", "combine_meats": "robust",
    "hc_meat": "robust", "LeverageOneError": "robust",
    "SingularCovarianceError": "robust", "merge_score_sums": "robust",
    "robust_statistics": "robust",
    "sandwich": "robust",
    "HAC_KERNELS": "timeseries", "hac_meat": "timeseries", "kernel_weights": "timeseries",
    "row_scores": "timeseries", "series_hac_meat": "timeseries", "two_way_terms": "timeseries",
    "merge_panel_runs": "timeseries", "panel_hac_meat": "timeseries", "panel_ids": "timeseries",
    "panel_runs": "timeseries", "repeated_panel": "timeseries",
    "time_order_break": "timeseries",
    "rolling_hc0": "rolling_robust",
    "WaldTest": "wald", "wald_test": "wald",
}

__all__ = sorted(["COV_TYPES", *_PUBLIC])


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
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
        LeverageOneError,
        SingularCovarianceError,
        cluster_meat,
        cluster_score_sums,
        combine_meats,
        hc_meat,
        merge_score_sums,
        robust_statistics,
        sandwich,
    )
    from streamlsq.kernels.inference.rolling_robust import rolling_hc0
    from streamlsq.kernels.inference.timeseries import (
        HAC_KERNELS,
        hac_meat,
        kernel_weights,
        merge_panel_runs,
        panel_hac_meat,
        panel_ids,
        panel_runs,
        repeated_panel,
        row_scores,
        series_hac_meat,
        time_order_break,
        two_way_terms,
    )
    from streamlsq.kernels.inference.wald import WaldTest, wald_test
