"""Study ``lms``: the sample-by-sample paper's demonstration and convergence to least squares.

The sample-by-sample lecture notes, ``docs/studies.md#lms``; the math is in
:mod:`streamlsq.kernels.studies.lms` (data, LMS runs, least squares, errors).

1. Demonstration (one cloud per seed, as the paper): 100 samples, a line
   (curvature 0) and the curved cloud (curvature 0.05) sharing x and noise;
   LMS from W = 0 for each step size, 20 epochs in stored order; the weights
   after every update, the fits after 1 and 20 epochs, the least-squares line.
2. Convergence (Monte Carlo): on many fresh clouds, the distance of W to that
   cloud's least-squares W_LS at the end of every epoch, for the constant
   step sizes and one decreasing schedule ρ₀/(1 + k/τ). Clouds are drawn in
   batches of :data:`BATCH_CLOUDS` mapped over the Dask cluster.

Outputs: ``demonstration.csv`` (``curvature, rate, update, epoch, w0, w1``),
``fits.csv``, ``convergence.csv`` (``curvature, schedule, epoch, metric, mean,
std, median, p05, p95``), ``demonstration.png``, ``convergence.png``,
``summary.md``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from streamlsq.errors import InputError
from streamlsq.studies import common
from streamlsq.studies.common import StudyOutput, StudyResult, fmt

__all__ = ["BATCH_CLOUDS", "lms_convergence_table", "lms_demonstration", "plot_convergence",
           "plot_demonstration", "run_lms"]

#: clouds per Dask task (fixed: the tables must not depend on the worker count)
BATCH_CLOUDS = 25
FULL = {"clouds": 200, "epochs": 200}
QUICK = {"clouds": 20, "epochs": 20}
DEFAULT_RATES = (0.001, 0.005, 0.01)
DEMO_EPOCHS = (1, 20)
CURVATURES = (0.0, 0.05)
#: τ of the decreasing schedule ρ₀/(1 + k/τ), in updates (10 epochs of 100 samples)
DECREASING_TAU = 1000.0
_TAG_DEMO = 0x1C1
_TAG_CLOUDS = 0x1C2
_CURVE_NAME = {0.0: "line", 0.05: "curved"}


def _schedules(rates: Sequence[float]):
    from streamlsq.kernels.recursions.lms import StepSchedule

    out = {f"constant {r:g}": StepSchedule("constant", float(r)) for r in rates}
    top = float(max(rates))
    out[f"decreasing {top:g}/(1+k/{DECREASING_TAU:g})"] = StepSchedule(
        "inverse", top, tau=DECREASING_TAU)
    return out


def lms_demonstration(seed: int = 0, rates: Sequence[float] = DEFAULT_RATES,
                      epochs: int = max(DEMO_EPOCHS)):
    """The paper's demonstration on one cloud per curvature (computed here, it is tiny).

    Returns (weights, fits, clouds): ``weights`` one row per (curvature, rate,
    update) with w0, w1; ``fits`` one row per (curvature, rate, epochs) in
    :data:`DEMO_EPOCHS` with the fit, W_LS, distance and excess MSE (plus the
    least-squares line itself as rate NaN); ``clouds`` {curvature: (X, T)}.
    Raises InputError when a step size makes LMS diverge on this data.
    """
    from streamlsq.kernels.recursions.lms import StepSchedule
    from streamlsq.kernels.studies.lms import (
        excess_mse,
        least_squares_line,
        lms_trajectory,
        paper_cloud,
    )

    seed = common.check_seed(seed)
    rates = common.check_option("lms", "rates", rates)
    weights, fits, clouds = [], [], {}
    for curvature in CURVATURES:
        # the same generator state for both clouds: they share x and the noise
        X, T = paper_cloud(np.random.default_rng([seed, _TAG_DEMO]), curvature=curvature)
        clouds[curvature] = (X, T)
        W_ls = least_squares_line(X, T)
        n = X.shape[0]
        fits.append({"curvature": curvature, "rate": np.nan, "epochs": 0, "w0": W_ls[0, 0],
                     "w1": W_ls[1, 0], "ls_w0": W_ls[0, 0], "ls_w1": W_ls[1, 0],
                     "distance_to_ls": 0.0, "excess_mse": 0.0})
        for rate in rates:
            try:
                updates, W = lms_trajectory(X, T, StepSchedule("constant", rate), epochs)
            except ValueError as exc:
                raise InputError(f"study lms: step size {rate:g}: {exc}") from None
            weights.append(pd.DataFrame({
                "curvature": curvature, "rate": rate, "update": updates,
                "epoch": updates / n, "w0": W[:, 0, 0], "w1": W[:, 1, 0]}))
            for e in DEMO_EPOCHS:
                if e > epochs:
                    continue
                We = W[e * n]
                fits.append({
                    "curvature": curvature, "rate": rate, "epochs": e, "w0": We[0, 0],
                    "w1": We[1, 0], "ls_w0": W_ls[0, 0], "ls_w1": W_ls[1, 0],
                    "distance_to_ls": float(np.sqrt(((We - W_ls) ** 2).sum())),
                    "excess_mse": float(excess_mse(We, X, T, W_ls)),
                })
    return pd.concat(weights, ignore_index=True), pd.DataFrame(fits), clouds


def _convergence_batch(seed: int, index: int, n_clouds: int, schedules, epochs: int):
    from streamlsq.kernels.studies.lms import PAPER_N_SAMPLES, lms_convergence

    record = np.arange(epochs + 1) * PAPER_N_SAMPLES  # the end of every epoch
    out = {}
    for curvature in CURVATURES:
        # the same clouds (x and noise) for both curvatures
        rng = np.random.default_rng([seed, _TAG_CLOUDS, index])
        out[curvature] = lms_convergence(rng, n_clouds, list(schedules.values()), epochs,
                                         record, curvature=curvature)
    return n_clouds, out


def lms_convergence_table(seed: int = 0, clouds: int = 200, epochs: int = 200,
                          rates: Sequence[float] = DEFAULT_RATES, client=None, scheduler=None,
                          progress=None) -> pd.DataFrame:
    """Distance to least squares at the end of every epoch over ``clouds`` clouds.

    One row per (curvature, schedule, epoch, metric) with mean, std, median,
    p05, p95 over the clouds; metrics ``distance`` ‖W − W_LS‖ and ``excess_mse``.
    """
    seed = common.check_seed(seed)
    clouds = common.check_option("lms", "clouds", clouds)
    epochs = common.check_option("lms", "epochs", epochs)
    schedules = _schedules(common.check_option("lms", "rates", rates))
    sizes = common.batch_sizes(clouds, BATCH_CLOUDS)
    parts = common.run_batches(
        _convergence_batch, [(seed, i, n, schedules, epochs) for i, n in enumerate(sizes)],
        sizes, desc="lms", unit="clouds", client=client, scheduler=scheduler, progress=progress)
    frames = []
    for curvature in CURVATURES:
        arrays = {m: np.concatenate([p[curvature][m] for p in parts])
                  for m in ("distance", "excess_mse")}
        frame = common.summary_frame(arrays, list(schedules), list(range(epochs + 1)),
                                     label_name="schedule", step_name="epoch")
        frame.insert(0, "curvature", curvature)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def plot_demonstration(weights: pd.DataFrame, fits: pd.DataFrame, clouds) -> Figure:
    """Per cloud: the data with the LS line and LMS fits; the weights against updates."""
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    axes = fig.subplots(2, 2)
    rates = sorted(weights.rate.unique())
    colors = dict(zip(rates, ["tab:purple", "tab:blue", "tab:red", "tab:olive", "tab:cyan"],
                      strict=False))
    xs = np.linspace(0, 10, 100)
    top = max(rates)
    for row, curvature in enumerate(CURVATURES):
        X, T = clouds[curvature]
        ax, aw = axes[row]
        ax.plot(X[:, 0], T[:, 0], "o", alpha=0.5, ms=4, label="data")
        f = fits[fits.curvature == curvature]
        ls = f[f.epochs == 0].iloc[0]
        ax.plot(xs, ls.w0 + ls.w1 * xs, color="k", lw=2, label="least squares")
        for e, style in zip(DEMO_EPOCHS, ("--", "-"), strict=True):
            fe = f[(f.rate == top) & (f.epochs == e)]
            if len(fe):
                ax.plot(xs, fe.w0.iloc[0] + fe.w1.iloc[0] * xs, color="tab:red", ls=style,
                        label=f"LMS ρ = {top:g}, {e} epoch{'s' if e > 1 else ''}")
        ax.set(xlabel="x", ylabel="t", xlim=(0, 10), ylim=(0, 5),
               title=f"{_CURVE_NAME[curvature]} cloud (curvature {curvature:g})")
        ax.legend(fontsize=8, loc="upper right")
        w = weights[weights.curvature == curvature]
        for rate in rates:
            wr = w[w.rate == rate]
            aw.plot(wr["update"], wr.w0, color=colors[rate], label=f"w0, ρ = {rate:g}")
            aw.plot(wr["update"], wr.w1, color=colors[rate], ls="--", label=f"w1, ρ = {rate:g}")
        aw.axhline(ls.w0, color="k", lw=0.8, ls=":")
        aw.axhline(ls.w1, color="k", lw=0.8, ls=":", label="least squares")
        aw.set(xlabel="updates", ylabel="weights", title="weights against updates")
        aw.legend(fontsize=7, ncol=2, loc="center right")
    return fig


def plot_convergence(conv: pd.DataFrame) -> Figure:
    """Median distance to least squares at the end of each epoch, 5–95 % band."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, curvature in zip(axes, CURVATURES, strict=True):
        part = conv[(conv.curvature == curvature) & (conv.metric == "distance")
                    & (conv.epoch >= 1)]
        for schedule, s in part.groupby("schedule", sort=False):
            line, = ax.plot(s.epoch, s["median"], label=schedule)
            ax.fill_between(s.epoch, s.p05, s.p95, color=line.get_color(), alpha=0.15, lw=0)
        ax.set(xscale="log", yscale="log", xlabel="epochs",
               title=f"{_CURVE_NAME[curvature]} cloud: ‖W − W_LS‖ (median, 5–95 %)")
    axes[0].set_ylabel("distance to the least-squares line")
    axes[0].legend(fontsize=8)
    return fig


def _summary(fits, conv, rates, clouds, epochs, seed) -> str:
    """``summary.md``: the paper's demonstration and claims, then the demonstration and the
    convergence of this run."""
    intro = [
        "# Study `lms`: sample-by-sample linear regression (LMS)",
        "",
        "The paper (the sample-by-sample lecture notes; full reference in streamlsq's "
        "docs/references.md) demonstrates LMS on 100 samples "
        "x ~ U(0, 10), t = 2 − 0.1x + N(0, 0.1²) (+ 0.05(x − 6)² for the curved cloud), "
        "ρ = 0.01 for 1 and 20 epochs, and states that ρ must decrease for convergence. "
        "It prints no numbers: the comparison below is with its claims and with the "
        f"least-squares line. Seed {seed}; step sizes {', '.join(f'{r:g}' for r in rates)}; "
        f"convergence over {clouds} clouds and {epochs} epochs.",
    ]
    return common.markdown(intro, _demonstration_section(fits), _convergence_section(conv))


def _demonstration_section(fits) -> list[str]:
    """The fits of the demonstration beside the least-squares line, after 1 and 20 epochs."""
    lines = [
        "## The demonstration (one cloud)",
        "",
        "| cloud | ρ | epochs | w0 | w1 | ‖W − W_LS‖ | excess training MSE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in fits.itertuples():
        name = _CURVE_NAME[r.curvature]
        if r.epochs == 0:
            lines.append(f"| {name} | least squares | – | {r.w0:.4f} | {r.w1:.4f} | 0 | 0 |")
        else:
            lines.append(f"| {name} | {r.rate:g} | {r.epochs} | {r.w0:.4f} | {r.w1:.4f} | "
                         f"{fmt(r.distance_to_ls)} | {fmt(r.excess_mse)} |")
    lms_fits = fits[fits.epochs > 0]
    one = lms_fits[lms_fits.epochs == 1]
    many = lms_fits[lms_fits.epochs == lms_fits.epochs.max()]
    top = many[many.rate == many.rate.max()]
    lines += [
        "",
        f"- After one epoch every step size is still far from the least-squares line "
        f"(‖W − W_LS‖ from {fmt(one.distance_to_ls.min())} to {fmt(one.distance_to_ls.max())}; "
        "the intercept w0 lags most): x is not centred, so E[x̃x̃ᵀ] is ill-conditioned and "
        "the intercept direction learns slowly. After "
        f"{int(many.epochs.iloc[0])} epochs at ρ = {top.rate.iloc[0]:g} the distance is "
        + ", ".join(f"{fmt(d)} ({_CURVE_NAME[c]})" for c, d in zip(top.curvature,
                                                                   top.distance_to_ls,
                                                                   strict=True))
        + ": the paper's picture of LMS settling on the line.",
        "- On the curved cloud LMS approaches the least-squares *line* — the best line, "
        "not the curve; its residuals are larger, so the step-size floor below is higher.",
    ]
    return lines


def _convergence_section(conv) -> list[str]:
    """The distance to least squares at the end of a few epochs, for every schedule, and
    how the constant and the decreasing steps differ."""
    lines = [
        "## Convergence to least squares (end of epoch, median over clouds)",
        "",
    ]
    last = conv.epoch.max()
    marks = sorted({1, min(20, last), last})
    header = " | ".join(f"epoch {e}" for e in marks)
    lines += [f"| cloud | schedule | {header} |", "|---|---|" + "---|" * len(marks)]
    dist = conv[conv.metric == "distance"]
    for curvature in CURVATURES:
        for schedule, s in dist[dist.curvature == curvature].groupby("schedule", sort=False):
            at = s.set_index("epoch")["median"]
            cells = " | ".join(fmt(at[e]) for e in marks)
            lines.append(f"| {_CURVE_NAME[curvature]} | {schedule} | {cells} |")
    half = max(last // 2, 1)
    changes = []
    for schedule, sd in dist[dist.curvature == CURVATURES[0]].groupby("schedule", sort=False):
        at = sd.set_index("epoch")["median"]
        changes.append(f"{schedule} ×{at[last] / at[half]:.2f}")
    lines += [
        "",
        f"- Change of the median distance from epoch {half} to {last} ({_CURVE_NAME[0.0]} "
        f"cloud): {', '.join(changes)}.",
        "- Theory, and what the curves show when the run is long enough: in stored order "
        "a constant step settles into a cycle whose end-of-epoch point lies at a distance "
        "from W_LS that grows with ρ, so the constant-step curves flatten at a floor; the "
        "decreasing schedule keeps approaching W_LS (Σρ = ∞, Σρ² < ∞), as the paper says ρ "
        "must decrease. A small constant ρ has a low floor but needs many epochs to reach it.",
    ]
    if last < 100:
        lines.append(f"- Only {last} epochs here (e.g. --quick): too few to reach the "
                     "constant-step floors; run the full study to see them.")
    return lines


def run_lms(out: str | os.PathLike, quick: bool = False, seed: int = 0, client=None, *,
            clouds: int | None = None, epochs: int | None = None,
            rates: Sequence[float] | None = None, **runtime) -> StudyResult:
    """The LMS demonstration and its convergence to least squares (200 clouds, 200 epochs).

    ``quick``: 20 clouds, 20 epochs. ``rates``: the constant step sizes
    (default 0.001, 0.005, 0.01; stability is guaranteed on this data for
    ρ < 2/101, since ‖x̃‖² ≤ 101).

    ``runtime``: ``scheduler``, ``n_workers`` and ``progress`` of
    :func:`~streamlsq.studies.common.run_study_into`.
    """
    given = common.check_options("lms", locals())
    sizes = QUICK if quick else FULL
    clouds = given["clouds"] or sizes["clouds"]
    epochs = given["epochs"] or sizes["epochs"]
    rates = common.check_option("lms", "rates", DEFAULT_RATES if rates is None else rates)
    seed = given["seed"]

    def compute(cl, progress) -> StudyOutput:
        weights, fits, data = lms_demonstration(seed, rates)
        conv = lms_convergence_table(seed, clouds, epochs, rates, client=cl, progress=progress)
        return StudyOutput(
            tables={"demonstration": weights, "fits": fits, "convergence": conv},
            figures={"demonstration": plot_demonstration(weights, fits, data),
                     "convergence": plot_convergence(conv)},
            summary=_summary(fits, conv, rates, clouds, epochs, seed),
            params={"quick": quick, "seed": seed, "clouds": clouds, "epochs": epochs,
                    "rates": list(rates), "decreasing_tau": DECREASING_TAU,
                    "batch_clouds": BATCH_CLOUDS})

    return common.run_study_into("lms", out, compute, client=client, **runtime)
