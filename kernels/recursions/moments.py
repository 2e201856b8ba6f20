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
form the sums of its intervals. Within a fold, the sums of each block are taken first (the
feature sums from the block's rows while the factorisation has them in cache:
``qr_append``'s ``sums``, the normal equations' ``block_sums``; the compiled per-row kernel
adds each row's) and added to the state's block after block, so that a fold cut anywhere
gives the same bits as one fold (the contract's checks).

A form without statistics (a ridge start, a forgetting factor) keeps none of these, but a
fit of it with row weights still has to know whether any row weighed: such a form built to
count keeps ``nobs`` alone (:data:`COUNT_DIMS`, :func:`positive_rows`), the rows of
positive weight, which a forgetting factor does not discount.
"""

from __future__ import annotations

import numpy as np

__all__ = ["COUNT_DIMS", "MOMENT_DIMS", "add_moments", "moments_of_weights", "positive_rows",
           "zero_moments"]

#: the moments of a least-squares state and their dimensions
MOMENT_DIMS = {"nobs": (), "sum_weights": (), "sum_log_weights": (), "feature_sums": ("feature",)}

#: what a form without statistics keeps of its rows when it counts them: the rows of
#: positive weight
COUNT_DIMS = {"nobs": ()}


def positive_rows(weights: np.ndarray | None, n_rows: int) -> np.int64:
    """The rows of positive weight among ``n_rows`` rows (all of them when ``weights`` is
    None)."""
    if weights is None:
        return np.int64(n_rows)
    return np.int64((np.asarray(weights) > 0).sum())


def zero_moments(n_features: int) -> dict:
    """The moments of no rows (float64 sums whatever the dtype of the fit)."""
    return {"nobs": np.int64(0), "sum_weights": np.float64(0.0),
            "sum_log_weights": np.float64(0.0), "feature_sums": np.zeros(n_features)}


def moments_of_weights(weights: np.ndarray | None, n_rows: int) -> dict:
    """nobs, Σ w and Σ log w of one block of ``n_rows`` rows (all of weight 1 when
    ``weights`` is None): the moments but the feature sums."""
    if weights is None:
        return {"nobs": np.int64(n_rows), "sum_weights": np.float64(n_rows),
                "sum_log_weights": np.float64(0.0)}
    w = np.asarray(weights, np.float64)
    positive = w > 0
    return {"nobs": np.int64(positive.sum()), "sum_weights": np.float64(w.sum()),
            "sum_log_weights": np.float64(np.log(w[positive]).sum())}


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
