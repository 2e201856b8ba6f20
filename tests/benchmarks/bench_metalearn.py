#!/usr/bin/env python
"""Meta-learning as the light tasks grow (10⁴ → 10⁶ → 10⁷), on 1 and 2 workers, against
the same algorithm in memory.

For each number of light tasks in ``--n-light`` (D_L1, ``--t-light`` rows each; the heavy
and light2 sets stay fixed, so the growth is the subspace pass over the light tasks), a
multi-task store is simulated once, then, round-robin over ``--repeat`` rounds:

- ``metalearn`` (k fixed, average linkage, no whitening) on a LocalCluster of **2**
  workers and on one of **1** worker (both ``--memory-limit`` each, 1 thread): the wall
  time, each step's time as the model records it (``seconds_*``: subspace, heavy
  estimates, clustering, initial estimates, classification and refinement, ...) and
  the peak RSS of the largest worker (psutil, every 0.05 s);
- the in-memory NumPy run of the same algorithm
  (:func:`streamlsq.kernels.mlr.reference.meta_learn`) on the same task sets loaded into
  memory, when X fits in ``--max-memory-gb``: its time (loading excluded) and the peak
  RSS of this process; and the largest difference of the learned coefficients.

Prints, per size, medians (spread min–max) and the ratios 2 workers / 1 worker, and
writes JSON. Not part of the test suite.

    python tests/benchmarks/bench_metalearn.py --n-light 10000,1000000,10000000 --repeat 3
    python tests/benchmarks/bench_metalearn.py --n-light 1000000 --out /tmp/bench-mlr
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import zarr
from _memory import WorkerPeak
from distributed import Client, LocalCluster

from streamlsq import metalearn, simulate_mlr
from streamlsq.io.tasks import ROLE_CODES
from streamlsq.kernels.mlr.reference import meta_learn


class OwnPeak:
    """Peak RSS of this process while the block runs."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        proc = psutil.Process()

        def loop():
            while not self._stop.is_set():
                self.peak = max(self.peak, proc.memory_info().rss)
                time.sleep(0.02)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def task_sets(path):
    """(X, y, task_ptr) of the light, heavy and light2 tasks of a simulated store."""
    g = zarr.open_group(str(path), mode="r")
    X, y, ptr, role = (np.asarray(g[v][:]) for v in ("X", "y", "task_ptr", "role"))
    out = {}
    for name in ("light", "heavy", "light2"):
        tasks = np.flatnonzero(role == ROLE_CODES[name])
        t0, t1 = int(tasks[0]), int(tasks[-1]) + 1  # the simulator writes each set in one run
        a, b = int(ptr[t0]), int(ptr[t1])
        out[name] = (X[a:b], y[a:b], ptr[t0:t1 + 1] - a)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-mlr"))
    p.add_argument("--n-light", default="10000,1000000,10000000",
                   help="comma-separated numbers of light tasks")
    p.add_argument("--t-light", type=int, default=4)
    p.add_argument("--n-heavy", type=int, default=2_000)
    p.add_argument("--t-heavy", type=int, default=200)
    p.add_argument("--n-light2", type=int, default=100_000)
    p.add_argument("--t-light2", type=int, default=6)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--memory-limit", default="2GB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-memory-gb", type=float, default=3.0)
    p.add_argument("--json", default="bench_metalearn.json")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kw = dict(threads_per_worker=1, memory_limit=args.memory_limit, dashboard_address=":0",
              silence_logs=logging.ERROR)
    results = []
    with LocalCluster(n_workers=2, **kw) as c2, Client(c2) as two, \
            LocalCluster(n_workers=1, **kw) as c1, Client(c1, set_as_default=False) as one:
        for n_light in (int(v) for v in args.n_light.split(",")):
            data = args.out / f"tasks-{n_light}.zarr"
            rows = (n_light * args.t_light + args.n_heavy * args.t_heavy
                    + args.n_light2 * args.t_light2)
            gb = rows * (args.d + 1) * 8 / 1e9
            t = time.perf_counter()
            simulate_mlr(data, k=args.k, d=args.d, n_light=n_light, t_light=args.t_light,
                         n_heavy=args.n_heavy, t_heavy=args.t_heavy, n_light2=args.n_light2,
                         t_light2=args.t_light2, seed=1, client=two, progress=False,
                         overwrite=True)  # replaces only a store streamlsq wrote
            print(f"{n_light} light tasks: {rows} rows, {gb:.2f} GB of X and y, simulated in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
            sets = task_sets(data) if rows * args.d * 8 / 1e9 <= args.max_memory_gb else None
            r = {"n_light": n_light, "rows": rows, "gb": gb,
                 "runs": {"2 workers": [], "1 worker": [], "numpy in memory": []}}
            coefs = {}
            for _ in range(args.repeat):
                for name, client in (("2 workers", two), ("1 worker", one)):
                    with WorkerPeak(client) as wp:
                        t = time.perf_counter()
                        ds = metalearn(data, args.k, linkage="average", client=client,
                                       progress=False)
                        sec = time.perf_counter() - t
                    steps = {k[8:]: float(v) for k, v in ds.attrs.items()
                             if k.startswith("seconds_")}
                    r["runs"][name].append({"seconds": sec, "worker_peak": wp.peak,
                                            "steps": steps})
                    coefs[name] = ds.coef.values
                if sets is not None:
                    with OwnPeak() as op:
                        t = time.perf_counter()
                        ref = meta_learn(sets["light"], sets["heavy"], sets["light2"], args.k,
                                         method="average")
                        sec = time.perf_counter() - t
                    r["runs"]["numpy in memory"].append({"seconds": sec, "own_peak": op.peak})
                    coefs["numpy in memory"] = ref["coef"]
            if "numpy in memory" in coefs:
                a = np.sort(coefs["2 workers"], axis=0)
                b = np.sort(coefs["numpy in memory"], axis=0)
                r["coef_max_diff_vs_numpy"] = float(np.max(np.abs(a - b)))
            results.append(r)
            report(r)
            shutil.rmtree(data, ignore_errors=True)  # the store this run wrote
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with open(args.json, "w") as f:
        json.dump({"settings": {k: str(v) for k, v in vars(args).items()},
                   "load_average": load, "results": results}, f, indent=1)
    print(f"wrote {args.json}")


def _med(values):
    v = np.array(values, dtype=float)
    return float(np.median(v)), float(v.min()), float(v.max())


def report(r):
    print(f"\n{r['n_light']} light tasks ({r['rows']} rows, {r['gb']:.2f} GB):")
    print(f"  {'run':<18}{'seconds':>9}{'spread':>15}{'peak MiB':>10}")
    for name, runs in r["runs"].items():
        if not runs:
            print(f"  {name:<18} (does not fit the memory budget: not run)")
            continue
        m, lo, hi = _med([x["seconds"] for x in runs])
        peak = max(x.get("worker_peak", x.get("own_peak", 0)) for x in runs) / 2**20
        print(f"  {name:<18}{m:>9.2f}{f'{lo:.2f}-{hi:.2f}':>15}{peak:>10.0f}")
    steps = sorted({s for x in r["runs"]["2 workers"] for s in x["steps"]})
    print(f"  {'step':<28}{'2 workers s':>12}{'1 worker s':>12}{'1w/2w':>8}")
    for s in steps:
        two = _med([x["steps"].get(s, np.nan) for x in r["runs"]["2 workers"]])[0]
        one = _med([x["steps"].get(s, np.nan) for x in r["runs"]["1 worker"]])[0]
        print(f"  {s:<28}{two:>12.3f}{one:>12.3f}{one / two if two else np.nan:>8.2f}")
    two = _med([x["seconds"] for x in r["runs"]["2 workers"]])[0]
    one = _med([x["seconds"] for x in r["runs"]["1 worker"]])[0]
    r["speedup_2_over_1"] = one / two
    print(f"  whole metalearn: 2 workers {one / two:.2f}x one worker"
          + (f"; max |coef - numpy| {r['coef_max_diff_vs_numpy']:.2e}"
             if "coef_max_diff_vs_numpy" in r else ""), flush=True)


if __name__ == "__main__":
    main()
