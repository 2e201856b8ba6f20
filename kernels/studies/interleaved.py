"""Figure 1 of the interleaved-KF4LLS paper as tidy rows, beside the expected shape.

John & Wu (2023), §3; ``docs/studies.md#interleaved``. The Monte Carlo itself is in
:func:`figure1_sums`, :func:`combine_figure1_sums` and :func:`figure1_curves`; this
module also turns the curves into the study's table and the numbers its summary
compares with the paper:

* bias in units of D = mean|r_b − r_f|: birds 1 − α, fish α, penguins 0 and the
  interleaved schemes near 0 at even steps (``docs/studies.md#interleaved`` gives the
  first-order values 0.75, 0.25, 0 and, at odd steps 3 and 5, 0.15, 0.083
  (birds first) and 0.107, 0.068 (fish first) for α = 0.25);
  :func:`figure1_expected_bias` gives them for any α,
  to first order (the quoted values) and to second order (adds the O(q/n) term);
* the penguin-only MSE, an in-sample residual of least squares on t·n rows and
  q coefficients: E = σ²(1 − q/(t·n)) with σ = 1 (≈ 1 − 0.06/t).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from streamlsq.kernels.recursions.interleaved import validate_alpha
from streamlsq.kernels.synthetic.interleaved import (
    Figure1Parameters,
    figure1_draw,
    figure1_parameters,
)

__all__ = ["figure1_findings", "figure1_records", "penguin_expected_mse"]


def penguin_expected_mse(n: int, q: int, steps: int, noise_sd: float = 1.0) -> np.ndarray:
    """E[MSE] of the penguin-only scheme per step: σ²(1 − q/(t·n)), t = 1..steps.

    The scheme fits raw penguin blocks 1..t by least squares and is tested on
    the same rows, so its MSE is the in-sample residual mean square, whose
    expectation is σ²(n_rows − q)/n_rows.
    """
    n, q, steps = int(n), int(q), int(steps)
    if n < 1 or q < 0 or steps < 1 or not noise_sd >= 0:
        raise ValueError(f"need n >= 1, q >= 0, steps >= 1, noise_sd >= 0; got {n}, {q}, "
                         f"{steps}, {noise_sd}")
    t = np.arange(1, steps + 1)
    return noise_sd**2 * (1.0 - q / (t * n))


def figure1_records(curves: Figure1Curves, params: Figure1Parameters) -> list[dict]:
    """One row per (scheme, step): the measured curves, in units of D too, and theory.

    Columns: ``scheme, step, bias, bias_se, mse, mse_se`` (as
    :meth:`Figure1Curves.records`), ``bias_over_D``, ``bias_se_over_D``,
    ``expected_bias_over_D`` (first order: the shape of the paper's figure),
    ``expected_bias_over_D_2nd`` (second order) and ``z`` = (bias_over_D −
    expected 2nd order) / bias_se_over_D (how many standard errors apart).
    """
    first = figure1_expected_bias(params.alpha, params.q, params.n, params.steps, order=1)
    second = figure1_expected_bias(params.alpha, params.q, params.n, params.steps, order=2)
    D = curves.D
    rows = []
    for rec in curves.records():
        i = FIGURE1_SCHEMES.index(rec["scheme"])
        j = rec["step"] - 1
        b, se = rec["bias"] / D, rec["bias_se"] / D
        rows.append(
            {
                **rec,
                "bias_over_D": b,
                "bias_se_over_D": se,
                "expected_bias_over_D": float(first[i, j]),
                "expected_bias_over_D_2nd": float(second[i, j]),
                "z": (b - float(second[i, j])) / se if se > 0 else 0.0,
            }
        )
    return rows


def figure1_findings(curves: Figure1Curves, params: Figure1Parameters) -> dict:
    """The numbers the study's summary puts beside the paper's shape.

    Returns a dict with, per single-population scheme, the mean over steps of
    bias/D and the largest standard error (``birds``, ``fish``, ``penguins``);
    for the interleaved schemes the bias/D at every step (``interleaved``:
    {scheme: list}), the first- and second-order expectations (``expected``,
    ``expected_2nd``: {scheme: list}) and the mean |bias/D − expectation| over
    the interleaved entries (``mean_abs_dev_first_order``,
    ``mean_abs_dev_second_order``); ``even_steps_max_abs_diff``: the largest
    |ψ̄_birds-first − ψ̄_fish-first| over even steps and coordinates (the two
    orders coincide there, Lemma 1); ``penguin_mse``, ``penguin_mse_se`` and
    ``penguin_mse_expected`` per step; ``D`` and ``n_iter``.
    """
    D = curves.D
    first = figure1_expected_bias(params.alpha, params.q, params.n, params.steps, order=1)
    second = figure1_expected_bias(params.alpha, params.q, params.n, params.steps, order=2)
    out: dict = {"D": D, "n_iter": curves.n_iter}
    for i, name in enumerate(FIGURE1_SCHEMES[:3]):
        out[name] = {
            "bias_over_D": float(np.mean(curves.bias[i] / D)),
            "max_se_over_D": float(np.max(curves.bias_se[i] / D)),
            "expected": float(np.mean(first[i])),
        }
    out["interleaved"] = {s: (curves.bias[3 + k] / D).tolist()
                          for k, s in enumerate(FIGURE1_SCHEMES[3:])}
    out["interleaved_se"] = {s: (curves.bias_se[3 + k] / D).tolist()
                             for k, s in enumerate(FIGURE1_SCHEMES[3:])}
    out["expected"] = {s: first[3 + k].tolist() for k, s in enumerate(FIGURE1_SCHEMES[3:])}
    out["expected_2nd"] = {s: second[3 + k].tolist() for k, s in enumerate(FIGURE1_SCHEMES[3:])}
    measured = curves.bias[3:] / D
    out["mean_abs_dev_first_order"] = float(np.mean(np.abs(measured - first[3:])))
    out["mean_abs_dev_second_order"] = float(np.mean(np.abs(measured - second[3:])))
    even = slice(1, None, 2)
    diff = np.abs(curves.psi_mean[3, even] - curves.psi_mean[4, even])
    out["even_steps_max_abs_diff"] = float(diff.max()) if diff.size else 0.0
    out["penguin_mse"] = curves.mse[2].tolist()
    out["penguin_mse_se"] = curves.mse_se[2].tolist()
    out["penguin_mse_expected"] = penguin_expected_mse(params.n, params.q, params.steps).tolist()
    return out


# ---------------------------------------------------------------------------
# Figure 1: vectorised Monte Carlo
# ---------------------------------------------------------------------------
#: the five training schemes of Figure 1, in the order of every (scheme, ...) axis
FIGURE1_SCHEMES = (
    "birds",
    "fish",
    "penguins",
    "interleaved_birds_first",
    "interleaved_fish_first",
)


@dataclass
class Figure1Sums:
    """Per-(scheme, step) sums over Monte-Carlo iterations; add batches with ``+``.

    Deviations are taken from r_p (d = ψ − r_p) so that the sums of squares
    do not cancel. Shapes: ``dpsi_sum``, ``dpsi_sq_sum`` (5, steps, q);
    ``mse_sum``, ``mse_sq_sum`` (5, steps); ``count`` the number of iterations.
    """

    count: int
    dpsi_sum: np.ndarray
    dpsi_sq_sum: np.ndarray
    mse_sum: np.ndarray
    mse_sq_sum: np.ndarray

    @classmethod
    def zeros(cls, steps: int, q: int) -> Figure1Sums:
        S = len(FIGURE1_SCHEMES)
        return cls(
            0,
            np.zeros((S, steps, q)),
            np.zeros((S, steps, q)),
            np.zeros((S, steps)),
            np.zeros((S, steps)),
        )

    def __add__(self, other: Figure1Sums) -> Figure1Sums:
        if self.dpsi_sum.shape != other.dpsi_sum.shape:
            raise ValueError(
                f"cannot combine sums of shapes {self.dpsi_sum.shape} and "
                f"{other.dpsi_sum.shape} (different steps or q)"
            )
        return Figure1Sums(
            self.count + other.count,
            self.dpsi_sum + other.dpsi_sum,
            self.dpsi_sq_sum + other.dpsi_sq_sum,
            self.mse_sum + other.mse_sum,
            self.mse_sq_sum + other.mse_sq_sum,
        )


def _batched_kf4lls(Xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    """KF4LLS from H₀ = 0 on stacks of independent problems; ψ after each block.

    ``Xs[t]`` is (N, n, q), ``ys[t]`` (N, n). The same step as
    :func:`~streamlsq.kernels.recursions.kf4lls.kf4lls_update`, batched over the leading
    axis with ``np.linalg.solve`` on the stack (LU; H is SPD here because every
    first block has n ≥ q + 2 rows from a continuous distribution).
    """
    N, _, q = Xs[0].shape
    H = np.zeros((N, q, q))
    psi = np.zeros((N, q))
    out = np.empty((N, len(Xs), q))
    for t, (X, y) in enumerate(zip(Xs, ys, strict=True)):
        Xt = np.swapaxes(X, 1, 2)
        H = H + Xt @ X
        H = 0.5 * (H + np.swapaxes(H, 1, 2))
        resid = y - (X @ psi[..., None])[..., 0]
        psi = psi + np.linalg.solve(H, Xt @ resid[..., None])[..., 0]
        out[:, t] = psi
    return out


def figure1_fit(data: dict, params: Figure1Parameters) -> tuple[np.ndarray, np.ndarray]:
    """ψ and test MSE of the five schemes for every iteration and step.

    Returns ``psi`` (N, 5, steps, q) and ``mse`` (N, 5, steps), schemes in the
    order of :data:`FIGURE1_SCHEMES`. Birds/fish/penguins: KF4LLS on the raw
    blocks 1..steps; interleaved: blocks 1..⌈steps/2⌉ of U and V (the same rows
    as the single-population schemes), centred and scaled, alternating.
    MSE at step t: mean squared residual of raw penguin blocks 1..t under ψ_t.
    """
    U, V, Z, b, f, p = (data[k] for k in ("U", "V", "Z", "b", "f", "p"))
    N, T = U.shape[:2]
    a = params.alpha
    wa, wb = np.sqrt(a), np.sqrt(1 - a)
    Uc = wa * (U - U.mean(axis=2, keepdims=True))
    bc = wa * (b - b.mean(axis=2, keepdims=True))
    Vc = wb * (V - V.mean(axis=2, keepdims=True))
    fc = wb * (f - f.mean(axis=2, keepdims=True))
    half = [(t // 2) for t in range(T)]  # block index (0-based) of step t+1 in its population

    def interleaved(first, second):
        (X1, y1), (X2, y2) = first, second
        Xs = [(X1 if t % 2 == 0 else X2)[:, half[t]] for t in range(T)]
        ys = [(y1 if t % 2 == 0 else y2)[:, half[t]] for t in range(T)]
        return _batched_kf4lls(Xs, ys)

    psi = np.stack(
        [
            _batched_kf4lls([U[:, t] for t in range(T)], [b[:, t] for t in range(T)]),
            _batched_kf4lls([V[:, t] for t in range(T)], [f[:, t] for t in range(T)]),
            _batched_kf4lls([Z[:, t] for t in range(T)], [p[:, t] for t in range(T)]),
            interleaved((Uc, bc), (Vc, fc)),
            interleaved((Vc, fc), (Uc, bc)),
        ],
        axis=1,
    )
    mse = np.empty((N, len(FIGURE1_SCHEMES), T))
    n = U.shape[2]
    for t in range(T):
        Zt = Z[:, : t + 1].reshape(N, (t + 1) * n, -1)  # raw penguin blocks 1..t+1
        pt = p[:, : t + 1].reshape(N, (t + 1) * n)
        pred = Zt @ np.swapaxes(psi[:, :, t], 1, 2)  # (N, rows, schemes)
        mse[:, :, t] = np.mean((pt[..., None] - pred) ** 2, axis=1)
    return psi, mse


def figure1_sums(
    rng: np.random.Generator, n_iter: int, params: Figure1Parameters, batch_size: int = 256
) -> Figure1Sums:
    """Simulate ``n_iter`` iterations (vectorised, ``batch_size`` at a time) and sum them.

    This is the unit of work to spread over workers: give each its own
    generator and add the results with ``+`` or :func:`combine_figure1_sums`.
    Iteration i draws the same numbers from a generator in the same state
    whatever ``batch_size`` is, so the sums do not depend on it (to rounding).
    """
    n_iter, batch_size = int(n_iter), int(batch_size)
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    total = Figure1Sums.zeros(params.steps, params.q)
    r_p = params.r_p
    done = 0
    while done < n_iter:
        m = min(batch_size, n_iter - done)
        psi, mse = figure1_fit(figure1_draw(rng, m, params), params)
        d = psi - r_p
        total = total + Figure1Sums(
            m, d.sum(axis=0), (d**2).sum(axis=0), mse.sum(axis=0), (mse**2).sum(axis=0)
        )
        done += m
    return total


def combine_figure1_sums(sums: Iterable[Figure1Sums]) -> Figure1Sums:
    """Add the sums of several batches (any order; the result is one batch's sums)."""
    sums = list(sums)
    if not sums:
        raise ValueError("combine_figure1_sums needs at least one Figure1Sums")
    total = sums[0]
    for s in sums[1:]:
        total = total + s
    return total


@dataclass
class Figure1Curves:
    """The plotted curves: per scheme (axis 0, :data:`FIGURE1_SCHEMES`) and step (axis 1).

    ``bias`` = mean over coordinates of |mean over iterations of ψ − r_p|;
    ``bias_se`` = mean over coordinates of the standard error of that mean, an
    upper bound on the Monte-Carlo standard error of ``bias`` (|·| is
    1-Lipschitz and the sd of an average is at most the average sd).
    ``mse`` = mean over iterations of the test MSE, ``mse_se`` its standard
    error. ``D`` = mean|r_b − r_f|.
    """

    schemes: tuple[str, ...]
    steps: np.ndarray
    bias: np.ndarray
    bias_se: np.ndarray
    mse: np.ndarray
    mse_se: np.ndarray
    psi_mean: np.ndarray
    D: float
    n_iter: int

    def records(self) -> list[dict]:
        """One dict per (scheme, step): the tidy rows of the study's CSV table."""
        return [
            {
                "scheme": s,
                "step": int(t),
                "bias": float(self.bias[i, j]),
                "bias_se": float(self.bias_se[i, j]),
                "mse": float(self.mse[i, j]),
                "mse_se": float(self.mse_se[i, j]),
            }
            for i, s in enumerate(self.schemes)
            for j, t in enumerate(self.steps)
        ]


def figure1_curves(sums: Figure1Sums, params: Figure1Parameters) -> Figure1Curves:
    """Turn (combined) sums into the Figure 1 curves and their standard errors."""
    N = sums.count
    if N < 2:
        raise ValueError(f"need at least 2 iterations for curves and errors, got {N}")
    dmean = sums.dpsi_sum / N
    dvar = np.maximum(sums.dpsi_sq_sum / N - dmean**2, 0.0) * (N / (N - 1))
    mse = sums.mse_sum / N
    mvar = np.maximum(sums.mse_sq_sum / N - mse**2, 0.0) * (N / (N - 1))
    return Figure1Curves(
        schemes=FIGURE1_SCHEMES,
        steps=np.arange(1, params.steps + 1),
        bias=np.abs(dmean).mean(axis=2),
        bias_se=np.sqrt(dvar / N).mean(axis=2),
        mse=mse,
        mse_se=np.sqrt(mvar / N),
        psi_mean=dmean + params.r_p,
        D=params.D,
        n_iter=N,
    )


@dataclass
class Figure1Result:
    """Output of :func:`interleaved_figure1`: settings, raw sums and curves."""

    params: Figure1Parameters
    sums: Figure1Sums
    curves: Figure1Curves
    expected_bias: np.ndarray


def interleaved_figure1(
    rng: np.random.Generator, n_iter: int, *, batch_size: int = 256, **settings
) -> Figure1Result:
    """The Figure 1 study of the paper (``docs/studies.md#interleaved``), vectorised over runs.

    Draws the settings once from ``rng`` (:func:`figure1_parameters`, whose keywords
    ``alpha, n, q, steps, r_b, r_f, mu1, mu2`` are the ``settings``), then ``n_iter``
    iterations from the same generator (:func:`figure1_sums`), and returns the sums, the
    curves and the second-order theoretical bias (:func:`figure1_expected_bias` × D). To
    split iterations over workers, call :func:`figure1_parameters` once,
    :func:`figure1_sums` per worker with its own generator, then
    :func:`combine_figure1_sums` and :func:`figure1_curves`.
    """
    params = figure1_parameters(rng, **settings)
    sums = figure1_sums(rng, n_iter, params, batch_size=batch_size)
    expected = figure1_expected_bias(params.alpha, params.q, params.n, params.steps) * params.D
    return Figure1Result(params, sums, figure1_curves(sums, params), expected)


def _interleaved_coefficient(alpha, nu_a, nu_b, q, order):
    """c with E ψ = c·r_b + (1−c)·r_f for centred Wishart(I, ν) Grams of A and B.

    c = E tr[(αW_A + (1−α)W_B)⁻¹ αW_A]/q. First order (ratio of expectations):
    a' = αν_A/(αν_A + (1−α)ν_B). Second order, from W = ν(I + X), E X² = (q+1)/ν·I
    and (I + Y)⁻¹ ≈ I − Y + Y²:  c ≈ a'(1 + b'(b' s_B − a' s_A)), s = (q+1)/ν, b' = 1 − a'.
    """
    a = alpha * nu_a
    b = (1 - alpha) * nu_b
    a1 = a / (a + b)
    b1 = 1.0 - a1
    if order == 1:
        return a1
    s_a = (q + 1) / nu_a if nu_a > 0 else 0.0
    s_b = (q + 1) / nu_b if nu_b > 0 else 0.0
    return a1 * (1 + b1 * (b1 * s_b - a1 * s_a))


def figure1_expected_bias(alpha: float, q: int, n: int, steps: int, order: int = 2) -> np.ndarray:
    """Expected Figure 1 bias per (scheme, step), in units of D = mean|r_b − r_f|.

    Under the study's design (rows N(μ1, I), unit noise) E ψ − r_p is a scalar
    multiple of r_b − r_f for every scheme, so the bias is |c − α|·D with:
    birds 1 − α, fish α, penguins 0 (exact: unbiased least squares); interleaved
    |c_t − α| where c_t is the coefficient for the Grams seen after step t
    (ν = (n − 1) per centred block), computed to ``order`` 1 (the ratio of
    expectations; the values given in ``docs/studies.md#interleaved``, e.g. 0.15 and 0.083 at
    steps 3 and 5 with birds first, 0 at even steps) or 2 (adds the O(q/n)
    term from the Wishart second moment; e.g. ≈ 0.0066 at step 2 for α = 0.25,
    q = 6, n = 100). The neglected remainder is O((q/n)²).
    """
    a = validate_alpha(alpha)
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    out = np.zeros((len(FIGURE1_SCHEMES), int(steps)))
    out[0] = 1 - a
    out[1] = a
    for t in range(1, int(steps) + 1):
        first, second = (t + 1) // 2, t // 2  # blocks of the starting / other population
        for row, (blocks_a, blocks_b) in ((3, (first, second)), (4, (second, first))):
            nu_a, nu_b = blocks_a * (n - 1), blocks_b * (n - 1)
            out[row, t - 1] = abs(_interleaved_coefficient(a, nu_a, nu_b, q, order) - a)
    return out
