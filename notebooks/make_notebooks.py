"""Write the notebooks and store them executed at quick size.

    python notebooks/make_notebooks.py                # all notebooks, run in quick mode
    python notebooks/make_notebooks.py lms bfgs       # only these
    python notebooks/make_notebooks.py --no-execute   # sources only, outputs cleared

Each study notebook calls the same API as ``streamlsq study NAME``
(``streamlsq.studies``), shows the figures inline and says what to look at;
``cluster.ipynb`` walks through a cluster, a large store, a fit and a
meta-learning run; ``timeseries.ipynb`` publishes a regression on statsmodels' own
data sets (HAC, rolling windows, clusters, Driscoll-Kraay), each number checked against
statsmodels. The notebooks read ``STREAMLSQ_QUICK=1`` for the small sizes of
``--quick`` and ``STREAMLSQ_STUDY_OUT`` for the parent folder of their outputs (default
``study-results`` in the working directory); the cluster is the one named by
``DASK_SCHEDULER_ADDRESS``, a ``distributed.Client`` created in the notebook, or else an
embedded LocalCluster.

Executing (the default) starts one LocalCluster, runs every notebook with nbclient
in quick mode in a temporary folder (the study outputs are deleted afterwards) and
writes the outputs into the ``.ipynb`` files, so that a reader browsing the
repository sees the figures and results of a quick run.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''import os
from pathlib import Path

from IPython.display import Image, Markdown, display

import streamlsq.studies as studies

# STREAMLSQ_QUICK=1: the small sizes of `streamlsq study --quick` (seconds); default: the paper's
QUICK = os.environ.get("STREAMLSQ_QUICK", "0") == "1"
OUT = Path(os.environ.get("STREAMLSQ_STUDY_OUT", "study-results")) / "{name}"
SEED = 0'''

RUN = '''result = studies.run_{name}(OUT, quick=QUICK, seed=SEED)
print(f"{{result.seconds:.1f}} s on {{result.n_workers}} Dask workers; files in {{result.out}}")
print(sorted(p.name for p in result.out.iterdir()))'''

CLUSTER_NOTE = (
    "The run below spreads its Monte-Carlo batches over a Dask cluster: the one named by "
    "`DASK_SCHEDULER_ADDRESS`, a `distributed.Client` you created in this notebook, or "
    "else a local cluster started for the call. The tables depend on the seed only, not "
    "on the number of workers."
)


STORED_OUTPUTS = (
    "The outputs stored with this notebook come from a quick run (`STREAMLSQ_QUICK=1`, "
    "written by `python notebooks/make_notebooks.py`, see [README.md](README.md)): its "
    "curves are shorter and noisier than those the texts describe. Run it without "
    "`STREAMLSQ_QUICK` for the paper's sizes."
)


def docs_pointer(algorithm: str, citation: str) -> str:
    """Where the repository explains the method, the study and the paper."""
    return (
        f"The method: {algorithm} in [docs/algorithms.md](../docs/algorithms.md). The study, "
        "its options and its findings at full size: [docs/studies.md](../docs/studies.md). "
        f"The full citation of {citation}: [docs/references.md](../docs/references.md)."
    )


def python_notebook() -> nbformat.NotebookNode:
    """An empty notebook of the python3 kernel."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def notebook(name: str, intro: str, cells: list, docs: str) -> nbformat.NotebookNode:
    nb = python_notebook()
    nb.cells = [
        new_markdown_cell(f"{intro}\n\n{docs}\n\n{STORED_OUTPUTS}"),
        new_code_cell(SETUP.format(name=name)),
        new_markdown_cell(CLUSTER_NOTE),
        new_code_cell(RUN.format(name=name)),
        *cells,
        new_markdown_cell("The summary written to `summary.md`: the paper's numbers beside "
                          "this run's, and where they differ, by how much and why."),
        new_code_cell("display(Markdown(result.summary))"),
    ]
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating gives the same files
        cell.id = f"{name}-{i:02d}"
    return nb


def md(text: str):
    return new_markdown_cell(text)


def code(text: str):
    return new_code_cell(text)


NOTEBOOKS = {
    "interleaved": notebook(
        "interleaved",
        "# Interleaved KF4LLS — Figure 1\n\n"
        "John & Wu (2023) learn a regression for "
        "a mixed population (\"penguins\" = α·birds + (1−α)·fish) from blocks of the two "
        "pure populations, interleaved, centred and weighted by √α, √(1−α), with KF4LLS. "
        "Figure 1 compares five training schemes over 5000 Monte-Carlo iterations "
        "(α = 0.25, 100 rows per block, 6 features, 6 steps).\n\n"
        "Same as `streamlsq study interleaved --out DIR`.",
        [
            md("The tidy table: one row per (scheme, step); `bias_over_D` is the bias in "
               "units of D = mean|r_b − r_f|, `expected_bias_over_D` the expected shape "
               "to first order (listed in [docs/studies.md](../docs/studies.md)), "
               "`expected_bias_over_D_2nd` the second-order theory, `z` the distance to it "
               "in standard errors."),
            code('result.tables["figure1"].round(4).head(12)'),
            md("**What to look at.** Left: birds only sits at (1−α)·D = 0.75·D and fish "
               "only at α·D = 0.25·D at every step — training on the wrong population is "
               "biased however much data arrives; penguins only is unbiased. The two "
               "interleaved curves (blue) drop to almost 0 at every even step, where both "
               "orders have seen the same blocks and coincide; at odd steps one population "
               "is one block ahead and the bias jumps back up, less each time. The grey "
               "crosses are the second-order theory. Right: the test MSE on penguin blocks "
               "(log scale) follows the same pattern."),
            code('display(Image(filename=str(result.figures["figure1"])))'),
            md("The finer functions behind the command are public too: e.g. another mixing "
               "weight, without writing a study folder."),
            code("from streamlsq.studies.interleaved import figure1_table, interleaved_curves\n"
                 "\n"
                 "params, curves = interleaved_curves(seed=1, iterations=500 if QUICK else "
                 "2000, alpha=0.5)\n"
                 "t = figure1_table(params, curves)\n"
                 "t.pivot(index=\"step\", columns=\"scheme\", values=\"bias_over_D\")"
                 ".round(3)"),
        ],
        docs=docs_pointer("the section on interleaved KF4LLS", "John & Wu (2023)"),
    ),
    "irma": notebook(
        "irma",
        "# IRMA — incremental risk minimisation: Figure 1 and Table I\n\n"
        "Buschermöhle & Brockmann (2013) learn the polynomial approximation of "
        "f(x) = x·exp(−x²) on [0, 3] one noisy example at a time, changing the learned "
        "function as little as possible in L² "
        "at each step. Figure 1: cumulative loss of GD, RLS and IRMA over 500 sequences "
        "of 150 examples (order 6). Table I: MSE to the ground truth after 10, 80 and 150 "
        "examples, orders 4, 6, 10, IRMA against batch least squares, 1000 sequences.\n\n"
        "Same as `streamlsq study irma --out DIR`.",
        [
            md("**Figure 1 — what to look at.** IRMA's cumulative loss (green) is the "
               "lowest by orders of magnitude and its band is narrow: every sequence behaves "
               "alike. GD (orange) keeps accumulating loss — with monomials the highest "
               "powers dominate its normalised step. RLS (blue) levels off after its early "
               "errors but its spread is wide: a few sequences carry its mean."),
            code('display(Image(filename=str(result.figures["figure1"])))'),
            md("**Table I.** Our means beside the published ones (`published_pm` is the "
               "printed \"±\", which is a variance). The incremental entries land within a "
               "small factor of the paper's; the batch fits with 10 examples are far off in "
               "either direction — compare `mse_mean` with `mse_median` and "
               "`mse_max_share` (the share of the largest single sequence): those means "
               "are set by a few extreme sequences and change with the seed."),
            code('result.tables["table1"][["order", "examples", "method", "mse_mean", '
                 '"mse_median", "mse_max_share", "published_mean", "published_pm", '
                 '"ratio_to_published"]]'),
            md("Each Table I entry as the ratio of our mean to the published one: the grey "
               "band is a factor 3 either way."),
            code('display(Image(filename=str(result.figures["table1"])))'),
        ],
        docs=docs_pointer("the section on IRMA", "Buschermöhle & Brockmann (2013)"),
    ),
    "lms": notebook(
        "lms",
        "# LMS — sample-by-sample linear regression\n\n"
        "The lecture notes *Sample-by-Sample Linear Regression* derive LMS "
        "(stochastic gradient descent for least squares) and animate it on 100 points "
        "x ~ U(0, 10), t = 2 − 0.1x + noise, optionally curved by 0.05(x − 6)², with "
        "ρ = 0.01 for 1 and 20 epochs; they note that ρ must decrease for convergence. "
        "This study redraws that demonstration for a few step sizes and measures the "
        "convergence to the least-squares line on many clouds.\n\n"
        "Same as `streamlsq study lms --out DIR`.",
        [
            md("**The demonstration — what to look at.** Left: the data, the least-squares "
               "line (black) and LMS after 1 epoch (dashed) and 20 epochs (solid): one "
               "pass is not enough, 20 are. Right: the weights against the number of "
               "updates for each step size; the intercept w0 (solid) climbs slowly because "
               "x is not centred, while the slope w1 (dashed) first turns positive to make up "
               "for the missing intercept. Bottom: the "
               "curved cloud — LMS still converges to the best *line*."),
            code('display(Image(filename=str(result.figures["demonstration"])))'),
            code('result.tables["fits"].round(4)'),
            md("**Convergence.** The distance to the least-squares line at the end of each "
               "epoch, median over many clouds (band: 5–95 %). Constant steps flatten at "
               "a floor that grows with ρ; the decreasing step ρ₀/(1 + k/τ) keeps going "
               "down. In quick mode there are only 20 epochs, too few to see the floors."),
            code('display(Image(filename=str(result.figures["convergence"])))'),
        ],
        docs=docs_pointer("the section on LMS", "the lecture notes"),
    ),
    "bfgs": notebook(
        "bfgs",
        "# Incremental BFGS against exact least squares and LMS\n\n"
        "De Melo (2019) proposes a linear "
        "regressor updated block by block with BFGS: least squares on the first block, "
        "then a quasi-Newton direction, a line search or a fixed rate, and class-balanced "
        "rates for binary targets. The note reports no experiment; this study measures "
        "what the method does on streams, against KF4LLS (the exact least-squares fit of "
        "everything seen) and LMS.\n\n"
        "Same as `streamlsq study bfgs --out DIR`.",
        [
            md("**Regression — what to look at.** Left: the error to the true "
               "coefficients against rows seen. The least-squares fit (black, KF4LLS on top "
               "of it in grey) keeps improving like 1/√rows. BFGS improves at first and "
               "then stalls: each step fits the newest block along the quasi-Newton "
               "direction, with a step that does not shrink as data accumulate, so W keeps "
               "following the newest block's noise — smaller fixed rates stall lower. "
               "Right: the distance to the least-squares fit of all rows seen does not go "
               "to 0 for any incremental method but KF4LLS (not drawn: it is at rounding "
               "level)."),
            code('display(Image(filename=str(result.figures["regression"])))'),
            md("**Binary targets (10 % positives).** A regression on 0/1 labels "
               "thresholded at ½ misses almost every positive with plain least squares or "
               "unbalanced BFGS. The paper's class-balanced rates weight each class as if "
               "the classes were equally frequent; the balanced BFGS approaches the "
               "class-weighted least-squares fit (black) and its balanced accuracy."),
            code('display(Image(filename=str(result.figures["binary"])))'),
            code('b = result.tables["binary"]\n'
                 'last = b[b.block == b.block.max()]\n'
                 'last.pivot(index="method", columns="metric", values="median").round(3)'),
        ],
        docs=docs_pointer("the section on the incremental BFGS regressor", "De Melo (2019)"),
    ),
    "mlr": notebook(
        "mlr",
        "# Meta-learning mixed linear regressions — Appendix E\n\n"
        "Kong et al. (2020) learn a mixture of k linear regressions from many small tasks: "
        "a subspace from "
        "light tasks, clusters from a few heavy tasks, then classification and refinement "
        "on more light tasks, and predict a new task from τ examples. Their Appendix E "
        "measures each step; the text lost its digits, so this study reproduces the "
        "*shapes* on d = 8, k = 4 orthonormal components, s = 1, uniform weights.\n\n"
        "The grids run many small trials through the in-memory reference of Algorithm 1 "
        "(batches on the cluster); the prediction and EM parts run the real pipeline "
        "(`simulate_mlr`, `metalearn`, `predict`, `fit_em`) on small stores.\n\n"
        "Same as `streamlsq study mlr --out DIR`.",
        [
            md("**The grids — what to look at.** Left: the subspace error falls with the "
               "rows of D_L1, n·t; curves for different rows per task t nearly line up "
               "(t = 2 is a little worse: each split half is one row). Middle: heavy tasks "
               "cluster exactly once they have enough rows; more tasks need more rows, as "
               "single linkage chains through any one bad pair. Right: classification "
               "accuracy of the light tasks rises with t_L2, and the errors of ŵ, ŝ, p̂ "
               "(dashed) fall."),
            code('display(Image(filename=str(result.figures["grids"])))'),
            md("**Prediction for a new task.** Held-out error against τ, the examples of the "
               "new task: the posterior mean is best at small τ, then MAP, and per-task least "
               "squares is far worse below τ = d (it cannot even be determined); all three "
               "approach the noise level s² = 1 as τ grows."),
            code('display(Image(filename=str(result.figures["prediction"])))'),
            code('result.tables["prediction"].pivot(index="tau", columns="estimator", '
                 'values="holdout_mse").round(3)'),
            md("**EM against Algorithm 1.** EM from the truth stays there; started from the "
               "truth plus noise (relative scale), some runs converge to a wrong optimum "
               "(red), while Algorithm 1 needs no initialisation."),
            code('display(Image(filename=str(result.figures["em"])))'),
            code('result.tables["em"].round(4)'),
        ],
        docs=docs_pointer("the section on meta-learning for mixed linear regression",
                          "Kong et al. (2020)"),
    ),
}


TS_SETUP = """import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from distributed import Client, LocalCluster
from IPython.display import Image, display
from statsmodels.regression.rolling import RollingOLS

import streamlsq
from streamlsq.stream.statistics import summary_text

# the data sets are small: the notebook is the same with or without STREAMLSQ_QUICK=1
DATA = Path(os.environ.get("STREAMLSQ_STUDY_OUT", "study-results")) / "timeseries"
DATA.mkdir(parents=True, exist_ok=True)

# statsmodels' quarterly US macro series (1959Q1-2009Q3) and Grunfeld's investment panel
macro = sm.datasets.macrodata.load_pandas().data
macro.to_parquet(DATA / "macrodata.parquet", row_group_size=32, index=False)
g = sm.datasets.grunfeld.load_pandas().data
grunfeld = pd.DataFrame({"invest": g.invest, "value": g.value, "capital": g.capital,
                         "firm": g.firm.astype(str), "year": g.year.astype("int64")})
grunfeld.to_parquet(DATA / "grunfeld.parquet", row_group_size=40, index=False)
print(f"macrodata: {len(macro)} quarters; grunfeld: {grunfeld.firm.nunique()} firms x "
      f"{grunfeld.year.nunique()} years; Parquet files in {DATA}")


def max_rel(ours, theirs):
    \"\"\"The largest relative difference between two arrays of numbers.\"\"\"
    ours, theirs = np.asarray(ours, float), np.asarray(theirs, float)
    return float(np.max(np.abs(ours - theirs) / np.abs(theirs)))"""

TS_CONNECT = """address = os.environ.get("DASK_SCHEDULER_ADDRESS")
cluster = None if address else LocalCluster(n_workers=2, threads_per_worker=1,
                                            dashboard_address=":0")
client = Client(address or cluster)
print(f"{len(client.scheduler_info()['workers'])} Dask workers")"""

TS_HAC = """FORMULA = "infl ~ unemp + tbilrate"
hac = streamlsq.fit_stream(DATA / "macrodata.parquet", "kf4lls", formula=FORMULA,
                           cov_type="HAC", maxlags=4, window=40, client=client,
                           out=DATA / "hac.zarr", overwrite=True)
print(summary_text(hac))"""

TS_HAC_CHECK = """ref = smf.ols(FORMULA, macro).fit(cov_type="HAC", cov_kwds={"maxlags": 4})
ci = ref.conf_int()
pairs = {
    "params": (hac.coef.values[-1, :, 0], ref.params),
    "bse": (hac.bse.values[:, 0], ref.bse),
    "tvalues": (hac.tvalues.values[:, 0], ref.tvalues),
    "pvalues": (hac.pvalues.values[:, 0], ref.pvalues),
    "conf_int": (np.column_stack([hac.conf_int_lower.values[:, 0],
                                  hac.conf_int_upper.values[:, 0]]), ci),
    "cov_params": (hac.cov_params.values[:, :, 0], ref.cov_params()),
    "rsquared, fvalue, llf": ([hac.rsquared.item(), hac.fvalue.item(), hac.llf.item()],
                              [ref.rsquared, ref.fvalue, ref.llf]),
}
print("max relative difference to statsmodels' OLS(...).fit(cov_type='HAC', maxlags=4):")
for name, (ours, theirs) in pairs.items():
    print(f"  {name:22s} {max_rel(ours, theirs):.1e}")"""

TS_ROLLING_CHECK = """rolling = RollingOLS.from_formula(FORMULA, macro, window=40).fit()
rows = hac.window_end.values  # each window's last row
print(f"{len(rows)} windows of 40 quarters; max relative difference to RollingOLS:")
diff = max_rel(hac.rolling_params.values[:, :, 0], np.asarray(rolling.params)[rows])
print(f"  {'params':13s} {diff:.1e}")
# each window's own HAC covariance: a batch fit of its 40 quarters
batch = [smf.ols(FORMULA, macro.iloc[e - 39:e + 1]).fit(cov_type="HAC", cov_kwds={"maxlags": 4})
         for e in rows]
for name in ("bse", "tvalues"):
    diff = max_rel(hac[f"rolling_{name}"].values[:, :, 0],
                   np.array([getattr(b, name).to_numpy() for b in batch]))
    print(f"  HAC {name:9s} {diff:.1e} (to a batch HAC of each window)")
for name in ("rsquared", "rsquared_adj", "ssr", "llf", "aic", "bic"):
    diff = max_rel(hac[f"rolling_{name}"].values[:, 0], np.asarray(getattr(rolling, name))[rows])
    print(f"  {name:13s} {diff:.1e}")"""

TS_ROBUST_WINDOWS = """robust = streamlsq.fit_stream(DATA / "macrodata.parquet", "kf4lls", formula=FORMULA,
                              cov_type="HC0", window=40, client=client)
hccm = RollingOLS.from_formula(FORMULA, macro, window=40).fit(cov_type="HCCM")
ends = robust.window_end.values
print(f"{len(ends)} windows of 40 quarters, White's covariance in each; max relative "
      "difference to RollingOLS(...).fit(cov_type='HCCM'):")
for name in ("bse", "tvalues"):
    diff = max_rel(robust[f"rolling_{name}"].values[:, :, 0], np.asarray(getattr(hccm, name))[ends])
    print(f"  HC0 {name:9s} {diff:.1e}")"""

TS_EXPANDING = """grown = streamlsq.fit_stream(DATA / "macrodata.parquet", "kf4lls", formula=FORMULA,
                             window=len(macro), expanding=True, client=client)
expanding = RollingOLS.from_formula(FORMULA, macro, window=len(macro), expanding=True).fit()
at = grown.window_end.values
print(f"{len(at)} expanding windows (rows {at[0] + 1} to {at[-1] + 1}); max relative "
      "difference to RollingOLS(expanding=True):")
for name in ("params", "bse"):
    diff = max_rel(grown[f"rolling_{name}"].values[:, :, 0],
                   np.asarray(getattr(expanding, name))[at])
    print(f"  {name:13s} {diff:.1e}")
for name in ("rsquared", "ssr", "nobs"):
    diff = max_rel(grown[f"rolling_{name}"].values[:, 0],
                   np.asarray(getattr(expanding, name))[at])
    print(f"  {name:13s} {diff:.1e}")"""

TS_ROLLING_PLOT = """quarter = pd.PeriodIndex.from_fields(year=macro.year.astype(int),
                                     quarter=macro.quarter.astype(int), freq="Q").to_timestamp()
ends = quarter[rows]
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
theirs = rolling.conf_int(0.05)
for ax, name in zip(axes, ("unemp", "tbilrate")):
    coef = hac.rolling_params.sel(feature=name).values[:, 0]
    bse = hac.rolling_bse.sel(feature=name).values[:, 0]
    ax.plot(ends, coef, label="streamlsq, window of 40 quarters")
    ax.fill_between(ends, coef - 1.96 * bse, coef + 1.96 * bse, alpha=0.25, label="95% band")
    ax.plot(ends, theirs[(name, "lower")].values[rows], "k:", lw=1, label="RollingOLS' band")
    ax.plot(ends, theirs[(name, "upper")].values[rows], "k:", lw=1)
    ax.axhline(hac.coef.sel(feature=name).values[-1, 0], color="grey", lw=0.8,
               label="the whole sample")
    ax.set(title=f"coefficient of {name}", xlabel="last quarter of the window")
axes[0].legend(fontsize="small")
plt.show()"""

TS_PLOT_FIT = """# what `streamlsq info hac.zarr --plot hac.png` draws
streamlsq.plot_fit(hac, DATA / "hac.png")
display(Image(filename=str(DATA / "hac.png")))"""

TS_PREDICT = """pred = streamlsq.predict_stream(DATA / "hac.zarr", DATA / "macrodata.parquet",
                                intervals=True, alpha=0.1, client=client)
frame = ref.get_prediction(macro).summary_frame(alpha=0.1)
print("max relative difference to statsmodels' get_prediction().summary_frame(alpha=0.1):")
for name in ("mean", "mean_se", "mean_ci_lower", "mean_ci_upper", "obs_ci_lower",
             "obs_ci_upper"):
    ours = pred["yhat" if name == "mean" else name].values[:, 0]
    print(f"  {name:14s} {max_rel(ours, frame[name]):.1e}")
last = slice(len(macro) - 40, len(macro))
fig, ax = plt.subplots(figsize=(10, 3.5), layout="constrained")
ax.plot(quarter[last], macro.infl.values[last], "k.", label="inflation")
ax.plot(quarter[last], pred.yhat.values[last, 0], label="fitted")
ax.fill_between(quarter[last], pred.mean_ci_lower.values[last, 0],
                pred.mean_ci_upper.values[last, 0], alpha=0.4, label="90% interval of the mean")
ax.fill_between(quarter[last], pred.obs_ci_lower.values[last, 0],
                pred.obs_ci_upper.values[last, 0], alpha=0.15, label="90% interval of a quarter")
ax.set(ylabel="inflation (%)", title="the last 40 quarters: fit and intervals (HAC covariance)")
ax.legend(fontsize="small", ncol=2)
plt.show()"""

TS_PANEL = """PANEL = "invest ~ value + capital"
firm = np.unique(grunfeld.firm, return_inverse=True)[1]
year = np.unique(grunfeld.year, return_inverse=True)[1]  # statsmodels: periods 0..T-1
covariances = {  # name: (streamlsq's options, statsmodels' fit arguments)
    "nonrobust": ({}, {}),
    "cluster by firm": ({"cov_type": "cluster", "groups": "firm"},
                        {"cov_type": "cluster", "cov_kwds": {"groups": firm}}),
    "two-way: firm, year": ({"cov_type": "cluster", "groups": "firm,year"},
                            {"cov_type": "cluster",
                             "cov_kwds": {"groups": np.column_stack([firm, year])}}),
    "HAC within firms, 2 lags": ({"cov_type": "hac-panel", "groups": "firm", "maxlags": 2},
                                 {"cov_type": "hac-panel",
                                  "cov_kwds": {"groups": firm, "maxlags": 2}}),
    "Driscoll-Kraay, 2 lags": ({"cov_type": "hac-groupsum", "time": "year", "maxlags": 2},
                               {"cov_type": "hac-groupsum",
                                "cov_kwds": {"time": year, "maxlags": 2}}),
}
bse, diffs = {}, {}
for name, (ours, theirs) in covariances.items():
    fit = streamlsq.fit_stream(DATA / "grunfeld.parquet", "kf4lls", formula=PANEL,
                               client=client, **ours)
    ref_panel = smf.ols(PANEL, grunfeld).fit(**theirs)
    bse[name] = fit.bse.values[:, 0]
    diffs[name] = max(max_rel(fit.bse.values[:, 0], ref_panel.bse),
                      max_rel(fit.pvalues.values[:, 0], ref_panel.pvalues))
table = pd.DataFrame(bse, index=fit.feature.values).T
table["max rel. diff. to statsmodels (bse, pvalues)"] = pd.Series(diffs).map("{:.1e}".format)
table"""

TS_PANEL_SUMMARY = """print(summary_text(fit))  # the last one: Driscoll-Kraay"""

TS_CLOSE = """client.close()
if cluster is not None:  # the notebook's own LocalCluster; a shared one stays up
    cluster.close()"""


def timeseries_notebook() -> nbformat.NotebookNode:
    nb = python_notebook()
    nb.cells = [
        md("# Time series and panels: HAC, rolling windows, clusters, Driscoll–Kraay\n\n"
           "The analysis a paper publishes, on real data that statsmodels ships, read from "
           "Parquet files: a regression written as a formula, its HAC (Newey–West) standard "
           "errors and summary, the coefficients of rolling windows with their bands, "
           "predictions with intervals; and on a panel (firms × years) one- and two-way "
           "cluster, HAC within panels and Driscoll–Kraay standard errors. Every number is compared with "
           "statsmodels in the notebook, printed as the largest relative difference.\n\n"
           "The methods, their equations and options: [docs/inference.md](../docs/inference.md)"
           " (sections *Autocorrelation*, *Two-way clusters*, *Rolling windows*, *Prediction "
           "intervals*); formulas and Parquet input: [docs/tables.md](../docs/tables.md).\n\n"
           "The data sets are small (203 quarters; 220 firm-years): the notebook runs in "
           "seconds and is the same with or without `STREAMLSQ_QUICK=1`. The stored outputs "
           "come from `python notebooks/make_notebooks.py timeseries` "
           "(see [README.md](README.md))."),
        code(TS_SETUP),
        md("**The cluster.** The scheduler named by `DASK_SCHEDULER_ADDRESS` if set, else a "
           "`LocalCluster` started here. Each fit below reads the Parquet files' row groups "
           "on the workers."),
        code(TS_CONNECT),
        md("**Inflation on unemployment and the T-bill rate** (a Phillips curve of sorts), "
           "quarterly: the residuals are autocorrelated, so the standard errors are Newey and "
           "West's with 4 lags (`--cov-type HAC --maxlags 4`), and `window=40` also fits "
           "every window of 40 quarters (10 years). The same from the command line:\n\n"
           "```bash\n"
           "streamlsq fit kf4lls macrodata.parquet --formula 'infl ~ unemp + tbilrate' \\\n"
           "    --cov-type HAC --maxlags 4 --window 40 --out hac.zarr\n"
           "streamlsq info hac.zarr --plot hac.png\n"
           "```"),
        code(TS_HAC),
        md("**Against statsmodels**: `ols(formula, data).fit(cov_type=\"HAC\", "
           "cov_kwds={\"maxlags\": 4})`, statistic by statistic."),
        code(TS_HAC_CHECK),
        md("**Rolling windows against `RollingOLS`.** Each window here is a QR factor of its "
           "own rows (exact to ε·κ); `RollingOLS` adds and subtracts rows from XᵀX, so the "
           "differences below (1e-10 at most) are mostly its rounding, largest for the "
           "coefficients nearest zero. Each window's standard errors are Newey and West's "
           "from its own residuals (`RollingOLS` has no HAC): they are checked against "
           "statsmodels' HAC fit of each window's 40 quarters."),
        code(TS_ROLLING_CHECK),
        md("**Expanding windows** (`expanding=True`, `--expanding`): the windows start at the "
           "first row and grow, as `RollingOLS(..., expanding=True)`; with a window as long as "
           "the series, each is the fit of the quarters seen so far — the trajectory at every "
           "row, with each step's own standard errors and R²."),
        code(TS_EXPANDING),
        md("**Robust windows** (`cov_type=\"HC0\"` with `window=40`): each window's "
           "standard errors are White's, computed from that window's own rows, as "
           "`RollingOLS(...).fit(cov_type=\"HCCM\")` gives them. (With HC1–HC3 or clusters, "
           "only the whole fit's covariance is robust: each window's is the nonrobust one, "
           "and the result says so in its attributes.)"),
        code(TS_ROBUST_WINDOWS),
        md("**What to look at.** The coefficient of the T-bill rate is far from constant: "
           "its 10-year windows move well outside each other's bands, so the whole-sample "
           "coefficient (grey) averages different regimes. Dotted: the bands of "
           "`RollingOLS.conf_int()`, on top of ours."),
        code(TS_ROLLING_PLOT),
        md("**The figure `streamlsq info hac.zarr --plot hac.png` draws** "
           "(`streamlsq.plot_fit`): the coefficients of the rows seen so far with their "
           "recursive bands (as statsmodels' `RecursiveLS`), and the windows' coefficients "
           "with their bands."),
        code(TS_PLOT_FIT),
        md("**Predictions with intervals** (`predict_stream(..., intervals=True)`, or "
           "`streamlsq predict hac.zarr macrodata.parquet --intervals --alpha 0.1`): the "
           "interval of the mean uses the fit's HAC covariance and normal quantiles, as "
           "statsmodels' `get_prediction().summary_frame()` does."),
        code(TS_PREDICT),
        md("**A panel: Grunfeld's investment data**, 11 firms × 20 years (firms as strings, "
           "years as integers). The standard errors of the same regression under five "
           "covariances — clustered by firm, two-way by firm and year (`groups=\"firm,year\"`), "
           "Newey–West within each firm's years (`cov_type=\"hac-panel\", groups=\"firm\"`; "
           "the rows are stacked by firm, years increasing) and Driscoll–Kraay's over the "
           "years with 2 lags (`cov_type=\"hac-groupsum\", time=\"year\"`) — each against "
           "statsmodels' (bse and p-values)."),
        code(TS_PANEL),
        md("The summary of the Driscoll–Kraay fit names the covariance with its options."),
        code(TS_PANEL_SUMMARY),
        code(TS_CLOSE),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = f"timeseries-{i:02d}"
    return nb


NOTEBOOKS["timeseries"] = timeseries_notebook()


CLUSTER_SETUP = """import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import zarr
from distributed import Client, LocalCluster
from IPython.display import HTML, display

import streamlsq

# STREAMLSQ_QUICK=1: small stores (seconds, as in the test suite); default: large stores
QUICK = os.environ.get("STREAMLSQ_QUICK", "0") == "1"
DATA = Path(os.environ.get("STREAMLSQ_STUDY_OUT", "study-results")) / "cluster"
DATA.mkdir(parents=True, exist_ok=True)
ROWS, FEATURES = (200_000, 20) if QUICK else (20_000_000, 20)  # 3.2 GB of X when not quick
LIGHT_TASKS = 10_000 if QUICK else 1_000_000
print(f"stream: {ROWS:,} x {FEATURES}; light tasks: {LIGHT_TASKS:,}; stores in {DATA}")"""

CLUSTER_CONNECT = """address = os.environ.get("DASK_SCHEDULER_ADDRESS")
if address:
    cluster = None
    client = Client(address)
else:
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")
    client = Client(cluster)
workers = client.scheduler_info()["workers"]
print(f"scheduler {client.scheduler.address}: {len(workers)} workers, "
      f"{sum(w['nthreads'] for w in workers.values())} threads")
link = client.dashboard_link
print("dashboard:", link)
if link:
    display(HTML(f'<a href="{link}" target="_blank">Open the Dask dashboard</a>'))"""

CLUSTER_STREAM = """stream = DATA / "stream.zarr"
# open the store when it is already there (same size), else simulate it on the cluster
try:
    source = streamlsq.open_stream(stream)
    reuse = (source.n_rows, source.n_features) == (ROWS, FEATURES)
except streamlsq.InputError:
    reuse = False
if not reuse:
    streamlsq.simulate_stream(stream, ROWS, FEATURES, 1, seed=0, overwrite=True, client=client,
                              progress=True)
source = streamlsq.open_stream(stream)
print(f"{stream}: {source.n_rows:,} rows x {source.n_features} features, "
      f"chunks of {source.chunk_rows:,} rows")"""

CLUSTER_SCAN = """from distributed import progress

X = streamlsq.open_dataset(stream).X.data  # a dask array over the store's chunks
moments = client.persist([X.mean(axis=0), X.std(axis=0)])
progress(moments, notebook=False)  # distributed's bar over the chunk tasks
mean, std = client.compute(moments, sync=True)
print(f"\\nfeature means within {np.abs(mean).max():.3f} of 0; "
      f"standard deviations {std.min():.2f} .. {std.max():.2f}")"""

CLUSTER_FIT = """fit = streamlsq.fit_stream(stream, "kf4lls", engine="sequential", client=client,
                           block_size=max(ROWS // 200, 1_000), record_every=1, progress=True,
                           out=DATA / "kf4lls.zarr", overwrite=True)
print(f"{fit.attrs['rows_per_second']:.3e} rows/s")"""

CLUSTER_TRAJ = """truth = zarr.open_group(str(stream), mode="r")["coef_true"][:]
truth = truth.reshape(FEATURES, -1)
coef = fit.coef.values[:, :, 0]
fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
for j in range(5):
    line, = a1.plot(fit.rows_seen, coef[:, j], label=f"x{j}")
    a1.axhline(truth[j, 0], color=line.get_color(), ls=":")
a1.set(xscale="log", xlabel="rows seen", ylabel="coefficient",
       title="KF4LLS coefficients (dotted: truth)")
a1.legend(fontsize=8)
a2.plot(fit.rows_seen, np.sqrt(((coef - truth[:, 0]) ** 2).sum(axis=1)))
a2.set(xscale="log", yscale="log", xlabel="rows seen", ylabel="‖coef − truth‖",
       title="error against the truth")
plt.show()"""

CLUSTER_TASKS = """tasks = DATA / "tasks.zarr"
streamlsq.simulate_mlr(tasks, k=4, d=8, seed=0, n_light=LIGHT_TASKS, t_light=4, n_heavy=200,
                       t_heavy=200, n_light2=LIGHT_TASKS // 4, t_light2=10, overwrite=True,
                       client=client, progress=True)
model = streamlsq.metalearn(tasks, 4, out=DATA / "model.zarr", overwrite=True, client=client,
                            progress=True)
{k: round(float(model.attrs[k]), 4) for k in ("heavy_accuracy", "classification_accuracy",
                                              "coef_error", "noise_error", "weight_error")}"""

CLUSTER_CLUSTERS = """g = zarr.open_group(str(tasks), mode="r")
heavy = g["role"][:] == 1
table = pd.crosstab(pd.Series(g["component"][:][heavy], name="true component"),
                    pd.Series(model.heavy_cluster.values, name="cluster found"))
table"""

CLUSTER_PREDICT = """new = streamlsq.simulate_mlr(DATA / "new-tasks.zarr", k=4, d=8, seed=0,
                             task_seed=99, n_light=0, n_heavy=0, n_light2=1_000,
                             t_light2=4 + 20, overwrite=True, client=client)
pred = {est: streamlsq.predict(DATA / "model.zarr", new, estimator=est, holdout=20,
                               client=client, progress=True).attrs["holdout_mse"]
        for est in ("bayes", "map", "lstsq")}
pd.Series(pred, name="held-out MSE, τ = 4 (noise s² = 1)")"""

CLUSTER_CLOSE = """if cluster is not None:  # the notebook's own LocalCluster; a shared one stays up
    client.close()
    cluster.close()"""


def cluster_notebook() -> nbformat.NotebookNode:
    nb = python_notebook()
    nb.cells = [
        md("# streamlsq on a Dask cluster\n\n"
           "Connects to a cluster, simulates (or opens) a large on-disk stream store and a "
           "multi-task store, fits KF4LLS over the stream with a progress bar, meta-learns a "
           "mixture of linear regressions and predicts new tasks. Watch the work in the Dask "
           "dashboard (link below) while the cells run.\n\n"
           "`STREAMLSQ_QUICK=1` uses small stores (the test suite runs it so); without it the "
           "stream has 20 million rows (3.2 GB) and the multi-task store 1.25 million tasks."),
        code(CLUSTER_SETUP),
        md("**The cluster.** The scheduler named by `DASK_SCHEDULER_ADDRESS` if set (e.g. "
           "`tcp://10.0.0.5:8786`; the workers must see the data folder), else a "
           "`LocalCluster` started here."),
        code(CLUSTER_CONNECT),
        md("**A large stream store.** Chunks are generated and written in parallel by the "
           "workers; the store is reused when it is already there."),
        code(CLUSTER_STREAM),
        md("**A first pass over the store** with distributed's progress bar: the features' "
           "means and spreads, one task per chunk (see the dashboard's task stream)."),
        code(CLUSTER_SCAN),
        md("**Fit KF4LLS over the stream.** `progress=True` shows a bar over rows for any "
           "fit that lasts more than two seconds (not in quick mode); each worker reads its "
           "chunks itself and the state travels between blocks."),
        code(CLUSTER_FIT),
        md("**What to look at.** The coefficients settle on the truth (dotted), and the "
           "error falls like 1/√rows: KF4LLS is exact least squares of the rows seen."),
        code(CLUSTER_TRAJ),
        md("**Meta-learning.** A multi-task store of a mixture of k = 4 regressions "
           "(d = 8), then Algorithm 1 over chunks of tasks; the attributes hold its errors "
           "against the store's truth."),
        code(CLUSTER_TASKS),
        md("**Clusters found against the truth** (heavy tasks): one non-zero entry per row "
           "and column means every heavy task was put with its own component."),
        code(CLUSTER_CLUSTERS),
        md("**Prediction** for new tasks from τ = 4 examples each (fewer than d = 8): the "
           "learned mixture against least squares on the task alone."),
        code(CLUSTER_PREDICT),
        code(CLUSTER_CLOSE),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cluster-{i:02d}"
    return nb


NOTEBOOKS["cluster"] = cluster_notebook()


GLM_SETUP = """import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from distributed import Client, LocalCluster

import streamlsq
from streamlsq.stream.statistics import summary_text

# the data sets are small: the notebook runs the same with or without STREAMLSQ_QUICK=1
DATA = Path(os.environ.get("STREAMLSQ_STUDY_OUT", "study-results")) / "glm"
DATA.mkdir(parents=True, exist_ok=True)

address = os.environ.get("DASK_SCHEDULER_ADDRESS")
if address:  # a cluster already running (the test suite's, or yours)
    cluster = None
    client = Client(address)
else:
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")
    client = Client(cluster)
print(f"{len(client.scheduler_info()['workers'])} Dask workers; stores in {DATA}")"""

GLM_DATA = """frame = sm.datasets.fair.load_pandas().data
COLUMNS = ["children", "religious", "rate_marriage", "educ", "age", "yrs_married", "occupation"]
answers = frame.groupby(COLUMNS).size().rename("n").reset_index()
answers.to_parquet(DATA / "fair.parquet", row_group_size=500)  # 7 row groups: 7 chunks
print(f"{len(frame):,} women, {len(answers):,} distinct answers; yrs_married takes the "
      f"values {sorted(frame.yrs_married.unique().tolist())}")
answers.head()"""

GLM_FIT = """FORMULA = "children ~ C(religious) + C(rate_marriage) + educ + age + C(yrs_married)"
fit = streamlsq.fit_glm(DATA / "fair.parquet", formula=FORMULA, family="poisson",
                        freq_weights="n", cov_type="HC1", out=DATA / "children-hc1.zarr",
                        overwrite=True, client=client)
print(f"converged after {fit.attrs['iterations']} iterations, {fit.attrs['passes']} passes "
      "over the rows\\n")
print(summary_text(DATA / "children-hc1.zarr"))"""

GLM_CLUSTER = """options = dict(formula=FORMULA, family="poisson", freq_weights="n", client=client)
clustered = streamlsq.fit_glm(DATA / "fair.parquet", cov_type="cluster", groups="occupation",
                              out=DATA / "children-cluster.zarr", overwrite=True, **options)
print(f"Pearson chi2 / df_resid = {float(fit.pearson_chi2[0] / fit.df_resid[0]):.2f}")
nonrobust = streamlsq.fit_glm(DATA / "fair.parquet", **options)
se = pd.DataFrame({"nonrobust": nonrobust.bse[:, 0].values, "HC1": fit.bse[:, 0].values,
                   f"cluster ({clustered.attrs['n_groups']} occupations)":
                       clustered.bse[:, 0].values}, index=fit.feature.values)
se.round(4)"""

GLM_COMPARE = """import warnings

from statsmodels.tools.sm_exceptions import SpecificationWarning


def max_rel(ours, theirs):
    ours, theirs = np.asarray(ours, float).ravel(), np.asarray(theirs, float).ravel()
    return float(np.max(np.abs(ours - theirs) / np.abs(theirs)))


def term(name):  # statsmodels (patsy) lists the terms in another order, interactions too
    return frozenset(str(name).replace("intercept", "Intercept").split(":"))


def order(ours, res):  # statsmodels' coefficients in the order of ours
    names = [term(n) for n in res.model.exog_names]
    return [names.index(term(f)) for f in ours.feature.values]


model = smf.glm(FORMULA, answers, family=sm.families.Poisson(), freq_weights=answers.n)
with warnings.catch_warnings():  # "cov_type not fully supported with freq_weights": below,
    warnings.simplefilter("ignore", SpecificationWarning)  # the 6,366 rows give the same
    references = {"HC1": (fit, model.fit(cov_type="HC1")),
                  "cluster": (clustered, model.fit(cov_type="cluster",
                                                   cov_kwds={"groups": answers.occupation}))}
rows = {}
for cov_type, (ours, res) in references.items():
    i = order(ours, res)
    rows[cov_type] = {
        "params": max_rel(ours.coef.isel(step=-1, target=0), res.params.iloc[i]),
        "bse": max_rel(ours.bse[:, 0], res.bse.iloc[i]),
        "pvalues": max_rel(ours.pvalues[:, 0], res.pvalues.iloc[i]),
        "cov_params": max_rel(ours.cov_params[:, :, 0], res.cov_params().iloc[i, i]),
        **{name: max_rel(ours[name], getattr(res, name))
           for name in ("deviance", "null_deviance", "pearson_chi2", "llf", "aic")}}
comparison = pd.DataFrame(rows).T
print(f"max relative difference to statsmodels' GLM: {comparison.to_numpy().max():.2e}")
women = smf.glm(FORMULA, frame, family=sm.families.Poisson())  # one row per woman
for ours, res in ((fit, women.fit(cov_type="HC1")),
                  (clustered, women.fit(cov_type="cluster",
                                        cov_kwds={"groups": frame.occupation}))):
    i = order(ours, res)
    print(f"statsmodels on the 6,366 rows, {res.cov_type}: relative difference of the "
          f"coefficients {max_rel(ours.coef.isel(step=-1, target=0), res.params.iloc[i]):.1e}, "
          f"of their standard errors {max_rel(ours.bse[:, 0], res.bse.iloc[i]):.1e}")
comparison.map(lambda v: f"{v:.1e}")"""

GLM_PREDICT = """grid = pd.DataFrame([{"religious": r, "rate_marriage": 4.0, "educ": e, "age": 32.0,
                      "yrs_married": 9.0} for r in (1.0, 4.0) for e in np.arange(9.0, 21.0)])
grid.to_parquet(DATA / "new-rows.parquet")
pred = streamlsq.predict(DATA / "children-hc1.zarr", DATA / "new-rows.parquet",
                         intervals=True, out=DATA / "new-rows-pred.zarr", overwrite=True,
                         client=client)
table = grid.assign(**{name: pred[name][:, 0].values for name in
                       ("yhat", "mean_se", "mean_ci_lower", "mean_ci_upper")})
reference = references["HC1"][1].get_prediction(grid)
columns = ["mean_se", "mean_ci_lower", "mean_ci_upper"]
difference = max_rel(table[["yhat", *columns]], reference.summary_frame()[["mean", *columns]])
print(f"max relative difference to statsmodels' get_prediction: {difference:.2e}")
table.head()"""

GLM_PLOT = """fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
names = {1.0: "not religious", 4.0: "strongly religious"}
for r, rows in table.groupby("religious"):
    line, = ax.plot(rows.educ, rows.yhat, label=f"{names[r]}: fit, 95% interval (HC1)")
    ax.fill_between(rows.educ, rows.mean_ci_lower, rows.mean_ci_upper, alpha=0.25,
                    color=line.get_color())
    seen = frame[(frame.religious == r) & (frame.yrs_married == 9.0)]
    means = seen.groupby("educ").children.agg(["mean", "size"])
    ax.scatter(means.index, means["mean"], s=3 * means["size"], color=line.get_color(),
               zorder=3, label=f"{names[r]}: observed mean, 9 years married")
ax.set(xlabel="years of education", ylabel="children",
       title="Expected children after 9 years of marriage (age 32, marriage rated 4)")
ax.legend(fontsize=8)
plt.show()"""

GLM_STAR98 = """star98 = sm.datasets.star98.load_pandas().data
star98.to_parquet(DATA / "star98.parquet")
COUNTS = ("NABOVE + NBELOW ~ LOWINC + PERASIAN + PERBLACK + PERHISP + PCTCHRT + PCTYRRND "
          "+ PERMINTE*AVYRSEXP*AVSALK + PERSPENK*PTRATIO*PCTAF")
scores = streamlsq.fit_glm(DATA / "star98.parquet", formula=COUNTS, family="binomial",
                           client=client)
res = smf.glm(COUNTS, star98, family=sm.families.Binomial()).fit()
print(f"statsmodels' endog: {res.model.endog_names}; ours: successes "
      f"{scores.target.values[0]}, trials {scores.attrs['trials_variable']}")
i = order(scores, res)
print(f"max relative difference to statsmodels' GLM: params "
      f"{max_rel(scores.coef.isel(step=-1, target=0), res.params.iloc[i]):.2e}, bse "
      f"{max_rel(scores.bse[:, 0], res.bse.iloc[i]):.2e}, deviance "
      f"{max_rel(scores.deviance, res.deviance):.2e}")"""

GLM_CLOSE = CLUSTER_CLOSE


def glm_notebook() -> nbformat.NotebookNode:
    nb = python_notebook()
    nb.cells = [
        md("# A generalised linear model on real data\n\n"
           "An analysis as one publishes it, with `streamlsq.fit_glm` (`streamlsq fit glm`): "
           "a Poisson model of counts with categorical terms and frequency weights, robust "
           "and cluster-robust standard errors, the summary, the same numbers from statsmodels, "
           "predictions with intervals for new rows and a figure; then a binomial response "
           "written as two columns of counts. The data are statsmodels' `fair` (Fair 1978: "
           "6,366 married women surveyed by *Redbook* in 1974) and `star98` (California "
           "schools' test results, 1998). The fits read Parquet files chunk by chunk on a "
           "Dask cluster, one pass over the rows per IRLS iteration, as they would a "
           "table of billions of rows.\n\n"
           "The method, the options and what is stored: [docs/glm.md](../docs/glm.md). "
           "The outputs stored with this notebook come from the run that wrote it "
           "(`python notebooks/make_notebooks.py glm`, see [README.md](README.md))."),
        code(GLM_SETUP),
        md("**The data**, as surveys are often published: a table of the distinct answers "
           "and how many women gave each (`n`), written as a Parquet file of 7 row groups "
           "(the fit reads them as chunks). `children` counts a woman's children (5.5 codes "
           "\"5 or more\", a non-integer count the Poisson quasi-likelihood takes)."),
        code(GLM_DATA),
        md("**The fit.** The number of children, log-linear in religiousness, the "
           "marriage's rating and its duration (categorical terms, `C()`: children do not "
           "come at a constant rate over a marriage), education and age: a Poisson GLM with "
           "`freq_weights=\"n\"` (each row counts for its `n` women, so `No. Observations` "
           "is 6,366) and HC1 standard errors (statsmodels' GLM gives its HC0 sandwich for "
           "HC1; so does streamlsq, to give the same numbers)."),
        code(GLM_FIT),
        md("**Standard errors three ways.** Pearson's χ²/df below 1 says the counts are "
           "less dispersed than Poisson's variance assumes; the sandwich (HC1), which does not "
           "assume it, gives smaller standard errors for most terms, larger ones for the "
           "intercept and the duration's. Clustering by the wife's occupation allows correlation within "
           "occupations, but with six clusters (G − 1 = 5 degrees of freedom for a Wald "
           "test) it is itself noisy."),
        code(GLM_CLUSTER),
        md("**The same fits in statsmodels.** `smf.glm` on the table in memory with the same "
           "frequency weights, with both covariances: the largest relative difference of "
           "every statistic. Then statsmodels' fits of the 6,366 women one row each: the "
           "frequency weights reproduce them, HC1 standard errors included; the "
           "cluster-robust ones differ by about 1e-3 relative, because the small-sample "
           "factor (N − 1)/(N − k) counts the table's 3,431 rows as N, as statsmodels' does "
           "with frequency weights (the warning it gives, silenced here), not the women."),
        code(GLM_COMPARE),
        md("**New rows.** The fit applied to a grid of new women (age 32, 9 years married, "
           "marriage rated 4; education 9–20 years, not or strongly religious), read from "
           "a Parquet file: the mean and its delta-method interval (`intervals=True`, from the "
           "HC1 covariance), as statsmodels' `get_prediction`."),
        code(GLM_PREDICT),
        md("**What to look at.** More education, fewer children; more religious, more "
           "children, at every education level; the bands are the fit's 95% intervals of "
           "the mean, the dots the observed means of the women married 9 years (of all ages and "
           "ratings; a dot's area is proportional to its number of women, the small ones "
           "scatter most)."),
        code(GLM_PLOT),
        md("**Binomial counts as two columns.** statsmodels writes a binomial response of "
           "counts as `successes + failures ~ …`, the trials being their sum: star98's "
           "students above and below the national median per district, in statsmodels' own "
           "example formula. streamlsq reads the same formula (`--formula` on the command "
           "line)."),
        code(GLM_STAR98),
        code(GLM_CLOSE),
    ]
    for i, cell in enumerate(nb.cells):
        cell.id = f"glm-{i:02d}"
    return nb


NOTEBOOKS["glm"] = glm_notebook()


def kernelspec(jupyter_path: Path) -> None:
    """A ``python3`` kernel for THIS interpreter (not whatever ``python3`` Jupyter finds)."""
    spec = jupyter_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))


#: terminal control sequences other than colours (SGR, ending in "m"), e.g. the "erase line"
#: that distributed's text progress bar ends with: Jupyter ignores them, other viewers of
#: the stored notebook would print them
TERMINAL_CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-ln-z]")


def strip_volatile(nb: nbformat.NotebookNode, replacements: dict[str, str]) -> None:
    """Replace the run's addresses (random ports) in the outputs by stable placeholders, so
    that regenerating changes only what the computation changed; drop terminal controls
    and the blank stream outputs a progress bar leaves behind when it erases itself."""
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        cell.outputs = [o for o in cell.outputs
                        if o.output_type != "stream" or o.text.replace("\r", "").strip()]
        for output in cell.outputs:
            if "text" in output:
                output["text"] = TERMINAL_CONTROL.sub("", _replace(output["text"],
                                                                   replacements))
            for mime in ("text/plain", "text/html", "text/markdown"):
                if mime in output.get("data", {}):
                    output["data"][mime] = _replace(output["data"][mime], replacements)


def _replace(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text


def compress_figures(nb: nbformat.NotebookNode) -> None:
    """Re-encode every PNG output with a palette of 256 colours: plots look the same and
    take about a third of the bytes, which keeps the stored notebooks small."""
    from PIL import Image

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data:
                continue
            image = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
            palette = image.convert("RGB").quantize(
                colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
            buffer = io.BytesIO()
            palette.save(buffer, format="PNG", optimize=True)
            data["image/png"] = base64.b64encode(buffer.getvalue()).decode("ascii")


def execute(notebooks: dict[str, nbformat.NotebookNode], timeout: int) -> None:
    """Run the notebooks in quick mode on one local cluster; their outputs go in place."""
    from distributed import Client, LocalCluster
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="streamlsq-notebooks-") as tmp, \
            contextlib.chdir(tmp):
        # the notebooks write their stores under a relative folder that the workers open
        # too: kernel and workers must share the working directory
        run_dir = Path(tmp)
        kernelspec(run_dir / "jupyter")
        os.environ.update({"STREAMLSQ_QUICK": "1", "JUPYTER_PATH": str(run_dir / "jupyter")})
        # the default, relative, folder: printed paths do not name the temporary folder
        os.environ.pop("STREAMLSQ_STUDY_OUT", None)
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            os.environ["DASK_SCHEDULER_ADDRESS"] = cluster.scheduler_address
            placeholders = {cluster.scheduler_address: "tcp://127.0.0.1:<port>"}
            if client.dashboard_link:
                placeholders[client.dashboard_link] = "http://127.0.0.1:<port>/status"
            for name, nb in notebooks.items():
                started = time.perf_counter()
                NotebookClient(nb, timeout=timeout, kernel_name="python3",
                               record_timing=False, coalesce_streams=True,
                               resources={"metadata": {"path": str(run_dir)}}).execute()
                strip_volatile(nb, placeholders)
                compress_figures(nb)
                print(f"executed {name}.ipynb in {time.perf_counter() - started:.0f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write the notebooks and store them executed in quick mode.")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"notebooks to write (default: all of {', '.join(NOTEBOOKS)})")
    parser.add_argument("--no-execute", action="store_true",
                        help="write the sources only, outputs cleared")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds allowed per cell (default: 600)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(NOTEBOOKS))
    if unknown:
        parser.error(f"no notebook named {', '.join(unknown)}")
    chosen = {name: NOTEBOOKS[name] for name in (args.names or NOTEBOOKS)}
    for nb in chosen.values():
        nbformat.validate(nb)
    if not args.no_execute:
        execute(chosen, args.timeout)
    for name, nb in chosen.items():
        nbformat.validate(nb)
        path = HERE / f"{name}.ipynb"
        nbformat.write(nb, path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
