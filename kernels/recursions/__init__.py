"""Recursive estimators: each consumes data blocks in order and carries a small state.

- :mod:`.contract`: what every recursion implements (``init``, ``update``, ``coef``,
  ``fold``; the scan form of the ones whose blocks enter through sums)
- :mod:`.kf4lls`: KF4LLS and RLS with a forgetting factor
- :mod:`.interleaved`: interleaved KF4LLS for a mixture of two populations
- :mod:`.lms`: LMS (Widrow–Hoff) with several outputs and step schedules
- :mod:`.shuffle`: the seeded visiting orders of shuffled epochs
- :mod:`.bfgs`: the incremental BFGS regressor
- :mod:`.irma`, :mod:`.basis`: IRMA and its baselines on a basis of raw inputs
"""

import importlib
from typing import TYPE_CHECKING

#: public name -> module that defines it (imported on first use: numba and SciPy load
#: only with the recursions that need them)
_PUBLIC = {
    "Basis": "streamlsq.kernels.recursions.basis",
    "LegendreBasis": "streamlsq.kernels.recursions.basis",
    "MonomialBasis": "streamlsq.kernels.recursions.basis",
    "QuadratureBasis": "streamlsq.kernels.recursions.basis",
    "TensorBasis": "streamlsq.kernels.recursions.basis",
    "make_basis": "streamlsq.kernels.recursions.basis",
    "IncrementalBFGS": "streamlsq.kernels.recursions.bfgs",
    "BadRowError": "streamlsq.kernels.recursions.contract",
    "BlockGrid": "streamlsq.kernels.recursions.contract",
    "FoldResult": "streamlsq.kernels.recursions.contract",
    "Recursion": "streamlsq.kernels.recursions.contract",
    "State": "streamlsq.kernels.recursions.contract",
    "block_edges": "streamlsq.kernels.recursions.contract",
    "InterleavedKF4LLS": "streamlsq.kernels.recursions.interleaved",
    "IRMA": "streamlsq.kernels.recursions.irma",
    "IRMARLS": "streamlsq.kernels.recursions.irma",
    "IRMAGradientDescent": "streamlsq.kernels.recursions.irma",
    "StiffnessSchedule": "streamlsq.kernels.recursions.irma",
    "KF4LLS": "streamlsq.kernels.recursions.kf4lls",
    "RLS": "streamlsq.kernels.recursions.kf4lls",
    "block_sums": "streamlsq.kernels.recursions.kf4lls",
    "kf4lls_update": "streamlsq.kernels.recursions.kf4lls",
    "LMS": "streamlsq.kernels.recursions.lms",
    "StepSchedule": "streamlsq.kernels.recursions.lms",
    "lms_fold_arrays": "streamlsq.kernels.recursions.lms",
    "chunk_row_permutation": "streamlsq.kernels.recursions.shuffle",
    "epoch_chunk_order": "streamlsq.kernels.recursions.shuffle",
}

__all__ = [
    "IRMA",
    "IRMARLS",
    "KF4LLS",
    "LMS",
    "RLS",
    "BadRowError",
    "Basis",
    "BlockGrid",
    "FoldResult",
    "IRMAGradientDescent",
    "IncrementalBFGS",
    "InterleavedKF4LLS",
    "LegendreBasis",
    "MonomialBasis",
    "QuadratureBasis",
    "Recursion",
    "State",
    "StepSchedule",
    "StiffnessSchedule",
    "TensorBasis",
    "block_edges",
    "block_sums",
    "chunk_row_permutation",
    "epoch_chunk_order",
    "kf4lls_update",
    "lms_fold_arrays",
    "make_basis",
]


def __getattr__(name: str):
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


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
