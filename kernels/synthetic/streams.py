"""Synthetic regression streams (pure NumPy, reproducible by row).

Two generators: :func:`stream_rows` (a linear regression stream) and
:func:`irma_rows` (the IRMA study's 1-D function-approximation data).

Rows are generated in fixed draws of :data:`ROWS_PER_DRAW` rows, draw j from
``np.random.default_rng([seed, STREAM_TAG, j])``; any range of rows is cut from
the draws it overlaps. So a stream's numbers depend on the seed and the
row index only, never on how the store is chunked or how many workers write it.

Model: X = (Z·s) Qᵀ with Z ~ N(0, I), singular-value profile s_j = κ^(−j/(q−1))
(so cond(X) ≈ κ for n ≫ q) and a seeded random rotation Q; Y = X·C + σ·E with
C ~ N(0, 1) of shape (q, K) and E ~ N(0, I).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "IRMA_DOMAIN",
    "ROWS_PER_DRAW",
    "StreamDesign",
    "irma_rows",
    "irma_target",
    "stream_design",
    "stream_rows",
]

#: rows drawn from one seeded generator: a range of rows is cut from the draws it overlaps
ROWS_PER_DRAW = 8192
_DESIGN_TAG = 0
_STREAM_TAG = 1
_IRMA_TAG = 2


def _draws(start: int, stop: int):
    """The draws rows ``start:stop`` overlap: (j, the slice of the rows they give, the
    slice of draw j that gives them), in order."""
    if stop <= start:
        return
    for j in range(start // ROWS_PER_DRAW, (stop - 1) // ROWS_PER_DRAW + 1):
        first = j * ROWS_PER_DRAW
        lo, hi = max(start, first), min(stop, first + ROWS_PER_DRAW)
        yield j, slice(lo - start, hi - start), slice(lo - first, hi - first)


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
    for j, rows, sl in _draws(start, stop):
        rng = np.random.default_rng([seed, _STREAM_TAG, j])
        Z = rng.standard_normal((ROWS_PER_DRAW, q))
        E = rng.standard_normal((ROWS_PER_DRAW, K))
        Xj = (Z[sl] * design["scales"]) @ design["Q"].T
        X[rows] = Xj
        Y[rows] = Xj @ design["coef"] + design["noise"] * E[sl]
    return X, Y


# ---------------------------------------------------------------------------
# the IRMA study (Buschermöhle et al., 2013, §IV; docs/studies.md#irma)
# ---------------------------------------------------------------------------
#: the paper's input domain
IRMA_DOMAIN = (0.0, 3.0)


def irma_target(x) -> np.ndarray:
    """The paper's ground truth f(x) = x·exp(−x²) (values in [0, 0.43] on [0, 3])."""
    x = np.asarray(x, dtype=np.float64)
    return x * np.exp(-(x**2))


def irma_rows(
    seed: int,
    start: int,
    stop: int,
    domain=IRMA_DOMAIN,
    noise: float = 0.05,
    dtype=np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start:stop`` of the IRMA study's data: (x (n, 1), y (n, 1)) in ``dtype``.

    x ~ U[a, b) on ``domain`` = (a, b) (default the paper's [0, 3]), y = f(x) + u with
    f = :func:`irma_target` and u ~ U[−noise, noise) (the paper: ±0.05). Draw j of
    :data:`ROWS_PER_DRAW` rows draws its x, then its u, from
    ``default_rng([seed, tag, j])``, so the numbers depend on the seed and the row
    index only, never on how the rows are cut into chunks.
    """
    a, b = (float(v) for v in domain)
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ValueError(f"domain must be a finite interval (a, b) with a < b, got {domain!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise (half-width of the uniform noise) must be >= 0, got {noise!r}")
    if not (0 <= start <= stop):
        raise ValueError(f"rows must satisfy 0 <= start <= stop, got {start}:{stop}")
    n = stop - start
    x = np.empty((n, 1), dtype=dtype)
    y = np.empty((n, 1), dtype=dtype)
    for j, rows, sl in _draws(start, stop):
        rng = np.random.default_rng([seed, _IRMA_TAG, j])
        xj = rng.uniform(a, b, ROWS_PER_DRAW)
        uj = rng.uniform(-noise, noise, ROWS_PER_DRAW)
        x[rows, 0] = xj[sl]
        y[rows, 0] = irma_target(xj[sl]) + uj[sl]
    return x, y
