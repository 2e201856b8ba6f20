#!/usr/bin/env python
"""Continuing a fit on a store that grew by 10%, against fitting the grown store from scratch.

In one run, on one LocalCluster and one store: a stream store of N0 rows is fitted and its
result written; 10% more rows are appended along ``sample``; then, ``--repeats`` times,

- ``continue``: ``fit_stream(store, continue_from=first, out=...)``, which reads only the new
  rows (plus the checks: the earlier result, the chunk stamps of the earlier rows and the
  hash of the chunk they end inside) and writes the whole trajectory;
- ``scratch``: ``fit_stream(store, out=...)`` over all rows;

and prints the seconds of each (median, min, max), the ratio continue/scratch per repeat
(median and spread) and the largest relative difference of the final coefficients, which
must be at most 1e-10. The cluster is started once, before any timing. Not part of the test
suite: run it by hand.

    python tests/benchmarks/bench_continue.py
    python tests/benchmarks/bench_continue.py --rows 4000000 --features 20 --engine scan
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from distributed import Client, LocalCluster

from streamlsq import fit_stream, simulate_stream


def _copy_rows(src: Path, dst: Path, start: int, stop: int, chunk: int, append: bool) -> None:
    """Rows start:stop of ``src`` into ``dst`` (created, or appended to along sample)."""
    g = zarr.open_group(str(src), mode="r")
    for a in range(start, stop, chunk * 8):  # a few chunks at a time: bounded memory
        b = min(a + chunk * 8, stop)
        ds = xr.Dataset({"X": (("sample", "feature"), g["X"][a:b]),
                         "y": (("sample", "target"), g["y"][a:b])})
        if not append and a == start:
            ds.to_zarr(dst, zarr_format=3, encoding={"X": {"chunks": (chunk, g["X"].shape[1])},
                                                     "y": {"chunks": (chunk, 1)}})
        else:
            ds.to_zarr(dst, append_dim="sample")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=12_000_000,
                        help="rows of the store before it grows (N0)")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--growth", type=float, default=0.10, help="rows appended, / N0")
    parser.add_argument("--chunk", type=int, default=96_000, help="rows per chunk")
    parser.add_argument("--block-size", type=int, default=50_000)
    parser.add_argument("--engine", choices=["sequential", "scan"], default="sequential")
    parser.add_argument("--method", default="kf4lls")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--folder", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()

    n0 = args.rows
    n1 = n0 + int(round(args.growth * n0))
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp, LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
            silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        root = Path(tmp)
        full = simulate_stream(root / "full.zarr", n_rows=n1, n_features=args.features,
                               chunk_rows=args.chunk, seed=1, client=client)
        store = root / "grows.zarr"
        # N0 need not end on a chunk edge: the append then rewrites the partial chunk
        _copy_rows(full, store, 0, n0, args.chunk, append=False)
        kw = dict(engine=args.engine, block_size=args.block_size, client=client,
                  progress=False)
        first = root / "first.zarr"
        t = time.perf_counter()
        fit_stream(store, args.method, out=first, **kw)
        print(f"store: {n0:,} rows x {args.features} features, chunks of {args.chunk:,} rows; "
              f"first fit {time.perf_counter() - t:.2f} s ({args.method}, {args.engine})")
        _copy_rows(full, store, n0, n1, args.chunk, append=True)
        print(f"appended {n1 - n0:,} rows ({100 * (n1 - n0) / n0:.0f}%): {n1:,} rows")
        cont, scratch, ratios, diffs = [], [], [], []
        for r in range(args.repeats):
            t = time.perf_counter()
            more = fit_stream(store, args.method, continue_from=first,
                              out=root / f"continued-{r}.zarr", **kw)
            cont.append(time.perf_counter() - t)
            t = time.perf_counter()
            again = fit_stream(store, args.method, out=root / f"scratch-{r}.zarr", **kw)
            scratch.append(time.perf_counter() - t)
            ratios.append(cont[-1] / scratch[-1])
            a, b = more.coef.isel(step=-1).values, again.coef.isel(step=-1).values
            diffs.append(float(np.abs(a - b).max() / np.abs(b).max()))
            print(f"  repeat {r + 1}: continue {cont[-1]:.3f} s, scratch {scratch[-1]:.3f} s, "
                  f"ratio {ratios[-1]:.3f}, coefficients differ by {diffs[-1]:.1e} (relative)")

    def summary(values):
        return (f"median {statistics.median(values):.3f}, min {min(values):.3f}, "
                f"max {max(values):.3f}")

    print(f"continue (s): {summary(cont)}")
    print(f"scratch  (s): {summary(scratch)}")
    print(f"ratio continue/scratch: {summary(ratios)} (target <= 0.15)")
    print(f"largest relative difference of the final coefficients: {max(diffs):.1e} "
          "(target <= 1e-10)")


if __name__ == "__main__":
    main()
