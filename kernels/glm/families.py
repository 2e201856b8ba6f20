"""Families of generalised linear models, declared as data (statsmodels'
``genmod.families``).

A :class:`Family` is an exponential-dispersion family: its variance function V(μ), its
unit deviance d(y, μ) (the deviance of one row of weight 1), the log-likelihood of a row
given the dispersion φ (``scale``) and a prior weight, the starting means of IRLS, the
links it takes (the first being its default) and the values its response may take. The
definitions, the clipping of μ and y inside logarithms and the starting means are those of
statsmodels (``statsmodels/genmod/families/family.py`` and ``varfuncs.py``, version 0.14),
so that both take the same IRLS steps: McCullagh & Nelder (1989), *Generalized Linear
Models*, 2nd ed., Table 2.1 (variance functions), §2.3 (deviance) and §2.5 (IRLS start:
μ₀ = (y + ȳ)/2, and (y + ½)/2 for proportions).

For a binomial response of ``n`` trials the response is the proportion y = successes / n,
its unit deviance and log-likelihood are those of the n trials (statsmodels'
``Binomial`` with a two-column response); ``n`` is 1 for 0/1 responses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from streamlsq.kernels.glm.links import FLOAT_EPS, LINKS, Link

__all__ = ["FAMILIES", "Family", "family"]


def _positive(x):
    return np.clip(x, FLOAT_EPS, np.inf)


def _unit(x):
    return np.clip(x, FLOAT_EPS, 1.0 - FLOAT_EPS)


@dataclass(frozen=True)
class Family:
    """One family: ``name``; ``links`` it takes (the first is its default); ``variance``
    V(μ); ``unit_deviance`` d(y, μ, n) (n: binomial trials, 1 elsewhere); ``loglike_obs``
    ℓ(y, μ, n, prior weight, φ) of one row; ``start`` μ₀(y, ȳ); ``support`` (a phrase, and
    a test of y) of the response; ``scale_estimated``: φ is Pearson's χ²/df_resid
    (Gaussian, Gamma, inverse Gaussian, Tweedie) rather than 1 (binomial, Poisson, negative
    binomial), as statsmodels' ``GLM.estimate_scale``; ``parameter``: the family's own
    given parameter (negative binomial α, Tweedie power), or None."""

    name: str
    links: tuple[str, ...]
    variance: Callable
    unit_deviance: Callable
    loglike_obs: Callable | None
    start: Callable
    support: str
    in_support: Callable
    scale_estimated: bool
    parameter: float | None = None
    canonical: str = field(default="")

    @property
    def default_link(self) -> str:
        return self.links[0]

    def link(self, name: str | None = None) -> Link:
        """The link ``name`` (default: the family's default), refused (ValueError) when the
        family does not take it."""
        name = name or self.default_link
        if name not in self.links:
            raise ValueError(f"the {self.name} family takes the links "
                             f"{', '.join(self.links)}, got {name!r}")
        return LINKS[name]

    def variance_deriv(self, mu):
        """V'(μ), as statsmodels' variance functions differentiate it (the observed
        information of a non-canonical link)."""
        mu = np.asarray(mu, np.float64)
        if self.name == "gaussian":
            return np.zeros_like(mu)
        if self.name == "binomial":
            return 1 - 2 * _unit(mu)
        if self.name == "negative_binomial":
            return 1 + 2 * self.parameter * _positive(mu)
        power = {"poisson": 1.0, "gamma": 2.0, "inverse_gaussian": 3.0}.get(self.name,
                                                                           self.parameter)
        return np.where(mu < 0, -1.0, 1.0) * power * np.fabs(mu) ** (power - 1)

    def weights(self, mu, link: Link):
        """The IRLS weight of a row of prior weight 1: 1 / (g'(μ)² V(μ))."""
        return 1.0 / (link.deriv(mu) ** 2 * self.variance(mu))


def _start_mean(y, ybar):
    return (y + ybar) / 2.0


# -- the unit deviances and log-likelihoods (statsmodels' ``_resid_dev``, ``loglike_obs``)

def _gaussian_dev(y, mu, n):
    return (y - mu) ** 2


def _gaussian_ll(y, mu, n, v, scale):
    return (-v * (y - mu) ** 2 / scale - np.log(scale / v) - np.log(2 * np.pi)) / 2


def _binomial_dev(y, mu, n):
    a = _positive(y / (mu + 1e-20))
    b = _positive((1.0 - y) / (1.0 - mu + 1e-20))
    return 2 * n * (y * np.log(a) + (1 - y) * np.log(b))


def _binomial_ll(y, mu, n, v, scale):
    s = y * n
    return (special.gammaln(n + 1) - special.gammaln(s + 1) - special.gammaln(n - s + 1)
            + s * np.log((mu + 1e-20) / (1 - mu + 1e-20)) + n * np.log(1 - mu + 1e-20)) * v


def _poisson_dev(y, mu, n):
    return 2 * (y * np.log(_positive(y / mu)) - (y - mu))


def _poisson_ll(y, mu, n, v, scale):
    return v / scale * (y * np.log(mu) - mu - special.gammaln(y + 1))


def _gamma_dev(y, mu, n):
    return 2 * (-np.log(_positive(y / mu)) + (y - mu) / mu)


def _gamma_ll(y, mu, n, v, scale):
    ratio = _positive(y / mu)
    ws = v / scale
    return ws * np.log(ws * ratio) - ws * ratio - special.gammaln(ws) - np.log(y)


def _inverse_gaussian_dev(y, mu, n):
    return 1.0 / (y * mu ** 2) * (y - mu) ** 2


def _inverse_gaussian_ll(y, mu, n, v, scale):
    return (-v * (y - mu) ** 2 / (scale * y * mu ** 2) - np.log(scale * y ** 3 / v)
            - np.log(2 * np.pi)) / 2


def negative_binomial(alpha: float = 1.0) -> Family:
    """The negative binomial family of a given ``alpha`` (V(μ) = μ + αμ²), statsmodels'
    ``NegativeBinomial(alpha=...)``: α is given, not estimated."""
    alpha = float(alpha)

    def variance(mu):
        p = _positive(mu)
        return p + alpha * p ** 2

    def dev(y, mu, n):
        ya, ma = y + 1 / alpha, mu + 1 / alpha
        return 2 * (y * np.log(_positive(y / mu)) - ya * np.log(ya / ma))

    def ll(y, mu, n, v, scale):
        out = y * np.log(alpha * mu) - (y + 1 / alpha) * np.log(1 + alpha * mu)
        out += special.gammaln(y + 1 / alpha) - special.gammaln(1 / alpha)
        out -= special.gammaln(y + 1)
        return v / scale * out

    return Family("negative_binomial", ("log", "cloglog", "identity"), variance, dev, ll,
                  _start_mean, "a count (>= 0)", lambda y: y >= 0, False, alpha, "")


def tweedie(power: float = 1.5) -> Family:
    """The Tweedie family of a given variance ``power`` (V(μ) = μ^p), statsmodels'
    ``Tweedie(var_power=p)``; its log-likelihood is left undefined for 1 < p < 2 (the
    series statsmodels evaluates is not summed here: ``llf``, ``aic`` and ``bic`` are not
    stored)."""
    p = float(power)

    def dev(y, mu, n):
        if p == 1:
            return 2 * np.where(y == 0, mu, y * np.log(_positive(y) / mu) + (mu - y))
        if p == 2:
            return 2 * ((y - mu) / mu - np.log(_positive(y) / mu))
        return 2 * (y ** (2 - p) / ((1 - p) * (2 - p)) - y * mu ** (1 - p) / (1 - p)
                    + mu ** (2 - p) / (2 - p))

    return Family("tweedie", ("log", "identity"), lambda mu: np.power(np.fabs(mu), p), dev,
                  None, _start_mean, "a value >= 0", lambda y: y >= 0, True, p, "")


#: the families of a fixed form, by name (negative binomial and Tweedie take a parameter:
#: :func:`family`)
FAMILIES: dict[str, Family] = {
    "gaussian": Family("gaussian", ("identity", "log", "inverse_power"),
                       lambda mu: np.ones(np.shape(mu)), _gaussian_dev, _gaussian_ll,
                       _start_mean, "a real number", lambda y: np.isfinite(y), True,
                       None, "identity"),
    "binomial": Family("binomial", ("logit", "probit", "cloglog", "log"),
                       lambda mu: _unit(mu) * (1 - _unit(mu)), _binomial_dev, _binomial_ll,
                       lambda y, ybar: (y + 0.5) / 2, "a proportion in [0, 1] (0/1, or "
                       "successes out of --trials)", lambda y: (y >= 0) & (y <= 1), False,
                       None, "logit"),
    "poisson": Family("poisson", ("log", "identity", "sqrt"), lambda mu: np.fabs(mu),
                      _poisson_dev, _poisson_ll, _start_mean, "a count (>= 0)",
                      lambda y: y >= 0, False, None, "log"),
    "gamma": Family("gamma", ("inverse_power", "log", "identity"),
                    lambda mu: np.fabs(mu) ** 2, _gamma_dev, _gamma_ll, _start_mean,
                    "a positive number (> 0)", lambda y: y > 0, True, None,
                    "inverse_power"),
    "inverse_gaussian": Family("inverse_gaussian", ("inverse_squared", "inverse_power",
                                                    "identity", "log"),
                               lambda mu: np.fabs(mu) ** 3, _inverse_gaussian_dev,
                               _inverse_gaussian_ll, _start_mean, "a positive number (> 0)",
                               lambda y: y > 0, True, None, "inverse_squared"),
}

#: every family's name, those with a parameter included
FAMILY_NAMES = (*FAMILIES, "negative_binomial", "tweedie")


def family(name: str, *, alpha: float | None = None, power: float | None = None) -> Family:
    """The family ``name`` (one of :data:`FAMILY_NAMES`); ``alpha`` of the negative
    binomial (default 1, as statsmodels), ``power`` of Tweedie (default 1.5)."""
    if name == "negative_binomial":
        return negative_binomial(1.0 if alpha is None else alpha)
    if name == "tweedie":
        return tweedie(1.5 if power is None else power)
    if name not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILY_NAMES)}, got {name!r}")
    return FAMILIES[name]
