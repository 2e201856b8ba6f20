"""Iteratively reweighted least squares over chunks of rows: what each chunk contributes
to one IRLS iteration, how contributions combine, and the step and statistics that follow.

With coefficients β, offset o, prior weights (``var_weights`` v and ``freq_weights`` f,
iw = f·v) and binomial trials n (1 elsewhere), each row has

    η = xᵀβ + o,   μ = g⁻¹(η),   w = iw·n / (g'(μ)² V(μ)),   z = η − o + g'(μ)(y − μ),

and the next coefficients solve the weighted least-squares problem min Σ w (z − xᵀβ)²
(McCullagh & Nelder 1989, §2.5; statsmodels' ``GLM._fit_irls``). A chunk contributes its
exact summary of that problem — the triangular factor of [√w·X, √w·z]
(:func:`~streamlsq.kernels.tallqr.rows_factor`, merged by stacking and factoring again),
or the normal equations XᵀWX, XᵀWz (``solver="normal"``) — and, at the same β, the sums
the convergence test and the statistics need: the deviance Σ f·v·d(y, μ, n), Pearson's
χ² Σ iw·n (y − μ)²/V(μ), the rows kept and Σ f. Every sum is a sum over rows, so chunks
combine in any tree and one pass over the rows is one iteration (Lumley's ``biglm``
builds its ``bigglm`` the same way, with a QR update per chunk).

A row whose response is outside the family's support, or whose working weight or response
is not finite, raises :class:`RowError` naming the row in the chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.glm.families import Family, family
from streamlsq.kernels.glm.links import FLOAT_EPS, Link
from streamlsq.kernels.inference._distributions import normal_ppf, normal_sf
from streamlsq.kernels.inference.factor import normalized_cov_params
from streamlsq.kernels.linalg import (
    SingularMatrixError,
    check_column_rank,
    normal_rank_error,
    spd_solve,
)
from streamlsq.kernels.tallqr import rows_factor

__all__ = ["GLMSpec", "IRLSResult", "RowError", "SOLVERS", "combine_robust", "combine_sums",
           "counts_response", "final_sums", "glm_statistics", "irls_sums", "mean_sums",
           "predict_link", "pseudo_rsquared_cs", "pseudo_rsquared_mcf", "robust_cov",
           "robust_sums", "run_irls", "solve_step"]

#: how a chunk summarises its weighted least-squares problem
SOLVERS = ("qr", "normal")
#: a fitted probability this close to 0 or 1 is "numerically 0 or 1" (R's ``glm.fit``:
#: 10 ε), the mark of coefficients running off under separation
BOUNDARY = 10 * FLOAT_EPS
#: rows of a slice of the per-row IRLS quantities (8,192 rows: a dozen float64 temporaries
#: of 64 KiB each stay in a core's L2 cache)
IRLS_SLICE_ROWS = 8192


class RowError(ValueError):
    """A row the fit cannot take: ``row`` (its index in the chunk) and ``what`` is wrong
    (``column``: which column of a two-column response, when it is one of them)."""

    def __init__(self, what: str, row: int, kind: str, column: int | None = None):
        super().__init__(f"row {row}: {what}")
        self.what, self.row, self.kind, self.column = what, row, kind, column


@dataclass(frozen=True)
class GLMSpec:
    """What a GLM fit is: the ``family`` and ``link`` by name, the family's given parameter
    (``alpha`` of the negative binomial, ``power`` of Tweedie) and the ``solver`` of each
    weighted least-squares step (``"qr"`` or ``"normal"``)."""

    family: str = "gaussian"
    link: str | None = None
    alpha: float | None = None
    power: float | None = None
    solver: str = "qr"

    @property
    def fam(self) -> Family:
        return family(self.family, alpha=self.alpha, power=self.power)

    @property
    def lnk(self) -> Link:
        return self.fam.link(self.link)


def _prior(m, offset, var_weights, freq_weights, trials, keep):
    o = np.zeros(m) if offset is None else np.asarray(offset, np.float64)
    v = np.ones(m) if var_weights is None else np.asarray(var_weights, np.float64)
    f = np.ones(m) if freq_weights is None else np.asarray(freq_weights, np.float64)
    n = np.ones(m) if trials is None else np.asarray(trials, np.float64)
    k = np.ones(m, bool) if keep is None else np.asarray(keep, bool)
    return o, v, f, n, k


def _rows(spec: GLMSpec, X, y, offset, var_weights, freq_weights, trials, keep):
    """The chunk's rows as the sums take them: X (float64), the response as a proportion,
    the priors (offset, variance and frequency weights, trials, rows kept) of
    :func:`_prior`, and ``ys``: the response with a harmless value in dropped rows."""
    X = np.asarray(X, np.float64)
    y = proportion(y, trials)
    o, v, f, n, k = _prior(X.shape[0], offset, var_weights, freq_weights, trials, keep)
    ys = np.where(k, y, 0.5 if spec.fam.name == "binomial" else 1.0)
    return X, y, (o, v, f, n, k), ys


def _check_support(fam: Family, y, n, keep) -> None:
    bad = keep & ~fam.in_support(y)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RowError(f"response {y[row] * n[row]:g} is outside the support of the "
                       f"{fam.name} family ({fam.support})", row, "support")


def proportion(y, trials):
    """The binomial response as statsmodels reads it: successes / trials (y itself when
    there are no trials); a row of 0 trials is refused by the support check."""
    if trials is None:
        return np.asarray(y, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(y, np.float64) / np.asarray(trials, np.float64)


def counts_response(counts, keep=None) -> tuple[np.ndarray, np.ndarray]:
    """A binomial response given as two columns of counts, (successes, failures), as
    statsmodels' ``Binomial.initialize`` reads a 2-column ``endog``: the successes and the
    trials, their sum (the response is then successes / trials, :func:`proportion`). A
    negative count in a kept row is refused (:class:`RowError` of kind ``"counts"``, its
    ``column`` 0 or 1); a count need not be a whole number, as statsmodels takes it. Rows
    not kept get 1 trial (their values are never used).

    >>> counts_response(np.array([[3.0, 1.0], [0.0, 2.0]]))
    (array([3., 0.]), array([4., 2.]))
    """
    counts = np.asarray(counts, np.float64)
    if counts.ndim != 2 or counts.shape[1] != 2:
        raise ValueError(f"a two-column binomial response has 2 columns, got shape "
                         f"{counts.shape}")
    k = np.ones(counts.shape[0], bool) if keep is None else np.asarray(keep, bool)
    bad = k[:, None] & ~(counts >= 0)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        raise RowError(f"count {counts[row, column]:g} is negative: successes and failures "
                       "are counts (>= 0)", row, "counts", column)
    return counts[:, 0].copy(), np.where(k, counts.sum(axis=1), 1.0)


def mean_sums(spec: GLMSpec, y, *, trials=None, var_weights=None, freq_weights=None,
              keep=None) -> dict:
    """The first pass's sums: rows kept, Σ y (the unweighted mean of the starting values
    μ₀ = (y + ȳ)/2), Σ iw·n·y and Σ iw·n (the weighted mean, the null model's fitted
    value), Σ f (the weighted number of observations); the response checked against the
    family's support (:class:`RowError`)."""
    fam = spec.fam
    y = proportion(y, trials)
    m = y.shape[0]
    o, v, f, n, k = _prior(m, None, var_weights, freq_weights, trials, keep)
    if trials is not None:
        bad = k & ~(n > 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise RowError(f"{n[row]:g} trials: a binomial count needs at least one trial",
                           row, "support")
    _check_support(fam, y, n, k)
    iw = np.where(k, f * v * n, 0.0)
    yk = np.where(k, y, 0.0)
    return {"rows": np.int64(k.sum()), "sum_y": yk.sum(), "wsum_y": (iw * yk).sum(),
            "wsum": iw.sum(), "wnobs": np.where(k, f, 0.0).sum()}


def irls_sums(spec: GLMSpec, X, y, coef=None, *, ybar: float | None = None, offset=None,
              var_weights=None, freq_weights=None, trials=None, keep=None,
              constant: bool = False) -> dict:
    """One chunk's part of one IRLS iteration, at the coefficients ``coef`` (None: the
    family's starting means μ₀, with the unweighted mean ``ybar`` of the response): the
    summary of the next weighted least-squares step (``factor``: the (p+1)² triangular
    factor of [√w·X, √w·z]; or ``xtwx`` and ``xtwz``), and at ``coef`` the ``deviance``,
    ``pearson_chi2``, ``x2`` (Σ iw (y − μ)²/V, statsmodels' scale estimate's numerator),
    ``rss`` (Σ iw (y − μ)²), ``max_resid`` (max |y − μ|, perfect prediction) and
    ``boundary`` (rows fitted numerically 0 or 1 by a binomial fit). ``constant``: the
    design is [1 X], its column of ones first (``coef[0]`` its coefficient) made in the
    slices' copies, not held in ``X``."""
    fam = spec.fam
    X, y, (o, v, f, n, k), ys = _rows(spec, X, y, offset, var_weights, freq_weights, trials,
                                      keep)
    m, p = X.shape[0], X.shape[1] + int(bool(constant))
    _check_support(fam, ys, n, k)
    coef = None if coef is None else np.asarray(coef, np.float64)
    out = {"deviance": 0.0, "pearson_chi2": 0.0, "x2": 0.0, "rss": 0.0, "max_resid": 0.0,
           "boundary": np.int64(0), "rows": np.int64(k.sum())}
    w, z = np.empty(m), np.empty(m)
    # the per-row quantities a slice at a time: their dozen temporaries stay in the core's
    # cache instead of streaming the chunk's length through memory for each of them
    for a in range(0, m, IRLS_SLICE_ROWS):
        b = min(a + IRLS_SLICE_ROWS, m)
        rows = slice(a, b)
        sums = _working_rows(spec, X[rows], ys[rows], coef, ybar, o[rows], v[rows], f[rows],
                             n[rows], k[rows], w[rows], z[rows], first_row=a,
                             constant=constant)
        for key, value in sums.items():
            out[key] = max(out[key], value) if key == "max_resid" else out[key] + value
    if spec.solver == "normal":
        xtwx, xtwz = np.zeros((p, p)), np.zeros(p)
        root = np.sqrt(w)
        for a in range(0, m, IRLS_SLICE_ROWS):
            b = min(a + IRLS_SLICE_ROWS, m)
            # (√w·X)ᵀ(√w·X): numpy hands a product of an array with its own transpose to
            # BLAS syrk, half the flops of XᵀWX as a general product
            Xw = np.empty((b - a, p))
            if constant:
                Xw[:, 0] = root[a:b]
            np.multiply(X[a:b], root[a:b, None], out=Xw[:, p - X.shape[1]:])
            xtwx += np.dot(Xw.T, Xw)  # np.dot releases the GIL (see _linear_predictor)
            xtwz += np.dot(Xw.T, root[a:b] * z[a:b])
        out["xtwx"], out["xtwz"] = xtwx, xtwz
    else:
        out["factor"] = rows_factor(X, z[:, None], np.sqrt(w), constant=constant)
    return out


def _with_constant(X, constant: bool) -> np.ndarray:
    """A new float64 array of the design: [1 X] with ``constant``, else a copy of X."""
    out = np.empty((X.shape[0], X.shape[1] + int(bool(constant))))
    if constant:
        out[:, 0] = 1.0
    out[:, int(bool(constant)):] = X
    return out


def _linear_predictor(X, coef, o, constant: bool) -> np.ndarray:
    """η = [1 X]β + o with ``constant`` (β₀ the constant's coefficient), else Xβ + o.

    By np.dot, not @: numpy's matmul holds the GIL through its BLAS call where np.dot
    releases it (numpy issue 11821), and worker threads run these kernels side by side."""
    if constant:
        return np.dot(X, coef[1:]) + (coef[0] + o)
    return np.dot(X, coef) + o


def _working_rows(spec: GLMSpec, X, ys, coef, ybar, o, v, f, n, k, w, z, *,
                  first_row: int, constant: bool = False) -> dict:
    """One slice of rows of :func:`irls_sums`: writes the working weights ``w`` and
    responses ``z`` of the rows (0 in rows not kept) and returns the slice's sums."""
    fam, link = spec.fam, spec.lnk
    if coef is None:
        mu = fam.start(ys, ybar)
        eta = link.link(mu)
    else:
        eta = _linear_predictor(X, coef, o, constant)
        mu = link.inverse(eta)
    iw = np.where(k, f * v, 0.0)
    with np.errstate(all="ignore"):
        var = fam.variance(mu)
        unit = fam.unit_deviance(ys, mu, n)
        deriv = link.deriv(mu)
        np.divide(iw * n, deriv ** 2 * var, out=w)
        resid = ys - mu
        np.add(eta - o, deriv * resid, out=z)
        resid2 = resid * resid
    bad = k & ~(np.isfinite(w) & np.isfinite(z))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RowError(f"its working weight or response is not finite (mean {mu[row]:.6g} "
                       f"from the linear predictor {eta[row]:.6g})", first_row + row,
                       "weights")
    if not k.all():
        w[~k] = 0.0
        z[~k] = 0.0
    ratio = np.where(k, resid2 / var, 0.0)
    return {"deviance": float(np.sum(np.where(k, f * v * unit, 0.0))),
            "pearson_chi2": float(np.dot(np.where(k, iw * n, 0.0), ratio)),
            "x2": float(np.dot(iw, ratio)),
            "rss": float(np.dot(iw, np.where(k, resid2, 0.0))),
            "max_resid": float(np.sqrt(np.max(resid2[k], initial=0.0))),
            "boundary": np.int64((k & ((mu < BOUNDARY) | (mu > 1 - BOUNDARY))).sum()
                                 if fam.name == "binomial" else 0)}


def final_sums(spec: GLMSpec, X, y, coef, scale: float, *, null_coef=None, null_mean=None,
               null_scale=None, offset=None, var_weights=None, freq_weights=None,
               trials=None, keep=None, constant: bool = False) -> dict:
    """The last pass's sums at the final coefficients ``coef`` and dispersion ``scale``:
    the log-likelihood ``llf`` Σ f·ℓ(y, μ, n, v, φ) and the null model's ``llnull`` at
    dispersion ``null_scale`` (default ``scale``; statsmodels' ``llnull`` takes the fit's
    φ where ``llf`` may take the concentrated one) (both absent for a family without one),
    and the null model's deviance ``null_deviance`` at its mean: the constant
    ``null_mean`` (no offset) or g⁻¹(``null_coef`` + o). ``constant`` as
    :func:`irls_sums`'."""
    fam, link = spec.fam, spec.lnk
    X, y, (o, v, f, n, k), ys = _rows(spec, X, y, offset, var_weights, freq_weights, trials,
                                      keep)
    m = X.shape[0]
    mu = link.inverse(_linear_predictor(X, np.asarray(coef, np.float64), o, constant))
    null = (np.full(m, null_mean) if null_coef is None
            else link.inverse(float(null_coef) + o))
    out = {"null_deviance": float(np.sum(np.where(k, f * v * fam.unit_deviance(ys, null, n),
                                                  0.0)))}
    if fam.loglike_obs is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = fam.loglike_obs(ys, mu, n, np.where(k, v, 1.0), scale)
        out["llf"] = float(np.sum(np.where(k, f * ll, 0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = fam.loglike_obs(ys, null, n, np.where(k, v, 1.0),
                                 scale if null_scale is None else null_scale)
        out["llnull"] = float(np.sum(np.where(k, f * ll, 0.0)))
    return out


def combine_sums(*parts: dict) -> dict:
    """Chunks' sums combined (in the order given): sums added, maxima taken, factors
    stacked and factored again."""
    out = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            if key == "factor":
                p = value.shape[0]
                out[key] = rows_factor(value[:, :p - 1], value[:, p - 1:], prior=out[key])
            elif key == "max_resid":
                out[key] = max(out[key], value)
            else:
                out[key] = out[key] + value
    return out


def solve_step(spec: GLMSpec, sums: dict) -> tuple[np.ndarray, np.ndarray]:
    """(the next coefficients, their normalized covariance (XᵀWX)⁻¹) from the combined
    summary; :class:`~streamlsq.kernels.linalg.SingularMatrixError`, carrying the aliased
    columns, when the weighted columns are collinear by the one rank rule of
    :func:`~streamlsq.kernels.linalg.column_rank` (on the column-equilibrated factor of
    √W·X; from its normal matrix with ``solver="normal"``, as a linear fit's)."""
    rows = int(sums.get("rows", 0))
    if "factor" in sums:
        F = sums["factor"]
        p = F.shape[0] - 1
        R = F[:p, :p]
        if not np.isfinite(F).all():
            raise SingularMatrixError("the weighted columns are not finite", rank=0, size=p)
        check_column_rank(R, max(rows, p), what="weighted design")
        coef = sla.solve_triangular(R, F[:p, p], check_finite=False)
        return coef, normalized_cov_params(R)
    H = sums["xtwx"]
    try:
        return spd_solve(H, sums["xtwz"]), spd_solve(H, np.eye(H.shape[0]))
    except SingularMatrixError as exc:
        raise normal_rank_error(exc, H, max(rows, H.shape[0])) from None


def glm_statistics(coef, normalized_cov, scale: float, *, df_model: float,
                   df_resid: float, wnobs: float, llf: float | None,
                   alpha: float = 0.05, cov=None) -> dict:
    """The inference of a GLM fit as statsmodels' ``GLMResults`` (``use_t=False``): bse
    √(diag(φ·(XᵀWX)⁻¹)), z statistics, two-sided normal p-values and intervals,
    ``cov_params``; ``aic`` = −2ℓ + 2(df_model + 1) and ``bic`` = −2ℓ + (df_model + 1)·log
    (nobs) (statsmodels' ``bic_llf``, nobs = Σ f) when ℓ is defined. ``cov``: a robust
    covariance (:func:`robust_cov`) in place of φ·(XᵀWX)⁻¹."""
    cov = np.asarray(normalized_cov) * scale if cov is None else np.asarray(cov)
    bse = np.sqrt(np.diag(cov))
    tvalues = np.asarray(coef) / bse
    q = normal_ppf(1 - alpha / 2)
    out = {"bse": bse, "tvalues": tvalues, "pvalues": 2 * normal_sf(np.abs(tvalues)),
           "conf_int_lower": coef - q * bse, "conf_int_upper": coef + q * bse,
           "cov_params": cov}
    if llf is not None:
        k = df_model + 1
        out["aic"] = -2 * llf + 2 * k
        out["bic"] = -2 * llf + k * np.log(wnobs)
    return out


def pseudo_rsquared_cs(llf: float, llnull: float, nobs: float) -> float:
    """Cox and Snell's likelihood-ratio pseudo R², 1 − exp(2(ℓ₀ − ℓ)/n), as statsmodels'
    ``GLMResults.pseudo_rsquared(kind="cs")`` (n: the rows fitted, ``nobs``, not Σ f)."""
    return float(1.0 - np.exp((llnull - llf) * (2.0 / nobs)))


def pseudo_rsquared_mcf(llf: float, llnull: float) -> float:
    """McFadden's likelihood-ratio pseudo R², 1 − ℓ/ℓ₀, as statsmodels'
    ``GLMResults.pseudo_rsquared(kind="mcf")`` (and the ``prsquared`` of its discrete
    models); statsmodels computes it for every family, and calls it valid for discrete
    responses only."""
    return float(1.0 - llf / llnull)


def predict_link(spec: GLMSpec, X, coef, cov, *, offset=None, alpha: float = 0.05) -> dict:
    """Predictions of new rows with intervals by the delta method, as statsmodels'
    ``GLMResults.get_prediction().summary_frame()``: the linear predictor η = xᵀβ + o with
    se √(xᵀVx) and its normal interval, and the mean μ = g⁻¹(η) with se |dμ/dη|·se(η) and
    the interval g⁻¹ of η's interval (``mean``, ``mean_se``, ``mean_ci_lower``/``upper``,
    ``linpred``, ``linpred_se``, ``linpred_ci_lower``/``upper``)."""
    link = spec.lnk
    X = np.asarray(X, np.float64)
    eta = X @ np.asarray(coef, np.float64) + (0.0 if offset is None else offset)
    out = {"linpred": eta, "mean": link.inverse(eta)}
    if cov is None:
        return out
    se = np.sqrt(np.einsum("ij,jk,ik->i", X, cov, X))
    q = normal_ppf(1 - alpha / 2)
    lo, hi = eta - q * se, eta + q * se
    mlo, mhi = link.inverse(lo), link.inverse(hi)
    out.update({"linpred_se": se, "linpred_ci_lower": lo, "linpred_ci_upper": hi,
                "mean_se": np.abs(link.inverse_deriv(eta)) * se,
                "mean_ci_lower": np.minimum(mlo, mhi), "mean_ci_upper": np.maximum(mlo, mhi)})
    return out


@dataclass
class IRLSResult:
    """What :func:`run_irls` ends with: the coefficients ``coef`` and their normalized
    covariance ``normalized_cov`` (of the weights the last step was solved with, as
    statsmodels' ``_fit_irls``), the ``deviances`` of the start and of every iteration,
    ``iterations`` (weighted least-squares steps), ``converged``, and the sums of the
    pass at the final coefficients (``last``)."""

    coef: np.ndarray
    normalized_cov: np.ndarray
    deviances: list
    iterations: int
    converged: bool
    last: dict


def run_irls(spec: GLMSpec, step, *, df_resid: float, tol: float = 1e-8,
             maxiter: int = 100, start=None) -> IRLSResult:
    """IRLS as statsmodels' ``GLM._fit_irls``: ``step(coef)`` is one pass over all rows
    returning the combined :func:`irls_sums` at ``coef`` (None: the starting means; or the
    coefficients ``start``); iteration i solves the step of the weights at βᵢ₋₁ for βᵢ and
    the pass at βᵢ gives its deviance Dᵢ. The criterion is statsmodels': the deviance
    scaled by the dispersion of the iteration before, Cᵢ = Dᵢ/φᵢ₋₁ (φ = Pearson's
    Σ iw (y − μ)²/V(μ) over ``df_resid`` for a family whose scale is estimated, 1 for the
    others; C₀ = D₀/φ₀); the fit has converged when |Cᵢ − Cᵢ₋₁| ≤ ``tol`` (statsmodels'
    ``np.allclose(atol=tol, rtol=0)``), else it stops after ``maxiter`` iterations
    (converged False). ``deviances`` are the unscaled Dᵢ."""
    estimated = spec.fam.scale_estimated

    def scale(s):
        return s["x2"] / df_resid if estimated else 1.0

    def scaled(deviance, by):
        # an exact fit has no residual scale: its deviance is 0 too, and nothing is left
        return deviance / by if by else (0.0 if deviance == 0 else np.inf)

    sums = step(start)
    deviances = [sums["deviance"]]
    criterion = [scaled(sums["deviance"], scale(sums))]
    coef, ncov = solve_step(spec, sums)
    iterations, converged = 1, False
    while True:
        previous = scale(sums)
        sums = step(coef)
        deviances.append(sums["deviance"])
        criterion.append(scaled(sums["deviance"], previous))
        if abs(criterion[-1] - criterion[-2]) <= tol:
            converged = True
            break
        if iterations >= maxiter:
            break
        coef, ncov = solve_step(spec, sums)
        iterations += 1
    return IRLSResult(coef, ncov, deviances, iterations, converged, sums)


def robust_sums(spec: GLMSpec, X, y, coef, scale: float, *, cov_type: str, labels=None,
                offset=None, var_weights=None, freq_weights=None, trials=None,
                keep=None, constant: bool = False) -> dict:
    """One chunk's part of a GLM's sandwich covariance at the final coefficients, as
    statsmodels' ``cov_white_simple`` and ``cov_cluster`` build it from ``GLM.score_obs``
    and ``GLM.hessian``: the bread's ``hessian`` Σ x xᵀ·h, the observed information
    h = iw·n/(g'(μ)² V(μ)) · (1 + (y − μ)(V g'' + V' g')/(g' V)) / φ (statsmodels'
    ``hessian_factor(observed=True)``; the expected one for a canonical link) and the meat:
    ``meat`` Σ uuᵀ of the scores u = x·iw·n (y − μ)/(V(μ) g'(μ) φ) divided by √f (HC0), or
    for ``cov_type="cluster"`` the scores summed by group (``labels`` and ``sums``), which
    :func:`merge_score_sums` merges across chunks. ``constant`` as :func:`irls_sums`'."""
    from streamlsq.kernels.inference.robust import cluster_score_sums

    fam, link = spec.fam, spec.lnk
    X, y, (o, v, f, n, k), ys = _rows(spec, X, y, offset, var_weights, freq_weights, trials,
                                      keep)
    if constant:  # the bread and the scores need every column: one pass, made once
        X = _with_constant(X, True)
    mu = link.inverse(X @ np.asarray(coef, np.float64) + o)
    iw = np.where(k, f * v * n, 0.0)
    d, var = link.deriv(mu), fam.variance(mu)
    observed = (ys - mu) / (d * var) * (var * link.deriv2(mu) + fam.variance_deriv(mu) * d)
    info = np.where(k, iw / (d ** 2 * var) * (1 + observed) / scale, 0.0)
    score = np.where(k, iw * (ys - mu) / (var * d) / scale, 0.0)
    out = {"hessian": X.T @ (X * info[:, None]), "rows": np.int64(k.sum())}
    if cov_type == "cluster":
        part = cluster_score_sums(X[k], score[k, None], np.zeros((X.shape[1], 1)),
                                  np.asarray(labels)[k])
        out.update(part)
    else:
        u = X * (score / np.sqrt(np.where(k, f, 1.0)))[:, None]
        out["meat"] = u.T @ u
    return out


def combine_robust(*parts: dict) -> dict:
    """Chunks' :func:`robust_sums` combined: the bread and HC meat added, clusters' score
    sums merged by label."""
    from streamlsq.kernels.inference.robust import merge_score_sums

    out = {"hessian": sum(p["hessian"] for p in parts), "rows": sum(p["rows"] for p in parts)}
    if "labels" in parts[0]:
        out.update(merge_score_sums(*[{"labels": p["labels"], "sums": p["sums"]}
                                      for p in parts]))
    else:
        out["meat"] = sum(p["meat"] for p in parts)
    return out


def robust_cov(state: dict, n_params: int) -> tuple[np.ndarray | None, int | None]:
    """(the sandwich covariance H⁻¹ M H⁻¹, the number of groups or None) from the combined
    :func:`robust_sums`: HC0 as statsmodels' GLM gives it for every ``HC*`` type (its GLM
    results have no small-sample corrections of their own), or cluster-robust with the
    correction G/(G − 1)·(N − 1)/(N − k) (statsmodels' ``cov_cluster``, CRV1; N the rows
    kept). With fewer than 2 groups there is no cluster-robust covariance (the correction
    divides by G − 1): (None, G), for the caller to refuse by name."""
    if "sums" in state and np.asarray(state["sums"]).shape[0] < 2:
        return None, int(np.asarray(state["sums"]).shape[0])
    H = np.asarray(state["hessian"], np.float64)
    Hinv = spd_solve(H, np.eye(H.shape[0]))
    if "sums" in state:
        sums = np.asarray(state["sums"])[:, :, 0]
        meat = sums.T @ sums
        groups = int(sums.shape[0])
    else:
        meat, groups = np.asarray(state["meat"]), None
    cov = Hinv @ meat @ Hinv
    cov = 0.5 * (cov + cov.T)
    if groups is not None:
        rows = int(state["rows"])
        cov *= groups / (groups - 1.0) * (rows - 1.0) / (rows - n_params)
    return cov, groups
