"""Generalised linear models over stream stores and tables: :func:`fit_glm` and its job.

An IRLS fit is a loop of passes of the run over the rows (:class:`GLMPass`, each one a
parallel map over pieces of whole chunks and a fixed-order tree reduction, as the robust
covariance's pass): a first pass for the response's mean and support, then one pass per
iteration giving at the current coefficients the deviance and the exact summary of the
next weighted least-squares step (:func:`streamlsq.kernels.glm.irls_sums`), and a last
pass for the log-likelihood and the null deviance at the final coefficients. With
``--checkpoint`` every pass is committed as a step of the run, so that ``--resume`` takes
up the loop after the last iteration finished. The loop itself, its convergence criterion
and the statistics are the kernels' (:mod:`streamlsq.kernels.glm`), statsmodels' ``GLM``
definitions (``docs/glm.md``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.sources import StreamSource
from streamlsq.jobs import Context, Job, Pass, Run
from streamlsq.kernels import glm as kernels
from streamlsq.kernels.glm.irls import run_irls
from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.options import Options
from streamlsq.options.fit import CONF_ALPHA
from streamlsq.options.glm import GLM
from streamlsq.runtime.reduce import tree_reduce, wait_progress
from streamlsq.stream.engines import PIECE_BYTES, bytes_per_call
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.guards import rank_phrase
from streamlsq.stream.layout import intercept_label
from streamlsq.stream.plans import StreamPlan, plan_segments

__all__ = ["GLMFit", "GLMPass", "fit_glm"]

#: how a row refused for its value is dropped (a NaN there is what --missing drop drops)
_DROP_IT = "(a NaN there and --missing drop (missing=\"drop\"))"

#: the per-row variables besides the features, the response and the variance weights
AUX = ("offset", "exposure", "freq_weights", "trials")
#: the statistics of a GLM fit given per coefficient (statsmodels' GLMResults names)
PER_COEF = ("bse", "tvalues", "pvalues", "conf_int_lower", "conf_int_upper")


def fit_glm(data, *, out=None, family: str = "gaussian", link: str | None = None,
            group: str | None = None, x=None, y=None, sample_dim: str | None = None,
            fit_intercept: bool | None = None, formula: str | None = None,
            weights: str | None = None, freq_weights: str | None = None,
            offset: str | None = None, exposure: str | None = None,
            trials: str | None = None, missing: str = "raise", alpha: float | None = None,
            cov_type: str | None = None, groups: str | None = None,
            nb_alpha: float | None = None,
            var_power: float | None = None, tol: float = 1e-8, maxiter: int = 100,
            solver: str = "qr", allow_nonconverged: bool = False,
            segment_bytes: int | None = None, **run) -> xr.Dataset:
    """A generalised linear model fitted to the rows of ``data`` by exact IRLS, one pass
    over the rows per iteration, as statsmodels' ``GLM(...).fit()``.

    Parameters
    ----------
    data
        A stream store, a Dataset or a table (Parquet, CSV, a DataFrame), as
        :func:`~streamlsq.fit_stream` reads them (``group``, ``x``, ``y``, ``sample_dim``,
        ``fit_intercept``, ``formula``, ``missing``: the same meaning).
    family, link : str
        The family (``gaussian``, ``binomial``, ``poisson``, ``gamma``,
        ``inverse_gaussian``, ``negative_binomial`` with ``nb_alpha``, ``tweedie`` with
        ``var_power``) and its link (default: the family's, as statsmodels').
    weights, freq_weights : str or None
        Variables of ``data``: statsmodels' ``var_weights`` and ``freq_weights``.
    offset, exposure : str or None
        Variables of ``data``: added to the linear predictor (exposure as its logarithm).
    trials : str or None
        A binomial response counted out of this variable's number of trials.
    alpha : float or None
        Confidence intervals of 1 − ``alpha`` coverage (default 0.05).
    cov_type, groups : str or None
        The covariance of the coefficients: ``nonrobust`` (default), ``HC0``–``HC3`` (the
        sandwich of statsmodels' GLM, which gives HC0 for each of them), or ``cluster``
        with the rows' group labels ``groups`` (CRV1): one more pass over the rows.
    tol, maxiter : float, int
        Convergence as statsmodels' (the change of the scaled deviance), at most
        ``maxiter`` iterations.
    solver : {"qr", "normal"}
        Each step from the exact QR factor of the weighted rows or the normal equations.
    allow_nonconverged : bool
        Publish a fit that did not converge, or whose coefficients run off (separation),
        marked ``converged=False`` (by default such a fit is refused and nothing written).
    **run
        The run's options (:class:`streamlsq.jobs.RunOptions`).

    Returns
    -------
    xarray.Dataset
        Laid out as a linear fit's result: ``coef (step, feature, target)`` (one step),
        labelled by term, and statsmodels' ``GLMResults`` statistics beside it, with
        ``deviance_history (iteration)`` and the attributes ``family``, ``link``,
        ``iterations``, ``converged``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, streamlsq
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame({"x": rng.standard_normal(500)})
    >>> frame["y"] = rng.poisson(np.exp(0.5 + 0.3 * frame.x)).astype(float)
    >>> fit = streamlsq.fit_glm(frame, formula="y ~ x", family="poisson")
    >>> fit.coef.isel(step=-1, target=0).round(2).values.tolist(), fit.attrs["converged"]
    ([0.44, 0.3], True)
    """
    given = {name: value for name, value in locals().items() if name in GLM}
    runner, rest = Run.split(out, run)
    GLM.refuse_unknown(rest, "fit_glm", also=[f.name for f in fields(Run) if f.init])
    return runner.execute(GLMFit(data, **given))


class GLMFit(Job):
    """A GLM fitted by IRLS over the rows of one input (:func:`fit_glm` says what each
    option means)."""

    options: ClassVar[Options] = GLM
    checkpoint_kind: ClassVar[str] = "glm"
    name = "glm"

    def __init__(self, data, **options):
        self.data = data
        unknown = sorted(set(options) - set(GLM.names))
        if unknown:
            raise TypeError(f"GLMFit takes no option {unknown[0]!r}")
        for p in GLM:
            setattr(self, p.name, options.get(p.name, p.default))

    def check(self) -> None:
        self.spec = kernels.GLMSpec(self.family, self.link, self.nb_alpha, self.var_power,
                                    self.solver)
        try:
            self.spec.fam.link(self.link)  # refuses a link the family does not take
        except ValueError as exc:
            raise InputError(f"--link: {exc}") from None
        if self.exposure is not None and self.spec.lnk.name != "log":
            # log(exposure) in the linear predictor is a rate only under a log link: statsmodels
            # refuses it otherwise ("exposure can only be used with the log link function")
            raise InputError(f"--exposure {self.exposure}: an exposure goes with a log link "
                             f"(its logarithm is added to the linear predictor), not with "
                             f"--link {self.spec.lnk.name}; give log(exposure) as --offset if "
                             "that is what you mean")
        if self.groups is not None and "," in self.groups:
            raise InputError(f"--groups {self.groups}: a GLM's cluster-robust covariance takes "
                             "one group variable (two-way clusters are least squares' only)")
        self.counts = self.formula is not None and counts_response(self.formula, self.family,
                                                                   self.trials)

    def intercept(self) -> bool:
        if self.formula is None:
            return bool(self.fit_intercept)
        from streamlsq.io.formulas import formula_intercept

        return formula_intercept(self.formula, self.fit_intercept)

    def open(self, run: Run) -> list:
        self.source = run.open_input(
            "stream", self.data, self.group, x=self.x, y=self.y, sample_dim=self.sample_dim,
            fit_intercept=self.intercept(), weights=self.weights, groups=self.groups,
            missing=self.missing, formula=self.formula)
        if self.source.n_targets != (2 if self.counts else 1):
            # the columns named: a response of text reads as one column per level
            named = ", ".join(map(str, self.source.targets))
            names = [str(v) for v in self.source.y_vars]
            if self.formula is None and len(names) > 1:
                # several variables named: not levels, but several responses
                shown = (f" (--y names {len(names)} variables, {', '.join(names)}): fit each "
                         "response in a run of its own")
            elif self.formula is None and self.source.n_targets > 1:
                shown = (f" (variable '{names[0]}' has {self.source.n_targets} columns): give "
                         "a variable of one column with --y, e.g. one column of it written as "
                         "a variable of its own")
            else:
                shown = (f" ({named[:120]}{'...' if len(named) > 120 else ''}: a column of "
                         "text or levels makes one per level; a GLM's response holds numbers)"
                         if named and self.source.n_targets > 1 else "")
            raise InputError(f"{self.source.label}: a GLM has one response"
                             f"{' (or successes + failures)' if self.counts else ''}, got "
                             f"{self.source.n_targets} target columns{shown}")
        self.aux_names = {k: getattr(self, k) for k in AUX if getattr(self, k) is not None}
        self.aux = None
        if self.aux_names:
            flags = {k: GLM.param(k).option for k in self.aux_names}
            self.aux = run.open_input("stream", self.data, self.group,
                                      x=list(self.aux_names.values()), y=(), targets=False,
                                      sample_dim=self.source.sample_dim,
                                      missing=self.missing, named_by={
                                          name: (f"{flags[k]} ({k}=)",
                                                 f"name one of the variables found with "
                                                 f"{flags[k]}")
                                          for k, name in self.aux_names.items()})
            if self.aux.n_rows != self.source.n_rows:
                raise InputError(f"{self.source.label}: the variables "
                                 f"{list(self.aux_names.values())} have {self.aux.n_rows} "
                                 f"rows, the response {self.source.n_rows}")
        return [self.source]

    def fingerprint(self) -> dict:
        source = self.source
        # the store itself, as a fit's fingerprint has it: another store of the same shape
        # was told only by its chunks' stamps, as "rows changed since"
        return {"job": "glm", "selection": source.selection(),
                "input": [source.identity(), source.group or "", f"token:{source.token}"],
                "options": self._fingerprinted_options(),
                "n_rows": source.n_rows, "chunk_rows": source.chunk_rows}

    def _fingerprinted_options(self) -> dict:
        """The options, each typed out at the value its absence means (the family's link and
        parameter, the nonrobust covariance, 0.05) kept as not given: a resume compares the
        run, not its spelling (as a linear fit's ``--record-every`` at its default)."""
        unset = kernels.GLMSpec(self.family, solver=self.solver)
        implied = {"link": unset.lnk.name, "cov_type": "nonrobust", "alpha": CONF_ALPHA.default,
                   "nb_alpha": unset.fam.parameter, "var_power": unset.fam.parameter}
        options = {}
        for k in GLM.names:
            if k == "allow_nonconverged":
                continue
            value = getattr(self, k)
            options[k] = None if k in implied and value is not None and \
                value == implied[k] else value
        return options

    def fingerprint_options(self, fingerprint: dict) -> dict[str, dict]:
        """The options, as the command line spells them (``--family gaussian then, poisson
        now``); the selection, the rows and their chunks follow from the options and the
        input, named when those are not."""
        return {"options": {GLM.param(k).option: GLM.param(k).shown(v)
                            for k, v in fingerprint["options"].items()},
                "selection": {}, "n_rows": {}, "chunk_rows": {}}

    def parameters(self) -> dict:
        return {"family": self.family, "link": self.spec.lnk.name, "nb_alpha": self.nb_alpha,
                "var_power": self.var_power, "tol": self.tol, "maxiter": self.maxiter,
                "solver": self.solver, "offset": self.offset, "exposure": self.exposure}

    def new_checkpoint(self, directory, fingerprint, resume, inputs):
        from streamlsq.io.checkpoint import EntryCheckpoint

        return EntryCheckpoint(directory, fingerprint, resume=resume, inputs=inputs,
                               variables=(), kind="glm")

    def compute(self, ctx: Context) -> xr.Dataset:
        return GLMLoop(self, ctx).result()


@dataclass
class GLMLoop:
    """The passes of one fit, in order, and the result they give."""

    job: GLMFit
    ctx: Context
    n_groups: int | None = None

    def run(self, kind: str, name: str, **kw) -> dict:
        return self.ctx.run_pass(GLMPass(self.job.source, self.job.aux, self.job.aux_names,
                                         self.job.spec, kind, name, kw,
                                         self.job.segment_bytes))

    def result(self) -> xr.Dataset:
        job = self.job
        spec, fam = job.spec, job.spec.fam
        mean = self.run("mean", "glm-mean")
        rows = int(mean["rows"])
        if rows == 0:
            raise InputError(f"{job.source.label}: no row left to fit (every row dropped)")
        ybar = float(mean["sum_y"]) / rows
        p = job.source.n_features
        wnobs = float(mean["wnobs"])
        df_model, df_resid = p - 1, wnobs - p
        if df_resid <= 0:
            raise InputError(f"{job.source.label}: {rows} rows for {p} coefficients: a GLM "
                             "needs more rows than coefficients")
        counter = iter(range(10**9))

        def step(coef, null=False):
            i = next(counter)
            return self.run("irls", f"glm-irls-{i}" + ("-null" if null else ""),
                            coef=coef, ybar=ybar, null=null)

        try:
            fit = run_irls(spec, step, df_resid=df_resid, tol=job.tol, maxiter=job.maxiter)
        except SingularMatrixError as exc:
            found = rank_phrase(exc, None, list(coef_labels(job.source)))
            raise InputError(f"{job.source.label}: the weighted columns of the design are "
                             f"collinear ({found}): remove collinear or constant columns"
                             ) from None
        last = fit.last
        scale = float(last["x2"]) / df_resid if fam.scale_estimated else 1.0
        problem = self.problem(fit, last)
        finite = np.isfinite(fit.deviances[-1]) and np.isfinite(np.asarray(fit.coef)).all()
        if problem is not None and (not job.allow_nonconverged or not finite):
            # a deviance or coefficient not finite is no fit to mark: published, every reader
            # of results would call it damaged and ask for it to be computed again
            kept = "" if finite or not job.allow_nonconverged else (
                "; --allow-nonconverged publishes a fit that stopped short, not one whose "
                "deviance or coefficients are not finite")
            raise InputError(f"{job.source.label}: {problem}{kept}")
        null_kw: dict[str, Any] = {"null_mean": float(mean["wsum_y"]) / float(mean["wsum"])}
        if job.offset is not None or job.exposure is not None:
            counter = iter(range(10**9))
            start = np.array([float(spec.lnk.link(np.array(ybar)))])
            null = run_irls(spec, lambda c: step(c, True), df_resid=wnobs - 1, tol=job.tol,
                            maxiter=job.maxiter, start=start)
            null_kw = {"null_coef": float(null.coef[0])}
        llf_scale = scale
        if spec.family == "gaussian" and spec.lnk.name == "identity":
            llf_scale = float(last["rss"]) / wnobs  # statsmodels' concentrated likelihood
        final = self.run("final", "glm-final", coef=fit.coef, scale=llf_scale,
                         null_scale=scale, **null_kw)
        llf = final.get("llf")
        cov, self.n_groups = None, None
        if job.cov_type not in (None, "nonrobust"):
            robust = self.run("robust", f"glm-robust-{job.cov_type}", coef=fit.coef,
                              scale=scale, cov_type=job.cov_type)
            cov = robust["cov"]
            if job.cov_type == "cluster":
                self.n_groups = int(robust["n_groups"])
                if self.n_groups < 2:
                    raise InputError(f"{job.source.label}: variable '{job.groups}' holds "
                                     f"{self.n_groups} group(s): a cluster-robust covariance "
                                     "needs at least 2")
        stats = kernels.glm_statistics(fit.coef, fit.normalized_cov, scale,
                                       df_model=df_model, df_resid=df_resid, wnobs=wnobs,
                                       llf=None if llf is None else float(llf),
                                       alpha=0.05 if job.alpha is None else job.alpha,
                                       cov=cov)
        values = {"nobs": wnobs, "df_model": df_model, "df_resid": df_resid,
                  "deviance": float(last["deviance"]),
                  "null_deviance": float(final["null_deviance"]),
                  "pearson_chi2": float(last["pearson_chi2"]), "scale": scale}
        if llf is not None:
            values.update(llf=float(llf), aic=stats["aic"], bic=stats["bic"],
                          llnull=float(final["llnull"]),
                          prsquared_cs=kernels.pseudo_rsquared_cs(float(llf),
                                                                  float(final["llnull"]), rows),
                          prsquared_mcf=kernels.pseudo_rsquared_mcf(float(llf),
                                                                    float(final["llnull"])))
        return self.dataset(fit, stats, values, rows, problem)

    def problem(self, fit, last) -> str | None:
        """Why the fit is not to be published as it is (None: it is)."""
        job = self.job
        if job.spec.family == "binomial" and float(last["max_resid"]) <= 1e-8:
            return ("perfect separation: the fitted probabilities equal the response on every "
                    "row, the coefficients are not identified; remove the separating "
                    "variable(s), or --allow-nonconverged to publish it marked")
        if int(last["boundary"]) > 0 and job.spec.family == "binomial" and \
                job.spec.fam.link(job.spec.link).name not in BOUNDED_LINKS:
            # a link whose mean is not held in (0, 1) reaches 1 (or 0) by itself: the link,
            # not a separating variable, is what to change (statsmodels warns of its domain)
            return (f"{int(last['boundary'])} row(s) fitted with probability numerically 0 "
                    f"or 1: the {job.spec.fam.link(job.spec.link).name} link does not keep the "
                    "binomial mean inside (0, 1); choose a link that does (--link logit, "
                    "probit or cloglog), or --allow-nonconverged to publish it marked")
        if int(last["boundary"]) > 0:
            return (f"quasi-separation: {int(last['boundary'])} row(s) fitted with probability "
                    "numerically 0 or 1 (coefficients running off); remove or merge the "
                    "separating variable(s) or categories, or --allow-nonconverged to publish "
                    "it marked")
        if not fit.converged and not np.isfinite(fit.deviances[-1]):
            # "changed by nan" says nothing: a mean left the family's range under this link
            link = job.spec.fam.link(job.spec.link).name
            return (f"IRLS did not converge in {fit.iterations} iterations: the deviance is "
                    f"not finite, a fitted mean having left the {job.spec.family} family's "
                    f"range ({job.spec.fam.support}) under the {link} link; choose a link "
                    f"that keeps it there (the family's default, "
                    f"{job.spec.fam.default_link})")
        if not fit.converged:
            return (f"IRLS did not converge in {fit.iterations} iterations (the deviance "
                    f"changed by {abs(fit.deviances[-1] - fit.deviances[-2]):.3g} in the last, "
                    f"--tol {job.tol:g}): raise --maxiter, check the link (a non-canonical "
                    "link may not converge), or --allow-nonconverged to publish it marked")
        return None

    def dataset(self, fit, stats, values, rows, problem) -> xr.Dataset:
        job, source = self.job, self.job.source
        labels = coef_labels(source)
        coef = np.asarray(fit.coef)
        target = [str(t) for t in (source.targets or source.y_vars)][:1] or ["y"]
        data = {"coef": (("step", "feature", "target"), coef[None, :, None]),
                "rows_seen": (("step",), np.array([source.n_rows])),
                "deviance_history": (("iteration",), np.asarray(fit.deviances)),
                "cov_params": (("feature", "feature2", "target"),
                               stats["cov_params"][:, :, None])}
        for name in PER_COEF:
            data[name] = (("feature", "target"), np.asarray(stats[name])[:, None])
        for name, value in values.items():
            v = np.array([value])
            data[name] = (("target",), v.astype(np.int64) if name == "nobs"
                          and float(value).is_integer() else v)
        ds = xr.Dataset(data, coords={"step": [1], "feature": labels, "feature2": labels,
                                      "target": target,
                                      "iteration": np.arange(len(fit.deviances))})
        inputs = FitInputs.of(source, source.intercept)
        ds.attrs.update(inputs.to_attrs())
        ds.attrs.update({
            "model": "glm", "family": job.family, "link": job.spec.lnk.name,
            "iterations": int(fit.iterations), "converged": bool(problem is None),
            "tol": float(job.tol), "maxiter": int(job.maxiter), "solver": job.solver,
            "cov_type": job.cov_type or "nonrobust", "use_t": False,
            "conf_int_alpha": 0.05 if job.alpha is None else float(job.alpha),
            "k_constant": int(source.intercept), "rows_dropped": source.n_rows - rows,
            "n_rows": source.n_rows, "bic_definition": "bic_llf: -2 llf + (df_model + 1) "
            "log(nobs), statsmodels' GLMResults.bic",
            **{f"{k}_variable": v for k, v in job.aux_names.items()}})
        if job.counts:  # successes + failures: the trials are their sum
            ds.attrs["trials_variable"] = " + ".join(map(str, source.targets))
        if job.nb_alpha is not None:
            ds.attrs["nb_alpha"] = float(job.nb_alpha)
        if job.var_power is not None:
            ds.attrs["var_power"] = float(job.var_power)
        if problem is not None:
            ds.attrs["nonconverged_reason"] = problem
        if self.n_groups is not None:
            ds.attrs.update({"groups_variable": job.groups, "n_groups": self.n_groups,
                             "df_resid_inference": self.n_groups - 1})
        return ds

    #: short phrases about a result for the command line's one-line summary
    notes = None


def counts_response(formula: str, family: str, trials: str | None) -> bool:
    """Whether ``formula``'s left side is a binomial response of two columns, successes +
    failures (statsmodels' 2-column ``endog``; the trials are their sum): refused for any
    other family, beside ``trials`` and for a left side of more than two terms, before
    anything is read."""
    from streamlsq.io.formulas import check_formula, parse

    check_formula(formula)
    terms = [str(term) for term in parse(formula).lhs]
    if len(terms) > 2:
        raise InputError(f"formula {formula!r}: its left side has {len(terms)} terms; a GLM "
                         "takes one response, or two for a binomial one (successes + "
                         "failures)")
    if len(terms) < 2:
        return False
    if family != "binomial":
        raise InputError(f"formula {formula!r}: a left side of two terms (successes + "
                         f"failures) is a binomial response; the {family} family takes one")
    if trials is not None:
        raise InputError(f"formula {formula!r}: its two columns are successes + failures, "
                         f"the trials their sum: leave out --trials {trials}")
    return True



#: the binomial links whose mean stays inside (0, 1) for every linear predictor; with the
#: log link a fitted probability of 0 or 1 is the link's doing, not a separating variable
BOUNDED_LINKS = ("logit", "probit", "cloglog")


def coef_labels(source: StreamSource) -> np.ndarray:
    """The intercept first when one is fitted, labelled as a linear fit labels it
    (:func:`~streamlsq.io.formulas.intercept_label`: formulaic's ``Intercept`` in a formula
    fit), then the data's feature labels (terms of a formula, variable names) or ``x0, x1,
    …``."""
    n_data = source.n_features - int(source.intercept)
    data = [str(v) for v in source.features]
    if len(data) != n_data:
        data = [f"x{j}" for j in range(n_data)]
    constant = [intercept_label(source.variables.formula)] if source.intercept else []
    return np.asarray(constant + data)


def glm_piece(source: StreamSource, aux: StreamSource | None, aux_names: dict, start: int,
              stop: int, spec, kind: str, kw: dict):
    """Dask task: one piece's sums of the pass ``kind`` (``mean``, ``irls``, ``final``)."""
    drop = source.missing == "drop"
    # X without the intercept's column: the kernels make it in their slices' copies
    X, Y, w = source.read_weighted(start, stop, with_constant=False)
    constant = source.intercept
    keep = np.ones(stop - start, bool) if w is None else w > 0
    extra: dict[str, np.ndarray] = {}
    if aux is not None:
        for key, name in aux_names.items():
            values = aux.read_rows(name, start, stop, np.float64, True, allow_nan=drop)
            missing = np.isnan(values)
            keep &= ~missing
            extra[key] = np.where(missing, 1.0, values)
    offset = extra.get("offset")
    if "exposure" in extra:
        bad = keep & ~(extra["exposure"] > 0)
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            raise InputError(f"{source.label}: variable '{aux_names['exposure']}' row {row}: "
                             "an exposure must be > 0 (its logarithm is the offset); "
                             f"correct the row, or drop it {_DROP_IT}")
        log_exposure = np.log(np.where(keep, extra["exposure"], 1.0))
        offset = log_exposure if offset is None else offset + log_exposure
    freq = extra.get("freq_weights")
    if freq is not None:
        bad = keep & ~(freq >= 0)
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            raise InputError(f"{source.label}: variable '{aux_names['freq_weights']}' row "
                             f"{row}: a frequency weight must be >= 0; correct the row, "
                             f"or drop it {_DROP_IT}")
    trials = extra.get("trials")
    y = Y[:, 0]
    try:
        if Y.shape[1] == 2:  # successes + failures on the formula's left side
            y, trials = kernels.counts_response(Y, keep)
        prior = {"offset": offset, "var_weights": w, "freq_weights": freq,
                 "trials": trials, "keep": keep}
        if kind == "mean":
            out = kernels.mean_sums(spec, y, **{k: v for k, v in prior.items()
                                                if k != "offset"})
        elif kind == "irls":
            if kw["null"]:
                out = kernels.irls_sums(spec, np.ones((stop - start, 1)), y, kw["coef"],
                                        ybar=kw["ybar"], **prior)
            else:
                out = kernels.irls_sums(spec, X, y, kw["coef"], ybar=kw["ybar"],
                                        constant=constant, **prior)
        elif kind == "robust":
            labels = (source.read_labels(start, stop) if kw["cov_type"] == "cluster"
                      else None)
            out = kernels.robust_sums(spec, X, y, kw["coef"], kw["scale"],
                                      cov_type=kw["cov_type"], labels=labels,
                                      constant=constant, **prior)
        else:
            extra_kw = {k: kw[k] for k in ("null_coef", "null_mean", "null_scale") if k in kw}
            out = kernels.final_sums(spec, X, y, kw["coef"], kw["scale"], constant=constant,
                                     **extra_kw, **prior)
    except kernels.RowError as exc:
        row = start + exc.row
        response = source.y_vars[0] if source.variables.formula is None else "the response"
        if exc.kind == "counts":
            column = str(source.targets[exc.column])
            raise InputError(f"{source.label}: {column} row {row}: {exc.what}; a binomial "
                             "response of two columns is successes + failures") from None
        if exc.kind == "support":
            remedy = f"choose a family whose support holds it, or drop the row {_DROP_IT}"
            given = extra.get("trials")
            if given is not None and given[exc.row] > 0:
                # a count of successes past its trials (or below 0), not a proportion
                raise InputError(
                    f"{source.label}: {response} row {row}: {y[exc.row]:g} successes out of "
                    f"{given[exc.row]:g} trials (--trials {aux_names['trials']}): a binomial "
                    f"count lies between 0 and its trials; correct the row, or drop it {_DROP_IT}"
                ) from None
            raise InputError(f"{source.label}: {response} row {row}: {exc.what}; {remedy}"
                             ) from None
        raise InputError(f"{source.label}: row {row}: {exc.what}: the IRLS step cannot use it; "
                         "check the link (a link outside the family's mean range) or the "
                         "row's values") from None
    return stop - start, out


def _part(result):
    return result[1]


@dataclass(eq=False)
class GLMPass(Pass):
    """One pass of an IRLS fit over the rows of ``source`` (and the per-row variables of
    ``aux``): a map of :func:`glm_piece` over pieces of whole chunks, combined in a fixed
    tree (:func:`streamlsq.kernels.glm.combine_sums`). Its state is the combined sums."""

    source: StreamSource
    aux: StreamSource | None
    aux_names: dict
    spec: Any
    kind: str
    label: str
    kw: dict
    segment_bytes: int | None = None

    @property
    def name(self) -> str:
        return self.label

    def compute(self, ctx: Context) -> dict:
        source = self.source
        plan = StreamPlan.single(source, BlockGrid(source.n_rows, source.chunk_rows))
        pieces = plan_segments(plan, bytes_per_call(ctx.client,
                                                    self.segment_bytes or PIECE_BYTES))
        tag = uuid.uuid4().hex[:8]
        kw = {k: (None if v is None else np.asarray(v) if isinstance(v, np.ndarray) else v)
              for k, v in self.kw.items()}
        futures = [ctx.client.submit(glm_piece, source, self.aux, self.aux_names,
                                     plan.edge(K0), plan.edge(K1), self.spec, self.kind, kw,
                                     key=f"{self.label}-{tag}-{i}", pure=False)
                   for i, (K0, K1) in enumerate(pieces)]
        wait_progress(ctx.client, futures, [plan.edge(K1) - plan.edge(K0) for K0, K1 in pieces],
                      self.label, unit="rows", enabled=ctx.progress)
        robust = self.kind == "robust"
        root = tree_reduce(ctx.client, futures,
                           kernels.combine_robust if robust else kernels.combine_sums,
                           leaf=_part, name=f"{self.label}-combine-{tag}").result()
        if robust:  # the labels stay on the workers' side: the state is numbers only
            # cov None for fewer than 2 groups: the fit refuses it by name
            cov, groups = kernels.robust_cov(root, source.n_features)
            return {"cov": cov, "n_groups": -1 if groups is None else groups}
        return {k: np.asarray(v) for k, v in root.items()}

