"""Link functions of generalised linear models, declared as data (statsmodels'
``genmod.families.links``).

A link g maps the mean μ to the linear predictor η = g(μ). Each :class:`Link` holds five
vectorised functions: ``link`` (g), ``inverse`` (g⁻¹), ``deriv`` (g'(μ), the working
response's slope), ``inverse_deriv`` (dμ/dη, the delta method of predicted means) and
``deriv2`` (g''(μ), the observed information of a robust covariance's bread).
Their definitions, and the clipping of μ away from the boundaries of its domain (by the
machine ε, ``FLOAT_EPS``), are statsmodels' own (``statsmodels/genmod/families/links.py``,
version 0.14), so that a fit here and there take the same IRLS steps; McCullagh & Nelder
(1989), *Generalized Linear Models*, 2nd ed., §2.2.2 and Table 2.1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = ["FLOAT_EPS", "LINKS", "Link", "power_link"]

#: the machine ε: statsmodels clips probabilities to [ε, 1 − ε] and means to [ε, ∞)
FLOAT_EPS = float(np.finfo(float).eps)


def _unit(p):
    return np.clip(p, FLOAT_EPS, 1.0 - FLOAT_EPS)


def _positive(p):
    return np.clip(p, FLOAT_EPS, np.inf)


@dataclass(frozen=True)
class Link:
    """A link function: its ``name`` (as the command line takes it) and the four functions
    of η = g(μ) the IRLS steps and the predictions need."""

    name: str
    link: Callable[[np.ndarray], np.ndarray]
    inverse: Callable[[np.ndarray], np.ndarray]
    deriv: Callable[[np.ndarray], np.ndarray]
    inverse_deriv: Callable[[np.ndarray], np.ndarray]
    deriv2: Callable[[np.ndarray], np.ndarray]


def _logit_inverse(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def _logit_inverse_deriv(z):
    t = np.exp(z)
    return t / (1.0 + t) ** 2


def _probit_deriv(p):
    return 1.0 / _norm_pdf(special.ndtri(_unit(p)))


def _probit_deriv2(p):
    z = special.ndtri(_unit(p))
    return z / _norm_pdf(z) ** 2


def _logit_deriv2(p):
    v = p * (1 - p)
    return (2 * p - 1) / v ** 2


def _cloglog_deriv2(p):
    p = _unit(p)
    fl = np.log1p(-p)
    return -1 / ((1 - p) ** 2 * fl) * (1 + 1 / fl)


def _norm_pdf(z):
    return np.exp(-0.5 * np.square(z)) / np.sqrt(2.0 * np.pi)


def power_link(name: str, power: float) -> Link:
    """The power link η = μ^power (statsmodels' ``Power``): identity (1), square root
    (0.5), inverse (−1), inverse squared (−2)."""
    if power == 1.0:
        return Link(name, lambda p: np.asarray(p, np.float64),
                    lambda z: np.asarray(z, np.float64),
                    lambda p: np.ones_like(p, dtype=np.float64),
                    lambda z: np.ones_like(z, dtype=np.float64),
                    lambda p: np.zeros_like(p, dtype=np.float64))
    return Link(name, lambda p: np.power(p, power), lambda z: np.power(z, 1.0 / power),
                lambda p: power * np.power(p, power - 1.0),
                lambda z: np.power(z, (1.0 - power) / power) / power,
                lambda p: power * (power - 1.0) * np.power(p, power - 2.0))


#: every link, by name
LINKS: dict[str, Link] = {
    "logit": Link("logit", lambda p: np.log(_unit(p) / (1.0 - _unit(p))), _logit_inverse,
                  lambda p: 1.0 / (_unit(p) * (1.0 - _unit(p))), _logit_inverse_deriv,
                  _logit_deriv2),
    "probit": Link("probit", lambda p: special.ndtri(_unit(p)), special.ndtr, _probit_deriv,
                   _norm_pdf, _probit_deriv2),
    "cloglog": Link("cloglog", lambda p: np.log(-np.log1p(-_unit(p))),
                    lambda z: 1.0 - np.exp(-np.exp(z)),
                    lambda p: 1.0 / ((_unit(p) - 1.0) * np.log1p(-_unit(p))),
                    lambda z: np.exp(z - np.exp(z)), _cloglog_deriv2),
    "log": Link("log", lambda p: np.log(_positive(p)), np.exp,
                lambda p: 1.0 / _positive(p), np.exp, lambda p: -1.0 / _positive(p) ** 2),
    "identity": power_link("identity", 1.0),
    "sqrt": power_link("sqrt", 0.5),
    "inverse_power": power_link("inverse_power", -1.0),
    "inverse_squared": power_link("inverse_squared", -2.0),
}
