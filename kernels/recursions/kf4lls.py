"""Kalman filter for linear least squares (KF4LLS) and RLS with a forgetting factor.

John & Wu (2023), §2; ``docs/algorithms.md#kf4lls-and-rls`` (full reference in
``docs/references.md``). Blocks (X_i, Y_i) in order:

    H_i = g·H_{i-1} + X_iᵀX_i                                   (g = 1: KF4LLS)
    ψ_i = ψ_{i-1} + H_i⁻¹ X_iᵀ (Y_i − X_i ψ_{i-1})               (a solve with H_i)

H_0 = 0 (the paper) or H_0 = δI (a ridge start, for a rank-deficient first
block; also the Tikhonov term μ‖ψ‖² of RLS). Because H_iψ_i = g·H_{i-1}ψ_{i-1} + X_iᵀY_i,
the recursion has an *information form* h_i = H_iψ_i in which every block enters
only through its sums G_i = X_iᵀX_i and b_i = X_iᵀY_i:

    H_i = g^m H_{i-m} + Σ_{j} g^{i-j} G_j ,   h_i = g^m h_{i-m} + Σ_{j} g^{i-j} b_j

That is the ``scan`` engine: summaries per piece in parallel, an in-order prefix
of additions, then one independent solve per recorded step. With g = 1 and
H_0 = 0, ψ_i is the batch least-squares fit on blocks 1..i (and does not depend
on ψ_0); with g < 1 it is the exponentially weighted least-squares fit.
Per-sample RLS is the special case of blocks of one row.

The arithmetic lives in two *forms* with the same methods, chosen by ``solver`` when a
recursion is built (:func:`make_form`): :class:`NormalEquationsLS` (the equations above)
and the square-root information form
:class:`~streamlsq.kernels.recursions.sqrtinfo.SqrtInfoLS` (a QR factor of the rows
instead of H). :class:`KF4LLS`, :class:`RLS` and interleaved KF4LLS hand every step to
their form (:class:`FormRecursion`).
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import (
    SingularMatrixError,
    normal_rank_error,
    spd_solve,
    symmetrize,
)
from streamlsq.kernels.recursions.contract import (
    ScanRecursion,
    State,
    fold_by_updates,
)
from streamlsq.kernels.recursions.declarations import (
    DECLARATIONS,
    DIAGNOSTICS_PARAM,
)
from streamlsq.kernels.recursions.moments import (
    COUNT_DIMS,
    MOMENT_DIMS,
    add_moments,
    moments_of_weights,
    positive_rows,
    zero_moments,
)
from streamlsq.kernels.recursions.sqrtinfo import (
    SqrtInfoLS,
    decay_weights,
    digits_trusted,
    gram_variance,
    interval_summaries,
    scan_moments,
)

__all__ = ["FormRecursion", "KF4LLS", "NormalEquationsLS", "RLS", "accuracy_attrs", "block_sums",
           "cholesky_factor", "kf4lls_update", "make_form", "target_squares"]


def block_sums(X: np.ndarray, Y: np.ndarray, weights: np.ndarray | None = None, *,
               totals: bool = False):
    """Sufficient statistics of a block: (XᵀWX, XᵀWY) with W = diag(weights) or I (and
    with ``totals`` XᵀW1, the weighted column sums, from the same product as XᵀWY).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import block_sums
    >>> G, b = block_sums(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0], [1.0]]))
    >>> G.tolist(), b.ravel().tolist()
    ([[10.0, 14.0], [14.0, 20.0]], [4.0, 6.0])
    """
    Xw = X if weights is None else X * weights[:, None]
    # np.dot, not @: numpy's matmul holds the GIL through its BLAS call, np.dot releases
    # it, so that worker threads sum their blocks at once (the same BLAS call, same bits)
    if not totals:
        return symmetrize(np.dot(Xw.T, X)), np.dot(Xw.T, Y)
    # Σ w·x as a matrix-vector product (BLAS gemv, one read of X), not a column of ones
    # beside Y: stacking [Y 1] copied Y and made XᵀW[Y 1] a general product of two columns,
    # measured 1.5× the time of the two products apart on a 160,000 × 20 block
    scale = np.ones(len(X), X.dtype) if weights is None else np.asarray(weights, X.dtype)
    return (symmetrize(np.dot(Xw.T, X)), np.dot(Xw.T, Y),
            np.dot(scale, X).astype(np.float64))


def kf4lls_update(
    H: np.ndarray, psi: np.ndarray, X: np.ndarray, Y: np.ndarray, forgetting: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """One KF4LLS / RLS block step; returns the new (H, ψ). Inputs are not modified.

    H_i = g H_{i-1} + XᵀX ;  ψ_i = ψ_{i-1} + H_i⁻¹ Xᵀ(Y − X ψ_{i-1})
    (``docs/algorithms.md#kf4lls-and-rls``). Raises
    :class:`~streamlsq.kernels.linalg.SingularMatrixError` when H_i is singular (a
    rank-deficient first block with H_0 = 0).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import kf4lls_update
    >>> X, Y = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[3.0], [4.0]])
    >>> H, psi = kf4lls_update(np.zeros((2, 2)), np.zeros((2, 1)), X, Y)
    >>> H.tolist(), psi.ravel().tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [3.0, 2.0])
    """
    G, _ = block_sums(X, X[:, :0])
    H_new = forgetting * H + G if forgetting != 1.0 else H + G
    innovation = X.T @ (Y - X @ psi)
    return H_new, psi + spd_solve(H_new, innovation)


class NormalEquationsLS:
    """KF4LLS / RLS on the normal equations: the ``solver="normal"`` form of
    :class:`KF4LLS` (the other one is
    :class:`~streamlsq.kernels.recursions.sqrtinfo.SqrtInfoLS`, with the same methods).

    State: ``H`` (n, n), ``psi`` (n, K), ``rows``, ``blocks``; the information form the
    scan acts on holds h = Hψ instead of ψ. Each block is one step of
    :func:`kf4lls_update`, the scan's summaries are the blocks' sums (XᵀX, XᵀY) and a
    recorded step's solve is ψ = H⁻¹h (Cholesky).

    With ``statistics`` (least squares: g = 1 and no ridge) the state also keeps
    ``xy`` = XᵀWY and ``yy`` = YᵀWY (the residual sums of squares are yy − ψᵀXᵀWY, which
    loses the digits the normal equations lose) and the moments of :mod:`.moments`, and ψ
    is solved from the sums, H ψ = xy, at every step; with ``identify`` a singular H is
    not refused (ψ = 0 until the rows identify it), which needs those sums: the normal
    form without statistics refuses a singular step, as it cannot tell afterwards what ψ
    the rows before it gave. Without statistics, ``count`` keeps the rows of positive
    weight (``nobs``, :data:`~.moments.COUNT_DIMS`), so that a fit with row weights can
    tell that it saw none.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.kf4lls import NormalEquationsLS
    >>> form = NormalEquationsLS(ridge=1.0, forgetting=1.0)  # H0 = I
    >>> X, Y = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[2.0], [6.0]])
    >>> state = form.update(form.init(2, 1), X, Y)  # (I + XᵀX) ψ = XᵀY
    >>> state["H"].tolist(), np.round(form.coef(state).ravel(), 12).tolist()
    ([[2.0, 0.0], [0.0, 5.0]], [1.0, 2.4])
    """

    #: the rounding error of ψ grows like ε·κ(X)^error_power
    error_power = 2
    #: no recursive residuals in this form
    diagnostics = False

    def __init__(self, ridge: float, forgetting: float, coef0=None, statistics=False,
                 identify=False, count=False):
        self.ridge = float(ridge)
        self.forgetting = float(forgetting)
        self.coef0 = coef0
        self.statistics = bool(statistics)
        self.identify = bool(identify) and self.statistics
        self.counts = bool(count) and not self.statistics  # the moments count otherwise

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        dims = {"H": ("feature", "feature_"), "psi": ("feature", "target"), "rows": (),
                "blocks": ()}
        if self.statistics:
            dims.update(xy=("feature", "target"), yy=("target", "target_"), **MOMENT_DIMS)
        if self.counts:
            dims.update(COUNT_DIMS)
        return dims

    def condition(self, state: State) -> float:
        """κ of the (weighted) rows seen: √(λ_max/λ_min) of H (inf when H is singular)."""
        w = np.linalg.eigvalsh(np.asarray(state["H"], np.float64))
        return float(np.sqrt(w[-1] / w[0])) if w.size and w[0] > 0 else float("inf")

    def digits(self, kappa: float, dtype) -> float:
        """The significant digits of ψ on rows of condition number κ (ε·κ² lost)."""
        return digits_trusted(kappa, self.error_power, dtype)

    # -- identification and statistics ------------------------------------------
    def _coef(self, H: np.ndarray, xy: np.ndarray, rows=None) -> np.ndarray:
        """ψ = H⁻¹xy; with ``identify``, 0 while H is singular (not refused)."""
        try:
            return spd_solve(H, xy)
        except SingularMatrixError as exc:
            if self.identify:
                return np.zeros_like(xy)
            raise normal_rank_error(exc, H, rows) from None

    def identified(self, state: State) -> bool:
        """Whether the rows seen identify the coefficients (always, unless ``identify``, or
        ``count`` from H₀ = 0 before a row of positive weight)."""
        if self._unweighed(state):
            return False
        if not self.identify:
            return True
        try:
            spd_solve(state["H"], np.zeros(state["H"].shape[0], state["H"].dtype))
        except SingularMatrixError:
            return False
        return True

    def _unweighed(self, state: State) -> bool:
        """Whether a counting form from H₀ = 0 has seen no row of positive weight yet:
        H = 0 and ψ = ψ₀ exactly, what a step with such rows leaves (no solve)."""
        return self.counts and self.ridge == 0.0 and int(state["nobs"]) == 0

    def check_identified(self, state: State) -> None:
        """Refuse (:class:`SingularMatrixError`, with the numerical rank and the aliased
        columns) a state whose H is singular to working precision."""
        try:
            spd_solve(state["H"], np.zeros(state["H"].shape[0], state["H"].dtype))
        except SingularMatrixError as exc:
            raise normal_rank_error(exc, state["H"], state["rows"]) from None

    def regression(self, state: State):
        """The least-squares problem of the state in factored form
        (:class:`~streamlsq.kernels.inference.RegressionFactor`): R the Cholesky factor of
        H (RᵀR = H), z = Rψ and the residual sums of squares diag(yy) − ‖z‖² (the normal
        equations' cancellation: digits lost as ψ loses them)."""
        from streamlsq.kernels.inference.factor import RegressionFactor

        R = cholesky_factor(state["H"])
        z = R @ state["psi"]
        ssr = np.maximum(np.diag(np.asarray(state["yy"], np.float64))
                         - (np.asarray(z, np.float64) ** 2).sum(axis=0), 0.0)
        return RegressionFactor.of(state, R=R, z=z, ssr=ssr)

    # -- sequential form ---------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        H = self.ridge * np.eye(n_features, dtype=dtype)
        if self.coef0 is None:
            psi = np.zeros((n_features, n_targets), dtype=dtype)
        else:
            psi = np.array(self.coef0, dtype=dtype).reshape(n_features, n_targets)
        state = {"H": H, "psi": psi, "rows": np.int64(0), "blocks": np.int64(0)}
        if self.statistics:
            state.update(xy=np.zeros((n_features, n_targets), dtype),
                         yy=np.zeros((n_targets, n_targets), dtype), **zero_moments(n_features))
        if self.counts:
            state["nobs"] = np.int64(0)
        return state

    def update(self, state: State, X: np.ndarray, Y: np.ndarray,
               weights: np.ndarray | None = None) -> State:
        if self.statistics:  # g = 1, H_0 = 0: the sums, and ψ from them
            G, b, sums = block_sums(X, Y, weights, totals=True)
            new = {"H": state["H"] + G, "xy": state["xy"] + b,
                   "yy": state["yy"] + target_squares(Y, weights)}
            new["psi"] = self._coef(new["H"], new["xy"], state["rows"] + X.shape[0])
            new.update(add_moments(state, {**moments_of_weights(weights, X.shape[0]),
                                           "feature_sums": sums}))
        else:
            counted = {"nobs": np.int64(state["nobs"] + positive_rows(weights, X.shape[0]))
                       } if self.counts else {}
            if weights is not None:  # each row scaled by √w
                root = np.sqrt(np.asarray(weights, np.float64)).astype(X.dtype)[:, None]
                X, Y = X * root, Y * root
            try:
                if self._unweighed(counted):  # rows of weight 0 only: H and ψ unchanged
                    H, psi = self.forgetting * state["H"], state["psi"]
                else:
                    H, psi = kf4lls_update(state["H"], state["psi"], X, Y, self.forgetting)
            except SingularMatrixError as exc:
                G = block_sums(X, X[:, :0])[0]
                raise normal_rank_error(exc, self.forgetting * state["H"] + G,
                                        state["rows"] + X.shape[0]) from None
            new = {"H": H, "psi": psi, **counted}
        new["rows"] = np.int64(state["rows"] + X.shape[0])
        new["blocks"] = np.int64(state["blocks"] + 1)
        return {k: new[k] for k in state}

    def coef(self, state: State) -> np.ndarray:
        return state["psi"]

    def state_diagnostics(self, state: State) -> dict:
        if not self.statistics:
            return {}
        return {"normalized_variance": gram_variance(state["H"])}

    def fold(self, state, X, Y, edges, first_step, record_every, rows_before=0, weights=None):
        """``Recursion.fold``: :meth:`update` block after block."""
        return fold_by_updates(self, state, X, Y, edges, first_step, record_every,
                               rows_before, weights)

    # -- information (scan) form -------------------------------------------
    def to_info(self, state: State) -> State:
        """(H, ψ) → (H, h = Hψ): the state in the form the prefix sums act on (h = XᵀWY,
        the sum itself, when the state keeps it)."""
        if self.statistics:
            return {"H": state["H"], "h": state["xy"], "yy": state["yy"],
                    "rows": state["rows"], "blocks": state["blocks"],
                    **{k: state[k] for k in MOMENT_DIMS}}
        return {
            "H": state["H"],
            "h": state["H"] @ state["psi"],
            "rows": state["rows"],
            "blocks": state["blocks"],
            **({"nobs": state["nobs"]} if self.counts else {}),
        }

    def interval_weights(self, edges, start, stop, dtype, weights=None) -> np.ndarray | None:
        """Row weights of an interval's rows: g^(stop−j) for block j, times the rows'
        precision ``weights`` (None when both are 1)."""
        decay = None if self.forgetting == 1.0 else decay_weights(
            edges, start, stop, self.forgetting, dtype)
        if weights is None:
            return decay
        w = np.asarray(weights, np.float64).astype(dtype)
        return w if decay is None else decay * w

    def rows_summary(self, X, Y, weights=None) -> State:
        """What the scan form keeps of some rows: G = XᵀWX and b = XᵀWY (and YᵀWY and XᵀW1
        for the statistics)."""
        if self.statistics:
            G, b, sums = block_sums(X, Y, weights, totals=True)
            return {"G": G, "b": b, "yy": target_squares(Y, weights), "feature_sums": sums}
        G, b = block_sums(X, Y, weights)
        return {"G": G, "b": b}

    @staticmethod
    def combine(parts, info: State) -> State:
        """The :meth:`rows_summary` of the rows of several summaries, each scaled by its
        row weight w: Σ w²·G and Σ w²·b (in the dtype of the information state ``info``
        they will be added to)."""
        out = {}
        for key in ("G", "b"):
            total = None
            for w, s in parts:  # a row weight w scales the sums by w²
                term = w**2 * s[key]
                total = term if total is None else total + term
            out[key] = total.astype(info["H"].dtype, copy=False)
        return out

    def summarize(self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                  cuts: np.ndarray, weights=None) -> list[State]:
        """Sums of the blocks of one piece, one summary per interval between cuts: G =
        Σ g^{c−j} X_jᵀX_j and b likewise over the interval's blocks j ≤ c, its block
        count and row count."""
        return interval_summaries(self, X, Y, edges, cuts, weights)

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        """In-order prefix: H ← g^m H + G, h ← g^m h + b; returns the state after each
        summary."""
        g = self.forgetting
        H, h = info["H"], info["h"]
        yy = info.get("yy")
        rows, blocks = int(info["rows"]), int(info["blocks"])
        moments = scan_moments(info, summaries) if self.statistics else None
        nobs = int(info["nobs"]) if self.counts else 0
        out = []
        for i, s in enumerate(summaries):
            decay = g ** int(s["blocks"])
            H = decay * H + s["G"] if g != 1.0 else H + s["G"]
            h = decay * h + s["b"] if g != 1.0 else h + s["b"]
            rows += int(s["rows"])
            blocks += int(s["blocks"])
            step = {"H": H, "h": h, "rows": np.int64(rows), "blocks": np.int64(blocks)}
            if self.counts:
                nobs += int(s["nobs"])
                step["nobs"] = np.int64(nobs)
            if moments is not None:
                yy = yy + s["yy"]
                step.update(yy=yy, **moments[i])
            out.append(step)
        return out

    def finish(self, info: State) -> State:
        """The independent solve ψ = H⁻¹h at one step (information form → state)."""
        psi = (np.zeros_like(info["h"]) if self._unweighed(info)
               else self._coef(info["H"], info["h"], info["rows"]))
        state = {"H": info["H"], "psi": psi, "rows": info["rows"], "blocks": info["blocks"]}
        if self.statistics:
            state.update(xy=info["h"], yy=info["yy"], **{k: info[k] for k in MOMENT_DIMS})
        if self.counts:
            state["nobs"] = info["nobs"]
        return state


def target_squares(Y: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """YᵀWY with W = diag(weights) or I (K×K, symmetric)."""
    if weights is None:
        return symmetrize(Y.T @ Y)
    return symmetrize((Y * np.asarray(weights, Y.dtype)[:, None]).T @ Y)


def cholesky_factor(H: np.ndarray) -> np.ndarray:
    """The upper-triangular R with RᵀR = H (Cholesky; ``LinAlgError`` when H is not
    positive definite)."""
    return sla.cholesky(np.asarray(H), lower=False, check_finite=False)


def make_form(solver: str, ridge: float, forgetting: float, coef0=None,
              diagnostics: bool = False, statistics: bool = False, identify: bool = False,
              count: bool = False):
    """The form of KF4LLS that ``solver`` names: :class:`SqrtInfoLS` ("qr") or
    :class:`NormalEquationsLS` ("normal", which has no recursive residuals);
    ``statistics`` keeps what the statistics of a least-squares fit need, ``identify``
    starts the fit once the rows identify the coefficients instead of refusing a singular
    start, ``count`` keeps the rows of positive weight (``nobs``) without statistics."""
    if solver == "qr":
        return SqrtInfoLS(ridge, forgetting, coef0, diagnostics, statistics, identify, count)
    return NormalEquationsLS(ridge, forgetting, coef0, statistics, identify, count)


def accuracy_attrs(form, state: State) -> dict:
    """κ of the (weighted) rows seen, and the digits of ψ it leaves.

    The QR form loses about log10(ε·κ) digits, the normal equations log10(ε·κ²);
    ``digits_trusted`` is −log10 of that relative error bound (at most the digits of the
    dtype)."""
    kappa = form.condition(state)
    digits = form.digits(kappa, state["psi"].dtype)
    return {"condition_number": float(kappa), "digits_trusted": round(digits, 1)}


class FormRecursion(ScanRecursion):
    """A recursion that delegates its work to a form of KF4LLS (:attr:`form`, built with
    the recursion by :meth:`make_form` and rebuilt from its parameters when it is
    unpickled)."""

    def make_form(self):
        raise NotImplementedError

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "form"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.form = self.make_form()

    def result_attrs(self, state: State) -> dict:
        return accuracy_attrs(self.form, state)

    @classmethod
    def result_notes(cls, attrs: dict) -> list[str]:
        notes = []
        kappa, digits = attrs.get("condition_number"), attrs.get("digits_trusted")
        if kappa is not None and digits is not None and digits < 10:
            notes.append(f"condition number {kappa:.2g}: about {digits:.0f} significant "
                         f"digits of the coefficients can be trusted")
        if "cusum_outside" in attrs:
            pct = f"{100 * attrs.get('stability_alpha', 0.05):g}%"
            out = [int(v) for v in np.atleast_1d(attrs["cusum_outside"])]
            out_sq = [int(v) for v in np.atleast_1d(attrs["cusum_squares_outside"])]
            if any(out) or any(out_sq):
                notes.append(f"parameter instability: CUSUM outside its {pct} bounds at "
                             f"{max(out)} and CUSUM of squares at {max(out_sq)} recorded "
                             f"steps")
            else:
                notes.append(f"CUSUM and CUSUM of squares within their {pct} bounds")
        return notes

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        return self.form.state_dims()

    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        return self.form.init(n_features, n_targets, dtype)

    def coef(self, state: State) -> np.ndarray:
        return self.form.coef(state)

    def to_info(self, state: State) -> State:
        """The state in the form the prefix acts on: (H, h = Hψ), or the factor (R, z, S)."""
        return self.form.to_info(state)

    def finish(self, info: State) -> State:
        """The independent solve at one step: ψ = H⁻¹h, or ψ = R⁻¹z (triangular)."""
        return self.form.finish(info)

    def identified(self, state: State) -> bool:
        return self.form.identified(state)

    def check_identified(self, state: State) -> None:
        self.form.check_identified(state)

    def regression(self, state: State):
        if self.inference_unavailable() is not None:
            raise NotImplementedError(self.inference_unavailable())
        return self.form.regression(state)

    def diagnostic_dims(self) -> dict[str, tuple[str, ...]]:
        return {"normalized_variance": ("step", "feature")}


class KF4LLS(FormRecursion):
    """KF4LLS (g = 1) and block RLS with forgetting factor g ∈ (0, 1].

    Parameters
    ----------
    ridge : float, default 0
        δ of the ridge start H_0 = δI (0: the paper's H_0 = 0, which needs a
        full-rank first block). With ridge > 0 the fit is ridge regression
        (for g < 1 the ridge term decays like g^i, as in RLS with P_0 = I/δ).
    forgetting : float, default 1
        g; 1 gives KF4LLS (ordinary least squares on all blocks seen).
    solver : {"qr", "normal"}, default "qr"
        ``"qr"``: the square-root information form
        (:class:`~streamlsq.kernels.recursions.sqrtinfo.SqrtInfoLS`): the state carries the
        triangular factor R of the rows (RᵀR = H) and z = Rψ, a block updates it by a QR
        of [√g·R; X_i] and ψ comes from a triangular solve; ψ loses about log10(ε·κ(X))
        digits. ``"normal"``: the normal equations H, ψ above (:class:`NormalEquationsLS`;
        a little faster on well-conditioned data; ψ loses log10(ε·κ(X)²) digits and H is
        refused as singular from κ(X) ≈ 1e8 on). Both forms give the same numbers to
        rounding.
    diagnostics : bool, default False
        (``solver="qr"``, sequential engine) record at every recorded step the
        standardised recursive residual and one-step-ahead prediction error of the step's
        last row and the running count, sum and sum of squares of the recursive residuals
        (Brown, Durbin & Evans 1975), from which ``fit_stream`` derives the CUSUM and
        CUSUM-of-squares tests (:mod:`streamlsq.stream.stability`). The rows are then
        folded one at a time by the compiled rotations.
    coef0 : array (n_features, n_targets) or None, keyword only
        ψ_0; irrelevant when ridge = 0.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import KF4LLS
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((60, 3)), rng.standard_normal((60, 2))
    >>> rec = KF4LLS()
    >>> state = rec.init(3, 2)
    >>> for a in range(0, 60, 20):  # three blocks of 20 rows, in order
    ...     state = rec.update(state, X[a:a + 20], Y[a:a + 20])
    >>> bool(np.allclose(rec.coef(state), np.linalg.lstsq(X, Y, rcond=None)[0]))
    True
    """

    #: name, summary, description, examples, params (ridge, forgetting, solver,
    #: diagnostics), weighted: see :mod:`.declarations`
    declaration = DECLARATIONS["kf4lls"]

    def __init__(self, *args, coef0=None, identify=False, count_rows=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.coef0 = None if coef0 is None else np.asarray(coef0)
        self.identify = bool(identify)
        self.count_rows = bool(count_rows)
        self.form = self.make_form()

    def make_form(self):
        return make_form(self.solver, self.ridge, self.forgetting, self.coef0,
                         self.diagnostics, statistics=self.inference_unavailable() is None,
                         identify=self.identify, count=getattr(self, "count_rows", False))

    def counting_rows(self) -> KF4LLS:
        """This recursion keeping the rows of positive weight it saw (``nobs``) also
        without statistics (a ridge start, a forgetting factor), for a fit with row
        weights: a ridge start alone gives coefficients whatever the rows, so the count is
        what tells that no row weighed. A least-squares fit keeps it with its moments."""
        if self.count_rows:
            return self
        other = copy.copy(self)
        other.count_rows = True
        other.form = other.make_form()
        return other

    def identifying(self) -> KF4LLS:
        """This recursion starting once the rows identify its coefficients (``identify``):
        with ``ridge=0`` a rank-deficient start (short early blocks, columns constant in
        the first rows) is not refused; its steps are not recorded."""
        if self.identify:
            return self
        other = copy.copy(self)
        other.identify = True
        other.form = other.make_form()
        return other

    def inference_unavailable(self) -> str | None:
        """None for least squares (g = 1, no ridge): the statistics of
        :mod:`streamlsq.kernels.inference` apply; else why not."""
        if self.forgetting != 1.0:
            return (f"a forgetting factor below 1 ({self.forgetting:g}) weighs the rows "
                    "unequally")
        if self.ridge != 0.0:
            return f"a ridge start ({self.ridge:g}) shrinks the coefficients"
        return None

    def check_params(self) -> None:
        if self.diagnostics and self.solver != "qr":
            raise DIAGNOSTICS_PARAM.error(self.diagnostics, "False unless solver='qr' (the "
                                          "recursive residuals come from the QR form)")

    def get_params(self) -> dict:
        # KF4LLS's order for every recursion of the family (RLS declares forgetting first)
        return {p.name: getattr(self, p.name) for p in KF4LLS.params}

    def scan_unavailable(self) -> str | None:
        if self.diagnostics:
            return "recursive residuals (--diagnostics) are computed row by row in order"
        return None

    def state_diagnostics(self, state: State) -> dict:
        return self.form.state_diagnostics(state)

    def fold(self, state, X, Y, edges, first_step, record_every, rows_before=0, weights=None):
        return self.form.fold(state, X, Y, edges, first_step, record_every, rows_before,
                              weights)

    def update(self, state: State, X: np.ndarray, Y: np.ndarray,
               weights: np.ndarray | None = None) -> State:
        return self.form.update(state, X, Y, weights)

    def summarize(self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                  cuts: np.ndarray, weights: np.ndarray | None = None) -> list[State]:
        """Sums of the blocks of one piece, one summary per interval between cuts.

        ``edges`` are the piece's local block offsets (len = n_blocks + 1),
        ``cuts`` the block counts (increasing, last = n_blocks) at which an
        interval ends. A summary holds G = Σ g^{c−j} X_jᵀX_j and b likewise over
        the interval's blocks j ≤ c, its block count m and row count. (QR solver: the
        triangular factor of the interval's rows weighted by √(g^{c−j}).) ``weights``: the
        rows' precision weights.
        """
        return self.form.summarize(X, Y, edges, cuts, weights)

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        """In-order prefix: H ← g^m H + G, h ← g^m h + b; returns the state after each summary.

        (QR solver: A ← factor of [√(g^m)·A; A_interval], a TSQR merge.)"""
        return self.form.scan(info, summaries)


class RLS(KF4LLS):
    """Recursive least squares with forgetting factor g and Tikhonov term μ (H_0 = μI).

    Identical algebra to :class:`KF4LLS`; separate name and defaults
    (g = 0.99) because users ask for it by this name. Per-sample RLS is this
    recursion run with blocks of one row (``block_size=1``), which needs μ > 0
    or a first block with at least n_features independent rows.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import RLS, block_edges
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2))
    >>> Y = (X @ [[1.0], [2.0]]) + 0.01 * rng.standard_normal((400, 1))
    >>> rec = RLS(forgetting=0.99, ridge=1e-6)  # per-sample RLS: blocks of one row
    >>> res = rec.fold(rec.init(2, 1), X, Y, block_edges(400, 1), 1, 100)
    >>> res.steps.tolist(), np.round(rec.coef(res.state).ravel(), 2)
    ([100, 200, 300, 400], array([1., 2.]))
    """

    #: the same parameters as KF4LLS, forgetting first with the default 0.99: see
    #: :mod:`.declarations`
    declaration = DECLARATIONS["rls"]
