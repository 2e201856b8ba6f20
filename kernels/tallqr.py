"""The triangular factor of a tall block of rows: the exact summary of the QR solver.

For rows [X Y] (m × p, p = n_features + n_targets, m ≫ p), optionally weighted
(W = diag(weights)) and stacked under a prior factor A, :func:`rows_factor` returns the
upper-triangular R with a non-negative diagonal such that

    RᵀR = [s·A; W[X Y]]ᵀ [s·A; W[X Y]]

by Householder QR (Golub 1965), whose R is backward stable: the factor of rows within a
modest multiple of ε of the given ones, so that ψ = R⁻¹z loses about log10(ε·κ(X)) digits,
where the normal equations lose twice as many. It is the sequential (flat-tree) TSQR of
Demmel, Grigori, Hoemmen & Langou (2012): the rows are cut into slices of ``slice_rows``
rows, each slice is copied into one column-major buffer that stays in the core's cache,
and LAPACK's triangular-pentagonal QR (``tpqrt``, compact WY) folds it into the running
factor, R ← the factor of [R; slice], without forming a stack of slice factors. What this
costs against the alternatives (``geqrt`` or ``geqrf`` per slice merged in a tree,
CholeskyQR2), and their accuracy, is measured by ``tests/benchmarks/bench_summaries.py``
(``docs/performance.md#summaries``): the fold is as fast as the best of them on an Intel
core and 1.7× faster than ``geqrt`` on an AMD one, where ``geqrt``'s small level-3 updates
are slow.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

__all__ = ["QR_BLOCK", "SLICE_ROWS", "rows_factor"]

#: rows of a slice: its column-major copy (4,096 × 21 float64: 688 KB) stays in a core's
#: cache while tpqrt folds it; measured fastest of 2,048–16,384 (bench_summaries.py)
SLICE_ROWS = 4096
#: block size of LAPACK tpqrt (compact WY): 8 measured faster than 4 and 16
QR_BLOCK = 8


def rows_factor(X: np.ndarray, Y: np.ndarray, weights: np.ndarray | None = None, *,
                prior: np.ndarray | None = None, scale: float = 1.0,
                slice_rows: int = SLICE_ROWS, dtype=None,
                sums: np.ndarray | None = None, constant: bool = False) -> np.ndarray:
    """The (p, p) upper-triangular factor, non-negative diagonal, of ``[scale·prior; W[X Y]]``.

    ``X`` (m, n) and ``Y`` (m, K) in any dtype and memory order (they are read once, slice
    by slice, and never changed); ``weights`` (m,) row weights or None; ``prior`` a (p, p)
    upper-triangular factor of earlier rows or None. The arithmetic is in ``dtype``
    (default: the prior's, else float64 unless X is float32). ``sums`` (n,) or None:
    Σ weights²·x of the rows (the features' column sums, weighted as precision weights
    when ``weights`` are the rows' scales) is added to it, from each slice while it is in
    cache: the statistics' centring needs it, and a second pass over the rows would cost a
    read of memory the slice copy has already paid for. ``constant``: the rows' columns are
    [1 X Y], a column of ones first that X does not hold (p = n + 1 + K, ``sums`` (n + 1,)):
    it is written into each slice's copy, where a copy of X with the column prepended
    would cost a pass over the rows' memory.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.tallqr import rows_factor
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((10_000, 3)), rng.standard_normal((10_000, 1))
    >>> R = rows_factor(X, Y, slice_rows=1024)
    >>> M = np.hstack([X, Y])
    >>> bool(np.allclose(R.T @ R, M.T @ M)), bool((np.diag(R) >= 0).all())
    (True, True)
    """
    c = int(bool(constant))
    n, K = X.shape[1] + c, Y.shape[1]
    p = n + K
    if dtype is None:
        dtype = prior.dtype if prior is not None else np.result_type(X.dtype, np.float32)
    dtype = np.dtype(dtype)
    # tpqrt reads and writes only the upper triangle of R
    R = np.zeros((p, p), dtype=dtype, order="F")
    if prior is not None:
        R[:] = np.asarray(prior, dtype) * dtype.type(scale)
    tpqrt = sla.get_lapack_funcs("tpqrt", dtype=dtype)
    block = max(1, min(QR_BLOCK, p))
    m = X.shape[0]
    size = max(1, min(int(slice_rows), m))
    buffer = np.empty((size, p), dtype=dtype, order="F")
    ones = np.ones(size, dtype=dtype) if sums is not None and weights is None else None
    for a in range(0, m, size):
        b = min(a + size, m)
        # a shorter last slice gets its own contiguous buffer (LAPACK takes whole arrays)
        B = buffer if b - a == size else np.empty((b - a, p), dtype=dtype, order="F")
        if weights is None:
            if c:
                B[:, 0] = 1
            B[:, c:n] = X[a:b]
            B[:, n:] = Y[a:b]
        else:
            w = np.asarray(weights[a:b], dtype)
            if c:
                B[:, 0] = w
            # written as the transposes' product: numpy then walks the column-major buffer
            # along its columns, 4× faster than the rows' order it picks for (m, n) views
            np.multiply(X[a:b].T, w, out=B[:, c:n].T, casting="unsafe")
            np.multiply(Y[a:b].T, w, out=B[:, n:].T, casting="unsafe")
        if sums is not None:  # Σ w²·x = Σ w·(w·x); a matrix-vector product (BLAS gemv)
            # reads the slice's columns at half the cost of numpy's sum over them (np.dot:
            # it releases the GIL during the BLAS call, numpy's @ does not)
            sums += np.dot(ones[:b - a] if weights is None else w, B[:, :n])
        R, _, _, info = tpqrt(0, block, R, B, overwrite_a=1, overwrite_b=1)
        if info != 0:  # pragma: no cover - tpqrt fails only on bad arguments
            raise np.linalg.LinAlgError(f"tpqrt failed (info={info})")
    R = np.triu(R)
    negative = np.diag(R) < 0
    if negative.any():  # the factor is unique with a non-negative diagonal
        R[negative] *= -1
    return R
