"""Pure NumPy/SciPy/Numba kernels of streamlsq: no I/O, no dask, zarr or xarray.

Every kernel works on in-memory NumPy blocks and can be tested with a few arrays
(DESIGN.md §1). The pipeline (``streamlsq``) moves blocks to these functions.
"""

from .basis import (
    Basis,
    LegendreBasis,
    MonomialBasis,
    QuadratureBasis,
    TensorBasis,
    gramian_cholesky,
    make_basis,
    quadrature_gramian,
)
from .bfgs import IncrementalBFGS, balanced_rates, bfgs_inverse_update, block_bfgs_inverse_update
from .irma import (
    IRMA,
    IRMARLS,
    IRMAGradientDescent,
    SequenceResult,
    StiffnessSchedule,
    batch_polynomial_fit,
    gd_sequences,
    irma_sequences,
    irma_step,
    rls_sequences,
)
from .kf4lls import KF4LLS, RLS, block_sums, kf4lls_update
from .linalg import SingularMatrixError, spd_solve, symmetrize
from .recursion import FoldResult, Recursion, State, block_edges

__all__ = [
    "IRMA",
    "IRMARLS",
    "KF4LLS",
    "RLS",
    "Basis",
    "FoldResult",
    "IRMAGradientDescent",
    "IncrementalBFGS",
    "LegendreBasis",
    "MonomialBasis",
    "QuadratureBasis",
    "Recursion",
    "SequenceResult",
    "SingularMatrixError",
    "State",
    "StiffnessSchedule",
    "TensorBasis",
    "balanced_rates",
    "batch_polynomial_fit",
    "bfgs_inverse_update",
    "block_bfgs_inverse_update",
    "block_edges",
    "block_sums",
    "gd_sequences",
    "gramian_cholesky",
    "irma_sequences",
    "irma_step",
    "kf4lls_update",
    "make_basis",
    "quadrature_gramian",
    "rls_sequences",
    "spd_solve",
    "symmetrize",
]
