"""The factored least-squares problem a recursion ends with, and what follows from R alone.

With the rows scaled by √w (precision weights), X̃ = W^½X and Ỹ = W^½Y, the
square-root information form keeps the triangular factor of [X̃ Ỹ]:

    [X̃ Ỹ] = Q [[R, z], [0, S]]    so that  RᵀR = X̃ᵀX̃,  ψ = R⁻¹z,  SSR = diag(SᵀS),

and ‖Ỹ‖² = ‖z‖² + SSR column by column (the normal-equations form gives the same R as
the Cholesky factor of H, z = Rψ and SSR = diag(YᵀWY) − ‖z‖²). The covariance of the
coefficients in units of σ², statsmodels' ``normalized_cov_params``, is
(RᵀR)⁻¹ = R⁻¹R⁻ᵀ, formed from triangular solves, never from an inverse of XᵀWX.

Whether the model has a constant (statsmodels' ``k_constant``, which decides between the
centred and the uncentred R²): the constant √w lies in the span of X̃ when a column is
constant on the rows of positive weight (Cauchy–Schwarz: Σw·Σwx² = (Σwx)², tested
on R's column norms and the moments) or when a combination of columns is
(‖√w − P√w‖² = Σw − ‖R⁻ᵀs‖² ≈ 0, s = Σwx: statsmodels' implicit constant). Its
coordinates u = Qᵀ√w in the basis of R's rows are R's column of the constant (or R⁻ᵀs),
and the centred explained sum of squares is ‖z − u(uᵀz)/(uᵀu)‖²: z with the direction of
the constant taken out by a Householder reflection, no subtraction Σy² − nȳ² (which loses
the digits of ȳ²/var(y)). With the constant as the first column, u = R₀₀e₁ and it is
‖z[1:]‖² exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

__all__ = ["ConstantSpan", "RegressionFactor", "constant_in_span", "explained_sum_of_squares",
           "normalized_cov_params"]

#: a column is constant when Σw·Σwx² and (Σwx)² agree to this relative tolerance
#: (rounding of sums of the rows leaves a few ε; a column that varies by 1e-6 of its
#: mean differs by 1e-12 and is not constant)
CONSTANT_COLUMN_RTOL = 1e3 * np.finfo(np.float64).eps
#: a combination of columns is constant when the residual of √w on them is below this
#: share of Σw (statsmodels compares ranks: what is below this is not told apart)
IMPLICIT_CONSTANT_RTOL = 1e-8


@dataclass(frozen=True)
class RegressionFactor:
    """A least-squares fit in factored form: ``R`` (k, k) upper triangular with
    RᵀR = XᵀWX, ``z`` (k, K) = Rψ, ``ssr`` (K,) the residual sums of squares, ``coef``
    ψ (k, K), and the moments of the rows of positive weight: ``nobs``, ``sum_weights``
    Σw, ``sum_log_weights`` Σlog w, ``feature_sums`` Σwx (k,).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import RegressionFactor
    >>> X = np.column_stack([np.ones(4), [1.0, 2.0, 3.0, 4.0]])
    >>> fac = RegressionFactor.from_rows(X, np.array([2.0, 4.0, 3.0, 6.0]))
    >>> fac.nobs, np.round(fac.coef.ravel(), 6).tolist(), round(float(fac.ssr[0]), 6)
    (4, [1.0, 1.1], 2.7)
    """

    R: np.ndarray
    z: np.ndarray
    ssr: np.ndarray
    coef: np.ndarray
    nobs: int
    sum_weights: float
    sum_log_weights: float
    feature_sums: np.ndarray

    @classmethod
    def of(cls, state: dict, *, R, z, ssr) -> RegressionFactor:
        """The factor of a least-squares state: its ``R``, ``z`` and ``ssr`` as the form
        computes them, ψ and the moments as the state keeps them."""
        f64 = np.float64
        return cls(R=np.asarray(R, f64), z=np.asarray(z, f64), ssr=np.asarray(ssr, f64),
                   coef=np.asarray(state["psi"], f64), nobs=int(state["nobs"]),
                   sum_weights=float(state["sum_weights"]),
                   sum_log_weights=float(state["sum_log_weights"]),
                   feature_sums=np.asarray(state["feature_sums"], f64))

    @classmethod
    def from_rows(cls, X, Y, weights=None) -> RegressionFactor:
        """The factor of rows in memory, by one Householder QR of [√w X  √w Y] (a
        reference for tests and small data; rows of weight 0 are left out)."""
        X = np.asarray(X, np.float64)
        Y = np.asarray(Y, np.float64)
        Y = Y[:, None] if Y.ndim == 1 else Y
        w = np.ones(len(X)) if weights is None else np.asarray(weights, np.float64)
        keep = w > 0
        X, Y, w = X[keep], Y[keep], w[keep]
        k, K = X.shape[1], Y.shape[1]
        A = np.linalg.qr(np.sqrt(w)[:, None] * np.hstack([X, Y]), mode="r")
        A = np.vstack([A, np.zeros((max(0, k + K - A.shape[0]), k + K))])
        R, z, S = A[:k, :k], A[:k, k:], A[k:k + K, k:]
        return cls(R=R, z=z, ssr=(S**2).sum(axis=0), coef=sla.solve_triangular(R, z),
                   nobs=int(keep.sum()), sum_weights=float(w.sum()),
                   sum_log_weights=float(np.log(w).sum()), feature_sums=w @ X)

    @property
    def k(self) -> int:
        """The number of coefficients."""
        return self.R.shape[0]


@dataclass(frozen=True)
class ConstantSpan:
    """Whether a constant lies in the span of the columns (``k_constant`` 1 or 0, as
    statsmodels counts it), the index of a constant column (``index``: None for an
    implicit constant or none) and the constant's coordinates u = Qᵀ√w (``direction``)."""

    k_constant: int
    index: int | None
    direction: np.ndarray | None


def constant_in_span(fac: RegressionFactor, constant: int | None = None) -> ConstantSpan:
    """The constant of the model: column ``constant`` when the caller knows it (the
    intercept the pipeline prepends), else a column that is constant on the rows of
    positive weight, else a combination of columns that is (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import RegressionFactor, constant_in_span
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((20, 1))
    >>> constant_in_span(RegressionFactor.from_rows(np.hstack([x, np.full((20, 1), 2.0)]),
    ...                                             x)).index
    1
    >>> dummies = np.repeat(np.eye(2), 10, axis=0)  # two indicators that sum to 1
    >>> span = constant_in_span(RegressionFactor.from_rows(np.hstack([x, dummies]), x))
    >>> span.k_constant, span.index
    (1, None)
    """
    R, s, sw = fac.R, fac.feature_sums, fac.sum_weights
    if constant is not None:
        return ConstantSpan(1, int(constant), R[:, constant].copy())
    squares = (R**2).sum(axis=0)  # Σ w x_j², column by column
    for j in range(fac.k):
        if s[j] != 0 and abs(squares[j] * sw - s[j] ** 2) <= CONSTANT_COLUMN_RTOL * squares[j] * sw:
            return ConstantSpan(1, j, R[:, j].copy())
    if fac.k == 0 or sw <= 0:
        return ConstantSpan(0, None, None)
    u = sla.solve_triangular(R, s, trans="T", check_finite=False)  # R⁻ᵀ s = Qᵀ√w
    if sw - u @ u <= IMPLICIT_CONSTANT_RTOL * sw:
        return ConstantSpan(1, None, u)
    return ConstantSpan(0, None, None)


def explained_sum_of_squares(z: np.ndarray, direction: np.ndarray | None) -> np.ndarray:
    """‖z‖² column by column (uncentred: no constant), or ‖z − u(uᵀz)/(uᵀu)‖² for the
    constant's direction u (centred), by the Householder reflection that maps u onto
    the first axis: z's part along the constant is then its first entry alone."""
    z = np.asarray(z, np.float64)
    if direction is None:
        return (z**2).sum(axis=0)
    u = np.asarray(direction, np.float64)
    norm = np.linalg.norm(u)
    v = u.copy()
    v[0] += np.copysign(norm, u[0]) if u[0] != 0 else norm
    reflected = z - np.outer(v, (2.0 / (v @ v)) * (v @ z))
    return (reflected[1:] ** 2).sum(axis=0)


def normalized_cov_params(R: np.ndarray) -> np.ndarray:
    """(RᵀR)⁻¹ = R⁻¹R⁻ᵀ from the triangular solve R·T = I (statsmodels'
    ``normalized_cov_params``, XᵀWX never inverted).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import normalized_cov_params
    >>> R = np.array([[2.0, 1.0], [0.0, 1.0]])
    >>> bool(np.allclose(normalized_cov_params(R), np.linalg.inv(R.T @ R)))
    True
    """
    R = np.asarray(R, np.float64)
    T = sla.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)
    C = T @ T.T
    return 0.5 * (C + C.T)
