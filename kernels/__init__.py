"""Pure NumPy/SciPy/Numba kernels of streamlsq: no I/O, no dask, zarr or xarray.

Every kernel works on in-memory NumPy blocks and can be tested with a few arrays
(DESIGN.md §1). The pipeline (``streamlsq``) moves blocks to these functions.
"""

from .kf4lls import KF4LLS, RLS, block_sums, kf4lls_update
from .linalg import SingularMatrixError, spd_solve, symmetrize
from .recursion import FoldResult, Recursion, State, block_edges

__all__ = [
    "KF4LLS",
    "RLS",
    "FoldResult",
    "Recursion",
    "SingularMatrixError",
    "State",
    "block_edges",
    "block_sums",
    "kf4lls_update",
    "spd_solve",
    "symmetrize",
]
