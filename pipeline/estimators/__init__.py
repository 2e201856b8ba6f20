"""In-memory estimators with scikit-learn conventions, one per recursion.

:mod:`.base` holds the shared driver; one module per family holds its estimators.
"""

from streamlsq.estimators.bfgs import IncrementalBFGSRegressor
from streamlsq.estimators.irma import (
    IRMAGradientDescentRegressor,
    IRMARegressor,
    IRMARLSRegressor,
)
from streamlsq.estimators.least_squares import (
    InterleavedKF4LLSRegressor,
    KF4LLSRegressor,
    RLSRegressor,
)
from streamlsq.estimators.lms import LMSRegressor

__all__ = [
    "IRMAGradientDescentRegressor",
    "IRMARLSRegressor",
    "IRMARegressor",
    "IncrementalBFGSRegressor",
    "InterleavedKF4LLSRegressor",
    "KF4LLSRegressor",
    "LMSRegressor",
    "RLSRegressor",
]
