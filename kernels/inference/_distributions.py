"""The distribution functions the statistics need, from :mod:`scipy.special`.

``scipy.stats`` computes these very values with the functions of ``scipy.special`` called
here, but importing it takes about 0.4 s, a third of the fit path's imports; ``scipy.special``
takes a few milliseconds. Each function returns what its ``scipy.stats`` counterpart
returns, bit for bit, edge cases included (``tests/test_inference_distributions.py``):
NaN for a NaN argument or degrees of freedom that are not positive, the limits of the
support at its ends, a NumPy scalar for scalar arguments.

==========================  ===========================  ==============================
function                    ``scipy.stats`` counterpart  ``scipy.special`` function
==========================  ===========================  ==============================
:func:`student_t_sf`        ``t.sf(x, df)``              ``stdtr(df, -x)``
:func:`student_t_ppf`       ``t.ppf(q, df)``             ``stdtrit(df, q)``
:func:`normal_sf`           ``norm.sf(x)``               ``ndtr(-x)``
:func:`normal_ppf`          ``norm.ppf(q)``              ``ndtri(q)``
:func:`fisher_f_sf`         ``f.sf(x, dfn, dfd)``        ``fdtrc(dfn, dfd, x)``
==========================  ===========================  ==============================
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["fisher_f_sf", "normal_ppf", "normal_sf", "student_t_ppf", "student_t_sf"]


def _scalar_if_0d(values: np.ndarray):
    """A NumPy scalar for 0-d results, as ``scipy.stats`` returns them."""
    return values[()] if values.ndim == 0 else values


def _positive(*dfs) -> np.ndarray:
    """Degrees of freedom ``scipy.stats`` accepts: all positive (NaN is not)."""
    ok = np.asarray(True)
    for df in dfs:
        ok = ok & (np.asarray(df, np.float64) > 0)
    return ok


def _sf(x, inside_support, below_support, valid, values) -> np.ndarray:
    """A survival function as ``scipy.stats`` evaluates it: ``values`` inside the open
    support, 1 at and below its lower end, 0 at and above its upper end, NaN for a NaN
    ``x`` or invalid parameters."""
    out = np.where(inside_support, values, np.where(below_support, 1.0, 0.0))
    return _scalar_if_0d(np.where(valid & ~np.isnan(x), out, np.nan))


def _ppf(q, lower: float, upper: float, valid, values) -> np.ndarray:
    """A quantile function as ``scipy.stats`` evaluates it: ``values`` for 0 < q < 1, the
    ends of the support at q = 0 and q = 1, NaN elsewhere or for invalid parameters."""
    out = np.where((q > 0) & (q < 1), values,
                   np.where(q == 0, lower, np.where(q == 1, upper, np.nan)))
    return _scalar_if_0d(np.where(valid, out, np.nan))


def student_t_sf(x, df):
    """P(T > x) for Student's t with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    x, df = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(df, np.float64))
    values = special.stdtr(df, -x)
    return _sf(x, np.isfinite(x), x == -np.inf, _positive(df), values)


def student_t_ppf(q, df):
    """The q quantile of Student's t with ``df`` degrees of freedom
    (``scipy.stats.t.ppf``)."""
    q, df = np.broadcast_arrays(np.asarray(q, np.float64), np.asarray(df, np.float64))
    values = special.stdtrit(df, q)
    return _ppf(q, -np.inf, np.inf, _positive(df), values)


def normal_sf(x):
    """P(Z > x) for the standard normal distribution (``scipy.stats.norm.sf``)."""
    x = np.asarray(x, np.float64)
    return _sf(x, np.isfinite(x), x == -np.inf, np.asarray(True), special.ndtr(-x))


def normal_ppf(q):
    """The q quantile of the standard normal distribution (``scipy.stats.norm.ppf``)."""
    q = np.asarray(q, np.float64)
    return _ppf(q, -np.inf, np.inf, np.asarray(True), special.ndtri(q))


def fisher_f_sf(x, dfn, dfd):
    """P(F > x) for Fisher's F with ``dfn`` and ``dfd`` degrees of freedom
    (``scipy.stats.f.sf``)."""
    x, dfn, dfd = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (x, dfn, dfd)))
    values = special.fdtrc(dfn, dfd, x)
    return _sf(x, (x > 0) & (x < np.inf), x <= 0, _positive(dfn, dfd), values)
