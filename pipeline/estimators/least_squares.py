"""KF4LLS, RLS and interleaved KF4LLS as scikit-learn estimators.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from streamlsq.estimators.base import (
    BlocksMixin,
    InterceptColumnMixin,
    Pass,
    RecursionRegressor,
)
from streamlsq.kernels.inference import classical_statistics
from streamlsq.kernels.recursions.interleaved import interleaved_block_order
from streamlsq.report import coefficient_table

__all__ = [
    "InterleavedKF4LLSRegressor",
    "LeastSquaresStatisticsMixin",
    "KF4LLSRegressor",
    "RLSRegressor",
]


class LeastSquaresStatisticsMixin:
    """``sample_weight`` (precision weights, as statsmodels' ``WLS`` takes them) and the
    statistics of a least-squares fit as fitted attributes (statsmodels' names with
    scikit-learn's trailing underscore: ``bse_``, ``tvalues_``, ``pvalues_``,
    ``conf_int_``, ``rsquared_``, …), with :meth:`summary`.

    The statistics cover every coefficient of the model, the intercept first when
    ``fit_intercept`` (as in statsmodels and the pipeline's results): for a 1-D ``y``,
    ``bse_`` has ``n_features_in_ + fit_intercept`` entries, ``conf_int_`` that many rows
    of (lower, upper) and the model statistics (``rsquared_``, ``fvalue_``, ``nobs_``, …)
    are numbers; for a 2-D ``y`` each gains a leading target axis. They are computed from
    the kernel's state (:mod:`streamlsq.kernels.inference`) with the nonrobust covariance
    and 95% intervals; :meth:`conf_int` gives other levels. Where no statistic applies
    (a forgetting factor below 1, a ridge start) ``statistics_unavailable_`` says why.
    """

    def fit(self, X, y, sample_weight=None):
        """Fit from a fresh kernel state on all rows of (X, y), in order (each row
        weighted by ``sample_weight``: 0 leaves it out); returns self."""
        return self._fit(X, y, first_call=True, is_fit=True, sample_weight=sample_weight)

    def partial_fit(self, X, y, sample_weight=None):
        """Continue from the current state with the rows of (X, y), weighted by
        ``sample_weight``; returns self."""
        return self._fit(X, y, first_call=not self.__sklearn_is_fitted__(), is_fit=False,
                         sample_weight=sample_weight)

    def _passes(self, kernel, state, X, Y, first_call, is_fit, sample_weight=None):
        passes = super()._passes(kernel, state, X, Y, first_call, is_fit)
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                     ensure_non_negative=True)
            for p in passes:
                p.w = w
        return passes

    def _set_extra_fitted(self, kernel, state) -> None:
        for name in [k for k in vars(self) if k in _STATISTICS_ATTRS]:
            delattr(self, name)
        self.statistics_unavailable_ = kernel.inference_unavailable()
        if self.statistics_unavailable_ is not None:
            return
        self._factor = kernel.regression(state)
        stats = classical_statistics(self._factor, constant=0 if self.fit_intercept else None)
        one = self._y_1d
        for name in ("nobs", "df_model", "df_resid", "ssr", "scale", "rsquared", "rsquared_adj",
                     "fvalue", "f_pvalue", "llf", "aic", "bic"):
            value = np.asarray(stats[name])
            setattr(self, f"{name}_", value[0].item() if one else value.copy())
        self.nobs_ = int(self.nobs_) if one else self.nobs_.astype(np.int64)
        for name in ("bse", "tvalues", "pvalues"):
            value = stats[name]
            setattr(self, f"{name}_", value[:, 0].copy() if one else value.T.copy())
        cov = stats["cov_params"]
        self.cov_params_ = cov[:, :, 0].copy() if one else np.moveaxis(cov, 2, 0).copy()
        self.conf_int_ = self.conf_int()

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        """The (lower, upper) bounds of the 1 − ``alpha`` intervals of the coefficients:
        (n_params, 2) for a 1-D ``y``, (K, n_params, 2) for a 2-D one."""
        check_is_fitted(self, "bse_")
        stats = classical_statistics(self._factor, alpha, 0 if self.fit_intercept else None)
        bounds = np.stack([stats["conf_int_lower"], stats["conf_int_upper"]], axis=-1)
        return bounds[:, 0] if self._y_1d else np.moveaxis(bounds, 1, 0)

    def summary(self, target: int = 0):
        """The coefficient table of the fit (a :class:`pandas.DataFrame`, as
        ``streamlsq.summary`` gives it for a result store), the model statistics in its
        ``attrs["model"]``; ``target``: the column of a 2-D ``y``."""
        check_is_fitted(self)
        names = ([*(["intercept"] if self.fit_intercept else []),
                  *getattr(self, "feature_names_in_",
                           [f"x{j}" for j in range(self.n_features_in_)])])
        coef = self._coef_matrix[:, target]
        model = {"method": self._recursion, "target": target, "rows": self.rows_seen_}
        if self.statistics_unavailable_ is not None:
            return coefficient_table(names, coef, None, model={
                **model, "statistics": self.statistics_unavailable_})
        pick = (lambda v: v) if self._y_1d else (lambda v: v[target])
        stats = {n: pick(getattr(self, f"{n}_")) for n in ("bse", "tvalues", "pvalues")}
        bounds = pick(self.conf_int_)
        stats.update(conf_int_lower=bounds[:, 0], conf_int_upper=bounds[:, 1])
        model.update({n: pick(getattr(self, f"{n}_")) for n in (
            "nobs", "df_model", "df_resid", "rsquared", "rsquared_adj", "fvalue", "f_pvalue",
            "llf", "aic", "bic", "scale", "ssr")})
        model.update(rows_dropped=self.rows_seen_ - model["nobs"], cov_type="nonrobust")
        return coefficient_table(names, coef, stats, model=model)


#: the fitted statistics (removed before a fit computes them again)
_STATISTICS_ATTRS = {f"{n}_" for n in (
    "nobs", "df_model", "df_resid", "ssr", "scale", "rsquared", "rsquared_adj", "fvalue",
    "f_pvalue", "llf", "aic", "bic", "bse", "tvalues", "pvalues", "cov_params", "conf_int")}


class KF4LLSRegressor(LeastSquaresStatisticsMixin, BlocksMixin, InterceptColumnMixin,
                     RecursionRegressor, recursion="kf4lls"):
    """Kalman filter for linear least squares (KF4LLS), block by block.

    H_i = H_{i−1} + X_iᵀX_i, ψ_i = ψ_{i−1} + H_i⁻¹X_iᵀ(Y_i − X_iψ_{i−1})
    (``docs/algorithms.md#kf4lls-and-rls``; kernel :class:`streamlsq.kernels.KF4LLS`). With
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
    forgetting : float in (0, 1], default 1
        g of H_i = g·H_{i−1} + X_iᵀX_i; 1 is KF4LLS (see :class:`RLSRegressor`
        for g < 1).
    fit_intercept : bool, default True
        Prepend a constant column inside the estimator and report its
        coefficient as ``intercept_`` (a recursion cannot centre X and y by
        means it has not seen yet).

    Attributes
    ----------
    coef_, intercept_, n_features_in_, feature_names_in_, state_, n_steps_, rows_seen_
        See the module docstring; ``state_`` holds H, psi, rows, blocks.
    bse_, tvalues_, pvalues_, conf_int_, cov_params_, rsquared_, rsquared_adj_, fvalue_, \
f_pvalue_, llf_, aic_, bic_, nobs_, df_model_, df_resid_, ssr_, scale_
        The statistics of the least-squares fit, as statsmodels' ``WLS`` reports them
        (:class:`LeastSquaresStatisticsMixin`), with ``ridge=0``; else
        ``statistics_unavailable_`` says why there are none.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from streamlsq import KF4LLSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + 4.0 + 0.1 * rng.standard_normal(300)
    >>> est = KF4LLSRegressor(block_size=50).fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    >>> ref = LinearRegression().fit(X, y)
    >>> bool(np.allclose(est.coef_, ref.coef_)), bool(np.isclose(est.intercept_, ref.intercept_))
    (True, True)
    """

    _singular_hint = "set ridge > 0 or a larger first_block_size"


class RLSRegressor(KF4LLSRegressor, recursion="rls", ridge=1e-6, block_size=1):
    """Recursive least squares with a forgetting factor, one row per step by default.

    H_i = g·H_{i−1} + X_iᵀX_i, H_iψ_i = g·H_{i−1}ψ_{i−1} + X_iᵀY_i
    (``docs/algorithms.md#kf4lls-and-rls``; kernel :class:`streamlsq.kernels.RLS`): the
    exponentially
    weighted least-squares fit, row weights g^(steps since the row's block).
    With ``forgetting=1`` and ``ridge=0`` it is ordinary least squares on the
    rows seen (an expanding window), which needs a full-rank first block
    (``first_block_size``).

    ``sample_weight`` (precision weights) scales a row within its step. With g < 1 a row
    of weight w is therefore not w copies of it (those are w steps, each decaying the rows
    before it), and a row of weight 0 is still a step of forgetting (as a dropped row keeps
    its place in the blocks of a stream); with g = 1, integer weights are repetitions and
    weight 0 drops the row (``docs/api/estimators.md``).

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

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import RLSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2_000, 2))
    >>> w = np.where(np.arange(2_000)[:, None] < 1_000, [1.0, 1.0], [3.0, -1.0])  # a drift
    >>> y = (X * w).sum(axis=1) + 0.01 * rng.standard_normal(2_000)
    >>> est = RLSRegressor(forgetting=0.98).fit(X, y)  # one row per step, recent rows weigh most
    >>> np.round(est.coef_, 1)
    array([ 3., -1.])
    """


# ---------------------------------------------------------------------------
# Interleaved KF4LLS
# ---------------------------------------------------------------------------
class InterleavedKF4LLSRegressor(RecursionRegressor, recursion="interleaved-kf4lls"):
    """Interleaved KF4LLS: learn the α-mixture of two populations "a" and "b".

    Every block is centred (step 0(a)), scaled by √α ("a") or √(1−α) ("b")
    (step 0(b)) and folded by KF4LLS from H_0 = 0, the populations alternating
    a, b, a, … (or b, a, … with ``start="b"``) (``docs/algorithms.md#interleaved-kf4lls``;
    kernel
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

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import InterleavedKF4LLSRegressor
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((400, 2)) + 3, rng.standard_normal((400, 2)) - 3
    >>> X = np.vstack([U, V])
    >>> y = np.r_[U @ [1.0, 2.0], V @ [3.0, 0.0]] + 0.01 * rng.standard_normal(800)
    >>> population = np.repeat(["a", "b"], 400)
    >>> est = InterleavedKF4LLSRegressor(alpha=0.5, block_size=100).fit(X, y, population=population)
    >>> np.round(est.coef_, 1)  # the mixture 0.5·[1, 2] + 0.5·[3, 0]
    array([2., 1.])
    """

    _singular_hint = (
        "a centred block of n rows has rank <= n - 1, so with ridge=0 the first block "
        "needs at least n_features + 1 rows (and nonzero weight); set ridge > 0 or a "
        "larger block_size"
    )

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
            return [Pass(X, Y, self._edges(n, self.block_size))]
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
        return [Pass(X[used], Y[used], new_edges)]
