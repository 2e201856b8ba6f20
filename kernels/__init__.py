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
from streamlsq.kernels.recursions import *  # noqa: F403 - the recursions' public names

__all__ = [
    *recursions.__all__,
    "SingularMatrixError",
    "linalg",
    "mlr",
    "recursions",
    "spd_solve",
    "symmetrize",
]
