"""Figure 1 of the interleaved-KF4LLS paper as tidy rows, beside the expected shape.

ALGORITHMS.md §2, papers/interleaved-kf4lls.txt §3. The Monte Carlo itself is in
:mod:`~streamlsq.kernels.interleaved` (:func:`~streamlsq.kernels.interleaved.figure1_sums`,
:func:`~streamlsq.kernels.interleaved.combine_figure1_sums`,
:func:`~streamlsq.kernels.interleaved.figure1_curves`); this module turns the
curves into the study's table and the numbers its summary compares with the
paper:

* bias in units of D = mean|r_b − r_f|: birds 1 − α, fish α, penguins 0 and the
  interleaved schemes near 0 at even steps (ALGORITHMS.md quotes the
  first-order values 0.75, 0.25, 0 and, at odd steps 3 and 5, 0.15, 0.083
  (birds first) and 0.107, 0.068 (fish first) for α = 0.25);
  :func:`~streamlsq.kernels.interleaved.figure1_expected_bias` gives them for any α,
  to first order (the quoted values) and to second order (adds the O(q/n) term);
* the penguin-only MSE, an in-sample residual of least squares on t·n rows and
  q coefficients: E = σ²(1 − q/(t·n)) with σ = 1 (ALGORITHMS.md: ≈ 1 − 0.06/t).
"""

from __future__ import annotations

import numpy as np

from .interleaved import FIGURE1_SCHEMES, Figure1Curves, Figure1Parameters, figure1_expected_bias

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
    ``expected_bias_over_D`` (first order: the shape ALGORITHMS.md quotes),
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
