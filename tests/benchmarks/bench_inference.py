#!/usr/bin/env python
"""The cost of the statistics of a least-squares fit: the classical ones (from the state)
and a robust covariance (one more pass), on one store written by ``simulate``.

On a stream store (default 4,000,000 × 20, ``streamlsq simulate stream``'s data, plus a
variable of group labels, 1,000 rows a group), round-robin over ``--repeat`` rounds (the
machine's load falls on every run alike), prints seconds (median and spread min–max) and,
per round, the ratios:

- **classical statistics**: KF4LLS with its statistics (the moments of the rows kept in the
  state, diag((XᵀX)⁻¹) at every recorded step, the statistics from the final state) against
  the same fit without them (``ridge=1e-300``: no statistic applies to a ridge start, so
  none of this is computed; the arithmetic of the fit is otherwise the same), on both
  engines with the QR solver, and in memory on the kernel alone (the form's fold with and
  without ``statistics``, no reading);
- **robust pass**: the pass of ``streamlsq.robust_covariance`` (HC1, HC3, cluster) against
  a scan fit of the same store.

Writes every run's seconds as JSON. Not part of the test suite:

    python tests/benchmarks/bench_inference.py --rows 4000000 --features 20 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from distributed import Client, LocalCluster

from streamlsq import fit_stream, robust_covariance, simulate_stream
from streamlsq.kernels.recursions.contract import block_edges
from streamlsq.kernels.recursions.sqrtinfo import SqrtInfoLS


def add_groups(path: Path, rows: int, chunk_rows: int, per_group: int) -> None:
    """A variable ``g (sample,)`` of integer group labels, ``per_group`` rows a group."""
    g = zarr.open_group(str(path), mode="r+")
    a = g.create_array("g", shape=(rows,), chunks=(chunk_rows,), dtype="int64",
                       dimension_names=["sample"], overwrite=True)
    for start in range(0, rows, chunk_rows):
        stop = min(rows, start + chunk_rows)
        a[start:stop] = np.arange(start, stop) // per_group


def kernel_fold(statistics: bool, X, Y, edges):
    """The square-root form's fold over rows in memory (no reading), with or without the
    statistics' moments and per-step variances."""
    form = SqrtInfoLS(0.0, 1.0, statistics=statistics)
    return form.fold(form.init(X.shape[1], Y.shape[1]), X, Y, edges, 1,
                     max(1, (len(edges) - 1) // 1000))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunk-rows", type=int, default=160_000)
    p.add_argument("--block-size", type=int, default=50_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", type=Path, default=Path("bench_inference.json"))
    args = p.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
                         silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        store = simulate_stream(Path(tmp) / "data.zarr", args.rows, args.features, 1,
                                chunk_rows=args.chunk_rows, seed=1, client=client)
        add_groups(store, args.rows, args.chunk_rows, 1_000)
        common = dict(block_size=args.block_size, client=client, progress=False)
        fit = fit_stream(store, "kf4lls", engine="scan", **common)
        rng = np.random.default_rng(0)
        n_mem = min(args.rows, 2_000_000)
        X = rng.standard_normal((n_mem, args.features))
        Y = X @ rng.standard_normal((args.features, 1)) + rng.standard_normal((n_mem, 1))
        edges = block_edges(n_mem, args.block_size)
        runs = {
            "fit sequential, statistics": lambda: fit_stream(store, "kf4lls", **common),
            "fit sequential, none": lambda: fit_stream(store, "kf4lls", ridge=1e-300, **common),
            "fit scan, statistics": lambda: fit_stream(store, "kf4lls", engine="scan",
                                                       **common),
            "fit scan, none": lambda: fit_stream(store, "kf4lls", engine="scan", ridge=1e-300,
                                                 **common),
            "kernel fold, statistics": lambda: kernel_fold(True, X, Y, edges),
            "kernel fold, none": lambda: kernel_fold(False, X, Y, edges),
            "robust pass HC1": lambda: robust_covariance(fit, store, cov_type="HC1",
                                                         client=client, progress=False),
            "robust pass HC3": lambda: robust_covariance(fit, store, cov_type="HC3",
                                                         client=client, progress=False),
            "robust pass cluster": lambda: robust_covariance(
                fit, store, cov_type="cluster", groups="g", client=client, progress=False),
        }
        for fn in runs.values():  # warm up: numba caches, first opens
            fn()
        seconds = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, fn in runs.items():
                t = time.perf_counter()
                fn()
                seconds[name].append(time.perf_counter() - t)
    load_after = os.getloadavg()
    report(args, seconds, load_before, load_after)


RATIOS = {
    "classical statistics, sequential (with / without)": ("fit sequential, statistics",
                                                          "fit sequential, none"),
    "classical statistics, scan (with / without)": ("fit scan, statistics", "fit scan, none"),
    "classical statistics, kernel fold in memory": ("kernel fold, statistics",
                                                    "kernel fold, none"),
    "robust pass HC1 / scan fit": ("robust pass HC1", "fit scan, statistics"),
    "robust pass HC3 / scan fit": ("robust pass HC3", "fit scan, statistics"),
    "robust pass cluster / scan fit": ("robust pass cluster", "fit scan, statistics"),
}


def report(args, seconds, load_before, load_after) -> None:
    print(f"\n{args.rows:,} x {args.features}, {args.repeat} round-robin rounds, "
          f"{args.workers} workers; load average before {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}, after {load_after[0]:.2f} "
          f"{load_after[1]:.2f} {load_after[2]:.2f}\n")
    print(f"{'run':<32}{'seconds':>10}{'spread':>18}")
    for name, s in seconds.items():
        print(f"{name:<32}{np.median(s):>10.3f}{f'{min(s):.3f}-{max(s):.3f}':>18}")
    print(f"\n{'ratio (per round)':<52}{'median':>8}{'spread':>16}")
    ratios = {}
    for label, (a, b) in RATIOS.items():
        r = np.array(seconds[a]) / np.array(seconds[b])
        ratios[label] = {"median": float(np.median(r)), "min": float(r.min()),
                         "max": float(r.max())}
        print(f"{label:<52}{np.median(r):>8.3f}{f'{r.min():.3f}-{r.max():.3f}':>16}")
    with open(args.json, "w") as f:
        json.dump({"settings": {k: str(v) for k, v in vars(args).items()},
                   "load_average": {"before": load_before, "after": load_after},
                   "seconds": seconds, "ratios": ratios}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
