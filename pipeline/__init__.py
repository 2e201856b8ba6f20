"""streamlsq: incremental least squares and meta-learning of linear regressions
over chunked Zarr stores, orchestrated with Dask.

The math lives in :mod:`streamlsq.kernels` (pure NumPy); this package opens and
validates stores, runs the kernels over them on a Dask cluster and writes results.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("streamlsq")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from .cluster import dask_client
from .errors import InputError
from .estimators import (
    IncrementalBFGSRegressor,
    InterleavedKF4LLSRegressor,
    IRMAGradientDescentRegressor,
    IRMARegressor,
    IRMARLSRegressor,
    KF4LLSRegressor,
    LMSRegressor,
    RLSRegressor,
)
from .fit import fit_stream
from .interleaved import fit_interleaved
from .methods import METHODS, make_method
from .simulate import simulate_interleaved, simulate_irma, simulate_stream
from .stores import StreamSource, open_dataset, open_result, open_stream

__all__ = [
    "METHODS",
    "IRMAGradientDescentRegressor",
    "IRMARLSRegressor",
    "IRMARegressor",
    "IncrementalBFGSRegressor",
    "InputError",
    "InterleavedKF4LLSRegressor",
    "KF4LLSRegressor",
    "LMSRegressor",
    "RLSRegressor",
    "StreamSource",
    "__version__",
    "dask_client",
    "fit_interleaved",
    "fit_stream",
    "make_method",
    "open_dataset",
    "open_result",
    "open_stream",
    "simulate_interleaved",
    "simulate_irma",
    "simulate_stream",
]
