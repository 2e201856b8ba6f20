"""The classical statistics of a least-squares fit, named as statsmodels'
``RegressionResults`` names them, from its factor alone (no pass over the rows).

With k coefficients, n = nobs rows of positive weight, k_c = 1 when a constant lies in the
span of the columns (:func:`~.factor.constant_in_span`), per target:

    df_model = k − k_c,  df_resid = n − k,  σ̂² = scale = SSR / df_resid
    cov_params = σ̂²·(XᵀWX)⁻¹,  bse = √diag(cov_params),  t = ψ / bse
    P>|t| = 2·t_{df_resid}.sf(|t|),  interval ψ ± t_{df_resid, 1−α/2}·bse
    ESS = ‖z − u(uᵀz)/uᵀu‖² (centred, k_c = 1) or ‖z‖² (uncentred),  TSS = ESS + SSR
    R² = ESS / TSS,  R²_adj = 1 − (n − k_c)/df_resid · (1 − R²)
    F = (ESS / df_model) / σ̂²,  P(F) = F_{df_model, df_resid}.sf(F)
    llf = −n/2·(log 2π + log(SSR/n) + 1) + ½ Σ log w
    AIC = −2 llf + 2(df_model + k_c),  BIC = −2 llf + log(n)(df_model + k_c)

(the definitions of statsmodels' ``RegressionResults``, their weighted forms those of its
``WLS``; ``docs/inference.md``.) The recursive confidence bands of a trajectory are those
of statsmodels' ``RecursiveLS``: ψ_t ± z_{1−α/2}·√(σ̂²·diag((X_tᵀWX_t)⁻¹)), the rows up
to step t with the final scale σ̂².
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.inference._distributions import (
    fisher_f_sf,
    normal_ppf,
    normal_sf,
    student_t_ppf,
    student_t_sf,
)
from streamlsq.kernels.inference.factor import (
    RegressionFactor,
    constant_in_span,
    explained_sum_of_squares,
    normalized_cov_params,
)

__all__ = ["STATISTIC_AXES", "classical_statistics", "critical_value", "recursive_bands",
           "two_sided_pvalues"]

#: every statistic and its axes: ``coef`` (a coefficient), ``coef2`` (a second one, of a
#: covariance), ``target``; a statistic without axes is one number for the fit
STATISTIC_AXES = {
    "nobs": ("target",), "df_model": ("target",), "df_resid": ("target",),
    "ssr": ("target",), "ess": ("target",), "scale": ("target",),
    "rsquared": ("target",), "rsquared_adj": ("target",),
    "fvalue": ("target",), "f_pvalue": ("target",),
    "llf": ("target",), "aic": ("target",), "bic": ("target",),
    "bse": ("coef", "target"), "tvalues": ("coef", "target"), "pvalues": ("coef", "target"),
    "conf_int_lower": ("coef", "target"), "conf_int_upper": ("coef", "target"),
    "cov_params": ("coef", "coef2", "target"),
}


def critical_value(alpha: float, df, use_t: bool):
    """The (1 − α/2) quantile of Student's t with ``df`` degrees of freedom, or of the
    normal distribution (``use_t`` False: statsmodels' robust covariances)."""
    q = 1.0 - alpha / 2.0
    return student_t_ppf(q, df) if use_t else normal_ppf(q)


def two_sided_pvalues(tvalues, df, use_t: bool):
    """P(|T| > |t|) for Student's t with ``df`` degrees of freedom, or the normal."""
    a = np.abs(tvalues)
    return 2.0 * (student_t_sf(a, df) if use_t else normal_sf(a))


def classical_statistics(fac: RegressionFactor, alpha: float = 0.05,
                         constant: int | None = None) -> dict:
    """The statistics of :data:`STATISTIC_AXES` (arrays over coefficients and targets)
    for the nonrobust covariance, with ``k_constant``, ``const_idx`` (−1 for none or an
    implicit constant), ``use_t`` (True) and ``alpha``. ``constant``: the index of the
    intercept column when the caller knows it (else it is found: module docstring of
    :mod:`.factor`). A statistic that is not defined (no residual degree of freedom, a
    constant target, no slope) is NaN or ±inf, as in statsmodels; the caller decides
    what to keep.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import RegressionFactor, classical_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(50), rng.standard_normal(50)])
    >>> y = X @ [1.0, 2.0] + rng.standard_normal(50)
    >>> st = classical_statistics(RegressionFactor.from_rows(X, y), constant=0)
    >>> int(st["df_resid"][0]), round(float(st["rsquared"][0]), 4)
    (48, 0.745)
    """
    k, K = fac.coef.shape
    span = constant_in_span(fac, constant)
    nobs = np.float64(fac.nobs)  # NumPy numbers: undefined statistics become NaN or inf
    df_model = np.float64(k - span.k_constant)
    df_resid = nobs - k
    ssr = np.asarray(fac.ssr, np.float64)
    ess = explained_sum_of_squares(fac.z, span.direction)
    tss = ess + ssr
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = ssr / df_resid
        normalized = normalized_cov_params(fac.R)
        cov = normalized[:, :, None] * scale[None, None, :]
        bse = np.sqrt(np.diag(normalized)[:, None] * scale[None, :])
        tvalues = fac.coef / bse
        q = critical_value(alpha, df_resid, True)
        pvalues = two_sided_pvalues(tvalues, df_resid, True)
        rsquared = ess / tss
        fvalue = (ess / df_model) / scale
        llf = (-nobs / 2.0 * (np.log(2.0 * np.pi) + np.log(ssr / nobs) + 1.0)
               + 0.5 * fac.sum_log_weights)
        rsquared_adj = 1.0 - (nobs - span.k_constant) / df_resid * (1.0 - rsquared)
        f_pvalue = fisher_f_sf(fvalue, df_model, df_resid)
        bic_penalty = np.log(nobs)
    n_params = df_model + span.k_constant
    ones = np.ones(K)
    return {
        "nobs": nobs * ones, "df_model": df_model * ones, "df_resid": df_resid * ones,
        "ssr": ssr, "ess": ess, "scale": scale, "cov_params": cov, "bse": bse,
        "tvalues": tvalues, "pvalues": pvalues,
        "conf_int_lower": fac.coef - q * bse, "conf_int_upper": fac.coef + q * bse,
        "rsquared": rsquared,
        "rsquared_adj": rsquared_adj, "fvalue": fvalue, "f_pvalue": f_pvalue,
        "llf": llf, "aic": -2.0 * llf + 2.0 * n_params, "bic": -2.0 * llf + bic_penalty * n_params,
        "k_constant": span.k_constant,
        "const_idx": -1 if span.index is None else span.index,
        "use_t": True, "alpha": float(alpha), "normalized_cov_params": normalized,
    }


def recursive_bands(coefs: np.ndarray, normalized_variance: np.ndarray, scale: np.ndarray,
                    alpha: float = 0.05) -> dict:
    """The recursive confidence bands of a trajectory, as statsmodels' ``RecursiveLS``
    draws them: at each step t, ``bse`` = √(σ̂²·diag((X_tᵀWX_t)⁻¹)) with the final scale
    σ̂² (per target) and ψ_t ± z_{1−α/2}·bse (normal quantile). ``coefs`` (steps, k, K),
    ``normalized_variance`` (steps, k), ``scale`` (K,)."""
    bse = np.sqrt(np.asarray(normalized_variance)[:, :, None] * np.asarray(scale)[None, None, :])
    q = critical_value(alpha, None, False)
    return {"bse": bse, "lower": coefs - q * bse, "upper": coefs + q * bse}
