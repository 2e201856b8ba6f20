"""Heteroscedasticity- and cluster-robust covariances of a least-squares fit, from sums
over chunks of rows.

With x̃ᵢ = √wᵢ·xᵢ and ẽᵢ = √wᵢ·(yᵢ − xᵢᵀψ) (statsmodels' whitened rows and residuals),
the sandwich covariance is

    V = c · (X̃ᵀX̃)⁻¹ M (X̃ᵀX̃)⁻¹ = c · R⁻¹R⁻ᵀ M R⁻¹R⁻ᵀ   (triangular solves with R)

with the "meat" M and the small-sample factor c (MacKinnon & White 1985; Cameron &
Miller 2015):

    HC0: M = Σ ẽᵢ² x̃ᵢx̃ᵢᵀ,                      c = 1
    HC1: the same,                              c = n / (n − k)
    HC2: M = Σ ẽᵢ²/(1 − hᵢ) x̃ᵢx̃ᵢᵀ,               c = 1
    HC3: M = Σ ẽᵢ²/(1 − hᵢ)² x̃ᵢx̃ᵢᵀ,              c = 1
    cluster: M = Σ_g s_g s_gᵀ, s_g = Σ_{i∈g} ẽᵢx̃ᵢ,  c = G/(G − 1) · (n − 1)/(n − k)

where hᵢ = x̃ᵢᵀ(X̃ᵀX̃)⁻¹x̃ᵢ = ‖R⁻ᵀx̃ᵢ‖² is the leverage of row i (the rows of X̃R⁻¹: one
triangular solve and one product for a chunk of rows). M is a sum over rows, so each
chunk contributes its own sum (:func:`hc_meat`) and the sums add up
(:func:`combine_meats`); for clusters each chunk sums the scores of its groups
(:func:`cluster_score_sums`) and the per-chunk sums are merged by label
(:func:`merge_score_sums`), whatever chunks a group spans. As in statsmodels, inference
with a robust covariance uses the normal distribution (``use_t=False``) and the Wald F
test of the slopes has df_resid denominator degrees of
freedom (G − 1 for clusters: ``df_resid_inference``).
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.inference import COV_TYPES
from streamlsq.kernels.inference.classical import (
    classical_statistics,
    critical_value,
    two_sided_pvalues,
)
from streamlsq.kernels.inference.factor import RegressionFactor, constant_in_span
from streamlsq.kernels.inference.wald import wald_test

__all__ = ["LeverageOneError", "SingularCovarianceError", "cluster_meat", "cluster_score_sums",
           "combine_meats", "hc_meat", "merge_score_sums", "robust_statistics", "sandwich"]

#: a leverage within this of 1 is 1 to rounding (its computed residual and 1 − h are
#: then both rounding errors, and HC2/HC3 divide the one by the other)
LEVERAGE_ONE = float(np.sqrt(np.finfo(np.float64).eps))


class LeverageOneError(ValueError):
    """HC2/HC3 of rows one of which has leverage 1 (``row``: its offset in the rows
    given; ``leverage``: h as computed). The fit passes through such a row: its residual
    is 0 and HC2/HC3 scale it by 1/(1 − h), 0/0. statsmodels returns the quotient of two
    rounding errors there; we refuse, naming the row."""

    def __init__(self, row: int, leverage: float, cov_type: str):
        self.reason = (
            f"has leverage 1 (h = {leverage:.17g}): the fit passes through it, so its "
            f"residual is 0 and {cov_type} divides it by 1 − h = 0 (a quotient of rounding "
            "errors); leave the row out, or use --cov-type nonrobust")
        super().__init__(f"row {row} {self.reason}")
        self.row, self.leverage, self.cov_type = int(row), float(leverage), cov_type

    def __reduce__(self):
        return (type(self), (self.row, self.leverage, self.cov_type))


def _whitened(X, Y, coef, weights):
    """(x̃, ẽ) = (√w·x, √w·(y − xᵀψ)) of a chunk of rows."""
    X = np.asarray(X, np.float64)
    E = np.asarray(Y, np.float64) - X @ coef
    if weights is None:
        return X, E
    root = np.sqrt(np.asarray(weights, np.float64))[:, None]
    return X * root, E * root


def _inverse_factor(R: np.ndarray) -> np.ndarray:
    """R⁻¹, from the triangular solve R·T = I: the leverages of a slice of rows are then
    one matrix product (3x the speed of a triangular solve with every row as a
    right-hand side, measured on 600,000 rows of 21 columns; the same ε·κ(R) rounding)."""
    R = np.asarray(R, np.float64)
    return sla.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)


def _leverages(T: np.ndarray, Xw: np.ndarray) -> np.ndarray:
    """hᵢ = ‖R⁻ᵀx̃ᵢ‖² of each row of ``Xw``: the squared norms of the rows of X̃R⁻¹."""
    Q = Xw @ T
    return np.einsum("ij,ij->i", Q, Q)


#: rows of a slice in :func:`hc_meat`: its row-sized temporaries (residuals, weighted
#: rows, their scaled copy, leverages) stay a few MB whatever the size of the chunk, so
#: the robust pass needs little more memory than its read (with whole 24 MB pieces they
#: took 450 MB workers to their limit)
SLICE_ROWS = 16_384


class SingularCovarianceError(ValueError):
    """A robust covariance singular in the slopes, so their joint Wald F test has no
    value: a coefficient that one row alone identifies (leverage 1: its residual is 0, so
    the meat has nothing in its direction), or one group alone under clustering."""


def hc_meat(X, Y, coef, R, cov_type: str, weights=None) -> dict:
    """The meat Σ ẽᵢ²·aᵢ·x̃ᵢx̃ᵢᵀ of a chunk of rows (aᵢ = 1, 1/(1−hᵢ) or 1/(1−hᵢ)²) per
    target, (k, k, K), and the chunk's rows of positive weight (``nobs``). A row of
    leverage 1 (to :data:`LEVERAGE_ONE`) under HC2/HC3 raises :class:`LeverageOneError`
    (as many rows as coefficients: every row).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.robust import hc_meat
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> part = hc_meat(X, np.array([[0.0], [2.0], [3.0]]), np.zeros((2, 1)), np.eye(2), "HC0")
    >>> part["meat"][:, :, 0].tolist(), part["nobs"]  # Σ e² x xᵀ with e = y
    ([[13.0, 22.0], [22.0, 40.0]], 3)
    """
    X = np.asarray(X)
    K = np.shape(Y)[1]
    T = _inverse_factor(R) if cov_type in ("HC2", "HC3") else None
    meat = np.zeros((X.shape[1], X.shape[1], K))
    for a in range(0, len(X), SLICE_ROWS):
        b = a + SLICE_ROWS
        Xw, Ew = _whitened(X[a:b], Y[a:b], coef, None if weights is None else weights[a:b])
        factor = 1.0
        if T is not None:
            h = _leverages(T, Xw)
            one = np.flatnonzero(1.0 - h <= LEVERAGE_ONE)
            if one.size:  # (a row of weight 0 has leverage 0)
                raise LeverageOneError(a + int(one[0]), float(h[one[0]]), cov_type)
            factor = 1.0 / (1.0 - h) if cov_type == "HC2" else 1.0 / (1.0 - h) ** 2
        for t in range(K):
            meat[:, :, t] += (Xw * (Ew[:, t] ** 2 * factor)[:, None]).T @ Xw
    nobs = len(X) if weights is None else int((np.asarray(weights) > 0).sum())
    return {"meat": meat, "nobs": nobs}


def combine_meats(*parts: dict) -> dict:
    """The sum of chunks' meats (in the order given: the order of the additions is the
    caller's)."""
    meat = parts[0]["meat"].copy()
    for p in parts[1:]:
        meat += p["meat"]
    return {"meat": meat, "nobs": int(sum(p["nobs"] for p in parts))}


def cluster_score_sums(X, Y, coef, labels, weights=None) -> dict:
    """The score sums s_g = Σ_{i∈g} ẽᵢx̃ᵢ of the groups of a chunk of rows: ``labels``
    (sorted, those of the rows of positive weight) and ``sums`` (G, k, K).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.robust import cluster_score_sums
    >>> X = np.ones((3, 1)); Y = np.array([[1.0], [2.0], [4.0]])
    >>> part = cluster_score_sums(X, Y, np.zeros((1, 1)), np.array(["b", "a", "b"]))
    >>> part["labels"].tolist(), part["sums"][:, 0, 0].tolist()
    (['a', 'b'], [2.0, 5.0])
    """
    Xw, Ew = _whitened(X, Y, coef, weights)
    labels = np.asarray(labels)
    if weights is not None:  # a dropped row (weight 0) belongs to no group
        keep = np.asarray(weights) > 0
        Xw, Ew, labels = Xw[keep], Ew[keep], labels[keep]
    groups, inverse = np.unique(labels, return_inverse=True)
    sums = np.zeros((len(groups), Xw.shape[1], Ew.shape[1]))
    _add_scores(inverse.ravel().astype(np.int64), np.ascontiguousarray(Xw),
                np.ascontiguousarray(Ew), sums)
    return {"labels": groups, "sums": sums}


@numba.njit(cache=True, nogil=True)
def _add_scores(group, Xw, Ew, sums):  # pragma: no cover - compiled
    """sums[g] += x̃ᵢẽᵢᵀ for each row i of group g = group[i], in row order (one pass,
    no array of scores: 10x np.add.at's speed, measured on 600,000 rows of 21 columns)."""
    for i in range(Xw.shape[0]):
        g = group[i]
        for t in range(Ew.shape[1]):
            e = Ew[i, t]
            for a in range(Xw.shape[1]):
                sums[g, a, t] += Xw[i, a] * e


def merge_score_sums(*parts: dict) -> dict:
    """The score sums of several chunks, merged by label: the sums of a group that
    several chunks hold are added in the order of the parts."""
    labels = np.concatenate([p["labels"] for p in parts])
    sums = np.concatenate([p["sums"] for p in parts])
    groups, inverse = np.unique(labels, return_inverse=True)
    out = np.zeros((len(groups),) + sums.shape[1:])
    np.add.at(out, inverse.ravel(), sums)
    return {"labels": groups, "sums": out}


def cluster_meat(scores: dict) -> tuple[np.ndarray, int]:
    """M = Σ_g s_g s_gᵀ per target (k, k, K) from merged score sums, and G."""
    sums = scores["sums"]
    meat = np.einsum("gat,gbt->abt", sums, sums)
    return meat, int(sums.shape[0])


def sandwich(R: np.ndarray, meat: np.ndarray) -> np.ndarray:
    """(RᵀR)⁻¹ M (RᵀR)⁻¹ per target, (k, k, K): with T = R⁻¹ (a triangular solve),
    T·(Tᵀ M T)·Tᵀ."""
    T = _inverse_factor(R)
    out = np.empty_like(meat)
    for t in range(meat.shape[2]):
        C = T @ (T.T @ meat[:, :, t] @ T) @ T.T
        out[:, :, t] = 0.5 * (C + C.T)
    return out


def robust_statistics(fac: RegressionFactor, meat: np.ndarray | None, cov_type: str,
                      n_groups: int | None = None, alpha: float = 0.05,
                      constant: int | None = None, *, use_correction: bool | str | None = None,
                      n_panels: int | None = None, two_way: list | None = None) -> dict:
    """The statistics of :func:`~.classical.classical_statistics` with the robust
    covariance ``cov_type`` from the summed ``meat`` (and, for clusters, the number of
    groups): ``cov_params``, ``bse``, ``tvalues``, ``pvalues``, the interval (normal
    quantiles, ``use_t`` False) and the Wald ``fvalue``/``f_pvalue`` of the slopes, as
    statsmodels' ``OLS(...).fit(cov_type=...)`` reports them; the rest (R², SSR, llf, …)
    as for the nonrobust covariance.

    ``HAC`` (the meat of :func:`~.timeseries.hac_meat`) is scaled by n/(n − k) when
    ``use_correction`` (statsmodels' default: not); ``hac-panel`` (the meat of
    :func:`~.timeseries.panel_hac_meat` over ``n_panels`` panels) by n/(n − k) when
    ``use_correction`` is None, True or ``"hac"`` (statsmodels' default), by
    G/(G − 1)·(n − 1)/(n − k) when ``"cluster"``, not when False, its Wald test with
    ``n_panels`` − 1 denominator degrees of freedom; ``hac-groupsum`` (the meat of
    :func:`~.timeseries.series_hac_meat` over ``n_groups`` periods) by
    T/(T − 1)·(n − 1)/(n − k) unless ``use_correction`` is False, its Wald test with
    ``n_panels`` − 1 denominator degrees of freedom (statsmodels counts the panels as the
    runs of increasing time labels); a two-way ``cluster`` takes ``two_way``, the terms
    (meat, G, sign) of :func:`~.timeseries.two_way_terms`, instead of ``meat``.
    ``negative_variance``: the indices of the coefficients whose variance is negative
    (possible for two-way clusters, V_A + V_B − V_A∩B; their ``bse`` is NaN, as
    statsmodels')."""
    if cov_type not in COV_TYPES[1:]:
        raise ValueError(f"cov_type must be one of {', '.join(COV_TYPES[1:])}, got "
                         f"{cov_type!r}")
    out = classical_statistics(fac, alpha, constant)
    k, K = fac.coef.shape
    n = np.float64(fac.nobs)
    correction = 1.0
    df_denom = n - k
    if cov_type == "HC1" or (cov_type == "HAC" and use_correction):
        correction = n / (n - k)
    elif cov_type == "hac-panel":
        G = np.float64(n_panels)
        if use_correction == "cluster":
            correction = G / (G - 1.0) * (n - 1.0) / (n - k)
        elif use_correction is not False:  # None, True, "hac"
            correction = n / (n - k)
        df_denom = G - 1.0
        out["df_resid_inference"] = df_denom
        out["n_groups"] = int(n_panels)
    elif cov_type == "hac-groupsum":
        if use_correction is not False:
            correction = n_groups / (n_groups - 1.0) * (n - 1.0) / (n - k)
        df_denom = n_panels - 1.0
        out["df_resid_inference"] = df_denom
        out["n_groups"] = int(n_panels)
    elif cov_type == "cluster" and two_way is not None:
        df_denom = min(g for _, g, _ in two_way[:2]) - 1.0
        out["df_resid_inference"] = df_denom
        out["n_groups"] = [int(g) for _, g, _ in two_way[:2]]
    elif cov_type == "cluster":
        correction = n_groups / (n_groups - 1.0) * (n - 1.0) / (n - k)
        df_denom = n_groups - 1.0
        out["df_resid_inference"] = df_denom
        out["n_groups"] = int(n_groups)
    if two_way is not None:
        cov = sum(sign * g / (g - 1.0) * (n - 1.0) / (n - k) * sandwich(fac.R, m)
                  for m, g, sign in two_way)
    else:
        cov = correction * sandwich(fac.R, meat)
    variances = np.diagonal(cov, axis1=0, axis2=1).T
    with np.errstate(divide="ignore", invalid="ignore"):
        bse = np.sqrt(variances)
        tvalues = fac.coef / bse
    q = critical_value(alpha, None, False)
    # a two-way covariance is a difference of covariances: a variance can come out
    # negative, and the coefficients it leaves without a standard error are named
    out["negative_variance"] = np.flatnonzero((variances < 0).any(axis=1))
    out.update(cov_params=cov, bse=bse, tvalues=tvalues,
               pvalues=two_sided_pvalues(tvalues, None, False),
               conf_int_lower=fac.coef - q * bse, conf_int_upper=fac.coef + q * bse,
               use_t=False, cov_type=cov_type)
    out["fvalue"], out["f_pvalue"] = _slopes_wald(fac, cov, df_denom, constant,
                                                  definite=two_way is None)
    return out


def _slopes_wald(fac, cov, df_denom, constant, *, definite: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
    """statsmodels' robust F: the Wald test that every coefficient but the constant is 0
    (NaN when the constant is implicit, or when there is no other coefficient).
    ``definite=False`` (two-way clusters): the covariance may be indefinite in the slopes,
    and the test is statsmodels' all the same; NaN (undefined) where it is singular there,
    a difference of covariances that cancelled, not a fault of the rows."""
    k, K = fac.coef.shape
    span = constant_in_span(fac, constant)
    keep = [j for j in range(k) if j != span.index]
    if (span.k_constant and span.index is None) or not keep:
        return np.full(K, np.nan), np.full(K, np.nan)
    restriction = np.eye(k)[keep]
    try:
        tests = [wald_test(fac.coef[:, t], cov[:, :, t], restriction, np.zeros(len(keep)),
                           df_denom, definite=definite) for t in range(K)]
    except ValueError:  # R V Rᵀ singular: wald_test's only refusal once the shapes agree
        if not definite:
            return np.full(K, np.nan), np.full(K, np.nan)
        raise SingularCovarianceError(
            "the robust covariance is singular in the slopes: a coefficient that a single "
            "row (of leverage 1) or a single group alone identifies has no robust standard "
            "error") from None
    return (np.array([w.fvalue for w in tests]), np.array([w.pvalue for w in tests]))
