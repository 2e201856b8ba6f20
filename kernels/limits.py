"""The magnitudes of data that floating point can carry through a least-squares fit.

A least-squares recursion accumulates sums of products of the data, Σ x xᵀ and Σ x y,
over every row it has seen. With n rows whose values are at most m in magnitude these
sums stay below n·m², so they cannot overflow while m ≤ √(max / n), max being the
largest finite number of the dtype. Above that bound the sums may become Inf and the
solves NaN: the pipeline names such values (``streamlsq info --check``, and the error of
a fit whose state stopped being finite) instead of publishing NaN coefficients.
"""

from __future__ import annotations

import numpy as np

__all__ = ["largest_safe_magnitude", "state_is_finite"]


def largest_safe_magnitude(n_rows: int, dtype=np.float64) -> float:
    """The largest |value| for which the normal-equation sums over ``n_rows`` rows stay
    finite in ``dtype``: √(max / n_rows).

    Examples
    --------
    >>> from streamlsq.kernels.limits import largest_safe_magnitude
    >>> f"{largest_safe_magnitude(1_000_000):.3g}"
    '1.34e+151'
    """
    return float(np.sqrt(np.finfo(dtype).max / max(1, int(n_rows))))


def state_is_finite(state) -> bool:
    """True when every floating-point array of a recursion state (a dict) is finite.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.limits import state_is_finite
    >>> state_is_finite({"H": np.eye(2), "rows": 3}), state_is_finite({"H": np.full(2, np.nan)})
    (True, False)
    """
    values = state.values() if isinstance(state, dict) else [state]
    for v in values:
        a = np.asarray(v)
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            return False
    return True
