"""Small dense linear algebra shared by every kernel.

The rule of the package: solve, never invert; keep symmetric matrices
symmetric. Symmetric positive definite systems are solved by Cholesky; when the
factorisation fails (a semi-definite matrix that rounding pushed below zero) the
stated fallback is scipy's symmetric-indefinite LDLᵀ solve (``assume_a="sym"``).
A matrix that is numerically singular is refused with :class:`SingularMatrixError`
rather than solved into NaNs or huge numbers.

The rank of a least-squares design is decided in one place, :func:`column_rank`, on the
column-equilibrated factor of its rows (see there), for every solver and engine.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

__all__ = [
    "ColumnRank",
    "SingularMatrixError",
    "as_2d",
    "aliased_phrase",
    "check_column_rank",
    "check_finite",
    "column_rank",
    "has_full_column_rank",
    "numerical_rank",
    "rank_tolerance",
    "spd_solve",
    "symmetrize",
]


class SingularMatrixError(np.linalg.LinAlgError):
    """A system matrix is singular to working precision.

    ``rank`` is the numerical rank when it was computed, ``size`` the order;
    ``aliased`` the columns found to be linear combinations of others, as pairs
    (column, the earlier columns it combines; none for a column that is zero), from
    :func:`column_rank`. The pipeline turns this into an input error that names the
    block, the columns and the remedy.

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

    def __init__(self, message: str, *, rank: int | None = None, size: int | None = None,
                 aliased: tuple = ()):
        super().__init__(message)
        self.rank = rank
        self.size = size
        self.aliased = tuple(aliased)


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


# ---------------------------------------------------------------------------
# the rank of a least-squares design: one rule for every solver and engine
# ---------------------------------------------------------------------------
class ColumnRank(NamedTuple):
    """What :func:`column_rank` finds: the numerical ``rank`` of ``size`` columns, the
    reciprocal condition number of the column-equilibrated factor (``rcond``,
    σ_min/σ_max), the ``tolerance`` it was compared with, and the ``aliased`` columns:
    pairs (column j, the columns i it is a linear combination of), j the later one;
    a column that is zero in every row is (j, ())."""

    rank: int
    size: int
    rcond: float
    tolerance: float
    aliased: tuple


def rank_tolerance(rows: int, size: int, dtype=np.float64) -> float:
    """τ = √(max(m, k)·k)·ε: the relative size below which a singular value of the
    column-equilibrated factor of m rows and k columns is rounding, not data.

    Householder QR of m × k rows is backward stable column by column, with a backward
    error of each column below γ_{cmk}·‖a_j‖ (Higham 2002, Theorem 19.4); the square root
    of the constant is its usual size in practice (Higham 2002, §2.8, on the statistical
    treatment of rounding errors). A design within that distance of a singular one is
    not resolved by the rows as rounded. LAPACK's rank-revealing least-squares drivers
    (xGELSY, xGELSD) and numpy's ``lstsq`` take a relative cut of the same kind
    (numpy's default: max(m, k)·ε on the unscaled singular values).
    """
    eps = float(np.finfo(dtype).eps)
    return math.sqrt(max(int(rows), int(size), 1) * max(int(size), 1)) * eps


def column_rank(F: np.ndarray, rows: int, *, tolerance: float | None = None) -> ColumnRank:
    """The numerical rank of the design whose Gram matrix is FᵀF, decided on the
    column-equilibrated factor.

    ``F`` (k, k) is any square factor of the rows' cross-products (the triangular R of
    their QR, or a factor of the normal matrix), ``rows`` the rows m it summarises.
    Each column of F is scaled to unit norm (F·D⁻¹, D = diag of the column norms, the
    norms of the design's columns) and the singular values of that small k × k matrix
    are compared with ``tolerance`` (default :func:`rank_tolerance` (m, k)) times the
    largest. Column scaling changes neither the columns' span nor what Householder QR
    computes in them (its backward error is columnwise, Higham, *Accuracy and Stability
    of Numerical Algorithms*, 2nd ed., SIAM 2002, §19.4 and §20.1 on column scaling of
    least squares), so a design whose columns only differ in units is not refused,
    while a column equal to a combination of others is (the rule of the rank-revealing
    drivers of LAPACK, xGELSY, applied to the equilibrated factor). A column that is zero
    is aliased with nothing. The aliased columns are read off the null vectors of the
    equilibrated factor, reduced so that each ends at its own column (the latest one it
    involves, as R's ``lm`` names the later of two aliased terms).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.linalg import column_rank
    >>> x = np.linspace(1, 2, 20)
    >>> R = np.linalg.qr(np.column_stack([np.ones(20), x, 1e9 * x]))[1]
    >>> column_rank(R, 20).aliased
    ((2, (1,)),)
    >>> column_rank(np.linalg.qr(np.vander(np.linspace(2, 6, 82), 11))[1], 82).rank
    11
    """
    F = np.asarray(F, np.float64)
    k = F.shape[1] if F.ndim == 2 else 0
    tol = rank_tolerance(rows, k) if tolerance is None else float(tolerance)
    if k == 0:
        return ColumnRank(0, 0, 1.0, tol, ())
    if not np.isfinite(F).all():
        return ColumnRank(0, k, 0.0, tol, tuple((j, ()) for j in range(k)))
    norms = np.sqrt((F * F).sum(axis=0))
    zero = norms <= np.finfo(np.float64).tiny
    Fs = F / np.where(zero, 1.0, norms)
    Fs[:, zero] = 0.0
    _, s, Vt = np.linalg.svd(Fs)
    top = s[0] if s.size and s[0] > 0 else 1.0
    keep = s > tol * top
    rank = int(keep.sum())
    rcond = float(s[-1] / top) if s[0] > 0 else 0.0
    if rank == k:
        return ColumnRank(rank, k, rcond, tol, ())
    null = Vt[rank:].copy()  # rows: an orthonormal basis of the equilibrated null space
    return ColumnRank(rank, k, rcond, tol, _aliased_columns(null, zero))


def has_full_column_rank(factors: np.ndarray, rows) -> np.ndarray:
    """For a stack of square factors (m, k, k) of the designs of m row sets (``rows``
    their counts, (m,) or one count), whether each has full column rank by the rule of
    :func:`column_rank`: the singular values of the column-equilibrated factor, the
    smallest against :func:`rank_tolerance` (its rows, k) times the largest. The same
    decision as ``column_rank(F, n).rank == k`` for each, in one batched SVD (a rolling
    fit decides it for every window).

    >>> import numpy as np
    >>> x = np.linspace(1, 2, 20)
    >>> Rs = np.stack([np.linalg.qr(np.column_stack([np.ones(20), x, c]))[1]
    ...                for c in (x**2, 3 * x)])
    >>> has_full_column_rank(Rs, 20).tolist()
    [True, False]
    """
    F = np.asarray(factors, np.float64)
    m, k = F.shape[0], F.shape[-1]
    if k == 0:
        return np.ones(m, bool)
    finite = np.isfinite(F).all(axis=(1, 2))
    F = np.where(finite[:, None, None], F, 0.0)
    norms = np.sqrt((F * F).sum(axis=1, keepdims=True))
    zero = norms <= np.finfo(np.float64).tiny
    s = np.linalg.svd(np.where(zero, 0.0, F / np.where(zero, 1.0, norms)), compute_uv=False)
    counts = np.broadcast_to(np.asarray(rows, np.int64), (m,))
    eps = float(np.finfo(np.float64).eps)
    tol = np.sqrt(np.maximum(np.maximum(counts, k), 1) * k) * eps  # rank_tolerance, batched
    return finite & ~zero[:, 0, :].any(axis=1) & (s[:, -1] > tol * s[:, 0])


def _aliased_columns(null: np.ndarray, zero: np.ndarray) -> tuple:
    """(column, the columns it combines) for each vector of a null-space basis (rows of
    ``null``), by Gauss–Jordan elimination that pivots on the latest column still free:
    each vector then ends at its own column and involves no other pivot."""
    M = np.array(null, np.float64)
    d, k = M.shape
    pivots: list[int] = []
    # an entry below this is the rounding of the basis, not a term of the combination
    small = 1e3 * math.sqrt(k) * np.finfo(np.float64).eps ** 0.5
    for r in range(d):
        col = None
        for j in range(k - 1, -1, -1):
            if j in pivots:
                continue
            i = r + int(np.argmax(np.abs(M[r:, j])))
            if abs(M[i, j]) > small:
                col = j
                break
        if col is None:  # pragma: no cover - an orthonormal basis always has a pivot
            break
        M[[r, i]] = M[[i, r]]
        M[r] /= M[r, col]
        for q in range(d):
            if q != r:
                M[q] -= M[q, col] * M[r]
        pivots.append(col)
    out = []
    for r, j in enumerate(pivots):
        if zero[j]:
            out.append((j, ()))
            continue
        others = tuple(int(i) for i in np.flatnonzero(np.abs(M[r]) > small)
                       if i != j and not zero[i])
        out.append((int(j), others))
    return tuple(sorted(out))


def check_column_rank(F: np.ndarray, rows: int, *, tolerance: float | None = None,
                      what: str = "design") -> ColumnRank:
    """:func:`column_rank` of F, refused with :class:`SingularMatrixError` (carrying the
    rank and the aliased columns) when it is below the number of columns."""
    found = column_rank(F, rows, tolerance=tolerance)
    if found.rank < found.size:
        raise SingularMatrixError(
            f"{what} of {found.size} columns has numerical rank {found.rank} (column-"
            f"equilibrated reciprocal condition number {found.rcond:.2e}, below "
            f"{found.tolerance:.2e})", rank=found.rank, size=found.size,
            aliased=found.aliased)
    return found


def gram_factor(H: np.ndarray) -> np.ndarray:
    """A square F with FᵀF = H for symmetric positive semi-definite H (its eigenvalues
    below 0, rounding, taken as 0): what :func:`~streamlsq.kernels.linalg.column_rank`
    reads the normal equations' rank from."""
    w, V = np.linalg.eigh(symmetrize(np.asarray(H, np.float64)))
    return np.sqrt(np.clip(w, 0.0, None))[:, None] * V.T


def normal_rank_error(exc: SingularMatrixError, H: np.ndarray, rows) -> SingularMatrixError:
    """The refusal of a singular normal matrix H of ``rows`` rows, with the rank rule of
    :func:`~streamlsq.kernels.linalg.column_rank` on its column-equilibrated factor: the
    aliased columns when the equilibrated H is singular to working precision (its
    eigenvalues are known to √(m·k)·ε relative, so the design's singular values to the
    square root of that: the tolerance is √τ), else ``exc`` itself (a design the normal
    equations cannot solve, which the QR solver may)."""
    rows = int(rows) if rows is not None else H.shape[0]
    found = column_rank(gram_factor(H), rows,
                        tolerance=math.sqrt(rank_tolerance(rows, H.shape[0], H.dtype)))
    if found.rank == found.size:
        return exc
    return SingularMatrixError(
        f"normal matrix of order {found.size} has column-equilibrated numerical rank "
        f"{found.rank}", rank=found.rank, size=found.size, aliased=found.aliased)


def aliased_phrase(aliased, labels) -> str:
    """The aliased columns named by their labels: "column 'one' is aliased with
    'intercept'" (several joined by "; ")."""
    def name(j):
        return repr(str(labels[j])) if labels is not None and j < len(labels) else f"{j}"

    parts = []
    for j, others in aliased:
        if not others:
            parts.append(f"column {name(j)} is zero in every row")
        else:
            parts.append(f"column {name(j)} is aliased with "
                         + ", ".join(name(i) for i in others))
    return "; ".join(parts)
