"""The compiled kernels of the square-root-free Givens fold (Gentleman 1973; Miller's
AS 274, 1992) that :func:`streamlsq.kernels.recursions.sqrtinfo.givens_fold` runs: a row
rotated into the compact factor W = (d, U) of R = D^½U at 3 multiply-adds per entry and
no square root, the coefficients ψ = U⁻¹z̄ and diag((RᵀR)⁻¹) at recorded steps, and the
square-root-free Cholesky factor of a Gram matrix (:func:`ldl_compact`).

They are a module of their own, imported when first used, because importing Numba and
starting its compiler costs a process about a third of a second (measured,
``docs/performance.md#startup``): a fit whose blocks are folded by block QR (the default
for blocks of more than :data:`~streamlsq.kernels.recursions.sqrtinfo.GIVENS_MAX_ROWS`
rows) never pays it.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["givens_kernel", "ldl_compact"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _unit_back_substitute(W, n, out):  # pragma: no cover - compiled
    """out = U⁻¹z̄ for the compact form W (U unit upper n x n, z̄ the next columns): ψ."""
    for k in range(out.shape[1]):
        for i in range(n - 1, -1, -1):
            acc = W[i, n + k]
            for j in range(i + 1, n):
                acc -= W[i, j] * out[j, k]
            out[i, k] = acc


# no fastmath: a pair of rows and two single rows must round alike (a fold cut anywhere
# gives the numbers of one fold), which fused multiply-adds chosen per loop would break
@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rotate(W, v, lo, hi, g, w):  # pragma: no cover - compiled
    """Rotate the row v (weight w) into rows lo..hi−1 of the compact factor W, whose
    weights d are first scaled by g (the forgetting factor, or 1): one square-root-free
    Givens rotation per row of W (Gentleman 1973). Returns the row's weight after them
    (the product of the squared cosines)."""
    p = W.shape[0]
    for i in range(lo, hi):
        xi = v[i]
        di = g * W[i, i]
        if xi == 0.0 or w == 0.0:
            W[i, i] = di
            continue
        dn = di + w * xi * xi
        inv = 1.0 / dn
        cb = di * inv  # c² of the rotation
        sb = w * xi * inv  # s·c/… in the scaled coordinates
        w = w * cb
        W[i, i] = dn
        Wi = W[i]
        for j in range(i + 1, p):
            t = Wi[j]
            vj = v[j]
            v[j] = vj - xi * t
            Wi[j] = cb * t + sb * vj
    return w


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rotation(d, x, w):  # pragma: no cover - compiled
    """One square-root-free Givens rotation of a row of weight ``w`` whose entry is ``x``
    into a diagonal ``d``: (the new diagonal, c² and s·c/… of the rotation, the row's new
    weight, x), or the identity (x returned as 0) when x or w is 0."""
    if x != 0.0 and w != 0.0:
        dn = d + w * x * x
        inv = 1.0 / dn
        cb = d * inv
        return dn, cb, w * x * inv, w * cb, x
    return d, 1.0, 0.0, w, 0.0


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _rotate_pair(W, v1, v2, g1, g2, w1, w2):  # pragma: no cover - compiled
    """Two rows (weights w1, w2) rotated into W in one pass over it (row 1 first, then row
    2 into the result): the same operations as two :func:`_rotate` calls, each entry of W
    loaded and stored once for both (1.35x the rows/s of one row at a time, measured)."""
    p = W.shape[0]
    for i in range(p):
        d1, cb1, sb1, w1, x1 = _rotation(g1 * W[i, i], v1[i], w1)
        d2, cb2, sb2, w2, x2 = _rotation(g2 * d1, v2[i], w2)
        W[i, i] = d2
        Wi = W[i]
        for j in range(i + 1, p):
            t = Wi[j]
            a = v1[j]
            b = v2[j]
            v1[j] = a - x1 * t
            t1 = cb1 * t + sb1 * a
            v2[j] = b - x2 * t1
            Wi[j] = cb2 * t1 + sb2 * b


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _add_row_moments(mom, X, r, w):  # pragma: no cover - compiled
    """The moments (nobs, Σw, Σlog w, Σw·x) of row r of X, of weight w, added to ``mom``."""
    if w > 0.0:
        mom[0] += 1.0
        mom[1] += w
        mom[2] += np.log(w)
        for j in range(X.shape[1]):
            mom[3 + j] += w * X[r, j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _inverse_diagonal(W, n, out):  # pragma: no cover - compiled
    """out = diag((RᵀR)⁻¹) for the compact form W of R = D^½U: Σ_k (U⁻¹)_ik² / d_k (U⁻¹
    by back substitution, column by column; inf where d_k = 0)."""
    col = np.empty(n, dtype=W.dtype)
    for i in range(n):
        out[i] = 0.0
    for k in range(n):
        col[k] = 1.0
        for i in range(k - 1, -1, -1):
            acc = 0.0
            for j in range(i + 1, k + 1):
                acc -= W[i, j] * col[j]
            col[i] = acc
        dk = W[k, k]
        for i in range(k + 1):
            out[i] += col[i] * col[i] / dk


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _equilibrated_diagonal(W, n):  # pragma: no cover - compiled
    """min_j |r_jj|/‖R[:, j]‖ for the compact form W of R = D^½U (‖R[:, j]‖² =
    Σ_{i≤j} d_i·U_ij²): the smallest diagonal entry of the column-equilibrated factor, an
    upper bound of its σ_min/σ_max (0 when a column is zero)."""
    lo = 1.0
    for j in range(n):
        norm2 = W[j, j]
        for i in range(j):
            norm2 += W[i, i] * W[i, j] * W[i, j]
        r = np.sqrt(W[j, j] / norm2) if norm2 > 0.0 else 0.0
        lo = min(lo, r)
    return lo


@numba.njit(cache=True, nogil=True, error_model="numpy")
def givens_kernel(W, X, Y, starts, stops, g, n, rows_before, count_from, diagnostics, rr,
                   rr_count, rec_coef, rec_rr, rec_count, rec_ratio, final_coef, weights, mom,
                   rec_var):  # pragma: no cover - compiled
    """Rows 0..stops[-1]−1 into W; ``starts[r]``: row r begins a block (g applies);
    the state is recorded after rows stops[0], stops[1], … (all but the last entry).
    ``weights``: the rows' precision weights (empty: all 1), the Gentleman weight each row
    is rotated in with; ``mom``: the moments (nobs, Σw, Σlog w, Σw·x) the rows are added
    to (empty: none kept); ``rec_var``: diag((RᵀR)⁻¹) at each recorded step (no rows:
    not recorded)."""
    p = W.shape[0]
    K = p - n
    v = np.empty(p, dtype=W.dtype)
    v2 = np.empty(p, dtype=W.dtype)
    weighted = weights.shape[0] > 0
    moments = mom.shape[0] > 0
    r = 0
    for j_rec in range(stops.shape[0]):
        stop = stops[j_rec]
        if not diagnostics:
            while r + 1 < stop:
                for j in range(n):
                    v[j] = X[r, j]
                    v2[j] = X[r + 1, j]
                for k in range(K):
                    v[n + k] = Y[r, k]
                    v2[n + k] = Y[r + 1, k]
                w1 = weights[r] if weighted else 1.0
                w2 = weights[r + 1] if weighted else 1.0
                _rotate_pair(W, v, v2, g if starts[r] else 1.0, g if starts[r + 1] else 1.0,
                             w1, w2)
                if moments:
                    _add_row_moments(mom, X, r, w1)
                    _add_row_moments(mom, X, r + 1, w2)
                r += 2
        while r < stop:
            gb = g if starts[r] else 1.0
            wr = weights[r] if weighted else 1.0
            for j in range(n):
                v[j] = X[r, j]
            for k in range(K):
                v[n + k] = Y[r, k]
            w = _rotate(W, v, 0, n, gb, wr)  # x_t into U (and z̄); w = γ_t² (unweighted)
            if diagnostics:
                if rows_before + r >= count_from and w > 0.0:
                    root = np.sqrt(w)
                    rr_count[0] += 1
                    for k in range(K):
                        e = v[n + k]  # the one-step-ahead prediction error e_t
                        wk = e * root  # γ_t e_t, the standardised recursive residual
                        rr[0, k] += wk
                        rr[1, k] += wk * wk
                        rr[2, k] = wk
                        rr[3, k] = e
                else:
                    for k in range(K):
                        rr[2, k] = 0.0
                        rr[3, k] = 0.0
            _rotate(W, v, n, p, gb, w)  # what is left of y_t into the residual factor
            if moments:
                _add_row_moments(mom, X, r, wr)
            r += 1
        if j_rec < stops.shape[0] - 1:
            _unit_back_substitute(W, n, rec_coef[j_rec])
            rec_ratio[j_rec] = _equilibrated_diagonal(W, n)
            if rec_var.shape[0] > 0:
                _inverse_diagonal(W, n, rec_var[j_rec])
            if diagnostics:
                rec_count[j_rec] = rr_count[0]
                for q in range(4):
                    for k in range(K):
                        rec_rr[j_rec, q, k] = rr[q, k]
    _unit_back_substitute(W, n, final_coef)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def ldl_compact(H, W):  # pragma: no cover - compiled
    """W = the compact form of the factor of symmetric H = UᵀDU (U unit upper triangular:
    its entries above the diagonal, d on it), by the square-root-free Cholesky
    factorisation; a d that is not positive makes the rest 0 (H singular)."""
    n = H.shape[0]
    for i in range(n):
        for j in range(i, n):
            acc = H[i, j]
            for k in range(i):
                acc -= W[k, i] * W[k, k] * W[k, j]
            if j == i:
                W[i, i] = acc
            else:
                W[i, j] = acc / W[i, i] if W[i, i] > 0.0 else 0.0
