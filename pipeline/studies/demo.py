"""``streamlsq demo``: the whole pipeline on an embedded Dask cluster, in a few minutes.

1. simulates a stream store;
2. fits it with KF4LLS (both engines), RLS with a forgetting factor and LMS
   (normalised, decreasing step), and checks the answers against numpy's least
   squares on the same rows and against the true coefficients;
3. simulates a multi-task store of the meta-learning paper's model, meta-learns
   the mixture (Algorithm 1) and predicts new tasks from τ examples with the
   posterior mean, MAP and per-task least squares;
4. prints what was done, how accurate it is and how fast it ran, and writes
   ``summary.md`` and two figures (``stream.png``, ``metalearn.png``) into the
   demo folder.

The demo folder is one it creates (:class:`DemoFolder`, marked by ``demo.json``, which
keeps the digest of each file it wrote and of each store's root ``zarr.json``), with the
folders above it: a folder of the user's, even an empty one, is refused before anything is
written, and only a folder an earlier demo provably wrote is replaced (set aside while the
new one is built, put back if it fails).

The demo is a job of the run path (:class:`DemoJob`): the run checks the folder and opens
the Dask client. It is not one publication: the stores in the folder are results of runs
of their own (each published atomically where it stays), and they name one another by
path (the model's ``input`` is the task store), so they are written in place, in the
folder the demo builds, which is marked complete once every entry is there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr
from matplotlib.figure import Figure

from streamlsq import __version__
from streamlsq.errors import InputError
from streamlsq.io.location import is_url, not_a_url
from streamlsq.io.outputs import (
    OwnedTemporary,
    check_outside_stores,
    check_writable,
    file_digest,
    folder_above,
    foreign_in_store,
    make_parents,
    reclaim_leftovers,
    remove_made,
    written_by_streamlsq,
)
from streamlsq.jobs import Context, Job, Run
from streamlsq.mlr.metalearn import metalearn
from streamlsq.mlr.predict import predict
from streamlsq.options.study import DEMO
from streamlsq.simulate.streams import simulate_stream
from streamlsq.simulate.tasks import simulate_mlr
from streamlsq.stream.fit import fit_stream

__all__ = ["DemoFolder", "DemoJob", "run_demo"]

#: the multi-task model (docs/algorithms.md#meta-learning): k components in d dimensions, s = 1
MLR_K, MLR_D = 4, 8
#: examples τ of a new task for the prediction comparison, and held-out rows per task
TAUS = (2, 4, 8, 16, 64)
HOLDOUT = 20
NEW_TASKS = 1_000
#: the demo's fits of its stream store (:func:`_fit_stream_store`), each a result store
STREAM_RUNS = ("kf4lls-sequential", "kf4lls-scan", "rls-g0.9999", "lms-normalized")
ESTIMATORS = {"bayes": "posterior mean", "map": "MAP", "lstsq": "per-task least squares"}


class DemoFolder:
    """The folder a demo writes into: a new folder it creates, marked by ``demo.json``.

    :meth:`check` (before any work) refuses anything at ``out`` but nothing or an earlier
    demo's folder (its marker) holding nothing but what
    that demo provably wrote, and a folder above it that is a file or cannot be written
    (the missing ones are made by the run, :func:`run_demo`). Used as a context manager it
    sets what is at ``out`` aside (an owned temporary), creates ``out`` with its marker
    (``complete: false`` until the demo ends) and yields it; when the block fails, the new
    folder is removed and the earlier one put back.
    """

    MARKER = "demo.json"

    def __init__(self, out):
        self.given = out
        self.out = Path(out)

    def earlier(self) -> bool:
        """Whether ``out`` is a folder an earlier demo wrote (finished or not)."""
        meta = self._meta()
        return str(meta.get("written_by", "")).startswith("streamlsq demo") and \
            not self.out.is_symlink()

    def _meta(self) -> dict:
        try:
            meta = json.loads((self.out / self.MARKER).read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def check(self) -> None:
        if isinstance(self.given, str) and not self.given.strip():  # else the working folder
            raise InputError("--out is empty: name the path to write")
        out = self.out
        typo = not_a_url(os.fspath(self.given), output=True)  # too few slashes: no folder
        if typo:
            raise InputError(typo)
        if is_url(os.fspath(self.given)):  # Path() would read s3://b/st as the local s3:/b/st
            raise InputError(f"{os.fspath(self.given)}: the demo writes a local folder "
                             "(stores, figures, summary.md); an object store URL is not one: "
                             "name a local folder, and copy it to the store afterwards")
        check_outside_stores(out, "the demo's folder", "--out")
        above = folder_above(out)
        reclaim_leftovers(out)
        # a folder of the user's, even an empty one, is never replaced (its mode, group and
        # ACLs would go with it); '.' and '..' name one whatever they hold
        if out.name in ("", ".", "..") or (os.path.lexists(out) and not self.earlier()):
            raise InputError(f"{out}: exists and was not written by streamlsq demo; the demo "
                             "writes a new folder of its own: name one inside it "
                             f"({os.path.join(out, 'demo')}), or choose another --out")
        foreign, recorded = self._not_written() if os.path.lexists(out) else ([], True)
        if foreign:  # the earlier folder is replaced whole: they would go with it
            more = len(foreign) - 1
            what = foreign[0] if not more else f"{foreign[0]} and {more} more"
            them = "them" if more else "it"
            files = self._meta().get("files")
            stores = self._meta().get("stores")
            if recorded and isinstance(stores, dict) and foreign[0] in stores:
                raise InputError(f"{out}: holds {what}, which this demo did not write (it is "
                                 "not the store its demo.json records); move "
                                 f"{them} or choose another --out")
            if recorded and isinstance(files, dict) and foreign[0] in demo_names() and \
                    isinstance(files.get(foreign[0]), str):
                raise InputError(f"{out}: holds {what}, changed since streamlsq demo wrote "
                                 f"{'them' if more else 'it'}; move {them} or choose another "
                                 "--out")
            if recorded:
                raise InputError(f"{out}: holds {what}, which streamlsq demo did not write; "
                                 f"move {them} or choose another --out")
            raise InputError(f"{out}: holds {what}, which its {self.MARKER} (of an earlier "
                             "streamlsq, or of a demo that was stopped) records without a "
                             f"digest, so it cannot be told from a file of yours; move {them} "
                             "(or remove the folder yourself) or choose another --out")
        check_writable(out.parent if out.parent.is_dir() else above)

    def _not_written(self) -> tuple[list[str], bool]:
        """The entries of an earlier demo's folder it cannot be shown to have written, which
        replacing the folder would remove, and whether they are so for another reason than
        a marker without digests (an earlier version's, a stopped demo's). An entry is the
        demo's when it has a name the demo writes (:func:`demo_names`) and is a file the
        marker lists with the digest of its present bytes, or a store that streamlsq wrote
        holding nothing else (a killed demo's stores too: its temporaries, whose owner is
        gone, are removed first). A user's file put there since, or named in an edited
        marker, is not; a file of a marker without digests cannot be shown to be."""
        files = self._meta().get("files")
        stores = self._meta().get("stores")  # a list in a marker of an earlier version
        recorded = isinstance(files, dict)
        names = demo_names()
        for name in names:
            reclaim_leftovers(self.out / name)

        def strays(path: Path) -> list[str]:  # what of the entry ``path`` is not the demo's
            if path.is_symlink():
                return [path.name]
            if path.name == self.MARKER:
                return [] if path.is_file() else [path.name]
            if path.name not in names:
                return [path.name]
            if path.is_dir():  # a user's file in a store is named, not the store
                if not written_by_streamlsq(path) or (
                        isinstance(stores, dict) and stores.get(path.name) != _store_digest(path)):
                    return [path.name]  # a store of the user's, though streamlsq wrote it
                return [f"{path.name}/{entry}" for entry in foreign_in_store(path)]
            try:
                return [] if recorded and path.is_file() and \
                    files.get(path.name) == file_digest(path) else [path.name]
            except OSError:
                return [path.name]

        foreign = sorted(entry for p in self.out.iterdir() for entry in strays(p))
        unproven = [name for name in foreign if not recorded and name in names
                    and (self.out / name).is_file()]
        # a file of the user's is named first; a file of the demo's without a digest after
        return ([name for name in foreign if name not in unproven] or unproven,
                not unproven or len(unproven) < len(foreign))

    def _mark(self, complete: bool) -> None:
        meta = {"written_by": f"streamlsq demo {__version__}", "complete": complete}
        if complete:  # each file as written: told from what a user puts there later
            meta["files"] = {p.name: file_digest(p) for p in sorted(self.out.iterdir())
                             if p.name != self.MARKER and p.is_file() and not p.is_symlink()}
            # each store by its root zarr.json as this demo left it: a store put in its place
            # (a result of the user's, also one streamlsq wrote) is told from the demo's
            meta["stores"] = {p.name: _store_digest(p) for p in sorted(self.out.iterdir())
                              if p.is_dir() and not p.is_symlink()}
        (self.out / self.MARKER).write_text(json.dumps(meta) + "\n")

    @contextlib.contextmanager
    def building(self):
        self.check()
        with OwnedTemporary(self.out, "old") as aside:
            if os.path.lexists(self.out):
                os.rename(self.out, aside.path)
            created = False
            try:
                self.out.mkdir()
                created = True
                self._mark(complete=False)
                yield self.out
                self._mark(complete=True)
            except BaseException:
                if created:  # a folder that appeared meanwhile is not this run's to remove
                    shutil.rmtree(self.out, ignore_errors=True)
                if os.path.lexists(aside.path):
                    os.rename(aside.path, self.out)
                raise


def _store_digest(path: Path) -> str | None:
    """The digest of a store's root ``zarr.json`` (its attributes: the run's provenance and
    creation time), which tells this demo's store from another run's of the same name."""
    try:
        return file_digest(path / "zarr.json")
    except OSError:
        return None


def demo_names() -> set[str]:
    """The names of the entries the demo writes in its folder, beside its marker."""
    stores = ["stream", "tasks", "model", *STREAM_RUNS, *(f"new-tasks-{tau}" for tau in TAUS)]
    return {f"{name}.zarr" for name in stores} | {"stream.png", "metalearn.png", "summary.md"}


def _slopes(ds):
    """Coefficients without the intercept row (LMS has one), (step, feature, target)."""
    names = [str(f) for f in ds.feature.values]
    if "intercept" in names:
        return ds.coef.isel(feature=[i for i, f in enumerate(names) if f != "intercept"])
    return ds.coef


def _stream_figure(results, truth, rows) -> Figure:
    fig = Figure(figsize=(12, 4.3), layout="constrained")
    a1, a2 = fig.subplots(1, 2)
    kf = results["kf4lls-sequential"]
    coef = _slopes(kf).values[:, :, 0]
    seen = kf.rows_seen.values
    show = min(6, coef.shape[1])
    for j in range(show):
        line, = a1.plot(seen, coef[:, j], label=f"x{j}")
        a1.axhline(truth[j, 0], color=line.get_color(), ls=":", lw=1)
    a1.set(xscale="log", xlabel="rows seen", ylabel="coefficient",
           title=f"KF4LLS coefficients (first {show}) converge to the truth (dotted)")
    a1.legend(fontsize=7, ncol=2)
    for name, ds in results.items():
        if name == "kf4lls-scan":
            continue  # the same numbers as the sequential engine
        c = _slopes(ds).values
        err = np.sqrt(((c - truth[None]) ** 2).sum(axis=(1, 2)))
        a2.plot(ds.rows_seen.values, err, label=name)
    a2.set(xscale="log", yscale="log", xlabel="rows seen", ylabel="‖coef − truth‖",
           title=f"error against the truth ({rows:,} rows)")
    a2.legend(fontsize=8)
    return fig


def _metalearn_figure(model, truth_W, pred) -> Figure:
    from streamlsq.kernels import mlr

    fig = Figure(figsize=(12, 4.3), layout="constrained")
    a1, a2 = fig.subplots(1, 2)
    W = model.coef.values
    match = mlr.match_components(W, truth_W)
    for h, ell in enumerate(match):
        if ell >= 0:
            a1.plot(truth_W[h], W[ell], "o", ms=5, label=f"component {h} ↔ cluster {ell}")
    lim = float(np.abs(truth_W).max()) * 1.15
    a1.plot([-lim, lim], [-lim, lim], "k-", lw=0.6)
    a1.set(xlabel="true wₕ (each coordinate)", ylabel="meta-learned ŵ",
           title=f"Algorithm 1: {W.shape[0]} clusters found for {truth_W.shape[0]} components",
           xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal")
    a1.legend(fontsize=7)
    for est, label in ESTIMATORS.items():
        part = [(t, m) for t, e, m in pred if e == est]
        a2.plot([t for t, _ in part], [m for _, m in part], marker="o", label=label)
    for tau, est, mse in pred:
        if mse > 10:
            a2.annotate(f"{ESTIMATORS[est]}\nat τ = d = {tau}: {mse:.2g}", xy=(tau, 10),
                        xytext=(0.66, 0.55), textcoords="axes fraction", fontsize=7,
                        arrowprops={"arrowstyle": "->", "lw": 0.6})
    a2.axhline(1.0, color="k", ls=":", lw=0.8, label="noise s² = 1")
    a2.set_xscale("log")
    a2.set_xticks(list(TAUS), [str(t) for t in TAUS])
    a2.minorticks_off()
    a2.set(yscale="log", ylim=(0.8, 10), xlabel="τ (examples of a new task)",
           ylabel=f"held-out MSE ({HOLDOUT} rows per task)",
           title=f"prediction for {NEW_TASKS:,} new tasks (d = {MLR_D})")
    a2.legend(fontsize=8, loc="upper right")
    return fig


def _cluster_line(cl) -> str:
    """The demo's first line: the Dask cluster it runs on."""
    workers = cl.scheduler_info()["workers"].values()
    n_threads = sum(w.get("nthreads", 1) for w in workers)
    link = cl.dashboard_link
    return (f"streamlsq demo: Dask cluster at {cl.scheduler.address} with "
            f"{len(workers)} worker{'s' * (len(workers) != 1)} ({n_threads} threads)"
            f"{'' if not link else f', dashboard {link}'}")


def _fit_stream_store(cl, data: Path, out: Path, rows: int, features: int) -> dict:
    """The demo's fits of the stream store ``data``: run name → result Dataset."""
    # small blocks, each recorded: the trajectories show the first thousands of rows too
    traj = max(min(rows // 100, 2_000), 10 * features)
    runs = {
        "kf4lls-sequential": dict(method="kf4lls", engine="sequential", block_size=traj,
                                  record_every=1),
        "kf4lls-scan": dict(method="kf4lls", engine="scan"),
        "rls-g0.9999": dict(method="rls", engine="sequential", forgetting=0.9999,
                            block_size=10_000),
        # normalised LMS: the step ρ/‖x‖² is stable for ρ < 2 whatever the feature scale
        "lms-normalized": dict(method="lms", engine="sequential", normalized=True,
                               schedule="inverse", rate=1.0, tau=1e3, block_size=traj,
                               record_every=1),
    }
    return {name: fit_stream(data, out=out / f"{name}.zarr", overwrite=True, client=cl,
                             **runs[name])
            for name in STREAM_RUNS}  # the names an earlier demo's folder is known by


def _stream_accuracy(results: dict, data: Path, truth: np.ndarray, say) -> dict:
    """Per fit its speed and its largest errors against numpy's least squares on the same
    rows and against the truth, and how far the two KF4LLS engines differ; printed as a
    table. Returns the report's entries."""
    # reference: numpy least squares on the same rows (fits in memory at demo size)
    g = zarr.open_group(str(data), mode="r")
    X, y = g["X"][:], g["y"][:]
    ref = np.linalg.lstsq(X, y, rcond=None)[0]
    ref = ref[:, None] if ref.ndim == 1 else ref
    del X, y
    report: dict = {}
    say("2. fitted the stream (result stores in the same folder):")
    say(f"   {'run':<20}{'rows/s':>12}{'max rel. err vs lstsq':>24}{'error vs truth':>17}")
    for name, ds in results.items():
        coef = _slopes(ds).isel(step=-1).values
        rel = float(np.abs(coef - ref).max() / np.abs(ref).max())
        err = float(np.abs(coef - truth).max())
        report[name] = {"rows_per_second": ds.attrs["rows_per_second"],
                        "seconds": ds.attrs["seconds"], "rel_error_vs_lstsq": rel,
                        "error_vs_truth": err}
        say(f"   {name:<20}{ds.attrs['rows_per_second']:>12.3e}{rel:>24.2e}{err:>17.3e}")
    seq, scan = results["kf4lls-sequential"], results["kf4lls-scan"]
    agree = float(np.abs(seq.coef.isel(step=-1) - scan.coef.isel(step=-1)).max())
    report["engines_max_abs_difference"] = agree
    say(f"   The two KF4LLS engines agree to {agree:.1e} (both are exact least squares); "
        "RLS with forgetting 0.9999 weights recent blocks more and LMS takes one small "
        "step per row, so both differ from least squares by design.")
    return report


def _simulate_task_store(cl, path: Path, tasks: int, seed: int) -> tuple[int, int]:
    """The demo's multi-task store: ``tasks`` light tasks of 4 rows, a quarter as many of 10
    rows to classify and 200 heavy tasks of 200 rows. Returns its tasks and rows."""
    sizes = {"n_light": tasks, "t_light": 4, "n_heavy": 200, "t_heavy": 200,
             "n_light2": max(tasks // 4, 4 * MLR_K), "t_light2": 10}
    simulate_mlr(path, k=MLR_K, d=MLR_D, seed=seed, overwrite=True, client=cl, **sizes)
    roles = ("light", "heavy", "light2")
    return (sum(sizes[f"n_{r}"] for r in roles),
            sum(sizes[f"n_{r}"] * sizes[f"t_{r}"] for r in roles))


def _metalearn_accuracy(model, seconds: float, n_task_rows: int, say) -> dict:
    """The meta-learned model against the truth, and its speed; printed as one line.
    Returns the report's entry."""
    a = model.attrs
    say(f"4. meta-learned the mixture (Algorithm 1) in {seconds:.1f} s "
        f"({n_task_rows / seconds:.3e} rows/s): {model.coef.shape[0]} clusters; against "
        f"the truth: heavy tasks clustered {a['heavy_accuracy']:.0%} right, light tasks "
        f"classified {a['classification_accuracy']:.1%} right, max ‖ŵ − w‖ = "
        f"{a['coef_error']:.3f}, max |ŝ − s| = {a['noise_error']:.3f}, max |p̂ − p| = "
        f"{a['weight_error']:.3f} (subspace error {a['subspace_error']:.3f})")
    return {
        "seconds": seconds, "rows_per_second": n_task_rows / seconds,
        **{k: float(a[k]) for k in ("subspace_error", "heavy_accuracy",
                                    "classification_accuracy", "coef_error",
                                    "noise_error", "weight_error")},
        "n_clusters": int(model.coef.shape[0]),
    }


def _predict_new_tasks(cl, out: Path, model_path: Path, seed: int) -> list[tuple]:
    """(τ, estimator, held-out MSE) for :data:`NEW_TASKS` new tasks of each τ in :data:`TAUS`
    and each estimator: the new tasks are drawn from the same mixture with another seed."""
    pred = []
    for tau in TAUS:
        new = simulate_mlr(out / f"new-tasks-{tau}.zarr", k=MLR_K, d=MLR_D, seed=seed,
                           task_seed=1_000 * (seed + 1) + tau, n_light=0, n_heavy=0,
                           n_light2=NEW_TASKS, t_light2=tau + HOLDOUT, overwrite=True,
                           client=cl)
        for est in ESTIMATORS:
            res = predict(model_path, new, estimator=est, holdout=HOLDOUT, client=cl)
            pred.append((tau, est, float(res.attrs["holdout_mse"])))
    return pred


def _prediction_table(prediction: dict, seconds: float) -> list[str]:
    """The lines that print the held-out MSE of every estimator against τ."""
    return [
        f"5. predicted {NEW_TASKS:,} new tasks from τ examples each, scored on {HOLDOUT} "
        f"held-out rows per task ({seconds:.1f} s); held-out MSE (noise s² = 1 is the floor):",
        f"   {'τ':>5}" + "".join(f"{label:>24}" for label in ESTIMATORS.values()),
        *[f"   {tau:>5}" + "".join(f"{prediction[e][tau]:>24.3f}" for e in ESTIMATORS)
          for tau in TAUS],
        "   With few examples the learned mixture predicts far better than least squares "
        f"on the task alone (underdetermined for τ < d = {MLR_D}, unstable at τ = d); "
        "all approach s² as τ grows.",
    ]


def run_demo(out: str | Path = "streamlsq-demo", rows: int = 2_000_000, features: int = 20,
             seed: int = 0, client=None, scheduler=None, echo=print,
             tasks: int = 100_000) -> dict:
    """Run the demo into folder ``out``, printing with ``echo``; returns its report.

    ``rows`` × ``features``: the stream; ``tasks``: light tasks of the
    multi-task store (D_L1 has ``tasks`` tasks of 4 rows, D_L2 ``tasks // 4``
    of 10 rows, D_H 200 of 200 rows). The report holds per run
    ``rows_per_second``, ``seconds``, ``rel_error_vs_lstsq`` and
    ``error_vs_truth``, plus ``engines_max_abs_difference``, ``metalearn``
    (errors against the truth, rows/s), ``prediction`` {estimator: {τ: MSE}} and
    ``figures`` / ``summary`` (paths).
    """
    given = DEMO.check({"out": out, "rows": rows, "features": features, "seed": seed,
                        "tasks": tasks})
    rows, features, seed, tasks = (given[name] for name in ("rows", "features", "seed", "tasks"))
    job = DemoJob(rows, features, seed, echo, tasks)
    try:
        return Run(out, client=client, scheduler=scheduler).execute(job)
    except BaseException:  # the folders made above ``out`` go with the failed run
        remove_made(job.made)
        raise


@dataclass(eq=False)
class DemoJob(Job):
    """The demo (:func:`run_demo`) as a job of the run path: its folder checked before
    the cluster starts, its work on the run's client; the folder is built in place (see
    the module's docstring) and the report returned."""

    rows: int
    features: int
    seed: int
    echo: Callable
    tasks: int
    made: list = field(default_factory=list)  # the folders above the output this run made

    name = "demo"

    def open(self, run: Run) -> list:
        self.out = run.out
        return []  # the demo simulates its data

    def prepare(self, run: Run, inputs: list) -> None:
        DemoFolder(run.out).check()
        # the folders above it, as a study makes them; a failed run takes them back (run_demo)
        self.made = make_parents(run.out)

    def compute(self, ctx: Context) -> dict:
        with DemoFolder(self.out).building() as out:
            return _demo(ctx.client, out, self.rows, self.features, self.seed, self.echo,
                         self.tasks)

    def annotate(self, result: dict, provenance: dict, run: dict) -> None:
        """None: the report is no result store (each store in the folder has its own)."""

    def publish(self, run: Run, result: dict, inputs: list) -> dict:
        return result  # built in place (the module's docstring says why)


def _demo(cl, out: Path, rows: int, features: int, seed: int, echo, tasks: int) -> dict:
    """The demo's work on the client ``cl`` into the folder ``out`` being built."""
    started = time.perf_counter()
    lines: list[str] = []

    def say(text: str = "") -> None:
        echo(text)
        lines.append(text)

    say(_cluster_line(cl))
    data = out / "stream.zarr"
    t = time.perf_counter()
    simulate_stream(data, rows, features, 1, condition=10.0, seed=seed, client=cl,
                    overwrite=True)
    say(f"1. simulated a stream of {rows:,} rows x {features} features, y = X·w + N(0, 1) "
        f"-> {data} ({time.perf_counter() - t:.1f} s)")
    truth = np.asarray(zarr.open_group(str(data), mode="r")["coef_true"][:])
    truth = truth.reshape(features, -1)
    results = _fit_stream_store(cl, data, out, rows, features)
    report = _stream_accuracy(results, data, truth, say)

    tasks_path, model_path = out / "tasks.zarr", out / "model.zarr"
    t = time.perf_counter()
    n_tasks, n_task_rows = _simulate_task_store(cl, tasks_path, tasks, seed)
    say(f"3. simulated a multi-task store: {n_tasks:,} tasks ({n_task_rows:,} rows) of a "
        f"mixture of k = {MLR_K} linear regressions in d = {MLR_D}, noise s = 1 -> "
        f"{tasks_path} ({time.perf_counter() - t:.1f} s)")
    t = time.perf_counter()
    model = metalearn(tasks_path, MLR_K, out=model_path, overwrite=True, client=cl)
    report["metalearn"] = _metalearn_accuracy(model, time.perf_counter() - t, n_task_rows, say)

    t = time.perf_counter()
    pred = _predict_new_tasks(cl, out, model_path, seed)
    report["prediction"] = {est: {tau: m for tau, e, m in pred if e == est}
                            for est in ESTIMATORS}
    for line in _prediction_table(report["prediction"], time.perf_counter() - t):
        say(line)

    figures = {"stream": out / "stream.png", "metalearn": out / "metalearn.png"}
    _stream_figure(results, truth, rows).savefig(figures["stream"], dpi=110)
    truth_W = np.asarray(zarr.open_group(str(tasks_path), mode="r")["w_true"][:])
    _metalearn_figure(model, truth_W, pred).savefig(figures["metalearn"], dpi=110)
    total = time.perf_counter() - started
    say(f"6. figures: {figures['stream']} (coefficient trajectories, error vs rows), "
        f"{figures['metalearn']} (components found, prediction error vs τ); "
        f"total {total:.0f} s")
    summary = out / "summary.md"
    summary.write_text("# streamlsq demo\n\n```\n" + "\n".join(lines) + "\n```\n")
    report["figures"] = figures
    report["summary"] = summary
    report["seconds"] = total
    return report
