"""The task-level EM baseline (``docs/algorithms.md#em-baseline``) over a multi-task store.

One pass computes the per-task sufficient statistics (XᵢᵀXᵢ, Xᵢᵀyᵢ, yᵢᵀyᵢ, tᵢ;
``kernels.mlr.task_stats``) chunk by chunk. They are kept on the workers as
futures when they fit in ``cache_bytes`` (n_tasks·(d² + d + 2)·8 bytes in all,
spread over the workers; by default a quarter of the workers' total memory
limit), otherwise every iteration recomputes them from the rows inside its
own tasks — memory stays bounded either way. An iteration is a map over the
chunks (E-step and M-step sums, ``em_e_step`` + ``em_accumulate``), a tree
reduction of the sums (``combine_stats``) and the M-step on the client
(``em_m_step``). It stops when the log-likelihood changes by at most
``tol``·|log-likelihood|, or after ``iterations``.

A component whose responsibilities vanish (EM collapsed it) or whose weighted
XᵀX is singular makes ``em_m_step`` refuse; the run then ends with
``status = "collapsed"``, the refusal in ``failure`` and the last valid
parameters, and is written like any other result: a failure of the method,
not of the program.
"""

from __future__ import annotations

import os
import time

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError, check_int
from streamlsq.io.checkpoint import (
    EntryCheckpoint,
    entry_checkpoint,
    fingerprint_digest,
    prepare_run,
    remove_finished,
)
from streamlsq.io.provenance import provenance
from streamlsq.io.results import write_result
from streamlsq.io.tasks import (
    CHUNK_TASKS,
    TaskChunk,
    TaskSource,
    open_tasks,
    plan_chunks,
    reading_chunk,
    task_input_identity,
)
from streamlsq.kernels import mlr
from streamlsq.runtime.client import dask_client
from streamlsq.runtime.reduce import map_chunks, tree_reduce, wait_progress

__all__ = ["INITS", "fit_em"]

INITS = ("truth", "perturbed", "random")


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


def _worker_memory(client: Client) -> int:
    workers = client.scheduler_info().get("workers", {}).values()
    return int(sum(w.get("memory_limit") or 0 for w in workers))


def fit_em(
    data: str | os.PathLike,
    k: int,
    *,
    out: str | os.PathLike | None = None,
    init: str = "perturbed",
    scale: float = 0.5,
    iterations: int = 100,
    tol: float = 1e-8,
    seed: int = 0,
    chunk_tasks: int = CHUNK_TASKS,
    cache_bytes: int | None = None,
    group: str | None = None,
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
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
    if init not in INITS:
        raise InputError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    iterations = check_int("iterations", iterations, 1, "a positive integer")
    if not (np.isfinite(tol) and tol >= 0):
        raise InputError(f"tol must be a finite number >= 0, got {tol!r}")
    source = open_tasks(data, group)
    d = source.n_features
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= source.n_tasks:
        raise InputError(f"{source.label}: k must be an integer in 1..n_tasks, got {k!r}")
    truth = source.truth()
    if init in ("truth", "perturbed"):
        if truth is None:
            raise InputError(
                f"{source.label}: init '{init}' needs the true parameters (w_true, s_true, "
                "p_true); use --init random for a store without them"
            )
        if truth["w_true"].shape[0] != k:
            raise InputError(
                f"{source.label}: init '{init}' needs k = {truth['w_true'].shape[0]} (the "
                f"store's components), got k = {k}"
            )
    if resume and checkpoint is None:
        raise InputError("--resume needs --checkpoint DIR")
    fingerprint = {"input": task_input_identity(source), "k": int(k), "init": init,
                   "scale": float(scale), "iterations": iterations, "tol": float(tol),
                   "seed": int(seed), "chunk_tasks": chunk_tasks}
    folder = dict(fingerprint=fingerprint, inputs=[source], kind="em",
                  variables=("X", "y", "task_ptr", "role"))
    done = prepare_run(out, overwrite, checkpoint, resume, fingerprint, [source],
                       lambda: remove_finished(EntryCheckpoint(checkpoint, **folder)))
    if done is not None:
        return done
    ptr = source.task_ptr()
    chunks = plan_chunks(ptr, np.diff(ptr) > 0, chunk_tasks)
    n_used = sum(c.n for c in chunks)
    started = time.perf_counter()
    with entry_checkpoint(checkpoint, resume=resume, **folder) as ckpt, \
            dask_client(client, scheduler) as cl:
        need = n_used * (d * d + d + 2) * 8
        if cache_bytes is None:  # a quarter of the workers' memory (1 GiB if unlimited)
            cache_bytes = _worker_memory(cl) // 4 or 2**30
        cached = need <= cache_bytes
        items = chunks
        if cached:
            items = map_chunks(cl, _stats, chunks, source, name="em-task-stats")
            wait_progress(cl, items, [c.n for c in chunks], "task statistics", enabled=progress)
        saved = None  # the entry of the last committed iteration (each replaces the last)
        if ckpt is not None and any(n.startswith("iteration-") for n in ckpt.entries):
            saved = ckpt.load(max(n for n in ckpt.entries if n.startswith("iteration-")))
        if saved is not None:  # resumed: the parameters after the last committed iteration
            W0, s20, p0 = saved["start"]
            W, s2, p = saved["start"]
        elif init == "truth":
            W, s2, p = truth["w_true"], truth["s_true"] ** 2, truth["p_true"]
        elif init == "perturbed":
            try:
                W, s, p = mlr.em_init_perturbed(seed, truth["w_true"], truth["s_true"],
                                                truth["p_true"], scale)
            except ValueError as exc:
                raise InputError(f"--scale: {exc}") from None
            s2 = s**2
        else:
            m = tree_reduce(cl, map_chunks(cl, _moments, items, source, name="em-y"),
                            mlr.combine_stats, name="em-y-sum").result()
            W, s, p = mlr.em_init_random(seed, k, d, float(np.sqrt(m["yty"] / m["rows"])))
            s2 = s**2
        W0, s20, p0 = (np.asarray(v, dtype=np.float64) for v in (W, s2, p))
        W, s2, p = W0, s20, p0
        history, status, failure = [], "max_iterations", ""
        if saved is not None:
            W, s2, p = saved["params"]
            history, status, failure = list(saved["history"]), saved["status"], saved["failure"]
        ended = status != "max_iterations"
        for _ in range(len(history), 0 if ended else iterations):
            futures = map_chunks(cl, _iteration, items, source, W, s2, p, name="em-iteration")
            sums = tree_reduce(cl, futures, mlr.combine_stats, name="em-sum").result()
            history.append(float(sums["loglik"]))
            try:
                W, s2, p = mlr.em_m_step(sums)
            except ValueError as exc:  # a collapsed component: the method failed, say so
                status, failure = "collapsed", str(exc)
            if status == "max_iterations" and len(history) > 1 and \
                    abs(history[-1] - history[-2]) <= tol * abs(history[-2]):
                status = "converged"
            if ckpt is not None:  # every iteration reads (the statistics of) every row
                ckpt.save(f"iteration-{len(history):06d}",
                          {"start": (W0, s20, p0), "params": (W, s2, p), "history": history,
                           "status": status, "failure": failure},
                          reads=[(0, 0, source.n_rows)])
                if len(history) > 1:
                    ckpt.discard(f"iteration-{len(history) - 1:06d}")
            if status != "max_iterations":
                break
        if cached:
            cl.cancel(items)  # free the cached statistics on the workers
    seconds = time.perf_counter() - started
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
    ds.attrs.update(provenance(
        "em", {"k": int(k), "init": init, "scale": float(scale), "iterations": int(iterations),
               "tol": float(tol), "seed": int(seed), "chunk_tasks": int(chunk_tasks)},
        [source], seconds=seconds))
    ds.attrs.update({
        "status": status,
        "converged": status == "converged",
        "failure": failure,
        "n_iterations": len(history),
        "n_tasks": int(n_used),
        "statistics_cached": bool(cached),
    })
    if truth is not None and truth["w_true"].shape[1] == d:
        errors = mlr.parameter_errors(W, np.sqrt(s2), p, truth["w_true"], truth["s_true"],
                                      truth["p_true"])
        ds.attrs.update({f"{key}_error": value for key, value in errors.items()})
    ds.attrs["run_fingerprint"] = fingerprint_digest(fingerprint)
    if out is not None:
        write_result(ds, out, overwrite, inputs=[source])
        if checkpoint is not None:
            remove_finished(EntryCheckpoint(checkpoint, **folder))
    return ds
