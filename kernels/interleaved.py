"""Interleaved KF4LLS: learn a mixture population from two others, block by block.

ALGORITHMS.md §2, papers/interleaved-kf4lls.txt §3 (John & Wu). Two training
populations, A ("birds": blocks Uᵢ, bᵢ) and B ("fish": Vᵢ, fᵢ), and a test
population C ("penguins": Zᵢ = αUᵢ + (1−α)Vᵢ, eq. (1); r_p = α r_b + (1−α) r_f, eq. (2)).

    Step 0(a)  centre every training block: subtract each column's mean from X
               and the mean from y, per block                   (:func:`center_block`)
    Step 0(b)  scale A-blocks by √α and B-blocks by √(1−α)      (:func:`population_weight`)
    Steps 1..m KF4LLS from H₀ = 0 on A₁, B₁, A₂, B₂, … (or B₁, A₁, …)   (:class:`InterleavedKF4LLS`)

After two steps (Lemma 1, eq. (3)) ψ₂ = G⁻¹(α UcᵀBc + (1−α) VcᵀFc) with
G = α UcᵀUc + (1−α) VcᵀVc (:func:`interleaved_closed_form`); more generally, with
H₀ = 0, ψ after any step is the weighted least-squares fit on the centred blocks
seen so far, so both starting orders agree at every even step.

The module also holds the estimation of α for real data (:func:`estimate_alpha_means`,
:func:`estimate_alpha_grid`), the diagnostics of the paper's Figure 1
(:func:`bias_per_coordinate`, :func:`test_mse`) and a vectorised Monte-Carlo kernel
of that study whose iterations can be split over workers and recombined
(:func:`interleaved_figure1`, :func:`figure1_sums`, :func:`combine_figure1_sums`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .kf4lls import KF4LLS
from .linalg import as_2d, check_finite, spd_solve, symmetrize
from .recursion import Recursion, State

__all__ = [
    "FIGURE1_SCHEMES",
    "AlphaEstimate",
    "ColumnMoments",
    "Figure1Curves",
    "Figure1Parameters",
    "Figure1Result",
    "Figure1Sums",
    "InterleavedKF4LLS",
    "bias_of_run",
    "bias_per_coordinate",
    "center_block",
    "column_moments",
    "combine_figure1_sums",
    "estimate_alpha_grid",
    "estimate_alpha_means",
    "figure1_curves",
    "figure1_draw",
    "figure1_expected_bias",
    "figure1_fit",
    "figure1_parameters",
    "figure1_population_blocks",
    "figure1_store_parameters",
    "figure1_sums",
    "interleaved_block_order",
    "interleaved_closed_form",
    "interleaved_figure1",
    "merge_column_moments",
    "population_of_step",
    "population_weight",
    "residual_factor",
    "residual_factor_mse",
    "residual_factor_summaries",
    "merge_residual_factors",
    "test_mse",
    "validate_alpha",
]

POPULATIONS = ("a", "b")


# ---------------------------------------------------------------------------
# α, populations, step parity
# ---------------------------------------------------------------------------
def validate_alpha(alpha) -> float:
    """Return α as a float after checking 0 ≤ α ≤ 1 (ValueError otherwise).

    α is the mixing weight of eq. (1)–(2): the test population is α·A + (1−α)·B.
    α = 1 means the test population *is* A: the B-blocks get weight √0 = 0 and
    contribute nothing, so the fit is the centred fit on the A-blocks alone;
    α = 0 is the mirror image (only the B-blocks count).
    """
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}") from None
    if not (0.0 <= a <= 1.0):  # also refuses NaN
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return a


def _check_population(population: str, name: str = "population") -> str:
    if population not in POPULATIONS:
        raise ValueError(f"{name} must be 'a' or 'b', got {population!r}")
    return population


def population_weight(alpha, population: str) -> float:
    """Step 0(b) scale of a block: √α for population ``"a"``, √(1−α) for ``"b"``."""
    a = validate_alpha(alpha)
    _check_population(population)
    return float(np.sqrt(a if population == "a" else 1.0 - a))


def population_of_step(step: int, start: str = "a") -> str:
    """Population of the block consumed at global step ``step`` (1-based) of the stream.

    Odd steps belong to ``start``, even steps to the other population
    (A₁, B₁, A₂, B₂, … when start = "a").
    """
    _check_population(start, "start")
    step = int(step)
    if step < 1:
        raise ValueError(f"step must be a positive (1-based) integer, got {step}")
    other = "b" if start == "a" else "a"
    return start if step % 2 == 1 else other


def interleaved_block_order(
    n_blocks_a: int, n_blocks_b: int, start: str = "a"
) -> list[tuple[str, int]]:
    """The alternating stream the engine feeds: [(population, block index), ...].

    Block indices are 0-based within each population. The stream alternates
    strictly, starting with ``start``, and stops when the population due next
    has no block left (a longer population's surplus blocks are not used: the
    step parity is what tells the kernel which weight a block gets).
    """
    _check_population(start, "start")
    counts = {"a": int(n_blocks_a), "b": int(n_blocks_b)}
    if min(counts.values()) < 0:
        raise ValueError(f"block counts must be >= 0, got a={n_blocks_a}, b={n_blocks_b}")
    order: list[tuple[str, int]] = []
    step = 1
    while True:
        pop = population_of_step(step, start)
        index = (step - 1) // 2
        if index >= counts[pop]:
            return order
        order.append((pop, index))
        step += 1


# ---------------------------------------------------------------------------
# Step 0(a): centring
# ---------------------------------------------------------------------------
def center_block(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 0(a): subtract each column's mean from X and the mean(s) from Y, per block.

    Returns new arrays (inputs untouched) of the same shapes and dtypes; Y may be
    (n,) or (n, K). Centring removes one degree of freedom: a centred block of
    n rows has rank ≤ n − 1 (a one-row block centres to zeros and carries no
    information), so with H₀ = 0 the first block needs at least q + 1 rows.
    """
    X = np.asarray(X)
    Y = np.asarray(Y)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D (rows, features) block, got shape {X.shape}")
    if Y.ndim not in (1, 2):
        raise ValueError(f"Y must be 1-D or 2-D (rows, targets), got shape {Y.shape}")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y has {Y.shape[0]} rows but X has {X.shape[0]}")
    if X.shape[0] == 0:
        raise ValueError("cannot centre an empty block (0 rows)")
    check_finite("X", X)
    check_finite("Y", Y)
    return X - X.mean(axis=0), Y - Y.mean(axis=0)


def interleaved_closed_form(Ua, ba, Vb, fb, alpha) -> np.ndarray:
    """ψ₂ of Lemma 1, eq. (3): G⁻¹(α UcᵀBc + (1−α) VcᵀFc), G = α UcᵀUc + (1−α) VcᵀVc.

    ``Ua, ba`` is one A-block, ``Vb, fb`` one B-block (raw; centred here, step 0(a)).
    The system is solved (Cholesky, :func:`~streamlsq.kernels.linalg.spd_solve`),
    never inverted. Returns (q,) for 1-D targets, (q, K) for 2-D.
    """
    a = validate_alpha(alpha)
    Uc, bc = center_block(Ua, ba)
    Vc, fc = center_block(Vb, fb)
    if Uc.shape[1] != Vc.shape[1]:
        raise ValueError(f"Ua has {Uc.shape[1]} columns but Vb has {Vc.shape[1]}")
    if bc.ndim != fc.ndim or bc.shape[1:] != fc.shape[1:]:
        raise ValueError(f"ba has target shape {bc.shape[1:]} but fb has {fc.shape[1:]}")
    G = symmetrize(a * (Uc.T @ Uc) + (1.0 - a) * (Vc.T @ Vc))
    rhs = a * (Uc.T @ bc) + (1.0 - a) * (Vc.T @ fc)
    return spd_solve(G, rhs)


# ---------------------------------------------------------------------------
# The recursion
# ---------------------------------------------------------------------------
class InterleavedKF4LLS(Recursion):
    """Interleaved KF4LLS (paper §3): centre, weight by population, KF4LLS step.

    The engine feeds ONE ordered stream of blocks that alternates populations:
    A₁, B₁, A₂, B₂, … (``start="a"``) or B₁, A₁, … (``start="b"``); see
    :func:`interleaved_block_order`. The state is the KF4LLS state (H, ψ, rows,
    blocks); the block counter fixes the step parity, hence the population and
    weight of the next block (:meth:`next_population`). Each ``update`` centres
    the block (step 0(a)), scales it by √α or √(1−α) (step 0(b)) and applies
    :func:`~streamlsq.kernels.kf4lls.kf4lls_update`.

    Parameters
    ----------
    alpha : float in [0, 1]
        Mixing weight of the test population (eq. (1)–(2)); see :func:`validate_alpha`.
        A population with weight 0 contributes nothing; with ``ridge=0`` the
        stream may then not start with it (H₁ would be 0), which is refused.
    start : {"a", "b"}
        Population of the first block.
    ridge : float, default 0
        δ of a ridge start H₀ = δI (0 is the paper's H₀ = 0).
    coef0 : array or None
        ψ₀; irrelevant when ridge = 0.

    The scan form is supported: a centred, weighted block still enters only
    through its sums. A summary keeps the sums of the blocks at odd and at even
    positions of its interval separately (unweighted), and :meth:`scan` applies
    the weights from the global parity it tracks, so ``summarize`` needs no
    knowledge of where its piece sits in the stream.
    """

    name = "interleaved-kf4lls"
    supports_scan = True

    def __init__(self, alpha, start: str = "a", ridge: float = 0.0, coef0=None):
        self.alpha = validate_alpha(alpha)
        self.start = _check_population(start, "start")
        self._kf = KF4LLS(ridge=ridge, coef0=coef0)
        self.ridge = self._kf.ridge
        if self.ridge == 0.0 and population_weight(self.alpha, self.start) == 0.0:
            raise ValueError(
                f"alpha={self.alpha} gives population {self.start!r} weight 0, so a stream "
                f"starting with it leaves H_1 = 0 (singular): use start="
                f"{'b' if self.start == 'a' else 'a'!r} or ridge > 0"
            )

    def get_params(self) -> dict:
        return {"alpha": self.alpha, "start": self.start, "ridge": self.ridge}

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        return self._kf.state_dims()

    # -- parity ------------------------------------------------------------
    def next_population(self, state: State) -> str:
        """Population ("a" or "b") the next block of the stream must belong to."""
        return population_of_step(int(state["blocks"]) + 1, self.start)

    def step_weight(self, step: int) -> float:
        """Step 0(b) weight of the block at global step ``step`` (1-based)."""
        return population_weight(self.alpha, population_of_step(step, self.start))

    # -- sequential form ---------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        return self._kf.init(n_features, n_targets, dtype)

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        Xc, Yc = center_block(X, as_2d(Y))
        w = self.step_weight(int(state["blocks"]) + 1)
        # √w scales rows, so the step adds w²·XcᵀXc to H and w²·XcᵀYc to Hψ.
        return self._kf.update(state, w * Xc, w * Yc)

    def coef(self, state: State) -> np.ndarray:
        return state["psi"]

    # -- information (scan) form -------------------------------------------
    def to_info(self, state: State) -> State:
        """(H, ψ) → (H, h = Hψ), as :meth:`KF4LLS.to_info`."""
        return self._kf.to_info(state)

    def finish(self, info: State) -> State:
        """ψ = H⁻¹h at one step (a solve), as :meth:`KF4LLS.finish`."""
        return self._kf.finish(info)

    def summarize(
        self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray, cuts: np.ndarray
    ) -> list[State]:
        """Centred block sums of one piece, one summary per interval between cuts.

        ``edges`` are the piece's local block offsets, ``cuts`` increasing block
        counts (last = number of blocks) at which an interval ends. A summary
        holds ``G_odd, b_odd`` (Σ XcᵀXc, Σ XcᵀYc over the interval's 1st, 3rd, …
        blocks), ``G_even, b_even`` (2nd, 4th, …), ``blocks`` and ``rows``.
        """
        X = np.asarray(X)
        Y = np.asarray(Y)
        check_finite("X", X)
        check_finite("Y", Y)
        edges = np.asarray(edges, dtype=np.int64)
        out = []
        start = 0
        for c in cuts:
            c = int(c)
            a, b = int(edges[start]), int(edges[c])
            counts = np.diff(edges[start : c + 1])
            if c <= start or (counts < 1).any():
                raise ValueError(
                    f"cuts must be increasing and blocks non-empty (interval ending at {c})"
                )
            Xs, Ys = X[a:b], Y[a:b]
            offsets = edges[start:c] - a
            n_rows = counts.astype(X.dtype)  # keep float32 pieces in float32
            # Per-block centring, vectorised: block means broadcast back to rows.
            Xm = np.add.reduceat(Xs, offsets, axis=0) / n_rows[:, None]
            Xc = Xs - np.repeat(Xm, counts, axis=0)
            Ym = np.add.reduceat(Ys, offsets, axis=0)
            Ym = Ym / (n_rows[:, None] if Ys.ndim == 2 else n_rows)
            Yc = Ys - np.repeat(Ym, counts, axis=0)
            odd = np.repeat(np.arange(c - start) % 2 == 0, counts)  # 1st, 3rd, ... block
            Xo, Xe = Xc[odd], Xc[~odd]
            out.append(
                {
                    "G_odd": symmetrize(Xo.T @ Xo),
                    "b_odd": Xo.T @ Yc[odd],
                    "G_even": symmetrize(Xe.T @ Xe),
                    "b_even": Xe.T @ Yc[~odd],
                    "blocks": np.int64(c - start),
                    "rows": np.int64(b - a),
                }
            )
            start = c
        return out

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        """In-order prefix H ← H + w₁²G_odd + w₂²G_even (h likewise) after each summary.

        w₁ is the weight of the global step of the summary's first block (from
        the running block count), w₂ that of the step after it.
        """
        H, h = info["H"], info["h"]
        rows, blocks = int(info["rows"]), int(info["blocks"])
        out = []
        for s in summaries:
            w_odd = self.step_weight(blocks + 1) ** 2
            w_even = self.step_weight(blocks + 2) ** 2
            H = H + (w_odd * s["G_odd"] + w_even * s["G_even"]).astype(H.dtype, copy=False)
            h = h + (w_odd * s["b_odd"] + w_even * s["b_even"]).astype(h.dtype, copy=False)
            rows += int(s["rows"])
            blocks += int(s["blocks"])
            out.append({"H": H, "h": h, "rows": np.int64(rows), "blocks": np.int64(blocks)})
        return out


# ---------------------------------------------------------------------------
# Estimating α on real data
# ---------------------------------------------------------------------------
class ColumnMoments(NamedTuple):
    """Per-column count, mean and sum of squared deviations (m2) of one population.

    Mergeable across chunks with :func:`merge_column_moments` (Chan et al.'s
    pairwise update), so the pipeline computes it as a chunked reduction.
    """

    count: int
    mean: np.ndarray
    m2: np.ndarray

    @property
    def var(self) -> np.ndarray:
        """Unbiased per-column variance m2 / (count − 1)."""
        if self.count < 2:
            raise ValueError(f"a variance needs at least 2 rows, got count={self.count}")
        return self.m2 / (self.count - 1)


def column_moments(X: np.ndarray) -> ColumnMoments:
    """:class:`ColumnMoments` of the rows of X (n, q), computed in float64."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X must be a non-empty 2-D (rows, features) array, got {X.shape}")
    check_finite("X", X)
    mean = X.mean(axis=0)
    return ColumnMoments(int(X.shape[0]), mean, ((X - mean) ** 2).sum(axis=0))


def merge_column_moments(a: ColumnMoments, b: ColumnMoments) -> ColumnMoments:
    """Moments of the union of two row sets (Chan, Golub & LeVeque pairwise formula)."""
    if np.shape(a.mean) != np.shape(b.mean):
        raise ValueError(f"moments have {np.shape(a.mean)} and {np.shape(b.mean)} columns")
    if a.count == 0:
        return b
    if b.count == 0:
        return a
    n = a.count + b.count
    delta = np.asarray(b.mean) - np.asarray(a.mean)
    mean = a.mean + delta * (b.count / n)
    m2 = a.m2 + b.m2 + delta**2 * (a.count * b.count / n)
    return ColumnMoments(n, mean, m2)


@dataclass
class AlphaEstimate:
    """Estimated mixing weight: one value per column and one combined scalar.

    ``per_column[j]`` estimates αⱼ for feature j; ``combined`` is a single α in
    [0, 1] for :class:`InterleavedKF4LLS` (how it is combined depends on
    ``method``). For the grid method, ``grid`` and ``criterion`` (q, len(grid))
    hold the objective that was minimised.
    """

    per_column: np.ndarray
    combined: float
    method: str
    grid: np.ndarray | None = None
    criterion: np.ndarray | None = None


def _mean_vector(name: str, v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of column means, got {v.shape}")
    check_finite(name, v)
    return v


def estimate_alpha_means(mean_U, mean_V, mean_Z) -> AlphaEstimate:
    """α from the column means of the three populations (eq. (1) in expectation).

    Per column αⱼ = (mean Zⱼ − mean Vⱼ)/(mean Uⱼ − mean Vⱼ); these are returned
    as they are (sampling noise can put them slightly outside [0, 1]).
    Combined: the least-squares α of all columns together,
    argmin_α Σⱼ (eⱼ − α dⱼ)² = Σ dⱼeⱼ / Σ dⱼ² with dⱼ = mean Uⱼ − mean Vⱼ and
    eⱼ = mean Zⱼ − mean Vⱼ (columns whose populations are far apart weigh more),
    clipped to [0, 1].

    Raises ValueError naming the column when mean Uⱼ and mean Vⱼ coincide to
    working precision (|dⱼ| ≤ 4·eps·max(|mean Uⱼ|, |mean Vⱼ|)): the means do not
    identify α there; use :func:`estimate_alpha_grid`, which also uses variances.
    """
    mU = _mean_vector("mean_U", mean_U)
    mV = _mean_vector("mean_V", mean_V)
    mZ = _mean_vector("mean_Z", mean_Z)
    if not (mU.shape == mV.shape == mZ.shape):
        raise ValueError(
            f"mean_U, mean_V, mean_Z must have the same length, got {mU.size}, {mV.size}, {mZ.size}"
        )
    d = mU - mV
    e = mZ - mV
    tie = np.abs(d) <= 4 * np.finfo(np.float64).eps * np.maximum(np.abs(mU), np.abs(mV))
    if tie.any():
        j = int(np.flatnonzero(tie)[0])
        raise ValueError(
            f"mean_U and mean_V coincide in column {j} ({mU[j]!r}): the means do not "
            f"identify alpha there; drop the column or use estimate_alpha_grid"
        )
    per_column = e / d
    combined = float(np.clip(np.dot(d, e) / np.dot(d, d), 0.0, 1.0))
    return AlphaEstimate(per_column=per_column, combined=combined, method="means")


def estimate_alpha_grid(
    moments_U: ColumnMoments,
    moments_V: ColumnMoments,
    moments_Z: ColumnMoments,
    grid_size: int = 1001,
) -> AlphaEstimate:
    """α per column by grid search on [0, 1] (the paper's suggestion, §3).

    The paper names a per-column grid search on the unit interval but no
    criterion. Implemented here: a minimum-distance fit of the first two
    moments implied by eq. (1) for rows U, V drawn independently,

        mean Zⱼ = α mean Uⱼ + (1−α) mean Vⱼ ,  var Zⱼ = α² var Uⱼ + (1−α)² var Vⱼ ,

    minimising per column, over α on an even grid of ``grid_size`` points,

        Qⱼ(α) = (m̂Zⱼ − m̃ⱼ(α))² / s²ₘ(α) + (v̂Zⱼ − ṽⱼ(α))² / s²ᵥ(α)

    with the sampling variances of the three populations' estimates at that α
    (s²ₘ = vZ/nZ + α² vU/nU + (1−α)² vV/nV; s²ᵥ from the Gaussian approximation
    var(v̂) ≈ 2v²/(n−1), likewise weighted by α⁴ and (1−α)⁴). Qⱼ is a χ²-type
    statistic with two terms. Unlike the ratio of means it still identifies α
    when the two means coincide but the variances differ. Combined: the grid
    point minimising Σⱼ Qⱼ(α) (one α for all columns, as in eq. (1)).

    Needs ≥ 2 rows per population. Raises ValueError naming the column when Qⱼ
    is flat on the grid (that column carries no information about α).
    """
    grid_size = int(grid_size)
    if grid_size < 2:
        raise ValueError(f"grid_size must be at least 2, got {grid_size}")
    names = ("moments_U", "moments_V", "moments_Z")
    mom = (moments_U, moments_V, moments_Z)
    for name, m in zip(names, mom, strict=True):
        if not isinstance(m, ColumnMoments):
            raise ValueError(f"{name} must be a ColumnMoments (see column_moments)")
        if m.count < 2:
            raise ValueError(f"{name} needs at least 2 rows, got count={m.count}")
        _mean_vector(f"{name}.mean", m.mean)
        _mean_vector(f"{name}.m2", m.m2)
    if not (np.shape(moments_U.mean) == np.shape(moments_V.mean) == np.shape(moments_Z.mean)):
        raise ValueError("moments_U, moments_V, moments_Z must have the same number of columns")
    (nU, mU, vU), (nV, mV, vV), (nZ, mZ, vZ) = ((m.count, m.mean, m.var) for m in mom)
    grid = np.linspace(0.0, 1.0, grid_size)
    a = grid[None, :]
    col = (slice(None), None)
    mean_model = a * mU[col] + (1 - a) * mV[col]
    var_model = a**2 * vU[col] + (1 - a) ** 2 * vV[col]
    s2_mean = vZ[col] / nZ + a**2 * vU[col] / nU + (1 - a) ** 2 * vV[col] / nV
    s2_var = (
        2 * vZ[col] ** 2 / (nZ - 1)
        + a**4 * 2 * vU[col] ** 2 / (nU - 1)
        + (1 - a) ** 4 * 2 * vV[col] ** 2 / (nV - 1)
    )
    # A constant column has zero sampling variance: floor it so an exact match
    # scores 0 and a mismatch scores high, instead of 0/0.
    tiny = np.finfo(np.float64).tiny
    Q = (mZ[col] - mean_model) ** 2 / np.maximum(s2_mean, tiny)
    Q = Q + (vZ[col] - var_model) ** 2 / np.maximum(s2_var, tiny)
    spread = Q.max(axis=1) - Q.min(axis=1)
    flat = spread <= 1e-12 * np.maximum(Q.max(axis=1), 1.0)
    if flat.any():
        j = int(np.flatnonzero(flat)[0])
        raise ValueError(f"column {j} does not identify alpha: the grid criterion is flat")
    per_column = grid[np.argmin(Q, axis=1)]
    combined = float(grid[np.argmin(Q.sum(axis=0))])
    return AlphaEstimate(
        per_column=per_column, combined=combined, method="grid", grid=grid, criterion=Q
    )


# ---------------------------------------------------------------------------
# Diagnostics of Figure 1
# ---------------------------------------------------------------------------
def bias_per_coordinate(psi_mean, r_p) -> np.ndarray:
    """|ψ̄ − r_p| per coordinate (ψ̄: the Monte-Carlo mean of ψ at one step).

    Figure 1's bias is the mean of this over the coordinates. Shapes (q,) and
    (q, 1) are interchangeable; the result has the shape of ``psi_mean``.
    """
    psi = np.asarray(psi_mean, dtype=np.float64)
    r = np.asarray(r_p, dtype=np.float64)
    if psi.size != r.size or psi.size == 0:
        raise ValueError(f"psi_mean has shape {psi.shape} but r_p has shape {r.shape}")
    check_finite("psi_mean", psi)
    check_finite("r_p", r)
    return np.abs(psi - r.reshape(psi.shape))


def test_mse(psi, Z_blocks, p_blocks) -> float:
    """Mean squared residual of raw test blocks 1..t under ψ (Figure 1, MSE panel).

    ``Z_blocks`` is a sequence of t arrays (nᵢ, q) (or a (t, n, q) array),
    ``p_blocks`` the matching targets (nᵢ,) or (nᵢ, K); ψ is (q,) or (q, K).
    Returns Σᵢ‖pᵢ − Zᵢψ‖² / Σᵢ nᵢK, computed in float64.
    """
    psi = np.asarray(psi, dtype=np.float64)
    if len(Z_blocks) != len(p_blocks) or len(Z_blocks) == 0:
        raise ValueError(
            f"need as many Z_blocks as p_blocks (at least 1), got {len(Z_blocks)} "
            f"and {len(p_blocks)}"
        )
    sse, count = 0.0, 0
    for i, (Z, p) in enumerate(zip(Z_blocks, p_blocks, strict=True)):
        Z = np.asarray(Z, dtype=np.float64)
        p = np.asarray(p, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != psi.shape[0] or p.shape[0] != Z.shape[0]:
            raise ValueError(
                f"test block {i}: Z has shape {Z.shape}, p has shape {p.shape}, "
                f"psi has shape {psi.shape}"
            )
        check_finite(f"Z_blocks[{i}]", Z)
        check_finite(f"p_blocks[{i}]", p)
        pred = Z @ psi
        if pred.size != p.size:
            raise ValueError(f"test block {i}: p has shape {p.shape}, Z @ psi has {pred.shape}")
        resid = p - pred.reshape(p.shape)
        sse += float(np.sum(resid**2))
        count += resid.size
    return sse / count


test_mse.__test__ = False  # a library function, not a pytest test


def bias_of_run(psi, r_p) -> float:
    """Figure 1's bias for a single run: the mean over coordinates of |ψ − r_p|.

    (The figure averages ψ over Monte-Carlo iterations first,
    :func:`bias_per_coordinate`; one run of the pipeline has one ψ per step.)
    With K targets the mean runs over the q·K entries.
    """
    return float(bias_per_coordinate(psi, r_p).mean())


# ---------------------------------------------------------------------------
# Test MSE over a stream: a QR factor of the test rows instead of the rows
# ---------------------------------------------------------------------------
def residual_factor(Z: np.ndarray, P: np.ndarray) -> np.ndarray:
    """R ((q+K)×(q+K), upper triangular) with ‖P − Zψ‖²_F = ‖R [ψ; −I]‖²_F for every ψ.

    R is the triangular factor of the QR decomposition of the rows [Z P] (padded
    with zero rows when there are fewer than q + K rows), computed in float64. It
    is a sufficient statistic of a set of test rows for :func:`test_mse`, with
    the rounding of a QR rather than of the normal equations: the squared
    residual is evaluated as the norm of R[ψ; −I], so a small MSE next to large
    targets loses ~√ of the digits the expanded form pᵀp − 2ψᵀZᵀp + ψᵀZᵀZψ would.
    """
    Z = np.asarray(Z, dtype=np.float64)
    P = as_2d(np.asarray(P, dtype=np.float64))
    if Z.ndim != 2 or P.shape[0] != Z.shape[0]:
        raise ValueError(f"Z has shape {Z.shape} but P has shape {P.shape}")
    check_finite("Z", Z)
    check_finite("P", P)
    s = Z.shape[1] + P.shape[1]
    R = np.linalg.qr(np.hstack([Z, P]), mode="r")
    if R.shape[0] < s:
        R = np.vstack([R, np.zeros((s - R.shape[0], s))])
    return R


def merge_residual_factors(R1: np.ndarray, R2: np.ndarray) -> np.ndarray:
    """The :func:`residual_factor` of the union of two row sets, from their factors."""
    R1, R2 = np.asarray(R1, dtype=np.float64), np.asarray(R2, dtype=np.float64)
    if R1.shape != R2.shape or R1.ndim != 2 or R1.shape[0] != R1.shape[1]:
        raise ValueError(f"factors must be square and alike, got {R1.shape} and {R2.shape}")
    return np.linalg.qr(np.vstack([R1, R2]), mode="r")


def residual_factor_summaries(
    Z: np.ndarray, P: np.ndarray, edges: np.ndarray, cuts: np.ndarray
) -> list[dict]:
    """Residual factors of consecutive intervals of test blocks (one piece of a stream).

    ``edges`` are the piece's local block offsets, ``cuts`` increasing block counts
    (the last one = the number of blocks) at which an interval ends. Returns one
    ``{"R", "rows", "blocks"}`` per interval; combine them in order with
    :func:`merge_residual_factors` to get the factor of test blocks 1..t.
    """
    edges = np.asarray(edges, dtype=np.int64)
    out = []
    start = 0
    for c in cuts:
        c = int(c)
        if c <= start or c >= len(edges):
            raise ValueError(f"cuts must be increasing block counts <= {len(edges) - 1}")
        a, b = int(edges[start]), int(edges[c])
        out.append({"R": residual_factor(Z[a:b], P[a:b]), "rows": np.int64(b - a),
                    "blocks": np.int64(c - start)})
        start = c
    return out


def residual_factor_mse(psi, R: np.ndarray, rows: int) -> float:
    """:func:`test_mse` of ψ on the rows summarised by ``R`` (``rows`` of them):
    ‖R [ψ; −I]‖²_F / (rows·K), in float64."""
    psi = as_2d(np.asarray(psi, dtype=np.float64))
    R = np.asarray(R, dtype=np.float64)
    q, K = psi.shape
    if R.shape != (q + K, q + K):
        raise ValueError(f"R has shape {R.shape}, expected ({q + K}, {q + K}) for psi {psi.shape}")
    if int(rows) < 1:
        raise ValueError(f"rows must be a positive integer, got {rows}")
    check_finite("psi", psi)
    V = np.vstack([psi, -np.eye(K)])
    return float(np.sum((R @ V) ** 2) / (int(rows) * K))


# ---------------------------------------------------------------------------
# Figure 1: vectorised Monte Carlo
# ---------------------------------------------------------------------------
#: the five training schemes of Figure 1, in the order of every (scheme, ...) axis
FIGURE1_SCHEMES = (
    "birds",
    "fish",
    "penguins",
    "interleaved_birds_first",
    "interleaved_fish_first",
)


@dataclass(frozen=True)
class Figure1Parameters:
    """The settings of the Figure 1 study, fixed for all iterations.

    ``r_b, r_f`` (q,), ``mu1, mu2`` scalars (rows of U ~ N(μ₁1, I), V ~ N(μ₂1, I)).
    """

    alpha: float
    n: int
    q: int
    steps: int
    r_b: np.ndarray
    r_f: np.ndarray
    mu1: float
    mu2: float

    @property
    def r_p(self) -> np.ndarray:
        """r_p = α r_b + (1−α) r_f (eq. (2))."""
        return self.alpha * self.r_b + (1 - self.alpha) * self.r_f

    @property
    def D(self) -> float:
        """D = mean |r_b − r_f|, the unit of the expected bias curves."""
        return float(np.mean(np.abs(self.r_b - self.r_f)))


def figure1_parameters(
    rng: np.random.Generator,
    alpha: float = 0.25,
    n: int = 100,
    q: int = 6,
    steps: int = 6,
    r_b=None,
    r_f=None,
    mu1=None,
    mu2=None,
) -> Figure1Parameters:
    """Draw the fixed settings ONCE: r_b, r_f ~ U(−5, 5)^q, then μ₁, μ₂ ~ U(−10, 10).

    All four are always drawn, in that order, and a given value replaces its
    draw, so overriding one leaves the others as the seed made them.
    Requires 0 < α < 1 (α = 0 or 1 leaves one interleaved scheme with a
    zero first block) and n ≥ q + 2 (a centred block must have rank q).
    """
    a = validate_alpha(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"the Figure 1 study needs 0 < alpha < 1, got {alpha!r}")
    n, q, steps = int(n), int(q), int(steps)
    if q < 1:
        raise ValueError(f"q must be a positive integer, got {q}")
    if n < q + 2:
        raise ValueError(f"n must be at least q + 2 = {q + 2} rows per block, got {n}")
    if steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    draws = {
        "r_b": rng.uniform(-5.0, 5.0, q),
        "r_f": rng.uniform(-5.0, 5.0, q),
        "mu1": float(rng.uniform(-10.0, 10.0)),
        "mu2": float(rng.uniform(-10.0, 10.0)),
    }
    for name, given in (("r_b", r_b), ("r_f", r_f)):
        if given is not None:
            v = np.asarray(given, dtype=np.float64)
            if v.shape != (q,):
                raise ValueError(f"{name} must have shape ({q},), got {v.shape}")
            check_finite(name, v)
            draws[name] = v.copy()
    for name, given in (("mu1", mu1), ("mu2", mu2)):
        if given is not None:
            v = float(given)
            if not np.isfinite(v):
                raise ValueError(f"{name} must be finite, got {given!r}")
            draws[name] = v
    return Figure1Parameters(alpha=a, n=n, q=q, steps=steps, **draws)


@dataclass
class Figure1Sums:
    """Per-(scheme, step) sums over Monte-Carlo iterations; add batches with ``+``.

    Deviations are taken from r_p (d = ψ − r_p) so that the sums of squares
    do not cancel. Shapes: ``dpsi_sum``, ``dpsi_sq_sum`` (5, steps, q);
    ``mse_sum``, ``mse_sq_sum`` (5, steps); ``count`` the number of iterations.
    """

    count: int
    dpsi_sum: np.ndarray
    dpsi_sq_sum: np.ndarray
    mse_sum: np.ndarray
    mse_sq_sum: np.ndarray

    @classmethod
    def zeros(cls, steps: int, q: int) -> Figure1Sums:
        S = len(FIGURE1_SCHEMES)
        return cls(
            0,
            np.zeros((S, steps, q)),
            np.zeros((S, steps, q)),
            np.zeros((S, steps)),
            np.zeros((S, steps)),
        )

    def __add__(self, other: Figure1Sums) -> Figure1Sums:
        if self.dpsi_sum.shape != other.dpsi_sum.shape:
            raise ValueError(
                f"cannot combine sums of shapes {self.dpsi_sum.shape} and "
                f"{other.dpsi_sum.shape} (different steps or q)"
            )
        return Figure1Sums(
            self.count + other.count,
            self.dpsi_sum + other.dpsi_sum,
            self.dpsi_sq_sum + other.dpsi_sq_sum,
            self.mse_sum + other.mse_sum,
            self.mse_sq_sum + other.mse_sq_sum,
        )


def figure1_draw(rng: np.random.Generator, n_iter: int, params: Figure1Parameters) -> dict:
    """Fresh rows for ``n_iter`` iterations (leading axis), ``steps`` blocks each.

    Per iteration, one standard-normal array (steps, n, 2q + 3) is drawn —
    U − μ₁, V − μ₂ and the three noises — so iteration i always gets the same
    numbers from the same generator state, however iterations are batched.
    Returns U, V, Z (n_iter, steps, n, q) and b, f, p (n_iter, steps, n) with
    b = U r_b + ε_b, f = V r_f + ε_f, Z = αU + (1−α)V, p = Z r_p + ε_p.
    """
    n_iter = int(n_iter)
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    T, n, q, a = params.steps, params.n, params.q, params.alpha
    E = rng.standard_normal((n_iter, T, n, 2 * q + 3))
    U = E[..., :q] + params.mu1
    V = E[..., q : 2 * q] + params.mu2
    Z = a * U + (1 - a) * V
    return {
        "U": U,
        "V": V,
        "Z": Z,
        "b": U @ params.r_b + E[..., 2 * q],
        "f": V @ params.r_f + E[..., 2 * q + 1],
        "p": Z @ params.r_p + E[..., 2 * q + 2],
    }


#: tags of the generator keys of a simulated Figure 1 store (fixed key positions: see lms.py)
_FIGURE1_STORE_PARAMETERS_TAG = 0x49464731
_FIGURE1_STORE_BLOCK_TAG = 0x49464732


def figure1_store_parameters(
    seed: int, alpha: float = 0.25, n: int = 100, q: int = 6, steps: int = 6
) -> Figure1Parameters:
    """The fixed settings (r_b, r_f, μ₁, μ₂) of a simulated Figure 1 store, from ``seed``.

    :func:`figure1_parameters` with ``default_rng([seed, tag])``: every worker that
    writes part of the store computes the same settings.
    """
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    rng = np.random.default_rng([seed, _FIGURE1_STORE_PARAMETERS_TAG])
    return figure1_parameters(rng, alpha, n, q, steps)


def figure1_population_blocks(
    seed: int, params: Figure1Parameters, j0: int, j1: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Blocks ``j0..j1−1`` (0-based) of the three populations of a simulated store.

    The Figure 1 generating process (ALGORITHMS.md §2) for one iteration, block
    by block: block j comes from ``default_rng([seed, tag, j])`` through
    :func:`figure1_draw` (one iteration, one step), so a block's numbers depend on
    (seed, j) only, never on which blocks are generated together. Returns
    ``{"a": (U, b), "b": (V, f), "c": (Z, p)}`` with X arrays ((j1−j0)·n, q) and
    targets ((j1−j0)·n, 1): A birds U ~ N(μ₁1, I), b = U r_b + ε; B fish
    V ~ N(μ₂1, I), f = V r_f + ε; C penguins Z = αU + (1−α)V (the same rows of U
    and V, eq. (1)), p = Z r_p + ε.
    """
    seed, j0, j1 = int(seed), int(j0), int(j1)
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    if not 0 <= j0 <= j1 <= params.steps:
        raise ValueError(f"blocks {j0}..{j1} outside 0..{params.steps}")
    one = Figure1Parameters(params.alpha, params.n, params.q, 1, params.r_b, params.r_f,
                            params.mu1, params.mu2)
    draws = [figure1_draw(np.random.default_rng([seed, _FIGURE1_STORE_BLOCK_TAG, j]), 1, one)
             for j in range(j0, j1)]

    def rows(name, target):
        if not draws:
            shape = (0, params.q) if not target else (0, 1)
            return np.zeros(shape)
        parts = [d[name][0, 0] for d in draws]
        return np.concatenate(parts)[:, None] if target else np.concatenate(parts)

    return {
        "a": (rows("U", False), rows("b", True)),
        "b": (rows("V", False), rows("f", True)),
        "c": (rows("Z", False), rows("p", True)),
    }


def _batched_kf4lls(Xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    """KF4LLS from H₀ = 0 on stacks of independent problems; ψ after each block.

    ``Xs[t]`` is (N, n, q), ``ys[t]`` (N, n). The same step as
    :func:`~streamlsq.kernels.kf4lls.kf4lls_update`, batched over the leading
    axis with ``np.linalg.solve`` on the stack (LU; H is SPD here because every
    first block has n ≥ q + 2 rows from a continuous distribution).
    """
    N, _, q = Xs[0].shape
    H = np.zeros((N, q, q))
    psi = np.zeros((N, q))
    out = np.empty((N, len(Xs), q))
    for t, (X, y) in enumerate(zip(Xs, ys, strict=True)):
        Xt = np.swapaxes(X, 1, 2)
        H = H + Xt @ X
        H = 0.5 * (H + np.swapaxes(H, 1, 2))
        resid = y - (X @ psi[..., None])[..., 0]
        psi = psi + np.linalg.solve(H, Xt @ resid[..., None])[..., 0]
        out[:, t] = psi
    return out


def figure1_fit(data: dict, params: Figure1Parameters) -> tuple[np.ndarray, np.ndarray]:
    """ψ and test MSE of the five schemes for every iteration and step.

    Returns ``psi`` (N, 5, steps, q) and ``mse`` (N, 5, steps), schemes in the
    order of :data:`FIGURE1_SCHEMES`. Birds/fish/penguins: KF4LLS on the raw
    blocks 1..steps; interleaved: blocks 1..⌈steps/2⌉ of U and V (the same rows
    as the single-population schemes), centred and scaled, alternating.
    MSE at step t: mean squared residual of raw penguin blocks 1..t under ψ_t.
    """
    U, V, Z, b, f, p = (data[k] for k in ("U", "V", "Z", "b", "f", "p"))
    N, T = U.shape[:2]
    a = params.alpha
    wa, wb = np.sqrt(a), np.sqrt(1 - a)
    Uc = wa * (U - U.mean(axis=2, keepdims=True))
    bc = wa * (b - b.mean(axis=2, keepdims=True))
    Vc = wb * (V - V.mean(axis=2, keepdims=True))
    fc = wb * (f - f.mean(axis=2, keepdims=True))
    half = [(t // 2) for t in range(T)]  # block index (0-based) of step t+1 in its population

    def interleaved(first, second):
        (X1, y1), (X2, y2) = first, second
        Xs = [(X1 if t % 2 == 0 else X2)[:, half[t]] for t in range(T)]
        ys = [(y1 if t % 2 == 0 else y2)[:, half[t]] for t in range(T)]
        return _batched_kf4lls(Xs, ys)

    psi = np.stack(
        [
            _batched_kf4lls([U[:, t] for t in range(T)], [b[:, t] for t in range(T)]),
            _batched_kf4lls([V[:, t] for t in range(T)], [f[:, t] for t in range(T)]),
            _batched_kf4lls([Z[:, t] for t in range(T)], [p[:, t] for t in range(T)]),
            interleaved((Uc, bc), (Vc, fc)),
            interleaved((Vc, fc), (Uc, bc)),
        ],
        axis=1,
    )
    mse = np.empty((N, len(FIGURE1_SCHEMES), T))
    n = U.shape[2]
    for t in range(T):
        Zt = Z[:, : t + 1].reshape(N, (t + 1) * n, -1)  # raw penguin blocks 1..t+1
        pt = p[:, : t + 1].reshape(N, (t + 1) * n)
        pred = Zt @ np.swapaxes(psi[:, :, t], 1, 2)  # (N, rows, schemes)
        mse[:, :, t] = np.mean((pt[..., None] - pred) ** 2, axis=1)
    return psi, mse


def figure1_sums(
    rng: np.random.Generator, n_iter: int, params: Figure1Parameters, batch_size: int = 256
) -> Figure1Sums:
    """Simulate ``n_iter`` iterations (vectorised, ``batch_size`` at a time) and sum them.

    This is the unit of work to spread over workers: give each its own
    generator and add the results with ``+`` or :func:`combine_figure1_sums`.
    Iteration i draws the same numbers from a generator in the same state
    whatever ``batch_size`` is, so the sums do not depend on it (to rounding).
    """
    n_iter, batch_size = int(n_iter), int(batch_size)
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    total = Figure1Sums.zeros(params.steps, params.q)
    r_p = params.r_p
    done = 0
    while done < n_iter:
        m = min(batch_size, n_iter - done)
        psi, mse = figure1_fit(figure1_draw(rng, m, params), params)
        d = psi - r_p
        total = total + Figure1Sums(
            m, d.sum(axis=0), (d**2).sum(axis=0), mse.sum(axis=0), (mse**2).sum(axis=0)
        )
        done += m
    return total


def combine_figure1_sums(sums: Iterable[Figure1Sums]) -> Figure1Sums:
    """Add the sums of several batches (any order; the result is one batch's sums)."""
    sums = list(sums)
    if not sums:
        raise ValueError("combine_figure1_sums needs at least one Figure1Sums")
    total = sums[0]
    for s in sums[1:]:
        total = total + s
    return total


@dataclass
class Figure1Curves:
    """The plotted curves: per scheme (axis 0, :data:`FIGURE1_SCHEMES`) and step (axis 1).

    ``bias`` = mean over coordinates of |mean over iterations of ψ − r_p|;
    ``bias_se`` = mean over coordinates of the standard error of that mean, an
    upper bound on the Monte-Carlo standard error of ``bias`` (|·| is
    1-Lipschitz and the sd of an average is at most the average sd).
    ``mse`` = mean over iterations of the test MSE, ``mse_se`` its standard
    error. ``D`` = mean|r_b − r_f|.
    """

    schemes: tuple[str, ...]
    steps: np.ndarray
    bias: np.ndarray
    bias_se: np.ndarray
    mse: np.ndarray
    mse_se: np.ndarray
    psi_mean: np.ndarray
    D: float
    n_iter: int

    def records(self) -> list[dict]:
        """One dict per (scheme, step): the tidy rows of the study's CSV table."""
        return [
            {
                "scheme": s,
                "step": int(t),
                "bias": float(self.bias[i, j]),
                "bias_se": float(self.bias_se[i, j]),
                "mse": float(self.mse[i, j]),
                "mse_se": float(self.mse_se[i, j]),
            }
            for i, s in enumerate(self.schemes)
            for j, t in enumerate(self.steps)
        ]


def figure1_curves(sums: Figure1Sums, params: Figure1Parameters) -> Figure1Curves:
    """Turn (combined) sums into the Figure 1 curves and their standard errors."""
    N = sums.count
    if N < 2:
        raise ValueError(f"need at least 2 iterations for curves and errors, got {N}")
    dmean = sums.dpsi_sum / N
    dvar = np.maximum(sums.dpsi_sq_sum / N - dmean**2, 0.0) * (N / (N - 1))
    mse = sums.mse_sum / N
    mvar = np.maximum(sums.mse_sq_sum / N - mse**2, 0.0) * (N / (N - 1))
    return Figure1Curves(
        schemes=FIGURE1_SCHEMES,
        steps=np.arange(1, params.steps + 1),
        bias=np.abs(dmean).mean(axis=2),
        bias_se=np.sqrt(dvar / N).mean(axis=2),
        mse=mse,
        mse_se=np.sqrt(mvar / N),
        psi_mean=dmean + params.r_p,
        D=params.D,
        n_iter=N,
    )


@dataclass
class Figure1Result:
    """Output of :func:`interleaved_figure1`: settings, raw sums and curves."""

    params: Figure1Parameters
    sums: Figure1Sums
    curves: Figure1Curves
    expected_bias: np.ndarray


def interleaved_figure1(
    rng: np.random.Generator,
    n_iter: int,
    alpha: float = 0.25,
    n: int = 100,
    q: int = 6,
    steps: int = 6,
    r_b=None,
    r_f=None,
    mu1=None,
    mu2=None,
    batch_size: int = 256,
) -> Figure1Result:
    """The Figure 1 study of the paper (ALGORITHMS.md §2), vectorised over iterations.

    Draws the settings once from ``rng`` (:func:`figure1_parameters`), then
    ``n_iter`` iterations from the same generator (:func:`figure1_sums`), and
    returns the sums, the curves and the second-order theoretical bias
    (:func:`figure1_expected_bias` × D). To split iterations over workers, call
    :func:`figure1_parameters` once, :func:`figure1_sums` per worker with its
    own generator, then :func:`combine_figure1_sums` and :func:`figure1_curves`.
    """
    params = figure1_parameters(rng, alpha, n, q, steps, r_b, r_f, mu1, mu2)
    sums = figure1_sums(rng, n_iter, params, batch_size=batch_size)
    expected = figure1_expected_bias(params.alpha, params.q, params.n, params.steps) * params.D
    return Figure1Result(params, sums, figure1_curves(sums, params), expected)


def _interleaved_coefficient(alpha, nu_a, nu_b, q, order):
    """c with E ψ = c·r_b + (1−c)·r_f for centred Wishart(I, ν) Grams of A and B.

    c = E tr[(αW_A + (1−α)W_B)⁻¹ αW_A]/q. First order (ratio of expectations):
    a' = αν_A/(αν_A + (1−α)ν_B). Second order, from W = ν(I + X), E X² = (q+1)/ν·I
    and (I + Y)⁻¹ ≈ I − Y + Y²:  c ≈ a'(1 + b'(b' s_B − a' s_A)), s = (q+1)/ν, b' = 1 − a'.
    """
    a = alpha * nu_a
    b = (1 - alpha) * nu_b
    a1 = a / (a + b)
    b1 = 1.0 - a1
    if order == 1:
        return a1
    s_a = (q + 1) / nu_a if nu_a > 0 else 0.0
    s_b = (q + 1) / nu_b if nu_b > 0 else 0.0
    return a1 * (1 + b1 * (b1 * s_b - a1 * s_a))


def figure1_expected_bias(alpha: float, q: int, n: int, steps: int, order: int = 2) -> np.ndarray:
    """Expected Figure 1 bias per (scheme, step), in units of D = mean|r_b − r_f|.

    Under the study's design (rows N(μ1, I), unit noise) E ψ − r_p is a scalar
    multiple of r_b − r_f for every scheme, so the bias is |c − α|·D with:
    birds 1 − α, fish α, penguins 0 (exact: unbiased least squares); interleaved
    |c_t − α| where c_t is the coefficient for the Grams seen after step t
    (ν = (n − 1) per centred block), computed to ``order`` 1 (the ratio of
    expectations; the values quoted in ALGORITHMS.md, e.g. 0.15 and 0.083 at
    steps 3 and 5 with birds first, 0 at even steps) or 2 (adds the O(q/n)
    term from the Wishart second moment; e.g. ≈ 0.0066 at step 2 for α = 0.25,
    q = 6, n = 100). The neglected remainder is O((q/n)²).
    """
    a = validate_alpha(alpha)
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    out = np.zeros((len(FIGURE1_SCHEMES), int(steps)))
    out[0] = 1 - a
    out[1] = a
    for t in range(1, int(steps) + 1):
        first, second = (t + 1) // 2, t // 2  # blocks of the starting / other population
        for row, (blocks_a, blocks_b) in ((3, (first, second)), (4, (second, first))):
            nu_a, nu_b = blocks_a * (n - 1), blocks_b * (n - 1)
            out[row, t - 1] = abs(_interleaved_coefficient(a, nu_a, nu_b, q, order) - a)
    return out
