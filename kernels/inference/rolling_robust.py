"""The heteroscedasticity-robust (HC0) covariance of each window of a rolling least-squares
fit, from the window's own residuals: statsmodels' ``RollingOLS(...).fit(cov_type="HCCM")``
(``"HC0"`` the same).

For the window of rows [s, e) with its coefficients ψ (those of its own least-squares fit),
x̃ᵢ = √wᵢ·xᵢ and ẽᵢ = √wᵢ·(yᵢ − xᵢᵀψ) (statsmodels' ``wexog`` and ``wresid``),

    V = (X̃ᵀX̃)⁻¹ M (X̃ᵀX̃)⁻¹,   M = Σ_{i=s}^{e−1} ẽᵢ² x̃ᵢx̃ᵢᵀ

(White's HC0, MacKinnon & White 1985; no small-sample factor), as
``RollingRegressionResults._cov_params`` computes it from ``xpxi`` and ``xeex``. The
residuals are the window's, with the window's coefficients, so M is no sliding sum of terms
fixed in advance (expanded in ψ it would be one of fourth moments of the rows, with the
cancellation of subtracting them): each window is computed from its rows, ``(e − s)·k²``
operations per window and target, the bread from a Householder QR of its rows
(:func:`~.robust.sandwich`, triangular solves; statsmodels inverts its rolling X̃ᵀX̃). A row
of weight 0 (dropped) adds nothing to M, as ``RollingOLS`` leaves a missing row out of its
window.

``HAC`` windows (``--window N --cov-type HAC --maxlags L``; ``RollingOLS`` has none) take
the meat of Newey & West (1987) over each window's own scores sᵢ = ẽᵢx̃ᵢ,

    M = Σ_{l=0}^{L} κ_l Σ_{i=s+l}^{e−1} (sᵢsᵢ₋ₗᵀ + sᵢ₋ₗsᵢᵀ)/(1 + [l = 0]),

with the kernel's weights κ_l (Bartlett's 1 − l/(L + 1), or uniform), times n/(n − k) with
``use_correction``: statsmodels' ``OLS(y[s:e], X[s:e]).fit(cov_type="HAC", cov_kwds=
{"maxlags": L, "use_correction": ...})`` of the window's rows. The lags pair the window's
rows of positive weight (a dropped row leaves the series, as for the whole fit's HAC).
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.inference.robust import sandwich
from streamlsq.kernels.inference.timeseries import hac_meat

__all__ = ["ROLLING_COV_TYPES", "rolling_hc0", "rolling_robust"]

#: the covariances of the windows: statsmodels' ``RollingOLS.fit(cov_type=...)`` names
#: (its ``"HCCM"`` is ``"HC0"``), and HAC
ROLLING_COV_TYPES = ("nonrobust", "HC0", "HAC")


def rolling_hc0(X, Y, params, ends, window: int, weights=None) -> dict:
    """The HC0 covariance of each window (the rows ``max(0, e − window):e`` for each end e
    of ``ends``) from the window's coefficients ``params`` (m, k, K): ``cov_params``
    (m, k, k, K), ``bse`` and ``tvalues`` (m, k, K); NaN for a window whose ``params`` are
    NaN (not identified). ``weights``: precision weights of the rows (as WLS; 0 drops a
    row). :func:`rolling_robust` with ``cov_type="HC0"``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.rolling_robust import rolling_hc0
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.standard_normal(30)])
    >>> y = X @ [1.0, 2.0] + rng.standard_normal(30)
    >>> b = np.linalg.lstsq(X[10:30], y[10:30], rcond=None)[0]
    >>> e = y[10:30] - X[10:30] @ b
    >>> bread = np.linalg.inv(X[10:30].T @ X[10:30])
    >>> white = bread @ (X[10:30].T * e**2) @ X[10:30] @ bread
    >>> out = rolling_hc0(X, y[:, None], b[None, :, None], [30], 20)
    >>> bool(np.allclose(out["cov_params"][0, :, :, 0], white))
    True
    """
    return rolling_robust(X, Y, params, ends, window, weights)


def rolling_robust(X, Y, params, ends, window: int, weights=None, *, cov_type: str = "HC0",
                   maxlags: int | None = None, kernel: str = "bartlett",
                   use_correction: bool | None = None) -> dict:
    """The robust covariance ``cov_type`` of each window (the module's docstring): as
    :func:`rolling_hc0`, or ``"HAC"`` with ``maxlags``, ``kernel`` and ``use_correction``
    (n/(n − k), n the window's rows of positive weight; statsmodels' default: none).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.rolling_robust import rolling_robust
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.standard_normal(30)])
    >>> y = X @ [1.0, 2.0] + rng.standard_normal(30)
    >>> b = np.linalg.lstsq(X[10:30], y[10:30], rcond=None)[0]
    >>> S = X[10:30] * (y[10:30] - X[10:30] @ b)[:, None]
    >>> lag1 = S[1:].T @ S[:-1]
    >>> bread = np.linalg.inv(X[10:30].T @ X[10:30])
    >>> nw = bread @ (S.T @ S + 0.5 * (lag1 + lag1.T)) @ bread
    >>> out = rolling_robust(X, y[:, None], b[None, :, None], [30], 20, cov_type="HAC",
    ...                      maxlags=1)
    >>> bool(np.allclose(out["cov_params"][0, :, :, 0], nw))
    True
    """
    if cov_type not in ROLLING_COV_TYPES[1:]:
        raise ValueError(f"cov_type must be one of {', '.join(ROLLING_COV_TYPES[1:])}, got "
                         f"{cov_type!r}")
    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    params = np.asarray(params, np.float64)
    ends = np.asarray(ends, np.int64)
    m, k, K = params.shape
    w = np.ones(len(X)) if weights is None else np.asarray(weights, np.float64)
    root = np.sqrt(w)
    cov = np.full((m, k, k, K), np.nan)
    for j, e in enumerate(ends):
        coef = params[j]
        if not np.isfinite(coef).all():  # a window not identified: no covariance
            continue
        s = max(0, int(e) - int(window))
        r = root[s:e, None]
        Xw = X[s:e] * r
        R = np.linalg.qr(Xw, mode="r")
        if cov_type == "HAC":
            part = hac_meat(X[s:e], Y[s:e], coef, int(maxlags), kernel, w[s:e])
            n = part["nobs"]
            factor = n / (n - k) if use_correction else 1.0
            cov[j] = factor * sandwich(R, part["meat"])
            continue
        Ew = (Y[s:e] - X[s:e] @ coef) * r
        meat = np.empty((k, k, K))
        for t in range(K):
            meat[:, :, t] = (Xw * (Ew[:, t] ** 2)[:, None]).T @ Xw
        cov[j] = sandwich(R, meat)
    with np.errstate(invalid="ignore", divide="ignore"):
        bse = np.sqrt(np.diagonal(cov, axis1=1, axis2=2)).transpose(0, 2, 1)
        tvalues = params / bse
    return {"cov_params": cov, "bse": bse, "tvalues": tvalues}
