"""IRMA — incremental risk minimisation — and its GD / RLS baselines.

Buschermöhle et al. (2013); ``docs/algorithms.md#irma`` (full reference in
``docs/references.md``). A linear-in-parameters model f(x) = φ(x)ᵀθ
with p basis functions on a bounded domain Ω (a :mod:`~streamlsq.kernels.basis`
object) learns one example (x_t, y_t) at a time. IRMA minimises the incremental
risk functional (eq. 6)

    R_inc(θ) = λ_t ∫_Ω ((θ_t − θ)ᵀφ(x))² dx + (y_t − θᵀφ(x_t))²

whose normal equations (8) (A + φφᵀ/λ_t) θ_{t+1} = Aθ_t + φ y_t/λ_t give, by
Sherman–Morrison (9),

    θ_{t+1} = θ_t + A⁻¹φ e_t / (λ_t + φᵀA⁻¹φ),   e_t = y_t − φ(x_t)ᵀθ_t ,

with A the Gramian of the basis on Ω. For an orthonormal basis A = I. For a
general basis A = LLᵀ is factored once (Cholesky) and the recursion runs in the
orthonormal coordinates ψ = Lᵀθ, φ̃ = L⁻¹φ (triangular solves per block), where
it reads ψ += φ̃e/(λ + ‖φ̃‖²) — the same algebra, never an inverse. The
function-space update does not depend on the basis (only on its span), so
Legendre and monomial IRMA give the same f up to rounding.

Stiffness λ_t (:class:`StiffnessSchedule`): multiplicative λ_t = λ₀·r^t (the
paper: λ₀ = 0.1, r = 1.05), additive λ_t = λ₀ + c·t, constant λ_t = λ₀; t is the
0-based number of examples seen before the current one.

Baselines of the paper's §IV (their forms are stated in the class docstrings):
:class:`IRMAGradientDescent` (normalised GD with Tikhonov μθᵀθ) and
:class:`IRMARLS` (RLS with P₀ = I, forgetting factor 0.9 and Tikhonov μθᵀθ).
They depend on the basis (the paper uses monomials for them).

The recursions receive the RAW inputs x (n, dim) and expand them per block; the
target is scalar (Y is (n, 1)). ``fold`` records the cumulative pre-update loss
(the paper's eq. 1 and Figure 1) as the diagnostic ``"cumulative_loss"``.
For many independent sequences at once (the paper's Monte-Carlo studies) use the
vectorised :func:`irma_sequences`, :func:`gd_sequences`, :func:`rls_sequences`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numba
import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import spd_solve, symmetrize
from streamlsq.kernels.recursions.basis import Basis, basis_from_options, gramian_cholesky
from streamlsq.kernels.recursions.contract import (
    RECORD_EVERY,
    BadRowError,
    FoldResult,
    Param,
    Recursion,
    State,
    fold_edges,
    fold_result,
)
from streamlsq.kernels.recursions.declarations import (  # noqa: F401 - MU, P0: for the studies
    BASIS_PARAMS,
    DECLARATIONS,
    MU,
    P0,
    STIFFNESS,
    STIFFNESS_INITIAL,
    STIFFNESS_RATE,
)

__all__ = [
    "IRMA",
    "IRMAGradientDescent",
    "IRMARLS",
    "StiffnessSchedule",
    "irma_step",
]


# ---------------------------------------------------------------------------
# stiffness schedules
# ---------------------------------------------------------------------------
# the declared parameters of IRMA's schedule (STIFFNESS, STIFFNESS_INITIAL, STIFFNESS_RATE)
# are in :mod:`.declarations`; :class:`StiffnessSchedule` checks with them


@dataclass(frozen=True)
class StiffnessSchedule:
    """λ_t for the t-th example (t = 0, 1, …; the first example uses λ₀).

    kind ``"multiplicative"``: λ_t = initial·rate^t (rate > 0; the paper's
    λ₀ = 0.1, λ_t = 1.05·λ_{t−1}); ``"additive"``: λ_t = initial + rate·t
    (rate ≥ 0); ``"constant"``: λ_t = initial (rate ignored). ``initial`` > 0.
    The paper asks for a non-decreasing λ (more data, stiffer model); a
    multiplicative rate below 1 is allowed but λ then decays towards 0 (an
    interpolating update). With rate > 1, λ overflows to +inf after
    ~log(1e308/λ₀)/log(rate) examples (≈14 500 for the paper's), after which
    the model is frozen (the update is exactly 0) — the schedule's own limit.

    Examples
    --------
    >>> from streamlsq.kernels import StiffnessSchedule
    >>> StiffnessSchedule.paper().values(0, 3)  # λ0 = 0.1, then ×1.05
    array([0.1    , 0.105  , 0.11025])
    """

    kind: str = "multiplicative"
    initial: float = 0.1
    rate: float = 1.05

    def __post_init__(self):
        STIFFNESS.check(self.kind)
        STIFFNESS_INITIAL.check(self.initial)
        rate = STIFFNESS_RATE.check(self.rate)
        if self.kind == "multiplicative" and not rate > 0:
            raise STIFFNESS_RATE.error(self.rate, "a finite number > 0 for stiffness="
                                       "'multiplicative' (the factor per example)")
        if self.kind == "additive" and not rate >= 0:
            raise STIFFNESS_RATE.error(self.rate, "a finite number >= 0 for stiffness="
                                       "'additive' (the increment per example)")

    @classmethod
    def paper(cls) -> StiffnessSchedule:
        """λ₀ = 0.1, λ_t = 1.05·λ_{t−1} (Buschermöhle et al., 2013, §IV)."""
        return cls("multiplicative", 0.1, 1.05)

    def values(self, start: int, count: int) -> np.ndarray:
        """λ_t for t = start, …, start + count − 1 (float64)."""
        t = np.arange(int(start), int(start) + int(count), dtype=np.float64)
        if self.kind == "constant":
            return np.full(t.shape, float(self.initial))
        if self.kind == "additive":
            return self.initial + self.rate * t
        with np.errstate(over="ignore"):
            return self.initial * np.power(float(self.rate), t)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "initial": float(self.initial), "rate": float(self.rate)}


def as_stiffness_schedule(stiffness) -> StiffnessSchedule:
    if stiffness is None:
        return StiffnessSchedule.paper()
    if isinstance(stiffness, StiffnessSchedule):
        return stiffness
    if isinstance(stiffness, dict):
        return StiffnessSchedule(**stiffness)
    raise ValueError(f"stiffness must be a StiffnessSchedule or a dict, got {stiffness!r}")


# ---------------------------------------------------------------------------
# single step (reference form) and compiled per-sample loops
# ---------------------------------------------------------------------------
def irma_step(theta, phi, y, lam, gramian=None) -> tuple[np.ndarray, float]:
    """One IRMA update (eq. 9 applied to eq. 8); returns (θ_{t+1}, e_t).

    θ_{t+1} = θ_t + A⁻¹φ e_t/(λ + φᵀA⁻¹φ) with A⁻¹φ by a Cholesky solve
    (A = I when ``gramian`` is None). The straightforward form, for clarity and
    as a reference; the recursions use the compiled loops.
    """
    theta = np.asarray(theta)
    phi = np.asarray(phi)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"stiffness lam must be > 0, got {lam!r}")
    e = float(y - phi @ theta)
    v = phi if gramian is None else spd_solve(np.asarray(gramian), phi)
    return theta + v * (e / (lam + phi @ v)), e


@numba.njit(cache=True, inline="always")
def _snapshot(snaps, record_rows, r, rows, vector):  # pragma: no cover - compiled
    """Copy ``vector`` into ``snaps`` for every recorded row count equal to ``rows``,
    from record ``r`` on; returns the next record."""
    while r < record_rows.shape[0] and record_rows[r] == rows:
        snaps[r, :] = vector
        r += 1
    return r


@numba.njit(cache=True)
def _irma_loop(psi, Phi, y, lam, record_rows):  # pragma: no cover - compiled
    # ψ ← ψ + φ e/(λ + ‖φ‖²) in orthonormal coordinates; ψ is updated in place
    T, p = Phi.shape
    errors = np.empty(T, dtype=Phi.dtype)
    snaps = np.empty((record_rows.shape[0], p), dtype=psi.dtype)
    r = _snapshot(snaps, record_rows, 0, 0, psi)
    for t in range(T):
        pred = 0.0
        sq = 0.0
        for j in range(p):
            pred += Phi[t, j] * psi[j]
            sq += Phi[t, j] * Phi[t, j]
        e = y[t] - pred
        errors[t] = e
        den = lam[t] + sq
        # den > 0 whenever λ > 0; it is 0 only if λ underflowed and φ(x) = 0,
        # where the update is 0 anyway. λ = inf gives a zero update.
        if den > 0.0:
            gain = e / den
            for j in range(p):
                psi[j] += gain * Phi[t, j]
        r = _snapshot(snaps, record_rows, r, t + 1, psi)
    return psi, errors, snaps


@numba.njit(cache=True)
def _gd_loop(theta, Phi, y, mu, record_rows):  # pragma: no cover - compiled
    # exact line search on J(θ) = (y − φᵀθ)² + μθᵀθ along g = ∇J/2 = −φe + μθ
    T, p = Phi.shape
    errors = np.empty(T, dtype=Phi.dtype)
    snaps = np.empty((record_rows.shape[0], p), dtype=theta.dtype)
    g = np.empty(p, dtype=np.float64)
    r = _snapshot(snaps, record_rows, 0, 0, theta)
    for t in range(T):
        pred = 0.0
        for j in range(p):
            pred += Phi[t, j] * theta[j]
        e = y[t] - pred
        errors[t] = e
        gg = 0.0
        phig = 0.0
        for j in range(p):
            g[j] = -Phi[t, j] * e + mu * theta[j]
            gg += g[j] * g[j]
            phig += Phi[t, j] * g[j]
        if gg > 0.0:
            eta = gg / (phig * phig + mu * gg)
            for j in range(p):
                theta[j] -= eta * g[j]
        r = _snapshot(snaps, record_rows, r, t + 1, theta)
    return theta, errors, snaps


@numba.njit(cache=True, nogil=True)
def _rls_loop_compiled(theta, H, Phi, y, forgetting, mu, record_rows):  # pragma: no cover
    """:func:`_rls_loop` compiled: the Cholesky factorisation and the two triangular
    solves of each row without allocation. Returns (θ, H, errors, snapshots, bad) with
    ``bad`` the first row whose H is not numerically positive definite (Cholesky fails,
    or (min/max of diag L)² — a lower bound of 1/κ(H) — is below p·ε), −1 if none; the
    caller then reruns the rows with the checked solves of :func:`_rls_loop`."""
    p = theta.shape[0]
    leak = (1.0 - forgetting) * mu
    eps = np.finfo(H.dtype).eps
    errors = np.empty(Phi.shape[0], dtype=Phi.dtype)
    snaps = np.empty((record_rows.shape[0], p), dtype=theta.dtype)
    L = np.zeros((p, p), dtype=H.dtype)
    rhs = np.empty(p, dtype=H.dtype)
    r = _snapshot(snaps, record_rows, 0, 0, theta)
    for t in range(Phi.shape[0]):
        e = y[t]
        for i in range(p):
            e -= Phi[t, i] * theta[i]
        errors[t] = e
        for i in range(p):
            for j in range(p):
                H[i, j] = forgetting * H[i, j] + Phi[t, i] * Phi[t, j]
            H[i, i] += leak
        # Cholesky H = L Lᵀ (lower)
        lo = np.inf
        hi = 0.0
        for j in range(p):
            d = H[j, j]
            for k in range(j):
                d -= L[j, k] * L[j, k]
            if not d > 0.0:
                return theta, H, errors, snaps, t
            d = np.sqrt(d)
            L[j, j] = d
            lo = min(lo, d)
            hi = max(hi, d)
            for i in range(j + 1, p):
                acc = H[i, j]
                for k in range(j):
                    acc -= L[i, k] * L[j, k]
                L[i, j] = acc / d
        if (lo / hi) ** 2 < p * eps:
            return theta, H, errors, snaps, t
        for i in range(p):
            rhs[i] = Phi[t, i] * e - leak * theta[i]
        for i in range(p):  # L u = rhs
            acc = rhs[i]
            for k in range(i):
                acc -= L[i, k] * rhs[k]
            rhs[i] = acc / L[i, i]
        for i in range(p - 1, -1, -1):  # Lᵀ d = u
            acc = rhs[i]
            for k in range(i + 1, p):
                acc -= L[k, i] * rhs[k]
            rhs[i] = acc / L[i, i]
        for i in range(p):
            theta[i] += rhs[i]
        r = _snapshot(snaps, record_rows, r, t + 1, theta)
    return theta, H, errors, snaps, -1


def _rls_loop(theta, H, Phi, y, forgetting, mu, record_rows):
    """Per-sample RLS in information form with constant Tikhonov μ (see :class:`IRMARLS`).

    The checked form (``spd_solve`` per row: the condition estimate, the refusal of a
    singular H, the LDLᵀ fallback); :meth:`IRMARLS._run` runs :func:`_rls_loop_compiled`
    and comes here only when that one meets a row it cannot solve."""
    p = theta.shape[0]
    leak = (1.0 - forgetting) * mu
    errors = np.empty(Phi.shape[0], dtype=Phi.dtype)
    snaps = np.empty((record_rows.shape[0], p), dtype=theta.dtype)
    r = _snapshot(snaps, record_rows, 0, 0, theta)
    diag = np.arange(p)
    for t in range(Phi.shape[0]):
        phi = Phi[t]
        e = y[t] - phi @ theta
        errors[t] = e
        H = forgetting * H + np.outer(phi, phi)
        H[diag, diag] += leak
        theta = theta + spd_solve(H, phi * e - leak * theta)
        r = _snapshot(snaps, record_rows, r, t + 1, theta)
    return theta, H, errors, snaps


# ---------------------------------------------------------------------------
# recursions (the Recursion contract)
# ---------------------------------------------------------------------------
# the parameters every recursion on a basis of raw inputs shares (BASIS_PARAMS), the
# Tikhonov weight μ of the baselines (MU) and the initial covariance scale of RLS (P0) are
# declared in :mod:`.declarations`
#: what the constructors take: the basis itself
_BASIS_OBJECT = BASIS_PARAMS[2].replace(choices=None)


class _BasisRecursion(Recursion):
    """Shared driver of the per-sample recursions on a basis expansion.

    The data X are raw inputs (n, basis.dim), expanded per block; Y is (n, 1).
    State: ``theta`` (n_basis, 1), ``rows`` (examples seen), ``blocks``,
    ``cumulative_loss`` (Σ over all examples seen of the squared pre-update
    prediction error (ŷ_t − y_t)², ŷ_t = φ(x_t)ᵀθ_t; float64).
    Arithmetic in the state's dtype (float64 by default; float32 accepted,
    with float64 accumulators for the per-sample dot products).

    The constructor takes the basis, then the recursion's own declared parameters
    (those after :data:`BASIS_PARAMS`, which :meth:`from_params` builds the basis from).
    """

    def __init__(self, basis: Basis, *args, **kwargs):
        self.basis = _BASIS_OBJECT.check(basis)
        super().__init__(*args, **kwargs)

    @classmethod
    def init_params(cls) -> tuple[Param, ...]:
        return tuple(p for p in cls.params if p not in BASIS_PARAMS)

    def get_params(self) -> dict:
        return {"basis": self.basis.get_params(),
                **{p.name: getattr(self, p.name) for p in self.init_params()}}

    @classmethod
    def from_params(cls, **params) -> _BasisRecursion:
        """Build the basis from ``order``, ``domain`` and ``basis`` (a Basis object is used
        as is), then the recursion from its own parameters."""
        values = cls.check_values(params)
        basis = basis_from_options(values.pop("order"), values.pop("domain"),
                                   values.pop("basis"))
        return cls._from_basis(basis, **values)

    @classmethod
    def _from_basis(cls, basis: Basis, **values) -> _BasisRecursion:
        return cls(basis, **values)

    @classmethod
    def example(cls, rng, n_rows: int = 48):
        x = rng.uniform(0.0, 3.0, size=(n_rows, 1))
        y = x * np.exp(-(x**2)) + 0.05 * rng.uniform(-1, 1, size=(n_rows, 1))
        return cls.from_params(order=4, domain=(0.0, 3.0)), x, y

    def check_shape(self, n_features: int, n_targets: int) -> None:
        if n_features != self.basis.dim:
            raise ValueError(
                f"variable 'X' has {n_features} column(s) but the {self.name} basis has "
                f"{self.basis.dim} input dimension(s) (domain {self.basis.domain}): X holds the "
                "raw inputs x, one column per input dimension (one --domain A B per column)")
        if n_targets != 1:
            raise ValueError(f"variable 'y' has {n_targets} targets; {self.name} fits one "
                             "scalar target")

    def result_attrs(self, state: State) -> dict:
        """``basis`` (JSON of the basis' parameters, for :func:`make_basis`) and the final
        ``cumulative_loss``."""
        return {"basis": json.dumps(self.basis.get_params()),
                "cumulative_loss": float(state["cumulative_loss"])}

    @classmethod
    def result_notes(cls, attrs: dict) -> list[str]:
        return [f"final cumulative loss {attrs['cumulative_loss']:.4g}"]

    # -- contract -------------------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        if n_features != self.basis.dim:
            raise ValueError(
                f"n_features must equal the basis' input dimension {self.basis.dim} "
                f"(the raw inputs x are expanded by the basis), got {n_features}"
            )
        if n_targets != 1:
            raise ValueError(f"{type(self).__name__} has a scalar target: n_targets must be 1")
        dtype = np.dtype(dtype)
        if not np.issubdtype(dtype, np.floating):
            raise ValueError(f"dtype must be a floating type, got {dtype}")
        return {
            "theta": np.zeros((self.basis.n_basis, 1), dtype=dtype),
            "rows": np.int64(0),
            "blocks": np.int64(0),
            "cumulative_loss": np.float64(0.0),
        }

    def coef(self, state: State) -> np.ndarray:
        return state["theta"]

    def coef_names(self, n_features: int | None = None) -> list[str]:
        return list(self.basis.names)

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        return {
            "theta": ("feature", "target"),
            "rows": (),
            "blocks": (),
            "cumulative_loss": (),
        }

    def state_diagnostics(self, state: State) -> dict:
        """The diagnostics of :meth:`fold` for the state itself (an engine's last step)."""
        return {"cumulative_loss": np.float64(state["cumulative_loss"])}

    def predict(self, state: State, x) -> np.ndarray:
        """f(x) = φ(x)ᵀθ for raw inputs x, as an (n, 1) array."""
        return self.basis.expand(x) @ state["theta"]

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        X = np.asarray(X)
        return self.fold(state, X, Y, np.array([0, X.shape[0]]), 1, 2**62).state

    def fold(self, state: State, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
             first_step: int, record_every: int, rows_before: int = 0) -> FoldResult:
        """Fold the blocks ``X[edges[j]:edges[j+1]]`` in one compiled per-sample pass.

        Diagnostics: ``"cumulative_loss"`` at each recorded step s is
        Σ (φ(x_t)ᵀθ_t − y_t)² over every example t of the stream up to the end
        of block s (since ``init``), each predicted with the parameters before
        its own update (eq. 1 of the paper; Figure 1 with blocks of one row).
        """
        edges = fold_edges(edges)
        record_every = RECORD_EVERY.check(record_every)
        a0, a1 = int(edges[0]), int(edges[-1])
        Phi, y = self._prepare(state, X, Y, a0, a1, rows_before)
        n_blocks = edges.size - 1
        steps = first_step + np.arange(n_blocks, dtype=np.int64)
        recorded = steps % record_every == 0
        record_rows = (edges[1:][recorded] - a0).astype(np.int64)
        core, errors, snaps = self._run(state, Phi, y, record_rows)
        sq = np.asarray(errors, dtype=np.float64) ** 2
        # one running sum from the state's total (np.cumsum adds left to right), so the
        # numbers do not depend on how the stream is cut into folds
        cum = np.cumsum(np.concatenate([[float(state["cumulative_loss"])], sq]))
        new_state = {
            **core,
            "rows": np.int64(state["rows"] + (a1 - a0)),
            "blocks": np.int64(state["blocks"] + n_blocks),
            "cumulative_loss": np.float64(cum[-1]),
        }
        return fold_result(
            new_state,
            new_state["theta"],
            steps[recorded],
            snaps[:, :, None],
            rows_before + edges[1:][recorded],
            {"cumulative_loss": cum[record_rows]},
        )

    # -- helpers --------------------------------------------------------------
    def _prepare(self, state, X, Y, a0, a1, rows_before):
        dtype = state["theta"].dtype
        X = np.asarray(X)
        Y = np.asarray(Y)
        if Y.ndim == 2 and Y.shape[1] != 1:
            raise ValueError(f"Y must have one target column (n, 1), got shape {Y.shape}")
        if Y.ndim not in (1, 2):
            raise ValueError(f"Y must have shape (n, 1), got {Y.shape}")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same rows, got {X.shape[0]} and {Y.shape[0]}")
        if not (0 <= a0 <= a1 <= X.shape[0]):
            raise ValueError(f"edges [{a0}, {a1}] are outside the {X.shape[0]} rows given")
        Phi = self.basis.expand(X[a0:a1], name="X", row_offset=rows_before + a0)
        y = Y[a0:a1].reshape(-1)
        if not np.issubdtype(y.dtype, np.number):
            raise ValueError(f"Y must be numeric, got dtype {y.dtype}")
        finite = np.isfinite(y)
        if not finite.all():
            r = int(np.argmin(finite))
            row = rows_before + a0 + r
            raise BadRowError(f"Y has a non-finite value in row {row}: {y[r]}", variable="Y",
                              row=row, reason=f"has a non-finite value: {y[r]}")
        return np.ascontiguousarray(Phi, dtype=dtype), np.ascontiguousarray(y, dtype=dtype)

    def _run(self, state, Phi, y, record_rows):
        """Per-sample pass: (state arrays other than counters, errors (T,), snapshots (R, p))."""
        raise NotImplementedError


class IRMA(_BasisRecursion):
    """Incremental Risk Minimisation Algorithm (Buschermöhle et al., 2013, eqs. 6–9).

    θ_{t+1} = θ_t + A⁻¹φ(x_t) e_t / (λ_t + φ(x_t)ᵀA⁻¹φ(x_t)),  e_t = y_t − φ(x_t)ᵀθ_t,
    θ₀ = 0. A = I for an orthonormal basis (LegendreBasis, tensors of it);
    otherwise A is factored once at construction (a singular Gramian is refused
    then) and the update uses triangular solves.

    Parameters
    ----------
    basis : Basis
        Expands the raw inputs; its Gramian on its domain defines the functional
        distance ∫_Ω (f − f_t)² dx.
    stiffness : StiffnessSchedule or dict, default the paper's (λ₀ = 0.1, ×1.05)

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import IRMA, LegendreBasis
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 3, (150, 1))
    >>> y = x * np.exp(-x**2)
    >>> rec = IRMA(LegendreBasis(6, (0.0, 3.0)))  # the paper's stiffness λ0 = 0.1, ×1.05
    >>> state = rec.update(rec.init(1, 1), x, y)
    >>> grid = np.linspace(0, 3, 7)[:, None]
    >>> bool(np.abs(rec.predict(state, grid) - grid * np.exp(-grid**2)).max() < 0.05)
    True
    """

    #: name, summary, description, examples, params (order, domain, basis, stiffness,
    #: stiffness_initial, stiffness_rate), intercept_kind ("basis"): see :mod:`.declarations`
    declaration = DECLARATIONS["irma"]

    @classmethod
    def init_params(cls) -> tuple[Param, ...]:
        return ()  # the schedule's parameters come as one StiffnessSchedule

    @classmethod
    def _from_basis(cls, basis, stiffness="multiplicative", stiffness_initial=0.1,
                    stiffness_rate=1.05):
        if isinstance(stiffness, str):
            stiffness = StiffnessSchedule(stiffness, stiffness_initial, stiffness_rate)
        return cls(basis, stiffness)

    def __init__(self, basis: Basis, stiffness: StiffnessSchedule | dict | None = None):
        super().__init__(basis)
        self.stiffness = as_stiffness_schedule(stiffness)
        self._chol = gramian_cholesky(basis)

    def get_params(self) -> dict:
        return {"basis": self.basis.get_params(), "stiffness": self.stiffness.as_dict()}

    def _run(self, state, Phi, y, record_rows):
        dtype = Phi.dtype
        theta = state["theta"][:, 0]
        lam = self.stiffness.values(int(state["rows"]), Phi.shape[0])
        if self._chol is None:
            psi = theta.copy()
            Phi_o = Phi
        else:
            L = self._chol.astype(dtype)
            psi = L.T @ theta
            Phi_o = np.ascontiguousarray(sla.solve_triangular(L, Phi.T, lower=True).T)
        psi, errors, snaps = _irma_loop(psi, Phi_o, y, lam, record_rows)
        if self._chol is not None:
            psi = sla.solve_triangular(L.T, psi, lower=False)
            if snaps.shape[0]:
                snaps = sla.solve_triangular(L.T, snaps.T, lower=False).T
        return {"theta": psi[:, None].astype(dtype)}, errors, snaps


class IRMAGradientDescent(_BasisRecursion):
    """Normalised gradient descent with Tikhonov regularisation (the paper's GD baseline).

    The paper (§II, §IV): GD "with a normalized learning rate", the rate "chosen
    in every learning step so as to directly minimize the loss", "combined with
    a Tikhonov regularization of μ·θᵀθ". Per example the loss is
    J_t(θ) = (y_t − φᵀθ)² + μθᵀθ; one gradient step with the exactly minimising
    rate (J_t is quadratic):

        g = ∇J_t(θ_t)/2 = −φ e_t + μθ_t ,
        θ_{t+1} = θ_t − η g,  η = gᵀg / ((φᵀg)² + μ gᵀg) .

    With μ = 0 this is the classical normalised LMS / passive–aggressive step
    θ + φe/‖φ‖², which interpolates the example. θ₀ = 0. μ = 0.05 in the paper.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import IRMAGradientDescent, MonomialBasis
    >>> rec = IRMAGradientDescent(MonomialBasis(1, (0.0, 1.0)), mu=0.0)
    >>> state = rec.update(rec.init(1, 1), np.array([[0.5]]), np.array([[2.0]]))
    >>> float(rec.predict(state, np.array([[0.5]]))[0, 0])  # with mu = 0 a step interpolates
    2.0
    """

    #: name, summary, description, examples, params (order, domain, basis, mu),
    #: intercept_kind ("basis"): see :mod:`.declarations`
    declaration = DECLARATIONS["irma-gd"]

    def _run(self, state, Phi, y, record_rows):
        theta = state["theta"][:, 0].copy()
        theta, errors, snaps = _gd_loop(theta, Phi, y, self.mu, record_rows)
        return {"theta": theta[:, None]}, errors, snaps


class IRMARLS(_BasisRecursion):
    """Recursive least squares with forgetting and Tikhonov μθᵀθ (the paper's RLS baseline).

    The paper (§IV): RLS "initialized with the identity as a covariance matrix
    and a forgetting factor of 0.9", "combined with a Tikhonov regularization of
    μ·θᵀθ with μ = 0.05". Here θ_t is the exact minimiser of

        J_t(θ) = Σ_{i≤t} g^{t−i} (y_i − φ_iᵀθ)² + g^t θᵀP₀⁻¹θ + μθᵀθ

    (θ₀ = 0): exponentially weighted least squares whose prior term g^tθᵀP₀⁻¹θ
    is forgotten, plus a Tikhonov term that is not. In information form
    (H_t = ∇²J_t/2),

        H_t = g H_{t−1} + φφᵀ + (1 − g)μ I,    H₀ = P₀⁻¹ + μI,
        θ_t = θ_{t−1} + H_t⁻¹(φ e_t − (1 − g)μ θ_{t−1})      (a Cholesky solve),

    a full-rank update per example, so there is no Sherman–Morrison form and the
    state keeps H, not P = H⁻¹. Relation to :class:`~streamlsq.kernels.kf4lls.RLS`:
    that kernel with blocks of one row and ridge δ is H_t = gH_{t−1} + φφᵀ,
    H₀ = δI, i.e. its Tikhonov term decays like g^t; with μ = 0 the two coincide
    (δ = 1/p0). State: ``theta``, ``H`` and the counters.

    Not a least-squares solve: θ_t is the posterior mean under the prior θ ~ N(0, P₀)
    (p0 > 0, finite) with the Tikhonov term, so H_t is positive definite whatever the
    examples, and no rank of a design is decided (the rank rule of
    :func:`~streamlsq.kernels.linalg.column_rank` is for the least-squares solves). Each
    solve is the checked Cholesky of :func:`~streamlsq.kernels.linalg.spd_solve`, which
    refuses an H_t singular to working precision (a prior forgotten below rounding, g < 1
    and μ = 0, on examples that leave a basis direction unseen).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import IRMARLS, MonomialBasis
    >>> x = np.linspace(0, 1, 100)[:, None]
    >>> rec = IRMARLS(MonomialBasis(1, (0.0, 1.0)), forgetting=1.0, mu=0.0, p0=1e8)
    >>> state = rec.update(rec.init(1, 1), x, 1 + 2 * x)
    >>> np.round(rec.coef(state).ravel(), 4)
    array([1., 2.])
    """

    #: name, summary, description, examples, params (order, domain, basis, forgetting, mu, p0),
    #: intercept_kind ("basis"): see :mod:`.declarations`
    declaration = DECLARATIONS["irma-rls"]

    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        state = super().init(n_features, n_targets, dtype)
        p = self.basis.n_basis
        state["H"] = ((1.0 / self.p0 + self.mu) * np.eye(p)).astype(state["theta"].dtype)
        return state

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        return {**super().state_dims(), "H": ("feature", "feature_")}

    def _run(self, state, Phi, y, record_rows):
        theta0, H0 = state["theta"][:, 0], state["H"]
        theta, H, errors, snaps, bad = _rls_loop_compiled(
            theta0.copy(), np.array(H0, order="C"), Phi, y, self.forgetting, self.mu,
            record_rows,
        )
        if bad >= 0:  # a row H cannot be solved at: the checked loop refuses it by name
            theta, H, errors, snaps = _rls_loop(
                theta0.copy(), H0.copy(), Phi, y, self.forgetting, self.mu, record_rows)
        return {"theta": theta[:, None], "H": symmetrize(H)}, errors, snaps


