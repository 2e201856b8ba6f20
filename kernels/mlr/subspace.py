"""Subspace estimation from light tasks (Algorithm 1, step 1 of Kong et al., 2020;
``docs/algorithms.md#subspace``).

Each task's rows are split into contiguous groups; a group's moment estimate is

    β̂⁽ᵍ⁾ = (1/|g|) Σ_{j∈g} yⱼ xⱼ ,   E β̂⁽ᵍ⁾ = w_h  because E xxᵀ = I

(not a least-squares fit). Two independent halves give an unbiased estimate of
w_h w_hᵀ, so

    M̂ = (1/n) Σᵢ (β̂ᵢ⁽¹⁾β̂ᵢ⁽²⁾ᵀ + β̂ᵢ⁽²⁾β̂ᵢ⁽¹⁾ᵀ)/2 ,   E M̂ = Σₕ pₕ wₕ wₕᵀ,

and U is the top-k eigenvectors of M̂. For t even each half has t/2 rows (a factor
2/t); with t odd the two halves differ by one row and dividing each by its
own size keeps both unbiased. The pipeline sums :func:`subspace_moment_sum` over
the chunks of work of D_L1 (a plain sum) and divides by the total task count.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import symmetrize
from streamlsq.kernels.mlr.tasks import as_task_rows, group_ptr, range_sums

__all__ = [
    "split_mean_estimates",
    "subspace_basis",
    "subspace_error",
    "subspace_moment_sum",
]


def split_mean_estimates(X, y, task_ptr, n_groups: int) -> np.ndarray:
    """Per-task, per-group moment estimates β̂⁽ᵍ⁾ = mean over the group's rows of yⱼxⱼ.

    Groups are contiguous and as equal as possible
    (:func:`~streamlsq.kernels.mlr.tasks.split_groups`).
    Returns (n_tasks, n_groups, d) float64. Refuses tasks with fewer rows than
    groups, naming the first one.
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    n_tasks = ptr.size - 1
    gptr = group_ptr(ptr, n_groups)
    sums = range_sums(y[:, None] * X, gptr)
    counts = np.diff(gptr).astype(np.float64)
    return (sums / counts[:, None]).reshape(n_tasks, n_groups, X.shape[1])


def subspace_moment_sum(X, y, task_ptr) -> tuple[np.ndarray, int]:
    """Partial sum of the subspace moment over one chunk of work.

    M_sum = Σᵢ (β̂ᵢ⁽¹⁾β̂ᵢ⁽²⁾ᵀ + β̂ᵢ⁽²⁾β̂ᵢ⁽¹⁾ᵀ)/2 over its tasks, with β̂⁽¹⁾, β̂⁽²⁾
    the two halves (:func:`split_mean_estimates` with 2 groups). Returns
    (M_sum (d, d) symmetric, n_tasks). Additive: sum both over chunks of work, then
    M̂ = M_sum_total / n_total. Every task needs at least 2 rows.
    """
    B = split_mean_estimates(X, y, task_ptr, 2)
    M_sum = symmetrize(B[:, 0, :].T @ B[:, 1, :])
    return M_sum, int(B.shape[0])


def subspace_basis(M, k: int, *, return_eigenvalues: bool = False):
    """Top-k eigenvectors U (d, k) of the symmetric moment M̂, eigenvalues descending.

    ``np.linalg.eigh`` on the symmetrised M. Eigenvectors are only defined up to
    sign; the convention here makes the entry of largest magnitude in each
    column positive (the first such entry on ties), so the same M̂ gives the same U.
    With ``return_eigenvalues`` also returns the k eigenvalues (descending):
    the gap between the k-th and (k+1)-th is the diagnostic for the choice of k.
    """
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be a square matrix, got shape {M.shape}")
    d = M.shape[0]
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= d:
        raise ValueError(f"k must be an integer in 1..{d} (the dimension of M), got {k!r}")
    if not np.isfinite(M).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(M))[0])
        raise ValueError(f"M has a non-finite value at index {bad}")
    vals, vecs = np.linalg.eigh(symmetrize(M))
    order = np.argsort(vals, kind="stable")[::-1][:k]
    U = vecs[:, order]
    pivot = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[pivot, np.arange(k)])
    signs[signs == 0] = 1.0
    U = U * signs
    if return_eigenvalues:
        return U, vals[order]
    return U


def subspace_error(U, W) -> float:
    """max_h ‖(I − UUᵀ) w_h‖: how much of the true components lies outside span(U).

    U (d, k') with orthonormal columns, W (k, d) the components as rows (the
    study's subspace error, paper Table 2).
    """
    U = np.asarray(U, dtype=np.float64)
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    if U.ndim != 2 or W.shape[1] != U.shape[0]:
        raise ValueError(f"U (d, k) and W (k, d) disagree on d: {U.shape} vs {W.shape}")
    residual = W - (W @ U) @ U.T
    return float(np.sqrt((residual**2).sum(axis=1)).max())
