"""Recursive estimators: each consumes data blocks in order and carries a small state.

- :mod:`.contract`: what every recursion implements (``init``, ``update``, ``coef``,
  ``fold``; the scan form of the ones whose blocks enter through sums)
- :mod:`.kf4lls`: KF4LLS and RLS with a forgetting factor
- :mod:`.interleaved`: interleaved KF4LLS for a mixture of two populations
- :mod:`.lms`: LMS (Widrow–Hoff) with several outputs and step schedules
- :mod:`.shuffle`: the seeded visiting orders of shuffled epochs
- :mod:`.bfgs`: the incremental BFGS regressor
- :mod:`.irma`, :mod:`.basis`: IRMA and its baselines on a basis of raw inputs
- :mod:`.params`: :class:`~.params.Param`, the declaration (and check) of a parameter
- :mod:`.declarations`: what the command line and the estimators need of each recursion
  of this package, importable without its kernel
- :mod:`.registry`: every recursion by name, found in this package and in plugins

The recursion classes are public here under their class names (``KF4LLS``, ``LMS``, …,
and those of plugins): the registry resolves them on first use.
"""
# ruff: noqa: F401 - the names imported for type checkers are this package's public API

import importlib
import pkgutil
from typing import TYPE_CHECKING

#: public name -> module that defines it, for everything but the recursion classes
#: (imported on first use: numba and SciPy load only with the kernels that need them)
_PUBLIC = {
    "Basis": "streamlsq.kernels.recursions.basis",
    "LegendreBasis": "streamlsq.kernels.recursions.basis",
    "MonomialBasis": "streamlsq.kernels.recursions.basis",
    "QuadratureBasis": "streamlsq.kernels.recursions.basis",
    "TensorBasis": "streamlsq.kernels.recursions.basis",
    "make_basis": "streamlsq.kernels.recursions.basis",
    "BadRowError": "streamlsq.kernels.recursions.contract",
    "BlockGrid": "streamlsq.kernels.recursions.contract",
    "FoldResult": "streamlsq.kernels.recursions.contract",
    "Recursion": "streamlsq.kernels.recursions.contract",
    "State": "streamlsq.kernels.recursions.contract",
    "block_edges": "streamlsq.kernels.recursions.contract",
    "StiffnessSchedule": "streamlsq.kernels.recursions.irma",
    "block_sums": "streamlsq.kernels.recursions.kf4lls",
    "kf4lls_update": "streamlsq.kernels.recursions.kf4lls",
    "StepSchedule": "streamlsq.kernels.recursions.lms",
    "lms_fold_arrays": "streamlsq.kernels.recursions.lms",
    "chunk_row_permutation": "streamlsq.kernels.recursions.shuffle",
    "epoch_chunk_order": "streamlsq.kernels.recursions.shuffle",
}


#: the modules of the package (an attribute once imported, like any submodule)
_MODULES = frozenset(info.name for info in pkgutil.iter_modules(__path__))


def _public_names() -> list[str]:
    """``__all__``: the names above and the class name of every registered recursion."""
    from streamlsq.kernels.recursions.registry import RECURSIONS

    return sorted({*_PUBLIC, *(RECURSIONS.declaration(name).class_name for name in RECURSIONS)})


def __getattr__(name: str):
    if name == "__all__":
        return _public_names()
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif not name.startswith("_"):  # a recursion, by its class name (KF4LLS, LMS, ...)
        from streamlsq.kernels.recursions.registry import RECURSIONS

        value = RECURSIONS.by_class_name(name)
        if value is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_public_names()))


if TYPE_CHECKING:  # for type checkers, IDEs and the API docs; at run time see __getattr__
    from streamlsq.kernels.recursions.basis import (
        Basis,
        LegendreBasis,
        MonomialBasis,
        QuadratureBasis,
        TensorBasis,
        make_basis,
    )
    from streamlsq.kernels.recursions.bfgs import IncrementalBFGS
    from streamlsq.kernels.recursions.contract import (
        BadRowError,
        BlockGrid,
        FoldResult,
        Recursion,
        State,
        block_edges,
    )
    from streamlsq.kernels.recursions.interleaved import InterleavedKF4LLS
    from streamlsq.kernels.recursions.irma import (
        IRMA,
        IRMARLS,
        IRMAGradientDescent,
        StiffnessSchedule,
    )
    from streamlsq.kernels.recursions.kf4lls import KF4LLS, RLS, block_sums, kf4lls_update
    from streamlsq.kernels.recursions.lms import LMS, StepSchedule, lms_fold_arrays
    from streamlsq.kernels.recursions.shuffle import chunk_row_permutation, epoch_chunk_order
