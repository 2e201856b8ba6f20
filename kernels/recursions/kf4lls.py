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
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import spd_solve, symmetrize
from streamlsq.kernels.recursions.contract import Param, ScanRecursion, State
from streamlsq.kernels.recursions.sqrtinfo import SqrtInfoLS, factor_condition

#: the two forms of the recursion: the square-root information form (QR, the default)
#: and the normal equations (H and h = Hψ)
SOLVERS = ("qr", "normal")

#: the declarations KF4LLS, RLS and interleaved KF4LLS share
SOLVER_PARAM = Param(
    "solver", "qr", "qr: square-root information form (a QR of [sqrt(g) R; X] per block, "
    "error ~ eps*cond(X)); normal: the normal equations H = X'X (faster, error ~ "
    "eps*cond(X)^2).", type=str, choices=SOLVERS)
DIAGNOSTICS_PARAM = Param(
    "diagnostics", False, "Record recursive residuals, prediction errors, CUSUM and CUSUM "
    "of squares per step (sequential engine, solver qr).", type=bool)

__all__ = ["KF4LLS", "RLS", "kf4lls_update", "block_sums"]


def block_sums(X: np.ndarray, Y: np.ndarray, weights: np.ndarray | None = None):
    """Sufficient statistics of a block: (XᵀWX, XᵀWY) with W = diag(weights) or I.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import block_sums
    >>> G, b = block_sums(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0], [1.0]]))
    >>> G.tolist(), b.ravel().tolist()
    ([[10.0, 14.0], [14.0, 20.0]], [4.0, 6.0])
    """
    if weights is None:
        return symmetrize(X.T @ X), X.T @ Y
    Xw = X * weights[:, None]
    return symmetrize(Xw.T @ X), Xw.T @ Y


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


class KF4LLS(ScanRecursion):
    """KF4LLS (g = 1) and block RLS with forgetting factor g ∈ (0, 1].

    Parameters
    ----------
    ridge : float, default 0
        δ of the ridge start H_0 = δI (0: the paper's H_0 = 0, which needs a
        full-rank first block). With ridge > 0 the fit is ridge regression
        (for g < 1 the ridge term decays like g^i, as in RLS with P_0 = I/δ).
    forgetting : float, default 1
        g; 1 gives KF4LLS (ordinary least squares on all blocks seen).
    coef0 : array (n_features, n_targets) or None
        ψ_0; irrelevant when ridge = 0.
    solver : {"qr", "normal"}, default "qr"
        ``"qr"``: the square-root information form
        (:mod:`~streamlsq.kernels.recursions.sqrtinfo`): the state carries the triangular
        factor R of the rows (RᵀR = H) and z = Rψ, a block updates it by a QR of
        [√g·R; X_i] and ψ comes from a triangular solve; ψ loses about log10(ε·κ(X))
        digits. ``"normal"``: the normal equations H, ψ above (a little faster on
        well-conditioned data; ψ loses log10(ε·κ(X)²) digits and H is refused as singular
        from κ(X) ≈ 1e8 on). Both forms give the same numbers to rounding.
    diagnostics : bool, default False
        (``solver="qr"``, sequential engine) record at every recorded step the
        standardised recursive residual and one-step-ahead prediction error of the step's
        last row and the running count, sum and sum of squares of the recursive residuals
        (Brown, Durbin & Evans 1975), from which ``fit_stream`` derives the CUSUM and
        CUSUM-of-squares tests (:mod:`streamlsq.stream.stability`). The rows are then
        folded one at a time by the compiled rotations.

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

    name = "kf4lls"
    summary = "block least squares (Kalman filter)"
    params = (
        Param("ridge", 0.0, "Ridge start H0 = ridge*I (0: the paper's H0 = 0, which needs a "
              "full-rank first block)."),
        Param("forgetting", 1.0, "Forgetting factor g in (0, 1]; 1 is least squares on all "
              "rows seen."),
        SOLVER_PARAM,
        DIAGNOSTICS_PARAM,
    )

    def __init__(self, ridge: float = 0.0, forgetting: float = 1.0, coef0=None,
                 solver: str = "qr", diagnostics: bool = False):
        if not np.isfinite(ridge) or ridge < 0:
            raise ValueError(f"ridge must be a finite number >= 0, got {ridge}")
        if not (0.0 < forgetting <= 1.0):
            raise ValueError(f"forgetting factor must be in (0, 1], got {forgetting}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
        if diagnostics and solver != "qr":
            raise ValueError("diagnostics (recursive residuals) need solver='qr'")
        self.ridge = float(ridge)
        self.forgetting = float(forgetting)
        self.coef0 = None if coef0 is None else np.asarray(coef0)
        self.solver = solver
        self.diagnostics = bool(diagnostics)

    @property
    def _sqrt(self) -> SqrtInfoLS | None:
        """The square-root form that does the work when solver == "qr" (built from this
        object's parameters on each use, so that they have one home)."""
        if self.solver != "qr":
            return None
        return SqrtInfoLS(self.ridge, self.forgetting, self.coef0, self.diagnostics)

    def get_params(self) -> dict:
        return {"ridge": self.ridge, "forgetting": self.forgetting, "solver": self.solver,
                "diagnostics": self.diagnostics}

    def scan_unavailable(self) -> str | None:
        if self.diagnostics:
            return "recursive residuals (--diagnostics) are computed row by row in order"
        return None

    def result_attrs(self, state: State) -> dict:
        """κ of the (weighted) rows seen, and the digits of ψ it leaves.

        The QR form loses about log10(ε·κ) digits, the normal equations log10(ε·κ²);
        ``digits_trusted`` is −log10 of that relative error bound (at most the digits of
        the dtype)."""
        if self._sqrt is not None:
            kappa = factor_condition(state["R"])
            power = 1
        else:
            w = np.linalg.eigvalsh(np.asarray(state["H"], np.float64))
            kappa = float(np.sqrt(w[-1] / w[0])) if w.size and w[0] > 0 else float("inf")
            power = 2
        eps = np.finfo(state["psi"].dtype).eps
        digits = -np.log10(eps) if kappa <= 1 else -np.log10(min(1.0, eps * kappa**power))
        return {"condition_number": float(kappa), "digits_trusted": round(float(digits), 1)}

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

    def state_diagnostics(self, state: State) -> dict:
        return self._sqrt.state_diagnostics(state) if self._sqrt is not None else {}

    def fold(self, state, X, Y, edges, first_step, record_every, rows_before=0):
        if self._sqrt is not None:
            return self._sqrt.fold(self, state, X, Y, edges, first_step, record_every,
                                   rows_before)
        return super().fold(state, X, Y, edges, first_step, record_every, rows_before)

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        if self._sqrt is not None:
            return self._sqrt.state_dims()
        return {
            "H": ("feature", "feature_"),
            "psi": ("feature", "target"),
            "rows": (),
            "blocks": (),
        }

    # -- sequential form ---------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        if self._sqrt is not None:
            return self._sqrt.init(n_features, n_targets, dtype)
        H = self.ridge * np.eye(n_features, dtype=dtype)
        if self.coef0 is None:
            psi = np.zeros((n_features, n_targets), dtype=dtype)
        else:
            psi = np.array(self.coef0, dtype=dtype).reshape(n_features, n_targets)
        return {"H": H, "psi": psi, "rows": np.int64(0), "blocks": np.int64(0)}

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        if self._sqrt is not None:
            return self._sqrt.update(state, X, Y)
        H, psi = kf4lls_update(state["H"], state["psi"], X, Y, self.forgetting)
        return {
            "H": H,
            "psi": psi,
            "rows": np.int64(state["rows"] + X.shape[0]),
            "blocks": np.int64(state["blocks"] + 1),
        }

    def coef(self, state: State) -> np.ndarray:
        return state["psi"]

    # -- information (scan) form -------------------------------------------
    def to_info(self, state: State) -> State:
        """(H, ψ) → (H, h = Hψ): the state in the form the prefix sums act on."""
        if self._sqrt is not None:
            return self._sqrt.to_info(state)
        return {
            "H": state["H"],
            "h": state["H"] @ state["psi"],
            "rows": state["rows"],
            "blocks": state["blocks"],
        }

    def summarize(
        self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray, cuts: np.ndarray
    ) -> list[State]:
        """Sums of the blocks of one piece, one summary per interval between cuts.

        ``edges`` are the piece's local block offsets (len = n_blocks + 1),
        ``cuts`` the block counts (increasing, last = n_blocks) at which an
        interval ends. A summary holds G = Σ g^{c−j} X_jᵀX_j and b likewise over
        the interval's blocks j ≤ c, its block count m and row count. (QR solver: the
        triangular factor of the interval's rows weighted by √(g^{c−j}).)
        """
        if self._sqrt is not None:
            return self._sqrt.summarize(X, Y, edges, cuts)
        g = self.forgetting
        out = []
        start = 0
        for c in cuts:
            c = int(c)
            a, b = int(edges[start]), int(edges[c])
            Xs, Ys = X[a:b], Y[a:b]
            if g == 1.0:
                G, rhs = block_sums(Xs, Ys)
            else:
                # row weight g^(c - block index of the row), blocks numbered start+1..c
                counts = np.diff(edges[start : c + 1])
                w = np.repeat(g ** np.arange(c - start - 1, -1, -1, dtype=X.dtype), counts)
                G, rhs = block_sums(Xs, Ys, w)
            out.append(
                {"G": G, "b": rhs, "blocks": np.int64(c - start), "rows": np.int64(b - a)}
            )
            start = c
        return out

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        """In-order prefix: H ← g^m H + G, h ← g^m h + b; returns the state after each summary.

        (QR solver: A ← factor of [√(g^m)·A; A_interval], a TSQR merge.)"""
        if self._sqrt is not None:
            return self._sqrt.scan(info, summaries)
        g = self.forgetting
        H, h = info["H"], info["h"]
        rows, blocks = int(info["rows"]), int(info["blocks"])
        out = []
        for s in summaries:
            decay = g ** int(s["blocks"])
            H = decay * H + s["G"] if g != 1.0 else H + s["G"]
            h = decay * h + s["b"] if g != 1.0 else h + s["b"]
            rows += int(s["rows"])
            blocks += int(s["blocks"])
            out.append({"H": H, "h": h, "rows": np.int64(rows), "blocks": np.int64(blocks)})
        return out

    def finish(self, info: State) -> State:
        """The independent solve ψ = H⁻¹h at one step (information form → state);
        QR solver: ψ = R⁻¹z, a triangular solve."""
        if self._sqrt is not None:
            return self._sqrt.finish(info)
        return {
            "H": info["H"],
            "psi": spd_solve(info["H"], info["h"]),
            "rows": info["rows"],
            "blocks": info["blocks"],
        }


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

    name = "rls"
    summary = "RLS with a forgetting factor (per block, or per sample with --block-size 1)"
    params = (
        Param("forgetting", 0.99, "Forgetting factor g in (0, 1]."),
        Param("ridge", 0.0, "Tikhonov start H0 = ridge*I (needed with --block-size 1 unless "
              "the first block has full rank); it decays like g^i."),
        SOLVER_PARAM,
        DIAGNOSTICS_PARAM,
    )

    def __init__(self, forgetting: float = 0.99, ridge: float = 0.0, coef0=None,
                 solver: str = "qr", diagnostics: bool = False):
        super().__init__(ridge=ridge, forgetting=forgetting, coef0=coef0, solver=solver,
                         diagnostics=diagnostics)
