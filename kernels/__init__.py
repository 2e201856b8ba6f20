"""Pure NumPy/SciPy/Numba kernels of streamlsq: no I/O, no dask, zarr or xarray.

Every kernel works on in-memory NumPy blocks and can be tested with a few arrays
(DESIGN.md §1). The pipeline (``streamlsq``) moves blocks to these functions.

Modules:

- ``recursion``, ``linalg``: the recursion contract and the shared solves
- ``kf4lls`` (KF4LLS, RLS), ``interleaved``, ``lms``, ``bfgs``, ``irma`` + ``basis``:
  the recursive estimators
- ``mlr`` (and ``mlr_*``), ``whitening``: meta-learning for mixed linear regression
- ``synthetic``, ``synthetic_mlr``: reproducible generators of synthetic data
- ``study_interleaved``, ``study_irma``, ``study_lms``, ``study_bfgs``, ``study_mlr``
  (+ ``study_common``):
  the papers' studies — their data, Monte-Carlo batches and statistics
"""

from . import (
    basis,
    bfgs,
    interleaved,
    irma,
    kf4lls,
    linalg,
    lms,
    mlr,
    recursion,
    study_bfgs,
    study_common,
    study_interleaved,
    study_irma,
    study_lms,
    study_mlr,
    synthetic,
    synthetic_mlr,
    whitening,
)
from .basis import Basis, LegendreBasis, MonomialBasis, QuadratureBasis, TensorBasis, make_basis
from .bfgs import IncrementalBFGS
from .interleaved import InterleavedKF4LLS
from .irma import IRMA, IRMARLS, IRMAGradientDescent, StiffnessSchedule
from .kf4lls import KF4LLS, RLS, block_sums, kf4lls_update
from .linalg import SingularMatrixError, spd_solve, symmetrize
from .lms import LMS, StepSchedule, chunk_row_permutation, epoch_chunk_order, lms_fold_arrays
from .recursion import BadRowError, BlockGrid, FoldResult, Recursion, State, block_edges

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
    "SingularMatrixError",
    "State",
    "StepSchedule",
    "StiffnessSchedule",
    "TensorBasis",
    "basis",
    "bfgs",
    "block_edges",
    "block_sums",
    "chunk_row_permutation",
    "epoch_chunk_order",
    "interleaved",
    "irma",
    "kf4lls",
    "kf4lls_update",
    "linalg",
    "lms",
    "lms_fold_arrays",
    "make_basis",
    "mlr",
    "recursion",
    "spd_solve",
    "study_bfgs",
    "study_common",
    "study_interleaved",
    "study_irma",
    "study_lms",
    "study_mlr",
    "symmetrize",
    "synthetic",
    "synthetic_mlr",
    "whitening",
]
