"""In-memory estimators with scikit-learn conventions, one per recursion.

Each class drives a kernel :class:`~streamlsq.kernels.recursion.Recursion` — the
same objects the pipeline folds over Zarr stores — on NumPy arrays (or anything
:func:`sklearn.utils.validation.validate_data` accepts: lists, DataFrames,
read-only memmaps). This module adds no math: it validates input, cuts the rows
into the blocks of the recursion, calls the kernel's ``init``/``fold`` and
exposes the kernel's coefficients in scikit-learn's shapes.

Common behaviour (see :class:`RecursionRegressor`):

- ``fit(X, y)`` starts from a fresh kernel state and folds all rows in order,
  in blocks of ``block_size`` rows (``None``: the whole call is one block).
  ``partial_fit(X, y)`` continues from the current state (the first call
  initialises it); blocks never straddle two calls, so partial fits over pieces
  equal one fit on all rows when every piece is a whole number of blocks (or,
  for KF4LLS with ``ridge=0``, always: it is least squares on all rows seen).
- Inputs are upcast to float64 and the kernel state is float64, as in the
  pipeline's default ``dtype="float64"``: float32 data give the same numbers
  as the same data in float64, and predictions are float64.
- ``y`` of shape (n,) gives ``coef_`` (n_features,), a float ``intercept_`` and
  1-D predictions; ``y`` of shape (n, K) gives ``coef_`` (K, n_features),
  ``intercept_`` (K,) and (n, K) predictions, like
  :class:`sklearn.linear_model.LinearRegression`. The IRMA estimators have a
  scalar target (a column vector y is raveled with sklearn's
  ``DataConversionWarning``), ``coef_`` (n_basis,) and no ``intercept_``.
- Fitted attributes: ``coef_``, ``intercept_``, ``n_features_in_``,
  ``feature_names_in_`` (when fitted on a DataFrame with string column names),
  ``state_`` (the kernel state: a dict of NumPy arrays, as the pipeline
  checkpoints it), ``n_steps_`` (blocks folded) and ``rows_seen_`` (rows folded,
  counting every epoch of LMS).
- Parameters are only stored by ``__init__``; they are checked in ``fit`` /
  ``partial_fit`` by constructing the kernel, which raises ValueError naming
  the parameter.

Intercepts: KF4LLS, RLS and incremental BFGS have no intercept term of their own. Centring X and
y by their means, as a batch fit does, is not available to a recursion (the
means are not known until the end), so with ``fit_intercept=True`` the estimator
prepends a constant column of ones to X before the kernel sees it and reports
that column's coefficients as ``intercept_``. The intercept is then estimated
jointly with the slopes — exactly least squares with an intercept for KF4LLS
with ``ridge=0`` — and a ridge start (``ridge > 0``) shrinks it like the slopes.
LMS has its constant column inside the kernel (row 0 of ``W``); interleaved
KF4LLS centres every block and has no intercept (``intercept_`` is 0); the IRMA
models have the constant function in their basis.

Input dimension of IRMA: its X holds the raw inputs x of the basis, one column
per interval of ``domain`` (one by default), and points outside the domain are
refused — these estimators are function approximators of few inputs, not
regressors on arbitrary feature matrices.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from streamlsq.kernels import (
    Recursion,
    SingularMatrixError,
    State,
    block_edges,
)
from streamlsq.kernels.limits import largest_safe_magnitude, state_is_finite
from streamlsq.kernels.recursions.contract import BLOCK_SIZE, FIRST_BLOCK_SIZE, Param
from streamlsq.kernels.recursions.registry import RECURSIONS
from streamlsq.runtime.memory import fast_large_allocations

__all__ = [
    "BlocksMixin",
    "FIT_INTERCEPT",
    "InterceptColumnMixin",
    "Pass",
    "RecursionRegressor",
    "recorded_regressor",
]

_BLOCK_SIZE = BLOCK_SIZE.replace(optional=True, help="Rows per step of the recursion (None: "
                                 "each fit or partial_fit call is one block).")
FIT_INTERCEPT = Param("fit_intercept", True, "Prepend a constant column inside the estimator "
                      "and report its coefficient as intercept_.", type=bool)

#: the estimator classes of this package, by the name of the recursion each drives (the
#: written ones, recorded when their class statement runs, and the ones regressor_for made)
_BY_RECURSION: dict[str, type] = {}


def recorded_regressor(name: str) -> type | None:
    """The estimator class of this package (written, or made by ``regressor_for``) that
    drives the registered recursion ``name``; None when there is none for the recursion
    registered now under that name."""
    cls = _BY_RECURSION.get(name)
    if cls is None or RECURSIONS.get(name) is not cls._kernel_class:
        return None
    return cls


class Pass:
    """One ordered pass of rows through the kernel: the rows, in the order the
    kernel sees them, the block edges over them and the rows' precision weights (None:
    all 1)."""

    __slots__ = ("X", "Y", "edges", "w")

    def __init__(self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                 w: np.ndarray | None = None):
        self.X, self.Y, self.edges = X, Y, np.asarray(edges, dtype=np.int64)
        self.w = w


def _make_init(names_defaults: list[tuple[str, object]]) -> Callable[..., None]:
    """An ``__init__(self, a=…, b=…)`` that stores each argument under its own name.

    scikit-learn reads an estimator's parameters off ``inspect.signature(cls.__init__)``
    (``get_params``, ``clone``, the repr), so the function carries that signature as its
    ``__signature__`` and binds its arguments by it: positional or keyword, unknown or
    repeated names a ``TypeError``, as a written ``__init__`` would.
    """
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    signature = inspect.Signature([
        inspect.Parameter("self", positional),
        *(inspect.Parameter(name, positional, default=d) for name, d in names_defaults)])

    def __init__(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{type(self).__name__}(): {exc}") from None
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name != "self":
                setattr(self, name, value)

    __init__.__signature__ = signature
    return __init__


class RecursionRegressor(RegressorMixin, BaseEstimator):
    """Shared driver: validation, blocks, the kernel's ``init``/``fold``, sklearn shapes.

    A subclass names the recursion it drives, ``class KF4LLSRegressor(...,
    recursion="kf4lls", ridge=...)``: its parameters are then the recursion's
    declared parameters followed by the estimator's own (``_own_params`` of the
    classes it derives from, e.g. ``block_size``), with the defaults of the
    declarations unless the class statement overrides them; ``__init__`` is built
    from that list and :meth:`_make_kernel` passes the recursion's share to its
    ``from_params``. Subclasses may override :meth:`_design` (what the kernel sees
    as X), :meth:`_passes` (the order of the rows and the blocks) and
    ``_has_intercept_row`` (whether row 0 of the kernel's coefficients is the
    intercept).
    """

    #: registered name of the recursion (set by the class statement's ``recursion=``)
    _recursion: ClassVar[str | None] = None
    #: the estimator's own parameters, beyond the recursion's
    _own_params: ClassVar[tuple[Param, ...]] = (_BLOCK_SIZE,)
    #: the recursion's declared parameters, and the estimator's own that are not among
    #: them (set by the class statement's ``recursion=``)
    _kernel_params: ClassVar[tuple[Param, ...]] = ()
    _estimator_params: ClassVar[tuple[Param, ...]] = ()

    def __init_subclass__(cls, recursion: str | None = None, **defaults):
        super().__init_subclass__()
        if recursion is None:
            return
        kernel = RECURSIONS[recursion]
        own = {}
        for klass in reversed(cls.__mro__):
            for p in vars(klass).get("_own_params", ()):
                own.pop(p.name, None)
                own[p.name] = p
        estimator = [p for p in own.values() if p.name not in {k.name for k in kernel.params}]
        declared = [*kernel.params, *estimator]
        unknown = set(defaults) - {p.name for p in declared}
        if unknown:
            raise TypeError(f"{cls.__name__}: no parameter {', '.join(sorted(unknown))}")
        cls._recursion = recursion
        cls._kernel_class = kernel
        cls._kernel_params = tuple(kernel.params)
        cls._estimator_params = tuple(estimator)
        init = _make_init([(p.name, defaults.get(p.name, p.default)) for p in declared])
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        init.__doc__ = f"Store the parameters (checked in ``fit``); see {cls.__name__}."
        cls.__init__ = init
        if cls.__module__.split(".")[:2] == __name__.split(".")[:2]:  # this package's own
            _BY_RECURSION[recursion] = cls

    # -- hooks ---------------------------------------------------------------
    def _make_kernel(self, X: np.ndarray, first_call: bool) -> Recursion:
        """The recursion from the estimator's values of its declared parameters."""
        return RECURSIONS[self._recursion].from_params(**self._kernel_values(X, first_call))

    def _kernel_values(self, X: np.ndarray, first_call: bool) -> dict:
        """The recursion's parameters for a fit on X (``first_call``: a fresh state); the
        recursion checks them."""
        return {p.name: getattr(self, p.name) for p in self._kernel_params}

    def _check_params(self) -> None:
        """Checks of the estimator's own parameters, each by its declaration (the kernel
        checks its own)."""
        for p in self._estimator_params:
            p.check(getattr(self, p.name))

    def _has_intercept_row(self) -> bool:
        return False

    def _design(self, X: np.ndarray) -> np.ndarray:
        """The rows as the kernel consumes them (default: X itself)."""
        return X

    def _n_kernel_features(self, n_features: int) -> int:
        return self._design(np.zeros((1, n_features))).shape[1]

    def _passes(self, kernel, state, X, Y, first_call: bool, is_fit: bool, **kw):
        """Passes of rows for one fit/partial_fit call (default: one pass, in order)."""
        first = self._first_block_size() if first_call else None
        return [Pass(X, Y, self._edges(X.shape[0], self.block_size, first))]

    def _first_block_size(self) -> int | None:
        return None

    @staticmethod
    def _edges(n_rows: int, block_size: int | None, first: int | None = None) -> np.ndarray:
        if block_size is None:
            return np.array([0, n_rows], dtype=np.int64)
        return block_edges(n_rows, block_size, first)

    _singular_hint = "set ridge > 0"
    #: whether y may have several columns (else 1-D y, sklearn's column-vector warning)
    _multi_output = True
    #: whether the model has an ``intercept_`` attribute (a basis expansion has none)
    _reports_intercept = True

    # -- sklearn plumbing ----------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = self._multi_output
        tags.target_tags.single_output = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "state_")

    # -- public API ------------------------------------------------------------
    def fit(self, X, y):
        """Fit from a fresh kernel state on all rows of (X, y), in order; returns self."""
        return self._fit(X, y, first_call=True, is_fit=True)

    def partial_fit(self, X, y):
        """Continue from the current state with the rows of (X, y); returns self.

        The first call (or the first after construction or ``clone``) starts a
        fresh state. Later calls need the same number of features (and of
        targets) as the first.
        """
        return self._fit(X, y, first_call=not self.__sklearn_is_fitted__(), is_fit=False)

    def predict(self, X):
        """Predictions (n,) for a 1-D training y, (n, K) for a 2-D one (float64)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        Y = self._predict_kernel(X)
        return Y[:, 0] if self._y_1d else Y

    def _predict_kernel(self, X: np.ndarray) -> np.ndarray:
        """(n, K) predictions of the linear model: X·coef + intercept."""
        W = self._coef_matrix
        if self._has_intercept_row():
            return X @ W[1:] + W[0]
        return X @ W

    # -- the driver ------------------------------------------------------------
    def _fit(self, X, y, first_call: bool, is_fit: bool, **fit_params):
        if is_fit:  # a failed fit leaves the estimator unfitted, not half-refitted
            for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
                delattr(self, name)
        X, y = validate_data(
            self, X, y, reset=first_call, dtype=np.float64, multi_output=self._multi_output,
            y_numeric=True,
        )
        kernel = self._make_kernel_checked(X, first_call)
        y = np.asarray(y, dtype=np.float64)
        Y = y[:, None] if y.ndim == 1 else y
        if not first_call:
            n_targets = self._coef_matrix.shape[1]
            if Y.shape[1] != n_targets:
                raise ValueError(
                    f"y has {Y.shape[1]} target(s), but {type(self).__name__} was fitted "
                    f"with {n_targets}: partial_fit needs the same targets on every call"
                )
        try:
            fresh = kernel.init(self._n_kernel_features(X.shape[1]), Y.shape[1], np.float64)
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}: {exc}") from None
        if first_call:
            state = fresh
            n_steps, rows_seen = 0, 0
        else:
            state = self.state_
            changed = [k for k in fresh if np.shape(fresh[k]) != np.shape(state.get(k))]
            if changed or set(fresh) != set(state):
                raise ValueError(
                    f"{type(self).__name__}: the parameters no longer match the fitted state "
                    f"(state arrays {changed or sorted(set(fresh) ^ set(state))} differ, e.g. "
                    f"after set_params); call fit to start again"
                )
            n_steps, rows_seen = self.n_steps_, self.rows_seen_
        passes = self._passes(kernel, state, X, Y, first_call, is_fit, **fit_params)
        for p in passes:
            n_blocks = p.edges.size - 1
            if n_blocks == 0:
                continue
            try:
                with np.errstate(all="ignore"):  # the state is checked finite below
                    state = self._fold_pass(kernel, state, p, n_steps, rows_seen)
            except SingularMatrixError as exc:
                raise self._too_large(X, Y, rows_seen) or ValueError(
                    f"{type(self).__name__}: the recursion's H became singular while folding "
                    f"n_samples = {X.shape[0]} rows in {n_blocks} block(s) of "
                    f"block_size={self.block_size!r} ({exc}): a rank-deficient first block "
                    f"or collinear columns; {self._singular_hint}"
                ) from exc
            except (ValueError, ArithmeticError) as exc:  # LinAlgError is a ValueError
                too_large = self._too_large(X, Y, rows_seen)
                if too_large is None:
                    raise
                raise too_large from exc
            if not state_is_finite(state):
                raise self._too_large(X, Y, rows_seen) or ValueError(
                    f"{type(self).__name__}: the recursion's state stopped being finite while "
                    f"folding n_samples = {X.shape[0]} rows: the data's scale overflows its "
                    "arithmetic; rescale X and y (e.g. with sklearn.preprocessing."
                    "StandardScaler)")
            n_steps += n_blocks
            rows_seen += int(p.edges[-1])
        if first_call and n_steps == 0:
            raise ValueError(f"{type(self).__name__}: no block to fold: none of the rows was used")
        self._set_fitted(kernel, state, n_steps, rows_seen, y.ndim == 1 if first_call else None)
        return self

    def _too_large(self, X: np.ndarray, Y: np.ndarray, rows_before: int) -> ValueError | None:
        """The error naming a value of X or y too large for the least-squares sums over the
        rows seen (:func:`~streamlsq.kernels.limits.largest_safe_magnitude`), else None."""
        limit = largest_safe_magnitude(rows_before + X.shape[0])
        for name, A in (("X", X), ("y", Y)):
            big = np.abs(A) > limit
            if big.any():
                i, j = (int(v) for v in np.argwhere(big)[0])
                return ValueError(
                    f"{type(self).__name__}: {name}[{i}, {j}] = {float(A[i, j]):.3g} is above "
                    f"{limit:.3g}, where the least-squares sums over {rows_before + X.shape[0]} "
                    "rows overflow float64; rescale X and y (e.g. with sklearn.preprocessing."
                    "StandardScaler)")
        return None

    #: rows of X handed to the kernel at a time, in whole blocks (when blocks are smaller):
    #: the design (e.g. X with a column of ones) is then built piece by piece in cache
    #: instead of as one copy of X through memory (tests/benchmarks/bench_estimators.py)
    _PIECE_BYTES = 1 << 22

    def _fold_pass(self, kernel, state, p: Pass, n_steps: int, rows_seen: int):
        """Fold one pass, in pieces of whole blocks of about ``_PIECE_BYTES`` of X; only
        the final state is kept (nothing recorded). The same numbers as one fold."""
        target = max(1, self._PIECE_BYTES // (8 * max(1, p.X.shape[1])))
        with fast_large_allocations():  # each piece's design reuses the last one's pages
            return self._fold_pieces(kernel, state, p, n_steps, rows_seen, target)

    def _fold_pieces(self, kernel, state, p: Pass, n_steps, rows_seen, target):
        edges = p.edges
        j, n_blocks = 0, edges.size - 1
        while j < n_blocks:
            k = max(j + 1, int(np.searchsorted(edges, edges[j] + target, side="right")) - 1)
            k = min(k, n_blocks)
            a, b = int(edges[j]), int(edges[k])
            weighted = {} if p.w is None else {"weights": p.w[a:b]}
            res = kernel.fold(
                state, self._design(p.X[a:b]), p.Y[a:b], edges[j:k + 1] - a,
                n_steps + j + 1, record_every=n_steps + n_blocks + 1,  # record nothing
                rows_before=rows_seen + a, **weighted,
            )
            state = res.state
            j = k
        return state

    def _make_kernel_checked(self, X: np.ndarray, first_call: bool) -> Recursion:
        try:
            self._check_params()
            return self._make_kernel(X, first_call)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{type(self).__name__}: {exc}") from None

    def _set_fitted(self, kernel, state: State, n_steps: int, rows_seen: int, y_1d):
        W = np.asarray(kernel.coef(state))
        self.state_ = state
        self.n_steps_ = int(n_steps)
        self.rows_seen_ = int(rows_seen)
        self._coef_matrix = W
        if y_1d is not None:
            self._y_1d = bool(y_1d)
        slopes = W[1:] if self._has_intercept_row() else W
        intercept = W[0] if self._has_intercept_row() else np.zeros(W.shape[1], dtype=W.dtype)
        if self._y_1d:
            self.coef_ = slopes[:, 0].copy()
            if self._reports_intercept:
                self.intercept_ = float(intercept[0])
        else:
            self.coef_ = slopes.T.copy()
            if self._reports_intercept:
                self.intercept_ = intercept.copy()
        self._set_extra_fitted(kernel, state)

    def _set_extra_fitted(self, kernel, state: State) -> None:
        """Method-specific fitted attributes (none by default)."""


class InterceptColumnMixin:
    """``fit_intercept``: a column of ones prepended to X (row 0 of the coefficients)."""

    def _has_intercept_row(self) -> bool:
        return bool(self.fit_intercept)

    def _design(self, X: np.ndarray) -> np.ndarray:
        if not self.fit_intercept:
            return X
        return np.hstack([np.ones((X.shape[0], 1), dtype=X.dtype), X])


# ---------------------------------------------------------------------------
# KF4LLS and RLS
# ---------------------------------------------------------------------------
class BlocksMixin:
    """``block_size``, ``first_block_size`` and ``fit_intercept`` of the block solvers."""

    _own_params = (_BLOCK_SIZE, FIRST_BLOCK_SIZE, FIT_INTERCEPT)

    def _first_block_size(self):
        return self.first_block_size

    def _edges(self, n_rows, block_size, first=None):
        if block_size is None and first is not None:
            # a first block, then the rest of the call as one block
            return np.unique(np.array([0, min(first, n_rows), n_rows], dtype=np.int64))
        return RecursionRegressor._edges(n_rows, block_size, first)


