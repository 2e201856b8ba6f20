#!/usr/bin/env python
"""Out of core: peak memory and time as a store grows ten-fold (default 2 GB → 20 GB).

For each size in ``--gb`` (gigabytes of X and y on disk, uncompressed float64 written
with the default codec), simulates (or reuses, in ``--dir``) a stream store, and on one
LocalCluster whose workers are limited to ``--memory-limit`` each (distributed pauses,
then restarts, a worker that goes past its limit, so finishing at all shows the bound)
fits it with both engines (KF4LLS; ``--repeat`` rounds, round-robin over the sizes and
the engines, so that the machine's load falls on every size alike), printing for each
run the seconds (median, spread), rows/s, the peak RSS of the largest single worker
(psutil, every 0.05 s) and of the cluster (distributed's MemorySampler: the sum over
workers, every 0.1 s). Then, between the smallest and the largest size, the growth of
the peak worker memory (the target: ≤ 20 %) and of the time per row (linear:
within ±20 %). The answer of the smallest store is checked against
``dask.array.linalg.lstsq`` (tall-skinny QR, an independent out-of-core algorithm).

Check the disk first (``df -h``): 20 GB of stores need 20 GB free (the default codec
barely compresses Gaussian floats). Writes JSON. Not part of the test suite:

    python tests/benchmarks/bench_memory.py --gb 2,20 --memory-limit 1GB --dir /data
    python tests/benchmarks/bench_memory.py --gb 8 --memory-limit 1GB   # one size
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import time
from pathlib import Path

import dask.array as da
import numpy as np
from _memory import WorkerPeak
from distributed import Client, LocalCluster
from distributed.diagnostics import MemorySampler

from streamlsq import fit_stream, open_stream, simulate_stream


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", default="2,20", help="comma-separated sizes of X and y in GB")
    p.add_argument("--dir", type=Path, default=Path("."), help="where the stores go")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--memory-limit", default="1GB")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="keep the stores it simulated")
    p.add_argument("--json", default="bench_memory.json")
    args = p.parse_args()
    sizes = [float(v) for v in args.gb.split(",")]
    results = {}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        stores, created = {}, []
        for gb in sizes:  # every store first, so that the fits can run round-robin
            store = args.dir / f"bench-memory-{gb:g}gb.zarr"
            rows = int(gb * 1e9 / (8 * (args.features + 1)))
            if not store.exists():
                t = time.perf_counter()
                simulate_stream(store, rows, args.features, 1, seed=0, client=client,
                                progress=False)
                created.append(store)
                print(f"simulated {rows} x {args.features} ({gb:g} GB) in "
                      f"{time.perf_counter() - t:.0f} s", flush=True)
            stores[gb] = store
        sampler = MemorySampler()
        runs = {gb: {"sequential": [], "scan": []} for gb in sizes}
        last = {}
        for i in range(args.repeat):  # round-robin over sizes and engines: the same load
            for gb, store in stores.items():
                for engine in runs[gb]:
                    name = f"{gb}-{engine}-{i}"
                    with sampler.sample(name, interval=0.1), WorkerPeak(client) as wp:
                        t = time.perf_counter()
                        ds = fit_stream(store, "kf4lls", engine=engine, client=client,
                                        progress=False)
                        runs[gb][engine].append({"seconds": time.perf_counter() - t,
                                                 "worker_peak": wp.peak})
                    last[gb] = ds
        cluster_peak = sampler.to_pandas().max()
        for gb, store in stores.items():
            for engine, rs in runs[gb].items():
                for i, r in enumerate(rs):
                    r["cluster_peak"] = float(cluster_peak[f"{gb}-{engine}-{i}"])
            src = open_stream(store)
            disk = sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 1e9
            entry = {"gb": gb, "rows": src.n_rows, "disk_gb": disk, "runs": runs[gb]}
            if gb == sizes[0]:
                X = da.from_zarr(str(store), component="X")
                y = da.from_zarr(str(store), component="y")
                ref = client.compute(da.linalg.lstsq(X, y)[0]).result()
                coef = last[gb].coef.isel(step=-1).values
                entry["rel_err_vs_tsqr"] = float(np.abs(coef - ref).max() / np.abs(ref).max())
            results[gb] = entry
            print_size(entry, args.memory_limit, args.workers)
        if not args.keep:  # only the stores this run simulated, never one it reused
            for store in created:
                shutil.rmtree(store, ignore_errors=True)
    growth = summary(results, sizes)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with open(args.json, "w") as f:
        json.dump({"settings": {k: str(v) for k, v in vars(args).items()},
                   "load_average": load, "results": results, "growth": growth}, f, indent=1)
    print(f"wrote {args.json}")


def print_size(entry, limit, workers):
    print(f"\nstore of {entry['gb']:g} GB ({entry['rows']} rows, {entry['disk_gb']:.1f} GB on "
          f"disk); {workers} workers limited to {limit}")
    print(f"  {'engine':<12}{'seconds':>9}{'spread':>15}{'rows/s':>12}{'worker peak MiB':>17}"
          f"{'cluster peak MiB':>18}")
    for engine, rs in entry["runs"].items():
        s = np.array([r["seconds"] for r in rs])
        peak = max(r["worker_peak"] for r in rs) / 2**20
        cpeak = max(r["cluster_peak"] for r in rs) / 2**20
        print(f"  {engine:<12}{np.median(s):>9.1f}{f'{s.min():.1f}-{s.max():.1f}':>15}"
              f"{entry['rows'] / np.median(s):>12.3e}{peak:>17.0f}{cpeak:>18.0f}")
    if "rel_err_vs_tsqr" in entry:
        print(f"  last fit against dask lstsq (tsqr): relative error "
              f"{entry['rel_err_vs_tsqr']:.1e}", flush=True)


def summary(results, sizes):
    small, large = results[sizes[0]], results[sizes[-1]]
    growth = {}
    if len(sizes) < 2:
        return growth
    print(f"\nfrom {sizes[0]:g} GB to {sizes[-1]:g} GB ({large['rows'] / small['rows']:.1f}x "
          "the rows):")
    for engine in small["runs"]:
        peak = [max(r["worker_peak"] for r in e["runs"][engine]) for e in (small, large)]
        per_row = [np.median([r["seconds"] for r in e["runs"][engine]]) / e["rows"]
                   for e in (small, large)]
        growth[engine] = {"worker_peak_growth": peak[1] / peak[0] - 1,
                          "time_per_row_ratio": per_row[1] / per_row[0]}
        print(f"  {engine:<12} peak worker memory {100 * (peak[1] / peak[0] - 1):+.0f}%, "
              f"time per row x{per_row[1] / per_row[0]:.2f}")
    return growth


if __name__ == "__main__":
    main()
