"""In-memory estimators with scikit-learn conventions, one per recursion.

Each class drives a kernel :class:`~streamlsq.kernels.recursion.Recursion` — the
same objects the pipeline folds over Zarr stores — on NumPy arrays (or anything
:func:`sklearn.utils.validation.validate_data` accepts: lists, DataFrames,
read-only memmaps). This module adds no math: it validates input, cuts the rows
into the blocks of the recursion, calls the kernel's ``init``/``fold`` and
exposes the kernel's coefficients in scikit-learn's shapes.

Common behaviour (see :class:`_RecursionRegressor`):

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

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from streamlsq.kernels import (
    IRMA,
    IRMARLS,
    KF4LLS,
    LMS,
    RLS,
    Basis,
    IncrementalBFGS,
    InterleavedKF4LLS,
    IRMAGradientDescent,
    LegendreBasis,
    MonomialBasis,
    Recursion,
    SingularMatrixError,
    State,
    StiffnessSchedule,
    TensorBasis,
    block_edges,
    chunk_row_permutation,
    epoch_chunk_order,
)
from streamlsq.kernels.interleaved import interleaved_block_order

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


def _check_block_size(value, name: str, allow_none: bool = True) -> int | None:
    """``value`` as a positive int (or None when allowed); ValueError naming ``name``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        allowed = "a positive integer or None" if allow_none else "a positive integer"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value)


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


class _Pass:
    """One ordered pass of rows through the kernel: the rows, in the order the
    kernel sees them, and the block edges over them."""

    __slots__ = ("X", "Y", "edges")

    def __init__(self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray):
        self.X, self.Y, self.edges = X, Y, np.asarray(edges, dtype=np.int64)


class _RecursionRegressor(RegressorMixin, BaseEstimator):
    """Shared driver: validation, blocks, the kernel's ``init``/``fold``, sklearn shapes.

    Subclasses implement :meth:`_make_kernel` (construct and thereby validate
    the kernel from the estimator's parameters) and may override
    :meth:`_design` (what the kernel sees as X), :meth:`_passes` (the order of
    the rows and the blocks) and ``_has_intercept_row`` (whether row 0 of the
    kernel's coefficients is the intercept).
    """

    # -- hooks ---------------------------------------------------------------
    def _make_kernel(self) -> Recursion:
        raise NotImplementedError

    def _check_params(self) -> None:
        """Checks of estimator-only parameters (the kernel checks its own)."""

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
        return [_Pass(X, Y, self._edges(X.shape[0], self.block_size, first))]

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
        kernel = self._make_kernel_checked()
        X, y = validate_data(
            self, X, y, reset=first_call, dtype=np.float64, multi_output=self._multi_output,
            y_numeric=True,
        )
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
            D = self._design(p.X)
            n_blocks = p.edges.size - 1
            if n_blocks == 0:
                continue
            try:
                res = kernel.fold(
                    state, D, p.Y, p.edges, n_steps + 1,
                    # record nothing: only the final state is kept
                    record_every=n_steps + n_blocks + 1, rows_before=rows_seen,
                )
            except SingularMatrixError as exc:
                raise ValueError(
                    f"{type(self).__name__}: the recursion's H became singular while folding "
                    f"n_samples = {X.shape[0]} rows in {n_blocks} block(s) of "
                    f"block_size={self.block_size!r} ({exc}): a rank-deficient first block "
                    f"or collinear columns; {self._singular_hint}"
                ) from exc
            state = res.state
            n_steps += n_blocks
            rows_seen += int(p.edges[-1])
        if first_call and n_steps == 0:
            raise ValueError(f"{type(self).__name__}: no block to fold: none of the rows was used")
        self._set_fitted(kernel, state, n_steps, rows_seen, y.ndim == 1 if first_call else None)
        return self

    def _make_kernel_checked(self) -> Recursion:
        try:
            self._check_params()
            return self._make_kernel()
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


class _InterceptColumnMixin:
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
class _BlocksMixin:
    """``block_size``, ``first_block_size`` and ``fit_intercept`` of the block solvers."""

    def _check_params(self):
        _check_block_size(self.block_size, "block_size")
        _check_block_size(self.first_block_size, "first_block_size")
        _check_bool(self.fit_intercept, "fit_intercept")

    def _first_block_size(self):
        return self.first_block_size

    def _edges(self, n_rows, block_size, first=None):
        if block_size is None and first is not None:
            # a first block, then the rest of the call as one block
            return np.unique(np.array([0, min(first, n_rows), n_rows], dtype=np.int64))
        return _RecursionRegressor._edges(n_rows, block_size, first)


class KF4LLSRegressor(_BlocksMixin, _InterceptColumnMixin, _RecursionRegressor):
    """Kalman filter for linear least squares (KF4LLS), block by block.

    H_i = H_{i−1} + X_iᵀX_i, ψ_i = ψ_{i−1} + H_i⁻¹X_iᵀ(Y_i − X_iψ_{i−1})
    (ALGORITHMS.md §1; kernel :class:`streamlsq.kernels.KF4LLS`). With
    ``ridge=0`` (H_0 = 0) the result after any number of rows is ordinary least
    squares on all rows seen — the same numbers as
    :class:`sklearn.linear_model.LinearRegression` (when X has full column rank),
    whatever the block size, and ``partial_fit`` over pieces equals ``fit``.

    Parameters
    ----------
    block_size : int or None, default None
        Rows per step of the recursion. None: every ``fit``/``partial_fit``
        call is one block.
    first_block_size : int or None, default None
        Rows of the very first block (default ``block_size``); with ``ridge=0``
        the first block needs ``n_features`` (+1 with the intercept) linearly
        independent rows.
    ridge : float, default 0
        δ of the ridge start H_0 = δI: the fit is then ridge regression with
        penalty δ‖ψ‖², the intercept included (see the module docstring).
    fit_intercept : bool, default True
        Prepend a constant column inside the estimator and report its
        coefficient as ``intercept_`` (a recursion cannot centre X and y by
        means it has not seen yet).

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        See the module docstring; ``state_`` holds H, psi, rows, blocks.
    """

    _singular_hint = "set ridge > 0 or a larger first_block_size"

    def __init__(self, block_size=None, first_block_size=None, ridge=0.0, fit_intercept=True):
        self.block_size = block_size
        self.first_block_size = first_block_size
        self.ridge = ridge
        self.fit_intercept = fit_intercept

    def _make_kernel(self):
        return KF4LLS(ridge=self.ridge)


class RLSRegressor(KF4LLSRegressor):
    """Recursive least squares with a forgetting factor, one row per step by default.

    H_i = g·H_{i−1} + X_iᵀX_i, H_iψ_i = g·H_{i−1}ψ_{i−1} + X_iᵀY_i
    (ALGORITHMS.md §1; kernel :class:`streamlsq.kernels.RLS`): the exponentially
    weighted least-squares fit, row weights g^(steps since the row's block).
    With ``forgetting=1`` and ``ridge=0`` it is ordinary least squares on the
    rows seen (an expanding window), which needs a full-rank first block
    (``first_block_size``).

    Parameters
    ----------
    forgetting : float in (0, 1], default 0.99
        g.
    ridge : float >= 0, default 1e-6
        μ of the start H_0 = μI (classic RLS: P_0 = I/μ); it decays like g^i.
        The default keeps per-sample RLS (``block_size=1``) solvable from the
        first row while biasing the fit negligibly.
    block_size : int or None, default 1
        Rows per step (None: each call is one block).
    first_block_size : int or None, default None
        Rows of the very first block (default ``block_size``).
    fit_intercept : bool, default True
        As for :class:`KF4LLSRegressor` (the ridge start shrinks the intercept too).
    """

    def __init__(
        self, forgetting=0.99, ridge=1e-6, block_size=1, first_block_size=None, fit_intercept=True
    ):
        self.forgetting = forgetting
        self.ridge = ridge
        self.block_size = block_size
        self.first_block_size = first_block_size
        self.fit_intercept = fit_intercept

    def _make_kernel(self):
        return RLS(forgetting=self.forgetting, ridge=self.ridge)


# ---------------------------------------------------------------------------
# LMS
# ---------------------------------------------------------------------------
class LMSRegressor(_RecursionRegressor):
    """LMS / Widrow–Hoff: per-sample stochastic gradient descent for least squares.

    W ← W + ρ_k x̃_n(t_nᵀ − x̃_nᵀW), x̃ = [1, x] (ALGORITHMS.md §3; kernel
    :class:`streamlsq.kernels.LMS`, a compiled per-sample loop). The constant
    column is the kernel's: ``intercept_`` is row 0 of W, always fitted.

    Parameters
    ----------
    schedule : {"constant", "inverse", "power"}, default "constant"
        ρ_k = ρ_0; ρ_0/(1 + k/τ); ρ_0/k^a. k counts samples over all epochs and
        all ``partial_fit`` calls.
    rate : float > 0, default 0.01
        ρ_0. Plain LMS needs ρ‖x̃‖² < 2: standardise X (e.g. a ``Pipeline``
        with ``StandardScaler``) or set ``normalized=True``.
    tau : float or None
        τ of the "inverse" schedule (required there, refused otherwise).
    power : float or None
        a ∈ (½, 1] of the "power" schedule (required there, refused otherwise).
    normalized : bool, default False
        Normalised LMS: the step is ρ_k/(ε + ‖x̃‖²).
    eps : float, default 1e-6
        ε of normalised LMS.
    epochs : int, default 1
        Passes of ``fit`` over the rows (``partial_fit`` always makes one pass).
    shuffle : bool, default False
        ``fit`` only: visit the rows of each epoch in a seeded shuffled order,
        exactly as the pipeline shuffles a store whose chunks have
        ``block_size`` rows: the chunks in the order
        :func:`~streamlsq.kernels.epoch_chunk_order` (seed, epoch) and the rows
        of each chunk in the order :func:`~streamlsq.kernels.chunk_row_permutation`
        (seed, epoch, chunk). With ``block_size=None`` the rows form one chunk,
        i.e. a uniform permutation per epoch.
    random_state : int, RandomState instance or None, default None
        The shuffle's seed: an int >= 0 is the seed itself (the pipeline's
        ``--seed``); None or a RandomState draws one seed per ``fit``.
    block_size : int or None, default None
        Rows per step (and per shuffled chunk); the numbers do not depend on it
        without shuffling. None: one block per call and epoch.

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        ``state_`` holds W ((n_features + 1) × K), k (samples so far) and blocks.
    """

    def __init__(
        self,
        schedule="constant",
        rate=0.01,
        tau=None,
        power=None,
        normalized=False,
        eps=1e-6,
        epochs=1,
        shuffle=False,
        random_state=None,
        block_size=None,
    ):
        self.schedule = schedule
        self.rate = rate
        self.tau = tau
        self.power = power
        self.normalized = normalized
        self.eps = eps
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.block_size = block_size

    def _has_intercept_row(self) -> bool:
        return True

    def _n_kernel_features(self, n_features: int) -> int:
        return n_features

    def _check_params(self):
        _check_block_size(self.block_size, "block_size")
        _check_block_size(self.epochs, "epochs", allow_none=False)
        _check_bool(self.shuffle, "shuffle")
        _check_bool(self.normalized, "normalized")
        if isinstance(self.random_state, numbers.Integral) and self.random_state < 0:
            raise ValueError(f"random_state must be >= 0 or None, got {self.random_state!r}")

    def _make_kernel(self):
        return LMS(
            schedule=self.schedule,
            rate=self.rate,
            tau=self.tau,
            power=self.power,
            normalized=self.normalized,
            eps=self.eps,
        )

    def _seed(self) -> int:
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _passes(self, kernel, state, X, Y, first_call, is_fit, **kw):
        edges = self._edges(X.shape[0], self.block_size)
        if not is_fit:
            return [_Pass(X, Y, edges)]
        if not self.shuffle:
            return [_Pass(X, Y, edges) for _ in range(self.epochs)]
        seed = self._seed()
        sizes = np.diff(edges)
        passes = []
        for epoch in range(self.epochs):
            order = epoch_chunk_order(seed, epoch, sizes.size, True)
            rows = np.concatenate(
                [
                    edges[c] + chunk_row_permutation(seed, epoch, int(c), int(sizes[c]), True)
                    for c in order
                ]
            )
            new_edges = np.concatenate([[0], np.cumsum(sizes[order])])
            passes.append(_Pass(X[rows], Y[rows], new_edges))
        return passes


# ---------------------------------------------------------------------------
# Interleaved KF4LLS
# ---------------------------------------------------------------------------
class InterleavedKF4LLSRegressor(_RecursionRegressor):
    """Interleaved KF4LLS: learn the α-mixture of two populations "a" and "b".

    Every block is centred (step 0(a)), scaled by √α ("a") or √(1−α) ("b")
    (step 0(b)) and folded by KF4LLS from H_0 = 0, the populations alternating
    a, b, a, … (or b, a, … with ``start="b"``) (ALGORITHMS.md §2; kernel
    :class:`streamlsq.kernels.InterleavedKF4LLS`).

    Which rows belong to which population — the fit parameter ``population``:

    - ``fit(X, y, population=labels)``: ``labels`` is an array of "a"/"b", one
      per row. The rows of each population, in their order, are cut into blocks
      of ``block_size`` rows (None: all of the population's rows in this call
      form one block), and the blocks are folded alternately, starting with
      ``start`` (``partial_fit``: with the population the state expects next).
      As in the pipeline, the stream stops when the population due next has no
      block left: the other population's surplus blocks are not used; a
      ``UserWarning`` says how many rows were left out, and ``rows_seen_``
      counts only the rows used. ``population`` is a sample-aligned fit
      parameter: ``cross_val_score(..., params={"population": labels})`` and
      ``Pipeline.fit(..., interleavedkf4llsregressor__population=labels)``
      split it with the rows.
    - ``fit(X, y)`` (``population=None``): X already is the interleaved stream;
      its consecutive blocks of ``block_size`` rows alternate populations,
      starting with ``start`` (``partial_fit``: continuing the parity of the
      state). With ``block_size=None`` the call is one block.

    With ``block_size=None``, one call with both populations is the paper's two
    steps: ψ₂ = G⁻¹(α UcᵀBc + (1−α) VcᵀFc) (Lemma 1).

    The model has no intercept: blocks are centred, so the fit estimates slopes
    only and ``predict`` returns X·ψ with ``intercept_ = 0`` (as the paper
    evaluates it). Centre X and y beforehand when their means matter.

    Parameters
    ----------
    alpha : float in [0, 1], default 0.5
        Mixing weight of the target population α·A + (1−α)·B.
    start : {"a", "b"}, default "a"
        Population of the first block.
    ridge : float >= 0, default 0
        δ of a ridge start H_0 = δI (0 is the paper's H_0 = 0: the first block
        then needs n_features + 1 rows, one is lost to centring).
    block_size : int or None, default None
        Rows per block (see above).
    """

    _singular_hint = (
        "a centred block of n rows has rank <= n - 1, so with ridge=0 the first block "
        "needs at least n_features + 1 rows (and nonzero weight); set ridge > 0 or a "
        "larger block_size"
    )

    def __init__(self, alpha=0.5, start="a", ridge=0.0, block_size=None):
        self.alpha = alpha
        self.start = start
        self.ridge = ridge
        self.block_size = block_size

    def _check_params(self):
        _check_block_size(self.block_size, "block_size")

    def _make_kernel(self):
        return InterleavedKF4LLS(alpha=self.alpha, start=self.start, ridge=self.ridge)

    def fit(self, X, y, population=None):
        """Fit from H_0 on (X, y); ``population``: per-row "a"/"b" labels or None."""
        return self._fit(X, y, first_call=True, is_fit=True, population=population)

    def partial_fit(self, X, y, population=None):
        """Continue the alternation from the current state; see :meth:`fit`."""
        first = not self.__sklearn_is_fitted__()
        return self._fit(X, y, first_call=first, is_fit=False, population=population)

    def _passes(self, kernel, state, X, Y, first_call, is_fit, population=None):
        n = X.shape[0]
        if population is None:
            return [_Pass(X, Y, self._edges(n, self.block_size))]
        labels = np.asarray(population)
        if labels.ndim != 1 or labels.shape[0] != n:
            raise ValueError(
                f"population must be a 1-D array with one label per row ({n}), "
                f"got shape {labels.shape}"
            )
        is_a = labels == "a"
        bad = ~(is_a | (labels == "b"))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            bad_label = np.asarray(labels[i]).tolist()  # a plain Python value in the message
            raise ValueError(f"population labels must be 'a' or 'b'; row {i} has {bad_label!r}")
        rows = {"a": np.flatnonzero(is_a), "b": np.flatnonzero(~is_a)}
        edges = {
            p: (self._edges(r.size, self.block_size) if r.size else np.zeros(1, np.int64))
            for p, r in rows.items()
        }
        order = interleaved_block_order(
            edges["a"].size - 1, edges["b"].size - 1, kernel.next_population(state)
        )
        pieces = [rows[p][edges[p][i] : edges[p][i + 1]] for p, i in order]
        used = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        if used.size < n:
            warnings.warn(
                f"{type(self).__name__}: {n - used.size} of {n} rows were not used: the "
                f"alternation stops when the population due next has no block left "
                f"(blocks: a={edges['a'].size - 1}, b={edges['b'].size - 1})",
                UserWarning,
                stacklevel=4,  # _passes < _fit < fit/partial_fit < caller
            )
        new_edges = np.concatenate([[0], np.cumsum([p.size for p in pieces], dtype=np.int64)])
        return [_Pass(X[used], Y[used], new_edges)]


# ---------------------------------------------------------------------------
# Incremental BFGS
# ---------------------------------------------------------------------------
class IncrementalBFGSRegressor(_BlocksMixin, _InterceptColumnMixin, _RecursionRegressor):
    """Incremental BFGS regressor (ALGORITHMS.md §4; kernel ``streamlsq.kernels.IncrementalBFGS``).

    The first block gives the least-squares start W₀ = H₀⁻¹X₀ᵀY₀, B₀ = H₀⁻¹; each
    later block takes the step δW = B X_kᵀ(Y_k − X_kW)·α (exact line search, a
    fixed rate, or class-balanced rates) and updates the inverse-Hessian
    approximation B by (2.8), skipping it when the curvature is not positive.
    With ``block_size=None`` a ``fit`` is one block, i.e. least squares (as
    :class:`~sklearn.linear_model.LinearRegression`); the recursion is not the
    least-squares fit of all blocks seen (use :class:`KF4LLSRegressor` for that).

    Parameters
    ----------
    rate : "exact" or float > 0, default "exact"
        α: exact line search on the block's loss, or a fixed rate α_r.
    balanced : bool, default False
        Class-balanced per-example rates from α_r (binary targets 0/1 or −1/1;
        with ``fit_intercept`` the constant column is part of the model).
    ridge : float >= 0, default 0
        δ of H₀ + δI, used only when the first block is rank deficient
        (``ridge_used_``); 0 refuses such a block.
    balance_counts : {"block", "cumulative"}, default "block"
        Counts of positives/negatives the balanced rates use.
    block_size, first_block_size : int or None, default None
        Rows per block (None: one block per call) and of the first block.
    fit_intercept : bool, default True
        A constant column prepended inside the estimator (see the module docstring).

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        ``state_`` holds W, B, rows, blocks, n_skipped, ridge_used (and the counts
        of balanced rates).
    n_skipped_ : int
        B updates skipped by the curvature safeguard so far.
    ridge_used_ : bool
        Whether the first block needed the ridge start.
    """

    _singular_hint = "set ridge > 0 or a larger first_block_size"

    def __init__(
        self,
        rate="exact",
        balanced=False,
        ridge=0.0,
        balance_counts="block",
        block_size=None,
        first_block_size=None,
        fit_intercept=True,
    ):
        self.rate = rate
        self.balanced = balanced
        self.ridge = ridge
        self.balance_counts = balance_counts
        self.block_size = block_size
        self.first_block_size = first_block_size
        self.fit_intercept = fit_intercept

    def _make_kernel(self):
        _check_bool(self.balanced, "balanced")
        return IncrementalBFGS(
            rate=self.rate,
            balanced=self.balanced,
            ridge=self.ridge,
            balance_counts=self.balance_counts,
        )

    def _set_extra_fitted(self, kernel, state):
        self.n_skipped_ = kernel.n_skipped(state)
        self.ridge_used_ = kernel.ridge_used(state)


# ---------------------------------------------------------------------------
# IRMA and its baselines
# ---------------------------------------------------------------------------
class _BasisRegressor(_RecursionRegressor):
    """Shared part of the IRMA estimators: the basis from parameters, scalar target.

    X holds the raw inputs x, one column per input dimension of the basis; the
    kernel expands them (and refuses points outside the domain). The model is
    f(x) = φ(x)ᵀθ: ``coef_`` is θ (n_basis,), the basis is ``basis_`` (its
    ``names`` label the coefficients) and there is no separate ``intercept_``
    (the constant function is in the basis).
    """

    _multi_output = False
    _reports_intercept = False

    def _check_params(self):
        _check_block_size(self.block_size, "block_size")

    def _make_basis(self) -> Basis:
        """The basis from ``basis``, ``order`` and ``domain`` (a Basis object is used as is).

        ``domain`` (a, b): one input; ((a0, b0), (a1, b1), …): the tensor product
        of one 1-D basis of degree ``order`` per input dimension.
        """
        if isinstance(self.basis, Basis):
            return self.basis
        kinds = {"legendre": LegendreBasis, "monomial": MonomialBasis}
        if not isinstance(self.basis, str) or self.basis not in kinds:
            raise ValueError(
                f"basis must be 'legendre', 'monomial' or a streamlsq.kernels Basis, "
                f"got {self.basis!r}"
            )
        cls = kinds[self.basis]
        if np.ndim(self.domain) == 2:
            return TensorBasis([cls(self.order, interval) for interval in self.domain])
        return cls(self.order, self.domain)

    def _predict_kernel(self, X):
        return self.basis_.evaluate(X, self._coef_matrix)

    def _set_extra_fitted(self, kernel, state):
        self.basis_ = kernel.basis


class IRMARegressor(_BasisRegressor):
    """Incremental risk minimisation (IRMA), one example at a time (ALGORITHMS.md §5).

    θ_{t+1} = θ_t + A⁻¹φ(x_t)e_t/(λ_t + φ(x_t)ᵀA⁻¹φ(x_t)), e_t = y_t − φ(x_t)ᵀθ_t,
    θ₀ = 0, A the Gramian of the basis on the domain (kernel
    :class:`streamlsq.kernels.IRMA`). The blocks do not change the numbers
    (the update is per sample); they only count ``n_steps_``.

    Parameters
    ----------
    order : int, default 4
        Polynomial degree of the basis (per input dimension).
    domain : (a, b) or sequence of (a_i, b_i), default (-1.0, 1.0)
        The bounded input domain Ω; X has one column per interval, and inputs
        outside Ω are refused (in ``fit`` and ``predict``).
    basis : "legendre", "monomial" or a streamlsq.kernels Basis, default "legendre"
        Legendre polynomials orthonormal on Ω (A = I; accurate at high orders)
        or monomials (Gramian factored once; refused when singular). A Basis
        object (e.g. :class:`~streamlsq.kernels.QuadratureBasis` for any user
        functions) is used as is, and then ``order`` and ``domain`` are ignored.
    stiffness : {"multiplicative", "additive", "constant"}, default "multiplicative"
        Schedule of λ_t: λ₀·r^t, λ₀ + r·t or λ₀ (t: examples seen before).
    stiffness_initial : float > 0, default 0.1
        λ₀ (the paper's 0.1).
    stiffness_rate : float, default 1.05
        r (the paper's 1.05; ignored by "constant").
    block_size : int or None, default None
        Rows per step (None: one block per call).

    Attributes
    ----------
    coef_ : (n_basis,) θ;  basis_ : the basis;  n_features_in_, feature_names_in_,
    state_ (theta, rows, blocks, cumulative_loss: Σ of squared pre-update errors),
    n_steps_, rows_seen_.
    """

    def __init__(
        self,
        order=4,
        domain=(-1.0, 1.0),
        basis="legendre",
        stiffness="multiplicative",
        stiffness_initial=0.1,
        stiffness_rate=1.05,
        block_size=None,
    ):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.stiffness = stiffness
        self.stiffness_initial = stiffness_initial
        self.stiffness_rate = stiffness_rate
        self.block_size = block_size

    def _make_kernel(self):
        schedule = StiffnessSchedule(self.stiffness, self.stiffness_initial, self.stiffness_rate)
        return IRMA(self._make_basis(), schedule)


class IRMAGradientDescentRegressor(_BasisRegressor):
    """The IRMA study's GD baseline: normalised gradient descent with Tikhonov μθᵀθ.

    Per example, one gradient step on (y_t − φᵀθ)² + μθᵀθ with the exactly
    minimising rate (kernel :class:`streamlsq.kernels.IRMAGradientDescent`).
    The paper runs its baselines on monomials (``basis="monomial"``).

    Parameters
    ----------
    order, domain, basis, block_size
        As for :class:`IRMARegressor`.
    mu : float >= 0, default 0.05
        Tikhonov weight (the paper's 0.05).
    """

    def __init__(self, order=4, domain=(-1.0, 1.0), basis="legendre", mu=0.05, block_size=None):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.mu = mu
        self.block_size = block_size

    def _make_kernel(self):
        return IRMAGradientDescent(self._make_basis(), mu=self.mu)


class IRMARLSRegressor(_BasisRegressor):
    """The IRMA study's RLS baseline: forgetting factor and a Tikhonov term that is not forgotten.

    θ_t minimises Σ g^{t−i}(y_i − φ_iᵀθ)² + g^tθᵀP₀⁻¹θ + μθᵀθ (kernel
    :class:`streamlsq.kernels.IRMARLS`, information form, one solve per example).

    Parameters
    ----------
    order, domain, basis, block_size
        As for :class:`IRMARegressor`.
    forgetting : float in (0, 1], default 0.9
        g (the paper's 0.9).
    mu : float >= 0, default 0.05
        Tikhonov weight (the paper's 0.05).
    p0 : float > 0, default 1
        P₀ = p0·I (the paper: the identity).
    """

    def __init__(
        self,
        order=4,
        domain=(-1.0, 1.0),
        basis="legendre",
        forgetting=0.9,
        mu=0.05,
        p0=1.0,
        block_size=None,
    ):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.forgetting = forgetting
        self.mu = mu
        self.p0 = p0
        self.block_size = block_size

    def _make_kernel(self):
        return IRMARLS(self._make_basis(), forgetting=self.forgetting, mu=self.mu, p0=self.p0)
