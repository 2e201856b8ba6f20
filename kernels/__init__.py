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
- :mod:`~streamlsq.kernels.tallqr`: the triangular factor of a tall block of rows (the
  QR solver's exact summary)
"""
# ruff: noqa: F401 - the names imported for type checkers are this package's public API

import importlib
import pkgutil
from typing import TYPE_CHECKING

from streamlsq.kernels import recursions  # light: its names are imported on first use

#: public name -> module that defines it; subpackages and modules are imported on first
#: use, so that importing one kernel does not load SciPy, numba and every other kernel
_PUBLIC = {
    "SingularMatrixError": "streamlsq.kernels.linalg",
    "spd_solve": "streamlsq.kernels.linalg",
    "symmetrize": "streamlsq.kernels.linalg",
}
_MODULES = frozenset(info.name for info in pkgutil.iter_modules(__path__))


def __getattr__(name: str):
    if name == "__all__":  # with every registered recursion class: computed on first use
        return sorted({*recursions.__all__, *_PUBLIC, "linalg", "mlr", "recursions"})
    if name in _MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif not name.startswith("_"):
        value = getattr(recursions, name)  # its helpers and recursions (AttributeError)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__getattr__("__all__")))


if TYPE_CHECKING:  # for type checkers, IDEs and the API docs; at run time see __getattr__
    from streamlsq.kernels import linalg, mlr
    from streamlsq.kernels.linalg import SingularMatrixError, spd_solve, symmetrize
    from streamlsq.kernels.recursions import *  # noqa: F403 - the recursions' public names
