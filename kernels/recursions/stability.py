"""Parameter-stability tests on recursive residuals: CUSUM and CUSUM of squares.

Brown, Durbin & Evans (1975). With w_t the standardised recursive residuals of rows
t = d+1, …, T (d rows are needed before ψ is determined; see
:class:`~streamlsq.kernels.recursions.sqrtinfo.SqrtInfoLS`), N = T − d of them and m the
number up to row t,

    CUSUM       W_t = Σ_{j≤t} w_j / σ̂,          σ̂² = Σ (w_j − w̄)² / (N − 1)
    CUSUMSQ     s_t = Σ_{j≤t} w_j² / Σ_{j≤T} w_j²

Under a stable regression W_t stays within ±a(√N + 2m/√N) (a = 0.948 at 5%) and s_t
within m/N ± c, with c from the approximation of Edgerton & Wells (1994) to Durbin's
(1969) table. The constants and conventions are those of statsmodels' ``RecursiveLS``
(``cusum``, ``cusum_squares`` and their significance bounds), so the numbers can be
compared. Everything here works on running sums (count, Σw, Σw²) recorded at some
steps: the statistics at a recorded step need nothing else.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CUSUM_CONSTANTS", "cusum", "cusum_bound", "cusum_squares", "cusum_squares_bounds"]

#: a of the CUSUM bounds by significance level (Brown, Durbin & Evans 1975, Table 1)
CUSUM_CONSTANTS = {0.01: 1.143, 0.05: 0.948, 0.10: 0.950}
#: Edgerton & Wells (1994) coefficients of the CUSUM-of-squares critical value, by the
#: one-sided level α/2: c = a₁/√n + a₂/n + a₃/n^{3/2}, n = N/2 − 1
_CUSUMSQ_COEFFICIENTS = {
    0.1: (1.0729830, -0.6698868, -0.5816458),
    0.05: (1.2238734, -0.6700069, -0.7351697),
    0.025: (1.3581015, -0.6701218, -0.8858694),
    0.01: (1.5174271, -0.6702672, -1.0847745),
    0.005: (1.6276236, -0.6703724, -1.2365861),
}


def _check_total(total: int) -> int:
    total = int(total)
    if total < 2:
        raise ValueError(f"the stability tests need at least 2 recursive residuals, got {total}")
    return total


def cusum(sums: np.ndarray, total: int, total_sum, total_sumsq) -> np.ndarray:
    """W at each recorded step from the running sums Σw (``sums``) and the totals.

    σ̂ is the standard deviation (ddof = 1) of all ``total`` residuals, from their sum
    and sum of squares.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.stability import cusum
    >>> w = np.array([0.5, -1.0, 2.0, 0.3])
    >>> got = cusum(np.cumsum(w), 4, w.sum(), (w ** 2).sum())
    >>> bool(np.allclose(got, np.cumsum(w) / np.std(w, ddof=1)))
    True
    """
    total = _check_total(total)
    total_sum = np.asarray(total_sum, np.float64)
    var = (np.asarray(total_sumsq, np.float64) - total_sum**2 / total) / (total - 1)
    sigma = np.sqrt(np.maximum(var, 0.0))
    sigma = np.where(sigma > 0, sigma, 1.0)  # all residuals equal: W is their plain sum
    return np.asarray(sums, np.float64) / sigma


def cusum_bound(counts: np.ndarray, total: int, alpha: float = 0.05) -> np.ndarray:
    """The upper CUSUM bound a(√N + 2m/√N) at m = ``counts`` residuals (the lower is −)."""
    if alpha not in CUSUM_CONSTANTS:
        raise ValueError(f"alpha must be one of {sorted(CUSUM_CONSTANTS)}, got {alpha}")
    total = _check_total(total)
    a = CUSUM_CONSTANTS[alpha]
    root = np.sqrt(total)
    return a * root + 2 * a * np.asarray(counts, np.float64) / root


def cusum_squares(sumsqs: np.ndarray, total_sumsq) -> np.ndarray:
    """s = Σ_{j≤t} w_j² / Σ_all w_j² at each recorded step."""
    total_sumsq = np.asarray(total_sumsq, np.float64)
    return np.asarray(sumsqs, np.float64) / np.where(total_sumsq > 0, total_sumsq, 1.0)


def cusum_squares_bounds(counts: np.ndarray, total: int, alpha: float = 0.05
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The CUSUM-of-squares bounds m/N ∓ c (Edgerton & Wells' c) at m = ``counts``.

    Examples
    --------
    >>> from streamlsq.kernels.recursions.stability import cusum_squares_bounds
    >>> lo, hi = cusum_squares_bounds([0, 50, 100], 100)
    >>> [round(float(v), 4) for v in hi]
    [0.1778, 0.6778, 1.1778]
    """
    total = _check_total(total)
    try:
        a1, a2, a3 = _CUSUMSQ_COEFFICIENTS[alpha / 2]
    except KeyError:
        raise ValueError(f"alpha must be one of {[2 * k for k in _CUSUMSQ_COEFFICIENTS]}, "
                         f"got {alpha}") from None
    n = 0.5 * total - 1
    if n <= 0:
        raise ValueError(f"the CUSUM of squares bounds need more than 2 residuals, got {total}")
    crit = a1 / n**0.5 + a2 / n + a3 / n**1.5
    line = np.asarray(counts, np.float64) / total
    return line - crit, line + crit
