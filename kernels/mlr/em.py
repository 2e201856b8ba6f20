"""Task-level EM for the mixture of linear regressions (``docs/algorithms.md#em-baseline``;
the baseline of Kong et al., 2020, Appendix E.5).

Every row of a task shares the task's component, so the E-step is per task:

    γᵢℓ ∝ pℓ (2πs²ℓ)^{−tᵢ/2} exp(−‖yᵢ − Xᵢwℓ‖²/(2s²ℓ))

and the M-step is a weighted least squares per component:

    wℓ  = (Σᵢγᵢℓ XᵢᵀXᵢ)⁻¹ Σᵢγᵢℓ Xᵢᵀyᵢ
    s²ℓ = Σᵢγᵢℓ‖yᵢ − Xᵢwℓ‖² / Σᵢγᵢℓtᵢ
    pℓ  = meanᵢ γᵢℓ

The residual ‖yᵢ − Xᵢw‖² = yᵢᵀyᵢ − 2wᵀXᵢᵀyᵢ + wᵀXᵢᵀXᵢw needs only the per-task
statistics (XᵢᵀXᵢ, Xᵢᵀyᵢ, yᵢᵀyᵢ, tᵢ), so one pass over the rows (:func:`task_stats`,
cacheable: n·d² numbers) serves every EM iteration. An iteration is a map over
chunks of work (:func:`em_e_step` then :func:`em_accumulate`), a sum of the
partial sums (``combine_stats``), and :func:`em_m_step` on the total.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from streamlsq.kernels.mlr.classify import check_weights, positive_vector
from streamlsq.kernels.mlr.refine import solve_from_sums
from streamlsq.kernels.mlr.tasks import as_task_rows, padded_task_stacks, range_sums, task_sizes

__all__ = [
    "em_accumulate",
    "em_e_step",
    "em_init_perturbed",
    "em_init_random",
    "em_m_step",
    "project_to_simplex",
    "task_stats",
]


def task_stats(X, y, task_ptr) -> dict[str, np.ndarray]:
    """Per-task sufficient statistics of one chunk of work.

    {"xtx": (n, d, d), "xty": (n, d), "yty": (n,), "rows": (n,) int64}. XᵢᵀXᵢ is
    a batched product over zero-padded size buckets (no Python loop over tasks).
    """
    X, y, ptr = as_task_rows(X, y, task_ptr)
    n, d = ptr.size - 1, X.shape[1]
    xtx = np.zeros((n, d, d))
    for idx, Xs, _, _ in padded_task_stacks(X, y, ptr):
        if Xs.shape[1]:
            xtx[idx] = np.einsum("mtd,mte->mde", Xs, Xs)
    return {
        "xtx": xtx,
        "xty": range_sums(y[:, None] * X, ptr),
        "yty": range_sums(y * y, ptr),
        "rows": task_sizes(ptr),
    }


def _float_arrays(sums: dict, keys: tuple[str, ...], what: str) -> list[np.ndarray]:
    """``sums[key]`` for every key as float64 arrays, in the order of ``keys``; a missing key
    is refused naming ``what``."""
    for key in keys:
        if key not in sums:
            raise ValueError(f"{what} lacks '{key}'")
    return [np.asarray(sums[key], dtype=np.float64) for key in keys]


def _check_task_stats(stats: dict) -> tuple[np.ndarray, ...]:
    xtx, xty, yty, rows = _float_arrays(stats, ("xtx", "xty", "yty", "rows"), "task_stats")
    n, d = xty.shape
    if xtx.shape != (n, d, d) or yty.shape != (n,) or rows.shape != (n,):
        raise ValueError(
            f"task_stats shapes disagree: xtx {xtx.shape}, xty {xty.shape}, "
            f"yty {yty.shape}, rows {rows.shape}"
        )
    return xtx, xty, yty, rows


def em_e_step(task_stats: dict, W, s2, p):
    """E-step: responsibilities γ (n_tasks, k) and the log-likelihood of these tasks.

    log-likelihood = Σᵢ log Σℓ pℓ N(yᵢ | Xᵢwℓ, s²ℓ I) with all constants, so it
    is additive over chunks of work and comparable across iterations (it never
    decreases under exact EM). Residuals come from the statistics and are
    clipped at 0 against rounding.
    """
    xtx, xty, yty, t = _check_task_stats(task_stats)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[1] != xty.shape[1] or not np.isfinite(W).all():
        raise ValueError(f"W must be a finite (k, {xty.shape[1]}) array, got shape {W.shape}")
    k = W.shape[0]
    s2 = positive_vector(s2, k, "s2")
    p = check_weights(p, k)
    quad = np.einsum("kd,nde,ke->nk", W, xtx, W)
    sse = np.maximum(yty[:, None] - 2.0 * xty @ W.T + quad, 0.0)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    score = log_p - 0.5 * t[:, None] * np.log(2.0 * np.pi * s2) - sse / (2.0 * s2)
    lse = logsumexp(score, axis=1, keepdims=True)
    return np.exp(score - lse), float(lse.sum())


def em_accumulate(task_stats: dict, gamma) -> dict[str, np.ndarray]:
    """Additive M-step sums of one chunk of work under responsibilities γ (n_tasks, k).

    {"xtx": Σγ XᵢᵀXᵢ (k, d, d), "xty": Σγ Xᵢᵀyᵢ (k, d), "yty": Σγ yᵢᵀyᵢ (k,),
    "rows": Σγ tᵢ (k,), "weight": Σγ (k,), "tasks": n (int64)}.
    """
    xtx, xty, yty, t = _check_task_stats(task_stats)
    G = np.asarray(gamma, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != xty.shape[0]:
        raise ValueError(f"gamma must be (n_tasks={xty.shape[0]}, k), got shape {G.shape}")
    if not (np.isfinite(G).all() and (G >= 0).all()):
        raise ValueError("gamma must hold finite responsibilities >= 0")
    xtx_k = np.einsum("nk,nde->kde", G, xtx)
    return {
        "xtx": 0.5 * (xtx_k + xtx_k.transpose(0, 2, 1)),
        "xty": G.T @ xty,
        "yty": G.T @ yty,
        "rows": G.T @ t,
        "weight": G.sum(axis=0),
        "tasks": np.int64(G.shape[0]),
    }


def em_m_step(sums: dict):
    """M-step from combined sums: (W (k, d), s2 (k,), p (k,)).

    wℓ solves (Σγ XᵀX) w = Σγ Xᵀy; s²ℓ = Σγ‖y − Xwℓ‖²/Σγt; pℓ = Σγ / n. A component
    whose responsibilities have vanished (EM collapsed it) or whose weighted
    XᵀX is singular is refused by name rather than turned into NaN.
    """
    xtx, xty, yty, rows, weight, tasks = _float_arrays(
        sums, ("xtx", "xty", "yty", "rows", "weight", "tasks"), "sums")
    n = float(tasks)
    k, d = xty.shape
    tiny = 1e-12 * max(n, 1.0)
    W = np.zeros((k, d))
    s2 = np.zeros(k)
    for ell in range(k):
        if not weight[ell] > tiny:
            raise ValueError(
                f"EM component {ell} has no responsibility left (sum of gamma = "
                f"{weight[ell]:.3g}); the run collapsed it"
            )
        W[ell], rss = solve_from_sums(xtx[ell], xty[ell], yty[ell],
                                      f"EM component {ell}: weighted X^T X")
        s2[ell] = rss / rows[ell]
        if not s2[ell] > 0:
            raise ValueError(f"EM component {ell} fits its tasks exactly (s2 = 0)")
    return W, s2, weight / n


def project_to_simplex(v, min_weight: float = 0.0) -> np.ndarray:
    """Euclidean projection of v (k,) on {p : pℓ ≥ min_weight, Σ p = 1}.

    The sort-based algorithm of Duchi et al. (2008) applied to v − min_weight on
    the simplex of radius 1 − k·min_weight.
    """
    v = np.asarray(v, dtype=np.float64)
    k = v.size
    if v.ndim != 1 or k == 0 or not np.isfinite(v).all():
        raise ValueError(f"v must be a finite non-empty vector, got shape {v.shape}")
    radius = 1.0 - k * min_weight
    if min_weight < 0 or radius <= 0:
        raise ValueError(f"min_weight must be in [0, 1/k) = [0, {1.0 / k:.3g}), got {min_weight}")
    u = v - min_weight
    s = np.sort(u)[::-1]
    css = np.cumsum(s) - radius
    j = np.arange(1, k + 1)
    rho = int(np.flatnonzero(s - css / j > 0)[-1])
    theta = css[rho] / (rho + 1)
    return np.maximum(u - theta, 0.0) + min_weight


def em_init_perturbed(rng, W_true, s_true, p_true, scale: float, *, min_weight=None):
    """A random EM start around the truth, as in the paper's Appendix E.5.

    What survives of E.5's text: w, s and p are initialised at the truth plus
    Gaussian noise, and the weights are projected back on the simplex. Its
    constants were lost; the reading here perturbs each parameter relative to
    its natural size, so ``scale`` is a relative perturbation:

        W₀ = W + scale·Z/√d          (E‖ΔW_ℓ‖² = scale²; Z standard normal)
        s₀ = |s + scale·z|, at least 10⁻⁶·mean(s)
        p₀ = Π(p + scale·z'/k)       Π: projection on {p ≥ min_weight, Σp = 1}

    ``min_weight`` defaults to 0.01/k so no component starts dead. ``rng`` is a
    ``numpy.random.Generator`` (or a seed for ``default_rng``). Returns (W₀, s₀, p₀).
    """
    rng = np.random.default_rng(rng)
    W = np.asarray(W_true, dtype=np.float64)
    s = np.asarray(s_true, dtype=np.float64)
    p = np.asarray(p_true, dtype=np.float64)
    if W.ndim != 2 or s.shape != (W.shape[0],) or p.shape != (W.shape[0],):
        raise ValueError(
            f"W_true (k, d), s_true (k,), p_true (k,) disagree: {W.shape}, {s.shape}, {p.shape}"
        )
    if not (np.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    k, d = W.shape
    if min_weight is None:
        min_weight = 0.01 / k
    W0 = W + scale * rng.standard_normal((k, d)) / np.sqrt(d)
    s0 = np.maximum(np.abs(s + scale * rng.standard_normal(k)), 1e-6 * s.mean())
    p0 = project_to_simplex(p + scale * rng.standard_normal(k) / k, min_weight)
    return W0, s0, p0


def em_init_random(rng, k: int, d: int, y_scale: float):
    """A start that knows nothing of the truth: W₀ = y_scale·Z/√d, s₀ = y_scale, p₀ = 1/k.

    ``y_scale`` is the root mean square of the targets (e.g. √(Σyᵀy/Σt) from the
    per-task statistics), so ‖w₀‖ has the size a coefficient vector explaining y
    would have. ``rng`` a Generator or a seed. Returns (W₀ (k, d), s₀ (k,), p₀ (k,)).
    """
    rng = np.random.default_rng(rng)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    if not (np.isfinite(y_scale) and y_scale > 0):
        raise ValueError(f"y_scale must be a finite positive number, got {y_scale!r}")
    W0 = y_scale * rng.standard_normal((k, d)) / np.sqrt(d)
    return W0, np.full(k, float(y_scale)), np.full(k, 1.0 / k)
