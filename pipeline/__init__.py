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
from .em import fit_em
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
from .examples import example_tasks, tasks_from_frame
from .fit import fit_stream
from .interleaved import fit_interleaved
from .metalearn import fit_pooled, metalearn
from .methods import METHODS, make_method
from .predict import predict
from .simulate import simulate_interleaved, simulate_irma, simulate_stream
from .simulate_mlr import simulate_mlr
from .stores import StreamSource, open_dataset, open_result, open_stream
from .tasks import TaskSource, open_tasks

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
    "TaskSource",
    "__version__",
    "dask_client",
    "fit_interleaved",
    "example_tasks",
    "fit_em",
    "fit_pooled",
    "fit_stream",
    "make_method",
    "metalearn",
    "open_dataset",
    "open_result",
    "open_stream",
    "simulate_interleaved",
    "open_tasks",
    "predict",
    "simulate_mlr",
    "simulate_irma",
    "simulate_stream",
    "tasks_from_frame",
]
