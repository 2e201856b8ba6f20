"""Synthetic mixed-linear-regression tasks (Kong et al., 2020: the model of its §2.2 and
the settings of its Appendix E), pure functions of their seeds.

Model: component h ~ p per task; rows x ~ N(0, I_d), y = w_hᵀx + s_h·ε, ε ~ N(0, 1).

Non-isotropic features (``features``, :data:`FEATURES`): x is a basis of functions
of a scalar input u ~ U(−1, 1) drawn per row, the kind of regression the
meta-learning benchmarks use (a curve per task):

- ``"polynomial"``: x_j = u^j, j = 0..d−1 (monomials: E xxᵀ is a Hilbert-like
  matrix, badly conditioned for d ≥ 6);
- ``"chebyshev"``: x_j = T_j(u), the Chebyshev polynomials of the first kind
  (better conditioned, still far from I: E T_j² ≠ E T_0² = 1).

They replace the Gaussian features in the same random stream position (the
draw takes B·t uniforms instead of the (B, t, d) normals), so a setting is
still a function of (seed, task index, t, d, features).

Chunk invariance: tasks are generated in fixed draws of B tasks (B depends only
on rows_per_task and d); draw b takes, from ``default_rng([*seed, 2, b])`` and
in this order, B uniforms for the components, the (B, t, d) features and the
(B, t) noise. A range of tasks regenerates the draws it overlaps and slices
them, so task i's numbers depend only on (seed, i) (and t, d): any chunking of
the task range gives identical data. Components use ``default_rng([*seed, 1])``.
(Seed words are tagged 1 and 2 because NumPy's SeedSequence ignores trailing
zero words: [s] and [s, 0] give the same stream.)
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.recursions.params import Param

__all__ = ["FEATURES", "feature_rows", "mlr_components", "simulate_tasks", "tasks_per_draw"]

#: kinds of features: isotropic Gaussian, or functions of a scalar input u ~ U(-1, 1)
FEATURES = ("gaussian", "polynomial", "chebyshev")

_TAG_COMPONENTS = 1
_TAG_TASKS = 2
_MAX_TASKS_PER_DRAW = 1024
_NUMBERS_PER_DRAW = 1 << 18


#: a seed: one integer >= 0 or a sequence of them
_SEED = Param("seed", 0, "Seed of the generator.", type=int, ge=0,
              requirement="a non-negative integer or a sequence of them")
#: the sizes of a mixture and of a set of tasks
_SIZES = {name: Param(name, 1, help, type=int, gt=0) for name, help in (
    ("d", "Features."), ("k", "Components."), ("rows_per_task", "Rows of each task."))}
_FIRST_TASK = Param("first_task", 0, "Index of the first task.", type=int, ge=0)
_N_TASKS = Param("n_tasks", 0, "Tasks.", type=int, ge=0)


def _seed_words(seed) -> list[int]:
    words = [seed] if np.isscalar(seed) else list(seed)
    try:
        out = [_SEED.check(w) for w in words]
    except ValueError:
        raise _SEED.error(seed) from None
    if not out:
        raise ValueError("seed must not be empty")
    return out


def mlr_components(
    seed,
    d: int,
    k: int,
    kind: str = "orthonormal",
    separation: float | None = None,
    noise=1.0,
    weights=None,
):
    """True mixture parameters: (W_true (k, d), s_true (k,), p_true (k,)).

    ``kind="orthonormal"``: the k rows are orthonormal (QR of a Gaussian matrix,
    signs fixed by diag(R) > 0; needs k ≤ d), so ‖w_h‖ = 1 and Δ = √2.
    ``kind="gaussian"``: rows i.i.d. N(0, I/d) (the paper's other prior).
    ``separation``: rescale W so the smallest pairwise distance min‖w_h − w_h'‖
    equals it (k ≥ 2). ``noise``: s_h, a positive number or (k,). ``weights``:
    p (k,), non-negative and summing to 1 (default uniform).
    """
    words = _seed_words(seed)
    d = _SIZES["d"].check(d)
    k = _SIZES["k"].check(k)
    rng = np.random.default_rng([*words, _TAG_COMPONENTS])
    if kind == "orthonormal":
        if k > d:
            raise ValueError(f"kind='orthonormal' needs k <= d, got k = {k}, d = {d}")
        Q, R = np.linalg.qr(rng.standard_normal((d, k)))
        signs = np.sign(np.diag(R))
        signs[signs == 0] = 1.0
        W = (Q * signs).T
    elif kind == "gaussian":
        W = rng.standard_normal((k, d)) / np.sqrt(d)
    else:
        raise ValueError(f"kind must be 'orthonormal' or 'gaussian', got {kind!r}")
    if separation is not None:
        if k < 2:
            raise ValueError("separation needs at least k = 2 components")
        if not (np.isfinite(separation) and separation > 0):
            raise ValueError(f"separation must be a finite positive number, got {separation!r}")
        diff = W[:, None, :] - W[None, :, :]
        dist = np.sqrt((diff**2).sum(axis=2))[np.triu_indices(k, 1)]
        W = W * (separation / dist.min())
    s = np.broadcast_to(np.asarray(noise, dtype=np.float64), (k,)).copy()
    if not (np.isfinite(s).all() and (s > 0).all()):
        raise ValueError(f"noise must be positive (a number or one per component), got {noise!r}")
    if weights is None:
        p = np.full(k, 1.0 / k)
    else:
        p = np.asarray(weights, dtype=np.float64)
        if p.shape != (k,) or not (np.isfinite(p).all() and (p >= 0).all()):
            raise ValueError(f"weights must be {k} finite numbers >= 0, got {weights!r}")
        if abs(p.sum() - 1.0) > 1e-8:
            raise ValueError(f"weights must sum to 1, got {p.sum()!r}")
        p = p / p.sum()
    return W, s, p


def tasks_per_draw(rows_per_task: int, d: int) -> int:
    """B, the tasks drawn from one seeded generator: ≤ 1024 and ≤ 2¹⁸ numbers per draw."""
    return max(1, min(_MAX_TASKS_PER_DRAW, _NUMBERS_PER_DRAW // (rows_per_task * (d + 1))))


def feature_rows(u, d: int, features: str) -> np.ndarray:
    """Features (..., d) of scalar inputs u: monomials u^j or Chebyshev T_j(u), j < d.

    Examples
    --------
    >>> feature_rows(np.array([0.5]), 3, "polynomial").tolist()
    [[1.0, 0.5, 0.25]]
    >>> feature_rows(np.array([0.5]), 3, "chebyshev").tolist()  # T_2(u) = 2u² − 1
    [[1.0, 0.5, -0.5]]
    """
    u = np.asarray(u, dtype=np.float64)
    if features == "polynomial":
        return u[..., None] ** np.arange(d)
    if features == "chebyshev":
        return np.polynomial.chebyshev.chebvander(u, d - 1)
    raise ValueError(f"features must be 'polynomial' or 'chebyshev' here, got {features!r}")


def simulate_tasks(seed, first_task: int, n_tasks: int, rows_per_task: int, W, s, p,
                   features: str = "gaussian"):
    """Tasks first_task .. first_task+n_tasks−1 of the synthetic task set ``seed``.

    Returns (X (n_tasks·t, d), y (n_tasks·t,), task_ptr (n_tasks+1,) local int64,
    component (n_tasks,) int64). Every task has ``rows_per_task`` rows. The
    numbers of task i depend only on (seed, i, t, d), never on the chunking
    (module docstring); ``seed`` is an int or a sequence of ints (e.g.
    (seed, role) for the light, heavy and second light task sets).
    ``features``: "gaussian" (x ~ N(0, I)), "polynomial" or "chebyshev"
    (functions of u ~ U(−1, 1), module docstring).
    Vectorised within each draw: a loop over draws, not tasks.
    """
    if features not in FEATURES:
        raise ValueError(f"features must be one of {', '.join(FEATURES)}, got {features!r}")
    words = _seed_words(seed)
    t = _SIZES["rows_per_task"].check(rows_per_task)
    first_task, n_tasks = _FIRST_TASK.check(first_task), _N_TASKS.check(n_tasks)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or not np.isfinite(W).all():
        raise ValueError(f"W must be a finite (k, d) array, got shape {W.shape}")
    k, d = W.shape
    s = np.asarray(s, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    if s.shape != (k,) or not (np.isfinite(s).all() and (s >= 0).all()):
        raise ValueError(f"s must be {k} finite noise levels >= 0, got shape {s.shape}")
    if p.shape != (k,) or not (np.isfinite(p).all() and (p >= 0).all()) or abs(p.sum() - 1) > 1e-8:
        raise ValueError(f"p must be {k} weights >= 0 summing to 1, got {p!r}")
    first, n = int(first_task), int(n_tasks)
    X = np.empty((n, t, d))
    y = np.empty((n, t))
    comp = np.empty(n, dtype=np.int64)
    if n:
        B = tasks_per_draw(t, d)
        cdf = np.cumsum(p)
        cdf[-1] = 1.0
        for b in range(first // B, (first + n - 1) // B + 1):
            rng = np.random.default_rng([*words, _TAG_TASKS, b])
            u = rng.random(B)
            if features == "gaussian":
                Xb = rng.standard_normal((B, t, d))
            else:
                Xb = feature_rows(rng.uniform(-1.0, 1.0, (B, t)), d, features)
            eb = rng.standard_normal((B, t))
            lo = max(first, b * B)
            hi = min(first + n, (b + 1) * B)
            src = slice(lo - b * B, hi - b * B)
            dst = slice(lo - first, hi - first)
            h = np.minimum(np.searchsorted(cdf, u[src], side="right"), k - 1)
            comp[dst] = h
            X[dst] = Xb[src]
            y[dst] = np.einsum("btd,bd->bt", Xb[src], W[h]) + s[h][:, None] * eb[src]
    task_ptr = np.arange(n + 1, dtype=np.int64) * t
    return X.reshape(n * t, d), y.reshape(n * t), task_ptr, comp
