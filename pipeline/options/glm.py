"""What a generalised linear model fit takes, declared once: :data:`GLM`
(:func:`streamlsq.fit_glm`, ``streamlsq fit glm``): the input and statistics options of a
linear fit (:data:`~streamlsq.options.fit.FIT`, those that apply to a fit by IRLS) and the
GLM's own.

Examples
--------
>>> from streamlsq.options.glm import GLM
>>> GLM.check({"family": "binomial", "maxiter": 25.0})["maxiter"]
25
>>> GLM.check({"family": "logistic"})
Traceback (most recent call last):
...
streamlsq.errors.InputError: family must be one of 'gaussian', 'binomial', 'poisson', \
'gamma', 'inverse_gaussian', 'negative_binomial', 'tweedie', got 'logistic'
"""

from __future__ import annotations

from streamlsq.options import Options, Param, Rule
from streamlsq.options.fit import COV_TYPES, FIT

__all__ = ["FAMILY_NAMES", "GLM", "LINK_NAMES", "SOLVERS"]

#: the families (the kernels' ``streamlsq.kernels.glm.FAMILY_NAMES``; a test holds them equal)
FAMILY_NAMES = ("gaussian", "binomial", "poisson", "gamma", "inverse_gaussian",
                "negative_binomial", "tweedie")
#: the links (the kernels' ``LINKS``)
LINK_NAMES = ("logit", "probit", "cloglog", "log", "identity", "sqrt", "inverse_power",
              "inverse_squared")
#: how each weighted least-squares step is summarised
SOLVERS = ("qr", "normal")

#: the covariances of a GLM fit (no HAC: those are least squares')
GLM_COV_TYPES = tuple(c for c in COV_TYPES if c not in ("HAC", "hac-panel", "hac-groupsum"))

_PER_ROW = dict(type=str, optional=True, metavar="VAR",
                # statsmodels takes the array itself; here it is named (from Python too)
                requirement="the name of a variable of the data (a string: an array is added "
                "to the data as a column and named) or None")

#: the input and statistics options of a linear fit that apply to a fit by IRLS (the
#: time-series covariances and the rolling windows are least squares' only)
_LINEAR = (FIT.without("continue_from", "engine", "block_size", "first_block_size",
                       "record_every", "epochs", "shuffle", "seed", "dtype", "time",
                       "maxlags", "kernel", "use_correction", "window", "window_step",
                       "min_nobs", "expanding")
           .replace("cov_type", choices=GLM_COV_TYPES)
           # the linear fit's help says which recursions take these; every GLM does
           .replace("weights", help="Variance weights of the rows, a variable of DATA "
                    "(statsmodels' var_weights).", requirement=_PER_ROW["requirement"])
           .replace("missing", help="A NaN in a selected variable (response, features, "
                    "weights, offset, exposure, trials, groups): refuse it, or drop its row.")
           .replace("alpha", help="Confidence intervals of 1 - ALPHA coverage (default "
                    "0.05)."))

#: every option of a GLM fit besides the data and the run's options
GLM = Options(
    # a GLM's groups are a cluster covariance's only (a linear fit's also hac-panel's)
    *_LINEAR,
    Param("family", "gaussian", "The family of the response.", type=str,
          choices=FAMILY_NAMES),
    Param("link", None, "The link (default: the family's, as statsmodels').", type=str,
          optional=True, choices=LINK_NAMES),
    Param("nb_alpha", None, "The negative binomial's given alpha (default 1).", gt=0,
          optional=True),
    Param("var_power", None, "Tweedie's given variance power (default 1.5).", ge=1, le=3,
          optional=True),
    Param("freq_weights", None, "Frequency weights of the rows, a variable of DATA "
          "(statsmodels' freq_weights: a row counted this many times).", **_PER_ROW),
    Param("offset", None, "An offset added to the linear predictor, a variable of DATA.",
          **_PER_ROW),
    Param("exposure", None, "An exposure (> 0), a variable of DATA: log(exposure) added to the "
          "linear predictor (log links).", **_PER_ROW),
    Param("trials", None, "Binomial trials, a variable of DATA: the response is then the "
          "number of successes out of it (or write the formula's left side as "
          "'successes + failures').", **_PER_ROW),
    Param("tol", 1e-8, "Convergence: the change of the (scaled) deviance between iterations "
          "(statsmodels' tol).", gt=0),
    Param("maxiter", 100, "Iterations at most (each one pass over the rows).", type=int,
          gt=0),
    Param("solver", "qr", "Each weighted least-squares step from the QR factor of the "
          "weighted rows, or the normal equations.", type=str, choices=SOLVERS),
    Param("allow_nonconverged", False, "Publish a fit that did not converge or whose "
          "coefficients run off (separation), marked converged=False in the result.",
          type=bool),
    rules=[*(r for r in _LINEAR.rules if r.option != "groups"),
           Rule("groups", needs={"cov_type": "cluster"},
                message="--groups VAR goes with --cov-type cluster"),
           Rule("nb_alpha", needs={"family": "negative_binomial"},
                message="--nb-alpha goes with --family negative_binomial"),
           Rule("var_power", needs={"family": "tweedie"},
                message="--var-power goes with --family tweedie"),
           Rule("trials", needs={"family": "binomial"},
                message="--trials goes with --family binomial")],
)
