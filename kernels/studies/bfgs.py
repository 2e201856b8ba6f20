"""Incremental BFGS against exact least squares and LMS on streams (``docs/studies.md#bfgs``).

De Melo (2019) describes the method and publishes no experiment,
so this study asks what the method's reader would: on a stream of blocks from
a linear model, how close does each incremental regressor get to the truth and
to the least-squares fit of everything seen so far, block after block?

* A regression stream: X̃ = [1, X] with X ~ N(0, I_q), y = X̃w + σ·N(0, 1),
  w ~ N(0, I) (:func:`regression_stream`).
* A binary stream, the case the paper's class-balanced rates are for: labels
  y ∈ {0, 1} with P(y = 1) = π, features N(0, I_q) shifted by δ/√q in every
  coordinate for positives (class means δ apart), X̃ = [1, X]
  (:func:`binary_stream`); a linear regressor on the 0/1 targets classifies by
  ŷ > ½. Reference for the balanced rates: the class-weighted least-squares fit
  with weights n/m for positives and p/m for negatives over all rows seen
  (:func:`class_weighted_lstsq_path`) — the batch problem whose gradient the
  balanced step follows.

The recursions run through their ``fold`` (the Recursion contract), recording
the coefficients after every block (:func:`fold_path`).
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.linalg import as_2d, check_finite, spd_solve
from streamlsq.kernels.recursions.contract import Recursion, block_edges
from streamlsq.kernels.recursions.kf4lls import block_sums
from streamlsq.kernels.recursions.lms import LMS
from streamlsq.kernels.recursions.params import Param

__all__ = [
    "binary_study",
    "binary_stream",
    "class_weighted_lstsq_path",
    "classification_rates",
    "coefficient_distance",
    "fold_path",
    "prediction_mse",
    "regression_stream",
    "regression_study",
    "stacked_lstsq_path",
]


def _positive_int(name: str, v) -> int:
    return Param(name, 1, "A count of the study.", type=int, gt=0).check(v)


def regression_stream(
    rng: np.random.Generator, n_rows: int, n_features: int, noise: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X̃ (n, q+1) with a leading column of ones, y (n, 1), w (q+1, 1)).

    Draws w, then X, then the noise.
    """
    n_rows = _positive_int("n_rows", n_rows)
    q = _positive_int("n_features", n_features)
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    w = rng.standard_normal((q + 1, 1))
    X = np.concatenate([np.ones((n_rows, 1)), rng.standard_normal((n_rows, q))], axis=1)
    y = X @ w + noise * rng.standard_normal((n_rows, 1))
    return X, y, w


def binary_stream(
    rng: np.random.Generator,
    n_rows: int,
    n_features: int,
    positive_fraction: float = 0.1,
    separation: float = 1.5,
) -> tuple[np.ndarray, np.ndarray]:
    """(X̃ (n, q+1) with a leading column of ones, y (n, 1) in {0, 1}).

    y_i = 1 with probability ``positive_fraction``; X_i ~ N(0, I_q) plus
    ``separation``/√q in every coordinate when y_i = 1 (the class means are
    ``separation`` apart). Draws the labels, then X.
    """
    n_rows = _positive_int("n_rows", n_rows)
    q = _positive_int("n_features", n_features)
    if not 0.0 < positive_fraction < 1.0:
        raise ValueError(f"positive_fraction must be in (0, 1), got {positive_fraction!r}")
    if not np.isfinite(separation):
        raise ValueError(f"separation must be finite, got {separation!r}")
    y = (rng.random(n_rows) < positive_fraction).astype(np.float64)
    X = rng.standard_normal((n_rows, q)) + np.outer(y, np.full(q, separation / np.sqrt(q)))
    return np.concatenate([np.ones((n_rows, 1)), X], axis=1), y[:, None]


def fold_path(model: Recursion, X, Y, block_rows: int, return_state: bool = False):
    """Coefficients of ``model`` after every block of ``block_rows`` rows: (n_blocks, q+1, K).

    ``X`` is X̃ = [1, X] (leading column of ones). The stream is folded in one
    call of ``model.fold`` from ``model.init``. An :class:`~streamlsq.kernels.recursions.lms.LMS`
    model prepends its own constant column, so it gets X without the ones; its
    W (intercept first) lines up with the other models' coefficients. With
    ``return_state``: (coefs, final state).
    """
    X = np.asarray(X)
    Y = as_2d(np.asarray(Y))
    edges = block_edges(X.shape[0], _positive_int("block_rows", block_rows))
    if isinstance(model, LMS):
        X = X[:, 1:]
    state = model.init(X.shape[1], Y.shape[1])
    res = model.fold(state, X, Y, edges, 1, 1)
    return (res.coefs, res.state) if return_state else res.coefs


def stacked_lstsq_path(X, Y, block_rows: int) -> np.ndarray:
    """The least-squares fit of blocks 1..k for every k: (n_blocks, q, K), by numpy's lstsq.

    The independent reference for KF4LLS (equal to rounding, ``docs/algorithms.md#kf4lls-and-rls``)
    and the target the other incremental regressors are measured against.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = as_2d(np.asarray(Y, dtype=np.float64))
    edges = block_edges(X.shape[0], _positive_int("block_rows", block_rows))
    return np.stack([np.linalg.lstsq(X[:e], Y[:e], rcond=None)[0] for e in edges[1:]])


def _binary(Y) -> np.ndarray:
    Y = as_2d(np.asarray(Y, dtype=np.float64))
    if Y.shape[1] != 1 or not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError("Y must be one column of 0/1 labels")
    return Y[:, 0] == 1.0


def class_weighted_lstsq_path(X, Y, block_rows: int) -> np.ndarray:
    """Class-weighted least squares on blocks 1..k, for every k: (n_blocks, q, 1).

    Weights n/m for positive and p/m for negative rows, with p, n, m = p + n the
    counts over blocks 1..k (the balanced rates' weights applied to the whole
    data seen): W_k = (n/m·G₊ + p/m·G₋)⁻¹(n/m·b₊ + p/m·b₋) from the per-class
    sums G = XᵀX, b = Xᵀy accumulated block by block (a Cholesky solve). A
    prefix with one class only gets weight 1 for that class (plain least squares).
    """
    X = np.asarray(X, dtype=np.float64)
    check_finite("X", X)
    pos = _binary(Y)
    y = pos.astype(np.float64)[:, None]
    edges = block_edges(X.shape[0], _positive_int("block_rows", block_rows))
    q = X.shape[1]
    G = {True: np.zeros((q, q)), False: np.zeros((q, q))}
    b = {True: np.zeros((q, 1)), False: np.zeros((q, 1))}
    count = {True: 0, False: 0}
    out = np.empty((edges.size - 1, q, 1))
    for k in range(edges.size - 1):
        sl = slice(int(edges[k]), int(edges[k + 1]))
        for cls in (True, False):
            rows = pos[sl] == cls
            Gc, bc = block_sums(X[sl][rows], y[sl][rows])
            G[cls] = G[cls] + Gc
            b[cls] = b[cls] + bc
            count[cls] += int(rows.sum())
        p, n = count[True], count[False]
        w_pos, w_neg = (n / (p + n), p / (p + n)) if p and n else (1.0, 1.0)
        out[k] = spd_solve(w_pos * G[True] + w_neg * G[False], w_pos * b[True] + w_neg * b[False])
    return out


def coefficient_distance(coefs, reference) -> np.ndarray:
    """‖W_k − R_k‖_F per block for paths (…, n_blocks, q, K) and a reference (broadcast)."""
    D = np.asarray(coefs, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return np.sqrt((D**2).sum(axis=(-2, -1)))


def prediction_mse(coefs, X_test, Y_test) -> np.ndarray:
    """Mean squared prediction error on a test set for every W in ``coefs`` (…, q, K)."""
    X_test = np.asarray(X_test, dtype=np.float64)
    Y_test = as_2d(np.asarray(Y_test, dtype=np.float64))
    pred = np.einsum("nq,...qk->...nk", X_test, np.asarray(coefs, dtype=np.float64))
    return np.mean((pred - Y_test) ** 2, axis=(-2, -1))


def classification_rates(coefs, X_test, Y_test, threshold: float = 0.5) -> dict[str, np.ndarray]:
    """Rates of the rule ŷ > threshold on 0/1 labels, for every W in ``coefs`` (…, q, 1).

    ``tpr`` (recall of positives), ``tnr`` (of negatives), ``balanced_accuracy``
    = (tpr + tnr)/2 and ``accuracy``. The test set needs both classes.
    """
    pos = _binary(Y_test)
    if pos.all() or not pos.any():
        raise ValueError("the test set needs both classes")
    X_test = np.asarray(X_test, dtype=np.float64)
    pred = np.einsum("nq,...qk->...nk", X_test, np.asarray(coefs, dtype=np.float64))[..., 0]
    hit = pred > threshold
    tpr = hit[..., pos].mean(axis=-1)
    tnr = (~hit[..., ~pos]).mean(axis=-1)
    return {
        "tpr": tpr,
        "tnr": tnr,
        "balanced_accuracy": 0.5 * (tpr + tnr),
        "accuracy": (hit == pos).mean(axis=-1),
    }


def regression_study(
    rng: np.random.Generator,
    n_streams: int,
    methods: dict[str, Recursion],
    n_blocks: int = 60,
    block_rows: int = 50,
    n_features: int = 10,
    noise: float = 1.0,
    n_test: int = 1000,
) -> dict[str, np.ndarray]:
    """Every method on ``n_streams`` fresh regression streams; errors after every block.

    Stream s draws (:func:`regression_stream`) n_blocks·block_rows training rows,
    then ``n_test`` test rows from the same w, from ``rng`` in order. Returns
    arrays (n_streams, len(methods), n_blocks): ``error_to_truth`` ‖W_k − w‖,
    ``distance_to_lstsq`` ‖W_k − W_LS,k‖ (W_LS,k: :func:`stacked_lstsq_path`),
    ``test_mse``; ``lstsq_error_to_truth`` (n_streams, n_blocks); and
    ``inverse_hessian_ratio`` (n_streams, len(methods)): for a method whose
    state keeps an inverse-Hessian approximation ``B`` (BFGS), tr(B) after the
    last block over tr(H⁻¹) of least squares on all rows, H = X̃ᵀX̃ (how far B
    is from the curvature of everything seen; NaN for other methods).
    """
    n_streams = _positive_int("n_streams", n_streams)
    n_rows = _positive_int("n_blocks", n_blocks) * _positive_int("block_rows", block_rows)
    names = list(methods)
    shape = (n_streams, len(names), int(n_blocks))
    out = {k: np.empty(shape) for k in ("error_to_truth", "distance_to_lstsq", "test_mse")}
    out["lstsq_error_to_truth"] = np.empty((n_streams, int(n_blocks)))
    out["inverse_hessian_ratio"] = np.full((n_streams, len(names)), np.nan)
    for s in range(n_streams):
        X, y, w = regression_stream(rng, n_rows + n_test, n_features, noise)
        Xtr, ytr, Xte, yte = X[:n_rows], y[:n_rows], X[n_rows:], y[n_rows:]
        ls = stacked_lstsq_path(Xtr, ytr, block_rows)
        out["lstsq_error_to_truth"][s] = coefficient_distance(ls, w)
        G, _ = block_sums(Xtr, ytr)
        h_inv_trace = float(np.trace(spd_solve(G, np.eye(G.shape[0]))))
        for m, name in enumerate(names):
            path, state = fold_path(methods[name], Xtr, ytr, block_rows, return_state=True)
            if "B" in state:
                out["inverse_hessian_ratio"][s, m] = float(np.trace(state["B"])) / h_inv_trace
            out["error_to_truth"][s, m] = coefficient_distance(path, w)
            out["distance_to_lstsq"][s, m] = coefficient_distance(path, ls)
            out["test_mse"][s, m] = prediction_mse(path, Xte, yte)
    return out


def binary_study(
    rng: np.random.Generator,
    n_streams: int,
    methods: dict[str, Recursion],
    n_blocks: int = 40,
    block_rows: int = 100,
    n_features: int = 5,
    positive_fraction: float = 0.1,
    separation: float = 1.5,
    n_test: int = 2000,
) -> dict[str, np.ndarray]:
    """Every method on ``n_streams`` fresh binary streams; classification after every block.

    Stream s draws (:func:`binary_stream`) n_blocks·block_rows training rows,
    then ``n_test`` test rows, from ``rng`` in order. The class-weighted
    least-squares path (:func:`class_weighted_lstsq_path`) is added as the last
    method, ``"weighted_lstsq"``. Returns arrays (n_streams, len(methods) + 1,
    n_blocks): ``tpr``, ``tnr``, ``balanced_accuracy``, ``accuracy`` of ŷ > ½
    on the test rows, and ``distance_to_weighted_lstsq``.
    """
    n_streams = _positive_int("n_streams", n_streams)
    n_rows = _positive_int("n_blocks", n_blocks) * _positive_int("block_rows", block_rows)
    names = list(methods)
    shape = (n_streams, len(names) + 1, int(n_blocks))
    keys = ("tpr", "tnr", "balanced_accuracy", "accuracy", "distance_to_weighted_lstsq")
    out = {k: np.empty(shape) for k in keys}
    for s in range(n_streams):
        X, y = binary_stream(rng, n_rows + n_test, n_features, positive_fraction, separation)
        Xtr, ytr, Xte, yte = X[:n_rows], y[:n_rows], X[n_rows:], y[n_rows:]
        ref = class_weighted_lstsq_path(Xtr, ytr, block_rows)
        paths = [fold_path(methods[name], Xtr, ytr, block_rows) for name in names] + [ref]
        for m, path in enumerate(paths):
            for k, v in classification_rates(path, Xte, yte).items():
                out[k][s, m] = v
            out["distance_to_weighted_lstsq"][s, m] = coefficient_distance(path, ref)
    return out
