"""Covariances robust to autocorrelation (HAC, Newey & West 1987), within panels (HAC per
panel), to cross-sectional and temporal dependence in panels (Driscoll & Kraay 1998) and to
clustering in two dimensions (Cameron, Gelbach & Miller 2011), from sums over chunks of rows.

With the scores sᵢ = ẽᵢx̃ᵢ (x̃ᵢ = √wᵢ·xᵢ, ẽᵢ = √wᵢ·(yᵢ − xᵢᵀψ), per target) the sandwich
V = c·(X̃ᵀX̃)⁻¹ M (X̃ᵀX̃)⁻¹ has the meat

    HAC:           M = Σᵢ sᵢsᵢᵀ + Σ_{l=1}^{L} κ_l Σ_{i≥l} (sᵢsᵢ₋ₗᵀ + sᵢ₋ₗsᵢᵀ),
                   κ_l = 1 − l/(L + 1) (Bartlett) or 1 (uniform), c = 1 or n/(n − k)
    hac-panel:     the HAC meat with the lags inside each panel only (row i − l paired with
                   row i when both are of the same panel: a run of equal panel labels),
                   c = n/(n − k) ('hac'), G/(G − 1)·(n − 1)/(n − k) ('cluster', G panels)
                   or 1
    hac-groupsum:  the HAC meat of the period sums S_t = Σ_{i in period t} sᵢ, periods in
                   the order of their labels, c = T/(T − 1)·(n − 1)/(n − k) (T periods)
    two-way:       V = V_A + V_B − V_{A∩B}, each a one-way cluster covariance with its own
                   small-sample factor G/(G − 1)·(n − 1)/(n − k)

as statsmodels' ``sandwich_covariance`` (``S_hac_simple``, ``S_nw_panel``, ``S_hac_groupsum``,
``cov_cluster_2groups``) computes them. A lag pairs row i with row i − l of the stream (of
its rows of positive weight: a dropped row leaves the series, as statsmodels deletes it), so
a chunk's part of the HAC meat needs the scores of the last L rows of the chunks before it:
:func:`hac_meat` takes them as a *halo* (its first rows, lag partners only), and the parts
of the chunks add up to the meat of all the rows whatever the chunking. The same holds
within panels (:func:`panel_hac_meat`, the halo with its panel labels); the runs of panel
labels of the chunks (:func:`panel_runs`) join into the panels of all the rows
(:func:`merge_panel_runs`), where a label that starts a second run is a panel whose rows are
not together (:func:`repeated_panel`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["HAC_KERNELS", "hac_meat", "kernel_weights", "merge_panel_runs", "panel_hac_meat",
           "panel_ids", "panel_runs", "repeated_panel", "row_scores", "series_hac_meat",
           "time_order_break", "two_way_terms"]

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


def _lagged_sums(S: np.ndarray, halo: int, weights: np.ndarray,
                 panels: np.ndarray | None = None) -> np.ndarray:
    """Σ_l κ_l (Γ_l + Γ_lᵀ)/(1 + [l = 0]) over the rows i ≥ ``halo`` of S (n, k, K), each
    paired with row i − l ≥ 0 (of the same panel, when ``panels`` gives each row's):
    (k, k, K)."""
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
            now, before = s[first:], s[first - lag:n - lag]
            if panels is not None:  # a lag never reaches into another panel
                same = panels[first:] == panels[first - lag:n - lag]
                now, before = now[same], before[same]
            G = now.T @ before
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


def panel_ids(labels) -> np.ndarray:
    """The panel of each row in order, 0, 1, …: a new panel where the label changes from one
    row to the next (statsmodels' ``groupidx`` of ``cov_type="hac-panel"``).

    Examples
    --------
    >>> from streamlsq.kernels.inference.timeseries import panel_ids
    >>> panel_ids(["a", "a", "b", "b", "b", "a"]).tolist()
    [0, 0, 1, 1, 1, 2]
    """
    labels = np.asarray(labels)
    if len(labels) == 0:
        return np.zeros(0, np.int64)
    return np.concatenate([[0], np.cumsum(labels[1:] != labels[:-1])]).astype(np.int64)


def panel_hac_meat(X, Y, coef, maxlags: int, panels, kernel: str = "bartlett", weights=None,
                   halo: int = 0) -> dict:
    """The part of the HAC-within-panels meat of the rows ``halo:`` of a chunk (k, k, K): as
    :func:`hac_meat`, a lag pairing row i with row i − l only when both hold the same panel
    label ``panels`` (and no other label between: a panel is a run of equal labels), and
    the chunk's rows of positive weight (``nobs``). The parts of consecutive chunks, each
    with the halo of the one before (its labels too), add up to statsmodels' ``S_nw_panel``
    of all the rows.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.inference.timeseries import panel_hac_meat
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((50, 2)), rng.standard_normal((50, 1))
    >>> b, firm = np.zeros((2, 1)), np.repeat(["a", "b", "c"], [20, 12, 18])
    >>> whole = panel_hac_meat(X, Y, b, 3, firm)["meat"]
    >>> parts = (panel_hac_meat(X[:21], Y[:21], b, 3, firm[:21])["meat"]
    ...          + panel_hac_meat(X[18:], Y[18:], b, 3, firm[18:], halo=3)["meat"])
    >>> bool(np.allclose(whole, parts))
    True
    """
    w = kernel_weights(kernel, int(maxlags))
    labels = np.asarray(panels)
    if weights is not None:  # rows of weight 0 leave the series; the others close up
        weights = np.asarray(weights, np.float64)
        kept = weights > 0
        halo = int(np.count_nonzero(kept[:halo]))
        X, Y, weights, labels = np.asarray(X)[kept], np.asarray(Y)[kept], weights[kept], \
            labels[kept]
    S = row_scores(X, Y, coef, weights)
    return {"meat": _lagged_sums(S, int(halo), w, panel_ids(labels)), "nobs": len(X) - halo}


def panel_runs(labels, rows) -> dict:
    """The runs of equal labels of consecutive rows: ``labels`` (one per run), ``starts``
    (the first row of each, taken from ``rows``) and ``counts`` (its rows).

    Examples
    --------
    >>> from streamlsq.kernels.inference.timeseries import panel_runs
    >>> runs = panel_runs(["a", "a", "b", "a"], [10, 11, 13, 14])
    >>> runs["labels"].tolist(), runs["starts"].tolist(), runs["counts"].tolist()
    (['a', 'b', 'a'], [10, 13, 14], [2, 1, 1])
    """
    labels, rows = np.asarray(labels), np.asarray(rows, np.int64)
    if len(labels) == 0:
        return {"labels": labels[:0], "starts": rows[:0], "counts": np.zeros(0, np.int64)}
    first = np.flatnonzero(np.concatenate([[True], labels[1:] != labels[:-1]]))
    return {"labels": labels[first], "starts": rows[first],
            "counts": np.diff(np.append(first, len(labels))).astype(np.int64)}


def merge_panel_runs(*parts: dict) -> dict:
    """The runs of :func:`panel_runs` of consecutive stretches of rows (in the order given)
    as the runs of all their rows: the last run of a stretch and the first of the next are
    one when their labels are equal.

    Examples
    --------
    >>> from streamlsq.kernels.inference.timeseries import merge_panel_runs, panel_runs
    >>> runs = merge_panel_runs(panel_runs(["a", "b"], [0, 1]), panel_runs(["b", "c"], [2, 3]))
    >>> runs["labels"].tolist(), runs["starts"].tolist(), runs["counts"].tolist()
    (['a', 'b', 'c'], [0, 1, 3], [1, 2, 1])
    """
    labels, starts, counts = [], [], []
    for p in parts:
        lab, sta, cnt = p["labels"], p["starts"], np.array(p["counts"], np.int64)
        if not len(lab):
            continue
        if labels and labels[-1][-1] == lab[0]:  # one panel across the boundary
            counts[-1] = counts[-1].copy()
            counts[-1][-1] += cnt[0]
            lab, sta, cnt = lab[1:], sta[1:], cnt[1:]
            if not len(lab):
                continue
        labels.append(lab)
        starts.append(sta)
        counts.append(cnt)
    if not labels:
        return {k: parts[0][k] for k in ("labels", "starts", "counts")}
    return {"labels": np.concatenate(labels), "starts": np.concatenate(starts),
            "counts": np.concatenate(counts)}


def repeated_panel(runs: dict) -> int | None:
    """The first run of :func:`merge_panel_runs` whose label an earlier run holds (a panel
    whose rows are not together), or None."""
    labels = np.asarray(runs["labels"])
    first = np.unique(labels, return_index=True)[1]
    again = np.setdiff1d(np.arange(len(labels)), first)
    return int(again.min()) if len(again) else None


def time_order_break(panels: np.ndarray, time, first: int = 1) -> int | None:
    """The first row i ≥ ``first`` (and ≥ 1) whose time label is not after the one of row
    i − 1 of the same panel (``panels``: :func:`panel_ids`), or None: the rows of a panel
    must be in strictly increasing time order."""
    time = np.asarray(time)
    if len(time) < 2:
        return None
    bad = (panels[1:] == panels[:-1]) & ~(time[1:] > time[:-1])
    bad[:max(int(first), 1) - 1] = False
    at = np.flatnonzero(bad)
    return int(at[0]) + 1 if len(at) else None


def series_hac_meat(sums: np.ndarray, maxlags: int, kernel: str = "bartlett") -> np.ndarray:
    """The HAC meat of a series of score sums (T, k, K) in time order: Driscoll and Kraay's
    meat from the sums of the periods (statsmodels' ``S_hac_groupsum``)."""
    return _lagged_sums(np.asarray(sums, np.float64), 0, kernel_weights(kernel, int(maxlags)))


def two_way_terms(meats, n_groups) -> list[tuple[np.ndarray, int, float]]:
    """The terms (meat, G, sign) of a two-way cluster covariance from the meats of the
    clusters of A, of B and of their intersection A∩B (Cameron, Gelbach & Miller 2011):
    V = V_A + V_B − V_{A∩B}."""
    return [(m, int(g), s) for m, g, s in zip(meats, n_groups, (1.0, 1.0, -1.0), strict=True)]
