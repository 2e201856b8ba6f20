"""F tests of linear restrictions Rψ = q (statsmodels' ``f_test``).

With the coefficients ψ, their covariance V (nonrobust or robust) and J restrictions,

    F = (Rψ − q)ᵀ (R V Rᵀ)⁻¹ (Rψ − q) / J,    P(F) = F_{J, df_denom}.sf(F),

df_denom being df_resid (G − 1 for a cluster-robust covariance). R V Rᵀ is solved with,
not inverted; restrictions that are linearly dependent leave it singular and are
refused.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.inference._distributions import fisher_f_sf
from streamlsq.kernels.linalg import SingularMatrixError, spd_solve

__all__ = ["WaldTest", "wald_test"]


@dataclass(frozen=True)
class WaldTest:
    """The result of :func:`wald_test`: ``fvalue``, ``pvalue``, ``df_num`` (J) and
    ``df_denom``, as statsmodels' ``ContrastResults`` names them."""

    fvalue: float
    pvalue: float
    df_num: int
    df_denom: float


def _symmetric_solve(A, b):
    """A⁻¹b for a symmetric A of any signs (LDLᵀ with Bunch–Kaufman pivoting), refused as
    :class:`SingularMatrixError` when A is singular by the reciprocal condition number."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", sla.LinAlgWarning)  # ill-conditioned: singular
            return sla.solve(A, b, assume_a="sym", check_finite=False)
    except (np.linalg.LinAlgError, sla.LinAlgWarning):
        raise SingularMatrixError("R V Rᵀ is singular", rank=0, size=A.shape[0]) from None


def wald_test(coef, cov, restrictions, q, df_denom, *, definite: bool = True) -> WaldTest:
    """The F test of ``restrictions`` (J, k) · ψ = ``q`` (J,) for coefficients ``coef``
    (k,) of covariance ``cov`` (k, k). ``definite=False``: ``cov`` need not be positive
    semi-definite (a two-way cluster covariance, V_A + V_B − V_A∩B): R V Rᵀ is solved
    with by a symmetric indefinite factorisation (Bunch–Kaufman), as statsmodels'
    ``wald_test`` inverts it whatever its signs; the F statistic may then be negative.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference import wald_test
    >>> res = wald_test(np.array([1.0, 2.0]), np.eye(2) * 0.25, np.array([[1.0, -1.0]]),
    ...                 np.zeros(1), df_denom=20)
    >>> round(res.fvalue, 6), res.df_num
    (2.0, 1)
    """
    coef = np.asarray(coef, np.float64)
    restrictions = np.atleast_2d(np.asarray(restrictions, np.float64))
    q = np.asarray(q, np.float64).reshape(-1)
    if restrictions.size == 0:  # F of no restriction is 0/0; [] is made (1, 0) above
        raise ValueError("no restriction to test (J = 0): give at least one, such as "
                         "'x1 = 0' or a row of R")
    if restrictions.shape[1] != coef.shape[0] or restrictions.shape[0] != q.shape[0]:
        raise ValueError(f"restrictions must be (J, {coef.shape[0]}) with q (J,), got "
                         f"{restrictions.shape} and {q.shape}")
    if not (np.isfinite(restrictions).all() and np.isfinite(q).all()):  # else "singular"
        raise ValueError("the restrictions R and q must be finite numbers; they hold NaN or "
                         "inf")
    diff = restrictions @ coef - q
    middle = restrictions @ np.asarray(cov, np.float64) @ restrictions.T
    middle = 0.5 * (middle + middle.T)
    try:
        if definite:
            quadratic = float(diff @ spd_solve(middle, diff))
        else:
            quadratic = float(diff @ _symmetric_solve(middle, diff))
    except SingularMatrixError:
        raise ValueError("the restrictions are linearly dependent (R V Rᵀ is singular): a "
                         "restriction is implied by, or contradicts, the others: drop it") from None
    J = restrictions.shape[0]
    fvalue = quadratic / J
    return WaldTest(fvalue=fvalue, pvalue=float(fisher_f_sf(fvalue, J, df_denom)), df_num=J,
                    df_denom=float(df_denom))
