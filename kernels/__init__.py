"""Pure NumPy/SciPy/Numba kernels of streamlsq: no I/O, no dask, zarr or xarray.

Every kernel works on in-memory NumPy arrays and can be tested with a few of them;
the pipeline (the ``streamlsq`` package around this one) moves blocks of a store to
these functions on a Dask cluster. See ``docs/architecture.md``.

Subpackages, by concern:

- :mod:`~streamlsq.kernels.recursions`: the recursion contract and the recursive
  estimators (KF4LLS and RLS, interleaved KF4LLS, LMS, incremental BFGS, IRMA and
  its baselines with their bases), and the registry that names them
- :mod:`~streamlsq.kernels.mlr`: meta-learning for mixed linear regression (task
  layout, subspace, linkage, classification, refinement, prediction, EM,
  whitening, the in-memory reference algorithm)
- :mod:`~streamlsq.kernels.synthetic`: reproducible generators of synthetic data
- :mod:`~streamlsq.kernels.studies`: the papers' studies (their Monte-Carlo math)
- :mod:`~streamlsq.kernels.linalg`: the small dense solves every kernel shares
"""

from streamlsq.kernels import linalg, mlr, recursions
from streamlsq.kernels.linalg import SingularMatrixError, spd_solve, symmetrize
from streamlsq.kernels.recursions import (
    IRMA,
    IRMARLS,
    KF4LLS,
    LMS,
    RLS,
    BadRowError,
    Basis,
    BlockGrid,
    FoldResult,
    IncrementalBFGS,
    InterleavedKF4LLS,
    IRMAGradientDescent,
    LegendreBasis,
    MonomialBasis,
    QuadratureBasis,
    Recursion,
    State,
    StepSchedule,
    StiffnessSchedule,
    TensorBasis,
    block_edges,
    block_sums,
    chunk_row_permutation,
    epoch_chunk_order,
    kf4lls_update,
    lms_fold_arrays,
    make_basis,
)

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
    "block_edges",
    "block_sums",
    "chunk_row_permutation",
    "epoch_chunk_order",
    "kf4lls_update",
    "linalg",
    "lms_fold_arrays",
    "make_basis",
    "mlr",
    "recursions",
    "spd_solve",
    "symmetrize",
]
