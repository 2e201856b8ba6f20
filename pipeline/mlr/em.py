"""The task-level EM baseline (``docs/algorithms.md#em-baseline``) over a multi-task store.

One pass computes the per-task sufficient statistics (XᵢᵀXᵢ, Xᵢᵀyᵢ, yᵢᵀyᵢ, tᵢ;
``kernels.mlr.task_stats``) chunk by chunk. They are kept on the workers as
futures when they fit in ``cache_bytes`` (n_tasks·(d² + d + 2)·8 bytes in all,
spread over the workers; by default a quarter of the workers' total memory
limit), otherwise every iteration recomputes them from the rows inside its
own tasks — memory stays bounded either way. An iteration is a map over the
chunks (E-step and M-step sums, ``em_e_step`` + ``em_accumulate``), a tree
reduction of the sums (``combine_stats``) and the M-step on the client
(``em_m_step``). A Dask task takes several consecutive chunks, one whole subtree of
that reduction, sized from the data and the workers as meta-learning's are
(:func:`~streamlsq.runtime.reduce.tree_units_per_task`), and combines their sums as the
tree would (:class:`~streamlsq.runtime.reduce.TreeFold`): the same bits for every task
size. It stops when the log-likelihood changes by at most
``tol``·|log-likelihood|, or after ``iterations``.

A component whose responsibilities vanish (EM collapsed it) or whose weighted
XᵀX is singular makes ``em_m_step`` refuse; the run then ends with
``status = "collapsed"``, the refusal in ``failure`` and the last valid
parameters, and is written like any other result: a failure of the method,
not of the program.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.tasks import (
    CHUNK_TASKS,
    TASK_VARIABLES,
    TaskChunk,
    TaskSource,
    plan_chunks,
    reading_chunk,
    task_input_identity,
)
from streamlsq.jobs import Context, Job, Run, RunOptions
from streamlsq.kernels import mlr
from streamlsq.options.mlr import EM, EM_DEFAULT_SCALE, INITS
from streamlsq.runtime.reduce import (
    fold_units,
    map_chunks,
    tree_groups,
    tree_reduce,
    wait_progress,
)

__all__ = ["EMFit", "INITS", "fit_em"]

# INITS, the starts of EM, is declared with the options (streamlsq.options.mlr)


def _stats(chunk: TaskChunk, source: TaskSource):
    with reading_chunk(source, chunk):
        X, y, ptr = source.read_tasks(chunk.lo, chunk.hi, ptr=chunk.ptr)
        if chunk.select is not None:
            X, y, ptr = mlr.select_tasks(X, y, ptr, chunk.select)
        return mlr.task_stats(X, y, ptr)


def _iteration(stats_or_chunk, source, W, s2, p):
    stats = stats_or_chunk if isinstance(stats_or_chunk, dict) else _stats(stats_or_chunk, source)
    gamma, loglik = mlr.em_e_step(stats, W, s2, p)
    sums = mlr.em_accumulate(stats, gamma)
    sums["loglik"] = np.float64(loglik)
    return sums


def _moments(stats_or_chunk, source):
    stats = stats_or_chunk if isinstance(stats_or_chunk, dict) else _stats(stats_or_chunk, source)
    return {"yty": stats["yty"].sum(), "rows": stats["rows"].sum()}


def _group_stats(chunks: list, source: TaskSource) -> list:
    """Dask task: the statistics of consecutive chunks, one chunk read at a time."""
    return [_stats(c, source) for c in chunks]


def _fold_group(items: list, fn, levels: int, *args):
    """Dask task: ``fn`` over a group's chunks (or their statistics), one after another,
    the sums combined as the lowest ``levels`` levels of the reduction tree."""
    return fold_units(items, lambda item: fn(item, *args), mlr.combine_stats, levels)[1]


def _worker_memory(client: Client) -> int:
    workers = client.scheduler_info().get("workers", {}).values()
    return int(sum(w.get("memory_limit") or 0 for w in workers))


def fit_em(
    data: str | os.PathLike,
    k: int,
    *,
    out: str | os.PathLike | None = None,
    init: str = "perturbed",
    scale: float | None = None,
    iterations: int = 100,
    tol: float = 1e-8,
    seed: int | None = None,
    chunk_tasks: int = CHUNK_TASKS,
    cache_bytes: int | None = None,
    group: str | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Fit a mixture of k linear regressions to every task of ``data`` by task-level EM.

    init : "truth" (the store's ``w_true``, ``s_true``, ``p_true``), "perturbed"
        (the truth perturbed as in the paper's E.5, ``kernels.mlr.em_init_perturbed``
        with relative size ``scale``) or "random" (``em_init_random``: no truth).
    iterations, tol : at most this many iterations; stop when the
        log-likelihood changes by at most tol·|log-likelihood|.
    seed : of the random initialisation.
    cache_bytes : keep the per-task statistics on the workers up to this size
        (default: a quarter of the workers' memory limits), else recompute them.
    checkpoint, resume : commit the parameters after every iteration to this folder and,
        with ``resume``, continue a killed run from the last one (the same result as an
        uninterrupted run); the folder is removed once the result is written to ``out``.

    Returns an xarray Dataset: ``coef (cluster, feature)``, ``noise (cluster)``
    (ŝ), ``noise_var`` (ŝ²), ``weight (cluster)``, the start values
    (``initial_*``), ``log_likelihood (iteration)``, and attributes ``status``
    ("converged", "max_iterations" or "collapsed"), ``failure`` and, when the
    store has the truth, the parameter errors after matching.

    ``**run``: the options of the run around the job (:class:`streamlsq.jobs.RunOptions`).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=4, n_light=2_000,
    ...                               t_light=4, n_heavy=50, t_heavy=40, n_light2=0, seed=2)
    >>> em = streamlsq.fit_em(path, 2, init="truth", iterations=20)
    >>> em.attrs["status"], em.coef.shape
    ('converged', (2, 4))
    >>> tmp.cleanup()
    """
    job = EMFit(data, k, group=group, init=init, scale=scale, iterations=iterations, tol=tol,
                seed=seed, chunk_tasks=chunk_tasks, cache_bytes=cache_bytes)
    return Run(out, **run).execute(job)


@dataclass(eq=False)
class EMFit(Job):
    """Task-level EM over a multi-task store (:func:`fit_em`): reads the per-task statistics
    (cached on the workers when they fit), computes E- and M-steps as a map and a tree
    reduction per iteration (checkpointed after each), writes the mixture."""

    data: Any
    k: int
    group: str | None = None
    init: str = "perturbed"
    scale: float | None = None
    iterations: int = 100
    tol: float = 1e-8
    seed: int | None = None
    chunk_tasks: int = CHUNK_TASKS
    cache_bytes: int | None = None

    options = EM

    @property
    def start_scale(self) -> float:
        """The perturbation's relative size (not given: the declared default)."""
        return EM_DEFAULT_SCALE if self.scale is None else float(self.scale)

    @property
    def start_seed(self) -> int:
        """The seed of the initialisation (not given: 0)."""
        return 0 if self.seed is None else int(self.seed)

    name = "em"
    checkpoint_kind = "em"
    checkpoint_variables = TASK_VARIABLES

    def open(self, run: Run) -> list:
        source = self.source = run.open_input("tasks", self.data, self.group)
        k = self.k
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise InputError(f"{source.label}: k must be an integer in 1..n_tasks, got {k!r}")
        if k > source.n_tasks:  # every component needs a task to be the mixture's
            raise InputError(f"{source.label}: --k {k}: more components than the store's "
                             f"{source.n_tasks} task{'s' if source.n_tasks != 1 else ''}")
        self.truth = source.truth()
        if self.init in ("truth", "perturbed"):
            if self.truth is None:
                raise InputError(
                    f"{source.label}: init '{self.init}' needs the true parameters (w_true, "
                    "s_true, p_true); use --init random for a store without them")
            if self.truth["w_true"].shape[0] != k:
                stored = self.truth["w_true"].shape[0]
                raise InputError(
                    f"{source.label}: --init {self.init} (init='{self.init}') starts at the "
                    f"store's truth, of {stored} components; this is --k {k} (k={k}): give "
                    f"--k {stored}, or --init random")
        return [source]

    def fingerprint(self) -> dict:
        return {"input": task_input_identity(self.source), "k": int(self.k),
                "init": self.init, "scale": self.start_scale, "iterations": self.iterations,
                "tol": float(self.tol), "seed": self.start_seed, "chunk_tasks": self.chunk_tasks}

    def parameters(self) -> dict:
        return {"k": int(self.k), "init": self.init, "scale": self.start_scale,
                "iterations": int(self.iterations), "tol": float(self.tol),
                "seed": self.start_seed, "chunk_tasks": int(self.chunk_tasks)}

    def compute(self, ctx: Context) -> xr.Dataset:
        ptr = self.source.task_ptr()
        chunks = plan_chunks(ptr, np.diff(ptr) > 0, self.chunk_tasks)
        self.n_used = sum(c.n for c in chunks)
        # several chunks per Dask task, one subtree of the reduction each
        self.levels, groups = tree_groups(ctx.client, chunks,
                                          int(ptr[-1]) * (self.source.n_features + 1) * 8)
        items, cached = _statistics(self, ctx, groups)
        saved = None  # the entry of the last committed iteration (each replaces the last)
        if ctx.checkpoint is not None and any(n.startswith("iteration-")
                                              for n in ctx.checkpoint.entries):
            saved = ctx.checkpoint.load(max(n for n in ctx.checkpoint.entries
                                            if n.startswith("iteration-")))
        start = saved["start"] if saved is not None else _start_values(self, ctx, items)
        run = saved or {"start": start, "params": start, "history": [],
                        "status": "max_iterations", "failure": ""}
        run = _iterate(self, ctx, items, run)
        if cached:
            ctx.client.cancel(items)  # free the cached statistics on the workers
        return _em_result(self, run, cached)


def _statistics(job: EMFit, ctx: Context, groups) -> tuple[list, bool]:
    """The per-task statistics as futures kept on the workers, one per group of chunks
    (a list of each chunk's), when they fit in ``cache_bytes`` (default: a quarter of the
    workers' memory), else the groups of chunks (each iteration then recomputes them)."""
    d = job.source.n_features
    need = job.n_used * (d * d + d + 2) * 8
    cache_bytes = job.cache_bytes
    if cache_bytes is None:  # a quarter of the workers' memory (1 GiB if unlimited)
        cache_bytes = _worker_memory(ctx.client) // 4 or 2**30
    if need > cache_bytes:
        return groups, False
    items = map_chunks(ctx.client, _group_stats, groups, job.source, name="em-task-stats")
    wait_progress(ctx.client, items, [sum(c.n for c in g) for g in groups], "task statistics",
                  enabled=ctx.progress)
    return items, True


def _start_values(job: EMFit, ctx: Context, items) -> tuple:
    """(W, s², p) to start from: the truth, the truth perturbed, or random."""
    truth = job.truth
    if job.init == "truth":
        W, s2, p = truth["w_true"], truth["s_true"] ** 2, truth["p_true"]
    elif job.init == "perturbed":
        try:
            W, s, p = mlr.em_init_perturbed(job.start_seed, truth["w_true"],
                                            truth["s_true"], truth["p_true"], job.start_scale)
        except ValueError as exc:
            raise InputError(f"--scale: {exc}") from None
        s2 = s**2
    else:
        m = tree_reduce(ctx.client, map_chunks(ctx.client, _fold_group, items, _moments,
                                               job.levels, job.source, name="em-y"),
                        mlr.combine_stats, name="em-y-sum").result()
        W, s, p = mlr.em_init_random(job.start_seed, job.k, job.source.n_features,
                                     float(np.sqrt(m["yty"] / m["rows"])))
        s2 = s**2
    return tuple(np.asarray(v, dtype=np.float64) for v in (W, s2, p))


def _iterate(job: EMFit, ctx: Context, items, run: dict) -> dict:
    """EM iterations until convergence, a collapse or ``iterations``; each one
    committed to the checkpoint (replacing the one before)."""
    W, s2, p = run["params"]
    history, status, failure = list(run["history"]), run["status"], run["failure"]
    ended = status != "max_iterations"
    for _ in range(len(history), 0 if ended else job.iterations):
        futures = map_chunks(ctx.client, _fold_group, items, _iteration, job.levels,
                             job.source, W, s2, p, name="em-iteration")
        sums = tree_reduce(ctx.client, futures, mlr.combine_stats, name="em-sum").result()
        history.append(float(sums["loglik"]))
        try:
            W, s2, p = mlr.em_m_step(sums)
        except ValueError as exc:  # a collapsed component: the method failed, say so
            status, failure = "collapsed", str(exc)
        if status == "max_iterations" and len(history) > 1 and \
                abs(history[-1] - history[-2]) <= job.tol * abs(history[-2]):
            status = "converged"
        run = {"start": run["start"], "params": (W, s2, p), "history": history,
               "status": status, "failure": failure}
        if ctx.checkpoint is not None:  # every iteration reads (the statistics of) every row
            ctx.checkpoint.save(f"iteration-{len(history):06d}", run,
                                reads=[(0, 0, job.source.n_rows)])
            if len(history) > 1:
                ctx.checkpoint.discard(f"iteration-{len(history) - 1:06d}")
        if status != "max_iterations":
            break
    return run


def _em_result(job: EMFit, run: dict, cached: bool) -> xr.Dataset:
    (W0, s20, p0), (W, s2, p) = run["start"], run["params"]
    history, k, d = run["history"], int(job.k), job.source.n_features
    ds = xr.Dataset(
        {
            "coef": (("cluster", "feature"), W),
            "noise": (("cluster",), np.sqrt(s2)),
            "noise_var": (("cluster",), s2),
            "weight": (("cluster",), p),
            "initial_coef": (("cluster", "feature"), W0),
            "initial_noise": (("cluster",), np.sqrt(s20)),
            "initial_weight": (("cluster",), p0),
            "log_likelihood": (("iteration",), np.asarray(history)),
        },
        coords={"cluster": np.arange(k), "feature": np.arange(d),
                "iteration": np.arange(len(history))},
    )
    ds["noise"].attrs["long_name"] = "noise standard deviation s"
    ds["noise_var"].attrs["long_name"] = "noise variance s^2"
    ds.attrs.update({"status": run["status"], "converged": run["status"] == "converged",
                     "failure": run["failure"], "n_iterations": len(history),
                     "n_tasks": int(job.n_used), "statistics_cached": bool(cached)})
    truth = job.truth
    if truth is not None and truth["w_true"].shape[1] == d:
        errors = mlr.parameter_errors(W, np.sqrt(s2), p, truth["w_true"],
                                      truth["s_true"], truth["p_true"])
        ds.attrs.update({f"{key}_error": value for key, value in errors.items()})
    return ds
