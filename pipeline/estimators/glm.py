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
    ``n_iter_``, ``converged_``; ``predict(X)`` gives the mean. For ``family="binomial"``
    ``y`` may be two columns of counts, (successes, failures), as statsmodels' ``GLM``
    takes a binomial ``endog`` of shape (n, 2): the fit is then that of the proportions
    successes / (successes + failures) over as many trials, ``predict`` gives the
    probability and ``score`` the R² of the proportions weighted by the trials.

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
        self._unfit()
        try:
            return self._fit(X, y, sample_weight)
        except BaseException:
            self._unfit()  # a failed fit leaves the estimator unfitted (validate_data
            raise          # has set n_features_in_ before the response is checked)

    def _unfit(self):
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def _fit(self, X, y, sample_weight):
        counts = self._two_columns(y)
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True,
                             multi_output=counts)
        trials = None
        if counts:
            y, trials = self._counts(y)
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
        n_params = X.shape[1] + int(self.fit_intercept)
        try:
            mean = kernels.mean_sums(spec, y, trials=trials, var_weights=sample_weight)
        except kernels.RowError as exc:
            raise InputError(f"y: {exc}") from None
        ybar = float(mean["sum_y"]) / int(mean["rows"])
        df_resid = float(mean["wnobs"]) - n_params
        # the intercept's column made by the kernel in its slices: no copy of X
        fit = run_irls(spec, lambda c: kernels.irls_sums(spec, X, y, c, ybar=ybar,
                                                         trials=trials,
                                                         var_weights=sample_weight,
                                                         constant=self.fit_intercept),
                       df_resid=df_resid, tol=self.tol, maxiter=self.maxiter)
        if spec.fam.scale_estimated and df_resid <= 0:
            raise ValueError(f"{type(self).__name__}: {int(mean['rows'])} rows for "
                             f"{n_params} coefficients leave no degree of freedom to "
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

    def _two_columns(self, y) -> bool:
        """Whether ``y`` is a binomial response of two columns of counts; a response of
        two or more columns is refused (one line) for any other family or shape."""
        shape = np.asarray(y).shape  # (np.shape refuses array-likes that only convert)
        if len(shape) != 2 or shape[1] == 1:  # one column: scikit-learn's 1-d response
            return False
        name = type(self).__name__
        if self.family != "binomial":
            raise ValueError(f"{name}: y of shape {shape} has {shape[1]} columns; only "
                             "family='binomial' takes two (successes, failures), the "
                             f"{self.family} family one")
        if shape[1] != 2:
            raise ValueError(f"{name}: y of shape {shape}: a binomial response is one "
                             "column (0/1 or proportions) or two of counts (successes, "
                             "failures)")
        return True

    @staticmethod
    def _counts(y):
        """(successes, trials) of a two-column response, negative counts refused."""
        try:
            return kernels.counts_response(y)
        except kernels.RowError as exc:
            column = "successes" if exc.column == 0 else "failures"
            raise InputError(f"y[:, {exc.column}] ({column}): {exc}") from None

    def score(self, X, y, sample_weight=None):
        """R² of ``predict(X)`` (scikit-learn's ``r2_score``); a two-column binomial
        response is scored as its proportions, each weighted by its trials (times
        ``sample_weight``)."""
        if not self._two_columns(y):
            return super().score(X, y, sample_weight=sample_weight)
        from sklearn.metrics import r2_score

        successes, trials = self._counts(np.asarray(y, np.float64))
        weight = trials if sample_weight is None else trials * np.asarray(sample_weight)
        proportion = np.divide(successes, trials, out=np.zeros_like(trials),
                               where=trials > 0)  # a row of 0 trials weighs 0
        return r2_score(proportion, self.predict(X), sample_weight=weight)

    def predict(self, X):
        """The fitted mean g⁻¹(Xβ) of each row of X."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return kernels.predict_link(self.spec_, self._design(X), self.params_, None)["mean"]
