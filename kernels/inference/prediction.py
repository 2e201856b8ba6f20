"""Intervals of predictions from a least-squares fit (statsmodels'
``get_prediction().summary_frame()``).

For a new row x with the coefficients ψ, their covariance V (per target) and the scale
σ̂²:

    mean = xᵀψ,   mean_se = √(xᵀVx),   obs_se = √(mean_se² + σ̂²)
    mean_ci = mean ∓ q·mean_se,   obs_ci = mean ∓ q·obs_se

with q the (1 − α/2) quantile of Student's t with df_resid degrees of freedom, or of the
normal distribution for a robust covariance (``use_t`` False), and a new row of weight 1.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.inference.classical import critical_value

__all__ = ["PREDICTION_COLUMNS", "prediction_intervals"]

#: the columns of statsmodels' summary frame beside the mean
PREDICTION_COLUMNS = ("mean_se", "mean_ci_lower", "mean_ci_upper", "obs_ci_lower",
                      "obs_ci_upper")


def prediction_intervals(X, coef, cov_params, scale, df_resid, alpha: float = 0.05,
                         use_t: bool = True) -> dict:
    """``mean`` and the :data:`PREDICTION_COLUMNS` for the rows ``X`` (n, k), each
    (n, K): ``coef`` (k, K), ``cov_params`` (k, k, K), ``scale`` (K,).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import prediction_intervals
    >>> out = prediction_intervals(np.array([[1.0, 2.0]]), np.array([[1.0], [0.5]]),
    ...                            np.eye(2)[:, :, None] * 0.01, np.array([1.0]), 30)
    >>> float(out["mean"][0, 0]), round(float(out["mean_se"][0, 0]), 6)
    (2.0, 0.223607)
    """
    X = np.asarray(X, np.float64)
    mean = X @ coef
    K = mean.shape[1]
    variance = np.empty_like(mean)
    for t in range(K):
        variance[:, t] = np.einsum("ij,jk,ik->i", X, cov_params[:, :, t], X)
    mean_se = np.sqrt(np.maximum(variance, 0.0))
    obs_se = np.sqrt(mean_se**2 + np.asarray(scale)[None, :])
    q = critical_value(alpha, df_resid, use_t)
    return {"mean": mean, "mean_se": mean_se,
            "mean_ci_lower": mean - q * mean_se, "mean_ci_upper": mean + q * mean_se,
            "obs_ci_lower": mean - q * obs_se, "obs_ci_upper": mean + q * obs_se}
