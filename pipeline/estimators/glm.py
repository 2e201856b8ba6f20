"""A generalised linear model in memory with scikit-learn conventions:
:class:`GLMRegressor`, the IRLS of :func:`streamlsq.fit_glm` on arrays (the same kernels,
:mod:`streamlsq.kernels.glm`, over the rows as one chunk)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from streamlsq.errors import InputError
from streamlsq.kernels import glm as kernels
from streamlsq.kernels.glm.irls import run_irls

__all__ = ["GLMRegressor"]

#: the families whose response is a count or a positive amount (scikit-learn's
#: ``positive_only`` target tag)
POSITIVE_FAMILIES = frozenset({"poisson", "gamma", "inverse_gaussian", "negative_binomial",
                               "tweedie"})


class GLMRegressor(RegressorMixin, BaseEstimator):
    """A GLM of ``family`` and ``link`` fitted by IRLS as statsmodels' ``GLM``: ``fit(X,
    y, sample_weight=None)`` (``sample_weight``: statsmodels' ``var_weights``) sets
    ``coef_`` (with ``intercept_`` when ``fit_intercept``), ``bse_``, ``deviance_``,
    ``n_iter_``, ``converged_``; ``predict(X)`` gives the mean.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.estimators.glm import GLMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2))
    >>> y = rng.poisson(np.exp(0.2 + X @ [0.5, -0.25])).astype(float)
    >>> model = GLMRegressor(family="poisson").fit(X, y)
    >>> model.coef_.round(1).tolist(), model.converged_
    ([0.5, -0.3], True)
    """

    def __init__(self, family: str = "gaussian", link: str | None = None, *,
                 fit_intercept: bool = True, nb_alpha: float | None = None,
                 var_power: float | None = None, tol: float = 1e-8, maxiter: int = 100,
                 solver: str = "qr"):
        self.family, self.link, self.fit_intercept = family, link, fit_intercept
        self.nb_alpha, self.var_power = nb_alpha, var_power
        self.tol, self.maxiter, self.solver = tol, maxiter, solver

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        # a count or a positive amount: scikit-learn's checks then give such responses
        tags.target_tags.positive_only = self.family in POSITIVE_FAMILIES
        return tags

    def _design(self, X):
        return np.column_stack([np.ones(len(X)), X]) if self.fit_intercept else X

    def fit(self, X, y, sample_weight=None):
        """Fit by IRLS on the rows of (X, y), each weighted by ``sample_weight``
        (statsmodels' ``var_weights``; 0 leaves the row out); returns self."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)  # a failed fit leaves the estimator unfitted
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if X.shape[0] < 2:
            raise ValueError(f"{type(self).__name__}: 1 sample cannot fit a GLM; give at "
                             "least as many rows as coefficients, and one more for the scale")
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True)
            if not (sample_weight > 0).any():
                raise ValueError(f"{type(self).__name__}: every sample weight is zero: no row "
                                 "is left to fit")
        spec = kernels.GLMSpec(self.family, self.link, self.nb_alpha, self.var_power,
                               self.solver)
        Z = self._design(X)
        try:
            mean = kernels.mean_sums(spec, y, var_weights=sample_weight)
        except kernels.RowError as exc:
            raise InputError(f"y: {exc}") from None
        ybar = float(mean["sum_y"]) / int(mean["rows"])
        df_resid = float(mean["wnobs"]) - Z.shape[1]
        fit = run_irls(spec, lambda c: kernels.irls_sums(spec, Z, y, c, ybar=ybar,
                                                         var_weights=sample_weight),
                       df_resid=df_resid, tol=self.tol, maxiter=self.maxiter)
        if spec.fam.scale_estimated and df_resid <= 0:
            raise ValueError(f"{type(self).__name__}: {int(mean['rows'])} rows for "
                             f"{Z.shape[1]} coefficients leave no degree of freedom to "
                             f"estimate the {self.family} family's scale")
        scale = float(fit.last["x2"]) / df_resid if spec.fam.scale_estimated else 1.0
        self.spec_ = spec
        params = np.asarray(fit.coef)
        self.params_ = params
        self.bse_ = np.sqrt(np.diag(fit.normalized_cov) * scale)
        self.intercept_ = float(params[0]) if self.fit_intercept else 0.0
        self.coef_ = params[1:] if self.fit_intercept else params
        self.deviance_ = float(fit.last["deviance"])
        self.scale_ = scale
        self.n_iter_, self.converged_ = fit.iterations, fit.converged
        return self

    def predict(self, X):
        """The fitted mean g⁻¹(Xβ) of each row of X."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return kernels.predict_link(self.spec_, self._design(X), self.params_, None)["mean"]
