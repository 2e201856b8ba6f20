"""The square-root information form of KF4LLS and RLS (the default ``solver="qr"``).

See ``docs/algorithms.md`` (KF4LLS, RLS) for the recursion. Instead of the information
matrix H_i = g·H_{i−1} + X_iᵀX_i and h_i = H_iψ_i, the state carries the triangular
factor of the rows seen, with the targets alongside:

    A_i = [[R_i, z_i], [0, S_i]]   with   A_iᵀA_i = [[H_i, h_i], [h_iᵀ, Σ g^{i−j} Y_jᵀY_j]]

(R_iᵀR_i = H_i, R_iᵀz_i = h_i, so ψ_i = R_i⁻¹z_i; S_iᵀS_i is the weighted residual
cross-product of the fit). A block updates it by one QR factorisation,

    A_i = triangular factor of [√g·A_{i−1}; [X_i Y_i]]                      (block QR)

and the coefficients come from a triangular solve. This is the square-root information
filter of Bierman (1977); with g = 1 and A_0 = 0 it is Golub's (1965) Householder least
squares applied block by block, and the rounding error of ψ grows like ε·κ(X), where the
normal equations (the ``solver="normal"`` form) lose ε·κ(X)². K targets share one
factorisation. The ridge start H_0 = δI is A_0 = [[√δ I, √δ ψ_0], [0, 0]].

Three ways to apply it:

- a block of many rows: the rows in slices of :data:`QR_ROWS` rows (each copied into one
  buffer that stays in cache), each folded into the factor so far by LAPACK ``tpqrt`` —
  :func:`qr_append`, which is
  :func:`streamlsq.kernels.tallqr.rows_factor`;
- blocks of a few rows (per-sample RLS): Givens rotations row by row (QR-RLS, e.g.
  Haykin, *Adaptive Filter Theory*, 2002, ch. 15) in their square-root-free form
  (Gentleman 1973: A = D^½·U, no square root and 3 multiply-adds per entry), compiled
  with Numba, the forgetting factor folded into the weights D — :func:`givens_fold`.
  The rotation of row t also yields its *recursive residual*: once x_t is rotated in,
  the target entries left over are e_t = y_t − x_tᵀψ_{t−1}, the one-step-ahead
  prediction error, and the row's weight is γ_t² = (1 + x_tᵀ(g·H_{t−1})⁻¹x_t)^{−1}, so
  that w_t = γ_t·e_t is the standardised recursive residual of Brown, Durbin & Evans
  (1975);
- the scan engine: the factor of each interval of blocks is computed independently
  (rows weighted by √(g^{c−j})) and the factors are merged in stream order by the QR of
  two stacked triangles, [√(g^m)·A_prefix; A_interval] (the TSQR merge of Demmel,
  Grigori, Hoemmen & Langou, 2012) — :func:`merge_factors`.

A factor whose column-equilibrated rank is below its order is refused with
:class:`~streamlsq.kernels.linalg.SingularMatrixError` naming the aliased columns
(:func:`~streamlsq.kernels.linalg.column_rank`, the one rank rule of every solver and
engine): the data (as rounded), not the method, are then rank deficient. Columns that
only differ in scale are not.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import (
    SingularMatrixError,
    check_column_rank,
    column_rank,
    rank_tolerance,
)
from streamlsq.kernels.recursions.contract import StepRecord, cut_intervals, fold_blocks
from streamlsq.kernels.recursions.moments import (
    COUNT_DIMS,
    MOMENT_DIMS,
    add_moments,
    moments_of_weights,
    positive_rows,
    zero_moments,
)
from streamlsq.kernels.recursions.params import must_be
from streamlsq.kernels.tallqr import SLICE_ROWS, rows_factor

__all__ = [
    "GIVENS_MAX_ROWS",
    "GivensFold",
    "QR_ROWS",
    "SqrtInfoLS",
    "check_unweighted_diagnostics",
    "compact_variance",
    "decay_weights",
    "gram_variance",
    "digits_trusted",
    "factor_condition",
    "givens_fold",
    "merge_factors",
    "qr_append",
    "solve_factor",
    "from_compact",
    "interval_summaries",
    "normalized_variance",
    "scan_moments",
    "to_compact",
]

#: rows per slice of a block QR (a slice stays in cache: measured 4-5x faster than one
#: geqrf over 200,000 x 21 rows, whose Householder passes stream memory)
QR_ROWS = SLICE_ROWS
#: blocks of at most this many rows are folded by the compiled Givens rotations
#: (below it, a LAPACK call per block costs more than the rotations)
GIVENS_MAX_ROWS = 16


def _positive_diagonal(A: np.ndarray) -> np.ndarray:
    """Flip the rows of a triangular factor whose diagonal entry is negative (in place).

    Householder QR leaves the signs of the diagonal arbitrary; the factor is unique
    with a non-negative diagonal, which the Givens kernel relies on (its cosines are
    then ≥ 0, so γ_t > 0 and w_t has the sign of e_t)."""
    neg = np.diag(A) < 0
    if neg.any():
        A[neg] *= -1
    return A


def qr_append(A: np.ndarray, X: np.ndarray, Y: np.ndarray, scale: float = 1.0,
              weights: np.ndarray | None = None, sums: np.ndarray | None = None) -> np.ndarray:
    """The triangular factor of ``[scale·A; W[X Y]]`` (W = diag(weights) or I).

    ``A`` is a (p, p) upper-triangular factor with p = n_features + n_targets (zeros for
    no prior rows). The rows of ``[X Y]`` are cut into slices of :data:`QR_ROWS` rows;
    each slice is copied into one buffer that stays in cache and folded into the factor
    by LAPACK ``tpqrt`` (the sequential TSQR of
    :func:`~streamlsq.kernels.tallqr.rows_factor`), starting from ``scale·A``. Each fold is
    a Householder QR of [R; slice], backward stable, so the factor stays within a modest
    multiple of a single Householder QR's error (measured 0.007–0.05 ε·κ against ``lstsq``
    on 10⁶ rows at κ = 1e4–1e8, as the two-level tree it replaced). Returns a new (p, p)
    upper-triangular array with a
    non-negative diagonal, in A's dtype. ``sums``
    (float64, n_features): Σ weights²·x of the rows is added to it, slice after slice (the
    column sums of the features, weighted as precision weights).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.sqrtinfo import qr_append
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((3000, 2)), rng.standard_normal((3000, 1))
    >>> A = qr_append(np.zeros((3, 3)), X, Y)
    >>> bool(np.allclose(A.T @ A, np.hstack([X, Y]).T @ np.hstack([X, Y])))
    True
    """
    return rows_factor(X, Y, weights, prior=np.asarray(A), scale=scale, slice_rows=QR_ROWS,
                       sums=sums)


def merge_factors(A: np.ndarray, *others: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The triangular factor of ``[scale·A; others[0]; others[1]; …]`` (a TSQR merge).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.sqrtinfo import merge_factors, qr_append
    >>> rng = np.random.default_rng(1)
    >>> M = rng.standard_normal((100, 3))
    >>> A1 = qr_append(np.zeros((3, 3)), M[:60, :2], M[:60, 2:])
    >>> A2 = qr_append(np.zeros((3, 3)), M[60:, :2], M[60:, 2:])
    >>> bool(np.allclose(merge_factors(A1, A2), qr_append(np.zeros((3, 3)), M[:, :2], M[:, 2:])))
    True
    """
    dtype = A.dtype
    B = np.asfortranarray(np.vstack([np.asarray(A, dtype) * dtype.type(scale),
                                     *(np.asarray(o, dtype) for o in others)]))
    geqrf = sla.get_lapack_funcs("geqrf", dtype=dtype)
    qr, _, _, info = geqrf(B, overwrite_a=1)
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError(f"geqrf failed (info={info})")
    return _positive_diagonal(np.triu(qr[: A.shape[0]]))


def _rcond(R: np.ndarray) -> float:
    """LAPACK's estimate of the reciprocal 1-norm condition number of triangular R."""
    if R.shape[0] == 0:
        return 1.0
    trcon = sla.get_lapack_funcs("trcon", dtype=R.dtype)
    rcond, info = trcon(np.asfortranarray(R), norm="1", uplo="U", diag="N")
    if info != 0 or not np.isfinite(rcond):
        return 0.0
    return float(rcond)


def factor_condition(R: np.ndarray) -> float:
    """κ₂(R) = σ_max/σ_min (the condition number of the weighted rows R stands for;
    inf when R is singular)."""
    if R.shape[0] == 0:
        return 1.0
    s = np.linalg.svd(np.asarray(R, np.float64), compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else math.inf


def check_factor(R: np.ndarray, rows: int | None = None) -> None:
    """Refuse (:class:`SingularMatrixError`, with the numerical rank and the aliased
    columns) a triangular factor of ``rows`` rows (default: its order) whose
    column-equilibrated rank is below its order: the rule of
    :func:`~streamlsq.kernels.linalg.column_rank`, the same for every solver and engine."""
    n = R.shape[0]
    if n:
        check_column_rank(R, n if rows is None else int(rows), what="triangular factor")


def factor_identified(R: np.ndarray, rows: int | None = None) -> bool:
    """Whether :func:`check_factor` accepts R."""
    n = R.shape[0]
    return n == 0 or column_rank(R, n if rows is None else int(rows)).rank == n


def solve_factor(R: np.ndarray, z: np.ndarray, rows: int | None = None) -> np.ndarray:
    """ψ = R⁻¹z by back substitution, refusing R whose column-equilibrated rank is below
    its order (:func:`check_factor`).

    Raises :class:`SingularMatrixError` (with the numerical rank and the aliased columns)
    for a factor that is singular to working precision. A factor that is only badly
    scaled (columns in different units) is solved: back substitution is exact to ε·κ of
    the equilibrated factor in the scaled coefficients.
    """
    n = R.shape[0]
    if n == 0:
        return np.zeros_like(z)
    check_factor(R, rows)
    # LAPACK trtrs, not a compiled loop: the block path of a worker then never loads
    # Numba's code generator (about 50 MB of resident memory per worker)
    return sla.solve_triangular(R, z, lower=False, check_finite=False)


# ---------------------------------------------------------------------------
# the compiled per-row update (QR-RLS by Givens rotations)
# ---------------------------------------------------------------------------
def to_compact(A: np.ndarray) -> np.ndarray:
    """The square-root-free form W of a triangular factor A = D^½·U (U unit upper
    triangular): W holds d on its diagonal and U above it. A row of A with a zero
    diagonal (no information yet) becomes a zero row."""
    s = np.diag(A).astype(A.dtype)
    safe = np.where(s != 0, s, 1).astype(A.dtype)
    W = np.triu(A / safe[:, None], 1)
    W[s == 0] = 0
    W[np.diag_indices_from(W)] = s * s
    return W


def from_compact(W: np.ndarray) -> np.ndarray:
    """The triangular factor A = D^½·U of a square-root-free form W (see :func:`to_compact`)."""
    s = np.sqrt(np.diag(W))
    A = np.triu(W, 1) * s[:, None]
    A[np.diag_indices_from(A)] = s
    return A


class GivensFold(NamedTuple):
    """What :func:`givens_fold` returns: the new compact factor ``W``; the recorded global
    ``steps``, ψ at each (``coefs``), the smallest diagonal entry of the
    column-equilibrated R there (``ratios``, an upper bound of its 1/κ); the recursive
    residual diagnostics (``diag``, or None); ψ after the last row (``psi``); the
    moments after it (``moments``: nobs, Σw, Σlog w, Σw·x, or None) and diag((RᵀR)⁻¹) at
    each recorded step (``variances``, or None)."""

    W: np.ndarray
    steps: np.ndarray
    coefs: np.ndarray
    ratios: np.ndarray
    diag: dict | None
    psi: np.ndarray
    moments: dict | None
    variances: np.ndarray | None


def givens_fold(W, X, Y, edges, forgetting, n, first_step=1, record_every=1, rows_before=0,
                diagnostics=None, count_from=0, weights=None, moments=None,
                variance=False) -> GivensFold:
    """Fold the rows of ``X, Y`` into the compact factor ``W`` (:func:`to_compact`) by
    square-root-free Givens rotations (compiled; Gentleman 1973, the updating of
    least-squares regressions of Miller's AS 274, 1992).

    Each rotation of the row into row i of the factor costs 3 multiply-adds per entry
    and no square root: 1.6x the rows/s of the standard rotations, measured on 21
    columns, with the same accuracy (they apply the same orthogonal transformations in
    another scaling). ``edges`` are the block offsets: the forgetting factor g scales
    the weights d once per block, at its first row (blocks of one row: per-sample RLS).
    ``weights`` are the rows' precision weights (Gentleman's row weights: a row of weight
    0 changes nothing); ``moments`` (a dict of :data:`~.moments.MOMENT_DIMS`) are added
    the rows' moments; ``variance`` records diag((RᵀR)⁻¹) at every recorded step.
    ``W`` is copied, never modified. Returns a :class:`GivensFold`; its ``diag``, when
    ``diagnostics`` is a dict (``count``, ``sum``, ``sumsq``, ``last_residual``,
    ``last_error``: running recursive residual sums, updated for rows numbered
    ``rows_before + r >= count_from``), holds the new diagnostics and their values at each
    recorded step. After x_t is rotated in, the target entries left over are the a-priori
    errors e_t and the row's weight is γ_t², so the standardised recursive residual is
    w_t = γ_t·e_t.
    """
    dtype = W.dtype
    W = np.array(W, dtype=dtype, order="C")
    X = np.ascontiguousarray(X, dtype=dtype)
    Y = np.ascontiguousarray(Y, dtype=dtype)
    edges = np.ascontiguousarray(edges, dtype=np.int64)
    p = W.shape[0]
    K = p - n
    nb = edges.shape[0] - 1
    steps = np.arange(first_step, first_step + nb, dtype=np.int64)
    recorded = steps % record_every == 0
    steps = steps[recorded]
    starts = np.zeros(int(edges[-1]), dtype=np.bool_)
    starts[edges[:-1][np.diff(edges) > 0]] = True
    stops = np.append(edges[1:][recorded], edges[-1]).astype(np.int64)
    coefs = np.empty((steps.size, n, K), dtype=dtype)
    ratios = np.empty(steps.size, dtype=np.float64)
    use = diagnostics is not None
    rr = np.zeros((4, K), dtype=dtype)
    count = np.zeros(1, dtype=np.int64)
    if use:
        rr[0], rr[1] = diagnostics["sum"], diagnostics["sumsq"]
        rr[2], rr[3] = diagnostics["last_residual"], diagnostics["last_error"]
        count[0] = int(diagnostics["count"])
    rec_rr = np.empty((steps.size if use else 0, 4, K), dtype=dtype)
    rec_count = np.empty(steps.size if use else 0, dtype=np.int64)
    psi = np.empty((n, K), dtype=dtype)
    w = (np.zeros(0, dtype) if weights is None
         else np.ascontiguousarray(weights, dtype=dtype))
    mom = np.zeros(0, np.float64)  # moments are kept in float64 whatever the dtype
    if moments is not None:
        mom = np.concatenate([[float(moments["nobs"]), moments["sum_weights"],
                               moments["sum_log_weights"]],
                              moments["feature_sums"]]).astype(np.float64)
    rec_var = np.empty((steps.size if variance else 0, n), dtype=dtype)
    from streamlsq.kernels.recursions.givens import givens_kernel

    givens_kernel(W, X, Y, starts, stops, dtype.type(forgetting), n, rows_before, count_from,
                  use, rr, count, coefs, rec_rr, rec_count, ratios, psi, w, mom, rec_var)
    diag = None
    if use:
        diag = {
            "final": {"count": np.int64(count[0]), "sum": rr[0].copy(), "sumsq": rr[1].copy(),
                      "last_residual": rr[2].copy(), "last_error": rr[3].copy()},
            "count": rec_count, "sum": rec_rr[:, 0], "sumsq": rec_rr[:, 1],
            "last_residual": rec_rr[:, 2], "last_error": rec_rr[:, 3],
        }
    out_moments = None
    if moments is not None:
        out_moments = {"nobs": np.int64(round(float(mom[0]))), "sum_weights": np.float64(mom[1]),
                       "sum_log_weights": np.float64(mom[2]), "feature_sums": mom[3:].copy()}
    return GivensFold(W, steps, coefs, ratios, diag, psi, out_moments,
                      rec_var if variance else None)


# ---------------------------------------------------------------------------
# the recursion in square-root form
# ---------------------------------------------------------------------------
#: diagnostics state arrays -> names of the per-step diagnostics recorded from them
DIAGNOSTIC_NAMES = {
    "rr_count": "recursive_count",
    "rr_sum": "recursive_sum",
    "rr_sumsq": "recursive_sumsq",
    "rr_last": "recursive_residual",
    "pe_last": "prediction_error",
}
_DIAG_KEYS = {"count": "rr_count", "sum": "rr_sum", "sumsq": "rr_sumsq",
              "last_residual": "rr_last", "last_error": "pe_last"}


def digits_trusted(kappa: float, power: int, dtype) -> float:
    """−log10 of the relative error bound ε·κ^power of ψ (at most the digits of ``dtype``):
    the significant digits of the coefficients a form of KF4LLS keeps on rows of
    condition number κ (power 1: the QR form, 2: the normal equations)."""
    eps = np.finfo(dtype).eps
    return float(-np.log10(eps) if kappa <= 1 else -np.log10(min(1.0, eps * kappa**power)))


def decay_weights(edges: np.ndarray, start: int, stop: int, factor: float, dtype) -> np.ndarray:
    """Row weights factor^(stop − j) for the rows of blocks j = start+1..stop (``edges``
    their offsets): the forgetting of the blocks of an interval as seen from its end."""
    counts = np.diff(edges[start:stop + 1])
    return np.repeat(factor ** np.arange(stop - start - 1, -1, -1, dtype=dtype), counts)


def interval_summaries(form, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                       cuts, weights: np.ndarray | None = None) -> list[dict]:
    """The scan form's summaries of one piece, one per interval between cuts: the form's
    ``rows_summary`` of the interval's rows, weighted by its ``interval_weights`` (the
    forgetting of its blocks and the rows' precision ``weights``), with the interval's
    block and row counts and, for a form that keeps them, the moments of its rows."""
    out = []
    for start, c, a, b in cut_intervals(edges, cuts):
        w = None if weights is None else weights[a:b]
        scales = form.interval_weights(edges, start, c, X.dtype, w)
        summary = form.rows_summary(X[a:b], Y[a:b], scales)  # with Σ w·x for statistics
        if form.statistics:
            summary.update(moments_of_weights(w, b - a))
        elif form.counts:
            summary["nobs"] = positive_rows(w, b - a)
        out.append({**summary, "blocks": np.int64(c - start), "rows": np.int64(b - a)})
    return out


def scan_moments(info: dict, summaries: list[dict]) -> list[dict]:
    """The moments after each summary of the scan form: the prefix sums of the summaries'
    moments from those of ``info``."""
    running = {k: info[k] for k in MOMENT_DIMS}
    out = []
    for s in summaries:
        running = add_moments(running, s)
        out.append(running)
    return out


def check_unweighted_diagnostics(form, weights) -> None:
    """Refuse row weights on a form that records recursive residuals (they are those of
    rows of equal weight)."""
    if weights is not None and form.diagnostics:
        raise must_be("diagnostics", "False with row weights or dropped rows (the recursive "
                      "residuals are those of rows of equal weight)", True)


def compact_variance(W: np.ndarray, n: int) -> np.ndarray:
    """diag((RᵀR)⁻¹) = Σ_k (U⁻¹)_ik² / d_k from the compact form W = (d, U) of the factor
    R = D^½U (:func:`to_compact`; inf where R is singular), with U⁻¹ from LAPACK's
    triangular inverse (``trtri``, unit diagonal: it reads W's strict upper triangle).

    Not the compiled back substitution the Givens kernel uses inside its loop: a first
    call of a compiled function costs every process about 0.2 s of Numba's start
    (measured), more than a whole fit of 10⁵ rows takes, and a fit that records its steps
    by block QR needs no other compiled code; the LAPACK call costs about 5 µs more per
    recorded step at n = 21 and less from n ≈ 60 (``docs/performance.md#startup``)."""
    if n == 0:
        return np.empty(0)
    W = np.asarray(W, np.float64)[:n, :n]
    inverse, info = sla.lapack.dtrtri(W, lower=0, unitdiag=1)
    if info != 0:  # pragma: no cover - a unit triangular matrix is never singular
        raise np.linalg.LinAlgError(f"trtri failed (info={info})")
    np.fill_diagonal(inverse, 1.0)
    with np.errstate(all="ignore"):
        # the terms k ≥ i only: below the diagonal 0/d_k would be NaN where d_k = 0
        return np.triu(inverse ** 2 / np.diag(W)).sum(axis=1)


def gram_variance(H: np.ndarray) -> np.ndarray:
    """diag(H⁻¹) of a symmetric positive definite H, compiled (its square-root-free
    Cholesky factor, then :func:`compact_variance`; inf when H is singular)."""
    n = H.shape[0]
    W = np.zeros((n, n))
    from streamlsq.kernels.recursions.givens import ldl_compact

    ldl_compact(np.ascontiguousarray(H, np.float64), W)
    return compact_variance(W, n)


def normalized_variance(R: np.ndarray) -> np.ndarray:
    """diag((RᵀR)⁻¹) by a triangular solve (inf when R is singular): the variances of the
    coefficients in units of σ² (the diagonal of statsmodels' ``normalized_cov_params``)."""
    n = R.shape[0]
    if n and _rcond(R) == 0.0:
        return np.full(n, np.inf)
    with np.errstate(all="ignore"):
        inverse = sla.solve_triangular(R, np.eye(n, dtype=R.dtype), check_finite=False)
    return (inverse**2).sum(axis=1)


class SqrtInfoLS:
    """KF4LLS / RLS in square-root information form: the ``solver="qr"`` form of
    :class:`~streamlsq.kernels.kf4lls.KF4LLS` (the other one is
    :class:`~streamlsq.kernels.recursions.kf4lls.NormalEquationsLS`, with the same
    methods).

    State: ``R`` (n, n) upper triangular, ``z`` (n, K) (R ψ), ``S`` (K, K) upper
    triangular (the factor of the weighted residual cross-products), ``W`` the same
    augmented factor in square-root-free form (:func:`to_compact`: what the compiled
    per-row kernel works on, kept so that a run cut into folds anywhere gives the
    numbers of one fold), ``psi`` (n, K),
    ``rows``, ``blocks``; with ``diagnostics`` also the running sums of the recursive
    residuals of the rows (``rr_count``, ``rr_sum``, ``rr_sumsq``) and the standardised
    residual and prediction error of the last row (``rr_last``, ``pe_last``), per
    target. A row's recursive residual is counted once the rows before it can determine
    ψ: from row n + 1 with ``ridge=0`` (as statsmodels' ``RecursiveLS``, whose first n
    rows are its diffuse start), from the first row with a ridge start.

    With ``statistics`` (least squares: g = 1 and no ridge) the state also keeps the
    moments of the rows of :mod:`.moments` (``nobs``, ``sum_weights``,
    ``sum_log_weights``, ``feature_sums``), and every recorded step the diagonal of
    (RᵀR)⁻¹ (``normalized_variance``, a diagnostic); :meth:`regression` hands the factor
    to :mod:`streamlsq.kernels.inference`. With ``identify`` a factor that is singular
    to working precision is not refused: ψ is 0 and :meth:`identified` False until the
    rows seen identify the coefficients (the steps before are not recorded).

    Every method takes the rows' precision weights (``weights``: each row scaled by √w,
    statsmodels' ``WLS``; a row of weight 0 changes nothing but the count of rows).
    Without statistics, ``count`` keeps the rows of positive weight (``nobs``,
    :data:`~.moments.COUNT_DIMS`), so that a fit with row weights can tell that it saw
    none.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.sqrtinfo import SqrtInfoLS
    >>> form = SqrtInfoLS(ridge=0.0, forgetting=0.5)  # at step 2 the first row weighs ½
    >>> state = form.init(1, 1)
    >>> for y in (1.0, 4.0):
    ...     state = form.update(state, np.ones((1, 1)), np.array([[y]]))
    >>> round(float(state["R"][0, 0]) ** 2, 12), round(float(form.coef(state)[0, 0]), 12)
    (1.5, 3.0)
    """

    #: the rounding error of ψ grows like ε·κ(X)^error_power
    error_power = 1

    def __init__(self, ridge: float, forgetting: float, coef0=None, diagnostics=False,
                 statistics=False, identify=False, count=False):
        self.ridge = float(ridge)
        self.forgetting = float(forgetting)
        self.coef0 = coef0
        self.diagnostics = bool(diagnostics)
        self.statistics = bool(statistics)
        self.identify = bool(identify)
        self.counts = bool(count) and not self.statistics  # the moments count otherwise

    # -- layout ----------------------------------------------------------------
    def state_dims(self) -> dict[str, tuple[str, ...]]:
        dims = {
            "R": ("feature", "feature_"),
            "z": ("feature", "target"),
            "S": ("target", "target_"),
            "W": ("factor", "factor_"),
            "psi": ("feature", "target"),
            "rows": (),
            "blocks": (),
        }
        if self.diagnostics:
            dims.update(rr_count=(), rr_sum=("target",), rr_sumsq=("target",),
                        rr_last=("target",), pe_last=("target",))
        if self.statistics:
            dims.update(MOMENT_DIMS)
        if self.counts:
            dims.update(COUNT_DIMS)
        return dims

    @staticmethod
    def factor(state) -> np.ndarray:
        """The augmented factor [[R, z], [0, S]] of a state."""
        R, z, S = state["R"], state["z"], state["S"]
        n, K = z.shape
        A = np.zeros((n + K, n + K), dtype=R.dtype)
        A[:n, :n], A[:n, n:], A[n:, n:] = R, z, S
        return A

    @staticmethod
    def _split(A: np.ndarray, n: int, W: np.ndarray | None = None) -> dict:
        """The state arrays of the augmented factor A (and its compact form W, derived
        from A unless given)."""
        return {"R": A[:n, :n].copy(), "z": A[:n, n:].copy(), "S": A[n:, n:].copy(),
                "W": to_compact(A) if W is None else W}

    def _count_from(self, n_features: int) -> int:
        return 0 if self.ridge > 0 else int(n_features)

    def _moments(self, state) -> dict | None:
        if not self.statistics:
            return None
        missing = [k for k in MOMENT_DIMS if k not in state]
        if missing:
            raise ValueError(f"the state has no '{missing[0]}': it is not a state of a "
                             "least-squares form with statistics (g = 1, no ridge)")
        return {k: state[k] for k in MOMENT_DIMS}

    def condition(self, state: dict) -> float:
        """κ of the (weighted) rows seen: κ₂(R)."""
        return factor_condition(state["R"])

    def digits(self, kappa: float, dtype) -> float:
        """The significant digits of ψ on rows of condition number κ (ε·κ lost)."""
        return digits_trusted(kappa, self.error_power, dtype)

    # -- identification ----------------------------------------------------------
    def identified(self, state: dict) -> bool:
        """Whether the rows seen identify the coefficients (always, unless ``identify``:
        a form that refuses a singular factor has none to report)."""
        if not self.identify:
            return True
        return factor_identified(state["R"], state.get("rows"))

    def check_identified(self, state: dict) -> None:
        """Refuse (:class:`SingularMatrixError`, with the numerical rank) a state whose
        factor is singular to working precision."""
        check_factor(state["R"], state["rows"])

    def _coef(self, R: np.ndarray, z: np.ndarray, rows: int) -> np.ndarray:
        """ψ = R⁻¹z; with ``identify``, 0 while R is singular (not refused)."""
        if self.identify and not self.identified({"R": R, "rows": rows}):
            return np.zeros_like(z)
        return solve_factor(R, z, rows)

    def _kernel_coef(self, R: np.ndarray, psi: np.ndarray, rows: int) -> np.ndarray:
        """The compiled kernel's ψ after its last row, checked: refused when R is singular,
        or with ``identify`` 0 while it is."""
        if self.identify:
            return psi if self.identified({"R": R, "rows": rows}) else np.zeros_like(psi)
        check_factor(R, rows)
        return psi

    def regression(self, state: dict):
        """The least-squares problem the state has factored
        (:class:`~streamlsq.kernels.inference.RegressionFactor`: R, z = Rψ, the residual
        sums of squares diag(SᵀS), ψ and the moments), for the statistics of the fit."""
        from streamlsq.kernels.inference.factor import RegressionFactor

        S = np.asarray(state["S"], np.float64)
        return RegressionFactor.of(state, R=state["R"], z=state["z"],
                                   ssr=(S**2).sum(axis=0))

    # -- sequential form ---------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> dict:
        dtype = np.dtype(dtype)
        root = math.sqrt(self.ridge)
        R = root * np.eye(n_features, dtype=dtype)
        if self.coef0 is None:
            psi = np.zeros((n_features, n_targets), dtype=dtype)
        else:
            psi = np.array(self.coef0, dtype=dtype).reshape(n_features, n_targets)
        z = (root * psi).astype(dtype)
        S = np.zeros((n_targets,) * 2, dtype)
        A = self.factor({"R": R, "z": z, "S": S})
        state = {"R": R, "z": z, "S": S, "W": to_compact(A), "psi": psi,
                 "rows": np.int64(0), "blocks": np.int64(0)}
        if self.diagnostics:
            zeros = np.zeros(n_targets, dtype=dtype)
            state.update(rr_count=np.int64(0), rr_sum=zeros, rr_sumsq=zeros.copy(),
                         rr_last=zeros.copy(), pe_last=zeros.copy())
        if self.statistics:
            state.update(zero_moments(n_features))
        if self.counts:
            state["nobs"] = np.int64(0)
        return state

    def _diag_in(self, state) -> dict | None:
        if not self.diagnostics:
            return None
        return {k: state[v] for k, v in _DIAG_KEYS.items()}

    def update(self, state: dict, X: np.ndarray, Y: np.ndarray,
               weights: np.ndarray | None = None) -> dict:
        """One block: A ← factor of [√g·A; √w·[X Y]]; ψ = R⁻¹z (refused when R is
        singular, unless ``identify``)."""
        check_unweighted_diagnostics(self, weights)
        n = state["R"].shape[0]
        new = {}
        if self.diagnostics or X.shape[0] <= GIVENS_MAX_ROWS:
            edges = np.array([0, X.shape[0]], dtype=np.int64)
            res = givens_fold(
                state["W"], X, Y, edges, self.forgetting, n,
                record_every=np.iinfo(np.int64).max, rows_before=int(state["rows"]),
                diagnostics=self._diag_in(state), count_from=self._count_from(n),
                weights=weights, moments=self._moments(state))
            if res.diag is not None:
                new.update({_DIAG_KEYS[k]: v for k, v in res.diag["final"].items()})
            new.update(self._split(from_compact(res.W), n, res.W))
            new["psi"] = self._kernel_coef(new["R"], res.psi, int(state["rows"]) + X.shape[0])
            new.update(res.moments or {})
        else:
            A = self.factor(state)
            sums = np.zeros(n) if self.statistics else None
            A = qr_append(A, X.astype(A.dtype, copy=False), Y.astype(A.dtype, copy=False),
                          math.sqrt(self.forgetting),
                          weights=None if weights is None else np.sqrt(weights), sums=sums)
            new.update(self._split(A, n))
            new["psi"] = self._coef(new["R"], new["z"], int(state["rows"]) + X.shape[0])
            if self.statistics:
                new.update(add_moments(state, {**moments_of_weights(weights, X.shape[0]),
                                               "feature_sums": sums}))
        new["rows"] = np.int64(state["rows"] + X.shape[0])
        new["blocks"] = np.int64(state["blocks"] + 1)
        if self.counts:
            new["nobs"] = np.int64(state["nobs"] + positive_rows(weights, X.shape[0]))
        return {k: new[k] for k in state}  # the state's own order of arrays

    def coef(self, state: dict) -> np.ndarray:
        return state["psi"]

    def state_diagnostics(self, state: dict) -> dict:
        out = {}
        if self.diagnostics:
            out.update({DIAGNOSTIC_NAMES[k]: state[k] for k in DIAGNOSTIC_NAMES})
        if self.statistics:
            out["normalized_variance"] = compact_variance(state["W"], state["R"].shape[0])
        return out

    def fold(self, state, X, Y, edges, first_step, record_every, rows_before=0, weights=None):
        """``Recursion.fold`` for this form: runs of small blocks (and every block when
        diagnostics are on) by the compiled Givens kernel, large blocks by block QR."""
        check_unweighted_diagnostics(self, weights)
        edges = np.asarray(edges, dtype=np.int64)
        nb = len(edges) - 1
        sizes = np.diff(edges)
        record = StepRecord(first_step, record_every, rows_before)
        j = 0
        if nb and first_step == 1 and int(state["blocks"]) == 0 and not self.identify:
            # the first block on its own: a singular start is refused at step 1, as the
            # normal form refuses it
            state = fold_blocks(self, state, X, Y, edges, record, 0, 1, weights)
            j = 1
        # blocks folded one by one by block QR (the others go in runs to the Givens kernel)
        big = (np.zeros(0, np.int64) if self.diagnostics
               else np.flatnonzero(sizes > GIVENS_MAX_ROWS))
        while j < nb:
            if self.diagnostics or sizes[j] <= GIVENS_MAX_ROWS:
                following = np.searchsorted(big, j)
                k = int(big[following]) if following < big.size else nb
                state = self._givens_run(state, X, Y, edges, j, k, record, weights)
            else:
                k = j + 1
                state = fold_blocks(self, state, X, Y, edges, record, j, k, weights)
            j = k
        return record.result(state, state["psi"], self.state_diagnostics(state))

    def _givens_run(self, state, X, Y, edges, j, k, record: StepRecord, weights=None):
        """Blocks j..k−1 of the fold by the compiled Givens kernel, recording the due steps
        (those whose factor identifies ψ)."""
        n = state["R"].shape[0]
        a, b = int(edges[j]), int(edges[k])
        first_step = record.first_step + j
        res = givens_fold(
            state["W"], X[a:b], Y[a:b], edges[j:k + 1] - a, self.forgetting, n, first_step,
            record.record_every, record.rows_before + a, self._diag_in(state),
            self._count_from(n), weights=None if weights is None else weights[a:b],
            moments=self._moments(state), variance=self.statistics)
        # the rows seen at each recorded step set its tolerance (the rule of column_rank;
        # the equilibrated diagonal bounds σ_min/σ_max from above, so a step below it is
        # refused as column_rank refuses it)
        seen = (int(state["rows"]) - a
                + edges[np.asarray(res.steps, np.int64) - record.first_step + 1])
        tolerance = np.array([rank_tolerance(m, n, res.W.dtype) for m in seen])
        bad = (res.ratios < tolerance) | ~np.isfinite(res.coefs).all(axis=(1, 2))
        if bad.any() and not self.identify:
            step = int(res.steps[np.argmax(bad)])
            raise SingularMatrixError(
                f"triangular factor of order {n} is singular to working precision at "
                f"step {step}", rank=None, size=n)
        new = self._split(from_compact(res.W), n, res.W)
        new["psi"] = self._kernel_coef(new["R"], res.psi,  # as the recorded steps' ψ
                                       int(state["rows"]) + (b - a))
        new["rows"] = np.int64(state["rows"] + (b - a))
        new["blocks"] = np.int64(state["blocks"] + k - j)
        if self.counts:
            new["nobs"] = np.int64(state["nobs"] + positive_rows(
                None if weights is None else weights[a:b], b - a))
        if res.diag is not None:
            new.update({_DIAG_KEYS[name]: v for name, v in res.diag["final"].items()})
        new.update(res.moments or {})
        for i, step in enumerate(res.steps):
            if bad[i]:  # not identified yet: not recorded
                continue
            recorded = {} if res.diag is None else {
                DIAGNOSTIC_NAMES[_DIAG_KEYS[name]]: res.diag[name][i] for name in _DIAG_KEYS}
            if res.variances is not None:
                recorded["normalized_variance"] = res.variances[i]
            record.add(int(step), res.coefs[i],
                       int(edges[int(step) - record.first_step + 1]), recorded)
        return {name: new[name] for name in state}

    # -- information (scan) form -------------------------------------------
    def to_info(self, state: dict) -> dict:
        keys = ("R", "z", "S", "rows", "blocks") + (tuple(MOMENT_DIMS) if self.statistics
                                                     else ()) + (tuple(COUNT_DIMS)
                                                                 if self.counts else ())
        return {k: state[k] for k in keys}

    def interval_weights(self, edges, start, stop, dtype, weights=None) -> np.ndarray | None:
        """Row weights of an interval's rows: √(g^(stop−j)) for block j, times √w for the
        rows' precision ``weights`` (None when both are 1)."""
        decay = None if self.forgetting == 1.0 else decay_weights(
            edges, start, stop, np.sqrt(self.forgetting), np.float64).astype(dtype)
        if weights is None:
            return decay
        root = np.sqrt(np.asarray(weights, np.float64)).astype(dtype)
        return root if decay is None else decay * root

    def rows_summary(self, X, Y, weights=None) -> dict:
        """What the scan form keeps of some rows: the triangular factor A of [X Y] (rows
        weighted by ``weights``), and for the statistics Σ weights²·x."""
        sums = np.zeros(X.shape[1]) if self.statistics else None
        out = {"A": rows_factor(X, Y, weights, slice_rows=QR_ROWS, sums=sums)}
        return out if sums is None else {**out, "feature_sums": sums}

    @staticmethod
    def combine(parts, info: dict) -> dict:
        """The :meth:`rows_summary` of the rows of several summaries, each scaled by its
        row weight w: the factor of [w₁·A₁; w₂·A₂; …] (in the dtype of the information
        state ``info`` it will be merged into)."""
        dtype = info["R"].dtype
        return {"A": merge_factors(*(w * s["A"].astype(dtype, copy=False) for w, s in parts))}

    def summarize(self, X, Y, edges, cuts, weights=None) -> list[dict]:
        """The factor of each interval's rows, weighted by √(g^(c−j)) for block j (and √w
        for a row of precision weight w)."""
        return interval_summaries(self, X, Y, edges, cuts, weights)

    def scan(self, info: dict, summaries: list[dict]) -> list[dict]:
        """In-order prefix over the interval factors, merged in a fixed binary tree.

        The interval factors are combined as a binary counter over their index (1+2,
        3+4, (1+2)+(3+4), …; the older factor of a merge scaled by √(g^m), m the blocks
        of the newer); the prefix after interval i is the initial factor merged with the
        O(log i) tree nodes that cover intervals 1..i, reusing the merge of the nodes
        that did not change. Each prefix goes through O(log i) merges rather than i (a
        chain), so its rounding error stays near that of one QR of all its rows, and the
        numbers depend only on the sequence of intervals, not on the workers.
        """
        g = self.forgetting
        n = info["R"].shape[0]
        A0 = self.factor(info)

        def decay(m):
            return math.sqrt(g ** m) if g != 1.0 else 1.0

        rows, blocks = int(info["rows"]), int(info["blocks"])
        moments = scan_moments(info, summaries) if self.statistics else None
        nobs = int(info["nobs"]) if self.counts else 0
        nodes: list[tuple[int, np.ndarray, int]] = []  # (level, factor, blocks), oldest first
        prefixes: list[np.ndarray] = []  # prefixes[j]: A0 merged with nodes[0..j]
        out = []
        for i, s in enumerate(summaries):
            F, m, level = s["A"].astype(A0.dtype, copy=False), int(s["blocks"]), 0
            while nodes and nodes[-1][0] == level:
                _, older, m_older = nodes.pop()
                prefixes.pop()
                F = merge_factors(older, F, scale=decay(m))
                m += m_older
                level += 1
            A = merge_factors(prefixes[-1] if prefixes else A0, F, scale=decay(m))
            nodes.append((level, F, m))
            prefixes.append(A)
            rows += int(s["rows"])
            blocks += int(s["blocks"])
            nobs += int(s["nobs"]) if self.counts else 0
            out.append({**self._split(A, n), "rows": np.int64(rows), "blocks": np.int64(blocks),
                        **(moments[i] if moments is not None else {}),
                        **({"nobs": np.int64(nobs)} if self.counts else {})})
        return out

    def finish(self, info: dict) -> dict:
        """ψ = R⁻¹z at one step (a triangular solve)."""
        state = {"R": info["R"], "z": info["z"], "S": info["S"],
                 "W": to_compact(self.factor(info)),
                 "psi": self._coef(info["R"], info["z"], int(info["rows"])),
                 "rows": info["rows"], "blocks": info["blocks"]}
        if self.statistics:
            state.update({k: info[k] for k in MOMENT_DIMS})
        if self.counts:
            state["nobs"] = info["nobs"]
        return state
