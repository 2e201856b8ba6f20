"""Algorithm 1 of Kong et al. (2020) over a multi-task store (``docs/algorithms.md``).

Each step is a Dask computation over chunks of tasks (:mod:`.tasks`) that reads
its rows inside the task that uses them; only small per-chunk results travel
(d×d sums, projected estimates, labels, per-cluster statistics). The order of
the kernel calls is :func:`streamlsq.kernels.mlr.meta_learn`'s, which is the
in-memory reference this module reproduces (to rounding: sums are
re-associated over chunks; labels exactly):

0. optional whitening: feature moments Σxxᵀ over every used row (map + tree
   reduction), T = (Σxxᵀ/n)^{-1/2} (``center=False``: the model has no
   intercept, see ``kernels.whitening``); every later read is whitened with T
   and the coefficients are mapped back, w_x = T w_z, at the end;
1. subspace: Σ of the split-half moment over D_L1 (map + tree reduction),
   U = top-k eigenvectors of M̂;
2. heavy tasks D_H: projected split estimates (a, c) per task (a map; the
   results, n_H·L·k·16 bytes, are gathered); the distance matrix H by
   upper-triangle tiles of ``tile`` × ``tile`` tasks, each tile computed on a
   worker from the scattered (a, c):
   - single linkage: each tile returns its minimum spanning forest
     (≤ 2·tile − 1 edges) and the forests are merged as a tree
     (``merge_spanning_forests``, exact: see ``streamlsq.kernels.mlr.linkage``); H never
     exists whole. Memory: one tile (tile²·8 bytes, 8 MB at tile = 1024) per
     worker thread, n_H·(L·k·16 + 24) bytes on the client. Time grows as n_H²;
   - average linkage needs all of H on the client: n_H ≤ ``MAX_FULL_HEAVY`` =
     5,000 heavy tasks, H = n_H²·8 bytes = 200 MB there, about 0.8 GB with
     SciPy's condensed copy and index arrays;
3. initial estimates ŵ_ℓ, p̂_ℓ from the clusters (client, small); r̂²_ℓ from
   residual sums over D_H (map + tree reduction);
4. classification of D_L2 (a map returning labels) fused with
5. refinement: per-cluster XᵀX, Xᵀy, yᵀy, counts (grouped reduction: the same
   map's statistics, summed as a tree), then per-cluster least squares.

The result (:func:`model_dataset`) is the model store of ``docs/stores.md#model-store``.
"""

from __future__ import annotations

import operator
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Unpack

import numpy as np
import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import merge_spans
from streamlsq.io.tasks import (
    CHUNK_TASKS,
    TASK_VARIABLES,
    TaskChunk,
    TaskSets,
    TaskSource,
    load_chunk,
    plan_chunks,
    reading_chunk,
    task_input_identity,
    task_sets,
)
from streamlsq.jobs import Context, Job, Run, RunOptions
from streamlsq.kernels import mlr
from streamlsq.options.mlr import (
    DEFAULT_LINKAGE,
    DEFAULT_SPLITS,
    K_MAX,
    MAX_FULL_HEAVY,
    METALEARN,
    POOLED,
    TILE,
)
from streamlsq.runtime.reduce import (
    fold_units,
    map_chunks,
    tree_groups,
    tree_reduce,
    wait_progress,
)

__all__ = ["DEFAULT_LINKAGE", "DEFAULT_SPLITS", "K_MAX", "MAX_FULL_HEAVY", "TILE", "MetaLearning",
           "PooledFit", "fit_pooled", "metalearn", "model_dataset"]

# MAX_FULL_HEAVY, TILE, DEFAULT_LINKAGE, DEFAULT_SPLITS and K_MAX are declared with the
# options (streamlsq.options.mlr), where the command line's help reads them
#: k="auto" holds out every VALIDATION_EVERY-th light2 task to score each k
VALIDATION_EVERY = 4


# -- tasks run on the workers (each reads its own chunk) --------------------------------
def _guarded(fn, chunk: TaskChunk, source: TaskSource, *args):
    with reading_chunk(source, chunk):
        return fn(chunk, source, *args)


def _with_offsets(source: TaskSource, chunks: list[TaskChunk]) -> list[TaskChunk]:
    """The chunks of work of one Dask task with their offsets ``task_ptr``, read once for all
    of them (a task's message carries none: 80 kB a chunk of 10,000 tasks)."""
    if all(c.ptr is not None for c in chunks):
        return chunks
    with reading_chunk(source, chunks[0]):
        ptr = source.task_ptr(chunks[0].lo, chunks[-1].hi)
    base = chunks[0].lo
    return [replace(c, ptr=ptr[c.lo - base : c.hi - base + 1]) for c in chunks]


def _map_group(chunks, fn, source, *args) -> list:
    """Dask task: ``fn`` over consecutive chunks of work, one after another (each read,
    computed and freed before the next); their results in order."""
    return [_guarded(fn, c, source, *args) for c in _with_offsets(source, chunks)]


def _reduce_group(chunks, fn, source, levels, leaf, keep, *args) -> tuple[list, dict]:
    """Dask task: ``fn`` over ``SPLIT_EVERY ** levels`` consecutive chunks of work (or the
    last ones), one after another; their sums (``leaf`` of each result) combined as the
    lowest ``levels`` levels of the reduction tree (:func:`fold_units`: the same bits as one
    Dask task per chunk), and ``keep`` of each result (e.g. its labels) in order."""
    return fold_units(_with_offsets(source, chunks), lambda c: _guarded(fn, c, source, *args),
                      mlr.combine_stats, levels, leaf, keep)


def _partial_sums(result):
    return result[1]


def _moments(chunk, source, holdout):
    X, _, _ = load_chunk(source, chunk, None, holdout)
    return mlr.moment_sums(X)


def _subspace(chunk, source, transform, holdout):
    M, n = mlr.subspace_moment_sum(*load_chunk(source, chunk, transform, holdout))
    return {"moment": M, "tasks": np.int64(n)}


def _project(chunk, source, transform, holdout, U, splits):
    return mlr.projected_split_estimates(*load_chunk(source, chunk, transform, holdout), U, splits)


def _residuals(chunk, source, transform, holdout, labels, W0):
    rows = load_chunk(source, chunk, transform, holdout)
    sse, n = mlr.cluster_residual_sums(*rows, labels[chunk.first : chunk.first + chunk.n], W0)
    return {"sse": sse, "rows": n}


def _classify(chunk, source, transform, holdout, W0, r2):
    X, y, ptr = load_chunk(source, chunk, transform, holdout)
    labels = mlr.classify(mlr.classification_log_likelihood(X, y, ptr, W0, r2))
    return labels, mlr.cluster_sufficient_stats(X, y, ptr, labels, W0.shape[0])


def _classify_many(chunk, source, transform, holdout, initial):
    """Classification statistics of one chunk under every candidate (W0, r2), keys "k:name"."""
    X, y, ptr = load_chunk(source, chunk, transform, holdout)
    out = {}
    for W0, r2 in initial:
        labels = mlr.classify(mlr.classification_log_likelihood(X, y, ptr, W0, r2))
        stats = mlr.cluster_sufficient_stats(X, y, ptr, labels, W0.shape[0])
        out.update({f"{W0.shape[0]}:{name}": v for name, v in stats.items()})
    return out


def _heldout(chunk, source, transform, holdout, models):
    return mlr.heldout_loglik_sums(*load_chunk(source, chunk, transform, holdout), models)


def _tile(ac, r0, r1, c0, c1, forest):
    a, c = ac
    block = mlr.pairwise_distance_block(a[r0:r1], c[r0:r1], a[c0:c1], c[c0:c1])
    return mlr.tile_spanning_forest(block, r0, c0) if forest else block


# -- orchestration ------------------------------------------------------------------
class Steps:
    """The steps of one meta-learning run: client, source, plan, timings, the values a run
    computes once and reuses (``cache``), and the checkpoint (if any) that commits each
    step's result."""

    def __init__(self, client, source, holdout, chunk_tasks, progress, checkpoint=None):
        self.client, self.source, self.holdout = client, source, holdout
        self.chunk_tasks, self.progress = chunk_tasks, progress
        self.seconds: dict[str, float] = {}
        self.ptr = source.task_ptr()
        self.cache: dict = {}
        self.checkpoint = checkpoint

    def step(self, name: str, compute, *chunk_lists, timing: str | None = None):
        """``compute()``, its time added to ``seconds[timing or name]``; with a checkpoint,
        a resumed run takes the step's committed result instead, and a finished step is
        committed with the rows its chunks (``chunk_lists``) read. Every step is
        deterministic (fixed reduction trees), so a resumed run ends with the
        uninterrupted run's model. ``name`` is unique within a run (a step repeated for
        several k carries k in its name)."""
        key = timing or name
        entry = f"step-{name}"
        if self.checkpoint is not None and entry in self.checkpoint:
            value, seconds = self.checkpoint.load(entry)
            self.seconds[key] = self.seconds.get(key, 0.0) + seconds
            return value
        started = time.perf_counter()
        value = compute()
        seconds = time.perf_counter() - started
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        if self.checkpoint is not None:
            reads = [(0, int(self.ptr[c.lo]), int(self.ptr[c.hi]))
                     for chunks in chunk_lists for c in chunks]
            self.checkpoint.save(entry, (value, seconds), merge_spans(reads))
        return value

    def plan(self, mask):
        return plan_chunks(self.ptr, mask, self.chunk_tasks)

    def groups(self, chunks) -> tuple[int, list[list[TaskChunk]]]:
        """(levels, groups): the chunks of work of each Dask task, a whole subtree of the
        reduction near :func:`~streamlsq.runtime.reduce.task_bytes` of the chunks' rows
        (:func:`~streamlsq.runtime.reduce.tree_groups`; the chunks fix the arithmetic, how
        many a Dask task takes changes no bit of a result), their offsets left out of the
        messages when several share a task."""
        rows = int(self.ptr[chunks[-1].hi] - self.ptr[chunks[0].lo]) if chunks else 0
        levels, groups = tree_groups(self.client, chunks,
                                     rows * (self.source.n_features + 1) * 8)
        if levels == 0:
            return levels, groups
        return levels, [[replace(c, ptr=None) for c in g] for g in groups]

    def map(self, fn, chunks, *args, name, desc=None) -> list:
        """``fn`` over every chunk of work, the results in order (gathered to the client)."""
        _, groups = self.groups(chunks)
        futures = map_chunks(self.client, _map_group, groups, fn, self.source, *args, name=name)
        wait_progress(self.client, futures, [sum(c.n for c in g) for g in groups],
                      desc or name, enabled=self.progress)
        return [r for part in self.client.gather(futures) for r in part]

    def reduce(self, fn, chunks, *args, name, leaf=None, keep=None):
        """The sum (``mlr.combine_stats``, a fixed tree over the chunks of work) of ``leaf``
        of ``fn`` over every chunk; returns the Dask tasks' futures, each of (``keep`` of
        each of its chunks' results, its partial sum), and the sum."""
        levels, groups = self.groups(chunks)
        futures = map_chunks(self.client, _reduce_group, groups, fn, self.source, levels, leaf,
                             keep, *args, name=name)
        total = tree_reduce(self.client, futures, mlr.combine_stats, leaf=_partial_sums,
                            name=f"{name}-sum")
        wait_progress(self.client, futures, [sum(c.n for c in g) for g in groups], name,
                      enabled=self.progress)
        return futures, total.result()


def _check_inputs(source: TaskSource, sets: TaskSets, ptr, k, splits, linkage, threshold,
                  holdout, option: str = "k"):
    """What the declarations cannot say: the options against the store's tasks (k within
    the features and the heavy tasks, every task long enough for its role). ``option``:
    the option that gave ``k`` (``k_max`` with ``--k auto``), named when it is refused."""
    d = source.n_features
    label = source.label
    given = {"k": f"k = {k}", "k_max": f"--k-max {k}", "rank": f"--rank {k}"}[option]
    if k > d:
        raise InputError(
            f"{label}: {given} is larger than the number of features d = {d}; the subspace"
            f"{'' if option == 'rank' else ' of k components'} has at most d dimensions"
        )
    sizes = np.diff(ptr) - holdout
    for role, need, why in (
        ("light", 2, "its rows are split in halves"),
        ("heavy", 2 * splits, f"its rows are split into 2L = {2 * splits} groups"),
        ("light2", 1, "it is classified from its rows"),
    ):
        mask = sets.mask(role)
        if not mask.any():
            raise InputError(f"{label}: no {role} task (task sets by {sets.rule})")
        short = mask & (sizes < need)
        if short.any():
            i = int(np.flatnonzero(short)[0])
            held = f" after holding out {holdout}" if holdout else ""
            raise InputError(
                f"{label}: task {i} (role {role}) has {int(sizes[i])} row(s){held}; a {role} "
                f"task needs at least {need} ({why})"
            )
    n_heavy = int(sets.heavy.sum())
    if threshold is None and n_heavy < k:
        raise InputError(
            f"{label}: {n_heavy} heavy task(s), fewer than {given}; clustering them into k "
            "clusters needs at least k heavy tasks"
        )
    if n_heavy < 2:
        raise InputError(f"{label}: {n_heavy} heavy task; clustering needs at least 2")
    if linkage == "average" and n_heavy > MAX_FULL_HEAVY:
        raise InputError(
            f"{label}: average linkage needs the full distance matrix, supported up to "
            f"{MAX_FULL_HEAVY} heavy tasks; this store has {n_heavy}: use single linkage"
        )


def metalearn(
    data: str | os.PathLike,
    k: int | str | None = None,
    *,
    out: str | os.PathLike | None = None,
    k_max: int | None = None,
    linkage: str = DEFAULT_LINKAGE,
    threshold: float | None = None,
    rank: int | None = None,
    splits: int = DEFAULT_SPLITS,
    whiten: bool = False,
    roles: str = "auto",
    heavy_rows: int | None = None,
    holdout: int = 0,
    chunk_tasks: int = CHUNK_TASKS,
    tile: int = TILE,
    group: str | None = None,
    k_curve: bool = False,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Meta-learn a mixture of k linear regressions from the multi-task store ``data``.

    Parameters
    ----------
    k : number of components (the subspace rank and the clustering cut), or
        "auto" (None, the default, is "auto" unless ``threshold`` is given): chosen from
        the data (:func:`select_k`: held-out likelihood of the fitted mixture for
        k = 1..``k_max``, one-standard-error rule).
    k_max : largest k tried by ``k="auto"`` (default min(d, 8, heavy tasks)).
    linkage : "average" (the authors' code; full matrix, up to ``MAX_FULL_HEAVY``
        heavy tasks), "single" (the paper; tiled, any number of heavy tasks) or
        "auto" (average up to ``MAX_FULL_HEAVY`` heavy tasks, else single).
    threshold, rank : cut the linkage at the distance ``threshold`` instead of at k
        clusters (Δ²/2 for a known separation Δ), the subspace being of rank ``rank``;
        the number of clusters is found (``k`` is then not given).
    splits : L, the number of split pairs per heavy task (median over L).
    whiten : whiten the features first (coefficients are mapped back).
    roles, heavy_rows : task sets from the store's ``role`` or by rows per task
        (see :mod:`streamlsq.io.tasks`; without ``heavy_rows`` a rule on the task
        sizes picks the heavy tasks).
    holdout : leave out the last ``holdout`` rows of every task (for evaluation
        with ``predict(..., holdout=...)``).
    chunk_tasks : tasks per chunk of work; tile : heavy tasks per tile side.
    out : write the model store here (atomically, ``complete=True`` last).
    k_curve : with ``out`` and ``k="auto"``, also write the curve k was chosen from as
        ``OUT.k-curve.csv`` and ``OUT.k-curve.png`` beside the model store (OUT without its
        extension; :mod:`streamlsq.mlr.kcurve`): files of the output, checked with it before
        any work and published with it.
    **run : the options of the run (:class:`streamlsq.jobs.RunOptions`); with
        ``checkpoint`` each step's result is committed, and ``resume`` continues a killed
        run from its last finished step (the same model as an uninterrupted run).

    Returns
    -------
    xarray.Dataset: ``basis (feature, rank)``, ``coef (cluster, feature)``,
    ``noise (cluster)`` (ŝ, a standard deviation) and ``noise_var`` (ŝ²),
    ``weight (cluster)``, ``refinement (cluster)``, ``heavy_cluster (heavy_task)``,
    ``light_cluster (light_task)``, ``eigenvalues``, initial estimates, with
    ``k="auto"`` the curve ``k_loglik``/``k_loglik_se (k_candidate)``, the seconds
    of each step (``seconds_*``) and, for a store with the truth, its errors as
    attributes.

    Notes
    -----
    A cluster whose light2 rows cannot be refined (too few rows, a singular
    XᵀX, or no light2 task) keeps the least-squares estimate closest to its
    initial one (:func:`streamlsq.kernels.mlr.refine_with_fallback`); it is
    flagged in ``refinement (cluster)`` and the ``fallback_clusters`` attribute,
    and the run completes.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=4_000,
    ...                               t_light=4, n_heavy=100, t_heavy=60, n_light2=1_000,
    ...                               t_light2=10, seed=1)
    >>> model = streamlsq.metalearn(path, 2)
    >>> model.coef.dims, model.sizes["cluster"]
    (('cluster', 'feature'), 2)
    >>> model.attrs["heavy_accuracy"]  # the store knows its truth
    1.0
    >>> streamlsq.metalearn(path, "auto").attrs["k_chosen"]
    2
    >>> tmp.cleanup()
    """
    job = MetaLearning(data, k, group=group, k_max=k_max, linkage=linkage,
                       threshold=threshold, rank=rank, splits=splits, whiten=whiten, roles=roles,
                       heavy_rows=heavy_rows, holdout=holdout, chunk_tasks=chunk_tasks,
                       tile=tile, k_curve=k_curve)
    return Run(out, **run).execute(job)


@dataclass(eq=False)
class MetaLearning(Job):
    """Algorithm 1 over a multi-task store (:func:`metalearn`): reads the tasks by chunks
    of work, computes each step as a map or a tree reduction (checkpointed step by step),
    writes the model store."""

    data: Any
    k: int | str | None = None
    group: str | None = None
    k_max: int | None = None
    linkage: str = DEFAULT_LINKAGE
    threshold: float | None = None
    rank: int | None = None
    splits: int = DEFAULT_SPLITS
    whiten: bool = False
    roles: str = "auto"
    heavy_rows: int | None = None
    holdout: int = 0
    chunk_tasks: int = CHUNK_TASKS
    tile: int = TILE
    k_curve: bool = False

    options = METALEARN
    name = "metalearn"
    checkpoint_kind = "metalearn"
    checkpoint_variables = TASK_VARIABLES

    def check_options(self) -> None:
        """The declared options checked; k not given is then k='auto' (the rules tell the
        two apart: an explicit 'auto' and a threshold are refused in its words); with a
        threshold, k stays None: the rank is ``rank``."""
        super().check_options()
        if self.k is None and self.threshold is None:
            self.k = "auto"

    def open(self, run: Run) -> list:
        self.source = run.open_input("tasks", self.data, self.group)
        return [self.source]

    def beside(self) -> dict:
        if not (self.k_curve and self.k == "auto"):
            return {}
        from streamlsq.mlr.kcurve import K_CURVE_FILES

        return dict(K_CURVE_FILES)

    def fingerprint(self) -> dict:
        return {"input": task_input_identity(self.source), "k": self.k, "k_max": self.k_max,
                "linkage": self.linkage, "threshold": self.threshold,
                # only with a threshold: a checkpoint of a cut at k clusters stays resumable
                **({} if self.rank is None else {"rank": self.rank}), "splits": self.splits,
                "whiten": bool(self.whiten), "roles": self.roles,
                "heavy_rows": self.heavy_rows, "holdout": self.holdout,
                "chunk_tasks": self.chunk_tasks, "tile": self.tile}

    def fingerprint_options(self, fingerprint: dict) -> dict[str, dict]:
        """As declared, and ``--rank`` whether the fingerprint holds it or not (it does only
        with a threshold): a resume that gives it or leaves it names it with both values."""
        return super().fingerprint_options(fingerprint) | {"rank": {"--rank": self.rank}}

    def parameters(self) -> dict:
        return self.settings

    def compute(self, ctx: Context) -> xr.Dataset:
        steps = Steps(ctx.client, self.source, self.holdout, self.chunk_tasks, ctx.progress,
                      ctx.checkpoint)
        ds, self.settings = _meta_learn(self, steps)
        return ds


def _meta_learn(job: MetaLearning, steps: Steps) -> tuple[xr.Dataset, dict]:
    """The model store of ``job`` computed by ``steps`` (k chosen first when "auto"), and
    the settings it was computed with (the result's ``parameters``)."""
    source, auto = job.source, job.k == "auto"
    sets = task_sets(source, steps.ptr, job.roles, job.heavy_rows, job.holdout, job.splits)
    linkage = _resolve_linkage(job.linkage, sets)
    k, k_max, selection = job.k, job.k_max, None
    if auto:
        k_max = _default_k_max(source, sets) if k_max is None else k_max
        _check_inputs(source, sets, steps.ptr, k_max, job.splits, linkage, None, job.holdout,
                      option="k_max" if job.k_max is not None else "k")
        selection = _select_k(steps, sets, k_max, job.splits, linkage, job.whiten, job.tile)
        k = selection["k"]
    if job.threshold is not None:
        k = job.rank
    _check_inputs(source, sets, steps.ptr, k, job.splits, linkage, job.threshold, job.holdout,
                  option="k" if job.threshold is None else "rank")
    result = _algorithm(steps, sets, k, job.splits, linkage, job.threshold, job.whiten,
                        job.tile)
    settings = {
        **({"k": "auto" if auto else int(k)} if job.threshold is None else
           {"rank": int(k)}), "linkage": linkage, "threshold": job.threshold,
        "splits": job.splits, "whiten": job.whiten, "roles": sets.rule,
        "holdout": job.holdout, "chunk_tasks": job.chunk_tasks, "tile": job.tile,
        **({"k_max": int(k_max)} if auto else {})}
    return model_dataset(result, source, sets, steps.seconds, selection), settings


def _resolve_linkage(linkage: str, sets: TaskSets) -> str:
    if linkage == "auto":
        return "average" if int(sets.heavy.sum()) <= MAX_FULL_HEAVY else "single"
    return linkage


def _default_k_max(source: TaskSource, sets: TaskSets) -> int:
    return max(1, min(source.n_features, K_MAX, int(sets.heavy.sum())))


def _whitening(run: Steps, sets: TaskSets, whiten: bool):
    """T (and the zero mean) from the moments of every used row, or None; once per run."""
    if not whiten:
        return None
    if "transform" not in run.cache:
        used_chunks = run.plan(sets.light | sets.heavy | sets.light2)

        def whitening():
            _, sums = run.reduce(_moments, used_chunks, run.holdout, name="whitening")
            try:
                return mlr.whitening_from_moments(sums, center=False)
            except ValueError as exc:
                raise InputError(f"{run.source.label}: variable 'X': {exc}") from None

        run.cache["transform"] = run.step("whitening", whitening, used_chunks)
    return run.cache["transform"]


def _subspace_all(run: Steps, sets: TaskSets, transform):
    """All d eigenvectors and eigenvalues of M̂ over D_L1, and the task count; once per run."""
    if "subspace" not in run.cache:
        light_chunks = run.plan(sets.light)

        def subspace():
            _, total = run.reduce(_subspace, light_chunks, transform, run.holdout,
                                  name="subspace")
            U_all, eigenvalues = mlr.subspace_basis(total["moment"] / total["tasks"],
                                                    run.source.n_features,
                                                    return_eigenvalues=True)
            return U_all, eigenvalues, int(total["tasks"])

        run.cache["subspace"] = run.step("subspace", subspace, light_chunks)
    return run.cache["subspace"]


def _heavy_estimates(run: Steps, sets: TaskSets, transform, U, splits, step="heavy_estimates"):
    heavy_chunks = run.plan(sets.heavy)

    def heavy_estimates():
        parts = run.map(_project, heavy_chunks, transform, run.holdout, U, splits,
                        name="heavy-estimates", desc="heavy estimates")
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    a, c = run.step(step, heavy_estimates, heavy_chunks, timing="heavy_estimates")
    return heavy_chunks, a, c


def _initial(run: Steps, heavy_chunks, transform, a, c, U, linkage, cut, tile, prefix=""):
    """Heavy clusters, initial ŵ⁰, p̂⁰ and r̂² for the basis U (d, k) and a, c (n_H, L, k);
    ``prefix`` names the steps of one candidate k of ``k="auto"``."""
    heavy_cluster = run.step(f"{prefix}clustering",
                             lambda: _cluster_heavy(run, a, c, linkage, cut, tile),
                             timing="clustering")
    n_clusters = int(heavy_cluster.max()) + 1

    def initial_estimates():
        W0, p0 = mlr.initial_cluster_estimates(a, c, heavy_cluster, U, n_clusters)
        _, sums = run.reduce(_residuals, heavy_chunks, transform, run.holdout, heavy_cluster,
                             W0, name="heavy-residuals")
        try:
            r2 = mlr.residual_variance(sums["sse"], sums["rows"])
        except ValueError as exc:
            raise InputError(f"{run.source.label}: heavy clusters: {exc}") from None
        return W0, p0, r2

    W0, p0, r2 = run.step(f"{prefix}initial_estimates", initial_estimates, heavy_chunks,
                          timing="initial_estimates")
    return heavy_cluster, W0, p0, r2


def _algorithm(run: Steps, sets: TaskSets, k, splits, linkage, threshold, whiten, tile) -> dict:
    out: dict = {}
    transform = _whitening(run, sets, whiten)
    if transform is not None:
        out["whitening"] = transform[1]
    U_all, eigenvalues, n_light = _subspace_all(run, sets, transform)
    U = U_all[:, :k]
    out.update(basis=U, eigenvalues=eigenvalues, n_light=n_light)
    heavy_chunks, a, c = _heavy_estimates(run, sets, transform, U, splits)
    cut = {"n_clusters": int(k)} if threshold is None else {"threshold": float(threshold)}
    heavy_cluster, W0, p0, r2 = _initial(run, heavy_chunks, transform, a, c, U, linkage, cut,
                                         tile)

    light2_chunks = run.plan(sets.light2)

    def classification_refinement():
        futures, stats = run.reduce(_classify, light2_chunks, transform, run.holdout, W0, r2,
                                    name="classify", leaf=operator.itemgetter(1),
                                    keep=operator.itemgetter(0))
        # each Dask task's labels, chunk by chunk, in task order (no task of their own)
        light_cluster = np.concatenate([labels for kept, _ in run.client.gather(futures)
                                        for labels in kept])
        try:
            refined = mlr.refine_with_fallback(stats, int(sets.light2.sum()), W0, r2)
        except ValueError as exc:
            raise InputError(f"{run.source.label}: refinement on the light2 tasks: {exc}") from None
        return light_cluster, stats, refined

    light_cluster, stats, (W, s2, p, status) = run.step(
        "classification_refinement", classification_refinement, light2_chunks)

    if transform is not None:  # back to raw features: w_x = T w_z
        W = mlr.unwhiten_coef(W, transform[1])
        W0 = mlr.unwhiten_coef(W0, transform[1])
    out.update(heavy_cluster=heavy_cluster, initial_coef=W0, initial_weight=p0, initial_r2=r2,
               light_cluster=light_cluster, coef=W, noise_var=s2, weight=p, refinement=status,
               refinement_rows=np.asarray(stats["rows"]), refinement_tasks=np.asarray(
                   stats["tasks"]))
    return out


def _select_k(run: Steps, sets: TaskSets, k_max, splits, linkage, whiten, tile) -> dict:
    """Held-out likelihood of Algorithm 1's mixture for k = 1..k_max (``kernels.mlr.kselect``).

    The light2 tasks are split (``validation_tasks``: every 4th); for each k the
    heavy tasks are clustered in the top-k subspace, the fitting light2 tasks
    classified and refined, and the validation tasks scored. The subspace and
    the heavy tasks' projections (on the top k_max eigenvectors, of which the
    top-k ones are the first k coordinates) are computed once; the light2 passes
    handle every k at once.
    """
    transform = _whitening(run, sets, whiten)
    U_all, eigenvalues, _ = _subspace_all(run, sets, transform)
    positions = np.flatnonzero(sets.light2)
    val = np.zeros_like(sets.light2)
    val[positions[mlr.validation_tasks(positions.size, VALIDATION_EVERY)]] = True
    fit = sets.light2 & ~val
    if int(val.sum()) < 2 or not fit.any():
        raise InputError(
            f"{run.source.label}: k='auto' needs at least {2 * VALIDATION_EVERY} light2 tasks "
            f"(every {VALIDATION_EVERY}th is held out to score each k), got {positions.size}"
        )
    heavy_chunks, a_all, c_all = _heavy_estimates(run, sets, transform, U_all[:, :k_max], splits,
                                                  step="k_heavy_estimates")
    candidates = list(range(1, k_max + 1))
    initial = []
    for k in candidates:
        _, W0, _, r2 = _initial(run, heavy_chunks, transform, a_all[:, :, :k], c_all[:, :, :k],
                                U_all[:, :k], linkage, {"n_clusters": k}, tile, prefix=f"k{k}_")
        initial.append((W0, r2))
    fit_chunks, val_chunks = run.plan(fit), run.plan(val)

    def k_selection():
        _, stats = run.reduce(_classify_many, fit_chunks, transform, run.holdout, initial,
                              name="k-refine")
        models = []
        for k, (W0, r2) in zip(candidates, initial, strict=True):
            part = {name[len(f"{k}:"):]: v for name, v in stats.items()
                    if name.startswith(f"{k}:")}
            try:
                W, s2, p, _ = mlr.refine_with_fallback(part, int(fit.sum()), W0, r2)
            except ValueError as exc:
                raise InputError(f"{run.source.label}: choosing k, k = {k}: {exc}") from None
            models.append((W, s2, p))
        _, sums = run.reduce(_heldout, val_chunks, transform, run.holdout, models,
                             name="k-heldout")
        try:
            return mlr.choose_k(sums, candidates)
        except ValueError as exc:
            raise InputError(f"{run.source.label}: choosing k: {exc}") from None

    choice = dict(run.step("k_selection", k_selection, fit_chunks, val_chunks))
    choice.update(candidates=np.asarray(candidates), eigenvalues=eigenvalues,
                  n_validation=int(val.sum()), n_fit=int(fit.sum()))
    return choice


def _cluster_heavy(run: Steps, a, c, linkage, cut, tile) -> np.ndarray:
    n = a.shape[0]
    edges = list(range(0, n, tile)) + [n]
    blocks = [(i, j) for i in range(len(edges) - 1) for j in range(i, len(edges) - 1)]
    # hash=False: a key of its own, so the release of an earlier scatter of the same
    # arrays cannot take it away while this pass uses it (as in mlr/predict.py)
    ac = run.client.scatter((a, c), broadcast=True, hash=False)
    forest = linkage == "single"
    futures = [
        run.client.submit(_tile, ac, edges[i], edges[i + 1], edges[j], edges[j + 1], forest,
                          pure=False)
        for i, j in blocks
    ]
    if forest:
        merged = tree_reduce(run.client, futures, mlr.merge_spanning_forests, name="msf-merge")
        wait_progress(run.client, futures, [1] * len(futures), "distance tiles", "tiles",
                      enabled=run.progress)
        E, w = merged.result()
        return mlr.spanning_forest_labels(n, E, w, **cut)
    H = np.empty((n, n))
    wait_progress(run.client, futures, [1] * len(futures), "distance tiles", "tiles",
                  enabled=run.progress)
    for (i, j), block in zip(blocks, run.client.gather(futures), strict=True):
        H[edges[i] : edges[i + 1], edges[j] : edges[j + 1]] = block
        H[edges[j] : edges[j + 1], edges[i] : edges[i + 1]] = block.T
    return mlr.average_linkage_labels(H, **cut)


# -- the model store -------------------------------------------------------------------
def truth_diagnostics(result: dict, truth: dict, sets: TaskSets) -> dict[str, float]:
    """Errors of a run against the store's truth (kernels.mlr metrics), as attributes."""
    W_true, s_true, p_true = truth["w_true"], truth["s_true"], truth["p_true"]
    comp = np.asarray(truth["component"], dtype=np.int64)
    W_basis = W_true
    if "whitening" in result:  # the basis lives in the whitened space: w_z = T⁻¹ w_x
        W_basis = mlr.whiten_coef(W_true, result["whitening"])
    noise = np.sqrt(result["noise_var"])
    mapping = mlr.match_components(result["coef"], W_true)
    errors = mlr.parameter_errors(result["coef"], noise, result["weight"], W_true, s_true,
                                  p_true)
    init = mlr.parameter_errors(result["initial_coef"], np.sqrt(result["initial_r2"]),
                                result["initial_weight"], W_true, s_true, p_true)
    return {
        "subspace_error": mlr.subspace_error(result["basis"], W_basis),
        "heavy_accuracy": mlr.label_accuracy(result["heavy_cluster"], comp[sets.heavy]),
        "classification_accuracy": mlr.label_accuracy(result["light_cluster"],
                                                      comp[sets.light2], mapping),
        "coef_error": errors["coef"],
        "noise_error": errors["noise"],
        "weight_error": errors["weight"],
        "initial_coef_error": init["coef"],
        "initial_weight_error": init["weight"],
    }


def model_dataset(result: dict, source: TaskSource, sets: TaskSets, seconds: dict,
                  selection: dict | None = None) -> xr.Dataset:
    """The model store (``docs/stores.md#model-store``) from a run's arrays (and the
    curve of ``k="auto"``), with the attributes particular to a model (the run adds the
    provenance)."""
    K, d = result["coef"].shape
    cluster = np.arange(K)
    ds = xr.Dataset(
        {
            "basis": (("feature", "rank"), result["basis"]),
            "eigenvalues": (("eigen",), result["eigenvalues"]),
            "coef": (("cluster", "feature"), result["coef"]),
            "noise": (("cluster",), np.sqrt(result["noise_var"])),
            "noise_var": (("cluster",), result["noise_var"]),
            "weight": (("cluster",), result["weight"]),
            "initial_coef": (("cluster", "feature"), result["initial_coef"]),
            "initial_weight": (("cluster",), result["initial_weight"]),
            "initial_r2": (("cluster",), result["initial_r2"]),
            "heavy_cluster": (("heavy_task",), result["heavy_cluster"]),
            "light_cluster": (("light_task",), result["light_cluster"]),
        },
        coords={
            "feature": np.arange(d), "rank": np.arange(result["basis"].shape[1]),
            "eigen": np.arange(d), "cluster": cluster,
            "heavy_task": np.flatnonzero(sets.heavy),
            "light_task": np.flatnonzero(sets.light2),
        },
    )
    ds["noise"].attrs["long_name"] = "noise standard deviation s = sqrt(noise_var)"
    ds["noise_var"].attrs["long_name"] = "noise variance s^2 = RSS/(rows - d)"
    ds["heavy_task"].attrs["long_name"] = "index of the heavy task in the input store"
    ds["light_task"].attrs["long_name"] = "index of the light2 task in the input store"
    ds["eigenvalues"].attrs["long_name"] = "eigenvalues of the subspace moment, descending"
    if "refinement" in result:
        ds["refinement"] = (("cluster",), result["refinement"].astype(np.int8))
        ds["refinement"].attrs.update({
            "flag_values": list(range(len(mlr.REFINEMENT_STATUS))),
            "flag_meanings": " ".join(mlr.REFINEMENT_STATUS),
            "long_name": "how coef was estimated: refined on the light2 rows, or kept closest "
                         "to the initial estimate (few_rows, singular, no_tasks)",
        })
        ds["refinement_rows"] = (("cluster",), result["refinement_rows"].astype(np.int64))
        ds["refinement_tasks"] = (("cluster",), result["refinement_tasks"].astype(np.int64))
    if selection is not None:
        ds = ds.assign_coords(k_candidate=selection["candidates"])
        ds["k_loglik"] = (("k_candidate",), selection["mean"])
        ds["k_loglik_se"] = (("k_candidate",), selection["se"])
        ds["k_loglik"].attrs["long_name"] = ("mean held-out log-likelihood per validation task "
                                             "of the mixture fitted with k components")
        ds["k_loglik_se"].attrs["long_name"] = ("standard error of its paired difference to "
                                                "the best k")
    if "whitening" in result:
        ds["whitening"] = (("feature", "feature_in"), result["whitening"])
        ds["whitening"].attrs["long_name"] = "T = (E xx^T)^(-1/2): z = T x (basis is in z)"
        ds = ds.assign_coords(feature_in=np.arange(d))
    attrs = {
        "n_light": int(sets.light.sum()),
        "n_heavy": int(sets.heavy.sum()),
        "n_light2": int(sets.light2.sum()),
        "n_unused_tasks": int(sets.unused),
        "n_clusters": int(K),
        "basis_space": "whitened" if "whitening" in result else "raw",
        "heavy_rows": -1 if sets.heavy_rows is None else int(sets.heavy_rows),
        "role_rule": sets.rule,
    }
    if "refinement" in result:
        flagged = np.flatnonzero(result["refinement"])
        attrs["n_fallback_clusters"] = int(flagged.size)
        attrs["fallback_clusters"] = "; ".join(
            f"cluster {j}: {mlr.REFINEMENT_STATUS[result['refinement'][j]]} "
            f"({int(result['refinement_tasks'][j])} light2 tasks, "
            f"{int(result['refinement_rows'][j])} rows), initial estimate kept closest"
            for j in flagged)
    if selection is not None:
        attrs.update({
            "k_chosen": int(selection["k"]), "k_best_loglik": int(selection["best"]),
            "k_rule": "smallest k whose mean held-out log-likelihood is within one paired "
                      "standard error of the best k's",
            "n_validation_tasks": int(selection["n_validation"]),
        })
    attrs.update({f"seconds_{k}": round(v, 4) for k, v in seconds.items()})
    if source.has_truth and K > 0:
        attrs.update({k: float(v) for k, v in
                      truth_diagnostics(result, source.truth(), sets).items()})
    ds.attrs.update(attrs)
    return ds


# -- the pooled baseline ---------------------------------------------------------------
def _pooled(chunk, source, holdout):
    X, y, ptr = load_chunk(source, chunk, None, holdout)
    return mlr.cluster_sufficient_stats(X, y, ptr, np.zeros(ptr.size - 1, dtype=np.int64), 1)


def fit_pooled(
    data: str | os.PathLike,
    *,
    out: str | os.PathLike | None = None,
    holdout: int = 0,
    chunk_tasks: int = CHUNK_TASKS,
    group: str | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """One least-squares regression on the rows of all tasks (the pooled baseline).

    The same grouped reduction as the refinement step with every task in one
    cluster (``cluster_sufficient_stats`` + ``refine_from_stats``), leaving out
    the last ``holdout`` rows of every task. Written as a one-cluster model
    store, so ``predict`` scores it like any meta-learned model.

    ``**run``: the options of the run around the job (:class:`streamlsq.jobs.RunOptions`).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=1_000,
    ...                               t_light=4, n_heavy=50, t_heavy=40, n_light2=0)
    >>> pooled = streamlsq.fit_pooled(path)
    >>> pooled.coef.shape, pooled.attrs["n_rows"]
    ((1, 4), 6000)
    >>> tmp.cleanup()
    """
    job = PooledFit(data, group=group, holdout=holdout, chunk_tasks=chunk_tasks)
    return Run(out, **run).execute(job)


@dataclass(eq=False)
class PooledFit(Job):
    """One least-squares regression on the rows of all tasks (:func:`fit_pooled`): a grouped
    reduction of XᵀX, Xᵀy with every task in one cluster, written as a one-cluster model."""

    data: Any
    group: str | None = None
    holdout: int = 0
    chunk_tasks: int = CHUNK_TASKS

    options = POOLED
    name = "pooled"

    def open(self, run: Run) -> list:
        self.source = run.open_input("tasks", self.data, self.group)
        return [self.source]

    def parameters(self) -> dict:
        return {"holdout": self.holdout}

    def compute(self, ctx: Context) -> xr.Dataset:
        source, holdout = self.source, self.holdout
        steps = Steps(ctx.client, source, holdout, self.chunk_tasks, ctx.progress)
        sizes = np.diff(steps.ptr) - holdout
        if (sizes < 0).any():
            i = int(np.flatnonzero(sizes < 0)[0])
            raise InputError(f"{source.label}: task {i} has fewer rows than the {holdout} "
                             "to hold out")
        _, stats = steps.reduce(_pooled, steps.plan(sizes > 0), holdout, name="pooled")
        try:
            W, s2, p = mlr.refine_from_stats(stats, int(stats["tasks"].sum()))
        except ValueError as exc:
            raise InputError(f"{source.label}: pooled regression: {exc}") from None
        ds = xr.Dataset(
            {"coef": (("cluster", "feature"), W), "noise": (("cluster",), np.sqrt(s2)),
             "noise_var": (("cluster",), s2), "weight": (("cluster",), p)},
            coords={"cluster": [0], "feature": np.arange(source.n_features)},
        )
        ds.attrs["n_rows"] = int(stats["rows"].sum())
        return ds
