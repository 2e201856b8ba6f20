"""LMS (Widrow–Hoff), i.e. sample-by-sample stochastic gradient descent for least squares.

The sample-by-sample lecture notes; ``docs/algorithms.md#lms`` (full reference in
``docs/references.md``). With a constant column
prepended (x̃ = [1, x]), for every sample in order

    W ← W + ρₖ x̃ₙ (tₙᵀ − x̃ₙᵀW)          (W is (q+1)×K, row 0 the intercept)

ρₖ is constant or decreasing — it must decrease for convergence on noisy data
(Σρₖ = ∞, Σρₖ² < ∞: the ``inverse`` and ``power`` schedules). Normalised LMS
divides the step by ε + ‖x̃ₙ‖² (the GD baseline of the IRMA study).

The per-sample loop is compiled with numba (``cache=True``). The state holds W
and the sample counter k, so a schedule continues across blocks, segments,
chunks and epochs. Several epochs are several passes over the stream; the
helpers :func:`epoch_chunk_order` and :func:`chunk_row_permutation` give a seeded
shuffled order that depends only on (seed, epoch, chunk), never on how the
work is spread over workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from streamlsq.kernels.linalg import as_2d, check_finite
from streamlsq.kernels.recursions.contract import (
    RECORD_EVERY,
    FoldResult,
    Param,
    Recursion,
    State,
    fold_edges,
    must_be,
)
from streamlsq.kernels.recursions.declarations import (
    DECLARATIONS,
    DEFAULT_EPS,
    POWER,
    SCHEDULE,
    TAU,
)
from streamlsq.kernels.recursions.declarations import LMS_RATE as RATE

__all__ = [
    "LMS",
    "StepSchedule",
    "lms_fold_arrays",
]

#: the code of each schedule in the compiled loop (constant 0, inverse 1, power 2); the
#: declared parameters of LMS are in :mod:`.declarations`, and :class:`StepSchedule` checks
#: its values with the first four
_SCHEDULE_CODES = {kind: code for code, kind in enumerate(SCHEDULE.choices)}

#: the constant column of x̃ = [1, x] (not a declared parameter: see :class:`LMS`)
INTERCEPT = Param("intercept", True, "The constant column of x~ = [1, x].", type=bool)


# ---------------------------------------------------------------------------
# Step-size schedules
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StepSchedule:
    """Step size ρₖ for the k-th sample (k = 1, 2, … counted over all epochs).

    ``constant``: ρₖ = ρ₀. ``inverse``: ρₖ = ρ₀ / (1 + k/τ). ``power``:
    ρₖ = ρ₀ / kᵃ with ½ < a ≤ 1 (a ≤ ½ makes Σρₖ² diverge; a > 1 makes Σρₖ
    converge, so the iterates may stop short of the solution).

    Raises ValueError naming the parameter when ρ₀ (``rate``) is not a finite
    positive number, τ (``tau``) is not > 0, a (``power``) is not in (½, 1], or
    a parameter is given that the schedule does not use.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import StepSchedule
    >>> StepSchedule("inverse", rate=0.1, tau=100.0)(np.arange(1, 4))  # samples 1, 2, 3
    array([0.0990099 , 0.09803922, 0.09708738])
    """

    kind: str = "constant"
    rate: float = 0.01
    tau: float | None = None
    power: float | None = None

    def __post_init__(self):
        kind = SCHEDULE.check(self.kind)
        for field_name, param, needed_by in (("rate", RATE, None), ("tau", TAU, "inverse"),
                                             ("power", POWER, "power")):
            value = param.check(getattr(self, field_name))
            if needed_by is not None and kind == needed_by and value is None:
                required = param.replace(optional=False).requirement_text
                raise param.error(value, f"{required} for schedule={kind!r}")
            if needed_by is not None and kind != needed_by and value is not None:
                raise param.error(value, f"None with schedule={kind!r} ({field_name} only "
                                  f"applies to schedule={needed_by!r})")
            object.__setattr__(self, field_name, value)

    @property
    def code(self) -> int:
        """Integer code of the kind, as the compiled loop reads it."""
        return _SCHEDULE_CODES[self.kind]

    def __call__(self, k) -> np.ndarray | float:
        """ρₖ for a 1-based sample number k (scalar or array), in float64."""
        k = np.asarray(k, dtype=np.float64)
        if (k < 1).any():
            raise ValueError("sample numbers k start at 1")
        if self.kind == "constant":
            out = np.full_like(k, self.rate)
        elif self.kind == "inverse":
            out = self.rate / (1.0 + k / self.tau)
        else:
            out = self.rate / k**self.power
        return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------
# The compiled loop
# ---------------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _normalized_step(rho, x, const, eps):
    """(ρ', scale) of normalised LMS for the row x̃ = [1, x] (or x): the update
    ρ e x̃/(ε + ‖x̃‖²) is ρ'·(e·scale)·(x̃·scale). Normally scale = 1 and ρ' = ρ/(ε + ‖x̃‖²),
    ‖x̃‖² summed in float64 whatever the data's dtype. When ‖x̃‖² overflows float64 (entries
    above about 1e154) the same update is taken with x̃ divided by s = max|x̃ᵢ|:
    ρ e x̃/(ε + ‖x̃‖²) = ρ (e/s)(x̃/s)/(ε/s² + ‖x̃/s‖²), so scale = 1/s and
    ρ' = ρ/(ε/s² + ‖x̃/s‖²): the step is invariant to the data's scale, as normalised LMS is
    (it used to become 0, leaving the coefficients where they started)."""
    norm2 = 1.0 if const else 0.0  # the constant column of x̃
    for c in range(x.shape[0]):
        v = np.float64(x[c])
        norm2 += v * v
    if np.isfinite(norm2):
        # x̃ = 0 with ε = 0 carries no information: no step (rather than 0/0)
        return (rho / (eps + norm2) if eps + norm2 > 0.0 else 0.0), 1.0
    top = 1.0 if const else 0.0
    for c in range(x.shape[0]):
        top = max(top, abs(np.float64(x[c])))
    scale = 1.0 / top
    norm2 = scale * scale if const else 0.0
    for c in range(x.shape[0]):
        v = np.float64(x[c]) * scale
        norm2 += v * v
    return rho / (eps * scale * scale + norm2), scale


@numba.njit(cache=True)
def _lms_loop(W, k0, X, Y, edges, record_blocks, coefs, code, rate, tau, power, normalized, eps,
              const):
    """Run LMS in place on W over the blocks X[edges[j]:edges[j+1]].

    After block j == record_blocks[r] the current W is copied to coefs[r].
    Returns (k, bad): the sample counter after the last sample, and the index
    of the first block after which W is not finite (−1 if none). With ``const`` row 0
    of W is the intercept (x̃ = [1, x]); without, W has no such row (x̃ = x).
    """
    q = X.shape[1]
    K = Y.shape[1]
    off = 1 if const else 0
    err = np.empty_like(W[0, :])  # residuals in W's dtype
    zero = np.zeros_like(W[0, :1])[0]
    k = k0
    r = 0
    for j in range(edges.shape[0] - 1):
        for i in range(edges[j], edges[j + 1]):
            k += 1
            if code == 0:
                rho = rate
            elif code == 1:
                rho = rate / (1.0 + k / tau)
            else:
                rho = rate / float(k) ** power
            scale = 1.0  # x̃ is used as x̃·scale below
            if normalized:
                rho, scale = _normalized_step(rho, X[i], const, eps)
            for t in range(K):
                pred = W[0, t] if const else zero
                for c in range(q):
                    pred += X[i, c] * W[c + off, t]
                err[t] = Y[i, t] - pred
            for t in range(K):
                g = rho * err[t] * scale
                if const:
                    W[0, t] += g * scale
                for c in range(q):
                    W[c + off, t] += g * (np.float64(X[i, c]) * scale)
        for t in range(K):
            for c in range(q + off):
                if not np.isfinite(W[c, t]):
                    return k, j
        if r < record_blocks.shape[0] and record_blocks[r] == j:
            coefs[r] = W
            r += 1
    return k, -1


def lms_fold_arrays(
    W: np.ndarray,
    k0: int,
    X: np.ndarray,
    Y: np.ndarray,
    edges: np.ndarray,
    record_blocks: np.ndarray,
    schedule: StepSchedule,
    normalized: bool = False,
    eps: float = 1e-6,
    intercept: bool = True,
) -> tuple[np.ndarray, int, np.ndarray]:
    """LMS over consecutive blocks on plain arrays; returns (W_new, k_new, coefs).

    ``W`` ((q+1)×K, row 0 the intercept; q×K with ``intercept=False``) is not modified.
    X and Y are cast to W's dtype (float32 or float64): W, predictions and residuals
    are kept in that dtype, the step size and the increment ρ·e·x are evaluated in
    float64 and rounded to W's dtype when added. ``record_blocks`` are increasing local block
    indices after which W is copied into ``coefs`` (len(record_blocks), q+1, K).
    Raises ValueError when W stops being finite (a step too large for the data
    scale: plain LMS needs ρ‖x̃‖² < 2; use a smaller rate or ``normalized``).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import StepSchedule, lms_fold_arrays
    >>> X, Y = np.ones((3, 1)), np.ones((3, 1))
    >>> W, k, coefs = lms_fold_arrays(np.zeros((2, 1)), 0, X, Y, np.array([0, 3]),
    ...                               np.array([0]), StepSchedule("constant", 0.25))
    >>> k, W.ravel().round(4).tolist()
    (3, [0.4375, 0.4375])
    """
    W = np.array(W, copy=True, order="C")
    dtype = W.dtype
    X = np.ascontiguousarray(X, dtype=dtype)
    Y = np.ascontiguousarray(as_2d(Y), dtype=dtype)
    edges = np.ascontiguousarray(edges, dtype=np.int64)
    record_blocks = np.ascontiguousarray(record_blocks, dtype=np.int64)
    coefs = np.empty((record_blocks.size, *W.shape), dtype=dtype)
    tau = 1.0 if schedule.tau is None else schedule.tau
    power = 1.0 if schedule.power is None else schedule.power
    k, bad = _lms_loop(
        W,
        np.int64(k0),
        X,
        Y,
        edges,
        record_blocks,
        coefs,
        schedule.code,
        schedule.rate,
        tau,
        power,
        bool(normalized),
        float(eps),
        bool(intercept),
    )
    if bad >= 0:
        # a NaN or Inf in the rows makes W non-finite at once, so the rows are checked
        # here, on the error path, rather than in a separate pass over every row first
        stop = int(edges[bad + 1])
        # the rows as computed with: a value beyond W's dtype is Inf there
        check_finite("X", X[:stop])
        check_finite("Y", Y[:stop])
        raise ValueError(
            f"LMS diverged (non-finite coefficients) in local block {bad}, by sample {k}: "
            f"the rate {schedule.rate!r} is too large for the data scale "
            f"(plain LMS needs rate*|x~|^2 < 2); lower rate or use normalized=True"
        )
    return W, int(k), coefs


# ---------------------------------------------------------------------------
# The recursion
# ---------------------------------------------------------------------------
class LMS(Recursion):
    """LMS / Widrow–Hoff SGD with an intercept, multi-output, compiled per-sample loop.

    Parameters
    ----------
    schedule : {"constant", "inverse", "power"}
        Step-size schedule, see :class:`StepSchedule`.
    rate : float
        ρ₀ (> 0).
    tau : float, only for "inverse"
        τ > 0 of ρ₀/(1 + k/τ).
    power : float, only for "power"
        a ∈ (½, 1] of ρ₀/kᵃ.
    normalized : bool
        Normalised LMS: the step is ρₖ/(ε + ‖x̃‖²). Since x̃ contains the constant
        1, ‖x̃‖² ≥ 1 and ε only keeps the usual NLMS form; ρₖ ∈ (0, 2) is stable.
    eps : float or None, default None
        ε of normalised LMS (None: 1e-6); refused without ``normalized``.
    coef0 : array ((q+1)×K) or None
        W₀ (default zeros).
    intercept : bool, default True
        The constant column of x̃ = [1, x] (row 0 of W, labelled ``intercept``); False:
        x̃ = x, no intercept. Not one of the declared ``params``: every recursion shares
        one switch for it (``fit_intercept`` of ``fit_stream``, ``--intercept``), and
        LMS is the one whose constant is its own (:attr:`intercept_kind` ``"kernel"``).

    Notes
    -----
    State: ``W`` ((q+1)×K, row 0 the intercept), ``k`` (samples processed, over
    all epochs; the schedule's next sample is k + 1) and ``blocks``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import LMS, block_edges
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((4_000, 2))
    >>> Y = X @ [[2.0], [-1.0]] + 0.5
    >>> rec = LMS(rate=0.02)
    >>> res = rec.fold(rec.init(2, 1), X, Y, block_edges(4_000, 1_000), 1, 1)
    >>> rec.coef_names(2), np.round(rec.coef(res.state).ravel(), 3)  # row 0: the intercept
    (['intercept', 'x0', 'x1'], array([ 0.5,  2. , -1. ]))
    """

    #: name, summary, description, examples, params (schedule, rate, tau, power, normalized,
    #: eps), intercept_kind ("kernel"), default_intercept (True): see :mod:`.declarations`
    declaration = DECLARATIONS["lms"]

    def __init__(self, *args, coef0=None, intercept: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.intercept = INTERCEPT.check(intercept)
        self.coef0 = None if coef0 is None else np.asarray(coef0)

    def check_params(self) -> None:
        """The schedule's rules between ``schedule``, ``tau`` and ``power``, checked by the
        :class:`StepSchedule` this builds from them (kept as ``schedule``); ``eps`` only with
        ``normalized`` (plain LMS has no eps to read)."""
        self.schedule = StepSchedule(self.schedule, self.rate, self.tau, self.power)
        if self.eps is not None and not self.normalized:
            raise must_be("eps", "None unless normalized=True (the eps of normalised LMS's "
                          "step)", self.eps)

    @property
    def _eps(self) -> float:
        """The eps the loop reads (normalised LMS's; plain LMS's loop ignores it)."""
        return DEFAULT_EPS if self.eps is None else float(self.eps)

    def get_params(self) -> dict:
        params = {**super().get_params(), "schedule": self.schedule.kind}
        return params | ({} if self.intercept else {"intercept": False})

    @classmethod
    def from_params(cls, **params) -> LMS:
        """As :meth:`Recursion.from_params`, also taking ``intercept`` (see the class)."""
        intercept = INTERCEPT.check(params.pop("intercept", True))
        rec = super().from_params(**params)
        rec.intercept = intercept
        return rec

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        # ``term`` has n_features + 1 entries (intercept first), labelled by coef_names.
        return {"W": ("term", "target"), "k": (), "blocks": ()}

    def coef_names(self, n_features: int) -> list[str]:
        """Labels of the rows of W: ``["intercept", "x0", …, "x{q−1}"]`` (without the
        intercept when ``intercept=False``)."""
        return ["intercept"] * self.intercept + [f"x{j}" for j in range(int(n_features))]

    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        shape = (int(n_features) + int(self.intercept), int(n_targets))
        if self.coef0 is None:
            W = np.zeros(shape, dtype=dtype)
        else:
            if self.coef0.size != shape[0] * shape[1]:
                raise ValueError(f"coef0 must have shape {shape}, got {self.coef0.shape}")
            W = np.array(self.coef0, dtype=dtype).reshape(shape)
        return {"W": W, "k": np.int64(0), "blocks": np.int64(0)}

    def coef(self, state: State) -> np.ndarray:
        return state["W"]

    def _check_block(self, state: State, X: np.ndarray, Y: np.ndarray):
        X = np.asarray(X)
        Y = as_2d(np.asarray(Y))
        q1, K = state["W"].shape
        q = q1 - int(self.intercept)
        if X.ndim != 2 or X.shape[1] != q:
            raise ValueError(f"X must have shape (rows, {q}), got {X.shape}")
        if Y.shape != (X.shape[0], K):
            raise ValueError(f"Y must have shape ({X.shape[0]}, {K}), got {Y.shape}")
        # NaN and Inf are refused by lms_fold_arrays: a non-finite value makes W
        # non-finite at once, and its rows are checked then (no extra pass over the rows)
        return X, Y

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        X, Y = self._check_block(state, X, Y)
        W, k, _ = lms_fold_arrays(
            state["W"],
            int(state["k"]),
            X,
            Y,
            np.array([0, X.shape[0]]),
            np.empty(0, dtype=np.int64),
            self.schedule,
            self.normalized,
            self._eps,
            self.intercept,
        )
        return {"W": W, "k": np.int64(k), "blocks": np.int64(state["blocks"] + 1)}

    def fold(self, state: State, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
             first_step: int, record_every: int, rows_before: int = 0) -> FoldResult:
        """The compiled loop over the whole piece; same recording rule as the base ``fold``."""
        X, Y = self._check_block(state, X, Y)
        edges = fold_edges(edges, X.shape[0])
        record_every = RECORD_EVERY.check(record_every)
        n_blocks = edges.size - 1
        steps = int(first_step) + np.arange(n_blocks)
        local = np.flatnonzero(steps % int(record_every) == 0)
        W, k, coefs = lms_fold_arrays(
            state["W"],
            int(state["k"]),
            X,
            Y,
            edges,
            local,
            self.schedule,
            self.normalized,
            self._eps,
            self.intercept,
        )
        new_state = {"W": W, "k": np.int64(k), "blocks": np.int64(state["blocks"] + n_blocks)}
        return FoldResult(
            state=new_state,
            steps=steps[local].astype(np.int64),
            coefs=coefs,
            rows_seen=(int(rows_before) + edges[local + 1]).astype(np.int64),
        )


