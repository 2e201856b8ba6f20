"""Incremental BFGS linear regressor (De Melo, 2019; ``docs/algorithms.md#incremental-bfgs``).

Rows are samples: block k is X_k (n×q), Y_k (n×K); the paper stores examples
as columns, so its XXᵀ is our XᵀX. The loss of a block is
L_k(W) = ½‖Y_k − X_k W‖²_F (1.1).

First block (1.2): H₀ = X₀ᵀX₀, W₀ = H₀⁻¹X₀ᵀY₀ and B₀ = H₀⁻¹, a least-squares
fit: both from the Householder QR of [X₀ Y₀] (W₀ = R⁻¹z, B₀ = R⁻¹R⁻ᵀ by triangular
solves, never an inverse of H₀). Its rank is decided as for every least-squares solve
of the package, by :func:`~streamlsq.kernels.linalg.column_rank` on the
column-equilibrated R: H₀ must have rank q, otherwise
:class:`~streamlsq.kernels.linalg.SingularMatrixError` naming the aliased columns —
unless a ridge δ > 0 was given, in which case H₀ + δI is used and the state records
it. A well-posed but ill-conditioned first block (a polynomial design) is fitted to
the accuracy of a Householder QR of its rows.

The later blocks are quasi-Newton iterations, not a least-squares solve: B is an
approximation of the inverse Hessian updated by (2.8), never factored, so no rank is
decided on them (a column aliased only in later blocks leaves W as the steps take it).

Every later block k, with E = Y_k − X_k W_{k−1} and R = X_kᵀE = −∇L_k(W_{k−1}):

    p_k  = B_{k−1} R                                                    (2.2)
    δW_k = p_k α_k  — α_k by exact line search on L_k (2.3–2.4), a fixed
           rate α_r, or class-balanced per-example rates (see below)
    z_k  = X_kᵀX_k δW_k = ∇L_k(W_{k−1} + δW_k) − ∇L_k(W_{k−1})           (2.6)
    W_k  = W_{k−1} + δW_k                                               (2.7)
    B_k  = (I − δW C⁻¹zᵀ) B_{k−1} (I − z C⁻¹δWᵀ) + δW C⁻¹δWᵀ,   C = zᵀδW (2.8)

One target (K = 1): C = zᵀδW is a scalar and (2.8) divides by it. K > 1: the
paper's line search (2.4) sets a K×K derivative to zero, so α_k is a K×K
matrix, δW = p α with α = (pᵀX_kᵀX_k p)⁻¹ pᵀR (the minimiser of L_k over
W_{k−1} + pα; computed by least squares on X_k p, which also covers a singular
pᵀX_kᵀX_k p), and C = zᵀδW = (X_kδW)ᵀ(X_kδW) is a K×K matrix that (2.8) solves
with (Cholesky), the multi-secant form of BFGS: B_k z_k = δW_k column by column.

Curvature safeguard: C is positive semi-definite by construction; the B update
is skipped (and counted in ``n_skipped``) when C is not positive definite to
working precision: λ_min(C) ≤ (q·eps·‖X_k‖_F·‖δW‖_F)² — ‖X_kδW‖ at the rounding
level of the product, a scale-invariant threshold — or, for K > 1,
λ_min(C) ≤ √eps·λ_max(C) (the columns of δW numerically dependent, e.g. two
identical target columns; λ_min of the Gram matrix C is then known to fewer
than half the digits and C⁻¹ would amplify rounding by more than 1/√eps).
A zero step (a block already fitted exactly) is a skipped update.
W is updated in every case.

What the recursion guarantees (the paper): W₀ is the least-squares fit of the
first block (and p₀ = 0 there); with exact line search each W_k minimises the
current block's loss along p_k (so L_k(W_k) ≤ L_k(W_{k−1})); B_k satisfies the
secant equation B_k z_k = δW_k. It is NOT the least-squares fit of all blocks
seen (use KF4LLS for that): for q = 1 the exact step lands on the
least-squares fit of the current block alone.

Class-balanced rates (binary targets; 1 is positive; 0 or −1 negative): for a
block with m = p + n examples, p positive and n negative, each example's
contribution to the step gets its own rate, α_i = α_r·n/m if positive, α_r·p/m
if negative (α_p + α_n = α_r), i.e.

    δW_k = B_{k−1} X_kᵀ (A_k ∘ E),   A_k[i, j] = rate of example i for target j,

the per-example reading of "for each example, compute the weights increment"
that keeps (2.5–2.8) valid for the block: with equal rates it is the fixed-rate
step. The counts are the block's (``balance_counts="block"``, the paper's "given
m = p+n examples"), or all examples seen so far including the block
(``"cumulative"``; with block counts a block of a single class does not move W).
"""

from __future__ import annotations

import json

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import (
    SingularMatrixError,
    as_2d,
    column_rank,
    spd_solve,
    symmetrize,
)
from streamlsq.kernels.recursions.contract import BadRowError, Recursion, State
from streamlsq.kernels.recursions.declarations import BFGS_RATE as RATE
from streamlsq.kernels.recursions.declarations import DECLARATIONS

__all__ = [
    "IncrementalBFGS",
    "balanced_rates",
    "bfgs_inverse_update",
    "block_bfgs_inverse_update",
]


def bfgs_inverse_update(B, dW, z, curvature=None, floor: float = 0.0):
    """(2.8) for one target: returns (B_k, skipped).

    ``dW``, ``z`` are (q,) or (q, 1); ``curvature`` = zᵀδW (computed when None).
    Skipped (B returned unchanged) when the curvature ≤ ``floor`` (≥ 0).
    Uses the expanded form B − (δW uᵀ + u δWᵀ)/c + (1 + zᵀu/c) δWδWᵀ/c with
    u = Bz, algebraically identical to the product form (2.8), O(q²).
    """
    s = np.asarray(dW).reshape(-1)
    z = np.asarray(z).reshape(-1)
    c = float(z @ s) if curvature is None else float(curvature)
    if not c > max(floor, 0.0):
        return B, True
    u = B @ z
    B_new = B - (np.outer(s, u) + np.outer(u, s)) / c + ((1.0 + (z @ u) / c) / c) * np.outer(s, s)
    return symmetrize(B_new), False


def block_bfgs_inverse_update(B, dW, Z, curvature=None, floor: float = 0.0):
    """(2.8) with the K×K curvature matrix C = Zᵀ δW (multi-secant BFGS): (B_k, skipped).

    B_k = (I − δW C⁻¹Zᵀ) B (I − Z C⁻¹δWᵀ) + δW C⁻¹δWᵀ, evaluated as
    B − δW C⁻¹Uᵀ − U C⁻¹δWᵀ + δW C⁻¹(C + ZᵀU)C⁻¹δWᵀ with U = BZ and C⁻¹ applied
    by Cholesky solves. Skipped when λ_min(C) ≤ max(floor, √eps·λ_max(C)).
    Then B_k Z = δW (the secant equation for every column).
    """
    S = as_2d(np.asarray(dW))
    Z = as_2d(np.asarray(Z))
    C = Z.T @ S if curvature is None else np.asarray(curvature)
    C = symmetrize(np.atleast_2d(C))
    w = np.linalg.eigvalsh(C)
    # C's smallest eigenvalue carries an absolute error ~eps·λ_max: below
    # sqrt(eps)·λ_max the secant pairs are numerically dependent and C⁻¹ would
    # amplify rounding by more than 1/sqrt(eps) (vacuous for K = 1)
    if not (w[0] > max(floor, 0.0) and w[0] > np.sqrt(np.finfo(C.dtype).eps) * w[-1]):
        return B, True
    cf = sla.cho_factor(C, lower=True, check_finite=False)
    G = sla.cho_solve(cf, S.T, check_finite=False).T  # δW C⁻¹ (q×K)
    U = B @ Z
    B_new = B - G @ U.T - U @ G.T + G @ (C + Z.T @ U) @ G.T
    return symmetrize(B_new), False


def _binary_labels(Y: np.ndarray, row_offset: int = 0) -> np.ndarray:
    """Boolean 'positive' mask of binary targets coded {0, 1} or {−1, 1}; refuse others
    (:class:`~streamlsq.kernels.recursion.BadRowError` naming the first bad row)."""
    ok = (Y == 0) | (Y == 1) | (Y == -1)
    if not ok.all():
        r, j = (int(i) for i in np.argwhere(~ok)[0])
        value = Y[r, j].item()
        raise BadRowError(
            f"balanced rates need binary targets (0/1 or -1/1); Y has {value!r} at row "
            f"{r + row_offset}, target {j}",
            variable="Y", row=r + row_offset,
            reason=f"has {value!r} in target {j}: balanced rates need binary targets "
                   "(0/1 or -1/1)",
        )
    if (Y == 0).any() and (Y == -1).any():
        raise ValueError("balanced rates need one coding of the targets: 0/1 or -1/1, not both")
    return Y == 1


def _line_search_cut(X, B, E, P, XP) -> float:
    """The relative singular value of Xp below which the K×K line search takes a direction
    as dependent on the others: the rounding Xp = X·(B·(XᵀE)) carries, relative to its
    size, ε·‖X‖(‖B‖‖X‖‖E‖ + ‖P‖)/‖XP‖ (the error bound of the products, norm-wise), and
    never below lstsq's own max(m, K)·ε. Two columns of Xp that differ by less are the same
    direction: a step along their difference would be that rounding divided by its
    singular value (identical targets drifted apart, from 1e-16 to 3e-5 in three blocks,
    where a ratio of 9e-15 passed lstsq's cut)."""
    eps = float(np.finfo(X.dtype).eps)
    size = float(np.linalg.norm(XP))
    floor = eps * max(XP.shape)
    if size == 0.0:
        return floor
    nX = float(np.linalg.norm(X))
    bound = eps * nX * (float(np.linalg.norm(B)) * nX * float(np.linalg.norm(E))
                        + float(np.linalg.norm(P))) / size
    return max(floor, bound)


def balanced_rates(Y, rate: float, n_positive=None, n_negative=None) -> np.ndarray:
    """Per-example, per-target rates A (n, K): α_r·n/m for positives, α_r·p/m for negatives.

    p, n are the counts of positive / negative examples per target: those of
    ``Y`` unless ``n_positive``/``n_negative`` (K,) are given (e.g. cumulative
    counts); m = p + n. Binary targets coded 0/1 or −1/1 (1 is positive).
    """
    Y = as_2d(np.asarray(Y))
    pos = _binary_labels(Y)
    p = pos.sum(axis=0) if n_positive is None else np.asarray(n_positive)
    n = (~pos).sum(axis=0) if n_negative is None else np.asarray(n_negative)
    m = np.maximum(p + n, 1)
    alpha_pos = rate * n / m
    alpha_neg = rate * p / m
    return np.where(pos, alpha_pos[None, :], alpha_neg[None, :])


class IncrementalBFGS(Recursion):
    """Incremental BFGS regressor; see the module docstring for the equations.

    Parameters
    ----------
    rate : "exact" or float
        "exact": line search (2.4) on the block's loss; a float α_r > 0: fixed
        rate δW = α_r p (the reference rate of the balanced scheme).
    balanced : bool
        Class-balanced per-example rates from α_r (needs a float rate and
        binary targets).
    ridge : float ≥ 0
        δ used as H₀ + δI when the first block is rank deficient (recorded in
        the state as ``ridge_used``); 0 refuses such a block.
    balance_counts : "block" or "cumulative"
        Which counts p, n the balanced rates use.

    Notes
    -----
    State: ``W`` (q, K), ``B`` (q, q) (the inverse-Hessian approximation; zeros
    before the first block), ``rows``, ``blocks``, ``n_skipped`` (B updates
    skipped by the curvature safeguard), ``ridge_used`` (0/1) and, with
    balanced rates, ``n_positive``, ``n_negative`` (K,) counts seen so far.
    Arithmetic in the state's dtype (float64 by default, float32 accepted).

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import IncrementalBFGS
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3))
    >>> Y = X @ [[1.0], [0.0], [-2.0]]
    >>> rec = IncrementalBFGS(rate="exact")
    >>> state = rec.init(3, 1)
    >>> for a in range(0, 500, 100):
    ...     state = rec.update(state, X[a:a + 100], Y[a:a + 100])
    >>> bool(np.allclose(rec.coef(state).ravel(), [1.0, 0.0, -2.0]))  # noise-free: exact
    True
    """

    #: name, summary, description, examples, params (rate, balanced, ridge,
    #: balance_counts): see :mod:`.declarations`
    declaration = DECLARATIONS["bfgs"]

    def check_params(self) -> None:
        if self.balanced and self.rate == "exact":
            raise RATE.error(self.rate, "a number with balanced=True (balanced rates "
                                       "need a reference rate)")

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        dims = {
            "W": ("feature", "target"),
            "B": ("feature", "feature_"),
            "rows": (),
            "blocks": (),
            "n_skipped": (),
            "ridge_used": (),
        }
        if self.balanced:
            dims["n_positive"] = ("target",)
            dims["n_negative"] = ("target",)
        return dims

    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        if n_features < 1 or n_targets < 1:
            raise ValueError(
                f"n_features and n_targets must be >= 1, got {n_features}, {n_targets}"
            )
        dtype = np.dtype(dtype)
        if not np.issubdtype(dtype, np.floating):
            raise ValueError(f"dtype must be a floating type, got {dtype}")
        state = {
            "W": np.zeros((n_features, n_targets), dtype=dtype),
            "B": np.zeros((n_features, n_features), dtype=dtype),
            "rows": np.int64(0),
            "blocks": np.int64(0),
            "n_skipped": np.int64(0),
            "ridge_used": np.int64(0),
        }
        if self.balanced:
            state["n_positive"] = np.zeros(n_targets, dtype=np.int64)
            state["n_negative"] = np.zeros(n_targets, dtype=np.int64)
        return state

    def coef(self, state: State) -> np.ndarray:
        return state["W"]

    def n_skipped(self, state: State) -> int:
        """Number of B updates skipped by the curvature safeguard so far."""
        return int(state["n_skipped"])

    def ridge_used(self, state: State) -> bool:
        """Whether the first block needed the ridge start H₀ + δI."""
        return bool(state["ridge_used"])

    def state_diagnostics(self, state: State) -> dict:
        """``n_skipped``: B updates skipped by the curvature safeguard up to this state."""
        return {"n_skipped": np.int64(state["n_skipped"])}

    def result_attrs(self, state: State) -> dict:
        """``n_skipped`` (B updates skipped by the curvature safeguard) and ``ridge_used``."""
        return {"n_skipped": self.n_skipped(state), "ridge_used": self.ridge_used(state)}

    @classmethod
    def result_notes(cls, attrs: dict) -> list[str]:
        notes = [f"{attrs['n_skipped']} skipped B update(s)"]
        if attrs["ridge_used"]:
            ridge = json.loads(attrs["parameters"])["ridge"]
            notes.append(f"ridge start H0 + {ridge:g}*I used")
        return notes

    # -- the step ----------------------------------------------------------------
    def _check_block(self, state, X, Y):
        q, K = state["W"].shape
        dtype = state["W"].dtype
        X = np.asarray(X)
        Y = as_2d(np.asarray(Y))
        if X.ndim != 2 or X.shape[1] != q:
            raise ValueError(f"X must have shape (n, {q}), got {X.shape}")
        if Y.ndim != 2 or Y.shape[1] != K:
            raise ValueError(f"Y must have shape (n, {K}), got {Y.shape}")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same rows, got {X.shape[0]} and {Y.shape[0]}")
        for name, A in (("X", X), ("Y", Y)):
            if not np.issubdtype(A.dtype, np.number):
                raise ValueError(f"{name} must be numeric, got dtype {A.dtype}")
            finite = np.isfinite(A)
            if not finite.all():
                r, j = (int(i) for i in np.argwhere(~finite)[0])
                row = r + int(state["rows"])
                value = A[r, j].item()
                raise BadRowError(
                    f"{name} has a non-finite value ({value!r}) at row {row}, column {j}",
                    variable=name, row=row, reason=f"has a non-finite value in column {j}",
                )
        return X.astype(dtype, copy=False), Y.astype(dtype, copy=False)

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        X, Y = self._check_block(state, X, Y)
        new = dict(state)  # shallow: arrays are replaced, never modified in place
        new["rows"] = np.int64(state["rows"] + X.shape[0])
        new["blocks"] = np.int64(state["blocks"] + 1)
        if self.balanced:
            pos = _binary_labels(Y, int(state["rows"]))
            new["n_positive"] = state["n_positive"] + pos.sum(axis=0)
            new["n_negative"] = state["n_negative"] + (~pos).sum(axis=0)
        if int(state["blocks"]) == 0:
            W, B, used = self._first_block(X, Y)
            new.update(W=W, B=B, ridge_used=np.int64(used))
            return new

        W, B = state["W"], state["B"]
        q, K = W.shape
        E = Y - X @ W
        if self.balanced:
            if self.balance_counts == "block":
                A = balanced_rates(Y, self.rate)
            else:
                A = balanced_rates(Y, self.rate, new["n_positive"], new["n_negative"])
            dW = B @ (X.T @ (A.astype(X.dtype) * E))
        else:
            P = B @ (X.T @ E)  # (2.2)
            if self.rate != "exact":
                dW = self.rate * P
            elif K == 1:
                XP = X @ P
                curv = float((XP * XP).sum())
                # (2.4): α = pᵀXᵀE / pᵀXᵀXp; p = 0 (nothing to learn) gives no step
                alpha = float((XP * E).sum()) / curv if curv > 0 else 0.0
                dW = alpha * P
            else:
                # K×K line search: argmin_M ‖E − (X p) M‖_F, by least squares, the min-norm
                # M where pᵀXᵀXp is singular (identical target columns)
                XP = X @ P
                M = np.linalg.lstsq(XP, E, rcond=_line_search_cut(X, B, E, P, XP))[0]
                dW = P @ M
        XdW = X @ dW
        z = X.T @ XdW  # (2.6)
        C = XdW.T @ XdW  # zᵀδW = δWᵀXᵀXδW, PSD by construction (2.10)
        eps = np.finfo(X.dtype).eps
        floor = float(q * eps * np.linalg.norm(X) * np.linalg.norm(dW)) ** 2
        if K == 1:
            B_new, skipped = bfgs_inverse_update(B, dW, z, float(C[0, 0]), floor)
        else:
            B_new, skipped = block_bfgs_inverse_update(B, dW, z, C, floor)
        new.update(W=W + dW, B=B_new.astype(X.dtype, copy=False))
        new["n_skipped"] = np.int64(state["n_skipped"] + int(skipped))
        return new

    def _first_block(self, X, Y):
        """(1.2): W₀ = H₀⁻¹X₀ᵀY₀, B₀ = H₀⁻¹, from the Householder QR of [X₀ Y₀] (R with
        RᵀR = H₀: W₀ = R⁻¹z, B₀ = R⁻¹R⁻ᵀ, triangular solves), the rank of H₀ decided by
        :func:`~streamlsq.kernels.linalg.column_rank` on R, the rule of every least-squares
        solve; ridge start H₀ + δI when R is rank deficient and δ > 0, else refused naming
        the aliased columns."""
        q, K = X.shape[1], Y.shape[1]
        A = np.linalg.qr(np.concatenate([X, Y], axis=1), mode="r")
        if A.shape[0] < q + K:  # fewer rows than columns: the factor's missing rows are 0
            A = np.concatenate([A, np.zeros((q + K - A.shape[0], q + K), A.dtype)])
        R, z = A[:q, :q], A[:q, q:]
        found = column_rank(R, X.shape[0])
        if found.rank == q:
            eye = np.eye(q, dtype=R.dtype)
            R_inv = sla.solve_triangular(R, eye, lower=False, check_finite=False)
            W = sla.solve_triangular(R, z, lower=False, check_finite=False)
            return W.astype(X.dtype, copy=False), symmetrize(R_inv @ R_inv.T), False
        if self.ridge <= 0:
            raise SingularMatrixError(
                f"the first block ({X.shape[0]} rows, {q} features) has X₀ᵀX₀ of "
                f"column-equilibrated numerical rank {found.rank} < {q}: the initial "
                "least-squares fit (1.2) is not unique; pass ridge > 0 for the start "
                "H₀ + δI, or use a larger first block",
                rank=found.rank, size=q, aliased=found.aliased)
        # the ridge start: a Tikhonov term, not least squares (H₀ + δI is positive definite)
        H = symmetrize(X.T @ X) + self.ridge * np.eye(q, dtype=X.dtype)
        rhs = np.concatenate([X.T @ Y, np.eye(q, dtype=X.dtype)], axis=1)
        sol = spd_solve(H, rhs)
        return sol[:, :K], symmetrize(sol[:, K:]), True
