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
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.inference.robust import sandwich

__all__ = ["ROLLING_COV_TYPES", "rolling_hc0"]

#: the covariances of the windows: statsmodels' ``RollingOLS.fit(cov_type=...)`` names
#: (its ``"HCCM"`` is ``"HC0"``)
ROLLING_COV_TYPES = ("nonrobust", "HC0")


def rolling_hc0(X, Y, params, ends, window: int, weights=None) -> dict:
    """The HC0 covariance of each window (the rows ``max(0, e − window):e`` for each end e
    of ``ends``) from the window's coefficients ``params`` (m, k, K): ``cov_params``
    (m, k, k, K), ``bse`` and ``tvalues`` (m, k, K); NaN for a window whose ``params`` are
    NaN (not identified). ``weights``: precision weights of the rows (as WLS; 0 drops a
    row).

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
    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    params = np.asarray(params, np.float64)
    ends = np.asarray(ends, np.int64)
    m, k, K = params.shape
    root = np.ones(len(X)) if weights is None else np.sqrt(np.asarray(weights, np.float64))
    cov = np.full((m, k, k, K), np.nan)
    for j, e in enumerate(ends):
        coef = params[j]
        if not np.isfinite(coef).all():  # a window not identified: no covariance
            continue
        s = max(0, int(e) - int(window))
        r = root[s:e, None]
        Xw = X[s:e] * r
        Ew = (Y[s:e] - X[s:e] @ coef) * r
        meat = np.empty((k, k, K))
        for t in range(K):
            meat[:, :, t] = (Xw * (Ew[:, t] ** 2)[:, None]).T @ Xw
        R = np.linalg.qr(Xw, mode="r")
        cov[j] = sandwich(R, meat)
    with np.errstate(invalid="ignore", divide="ignore"):
        bse = np.sqrt(np.diagonal(cov, axis1=1, axis2=2)).transpose(0, 2, 1)
        tvalues = params / bse
    return {"cov_params": cov, "bse": bse, "tvalues": tvalues}
