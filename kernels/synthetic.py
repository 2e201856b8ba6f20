"""Synthetic regression streams (pure NumPy, reproducible by row).

Rows are generated in fixed blocks of :data:`GENERATION_BLOCK` rows, block j
from ``np.random.default_rng([seed, STREAM_TAG, j])``; any range of rows is cut
from the blocks it overlaps. So a stream's numbers depend on the seed and the
row index only, never on how the store is chunked or how many workers write it.

Model: X = (Z·s) Qᵀ with Z ~ N(0, I), singular-value profile s_j = κ^(−j/(q−1))
(so cond(X) ≈ κ for n ≫ q) and a seeded random rotation Q; Y = X·C + σ·E with
C ~ N(0, 1) of shape (q, K) and E ~ N(0, I).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GENERATION_BLOCK", "StreamDesign", "stream_design", "stream_rows"]

GENERATION_BLOCK = 8192
_DESIGN_TAG = 0
_STREAM_TAG = 1


class StreamDesign(dict):
    """The fixed part of a synthetic stream: rotation ``Q``, ``scales``, ``coef`` and ``noise``."""


def stream_design(
    seed: int, n_features: int, n_targets: int = 1, condition: float = 1.0, noise: float = 1.0
) -> StreamDesign:
    """Draw the rotation, column scales and true coefficients of a stream from ``seed``."""
    if n_features < 1 or n_targets < 1:
        raise ValueError("n_features and n_targets must be positive")
    if not condition >= 1.0:
        raise ValueError(f"condition number must be >= 1, got {condition}")
    if not noise >= 0.0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    rng = np.random.default_rng([seed, _DESIGN_TAG])
    Q, R = np.linalg.qr(rng.standard_normal((n_features, n_features)))
    Q *= np.sign(np.diag(R))  # the Haar-distributed rotation (unique QR sign convention)
    expo = np.arange(n_features) / max(n_features - 1, 1)
    scales = condition ** (-expo)
    coef = rng.standard_normal((n_features, n_targets))
    return StreamDesign(Q=Q, scales=scales, coef=coef, noise=float(noise))


def stream_rows(
    seed: int, design: StreamDesign, start: int, stop: int, dtype=np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start:stop`` of the stream: (X (n, q), Y (n, K)) in ``dtype``."""
    q = design["Q"].shape[0]
    K = design["coef"].shape[1]
    n = stop - start
    X = np.empty((n, q), dtype=dtype)
    Y = np.empty((n, K), dtype=dtype)
    first, last = start // GENERATION_BLOCK, (stop - 1) // GENERATION_BLOCK if n else -1
    for j in range(first, last + 1):
        rng = np.random.default_rng([seed, _STREAM_TAG, j])
        Z = rng.standard_normal((GENERATION_BLOCK, q))
        E = rng.standard_normal((GENERATION_BLOCK, K))
        lo = max(start, j * GENERATION_BLOCK)
        hi = min(stop, (j + 1) * GENERATION_BLOCK)
        sl = slice(lo - j * GENERATION_BLOCK, hi - j * GENERATION_BLOCK)
        Xb = (Z[sl] * design["scales"]) @ design["Q"].T
        X[lo - start : hi - start] = Xb
        Y[lo - start : hi - start] = Xb @ design["coef"] + design["noise"] * E[sl]
    return X, Y
