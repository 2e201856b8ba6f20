"""Small dense linear algebra shared by every kernel.

The rule of the package: solve, never invert; keep symmetric matrices
symmetric. Symmetric positive definite systems are solved by Cholesky; when the
factorisation fails (a semi-definite matrix that rounding pushed below zero) the
stated fallback is scipy's symmetric-indefinite LDLᵀ solve (``assume_a="sym"``).
A matrix that is numerically singular is refused with :class:`SingularMatrixError`
rather than solved into NaNs or huge numbers.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla

__all__ = [
    "SingularMatrixError",
    "as_2d",
    "check_finite",
    "numerical_rank",
    "spd_solve",
    "symmetrize",
]


class SingularMatrixError(np.linalg.LinAlgError):
    """A system matrix is singular to working precision.

    ``rank`` is the numerical rank when it was computed, ``size`` the order.
    The pipeline turns this into an input error that names the block and the
    remedy (a ridge start).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import SingularMatrixError, spd_solve
    >>> try:
    ...     spd_solve(np.zeros((2, 2)), np.ones(2))
    ... except SingularMatrixError as exc:
    ...     print(exc.size, exc.rank)
    2 0
    """

    def __init__(self, message: str, *, rank: int | None = None, size: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.size = size


def symmetrize(A: np.ndarray) -> np.ndarray:
    """Return (A + Aᵀ)/2, the nearest symmetric matrix; removes rounding asymmetry.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import symmetrize
    >>> symmetrize(np.array([[1.0, 2.0], [0.0, 1.0]]))
    array([[1., 1.],
           [1., 1.]])
    """
    return 0.5 * (A + A.T)


def as_2d(Y: np.ndarray) -> np.ndarray:
    """View a vector of targets as an (n, 1) column; leave matrices alone."""
    Y = np.asarray(Y)
    return Y[:, None] if Y.ndim == 1 else Y


def check_finite(name: str, A: np.ndarray) -> None:
    """Raise ValueError naming ``name`` and the first bad row if A has NaN or Inf."""
    finite = np.isfinite(A)
    if not finite.all():
        bad = tuple(int(i) for i in np.argwhere(~finite)[0])
        # plain Python scalars: NumPy 2 reprs (np.int64(2)) would clutter the message
        raise ValueError(f"{name} has a non-finite value ({A[bad].item()!r}) at index {bad}")


def numerical_rank(H: np.ndarray) -> int:
    """Rank of a symmetric PSD matrix from its eigenvalues, with numpy's default tolerance."""
    w = np.linalg.eigvalsh(H)
    if w.size == 0:
        return 0
    tol = max(H.shape) * np.finfo(H.dtype).eps * max(abs(w).max(), np.finfo(H.dtype).tiny)
    return int((w > tol).sum())


def _rcond_limit(n: int, dtype) -> float:
    # A condition number beyond 1/(n·eps) leaves no correct digit in the solution.
    return n * np.finfo(dtype).eps


def spd_solve(H: np.ndarray, B: np.ndarray, *, check_rcond: bool = True) -> np.ndarray:
    """Solve H X = B for symmetric positive (semi-)definite H.

    Cholesky (``cho_factor``/``cho_solve``) with the reciprocal condition number
    estimated by LAPACK ``pocon``. If Cholesky fails, fall back to the symmetric
    indefinite solver (Bunch–Kaufman LDLᵀ) with a ``RuntimeWarning``. Raises
    :class:`SingularMatrixError` when H is singular to working precision
    (rcond below n·eps), so callers never receive NaN or meaningless numbers.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import spd_solve
    >>> spd_solve(np.array([[4.0, 2.0], [2.0, 3.0]]), np.array([2.0, 1.0]))
    array([0.5, 0. ])
    """
    H = np.asarray(H)
    n = H.shape[0]
    if n == 0:
        return np.zeros_like(B)
    try:
        c, lower = sla.cho_factor(H, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        c = None
    if c is not None:
        if check_rcond:
            pocon = sla.get_lapack_funcs("pocon", (c,))
            anorm = np.abs(H).sum(axis=0).max()
            rcond, info = pocon(c, anorm, uplo="L")
            if info == 0 and rcond < _rcond_limit(n, H.dtype):
                raise SingularMatrixError(
                    f"matrix of order {n} is singular to working precision "
                    f"(reciprocal condition number {rcond:.2e})",
                    rank=numerical_rank(H),
                    size=n,
                )
        return sla.cho_solve((c, lower), B, check_finite=False)
    rank = numerical_rank(H)
    if rank < n:
        raise SingularMatrixError(
            f"matrix of order {n} is singular (numerical rank {rank})", rank=rank, size=n
        )
    warnings.warn(
        "Cholesky factorisation failed on a full-rank symmetric matrix; "
        "falling back to the symmetric indefinite (LDL^T) solver",
        RuntimeWarning,
        stacklevel=2,
    )
    return sla.solve(H, B, assume_a="sym", check_finite=False)
