"""The three populations of the interleaved-KF4LLS study (John & Wu), drawn block by block.

Birds A (rows U ~ N(μ₁1, I), targets b = U r_b + ε), fish B (V ~ N(μ₂1, I),
f = V r_f + ε) and penguins C (Z = αU + (1−α)V on the same rows, p = Z r_p + ε with
r_p = α r_b + (1−α) r_f); see ``docs/algorithms.md`` (interleaved KF4LLS).
:func:`figure1_parameters` draws the fixed settings, :func:`figure1_draw` a batch of
Monte-Carlo iterations, :func:`figure1_population_blocks` the blocks of a simulated
store from (seed, block index) only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamlsq.kernels.linalg import check_finite
from streamlsq.kernels.recursions.interleaved import validate_alpha
from streamlsq.kernels.recursions.params import Param

__all__ = [
    "Figure1Parameters",
    "figure1_draw",
    "figure1_parameters",
    "figure1_population_blocks",
    "figure1_store_parameters",
]

#: the sizes of the Figure 1 study and the seed of a simulated store
_Q = Param("q", 6, "Features.", type=int, gt=0)
_STEPS = Param("steps", 6, "Blocks per population.", type=int, gt=0)
_SEED = Param("seed", 0, "Seed of the store.", type=int, ge=0)


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
    n, q, steps = int(n), _Q.check(q), _STEPS.check(steps)
    if n < q + 2:
        raise ValueError(f"n must be at least q + 2 = {q + 2} rows per block, got {n}")
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
    seed = _SEED.check(seed)
    rng = np.random.default_rng([seed, _FIGURE1_STORE_PARAMETERS_TAG])
    return figure1_parameters(rng, alpha, n, q, steps)


def figure1_population_blocks(
    seed: int, params: Figure1Parameters, j0: int, j1: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Blocks ``j0..j1−1`` (0-based) of the three populations of a simulated store.

    The Figure 1 generating process (``docs/studies.md#interleaved``) for one iteration, block
    by block: block j comes from ``default_rng([seed, tag, j])`` through
    :func:`figure1_draw` (one iteration, one step), so a block's numbers depend on
    (seed, j) only, never on which blocks are generated together. Returns
    ``{"a": (U, b), "b": (V, f), "c": (Z, p)}`` with X arrays ((j1−j0)·n, q) and
    targets ((j1−j0)·n, 1): A birds U ~ N(μ₁1, I), b = U r_b + ε; B fish
    V ~ N(μ₂1, I), f = V r_f + ε; C penguins Z = αU + (1−α)V (the same rows of U
    and V, eq. (1)), p = Z r_p + ε.
    """
    seed, j0, j1 = _SEED.check(seed), int(j0), int(j1)
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
