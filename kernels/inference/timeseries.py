"""Covariances robust to autocorrelation (HAC, Newey & West 1987), to cross-sectional and
temporal dependence in panels (Driscoll & Kraay 1998) and to clustering in two dimensions
(Cameron, Gelbach & Miller 2011), from sums over chunks of rows.

With the scores sᵢ = ẽᵢx̃ᵢ (x̃ᵢ = √wᵢ·xᵢ, ẽᵢ = √wᵢ·(yᵢ − xᵢᵀψ), per target) the sandwich
V = c·(X̃ᵀX̃)⁻¹ M (X̃ᵀX̃)⁻¹ has the meat

    HAC:           M = Σᵢ sᵢsᵢᵀ + Σ_{l=1}^{L} κ_l Σ_{i≥l} (sᵢsᵢ₋ₗᵀ + sᵢ₋ₗsᵢᵀ),
                   κ_l = 1 − l/(L + 1) (Bartlett) or 1 (uniform), c = 1 or n/(n − k)
    hac-groupsum:  the HAC meat of the period sums S_t = Σ_{i in period t} sᵢ, periods in
                   the order of their labels, c = T/(T − 1)·(n − 1)/(n − k) (T periods)
    two-way:       V = V_A + V_B − V_{A∩B}, each a one-way cluster covariance with its own
                   small-sample factor G/(G − 1)·(n − 1)/(n − k)

as statsmodels' ``sandwich_covariance`` (``S_hac_simple``, ``S_hac_groupsum``,
``cov_cluster_2groups``) computes them. A lag pairs row i with row i − l of the stream (of
its rows of positive weight: a dropped row leaves the series, as statsmodels deletes it), so
a chunk's part of the HAC meat needs the scores of the last L rows of the chunks before it:
:func:`hac_meat` takes them as a *halo* (its first rows, lag partners only), and the parts
of the chunks add up to the meat of all the rows whatever the chunking.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HAC_KERNELS", "hac_meat", "kernel_weights", "row_scores", "series_hac_meat",
           "two_way_terms"]

#: the kernels of the lag weights, statsmodels' names (``sandwich_covariance.kernel_dict``)
HAC_KERNELS = ("bartlett", "uniform")


def kernel_weights(kernel: str, maxlags: int) -> np.ndarray:
    """The weights κ_0..κ_L of lags 0..L: Bartlett's 1 − l/(L + 1) (Newey & West 1987),
    or uniform 1 (statsmodels' ``weights_bartlett``, ``weights_uniform``).

    Examples
    --------
    >>> from streamlsq.kernels.inference.timeseries import kernel_weights
    >>> kernel_weights("bartlett", 3).tolist()
    [1.0, 0.75, 0.5, 0.25]
    """
    if kernel not in HAC_KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(HAC_KERNELS)}, got {kernel!r}")
    if kernel == "uniform":
        return np.ones(maxlags + 1)
    return 1.0 - np.arange(maxlags + 1) / (maxlags + 1.0)


def row_scores(X, Y, coef, weights=None) -> np.ndarray:
    """The scores sᵢ = ẽᵢx̃ᵢ of a chunk of rows, (n, k, K); a row of weight 0 (dropped)
    scores 0."""
    X = np.asarray(X, np.float64)
    E = np.asarray(Y, np.float64) - X @ coef
    if weights is not None:
        w = np.asarray(weights, np.float64)
        # √w·x · √w·e = w·x·e: one product, and 0 for a dropped row
        E = E * w[:, None]
    return X[:, :, None] * E[:, None, :]


def _lagged_sums(S: np.ndarray, halo: int, weights: np.ndarray) -> np.ndarray:
    """Σ_l κ_l (Γ_l + Γ_lᵀ)/(1 + [l = 0]) over the rows i ≥ ``halo`` of S (n, k, K), each
    paired with row i − l ≥ 0: (k, k, K)."""
    n, k, K = S.shape
    meat = np.zeros((k, k, K))
    for t in range(K):
        s = S[:, :, t]
        A = s[halo:]
        meat[:, :, t] = weights[0] * (A.T @ A)
        for lag in range(1, len(weights)):
            first = max(halo, lag)
            if first >= n:
                break
            G = s[first:].T @ s[first - lag:n - lag]
            meat[:, :, t] += weights[lag] * (G + G.T)
    return meat


def hac_meat(X, Y, coef, maxlags: int, kernel: str = "bartlett", weights=None,
             halo: int = 0) -> dict:
    """The part of the HAC meat of the rows ``halo:`` of a chunk (k, k, K), their first
    ``halo`` rows being the last rows of the chunk before it (the lag partners of the
    chunk's first rows, not counted themselves: ``maxlags`` rows of positive weight, or all
    the rows before), and the chunk's rows of positive weight (``nobs``). The parts of
    consecutive chunks, each with the halo of the one before, add up to statsmodels'
    ``S_hac_simple`` of all the rows.

    A row of weight 0 (dropped) is not in the series: the rows of positive weight are
    consecutive, as statsmodels' ``missing="drop"`` deletes the rows with a missing value
    before the lags pair the others.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.timeseries import hac_meat
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((50, 2)), rng.standard_normal((50, 1))
    >>> b = np.zeros((2, 1))
    >>> whole = hac_meat(X, Y, b, 3)["meat"]
    >>> parts = hac_meat(X[:20], Y[:20], b, 3)["meat"] + hac_meat(X[17:], Y[17:], b, 3,
    ...                                                          halo=3)["meat"]
    >>> bool(np.allclose(whole, parts))
    True
    """
    w = kernel_weights(kernel, int(maxlags))
    if weights is not None:  # rows of weight 0 leave the series; the others close up
        weights = np.asarray(weights, np.float64)
        kept = weights > 0
        halo = int(np.count_nonzero(kept[:halo]))
        X, Y, weights = np.asarray(X)[kept], np.asarray(Y)[kept], weights[kept]
    S = row_scores(X, Y, coef, weights)
    return {"meat": _lagged_sums(S, int(halo), w), "nobs": len(X) - halo}


def series_hac_meat(sums: np.ndarray, maxlags: int, kernel: str = "bartlett") -> np.ndarray:
    """The HAC meat of a series of score sums (T, k, K) in time order: Driscoll and Kraay's
    meat from the sums of the periods (statsmodels' ``S_hac_groupsum``)."""
    return _lagged_sums(np.asarray(sums, np.float64), 0, kernel_weights(kernel, int(maxlags)))


def two_way_terms(meats, n_groups) -> list[tuple[np.ndarray, int, float]]:
    """The terms (meat, G, sign) of a two-way cluster covariance from the meats of the
    clusters of A, of B and of their intersection A∩B (Cameron, Gelbach & Miller 2011):
    V = V_A + V_B − V_{A∩B}."""
    return [(m, int(g), s) for m, g, s in zip(meats, n_groups, (1.0, 1.0, -1.0), strict=True)]
