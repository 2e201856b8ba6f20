"""Whitening of the features from additive moment sums (``docs/algorithms.md#whitening``).

The meta-learning estimators assume E xxᵀ = I. Non-isotropic features are mapped
to z = T(x − μ) with T = Σ^{-1/2} (symmetric, from ``eigh``), where μ and Σ come
from sums over all rows, accumulated over the chunks of work (:func:`moment_sums`, plain
sums, combined with ``combine_stats``).

Convention for coefficients (one row w per component, W (k, d)):

    y = w_zᵀ z = w_zᵀ T (x − μ) = (T w_z)ᵀ x − (T w_z)ᵀ μ

so the raw-feature coefficient is w_x = T w_z (``unwhiten_coef``; W_x = W_z T for
rows) and the intercept it implies is b = −w_xᵀ μ (``unwhiten_intercept``).
The mixed-linear-regression model has no intercept, and the moment estimator
β̂ = mean(y z) is unbiased when E zzᵀ = I even if E z ≠ 0. So for MLR with
non-centred features whiten with ``center=False`` (μ = 0, T = (E xxᵀ)^{-1/2}):
then w_x = T w_z exactly and no intercept appears. With ``center=True`` a task
y = w_xᵀx becomes y = w_zᵀz + w_xᵀμ, i.e. gains an intercept the model lacks,
unless the features are centred already.

Precision: the covariance is formed as XᵀX/n − μμᵀ, which loses about
log10(‖μ‖²/λ_min(Σ)) digits; fine unless the features have means far larger
than their spread (centre such data first).
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import SingularMatrixError, symmetrize

__all__ = [
    "moment_sums",
    "unwhiten_coef",
    "unwhiten_intercept",
    "whiten",
    "whiten_coef",
    "whitening_from_moments",
]


def moment_sums(X) -> dict[str, np.ndarray]:
    """Additive moments of a block of rows: {"x_sum": Σx (d,), "xtx": Σxxᵀ (d, d), "rows": n}."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows, features), got shape {X.shape}")
    X = X.astype(np.float64, copy=False)
    if not np.isfinite(X).all():
        r, c = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"X has a non-finite value at row {r}, column {c}")
    return {"x_sum": X.sum(axis=0), "xtx": symmetrize(X.T @ X), "rows": np.int64(X.shape[0])}


def whitening_from_moments(sums: dict, *, center: bool = True):
    """(μ (d,), T (d, d)) with T = Σ^{-1/2} symmetric, from combined :func:`moment_sums`.

    ``center=True``: μ = Σx/n and Σ = Σxxᵀ/n − μμᵀ (the population covariance,
    divisor n). ``center=False``: μ = 0 and Σ = Σxxᵀ/n (the second moment).
    T = V diag(λ^{-1/2}) Vᵀ from ``eigh``. Raises :class:`SingularMatrixError`
    (a ValueError) naming the smallest eigenvalue and the feature that loads
    most on its direction when Σ is singular to working precision.
    """
    for key in ("x_sum", "xtx", "rows"):
        if key not in sums:
            raise ValueError(f"sums lacks '{key}' (use moment_sums)")
    n = int(sums["rows"])
    x_sum = np.asarray(sums["x_sum"], dtype=np.float64)
    xtx = np.asarray(sums["xtx"], dtype=np.float64)
    d = x_sum.size
    if n < (2 if center else 1):
        raise ValueError(f"whitening needs at least {2 if center else 1} rows, got {n}")
    if center:
        mean = x_sum / n
        cov = symmetrize(xtx / n - np.outer(mean, mean))
    else:
        mean = np.zeros(d)
        cov = symmetrize(xtx / n)
    vals, vecs = np.linalg.eigh(cov)
    top = max(float(vals[-1]), 0.0)
    tol = d * np.finfo(np.float64).eps * top
    if not vals[0] > tol:
        feature = int(np.argmax(np.abs(vecs[:, 0])))
        raise SingularMatrixError(
            f"the feature covariance is singular (smallest eigenvalue {vals[0]:.3g}, "
            f"largest {top:.3g}); feature {feature} loads most on the degenerate "
            "direction: drop constant or collinear features",
            rank=int((vals > tol).sum()),
            size=d,
        )
    T = symmetrize((vecs / np.sqrt(vals)) @ vecs.T)
    return mean, T


def whiten(X, mean, T) -> np.ndarray:
    """z = T(x − μ) for every row: (X − μ) T (T symmetric)."""
    X = np.asarray(X, dtype=np.float64)
    return (X - np.asarray(mean, dtype=np.float64)) @ np.asarray(T, dtype=np.float64)


def unwhiten_coef(W_white, T) -> np.ndarray:
    """Raw-feature coefficients w_x = T w_z (rows: W_x = W_z T); (d,) or (k, d)."""
    return np.asarray(W_white, dtype=np.float64) @ np.asarray(T, dtype=np.float64)


def unwhiten_intercept(W_raw, mean) -> np.ndarray:
    """The intercept b = −w_xᵀμ that centring implies: y = w_xᵀx + b. Scalar or (k,)."""
    return -(np.asarray(W_raw, dtype=np.float64) @ np.asarray(mean, dtype=np.float64))


def whiten_coef(W_raw, T) -> np.ndarray:
    """Inverse of :func:`unwhiten_coef`: w_z = T⁻¹ w_x, by a solve (e.g. true W → whitened)."""
    W_raw = np.asarray(W_raw, dtype=np.float64)
    T = np.asarray(T, dtype=np.float64)
    return np.linalg.solve(T, W_raw.T).T
