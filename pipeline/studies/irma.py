"""Study ``irma``: Figure 1 and Table I of the IRMA paper (``docs/studies.md#irma``).

Sequences are drawn and learned in batches of :data:`BATCH_SEQUENCES` by the
vectorised kernels of :mod:`streamlsq.kernels.studies.irma`, mapped over the
Dask cluster; the per-sequence results (cumulative losses, MSEs) are concatenated
in batch order and summarised.

Outputs: ``figure1.csv`` (``method, examples, loss_mean, loss_std,
loss_upper_sd, loss_lower_sd, loss_median, loss_p05, loss_p95``), ``table1.csv``
(``order, examples, method, mse_mean, mse_std`` … beside ``published_mean``),
``figure1.png``, ``table1.png`` and ``summary.md``.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from streamlsq.studies import common
from streamlsq.studies.common import StudyOutput, StudyResult, fmt

__all__ = ["BATCH_SEQUENCES", "irma_figure1", "irma_table1", "plot_figure1", "plot_table1",
           "run_irma"]

#: sequences per Dask task (fixed: the tables must not depend on the worker count)
BATCH_SEQUENCES = 100
FULL = {"fig_sequences": 500, "table_sequences": 1000}
QUICK = {"fig_sequences": 100, "table_sequences": 200}
LENGTH = 150
FIGURE1_ORDER = 6
N_TEST = 1000
_TAG_FIGURE1 = 0x1A1
_TAG_TABLE1 = 0x1A2
_LABELS = {"gd": "GD (normalised, Tikhonov)", "rls": "RLS (g = 0.9, Tikhonov)", "irma": "IRMA"}
_COLORS = {"gd": "tab:orange", "rls": "tab:blue", "irma": "tab:green"}


def _paper_sequences(seed: int, tag: int, index: int, n_seq: int):
    """Batch ``index``'s ``n_seq`` sequences of the paper: inputs x and targets y."""
    from streamlsq.kernels.studies.irma import paper_sequences

    return paper_sequences(np.random.default_rng([seed, tag, index]), n_seq, LENGTH)


def _figure1_batch(seed: int, index: int, n_seq: int):
    from streamlsq.kernels.studies.irma import figure1_cumulative_losses

    x, y = _paper_sequences(seed, _TAG_FIGURE1, index, n_seq)
    return n_seq, figure1_cumulative_losses(x, y, order=FIGURE1_ORDER)


def _table1_batch(seed: int, index: int, n_seq: int):
    from streamlsq.kernels.studies.irma import table1_mse

    x, y = _paper_sequences(seed, _TAG_TABLE1, index, n_seq)
    return n_seq, table1_mse(x, y, n_test=N_TEST)


def _map_sequence_batches(batch, seed, sequences, option, desc, client, scheduler,
                          progress) -> list:
    """``batch(seed, i, n)`` for the batches of :data:`BATCH_SEQUENCES` of ``sequences``
    sequences, mapped over the Dask cluster; their results in batch order. ``option``: the
    option ``sequences`` comes from, named when it is refused."""
    seed = common.check_seed(seed)
    sequences = common.check_option("irma", option[2:].replace("-", "_"), sequences)
    sizes = common.batch_sizes(sequences, BATCH_SEQUENCES)
    batches = [(seed, i, n) for i, n in enumerate(sizes)]
    return common.run_batches(batch, batches, sizes, desc=desc, unit="sequences",
                              client=client, scheduler=scheduler, progress=progress)


def irma_figure1(seed: int = 0, sequences: int = 500, client=None, scheduler=None,
                 progress=None) -> pd.DataFrame:
    """Cumulative loss of GD, RLS and IRMA (order 6) over ``sequences`` sequences of 150.

    One row per (method, examples): mean and spread over the sequences.
    """
    from streamlsq.kernels.studies.common import distribution_summary
    from streamlsq.kernels.studies.irma import FIGURE1_METHODS

    parts = _map_sequence_batches(_figure1_batch, seed, sequences, "--fig-sequences",
                                  "irma-figure1", client, scheduler, progress)
    frames = []
    for method in FIGURE1_METHODS:
        s = distribution_summary(np.concatenate([p[method] for p in parts]), axis=0)
        frame = {"method": method, "examples": np.arange(1, LENGTH + 1)}
        frame.update({f"loss_{k}": s[k] for k in ("mean", "std", "upper_sd", "lower_sd",
                                                   "median", "p05", "p95")})
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)


def irma_table1(seed: int = 0, sequences: int = 1000, client=None, scheduler=None,
                progress=None) -> pd.DataFrame:
    """Table I over ``sequences`` sequences: one row per (order, examples, method)."""
    from streamlsq.kernels.studies.irma import table1_records

    parts = _map_sequence_batches(_table1_batch, seed, sequences, "--table-sequences",
                                  "irma-table1", client, scheduler, progress)
    return pd.DataFrame(table1_records(np.concatenate(parts)))


def plot_figure1(fig1: pd.DataFrame, n_sequences: int) -> Figure:
    """Mean cumulative loss per step with the upper/lower standard deviation, log scale."""
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for method, part in fig1.groupby("method", sort=False):
        lo = part.loss_mean - part.loss_lower_sd
        hi = part.loss_mean + part.loss_upper_sd
        # the lower band can reach 0 for skewed losses: draw it down to the 5th percentile
        lo = np.maximum(lo, part.loss_p05)
        ax.plot(part.examples, part.loss_mean, color=_COLORS[method], label=_LABELS[method])
        ax.fill_between(part.examples, lo, hi, color=_COLORS[method], alpha=0.2, lw=0)
    ax.set(yscale="log", xlabel="number of learning examples", ylabel="cumulative loss",
           title=f"Cumulative loss, order {FIGURE1_ORDER}, {n_sequences} sequences\n"
                 "(mean; band: upper and lower standard deviation)")
    ax.legend()
    return fig


def plot_table1(table: pd.DataFrame) -> Figure:
    """Each Table I entry: this run's mean over the published mean (log scale), factor-3 band."""
    fig = Figure(figsize=(7, 5.5), layout="constrained")
    ax = fig.subplots()
    ax.axvspan(1 / 3, 3, color="0.88", lw=0, label="within a factor 3")
    ax.axvline(1, color="0.5", lw=0.8)
    colors = {"incremental": "tab:green", "batch": "tab:gray"}
    labels = []
    for y, row in enumerate(table.itertuples()):
        ax.plot(row.ratio_to_published, y, "o", color=colors[row.method])
        labels.append(f"order {row.order}, {row.examples} ex., {row.method}")
    for method, c in colors.items():
        ax.plot([], [], "o", color=c, label="IRMA" if method == "incremental" else "batch LS")
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xscale="log", xlabel="this run's mean MSE / published mean",
           title="Table I: this run against the paper")
    ax.legend(fontsize=8, loc="lower left")
    return fig


def _summary(fig1, table, fig_sequences, table_sequences, seed) -> str:
    """``summary.md``: the settings, then Table I and Figure 1 beside the paper's."""
    intro = [
        "# Study `irma`: Figure 1 and Table I of the IRMA paper",
        "",
        f"Settings: f(x) = x·exp(−x²) on [0, 3], inputs uniform, noise uniform ±0.05, "
        f"sequences of {LENGTH} examples; Figure 1: {fig_sequences} sequences, order "
        f"{FIGURE1_ORDER}; Table I: {table_sequences} sequences, MSE on {N_TEST} equispaced "
        f"test points; seed {seed}. IRMA: λ₀ = 0.1, ×1.05 per example, Legendre basis "
        "orthonormal on [0, 3] (the same function as monomial IRMA); GD (normalised) and "
        "RLS (P₀ = I, g = 0.9), both with Tikhonov μ = 0.05, on monomials as in the paper; "
        "batch: least squares on the Vandermonde matrix (minimum-norm when under-determined).",
    ]
    return common.markdown(intro, _table1_section(table), _figure1_section(fig1))


def _table1_section(table) -> list[str]:
    """Table I beside the paper's, and why the batch means at 10 examples are no numbers to
    reproduce."""
    lines = [
        "## Table I",
        "",
        "The paper's \"±\" values are far below the squared means (e.g. 3.1e-3 ± 2.9e-5): "
        "they are variances of the per-sequence MSE, so they are set beside our variance.",
        "",
        "| order | examples | method | paper mean | this run mean | ratio | paper ± (var) "
        "| this run var | this run median | largest sequence's share of the sum |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.order} | {r.examples} | {r.method} | {fmt(r.published_mean, 2)} | "
            f"{fmt(r.mse_mean)} | {fmt(r.ratio_to_published, 2)} | {fmt(r.published_pm, 2)} | "
            f"{fmt(r.mse_var, 2)} | {fmt(r.mse_median)} | {r.mse_max_share:.2f} |"
        )
    incr = table[table.method == "incremental"]
    worst = incr.loc[incr.factor_to_published.idxmax()]
    b10 = table[(table.method == "batch") & (table.examples == 10)]
    i10 = table[(table.method == "incremental") & (table.examples == 10)]
    later = table[table.examples > 10]
    lines += [
        "",
        f"- Incremental (IRMA): every mean within a factor {worst.factor_to_published:.2f} "
        f"of the paper's (furthest: order {worst.order}, {worst.examples} examples, ratio "
        f"{worst.ratio_to_published:.2f}); the variances within a factor "
        f"{incr.var_factor_to_published.max():.2f} of the paper's \"±\" values.",
        "- Batch at 10 examples: the means "
        f"({', '.join(fmt(v, 2) for v in b10.mse_mean)} for orders 4, 6, 10) blow up as "
        f"published ({', '.join(fmt(v, 2) for v in b10.published_mean)}), far above "
        f"IRMA's ({', '.join(fmt(v, 2) for v in i10.mse_mean)}), but they are not "
        "reproducible numbers: the per-sequence MSE is heavy-tailed (10 random points can "
        "all fall in part of [0, 3], and the polynomial then explodes where there are "
        "none), so the mean is set by a few extreme sequences: the largest single sequence "
        f"carries {', '.join(f'{v:.0%}' for v in b10.mse_max_share)} of the sum, and the "
        "mean changes by orders of magnitude with the seed and the number of sequences. "
        f"The medians ({', '.join(fmt(v, 2) for v in b10.mse_median)}) are the stable "
        "summary. Order 10 with 10 examples is under-determined (11 coefficients): numpy "
        "returns the minimum-norm fit, MATLAB's polyfit (the paper's tool, presumably) a "
        "basic solution with a rank warning, so the two differ there.",
        f"- With 80 and 150 examples batch and incremental agree with the paper to within a "
        f"factor {later.factor_to_published.max():.2f}.",
    ]
    return lines


def _figure1_section(fig1) -> list[str]:
    """Figure 1's cumulative losses after 10, 80 and 150 examples, beside the paper's
    picture."""
    lines = [
        "## Figure 1",
        "",
        "The paper: IRMA has the lowest cumulative loss with nearly no spread, GD is "
        "unstable, RLS and IRMA grow sub-linearly. This run (cumulative loss after 10, 80 "
        "and 150 examples, mean ± standard deviation over the sequences):",
        "",
        "| method | 10 | 80 | 150 | growth 80→150 (linear would be 1.88×) |",
        "|---|---|---|---|---|",
    ]
    for method, part in fig1.groupby("method", sort=False):
        at = part.set_index("examples")
        cells = [f"{fmt(at.loss_mean[n])} ± {fmt(at.loss_std[n])}" for n in (10, 80, 150)]
        growth = at.loss_mean[150] / at.loss_mean[80]
        lines.append(f"| {_LABELS[method]} | {' | '.join(cells)} | {growth:.2f}× |")
    final = fig1[fig1.examples == LENGTH].set_index("method")
    lowest = final.loss_mean.idxmin()
    tightest = final.loss_std.idxmin()
    lines += [
        "",
        f"- Lowest mean cumulative loss: {_LABELS[lowest]}; smallest spread: "
        f"{_LABELS[tightest]} (paper: IRMA for both).",
        "- GD keeps adding loss at every step: with monomials up to x⁶ on [0, 3] the "
        "normalised step is dominated by the highest powers, which destabilises it "
        "(the paper's explanation).",
        f"- Median cumulative loss after {LENGTH} examples: "
        + ", ".join(f"{_LABELS[m]} {fmt(final.loss_median[m])}" for m in final.index)
        + ". Where a mean lies far above its median (RLS here), a minority of sequences "
        "with large early errors carries it; the paper's log-scale bands show the same "
        "asymmetry.",
    ]
    return lines


def run_irma(out: str | os.PathLike, quick: bool = False, seed: int = 0, client=None, *,
             fig_sequences: int | None = None, table_sequences: int | None = None,
             **runtime) -> StudyResult:
    """Reproduce Figure 1 (500 sequences) and Table I (1000 sequences) of the IRMA paper.

    ``quick``: 100 and 200 sequences.

    ``runtime``: ``scheduler``, ``n_workers`` and ``progress`` of
    :func:`~streamlsq.studies.common.run_study_into`.
    """
    given = common.check_options("irma", locals())
    sizes = QUICK if quick else FULL
    fig_sequences = given["fig_sequences"] or sizes["fig_sequences"]
    table_sequences = given["table_sequences"] or sizes["table_sequences"]
    seed = given["seed"]

    def compute(cl, progress) -> StudyOutput:
        fig1 = irma_figure1(seed, fig_sequences, client=cl, progress=progress)
        table = irma_table1(seed, table_sequences, client=cl, progress=progress)
        return StudyOutput(
            tables={"figure1": fig1, "table1": table},
            figures={"figure1": plot_figure1(fig1, fig_sequences), "table1": plot_table1(table)},
            summary=_summary(fig1, table, fig_sequences, table_sequences, seed),
            params={"quick": quick, "seed": seed, "fig_sequences": fig_sequences,
                    "table_sequences": table_sequences, "length": LENGTH, "n_test": N_TEST,
                    "batch_sequences": BATCH_SEQUENCES})

    return common.run_study_into("irma", out, compute, client=client, **runtime)
