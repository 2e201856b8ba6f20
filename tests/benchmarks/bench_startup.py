#!/usr/bin/env python
"""Where a user waits: whole-process wall time of the command line, in one run.

Times, as separate processes (what a user waits for), round-robin over ``--repeat``
rounds, median and spread, with the load average before and after:

- ``streamlsq --help`` and ``streamlsq info STORE``;
- ``streamlsq fit kf4lls STORE`` on a ``--rows`` × ``--features`` store written by
  ``simulate`` (default 100,000 × 20), with the embedded cluster as chosen
  (``auto``: in-process workers for a store this small) and with worker processes
  forced (``DASK_STREAMLSQ__EMBEDDED_WORKERS=processes``);
- with ``--big STORE`` (e.g. the 8,000,000 × 20 store of ``docs/performance.md``):
  ``streamlsq fit kf4lls STORE --engine ENGINE`` as chosen (``auto``: worker processes
  above ``streamlsq.in-process-bytes``) and with threads forced, against the same fit on
  a warm cluster of two worker processes (``fit_stream(..., client=)``): the ratio whole
  process / warm fit; and the same warm fit on in-process workers (threads), for the
  choice between the two;
- the fit's compute alone: ``fit_stream`` in a warm process on a running cluster.

Also the imports, as ``python -X importtime`` totals (the smallest of ``--repeat``
processes): ``import streamlsq.cli`` and ``import streamlsq.stream.fit`` (the fit path).
Writes JSON. Not part of the test suite:

    python tests/benchmarks/bench_startup.py --repeat 5
    python tests/benchmarks/bench_startup.py --repeat 5 --big big.zarr --engine scan
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: the console script a user runs (``python -m streamlsq.cli`` when it is not on PATH)
EXE = [shutil.which("streamlsq")] if shutil.which("streamlsq") else [sys.executable, "-m",
                                                                     "streamlsq.cli"]


def timed(cmd, env=None, cwd=None) -> float:
    t = time.perf_counter()
    run = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    sec = time.perf_counter() - t
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {run.stderr[-2000:]}")
    return sec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--big", type=Path, default=None, help="a large existing stream store")
    p.add_argument("--engine", default="scan", help="the engine of the fits of --big")
    p.add_argument("--json", default="bench_startup.json")
    args = p.parse_args()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        store = Path(tmp) / "small.zarr"
        subprocess.run([*EXE, "simulate", "stream", "--out", str(store), "--rows",
                        str(args.rows), "--features", str(args.features), "--seed", "1"],
                       check=True, capture_output=True)
        env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
        procs = {**env, "DASK_STREAMLSQ__EMBEDDED_WORKERS": "processes"}
        threads = {**env, "DASK_STREAMLSQ__EMBEDDED_WORKERS": "threads"}
        out = Path(tmp) / "fit.zarr"

        def fit(data, environment, *extra):
            def run():
                shutil.rmtree(out, ignore_errors=True)
                return timed([*EXE, "fit", "kf4lls", str(data), "--out", str(out), *extra],
                             environment)
            return run

        cases = {
            "streamlsq --help": lambda: timed([*EXE, "--help"], env),
            "streamlsq info STORE": lambda: timed([*EXE, "info", str(store)], env),
            "streamlsq fit kf4lls STORE (auto: in-process workers)": fit(store, env),
            "streamlsq fit kf4lls STORE (worker processes forced)": fit(store, procs),
        }
        if args.big is not None:
            engine = ("--engine", args.engine)
            cases[f"streamlsq fit kf4lls BIG --engine {args.engine} (auto)"] = fit(
                args.big, env, *engine)
            cases[f"streamlsq fit kf4lls BIG --engine {args.engine} (threads forced)"] = fit(
                args.big, threads, *engine)
        warm = "fit_stream compute alone (warm process, running cluster)"
        warm_big = f"fit_stream BIG --engine {args.engine} (warm, 2 worker processes)"
        warm_big_threads = f"fit_stream BIG --engine {args.engine} (warm, in-process workers)"
        runs = {name: [] for name in [*cases, warm] + ([warm_big, warm_big_threads]
                                                       if args.big else [])}
        from distributed import Client, LocalCluster

        from streamlsq import fit_stream

        def timed_fit(data, client, **kw):
            t = time.perf_counter()
            fit_stream(data, "kf4lls", client=client, progress=False, **kw)
            return time.perf_counter() - t

        def timed_fit_on_threads(data, client, **kw):
            # as the embedded cluster runs its worker threads: one BLAS thread each (two
            # worker threads each starting OpenBLAS's own threads oversubscribe the cores)
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1, user_api="blas"):
                return timed_fit(data, client, **kw)

        with LocalCluster(processes=False, dashboard_address=":0",
                          silence_logs=logging.ERROR) as cluster, \
                Client(cluster) as client, \
                LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                             silence_logs=logging.ERROR) as two, \
                Client(two, set_as_default=False) as on_two:
            timed_fit_on_threads(store, client)  # warm
            if args.big is not None:
                timed_fit(args.big, on_two, engine=args.engine)
            for _ in range(args.repeat):
                for name, fn in cases.items():
                    runs[name].append(fn())
                runs[warm].append(timed_fit_on_threads(store, client))
                if args.big is not None:
                    runs[warm_big].append(timed_fit(args.big, on_two, engine=args.engine))
                    runs[warm_big_threads].append(timed_fit_on_threads(
                        args.big, client, engine=args.engine))
        imports = {stmt: import_seconds(stmt, args.repeat)
                   for stmt in ("import streamlsq.cli", "import streamlsq.stream.fit")}
    report(args, runs, imports, (load_before, os.getloadavg()), warm_big)


def import_seconds(statement: str, repeat: int) -> float:
    """The cumulative import time python -X importtime reports for ``statement``: the
    smallest of ``repeat`` processes."""
    best = float("inf")
    for _ in range(repeat):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                             capture_output=True, text=True).stderr.strip().split("\n")
        best = min(best, max(int(line.split("|")[1]) for line in err
                             if line.startswith("import time:") and "cumulative" not in line))
    return best / 1e6


def report(args, runs, imports, loads, warm_big):
    before, after = loads
    print(f"store: {args.rows} x {args.features}; {args.repeat} round-robin rounds; load "
          f"average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, after "
          f"{after[0]:.2f} {after[1]:.2f} {after[2]:.2f}\n")
    print(f"{'command (whole process)':<66}{'median s':>10}{'spread':>16}{'/ warm':>8}")
    table = {}
    for name, secs in runs.items():
        s = np.array(secs)
        table[name] = {"median": float(np.median(s)), "min": float(s.min()),
                       "max": float(s.max()), "seconds": secs}
        ratio = ""
        if "BIG" in name and not name.startswith("fit_stream") and runs.get(warm_big):
            ratio = f"{np.median(s) / np.median(runs[warm_big]):.2f}"
            table[name]["over_warm"] = float(np.median(s) / np.median(runs[warm_big]))
        print(f"{name:<66}{np.median(s):>10.2f}{f'{s.min():.2f}-{s.max():.2f}':>16}"
              f"{ratio:>8}")
    print()
    for stmt, sec in imports.items():
        print(f"{stmt}: {sec:.3f} s (python -X importtime, the fastest of {args.repeat})")
    with open(args.json, "w") as f:
        json.dump({"settings": {k: str(v) for k, v in vars(args).items()},
                   "load_average_before": before, "load_average_after": after,
                   "imports_s": imports, "results": table}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
