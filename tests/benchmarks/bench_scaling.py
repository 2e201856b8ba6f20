#!/usr/bin/env python
"""Past this machine: the scan engine and meta-learning on a terabyte, on paper and by
simulation, from costs measured here.

What it measures on this machine (one run, the load average printed with it):

- the Dask scheduler's cost of a task: ``--tasks`` no-op tasks, each carrying a scan
  piece's description as the engine sends it, submitted to a local scheduler with two
  workers and gathered (tasks per second, median of ``--repeat``);
- what a scan summary weighs on the wire (pickled: the QR solver's triangular factor and
  the normal equations' sums);
- the client's serial part at full size, by simulation: the in-order prefix of the scan
  engine (``Recursion.scan``) over as many summaries as a terabyte makes, and the solves
  at the recorded steps;
- the arithmetic per row on one thread: the QR summary (``tallqr.rows_factor``) and XᵀX
  of a 160,000 × 20 block; decoding per row per core is an argument (``--decode``,
  default: the quiet machine's 8.2e6 rows/s per core, docs/performance.md).

What it computes for ``--tb`` terabytes of X (float64, ``--features`` columns, chunks of
``--chunk-rows`` rows, the default pieces and recorded steps), and for meta-learning
(light tasks of ``--task-rows`` rows of ``--d`` features, chunks of work of 10,000
tasks): Dask tasks, bytes through the scheduler and back to the client, the serial time
on the client, and the modelled time on 2, 10 and 100 workers (one core each):

    time(W) = max(rows × (decode + summary) / W, tasks × scheduler time per task)
              + prefix + solves + a cluster's start-up

Not part of the test suite:

    python tests/benchmarks/bench_scaling.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import time
from dataclasses import dataclass

import numpy as np
from distributed import Client, LocalCluster
from threadpoolctl import threadpool_limits

from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.kernels.synthetic.streams import stream_design, stream_rows
from streamlsq.kernels.tallqr import rows_factor
from streamlsq.stream.engines import PIECE_BYTES, _piece_cuts
from streamlsq.stream.fit import DEFAULT_RECORDED_STEPS
from streamlsq.stream.methods import make_method
from streamlsq.stream.plans import Section, StreamPlan, plan_segments

#: fan-in of meta-learning's tree reductions (streamlsq.runtime.reduce.SPLIT_EVERY)
SPLIT_EVERY = 8
#: tasks per chunk of work of meta-learning (streamlsq.io.tasks.CHUNK_TASKS)
CHUNK_TASKS = 10_000


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


def _noop(span, method, record_every, dtype):
    return span.n_rows


def scheduler_rate(n_tasks, repeat, plan, pieces, method) -> float:
    """Tasks per second through a local scheduler (two worker processes), each task
    carrying a scan piece's arguments as the engine sends them."""
    rates = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        spans = [plan.span(*pieces[i % len(pieces)]) for i in range(n_tasks)]
        for _ in range(repeat + 1):  # the first round warms the workers
            t = time.perf_counter()
            futures = [client.submit(_noop, s, method, 1, "float64", pure=False)
                       for s in spans]
            client.gather(futures)
            rates.append(n_tasks / (time.perf_counter() - t))
            del futures
    return float(np.median(rates[1:]))


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


def model(args, measured) -> dict:
    row_bytes = 8 * args.features
    n_rows = int(args.tb * 1e12 // row_bytes)
    out = {"scan": {}, "metalearn": {}}
    for solver in ("qr", "normal"):
        plan, pieces, summaries, record_every = scan_plan(
            n_rows, args.features, args.chunk_rows, PIECE_BYTES)
        method = make_method("kf4lls", solver=solver)
        prefix, solves = measured["prefix"][solver]
        per_row = 1 / args.decode + measured["arithmetic"][solver]
        tasks = len(pieces) + 4 * 100  # pieces, and at most 4 solve tasks per worker
        sched = tasks / measured["scheduler_tasks_per_s"]
        row = {"rows": n_rows, "blocks": plan.n_blocks, "record_every": record_every,
               "dask_tasks": tasks, "summaries": summaries,
               "bytes_to_client": summaries * measured["summary_bytes"][solver],
               "bytes_through_scheduler": tasks * measured["task_message_bytes"],
               "prefix_s": prefix, "solves_s": solves, "scheduler_s": sched,
               "work_cpu_s": n_rows * per_row}
        for w in (2, 10, 100):
            row[f"time_{w}_workers_s"] = (max(n_rows * per_row / w, sched) + prefix
                                          + solves / min(w, 4 * w) + args.startup)
        out["scan"][solver] = row
        del method
    # meta-learning: one pass over light tasks of task_rows rows, d features and a target
    task_bytes = args.task_rows * (args.d + 1) * 8
    n_tasks = int(args.tb * 1e12 // task_bytes)
    chunks = -(-n_tasks // CHUNK_TASKS)
    reduce_tasks, level = 0, chunks
    while level > 1:
        level = -(-level // SPLIT_EVERY)
        reduce_tasks += level
    per_chunk = args.metalearn_task_s
    sched = (chunks + reduce_tasks) / measured["scheduler_tasks_per_s"]
    row = {"light_tasks": n_tasks, "chunks_of_work": chunks, "reduce_tasks": reduce_tasks,
           "bytes_through_scheduler": (chunks + reduce_tasks) * measured["task_message_bytes"],
           "bytes_of_partial_sums": (chunks + reduce_tasks) * args.d * args.d * 8,
           "scheduler_s_per_pass": sched, "work_cpu_s_per_pass": chunks * per_chunk}
    for w in (2, 10, 100):
        row[f"time_{w}_workers_s_per_pass"] = max(chunks * per_chunk / w, sched) + args.startup
    out["metalearn"] = row
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
                   help="seconds of one Dask task of 10,000 light tasks (measured: 9 ms in "
                   "a plain process, 15-27 ms in a loaded worker; bench_metalearn.py)")
    p.add_argument("--tasks", type=int, default=2000, help="no-op tasks for the scheduler")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default="bench_scaling.json")
    args = p.parse_args()
    load_before = os.getloadavg()
    n_rows = int(args.tb * 1e12 // (8 * args.features))
    plan, pieces, summaries, record_every = scan_plan(n_rows, args.features, args.chunk_rows,
                                                      PIECE_BYTES)
    qr, normal = make_method("kf4lls", solver="qr"), make_method("kf4lls", solver="normal")
    span_bytes = len(pickle.dumps((plan.span(*pieces[1]), qr, 1, "float64"), protocol=5))
    measured = {
        "scheduler_tasks_per_s": scheduler_rate(args.tasks, args.repeat, plan, pieces, qr),
        "task_message_bytes": span_bytes,
        "summary_bytes": {"qr": summary_bytes(qr, args.features),
                          "normal": summary_bytes(normal, args.features)},
        "prefix": {"qr": prefix_seconds(qr, args.features, summaries, DEFAULT_RECORDED_STEPS),
                   "normal": prefix_seconds(normal, args.features, summaries,
                                            DEFAULT_RECORDED_STEPS)},
        "arithmetic": arithmetic_per_row(args.features),
    }
    out = model(args, measured)
    load = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load[0]:.2f}; measured here: "
          f"scheduler {measured['scheduler_tasks_per_s']:.0f} tasks/s "
          f"({1e3 / measured['scheduler_tasks_per_s']:.2f} ms per task), a piece's task "
          f"{span_bytes} bytes pickled, summary {measured['summary_bytes']['qr']} B (qr) / "
          f"{measured['summary_bytes']['normal']} B (normal), arithmetic per row "
          f"{1e9 * measured['arithmetic']['qr']:.0f} ns (qr) / "
          f"{1e9 * measured['arithmetic']['normal']:.0f} ns (normal); decoding "
          f"{args.decode:.3g} rows/s per core (given)\n")
    print(f"{args.tb:g} TB of X ({n_rows:.3g} rows x {args.features}), chunks of "
          f"{args.chunk_rows} rows, pieces of {PIECE_BYTES >> 20} MiB:")
    for solver, r in out["scan"].items():
        print(f"  scan {solver}: {r['dask_tasks']} Dask tasks, {r['summaries']} summaries "
              f"({r['bytes_to_client'] / 1e6:.0f} MB to the client), "
              f"{r['bytes_through_scheduler'] / 1e6:.0f} MB of task messages; serial: prefix "
              f"{r['prefix_s']:.2f} s, solves {r['solves_s']:.2f} s, scheduler "
              f"{r['scheduler_s']:.1f} s; work {r['work_cpu_s']:.0f} core-s; modelled time "
              + ", ".join(f"{w} workers {r[f'time_{w}_workers_s']:.0f} s" for w in (2, 10, 100)))
    m = out["metalearn"]
    print(f"\nmeta-learning, one pass over {m['light_tasks']:.3g} light tasks of {args.task_rows} "
          f"rows x {args.d}: {m['chunks_of_work']} chunks of work + {m['reduce_tasks']} "
          f"reduce tasks, {m['bytes_through_scheduler'] / 1e6:.0f} MB of task messages, "
          f"{m['bytes_of_partial_sums'] / 1e6:.1f} MB of partial sums; scheduler "
          f"{m['scheduler_s_per_pass']:.0f} s, work {m['work_cpu_s_per_pass']:.0f} core-s; "
          "modelled time per pass "
          + ", ".join(f"{w} workers {m[f'time_{w}_workers_s_per_pass']:.0f} s"
                      for w in (2, 10, 100)))
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average_before": load_before,
                   "load_average_after": load, "measured": measured, "model": out}, f,
                  indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
