"""In-memory estimators with scikit-learn conventions, one per recursion.

:mod:`.base` holds the shared driver; one module per family holds its estimators.
Each estimator's parameters are its recursion's declared parameters (from the
registry) followed by its own (``block_size``, …); :func:`regressor_for` gives the
estimator of any registered recursion, building a plain block estimator for a
recursion that has no class written for it.
"""

from __future__ import annotations

import re
import sys
import types

from streamlsq.estimators.base import BlocksMixin, InterceptColumnMixin, RecursionRegressor
from streamlsq.estimators.bfgs import IncrementalBFGSRegressor
from streamlsq.estimators.irma import (
    IRMAGradientDescentRegressor,
    IRMARegressor,
    IRMARLSRegressor,
)
from streamlsq.estimators.least_squares import (
    InterleavedKF4LLSRegressor,
    KF4LLSRegressor,
    RLSRegressor,
)
from streamlsq.estimators.lms import LMSRegressor
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = [
    "IRMAGradientDescentRegressor",
    "IRMARLSRegressor",
    "IRMARegressor",
    "IncrementalBFGSRegressor",
    "InterleavedKF4LLSRegressor",
    "KF4LLSRegressor",
    "LMSRegressor",
    "RLSRegressor",
    "regressor_for",
]

_WRITTEN = (KF4LLSRegressor, RLSRegressor, LMSRegressor, InterleavedKF4LLSRegressor,
            IncrementalBFGSRegressor, IRMARegressor, IRMAGradientDescentRegressor,
            IRMARLSRegressor)


def regressor_for(name: str) -> type[RecursionRegressor]:
    """The scikit-learn estimator class of the registered recursion ``name``.

    The classes of this package for its own recursions; for any other registered
    recursion, a block estimator (``block_size``, ``first_block_size`` and
    ``fit_intercept`` besides the recursion's parameters) named after it, built once.

    >>> from streamlsq.estimators import regressor_for
    >>> regressor_for("kf4lls").__name__
    'KF4LLSRegressor'
    """
    for cls in _WRITTEN:
        if cls._recursion == name:
            return cls
    kernel = RECURSIONS[name]  # KeyError: not registered
    if len(kernel.inputs) != 1:
        raise ValueError(f"recursion {name!r} reads {len(kernel.inputs)} inputs; it has no "
                         "generic estimator")
    class_name = "".join(w[:1].upper() + w[1:] for w in re.split(r"[^0-9A-Za-z]+", name))
    class_name += "Regressor"
    module = sys.modules[__name__]
    existing = getattr(module, class_name, None)
    if isinstance(existing, type) and existing._recursion == name \
            and RECURSIONS[name] is existing._kernel_class:
        return existing

    def body(ns):
        ns["__module__"] = __name__
        ns["__qualname__"] = class_name
        ns["__doc__"] = (f"{kernel.summary[:1].upper()}{kernel.summary[1:]}, as a scikit-learn "
                         f"estimator (built from the registry entry {name!r}).")

    cls = types.new_class(class_name, (BlocksMixin, InterceptColumnMixin, RecursionRegressor),
                          {"recursion": name}, body)
    setattr(module, class_name, cls)  # importable by name, so that it pickles
    return cls
