"""Row weights and the moments a least-squares fit keeps for its statistics.

Precision weights w ≥ 0 enter a least-squares recursion as statsmodels' ``WLS`` takes
them: row i is scaled by √wᵢ before the factorisation, so that the fit minimises
Σ wᵢ‖yᵢ − xᵢᵀψ‖². A row of weight 0 contributes nothing: it is how a row with a missing
value is dropped without changing the block it belongs to (its block is one row shorter
in effect, not in the numbering of the stream).

Besides the factor of the weighted rows, the statistics of the fit need a few plain sums
over the rows of positive weight (``docs/inference.md``):

    nobs = #{i : wᵢ > 0},   Σ wᵢ,   Σ log wᵢ (over wᵢ > 0),   s = Σ wᵢ xᵢ

(nobs for the degrees of freedom, Σ log w for the log-likelihood of ``WLS``, Σ w and s
to tell whether a constant lies in the span of the columns: statsmodels' ``k_constant``).
They are additive, so a fold adds the sums of its blocks in stream order and the scan
form the sums of its intervals. Within a fold, the sums of each block are taken first and
added to the state's block after block, so that a fold cut anywhere gives the same bits as
one fold (the contract's checks).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MOMENT_DIMS", "add_moments", "check_weights", "moments_of_rows", "zero_moments"]

#: the moments of a least-squares state and their dimensions
MOMENT_DIMS = {"nobs": (), "sum_weights": (), "sum_log_weights": (), "feature_sums": ("feature",)}


def zero_moments(n_features: int) -> dict:
    """The moments of no rows (float64 sums whatever the dtype of the fit)."""
    return {"nobs": np.int64(0), "sum_weights": np.float64(0.0),
            "sum_log_weights": np.float64(0.0), "feature_sums": np.zeros(n_features)}


def check_weights(weights, n_rows: int) -> np.ndarray | None:
    """``weights`` as a 1-D float64 array of ``n_rows`` finite values ≥ 0 (None stays None);
    ``ValueError`` naming the first bad row otherwise (the pipeline names store and chunk
    before the kernel sees the rows).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.moments import check_weights
    >>> check_weights([1.0, 0.0, 2.5], 3).tolist()
    [1.0, 0.0, 2.5]
    >>> check_weights([1.0, -1.0], 2)
    Traceback (most recent call last):
    ...
    ValueError: weights must be finite and >= 0: row 1 has -1.0
    """
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n_rows,):
        raise ValueError(f"weights must have one value per row ({n_rows}), got shape {w.shape}")
    bad = ~(np.isfinite(w) & (w >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"weights must be finite and >= 0: row {i} has {w[i].item()!r}")
    return w


def _block_sums(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Σ of ``values`` over each block (rows ``edges[j]:edges[j+1]``), one row per block;
    an empty block sums to 0."""
    starts = edges[:-1]
    sizes = np.diff(edges)
    out = np.zeros((len(starts),) + values.shape[1:], dtype=values.dtype)
    full = sizes > 0
    if full.any():
        out[full] = np.add.reduceat(values, starts[full], axis=0)
    return out


def moments_of_rows(X: np.ndarray, weights: np.ndarray | None, edges=None) -> list[dict]:
    """The moments of each block of rows (``edges``: their offsets; None: one block),
    as they are added to a state: :data:`MOMENT_DIMS` without weights is nobs = rows, Σ w
    = rows, Σ log w = 0 and s the column sums.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.moments import moments_of_rows
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> m = moments_of_rows(X, np.array([1.0, 0.0, 2.0]))[0]
    >>> int(m["nobs"]), float(m["sum_weights"]), m["feature_sums"].tolist()
    (2, 3.0, [11.0, 14.0])
    """
    edges = np.array([0, X.shape[0]], np.int64) if edges is None else np.asarray(edges,
                                                                                  np.int64)
    dtype = np.dtype(np.float64)  # the moments are float64 sums whatever the data's dtype
    X = np.asarray(X, dtype)
    if weights is None:
        sizes = np.diff(edges)
        nobs, sw, slog = sizes, sizes.astype(dtype), np.zeros(len(sizes), dtype)
        sums = _block_sums(X, edges)
    else:
        w = np.asarray(weights, dtype)
        positive = w > 0
        nobs = _block_sums(positive.astype(np.int64), edges)
        sw = _block_sums(w, edges)
        slog = _block_sums(np.log(np.where(positive, w, 1)), edges)
        sums = _block_sums(X * w[:, None], edges)
    return [{"nobs": np.int64(nobs[j]), "sum_weights": dtype.type(sw[j]),
             "sum_log_weights": dtype.type(slog[j]), "feature_sums": sums[j]}
            for j in range(len(edges) - 1)]


def add_moments(total: dict, *blocks: dict) -> dict:
    """``total`` plus the moments of ``blocks``, added one after another in their order."""
    out = {k: (np.array(total[k], copy=True) if np.ndim(total[k]) else total[k])
           for k in MOMENT_DIMS}
    for b in blocks:
        out["nobs"] = np.int64(out["nobs"] + b["nobs"])
        out["sum_weights"] = out["sum_weights"] + b["sum_weights"]
        out["sum_log_weights"] = out["sum_log_weights"] + b["sum_log_weights"]
        out["feature_sums"] = out["feature_sums"] + b["feature_sums"]
    return out
