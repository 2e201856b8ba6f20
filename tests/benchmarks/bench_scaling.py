#!/usr/bin/env python
"""Past this machine: the scan engine and meta-learning on a terabyte, on paper and by
simulation, from costs measured here.

What it measures on this machine (the load average printed with it):

- the Dask scheduler's CPU per task: ``--tasks`` no-op tasks, each carrying the message of a
  scan engine's Dask task as the engine sends it (its span and pieces), submitted to a
  LocalCluster of ``--workers`` worker processes and gathered; the CPU time of the
  scheduler's thread (less what it spends idle over as long) per task, median and spread of
  ``--repeat`` rounds, with the wall time per task beside it;
- what a Dask task's message weighs (pickled: a scan task's span, pieces and recursion; a
  meta-learning task's chunks of work, store and arguments) and a scan summary (the QR
  solver's triangular factor and the normal equations' sums);
- the client's serial part at full size, by simulation: the in-order prefix of the scan
  engine (``Recursion.scan``) over as many summaries as a terabyte makes, and the solves
  at the recorded steps;
- the arithmetic per row on one thread: the QR summary (``tallqr.rows_factor``) and XᵀX
  of a 160,000 × 20 block; decoding per row per core is an argument (``--decode``,
  default: the quiet machine's 8.2e6 rows/s per core, docs/performance.md).

What it counts for ``--tb`` terabytes of X (float64, ``--features`` columns, chunks of
``--chunk-rows`` rows, the default pieces and recorded steps), and for meta-learning
(light tasks of ``--task-rows`` rows of ``--d`` features, chunks of work of 10,000
tasks), on 2, 10 and 100 workers (one thread each), with the engines' own sizing
(``streamlsq.runtime.reduce.task_bytes``) and, for comparison, one piece or one chunk of
work per Dask task as before: Dask tasks, bytes of task messages through the scheduler and
of results back to the client, the serial time on the client, and the modelled time

    time(W) = max(rounds × seconds of work per Dask task, Dask tasks × scheduler CPU per task)
              + prefix + solves + a cluster's start-up

with rounds = ceil(Dask tasks doing the work / W) (the last round of a worker may be
partly idle) and the work per row = decode + summary (per light task: ``--metalearn-task-s``
per chunk of work).

Not part of the test suite:

    python tests/benchmarks/bench_scaling.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import pickle
import tempfile
import threading
import time
from dataclasses import dataclass, replace

import dask
import numpy as np
from distributed import Client, LocalCluster
from threadpoolctl import threadpool_limits

from streamlsq import open_tasks, simulate_mlr
from streamlsq.io.tasks import CHUNK_TASKS, plan_chunks
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.kernels.synthetic.streams import stream_design, stream_rows
from streamlsq.kernels.tallqr import rows_factor
from streamlsq.mlr.metalearn import _reduce_group, _subspace
from streamlsq.runtime.reduce import (
    SPLIT_EVERY,
    task_bytes,
    tree_levels,
    tree_units_per_task,
    units_per_task,
)
from streamlsq.stream.engines import (
    PIECE_BYTES,
    _piece_cuts,
    scan_tasks,
    solve_groups,
)
from streamlsq.stream.fit import DEFAULT_RECORDED_STEPS
from streamlsq.stream.methods import make_method
from streamlsq.stream.plans import Section, StreamPlan, plan_segments

#: the worker counts of the model
WORKERS = (2, 10, 100)


@dataclass(frozen=True)
class VirtualSource:
    """The layout of a stream store that need not exist: what a plan reads of a source."""

    n_rows: int
    n_features: int
    n_targets: int
    chunk_rows: int
    label: str = "virtual"


def scan_plan(n_rows, n_features, chunk_rows, piece_bytes):
    src = VirtualSource(n_rows, n_features, 1, chunk_rows)
    grid = BlockGrid(n_rows, chunk_rows)
    plan = StreamPlan((src,), [Section(0, 0, n_rows, grid)])
    record_every = max(1, -(-plan.n_blocks // DEFAULT_RECORDED_STEPS))
    pieces = plan_segments(plan, piece_bytes)
    summaries = sum(len(_piece_cuts(k0, k1, record_every)) for k0, k1 in pieces)
    return plan, pieces, summaries, record_every


def scan_layout(plan, pieces, record_every, workers, method, grouped=True) -> dict:
    """The Dask tasks of a scan fit on ``workers`` threads, as the engine cuts it (one piece
    a task: ``grouped=False``, as before), and the message of its first summarising task."""
    per = units_per_task(len(pieces), plan.nbytes / len(pieces),
                         task_bytes(plan.nbytes, workers)) if grouped else 1
    groups = scan_tasks(range(len(pieces)), per)
    solves = len(range(0, plan.n_blocks, record_every)) + 1
    n_solve = solve_groups(solves, workers)  # as before: about four per worker
    g = groups[0]
    message = (plan.span(pieces[g[0]][0], pieces[g[-1]][1]), [pieces[i] for i in g], method,
               record_every, "float64")
    return {"pieces_per_task": per, "summarise_tasks": len(groups), "solve_tasks": n_solve,
            "message": message, "message_bytes": len(pickle.dumps(message, protocol=5))}


def tree_tasks(leaves: int) -> int:
    """Combine tasks of ``tree_reduce`` over ``leaves`` futures (one level at least)."""
    level, tasks = leaves, 0
    while True:
        level = -(-level // SPLIT_EVERY)
        tasks += level
        if level == 1:
            return tasks


def _noop(*args):
    return 1


def _thread_cpu():
    return time.thread_time()


async def _ident():
    return threading.get_ident()


def scheduler_cpu(n_tasks, repeat, message, n_workers) -> dict:
    """The scheduler's CPU seconds per task (its thread's CPU time, less its idle rate), and
    the wall seconds per task, on a LocalCluster of ``n_workers`` worker processes, each
    task carrying ``message``: median and spread over ``repeat`` rounds after a warm one."""
    cpu, wall = [], []
    # a shared machine under load can leave the scheduler silent for longer than 30 s
    dask.config.set({"distributed.comm.timeouts.tcp": "300s",
                     "distributed.comm.timeouts.connect": "300s"})
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0",
                           silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
        client.wait_for_workers(n_workers)
        # what the scheduler's thread spends with nothing to do (heartbeats, the nannies)
        c0, t0 = client.run_on_scheduler(_thread_cpu), time.perf_counter()
        time.sleep(3.0)
        idle = (client.run_on_scheduler(_thread_cpu) - c0) / (time.perf_counter() - t0)
        for r in range(repeat + 1):  # the first round warms the workers
            c0, t0 = client.run_on_scheduler(_thread_cpu), time.perf_counter()
            futures = [client.submit(_noop, *message, pure=False) for _ in range(n_tasks)]
            client.gather(futures)
            del futures
            seconds = time.perf_counter() - t0
            used = client.run_on_scheduler(_thread_cpu) - c0 - idle * seconds
            if r:
                cpu.append(used / n_tasks)
                wall.append(seconds / n_tasks)
        same_thread = client.run_on_scheduler(threading.get_ident) == client.sync(_ident)
        client.close()
    finally:
        try:  # 8 nannies on a loaded machine may take longer than distributed waits
            cluster.close(timeout=120)
        except TimeoutError:
            pass
    return {"cpu_s_per_task": float(np.median(cpu)), "cpu_s_per_task_range":
            [float(min(cpu)), float(max(cpu))], "wall_s_per_task": float(np.median(wall)),
            "wall_s_per_task_range": [float(min(wall)), float(max(wall))],
            "idle_cpu_share": float(idle), "workers": n_workers, "tasks": n_tasks,
            "rounds": repeat, "scheduler_on_callers_thread": bool(same_thread)}


def metalearn_message_bytes(client, per: int, d: int) -> int:
    """Pickled bytes of a meta-learning Dask task of ``per`` chunks of work of light tasks
    (the subspace step's arguments; the store, a small one of their layout written here):
    one chunk carries its offsets (10,001 int64), several read theirs in the task."""
    with tempfile.TemporaryDirectory() as tmp:
        path = simulate_mlr(f"{tmp}/tasks.zarr", k=2, d=d, n_light=CHUNK_TASKS, t_light=4,
                            n_heavy=4, t_heavy=8, n_light2=4, t_light2=4, seed=1, client=client)
        source = open_tasks(path)
        one = plan_chunks(source.task_ptr(), None, CHUNK_TASKS)[0]
        chunks = [one] if per == 1 else [
            replace(one, lo=i * CHUNK_TASKS, hi=(i + 1) * CHUNK_TASKS, first=i * CHUNK_TASKS,
                    ptr=None) for i in range(per)]
        message = (chunks, _subspace, source, tree_levels(per), None, None, None, 0)
        return len(pickle.dumps((_reduce_group, message), protocol=5))


def summary_bytes(method, n_features) -> int:
    X, Y = stream_rows(1, stream_design(1, n_features, 1, 10.0), 0, 10_000)
    s = method.summarize(X, Y, np.array([0, 10_000]), np.array([1]))
    return len(pickle.dumps(s, protocol=5)) // len(s)


def prefix_seconds(method, n_features, n_summaries, n_solves) -> tuple[float, float]:
    """The client's in-order prefix over ``n_summaries`` summaries, and ``n_solves`` solves
    (seconds, one thread): the scan engine's serial part at full size, simulated."""
    X, Y = stream_rows(1, stream_design(1, n_features, 1, 10.0), 0, 10_000)
    one = method.summarize(X, Y, np.array([0, 10_000]), np.array([1]))[0]
    summaries = [one] * n_summaries
    info = method.to_info(method.init(n_features, 1))
    with threadpool_limits(1):
        t = time.perf_counter()
        infos = method.scan(info, summaries)
        prefix = time.perf_counter() - t
        t = time.perf_counter()
        step = max(1, len(infos) // n_solves)
        for s in infos[::step][:n_solves]:
            method.finish(s)
        solves = time.perf_counter() - t
    return prefix, solves


def arithmetic_per_row(n_features) -> dict:
    X, Y = stream_rows(1, stream_design(1, n_features, 1, 10.0), 0, 160_000)
    out = {}
    with threadpool_limits(1):
        for name, fn in (("qr", lambda: rows_factor(X, Y)),
                         ("normal", lambda: (X.T @ X, X.T @ Y))):
            fn()
            secs = []
            for _ in range(5):
                t = time.perf_counter()
                fn()
                secs.append(time.perf_counter() - t)
            out[name] = float(np.median(secs)) / len(X)
    return out


def model(args, measured, layouts) -> dict:
    """The counts and the modelled times per ``--tb`` (see the module docstring)."""
    row_bytes = 8 * args.features
    n_rows = int(args.tb * 1e12 // row_bytes)
    sched = measured["scheduler"]["cpu_s_per_task"]
    out = {"scan": {}, "metalearn": {}}
    for solver in ("qr", "normal"):
        prefix, solves = measured["prefix"][solver]
        per_row = 1 / args.decode + measured["arithmetic"][solver]
        work = n_rows * per_row
        rows = {}
        for layout, by_workers in layouts["scan"].items():
            for w in WORKERS:
                lay = by_workers[w]
                tasks = lay["summarise_tasks"] + lay["solve_tasks"]
                rounds = math.ceil(lay["summarise_tasks"] / w)
                row = {"dask_tasks": tasks, "summarise_tasks": lay["summarise_tasks"],
                       "pieces_per_task": lay["pieces_per_task"],
                       "solve_tasks": lay["solve_tasks"],
                       "bytes_through_scheduler": tasks * lay["message_bytes"],
                       "scheduler_s": tasks * sched,
                       "time_s": max(rounds * work / lay["summarise_tasks"], tasks * sched)
                       + prefix + solves / min(w, lay["solve_tasks"]) + args.startup}
                row["time_over_work_per_worker"] = row["time_s"] / (work / w)
                rows[f"{layout}_{w}"] = row
        out["scan"][solver] = {"rows": n_rows, "summaries": layouts["summaries"],
                               "bytes_to_client": layouts["summaries"]
                               * measured["summary_bytes"][solver],
                               "prefix_s": prefix, "solves_s": solves, "work_cpu_s": work,
                               "by_layout": rows}
    # meta-learning: one pass over light tasks of task_rows rows, d features and a target
    task_bytes_ = args.task_rows * (args.d + 1) * 8
    n_tasks = int(args.tb * 1e12 // task_bytes_)
    units = -(-n_tasks // CHUNK_TASKS)
    unit_bytes = CHUNK_TASKS * task_bytes_
    work = units * args.metalearn_task_s
    rows = {}
    for layout in ("before", "sized"):
        for w in WORKERS:
            per = 1 if layout == "before" else tree_units_per_task(
                units, unit_bytes, task_bytes(n_tasks * task_bytes_, w))
            tasks = -(-units // per)
            reduce_tasks = tree_tasks(tasks)
            message = layouts["metalearn_message_bytes"][per]
            row = {"chunks_per_task": per, "dask_tasks": tasks, "reduce_tasks": reduce_tasks,
                   "bytes_through_scheduler": tasks * message,  # combines: keys only
                   "bytes_of_partial_sums": (tasks + reduce_tasks) * args.d * args.d * 8,
                   "scheduler_s": (tasks + reduce_tasks) * sched,
                   "time_s": max(math.ceil(tasks / w) * per * args.metalearn_task_s,
                                 (tasks + reduce_tasks) * sched) + args.startup}
            row["time_over_work_per_worker"] = row["time_s"] / (work / w)
            rows[f"{layout}_{w}"] = row
    out["metalearn"] = {"light_tasks": n_tasks, "chunks_of_work": units, "work_cpu_s": work,
                        "by_layout": rows}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tb", type=float, default=1.0, help="terabytes of X")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunk-rows", type=int, default=160_000)
    p.add_argument("--decode", type=float, default=8.2e6,
                   help="rows/s one core decodes (Blosc-LZ4, 20 features)")
    p.add_argument("--startup", type=float, default=3.0,
                   help="seconds to start a cluster's workers (measured here: 1-3 s)")
    p.add_argument("--task-rows", type=int, default=4, help="rows of a light task")
    p.add_argument("--d", type=int, default=8, help="features of a meta-learning task")
    p.add_argument("--metalearn-task-s", type=float, default=0.015,
                   help="seconds of one chunk of work of 10,000 light tasks (measured: 9 ms "
                   "in a plain process, 15-27 ms in a loaded worker; bench_metalearn.py)")
    p.add_argument("--workers", type=int, default=8,
                   help="worker processes of the cluster the scheduler is measured on")
    p.add_argument("--tasks", type=int, default=2000, help="no-op tasks for the scheduler")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default="bench_scaling.json")
    args = p.parse_args()
    load_before = os.getloadavg()
    n_rows = int(args.tb * 1e12 // (8 * args.features))
    plan, pieces, summaries, record_every = scan_plan(n_rows, args.features, args.chunk_rows,
                                                      PIECE_BYTES)
    qr, normal = make_method("kf4lls", solver="qr"), make_method("kf4lls", solver="normal")
    layouts = {"summaries": summaries, "scan": {
        layout: {w: scan_layout(plan, pieces, record_every, w, qr, layout == "sized")
                 for w in WORKERS} for layout in ("before", "sized")}}
    message = layouts["scan"]["sized"][100]["message"]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        pers = {1} | {tree_units_per_task(-(-int(args.tb * 1e12 // (args.task_rows * (args.d + 1)
                                                                      * 8)) // CHUNK_TASKS),
                                          CHUNK_TASKS * args.task_rows * (args.d + 1) * 8,
                                          task_bytes(args.tb * 1e12, w)) for w in WORKERS}
        layouts["metalearn_message_bytes"] = {per: metalearn_message_bytes(client, per, args.d)
                                              for per in sorted(pers)}
    measured = {
        "scheduler": scheduler_cpu(args.tasks, args.repeat, message, args.workers),
        "scan_message_bytes": {f"{lay}_{w}": layouts["scan"][lay][w]["message_bytes"]
                               for lay in ("before", "sized") for w in WORKERS},
        "metalearn_message_bytes": layouts["metalearn_message_bytes"],
        "summary_bytes": {"qr": summary_bytes(qr, args.features),
                          "normal": summary_bytes(normal, args.features)},
        "prefix": {"qr": prefix_seconds(qr, args.features, summaries, DEFAULT_RECORDED_STEPS),
                   "normal": prefix_seconds(normal, args.features, summaries,
                                            DEFAULT_RECORDED_STEPS)},
        "arithmetic": arithmetic_per_row(args.features),
    }
    for lay in layouts["scan"].values():
        for w in lay:
            lay[w].pop("message")
    out = model(args, measured, layouts)
    load = os.getloadavg()
    sc = measured["scheduler"]
    print(f"load average before {load_before[0]:.2f}, after {load[0]:.2f}; measured here: "
          f"scheduler CPU {1e3 * sc['cpu_s_per_task']:.2f} ms per task "
          f"({1e3 * sc['cpu_s_per_task_range'][0]:.2f}-{1e3 * sc['cpu_s_per_task_range'][1]:.2f}"
          f" over {args.repeat} rounds of {args.tasks} tasks, {args.workers} worker processes;"
          f" wall {1e3 * sc['wall_s_per_task']:.2f} ms per task), summary "
          f"{measured['summary_bytes']['qr']} B (qr) / {measured['summary_bytes']['normal']} B "
          f"(normal), arithmetic per row {1e9 * measured['arithmetic']['qr']:.0f} ns (qr) / "
          f"{1e9 * measured['arithmetic']['normal']:.0f} ns (normal); decoding "
          f"{args.decode:.3g} rows/s per core (given)")
    print("task messages (bytes):", measured["scan_message_bytes"],
          measured["metalearn_message_bytes"], "\n")
    print(f"{args.tb:g} TB of X ({n_rows:.3g} rows x {args.features}), chunks of "
          f"{args.chunk_rows} rows, pieces of {PIECE_BYTES >> 20} MiB, {summaries} summaries:")
    for solver, r in out["scan"].items():
        print(f"  scan {solver}: {r['bytes_to_client'] / 1e6:.0f} MB of summaries to the "
              f"client; serial: prefix {r['prefix_s']:.2f} s, solves {r['solves_s']:.2f} s; "
              f"work {r['work_cpu_s']:.0f} core-s")
        for key, row in r["by_layout"].items():
            print(f"    {key:>10}: {row['dask_tasks']:>6} Dask tasks ({row['pieces_per_task']} "
                  f"pieces a task, {row['solve_tasks']} solve tasks), "
                  f"{row['bytes_through_scheduler'] / 1e6:.1f} MB of messages, scheduler "
                  f"{row['scheduler_s']:.1f} s, time {row['time_s']:.1f} s "
                  f"= {row['time_over_work_per_worker']:.2f} x work/workers")
    m = out["metalearn"]
    print(f"\nmeta-learning, one pass over {m['light_tasks']:.3g} light tasks of "
          f"{args.task_rows} rows x {args.d}: {m['chunks_of_work']} chunks of work, work "
          f"{m['work_cpu_s']:.0f} core-s")
    for key, row in m["by_layout"].items():
        print(f"    {key:>10}: {row['dask_tasks']:>6} + {row['reduce_tasks']} reduce Dask tasks "
              f"({row['chunks_per_task']} chunks a task), "
              f"{row['bytes_through_scheduler'] / 1e6:.1f} MB of messages, "
              f"{row['bytes_of_partial_sums'] / 1e6:.2f} MB of partial sums, scheduler "
              f"{row['scheduler_s']:.1f} s, time {row['time_s']:.1f} s "
              f"= {row['time_over_work_per_worker']:.2f} x work/workers")
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average_before": load_before,
                   "load_average_after": load, "measured": measured, "model": out}, f,
                  indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
