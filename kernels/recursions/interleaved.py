"""Interleaved KF4LLS: learn a mixture population from two others, block by block.

John & Wu (2023), §3; ``docs/algorithms.md#interleaved-kf4lls`` (full reference in
``docs/references.md``). Two training
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

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import as_2d, check_column_rank, check_finite
from streamlsq.kernels.recursions.contract import Param, State, cut_intervals
from streamlsq.kernels.recursions.declarations import ALPHA, DECLARATIONS, POPULATIONS, START
from streamlsq.kernels.recursions.kf4lls import FormRecursion, make_form

__all__ = [
    "AlphaEstimate",
    "ColumnMoments",
    "InterleavedKF4LLS",
    "bias_of_run",
    "bias_per_coordinate",
    "center_block",
    "column_moments",
    "estimate_alpha_grid",
    "estimate_alpha_means",
    "interleaved_block_order",
    "interleaved_closed_form",
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

# ALPHA (the mixing weight α of eq. (1)–(2)), START (the population of the first block) and
# POPULATIONS are declared with the recursion, in :mod:`.declarations`
#: the checks of the other arguments of this module's functions
_POPULATION = Param("population", "a", "Population of a block.", type=str,
                    choices=POPULATIONS)
_STEP = Param("step", 1, "Global 1-based step of the stream.", type=int, gt=0)
_GRID_SIZE = Param("grid_size", 1001, "Points of the grid of alpha on [0, 1].", type=int, ge=2)
_ROWS = Param("rows", 1, "Test rows a residual factor summarises.", type=int, gt=0)


# ---------------------------------------------------------------------------
# α, populations, step parity
# ---------------------------------------------------------------------------
def validate_alpha(alpha) -> float:
    """Return α as a float after checking 0 ≤ α ≤ 1 (ValueError otherwise).

    α is the mixing weight of eq. (1)–(2): the test population is α·A + (1−α)·B.
    α = 1 means the test population *is* A: the B-blocks get weight √0 = 0 and
    contribute nothing, so the fit is the centred fit on the A-blocks alone;
    α = 0 is the mirror image (only the B-blocks count).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.interleaved import validate_alpha
    >>> validate_alpha(1)
    1.0
    """
    return ALPHA.check(alpha)


def population_weight(alpha, population: str) -> float:
    """Step 0(b) scale of a block: √α for population ``"a"``, √(1−α) for ``"b"``."""
    a = validate_alpha(alpha)
    _POPULATION.check(population)
    return float(np.sqrt(a if population == "a" else 1.0 - a))


def population_of_step(step: int, start: str = "a") -> str:
    """Population of the block consumed at global step ``step`` (1-based) of the stream.

    Odd steps belong to ``start``, even steps to the other population
    (A₁, B₁, A₂, B₂, … when start = "a").
    """
    START.check(start)
    step = _STEP.check(step)
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
    START.check(start)
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
    ψ₂ is the least-squares fit of the rows [√α Uc; √(1−α) Vc]: it is solved from their
    Householder QR (R with RᵀR = G, never G inverted), its rank decided by
    :func:`~streamlsq.kernels.linalg.column_rank` on R, the rule of every least-squares
    solve (:class:`~streamlsq.kernels.linalg.SingularMatrixError` naming the aliased
    columns). Returns (q,) for 1-D targets, (q, K) for 2-D.
    """
    a = validate_alpha(alpha)
    Uc, bc = center_block(Ua, ba)
    Vc, fc = center_block(Vb, fb)
    if Uc.shape[1] != Vc.shape[1]:
        raise ValueError(f"Ua has {Uc.shape[1]} columns but Vb has {Vc.shape[1]}")
    if bc.ndim != fc.ndim or bc.shape[1:] != fc.shape[1:]:
        raise ValueError(f"ba has target shape {bc.shape[1:]} but fb has {fc.shape[1:]}")
    q = Uc.shape[1]
    rows = np.concatenate([np.sqrt(a) * np.column_stack([Uc, bc]),
                           np.sqrt(1.0 - a) * np.column_stack([Vc, fc])])
    A = np.linalg.qr(rows, mode="r")
    if A.shape[0] < rows.shape[1]:  # fewer rows than columns: the missing rows are 0
        A = np.concatenate([A, np.zeros((rows.shape[1] - A.shape[0], rows.shape[1]))])
    R = A[:q, :q]
    check_column_rank(R, len(rows), what="weighted centred design")
    psi = sla.solve_triangular(R, A[:q, q:], lower=False, check_finite=False)
    return psi[:, 0] if bc.ndim == 1 else psi


# ---------------------------------------------------------------------------
# The recursion
# ---------------------------------------------------------------------------
class InterleavedKF4LLS(FormRecursion):
    """Interleaved KF4LLS (paper §3): centre, weight by population, KF4LLS step.

    The engine feeds ONE ordered stream of blocks that alternates populations:
    A₁, B₁, A₂, B₂, … (``start="a"``) or B₁, A₁, … (``start="b"``); see
    :func:`interleaved_block_order`. The state is the KF4LLS state (H, ψ, rows,
    blocks); the block counter fixes the step parity, hence the population and
    weight of the next block (:meth:`next_population`). Each ``update`` centres
    the block (step 0(a)), scales it by √α or √(1−α) (step 0(b)) and applies
    one KF4LLS step (of the form ``solver`` names, as :class:`KF4LLS`).

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
    solver : {"qr", "normal"}, default "qr"
        The form of the KF4LLS steps, as for :class:`KF4LLS`.
    coef0 : array or None, keyword only
        ψ₀; irrelevant when ridge = 0.

    Notes
    -----
    The scan form is supported: a centred, weighted block still enters only
    through its sums. A summary keeps the sums of the blocks at odd and at even
    positions of its interval separately (unweighted), and :meth:`scan` applies
    the weights from the global parity it tracks, so ``summarize`` needs no
    knowledge of where its piece sits in the stream.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import InterleavedKF4LLS
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((100, 2)), rng.standard_normal((100, 2))
    >>> b, f = U @ [[1.0], [2.0]], V @ [[3.0], [0.0]]
    >>> rec = InterleavedKF4LLS(alpha=0.5)  # blocks alternate: a, b, a, b
    >>> state = rec.init(2, 1)
    >>> for a in (0, 50):
    ...     state = rec.update(state, U[a:a + 50], b[a:a + 50])
    ...     state = rec.update(state, V[a:a + 50], f[a:a + 50])
    >>> np.round(rec.coef(state).ravel(), 1), rec.next_population(state)  # near [2, 1]
    (array([2.1, 0.8]), 'a')
    """

    #: name, summary, description, examples, params (alpha, start, ridge, solver), inputs
    #: (the populations a, b), intercept_kind ("centred"): see :mod:`.declarations`
    declaration = DECLARATIONS["interleaved-kf4lls"]

    def __init__(self, *args, coef0=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.coef0 = None if coef0 is None else np.asarray(coef0)
        self.form = self.make_form()

    def make_form(self):
        return make_form(self.solver, self.ridge, 1.0, self.coef0)

    def inference_unavailable(self) -> str:
        return "its blocks are centred and weighted by population"

    def check_params(self) -> None:
        if self.ridge == 0.0 and population_weight(self.alpha, self.start) == 0.0:
            other = "b" if self.start == "a" else "a"
            raise START.error(self.start, f"{other!r} or ridge > 0 when alpha={self.alpha} "
                              f"gives population {self.start!r} weight 0 (a stream starting "
                              "with it leaves H_1 = 0, singular)")

    def block_order(self, n_blocks) -> list[tuple[int, int]]:
        """Whole blocks of A (store 0) and B (store 1) alternately, from ``start``, until
        the population due next has none left (:func:`interleaved_block_order`)."""
        n_a, n_b = (int(n) for n in n_blocks)
        return [("ab".index(p), k) for p, k in interleaved_block_order(n_a, n_b, self.start)]

    # -- parity ------------------------------------------------------------
    def next_population(self, state: State) -> str:
        """Population ("a" or "b") the next block of the stream must belong to."""
        return population_of_step(int(state["blocks"]) + 1, self.start)

    def step_weight(self, step: int) -> float:
        """Step 0(b) weight of the block at global step ``step`` (1-based)."""
        return population_weight(self.alpha, population_of_step(step, self.start))

    # -- sequential form ---------------------------------------------------
    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        Xc, Yc = center_block(X, as_2d(Y))
        w = self.step_weight(int(state["blocks"]) + 1)
        # √w scales rows, so the step adds w²·XcᵀXc to H and w²·XcᵀYc to Hψ.
        return self.form.update(state, w * Xc, w * Yc)

    # -- information (scan) form -------------------------------------------
    def summarize(
        self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray, cuts: np.ndarray
    ) -> list[State]:
        """Centred block summaries of one piece, one per interval between cuts.

        ``edges`` are the piece's local block offsets, ``cuts`` increasing block
        counts (last = number of blocks) at which an interval ends. A summary holds the
        form's summary (:meth:`NormalEquationsLS.rows_summary`: ``G``, ``b``; QR: ``A``)
        of the centred rows [Xc Yc] of the interval's 1st, 3rd, … blocks, its keys
        suffixed ``_odd`` (``G_odd``, ``b_odd``; ``A_odd``), that of its 2nd, 4th, …
        blocks suffixed ``_even``, ``blocks`` and ``rows``.
        """
        X = np.asarray(X)
        Y = np.asarray(Y)
        check_finite("X", X)
        check_finite("Y", Y)
        edges = np.asarray(edges, dtype=np.int64)
        out = []
        for start, c, a, b in cut_intervals(edges, cuts):
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
            Yc = Yc if Yc.ndim == 2 else Yc[:, None]
            odd = np.repeat(np.arange(c - start) % 2 == 0, counts)  # 1st, 3rd, ... block
            summary = {}
            for suffix, rows in (("_odd", odd), ("_even", ~odd)):
                part = self.form.rows_summary(Xc[rows], Yc[rows])
                summary.update({key + suffix: value for key, value in part.items()})
            out.append({**summary, "blocks": np.int64(c - start), "rows": np.int64(b - a)})
        return out

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        """In-order prefix over the summaries, each first weighted from the global parity
        it tracks: the odd blocks' part by w₁, that of the global step of the summary's
        first block, the even blocks' part by w₂, that of the step after it (H ← H +
        w₁²G_odd + w₂²G_even, h likewise; QR: the factor of [w₁·A_odd; w₂·A_even]), then
        the prefix of KF4LLS (g = 1)."""
        blocks = int(info["blocks"])
        weighted = []
        for s in summaries:
            parts = [(self.step_weight(blocks + k), {key[:-len(suffix)]: value
                                                     for key, value in s.items()
                                                     if key.endswith(suffix)})
                     for k, suffix in ((1, "_odd"), (2, "_even"))]
            weighted.append({**self.form.combine(parts, info), "blocks": s["blocks"],
                             "rows": s["rows"]})
            blocks += int(s["blocks"])
        return self.form.scan(info, weighted)


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
    grid_size = _GRID_SIZE.check(grid_size)
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
    rows = _ROWS.check(rows)
    check_finite("psi", psi)
    V = np.vstack([psi, -np.eye(K)])
    return float(np.sum((R @ V) ** 2) / (int(rows) * K))


