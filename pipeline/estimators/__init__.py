"""In-memory estimators with scikit-learn conventions, one per recursion.

:mod:`.base` holds the shared driver; one module per family holds its estimators.
Each estimator's parameters are its recursion's declared parameters (from the
registry) followed by its own (``block_size``, …); :func:`regressor_for` gives the
estimator of any registered recursion: the class written for it (found by the
recursion its class statement names), or a plain block estimator built for it. A built
estimator is an attribute of this module under its class name (``ToyLmsRegressor`` for
a recursion ``toy-lms``), so that it pickles and imports by name, and ``__all__`` lists
the estimators of every registered recursion.
"""

# ruff: noqa: F401 - the written estimators are imported to be this package's names (and
# recorded by the recursion they drive); __all__ is computed, see __getattr__

from __future__ import annotations

import re
import sys
import types

from streamlsq.errors import InputError
from streamlsq.estimators.base import (
    BlocksMixin,
    InterceptColumnMixin,
    RecursionRegressor,
    recorded_regressor,
)
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


def _generated_name(name: str) -> str:
    """The class name of the estimator made for the recursion ``name`` (``ToyLmsRegressor``
    for ``toy-lms``)."""
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[^0-9A-Za-z]+", name)) \
        + "Regressor"


def regressor_for(name: str) -> type[RecursionRegressor]:
    """The scikit-learn estimator class of the registered recursion ``name``.

    The classes of this package for its own recursions (each found by the recursion its
    class statement names); for any other registered recursion, a block estimator
    (``block_size``, ``first_block_size`` and ``fit_intercept`` besides the recursion's
    parameters) named after it, built once and an attribute of this module (so that it
    pickles and imports by name).

    >>> from streamlsq.estimators import regressor_for
    >>> regressor_for("kf4lls").__name__
    'KF4LLSRegressor'
    """
    try:
        kernel = RECURSIONS[name]
    except KeyError:  # as fit_stream says it (a bare KeyError named the name alone)
        raise InputError(f"unknown method '{name}'; available: "
                         f"{', '.join(sorted(RECURSIONS))}") from None
    recorded = recorded_regressor(name)  # written, or made by an earlier call
    if recorded is not None:
        return recorded
    if len(kernel.inputs) != 1:
        raise ValueError(f"recursion {name!r} reads {len(kernel.inputs)} inputs "
                         f"({', '.join(kernel.inputs)}); it has no generic estimator")
    class_name = _generated_name(name)

    def body(ns):
        ns["__module__"] = __name__
        ns["__qualname__"] = class_name
        ns["__doc__"] = (f"{kernel.summary[:1].upper()}{kernel.summary[1:]}, as a scikit-learn "
                         f"estimator (built from the registry entry {name!r}).")

    cls = types.new_class(class_name, (BlocksMixin, InterceptColumnMixin, RecursionRegressor),
                          {"recursion": name}, body)
    setattr(sys.modules[__name__], class_name, cls)
    return cls


def _public_names() -> list[str]:
    """``__all__``: the estimator of every registered recursion (written, or made by
    :func:`regressor_for`) and :func:`regressor_for`."""
    names = {"regressor_for"}
    for name, kernel in RECURSIONS.items():
        recorded = recorded_regressor(name)
        if recorded is not None:
            names.add(recorded.__name__)
        elif len(kernel.inputs) == 1:
            names.add(_generated_name(name))
    return sorted(names)


def __getattr__(name: str):
    if name == "__all__":
        return _public_names()
    if not name.startswith("_"):
        for recursion in RECURSIONS:  # a made estimator, by its class name
            if _generated_name(recursion) == name and len(RECURSIONS[recursion].inputs) == 1:
                return regressor_for(recursion)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_public_names()))
