#!/usr/bin/env python
"""Fit a store several times larger than the workers' memory, and measure peak memory.

Simulates (or reuses) a stream store of ``--gb`` gigabytes, starts a LocalCluster
whose workers are limited to ``--memory-limit`` each (distributed pauses, then
restarts, a worker that goes past its limit, so finishing at all shows the
bound), runs both engines, and prints for each run the peak memory of the
cluster's processes (distributed's MemorySampler: the sum over workers of the
process RSS, sampled every 0.1 s) and of the largest single worker (psutil,
sampled every 0.05 s). The answer is checked against ``dask.array.linalg.lstsq``
(a tall-skinny QR, an independent out-of-core algorithm).

    python tests/benchmarks/bench_memory.py --gb 8 --memory-limit 1GB
"""

from __future__ import annotations

import argparse
import logging
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
    p.add_argument("--store", type=Path, default=Path("bench-memory.zarr"))
    p.add_argument("--gb", type=float, default=8.0, help="size of X in float64")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--memory-limit", default="1GB")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    rows = int(args.gb * 1e9 / (8 * args.features))

    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        if not args.store.exists():
            t = time.perf_counter()
            simulate_stream(args.store, rows, args.features, 1, seed=0, client=client)
            print(f"simulated {rows} x {args.features} ({args.gb} GB of X) in "
                  f"{time.perf_counter() - t:.0f} s")
        src = open_stream(args.store)
        size_gb = src.n_rows * (src.n_features + src.n_targets) * 8 / 1e9
        print(f"store {args.store}: {src.n_rows} rows, {size_gb:.2f} GB; "
              f"{args.workers} workers limited to {args.memory_limit} each")
        sampler = MemorySampler()
        results = {}
        for engine in ("sequential", "scan"):
            with sampler.sample(engine, interval=0.1), WorkerPeak(client) as wp:
                t = time.perf_counter()
                ds = fit_stream(args.store, "kf4lls", engine=engine, client=client,
                                progress=False)
                sec = time.perf_counter() - t
            results[engine] = (ds.coef.isel(step=-1).values, sec, wp.peak)
        with sampler.sample("dask lstsq (tsqr)", interval=0.1), WorkerPeak(client) as wp:
            t = time.perf_counter()
            X = da.from_zarr(str(args.store), component="X")
            y = da.from_zarr(str(args.store), component="y")
            ref = da.linalg.lstsq(X, y)[0].compute()
            results["dask lstsq (tsqr)"] = (ref, time.perf_counter() - t, wp.peak)
        cluster_peak = sampler.to_pandas().max() / 2**20
        print(f"\n{'run':<20}{'seconds':>9}{'rows/s':>12}{'cluster peak MiB':>18}"
              f"{'worker peak MiB':>17}{'rel. err vs tsqr':>18}")
        for name, (coef, sec, peak) in results.items():
            err = np.abs(coef - ref).max() / np.abs(ref).max()
            print(f"{name:<20}{sec:>9.1f}{src.n_rows / sec:>12.3e}{cluster_peak[name]:>18.0f}"
                  f"{peak / 2**20:>17.0f}{err:>18.2e}")


if __name__ == "__main__":
    main()
