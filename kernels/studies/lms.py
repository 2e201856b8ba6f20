"""The sample-by-sample (LMS) paper's demonstration and its convergence to least squares.

The sample-by-sample lecture notes; ``docs/studies.md#lms``. The notes' data: 100
samples x ~ U(0, 10), t = 2 − 0.1x + N(0, 0.1²) + c·(x − 6)² with c = 0 (a
line) or c = 0.05 (a curved cloud, "to fit nonlinear cloud"); a line
g(x) = w₀ + w₁x is fitted by LMS, W ← W + ρ x̃(t − x̃ᵀW), x̃ = [1, x], from W = 0,
visiting the samples in their stored order epoch after epoch; the paper shows
ρ = 0.01 for 1 and 20 epochs and plots the weights against the number of updates.

Convergence against least squares: the stationary point LMS approaches is the
least-squares line of the cloud, W_LS = argmin Σ(t − x̃ᵀW)². With a constant
ρ the iterates settle into a cycle around W_LS whose size is O(ρ); they reach
W_LS only when ρ decreases (Σρ = ∞, Σρ² < ∞). The error measures here are
‖W_k − W_LS‖₂ and the excess training MSE, MSE(W_k) − MSE(W_LS) ≥ 0.

Every LMS run uses the compiled loop :func:`~streamlsq.kernels.recursions.lms.lms_fold_arrays`
with blocks of one row, so the weights after every update are available.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamlsq.kernels.linalg import as_2d, check_finite
from streamlsq.kernels.recursions.lms import StepSchedule, lms_fold_arrays

__all__ = [
    "PAPER_NOISE",
    "PAPER_N_SAMPLES",
    "excess_mse",
    "least_squares_line",
    "lms_convergence",
    "lms_trajectory",
    "paper_cloud",
    "update_grid",
]

PAPER_N_SAMPLES = 100
PAPER_NOISE = 0.1


def paper_cloud(
    rng: np.random.Generator,
    n_samples: int = PAPER_N_SAMPLES,
    curvature: float = 0.0,
    noise: float = PAPER_NOISE,
) -> tuple[np.ndarray, np.ndarray]:
    """X (n, 1) ~ U(0, 10) and T (n, 1) = 2 − 0.1X + N(0, noise²) + curvature·(X − 6)².

    Draws X, then the noise (the paper's order), so the line and the curved
    cloud from generators in the same state share X and the noise.
    """
    n_samples = int(n_samples)
    if n_samples < 2:
        raise ValueError(f"n_samples must be at least 2, got {n_samples}")
    if not (np.isfinite(curvature) and np.isfinite(noise) and noise >= 0):
        raise ValueError(f"curvature and noise must be finite, noise >= 0; got {curvature!r}, "
                         f"{noise!r}")
    X = rng.uniform(0.0, 10.0, (n_samples, 1))
    T = 2.0 - 0.1 * X + rng.normal(0.0, noise, (n_samples, 1)) + curvature * (X - 6.0) ** 2
    return X, T


def _data(X, T) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    T = as_2d(np.asarray(T, dtype=np.float64))
    if X.ndim != 2 or T.shape[0] != X.shape[0] or X.shape[0] < 1:
        raise ValueError(f"X must be (n, q) and T (n, K) with the same n, got {X.shape}, "
                         f"{T.shape}")
    check_finite("X", X)
    check_finite("T", T)
    return X, T


def least_squares_line(X, T) -> np.ndarray:
    """W_LS ((q+1)×K, intercept first) of the samples, by ``numpy.linalg.lstsq`` on [1, X]."""
    X, T = _data(X, T)
    X1 = np.concatenate([np.ones((X.shape[0], 1)), X], axis=1)
    return np.linalg.lstsq(X1, T, rcond=None)[0]


def excess_mse(W, X, T, W_ls=None) -> np.ndarray:
    """Training MSE of each W in ``W`` (…, q+1, K) minus that of W_LS (≥ 0 up to rounding).

    Computed from the residual identity MSE(W) − MSE(W_LS) = ‖X̃(W − W_LS)‖²/(nK),
    which holds because the LS residual is orthogonal to the columns of X̃ — no
    cancellation between two nearly equal sums.
    """
    X, T = _data(X, T)
    W_ls = least_squares_line(X, T) if W_ls is None else np.asarray(W_ls, dtype=np.float64)
    X1 = np.concatenate([np.ones((X.shape[0], 1)), X], axis=1)
    D = np.asarray(W, dtype=np.float64) - W_ls
    R = np.einsum("nq,...qk->...nk", X1, D)
    return np.mean(R**2, axis=(-2, -1))


def lms_trajectory(
    X, T, schedule: StepSchedule, epochs: int, record_at=None, normalized: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Run LMS from W = 0 over ``epochs`` passes in stored order; W after chosen updates.

    ``record_at``: increasing update counts in [0, epochs·n] (default: every
    update, 0..epochs·n). Returns (updates (R,), W (R, q+1, K)), W at update 0
    being the start W = 0. Raises ValueError if the weights overflow (ρ too
    large for the data scale). ρ‖x̃‖² < 2 for every sample guarantees stability;
    beyond it LMS may still settle or may grow, and slowly growing weights are
    caught only once they overflow.
    """
    X, T = _data(X, T)
    epochs = int(epochs)
    if epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs}")
    n, q = X.shape
    total = epochs * n
    rec = np.arange(total + 1) if record_at is None else np.asarray(record_at, dtype=np.int64)
    if rec.ndim != 1 or (rec.size and (rec.min() < 0 or rec.max() > total)) or \
            (np.diff(rec) <= 0).any():
        raise ValueError(f"record_at must be increasing update counts in [0, {total}]")
    Xe = np.tile(X, (epochs, 1))
    Te = np.tile(T, (epochs, 1))
    W0 = np.zeros((q + 1, T.shape[1]))
    blocks = rec[rec > 0] - 1  # after update u, i.e. after one-row block u − 1
    _, _, coefs = lms_fold_arrays(W0, 0, Xe, Te, np.arange(total + 1), blocks, schedule,
                                  normalized=normalized)
    if rec.size and rec[0] == 0:
        coefs = np.concatenate([W0[None], coefs])
    return rec, coefs


def update_grid(total: int, points: int = 60) -> np.ndarray:
    """About ``points`` update counts from 0 to ``total``, log-spaced, always with 0, 1, total."""
    total = int(total)
    if total < 1:
        raise ValueError(f"total must be a positive integer, got {total}")
    grid = np.unique(np.geomspace(1, total, max(int(points), 2)).round().astype(np.int64))
    return np.unique(np.concatenate([[0, 1], grid, [total]]))


def lms_convergence(
    rng: np.random.Generator,
    n_clouds: int,
    schedules: Sequence[StepSchedule],
    epochs: int,
    record_at,
    n_samples: int = PAPER_N_SAMPLES,
    curvature: float = 0.0,
    noise: float = PAPER_NOISE,
) -> dict[str, np.ndarray]:
    """LMS against least squares on ``n_clouds`` fresh clouds, for every schedule.

    Cloud c is drawn by :func:`paper_cloud` from ``rng`` (in order), so a
    generator in a given state always gives the same clouds. Returns
    ``distance`` and ``excess_mse``, each (n_clouds, len(schedules), R): the
    error of W after ``record_at[r]`` updates against that cloud's W_LS.
    """
    n_clouds = int(n_clouds)
    if n_clouds < 1:
        raise ValueError(f"n_clouds must be a positive integer, got {n_clouds}")
    rec = np.asarray(record_at, dtype=np.int64)
    dist = np.empty((n_clouds, len(schedules), rec.size))
    excess = np.empty_like(dist)
    for c in range(n_clouds):
        X, T = paper_cloud(rng, n_samples, curvature, noise)
        W_ls = least_squares_line(X, T)
        for s, schedule in enumerate(schedules):
            _, W = lms_trajectory(X, T, schedule, epochs, rec)
            dist[c, s] = np.sqrt(((W - W_ls) ** 2).sum(axis=(1, 2)))
            excess[c, s] = excess_mse(W, X, T, W_ls)
    return {"distance": dist, "excess_mse": excess}
