"""Study ``mlr``: Appendix E of the meta-learning paper in kind (``docs/studies.md#mlr``).

Model: d = 8, k = 4 orthonormal components wₕ, noise s = 1, uniform weights p
(``kernels.synthetic.mlr.mlr_components``). Two kinds of runs:

- **grids** (subspace error against (n_L1, t_L1), clustering accuracy against
  (n_H, t_H), classification accuracy and parameter errors against t_L2): many
  small trials, each drawn in memory and run through the in-memory reference of
  Algorithm 1 (the kernels of ``kernels.mlr.meta_learn``, see
  ``kernels.studies.mlr``), mapped over the Dask cluster in batches of
  :data:`BATCH_TRIALS` trials. A trial's numbers come from seed words naming the
  trial, so the tables do not depend on the batches or the workers;
- **pipeline** (parameter errors of one full run, prediction error against τ,
  the EM comparison): the real commands — ``simulate_mlr``, ``metalearn``,
  ``predict``, ``fit_em`` — on small stores in a temporary folder next to
  ``out`` (with ``--scheduler``, the workers must see that folder).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from streamlsq.errors import InputError
from streamlsq.io.outputs import OwnedTemporary, reclaim_leftovers
from streamlsq.studies import common
from streamlsq.studies.common import StudyOutput, StudyResult, fmt

__all__ = ["BATCH_TRIALS", "D", "K", "run_mlr"]

D, K = 8, 4
#: trials per Dask task (fixed: the tables must not depend on the worker count)
BATCH_TRIALS = 10
#: the D_L1 set that gives the basis U in the clustering grid, and the baseline run
BASE = {"n_light": 20_000, "t_light": 4, "n_heavy": 200, "t_heavy": 200,
        "n_light2": 2_000, "t_light2": 10}
FULL = {
    "replicates": 20,
    "subspace_nt": (2_000, 8_000, 32_000, 128_000, 512_000),
    "subspace_t": (2, 4, 8),
    "heavy_n": (50, 100, 200, 400),
    "heavy_t": (20, 40, 80, 160),
    "light2_t": (2, 3, 4, 6, 8, 12, 16, 24),
    "taus": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128),
    "test_tasks": 2_000,
    "pipeline": {"n_light": 20_000, "t_light": 4, "n_heavy": 200, "t_heavy": 200,
                 "n_light2": 5_000, "t_light2": 10},
    "em_scales": (0.5, 1.0, 1.5),
    "em_seeds": tuple(range(10)),
}
QUICK = {
    "replicates": 3,
    "subspace_nt": (4_000, 64_000),
    "subspace_t": (2, 8),
    "heavy_n": (50, 200),
    "heavy_t": (20, 160),
    "light2_t": (2, 16),
    "taus": (2, 8, 64),
    "test_tasks": 300,
    "pipeline": {"n_light": 8_000, "t_light": 4, "n_heavy": 100, "t_heavy": 200,
                 "n_light2": 1_000, "t_light2": 10},
    "em_scales": (1.0,),
    "em_seeds": (0, 3),
}
#: the EM comparison's store (tests/test_mlr_pipeline.py): k = 6, d = 8, seed 7, where EM
#: from the truth perturbed with relative scale 1 (seed 3) converges to a wrong optimum
EM_STORE = {"k": 6, "d": 8, "seed": 7, "n_light": 30_000, "t_light": 4, "n_heavy": 300,
            "t_heavy": 300, "n_light2": 4_000, "t_light2": 30}
HOLDOUT = 20
_TAG_SUB, _TAG_CLUSTER, _TAG_CLASSIFY = 0x3E1, 0x3E2, 0x3E3


def _trial_batch(seed: int, kind: str, configs: list[tuple]):
    from streamlsq.kernels.studies.mlr import classification_trial, clustering_trial, subspace_trial
    from streamlsq.kernels.synthetic.mlr import mlr_components

    W, s, p = mlr_components(seed, D, K)
    rows = []
    for config in configs:
        if kind == "subspace":
            nt, t, rep = config
            n = nt // t
            err = subspace_trial([seed, _TAG_SUB, nt, t, rep], n, t, W, s, p)
            rows.append({"n_tasks": n, "rows_per_task": t, "n_times_t": n * t,
                         "replicate": rep, "subspace_error": err})
        elif kind == "clustering":
            n, t, rep = config
            acc = clustering_trial([seed, _TAG_CLUSTER, n, t, rep], n, t, W, s, p,
                                   n_light=BASE["n_light"], t_light=BASE["t_light"])
            rows.append({"n_heavy": n, "t_heavy": t, "replicate": rep, "accuracy": acc})
        else:
            t, rep = config
            res = classification_trial(
                [seed, _TAG_CLASSIFY, t, rep], BASE["n_light2"], t, W, s, p,
                n_light=BASE["n_light"], t_light=BASE["t_light"], n_heavy=BASE["n_heavy"],
                t_heavy=BASE["t_heavy"])
            rows.append({"n_light2": BASE["n_light2"], "t_light2": t, "replicate": rep, **res})
    return len(configs), rows


def _grid(cl, seed, kind, configs, progress) -> pd.DataFrame:
    sizes = common.batch_sizes(len(configs), BATCH_TRIALS)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    batches = [(seed, kind, configs[a:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)]
    parts = common.run_batches(_trial_batch, batches, sizes, desc=f"mlr {kind}",
                               unit="trials", client=cl, progress=progress)
    return pd.DataFrame([row for part in parts for row in part])


def _pipeline_runs(cl, work: Path, seed: int, sizes: dict, progress) -> dict:
    """The real pipeline: parameter errors, prediction against τ, EM against Algorithm 1."""
    from streamlsq.mlr.em import fit_em
    from streamlsq.mlr.metalearn import metalearn
    from streamlsq.mlr.predict import predict
    from streamlsq.simulate.tasks import simulate_mlr

    quiet = {"client": cl, "progress": progress}
    train = simulate_mlr(work / "train.zarr", k=K, d=D, seed=seed, **sizes["pipeline"], **quiet)
    model_path = work / "model.zarr"
    # the paper's Algorithm 1 (single linkage), whatever metalearn's default
    model = metalearn(train, K, out=model_path, linkage="single", **quiet)
    keys = ("subspace_error", "heavy_accuracy", "classification_accuracy", "coef_error",
            "noise_error", "weight_error", "initial_coef_error", "initial_weight_error")
    parameters = pd.DataFrame({"metric": list(keys),
                               "value": [float(model.attrs[k]) for k in keys]})
    pred = []
    for tau in sizes["taus"]:
        test = simulate_mlr(work / f"test-{tau}.zarr", k=K, d=D, seed=seed,
                            task_seed=1_000 * (seed + 1) + tau, n_light=0, n_heavy=0,
                            n_light2=sizes["test_tasks"], t_light2=tau + HOLDOUT, **quiet)
        for estimator in ("bayes", "map", "lstsq"):
            res = predict(model_path, test, estimator=estimator, holdout=HOLDOUT, **quiet)
            pred.append({"tau": tau, "estimator": estimator, "tasks": sizes["test_tasks"],
                         "holdout_rows": int(res.attrs["holdout_rows"]),
                         "holdout_mse": float(res.attrs["holdout_mse"])})
    em_store = simulate_mlr(work / "em.zarr", **EM_STORE, **quiet)
    k_em = EM_STORE["k"]
    alg1 = metalearn(em_store, k_em, splits=3, linkage="single", **quiet)
    em_rows = [{"method": "algorithm 1", "init": "-", "scale": np.nan, "init_seed": -1,
                "status": "done", "iterations": 0,
                **{m: float(alg1.attrs[m]) for m in ("coef_error", "noise_error",
                                                     "weight_error")}}]
    starts = [("truth", 0.0, 0)] + [("perturbed", sc, sd) for sc in sizes["em_scales"]
                                    for sd in sizes["em_seeds"]]
    for init, scale, init_seed in starts:
        start = {"scale": scale, "seed": init_seed} if init == "perturbed" else {}
        em = fit_em(em_store, k_em, init=init, **start, **quiet)
        em_rows.append({"method": "EM", "init": init,
                        "scale": scale if init == "perturbed" else np.nan,
                        "init_seed": init_seed, "status": em.attrs["status"],
                        "iterations": int(em.log_likelihood.size),
                        **{m: float(em.attrs[m]) for m in ("coef_error", "noise_error",
                                                           "weight_error")}})
    return {"parameters": parameters, "prediction": pd.DataFrame(pred),
            "em": pd.DataFrame(em_rows)}


# -- figures ---------------------------------------------------------------------------------
def _mean_sd(df, by, value):
    g = df.groupby(by, sort=True)[value]
    return g.mean(), g.std(ddof=0)


def plot_grids(sub, clus, clas) -> Figure:
    fig = Figure(figsize=(13, 4), layout="constrained")
    a1, a2, a3 = fig.subplots(1, 3)
    for t, part in sub.groupby("rows_per_task"):
        m, sd = _mean_sd(part, "n_times_t", "subspace_error")
        a1.errorbar(m.index, m.values, yerr=sd.values, marker="o", capsize=3,
                    label=f"t_L1 = {t}")
    a1.set(xscale="log", yscale="log", xlabel="n_L1 · t_L1 (rows of D_L1)",
           ylabel="max‖(I − UUᵀ)wₕ‖", title="subspace error (mean ± sd)")
    a1.legend(fontsize=8)
    for n, part in clus.groupby("n_heavy"):
        m, sd = _mean_sd(part, "t_heavy", "accuracy")
        a2.errorbar(m.index, m.values, yerr=sd.values, marker="o", capsize=3,
                    label=f"n_H = {n}")
    a2.set_xscale("log")
    a2.set_xticks(sorted(clus.t_heavy.unique()), [str(v) for v in sorted(clus.t_heavy.unique())])
    a2.minorticks_off()
    a2.set(xlabel="t_H (rows per heavy task)", ylabel="accuracy",
           title="clustering of D_H (single linkage)", ylim=(0, 1.05))
    a2.legend(fontsize=8)
    m, sd = _mean_sd(clas, "t_light2", "classification_accuracy")
    a3.errorbar(m.index, m.values, yerr=sd.values, marker="o", capsize=3, color="k",
                label="classification accuracy")
    a3.set_xscale("log")
    a3.set_xticks(sorted(clas.t_light2.unique()),
                  [str(v) for v in sorted(clas.t_light2.unique())])
    a3.minorticks_off()
    a3.set(xlabel="t_L2 (rows per light task)", ylabel="accuracy",
           title=f"D_L2 ({BASE['n_light2']} tasks): classification, parameter errors",
           ylim=(0, 1.05))
    ax = a3.twinx()
    for metric, color in (("coef_error", "tab:red"), ("noise_error", "tab:blue"),
                          ("weight_error", "tab:green")):
        mm, _ = _mean_sd(clas, "t_light2", metric)
        ax.plot(mm.index, mm.values, ls="--", marker=".", color=color, label=metric)
    ax.set(yscale="log", ylabel="max error of ŵ, ŝ, p̂ (dashed)")
    h1, l1 = a3.get_legend_handles_labels()
    h2, l2 = ax.get_legend_handles_labels()
    a3.legend(h1 + h2, l1 + l2, fontsize=7, loc="center right")
    return fig


def plot_prediction(pred) -> Figure:
    fig = Figure(figsize=(6.5, 4.3), layout="constrained")
    ax = fig.subplots()
    names = {"bayes": "posterior mean", "map": "MAP", "lstsq": "per-task least squares"}
    for est, part in pred.groupby("estimator", sort=False):
        ax.plot(part.tau, part.holdout_mse, marker="o", label=names[est])
    top = 10.0  # τ = d: least squares solves a square system, its error is unbounded
    for r in pred[pred.holdout_mse > top].itertuples():
        ax.annotate(f"{names[r.estimator]} at τ = {r.tau}: {r.holdout_mse:.2g} (off scale)",
                    xy=(r.tau, top), xytext=(0.35, 0.93), textcoords="axes fraction",
                    fontsize=7, arrowprops={"arrowstyle": "->", "lw": 0.6})
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="noise s² = 1")
    ax.axvline(D, color="grey", lw=0.8, ls="--", label=f"τ = d = {D}")
    ax.set(xscale="log", yscale="log", ylim=(0.8, top), xlabel="τ (examples of the new task)",
           ylabel="held-out MSE", title=f"prediction for a new task (d = {D}, k = {K}, s = 1)")
    ax.legend(fontsize=8)
    return fig


def plot_em(em) -> Figure:
    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    labels, values, colors = [], [], []
    for r in em.itertuples():
        if r.method == "algorithm 1":
            labels.append("Algorithm 1")
        elif r.init == "truth":
            labels.append("EM from truth")
        else:
            labels.append(f"EM ×{r.scale:g} #{r.init_seed}")
        values.append(r.coef_error)
        colors.append("k" if r.method == "algorithm 1" else
                      ("tab:red" if r.coef_error > 0.5 else "tab:blue"))
    ax.bar(range(len(values)), values, color=colors)
    ax.set_xticks(range(len(values)), labels, rotation=90, fontsize=7)
    ax.set(yscale="log", ylabel="max‖ŵ − w‖", title=f"EM vs Algorithm 1 (k = {EM_STORE['k']}, "
           f"d = {EM_STORE['d']}); red: far from the truth")
    return fig


# -- summary ---------------------------------------------------------------------------------
def _summary(sub, clus, clas, out, params, mode) -> str:
    """``summary.md``: the paper's claims beside this run, one row per experiment of
    Appendix E, then the pipeline run's tables and notes."""
    pm = out["prediction"].pivot(index="tau", columns="estimator", values="holdout_mse")
    claims = [
        *_summary_intro(params, mode),
        _subspace_row(sub),
        _clustering_row(clus),
        _classification_row(clas),
        _prediction_row(pm),
        _em_row(out["em"]),
    ]
    return common.markdown(claims, *_pipeline_tables(out["parameters"], pm), _summary_notes())


def _summary_intro(params, mode) -> list[str]:
    """The title, the settings and the head of the table of the paper's claims."""
    return [
        "# Study `mlr`: meta-learning mixed linear regressions (Appendix E in kind)",
        "",
        "The paper (Kong et al., 2020, Appendix E; full reference in streamlsq's "
        "docs/references.md) runs "
        "Algorithm 1 on synthetic mixtures with x and noise standard Gaussian; the text "
        "conversion lost its figures' digits and most settings, so this study compares with "
        "the paper's **qualitative claims** only, on d = 8, k = 4 orthonormal wₕ, s = 1, "
        f"uniform p (docs/studies.md). Seed {params['seed']}; {params['replicates']} "
        "replicates per grid point.",
        "",
        f"How it ran: {mode}",
        "",
        "| the paper (its numbers are lost in the text) | this run |",
        "|---|---|",
    ]


def _subspace_row(sub) -> str:
    """E.1: the subspace error against n·t, and how much the split into n and t matters."""
    sm = sub.groupby(["n_times_t", "rows_per_task"]).subspace_error.mean().unstack()
    big, low = sm.index.max(), sm.index.min()
    ratios = (sm.max(axis=1) / sm.min(axis=1))
    return (
        "| E.1, Table 2: subspace error for pairs (n_L1, t_L1); it depends on the product "
        "n·t | mean error "
        f"{fmt(sm.loc[low].mean())} at n·t = {low:,} → {fmt(sm.loc[big].mean())} at "
        f"{big:,}; at the same n·t the splits t = {', '.join(map(str, sm.columns))} differ "
        f"by a factor ≤ {ratios.max():.2f} (longer tasks better, see the note below) |")


def _clustering_row(clus) -> str:
    """E.2: the clustering accuracy of D_H at the shortest and the longest heavy tasks."""
    cm = clus.groupby(["n_heavy", "t_heavy"]).accuracy.mean().unstack()
    tmax, tmin = cm.columns.max(), cm.columns.min()
    return (
        "| E.2, Figure 3, Table 3: the smallest t_H that clusters D_H correctly, for several "
        "n_H and k | "
        f"accuracy at t_H = {tmin}: {', '.join(fmt(v) for v in cm[tmin])}; at t_H = {tmax}: "
        f"{', '.join(fmt(v) for v in cm[tmax])} (n_H = "
        f"{', '.join(map(str, cm.index))}). More tasks need more rows per task: single "
        "linkage chains through one bad pair, and there are n_H² pairs |")


def _classification_row(clas) -> str:
    """E.3: classification accuracy and parameter errors at the shortest and longest t_L2."""
    km = clas.groupby("t_light2")[["classification_accuracy", "coef_error", "noise_error",
                                   "weight_error"]].mean()
    return (
        "| E.3, Figures 4–5, Table 4: classification accuracy grows with t_L2; errors of "
        "w, s, p fall | "
        f"accuracy {fmt(km.classification_accuracy.iloc[0])} at t_L2 = {km.index[0]} → "
        f"{fmt(km.classification_accuracy.iloc[-1])} at {km.index[-1]}; max ‖ŵ − w‖ "
        f"{fmt(km.coef_error.iloc[0])} → {fmt(km.coef_error.iloc[-1])}, max |ŝ − s| "
        f"{fmt(km.noise_error.iloc[0])} → {fmt(km.noise_error.iloc[-1])}, max |p̂ − p| "
        f"{fmt(km.weight_error.iloc[0])} → {fmt(km.weight_error.iloc[-1])} |")


def _prediction_row(pm) -> str:
    """E.4: the held-out error of the three estimators at the smallest and largest τ, and
    where the ordering posterior mean ≤ MAP ≤ least squares holds."""
    small = pm.index.min()
    below = pm[pm.index < D]
    broken = [int(t) for t, r in below.iterrows()
              if not r["bayes"] <= r["map"] <= r["lstsq"]]
    order = (f"holds at every τ < d = {D}" if not broken else
             f"holds at τ < d = {D} except τ = {', '.join(map(str, broken))}, where MAP, "
             "choosing one component from so few examples, is no better than least squares")
    return (
        "| E.4, Figure 2: prediction error of the Bayes (posterior mean) and MAP estimators "
        "against per-task least squares; meta-learning gains most at small τ | at τ = "
        f"{small}: posterior mean {fmt(pm.loc[small, 'bayes'])}, MAP "
        f"{fmt(pm.loc[small, 'map'])}, least squares {fmt(pm.loc[small, 'lstsq'])} "
        f"(the ordering posterior mean ≤ MAP ≤ least squares {order}); at τ = "
        f"{pm.index.max()}: "
        + ", ".join(f"{fmt(v)}" for v in pm.loc[pm.index.max(), ["bayes", "map", "lstsq"]])
        + " (s² = 1) |")


def _em_row(em) -> str:
    """E.5: EM from perturbed starts against EM from the truth and Algorithm 1."""
    em_runs = em[(em.method == "EM") & (em.init == "perturbed")]
    failed = em_runs[em_runs.coef_error > 0.5]
    truth = em[em.init == "truth"].iloc[0]
    alg1 = em[em.method == "algorithm 1"].iloc[0]
    return (
        "| E.5: EM started at the truth plus noise fails to converge for larger "
        "perturbations, unlike Algorithm 1 | "
        f"k = {EM_STORE['k']}, d = {EM_STORE['d']}: Algorithm 1 max ‖ŵ − w‖ "
        f"{fmt(alg1.coef_error)}; EM from the truth {fmt(truth.coef_error)}; EM from "
        f"{len(em_runs)} perturbed starts: {len(failed)} ended far from the truth "
        f"(max ‖ŵ − w‖ > 0.5; {int((failed.status == 'collapsed').sum())} of them collapsed, "
        "a component's noise variance reaching 0, the others converged to a wrong optimum"
        + (f", scales {', '.join(f'{v:g}' for v in sorted(failed.scale.unique()))}"
           if len(failed) else "") + ") |")


def _pipeline_tables(parameters, pm) -> list[list[str]]:
    """The pipeline run's parameter errors and its held-out MSE against τ: two sections."""
    return [[
        "## One pipeline run (metalearn on the training store)",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {r.metric} | {fmt(r.value)} |" for r in parameters.itertuples()],
    ], [
        "## Held-out prediction MSE against τ",
        "",
        "| τ | posterior mean | MAP | per-task least squares |",
        "|---|---|---|---|",
        *[f"| {tau} | {fmt(r['bayes'])} | {fmt(r['map'])} | {fmt(r['lstsq'])} |"
          for tau, r in pm.iterrows()],
    ]]


def _summary_notes() -> list[str]:
    """What explains the numbers: least squares below τ = d, the floor of the weight error,
    the subspace error at t = 2."""
    return [
        f"- For τ < d = {D} per-task least squares is the minimum-norm interpolant and "
        "predicts badly; the mixture estimators use the k learned components instead.",
        f"- The weight error max |p̂ − p| stays near √(p(1 − p)/n_L2) ≈ "
        f"{np.sqrt(0.25 * 0.75 / BASE['n_light2']):.3f} whatever t_L2: p̂ is a fraction of "
        f"the n_L2 = {BASE['n_light2']} tasks, so it is limited by their number, not their "
        "rows.",
        "- The subspace error's dependence on n·t is only approximate at these sizes: with "
        "t = 2 each split half is a single row, so the product β̂⁽¹⁾β̂⁽²⁾ᵀ is noisier than "
        "for longer tasks; the paper's statement is up to constants and logarithms.",
    ]


#: how the study's parts ran, for its summary
_MODE = (
    "the grids (subspace, clustering, classification) ran through the in-memory "
    "reference of Algorithm 1 (`kernels.studies.mlr`, the kernels of "
    f"`kernels.mlr.meta_learn`) mapped over the cluster in batches of {BATCH_TRIALS} "
    "trials; the pipeline run, the prediction against τ and the EM comparison ran "
    "through the real pipeline (`simulate_mlr`, `metalearn`, `predict`, `fit_em`) on "
    "small stores in a temporary folder."
)


def run_mlr(out: str | os.PathLike, quick: bool = False, seed: int = 0, client=None, *,
            replicates: int | None = None, **runtime) -> StudyResult:
    """Appendix E in kind: grids through the in-memory reference, the rest through the pipeline.

    ``replicates``: trials per grid point (default 20; quick 3). ``quick``
    also shrinks the grids, the stores and the EM comparison (truth and two
    perturbed starts, one of them the known failure).

    ``runtime``: ``scheduler``, ``n_workers`` and ``progress`` of
    :func:`~streamlsq.studies.common.run_study_into`.
    """
    given = common.check_options("mlr", locals())
    sizes = dict(QUICK if quick else FULL)
    if replicates is not None:
        sizes["replicates"] = given["replicates"]
    seed = given["seed"]
    reps = range(sizes["replicates"])
    out = Path(out)
    sub_cfg = [(nt, t, r) for nt in sizes["subspace_nt"] for t in sizes["subspace_t"]
               for r in reps]
    clus_cfg = [(n, t, r) for n in sizes["heavy_n"] for t in sizes["heavy_t"] for r in reps]
    clas_cfg = [(t, r) for t in sizes["light2_t"] for r in reps]
    params = {"quick": quick, "seed": seed, "d": D, "k": K, "noise": 1.0,
              "components": "orthonormal", "weights": "uniform",
              "batch_trials": BATCH_TRIALS, "base": BASE, "em_store": EM_STORE,
              "holdout": HOLDOUT, **{k: (list(v) if isinstance(v, tuple) else v)
                                     for k, v in sizes.items()}}

    def compute(cl, progress) -> StudyOutput:
        sub = _grid(cl, seed, "subspace", sub_cfg, progress)
        clus = _grid(cl, seed, "clustering", clus_cfg, progress)
        clas = _grid(cl, seed, "classification", clas_cfg, progress)
        out.parent.mkdir(parents=True, exist_ok=True)
        reclaim_leftovers(out)
        with OwnedTemporary(out, "stores") as work:  # reclaimed by the next run if killed
            try:
                piped = _pipeline_runs(cl, work.create(), seed, sizes, progress)
            except InputError as exc:
                raise InputError(f"study mlr: {exc}") from None
        return StudyOutput(
            tables={"subspace": sub, "clustering": clus, "classification": clas,
                    "parameters": piped["parameters"], "prediction": piped["prediction"],
                    "em": piped["em"]},
            figures={"grids": plot_grids(sub, clus, clas),
                     "prediction": plot_prediction(piped["prediction"]),
                     "em": plot_em(piped["em"])},
            summary=_summary(sub, clus, clas, piped, params, _MODE), params=params)

    return common.run_study_into("mlr", out, compute, client=client, **runtime)

