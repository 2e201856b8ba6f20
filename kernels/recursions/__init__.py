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
