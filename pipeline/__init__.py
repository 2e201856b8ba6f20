"""streamlsq: incremental least squares and meta-learning of linear regressions
over chunked Zarr stores, orchestrated with Dask.

The math lives in :mod:`streamlsq.kernels` (pure NumPy/SciPy/Numba, no I/O); this
package opens and validates stores, runs the kernels over them on a Dask cluster and
writes results. Its subpackages, from the bottom up:

- :mod:`streamlsq.io` (stores, results, checkpoints) and :mod:`streamlsq.runtime`
  (the Dask client, reductions, progress, worker memory)
- :mod:`streamlsq.stream` (recursions over stream stores), :mod:`streamlsq.mlr`
  (meta-learning over multi-task stores), :mod:`streamlsq.simulate` (synthetic
  stores) and :mod:`streamlsq.estimators` (scikit-learn estimators, in memory)
- :mod:`streamlsq.studies` (the papers' studies and the demo)
- :mod:`streamlsq.cli` (the ``streamlsq`` command)

The public functions below are imported on first use, so ``import streamlsq`` (and
the command line's start) stays fast.
"""

# ruff: noqa: F401 - the names below are imported for type checkers and IDEs; __all__ is
# computed (see __getattr__)

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING


def _version() -> str:
    """The installed distribution's version (read when ``__version__`` is first asked for:
    importlib.metadata takes tens of milliseconds of every command's start)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamlsq")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0+unknown"


#: public name -> module that defines it
_PUBLIC = {
    "InputError": "streamlsq.errors",
    "dask_client": "streamlsq.runtime.client",
    "StreamSource": "streamlsq.io.sources",
    "open_stream": "streamlsq.io.sources",
    "TaskSource": "streamlsq.io.tasks",
    "open_tasks": "streamlsq.io.tasks",
    "open_dataset": "streamlsq.io.stores",
    "open_result": "streamlsq.io.results",
    "RECURSIONS": "streamlsq.stream.methods",
    "make_method": "streamlsq.stream.methods",
    "fit_stream": "streamlsq.stream.fit",
    "fit_glm": "streamlsq.stream.glm",
    "predict_stream": "streamlsq.stream.apply",
    "convert": "streamlsq.conversion",
    "fit_interleaved": "streamlsq.stream.interleaved",
    "stability": "streamlsq.stream.stability",
    "plot_fit": "streamlsq.stream.stability",
    "summary": "streamlsq.stream.statistics",
    "wald_test": "streamlsq.stream.statistics",
    "robust_covariance": "streamlsq.stream.robust",
    "metalearn": "streamlsq.mlr.metalearn",
    "fit_pooled": "streamlsq.mlr.metalearn",
    "predict": "streamlsq.prediction",
    "fit_em": "streamlsq.mlr.em",
    "example_tasks": "streamlsq.mlr.examples",
    "tasks_from_frame": "streamlsq.mlr.examples",
    "simulate_stream": "streamlsq.simulate.streams",
    "simulate_interleaved": "streamlsq.simulate.streams",
    "simulate_irma": "streamlsq.simulate.streams",
    "simulate_mlr": "streamlsq.simulate.tasks",
    "regressor_for": "streamlsq.estimators",
}

#: the names above; every estimator of :mod:`streamlsq.estimators` joins them in ``__all__``
_NAMES = [
    "__version__",
    "convert",
    "dask_client",
    "example_tasks",
    "fit_em",
    "fit_glm",
    "fit_interleaved",
    "fit_pooled",
    "fit_stream",
    "InputError",
    "make_method",
    "metalearn",
    "RECURSIONS",
    "open_dataset",
    "open_result",
    "open_stream",
    "open_tasks",
    "plot_fit",
    "predict",
    "predict_stream",
    "regressor_for",
    "robust_covariance",
    "simulate_interleaved",
    "simulate_irma",
    "simulate_mlr",
    "simulate_stream",
    "stability",
    "StreamSource",
    "summary",
    "tasks_from_frame",
    "TaskSource",
    "wald_test",
]


def __getattr__(name: str):
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name == "__all__":  # the functions, and an estimator for every registered recursion
        estimators = importlib.import_module("streamlsq.estimators")
        return sorted([*_NAMES, *estimators.__all__], key=str.lower)
    if name.endswith("Regressor"):  # the written estimators and the generated ones
        return getattr(importlib.import_module("streamlsq.estimators"), name)
    if name == "METHODS":  # the registry's earlier name
        import warnings

        warnings.warn("streamlsq.METHODS is streamlsq.RECURSIONS (the registry of "
                      "recursions); use that name", DeprecationWarning, stacklevel=2)
        name = "RECURSIONS"
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'streamlsq' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # import once
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC) | {"__all__"})


if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamlsq.conversion import convert
    from streamlsq.errors import InputError
    from streamlsq.estimators import (
        IncrementalBFGSRegressor,
        InterleavedKF4LLSRegressor,
        IRMAGradientDescentRegressor,
        IRMARegressor,
        IRMARLSRegressor,
        KF4LLSRegressor,
        LMSRegressor,
        RLSRegressor,
        regressor_for,
    )
    from streamlsq.io.results import open_result
    from streamlsq.io.sources import StreamSource, open_stream
    from streamlsq.io.stores import open_dataset
    from streamlsq.io.tasks import TaskSource, open_tasks
    from streamlsq.mlr.em import fit_em
    from streamlsq.mlr.examples import example_tasks, tasks_from_frame
    from streamlsq.mlr.metalearn import fit_pooled, metalearn
    from streamlsq.prediction import predict
    from streamlsq.runtime.client import dask_client
    from streamlsq.simulate.streams import simulate_interleaved, simulate_irma, simulate_stream
    from streamlsq.simulate.tasks import simulate_mlr
    from streamlsq.stream.apply import predict_stream
    from streamlsq.stream.fit import fit_stream
    from streamlsq.stream.glm import fit_glm
    from streamlsq.stream.interleaved import fit_interleaved
    from streamlsq.stream.methods import RECURSIONS, make_method
    from streamlsq.stream.robust import robust_covariance
    from streamlsq.stream.stability import plot_fit, stability
    from streamlsq.stream.statistics import summary, wald_test
