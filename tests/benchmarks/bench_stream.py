#!/usr/bin/env python
"""Throughput of the stream engines against the floor: reading and decoding every chunk.

In one run, on one store and one LocalCluster, prints rows/s and the ratio to the
raw read for:

- raw read: every chunk of X and y read and decoded by a parallel map, nothing else
  (the ratios are to this floor);
- raw read, in order: one task reading every chunk in turn (the floor of an in-order
  consumer when the codec's decoder holds the GIL, as numcodecs' Zstd does);
- the sequential engine (KF4LLS);
- the scan engine (KF4LLS);
- numpy.linalg.lstsq on the same rows in memory (when they fit), compute only;

plus the peak memory of the cluster's processes during each run (sampled by
distributed's MemorySampler). Not part of the test suite: run it by hand.

    python tests/benchmarks/bench_stream.py --rows 4000000 --features 20
    python tests/benchmarks/bench_stream.py --store existing.zarr --memory-limit 1GB
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster
from distributed.diagnostics import MemorySampler

from streamlsq import fit_stream, open_stream, simulate_stream
from streamlsq.io.stores import cached_array
from streamlsq.runtime.memory import fast_large_allocations


def _read_chunk(source, a, b):
    # the floor: fetch and decode, no validation, no arithmetic; same allocator
    # setting as the engines' tasks, so that the comparison is like for like
    with fast_large_allocations():
        source.array("X")[a:b]
        source.array("y")[a:b]
    return b - a


def _read_all_in_order(source):
    with fast_large_allocations():
        for a, b in zip(source.chunk_edges()[:-1], source.chunk_edges()[1:], strict=True):
            source.array("X")[int(a):int(b)]
            source.array("y")[int(a):int(b)]
    return source.n_rows


def raw_read_in_order(client, source) -> float:
    """The floor of one in-order consumer: one task reads every chunk in turn."""
    t = time.perf_counter()
    assert client.submit(_read_all_in_order, source, pure=False).result() == source.n_rows
    return time.perf_counter() - t


def raw_read(client, source) -> float:
    edges = source.chunk_edges()
    tag = uuid.uuid4().hex[:6]
    t = time.perf_counter()
    futs = [client.submit(_read_chunk, source, int(a), int(b), key=f"read-{tag}-{i}")
            for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))]
    assert sum(client.gather(futs)) == source.n_rows
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, default=None, help="existing stream store")
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="auto")
    p.add_argument("--repeat", type=int, default=2, help="best of N runs of each")
    p.add_argument("--max-lstsq-gb", type=float, default=4.0)
    p.add_argument("--segment-mb", type=float, default=None,
                   help="MB of X per sequential task (default: the engine's)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(dir=".") as tmp, LocalCluster(
        n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit,
        dashboard_address=":0", silence_logs=logging.ERROR,
    ) as cluster, Client(cluster) as client:
        store = args.store
        if store is None:
            store = Path(tmp) / "bench.zarr"
            t = time.perf_counter()
            simulate_stream(store, args.rows, args.features, 1, chunk_rows=args.chunk_rows,
                            seed=0, client=client)
            print(f"simulated {args.rows} x {args.features} in {time.perf_counter() - t:.1f} s")
        source = open_stream(store)
        gb = source.n_rows * (source.n_features + source.n_targets) * 8 / 1e9
        print(f"store {store}: {source.n_rows} rows x {source.n_features} features, "
              f"{gb:.2f} GB in float64, chunks of {source.chunk_rows} rows, "
              f"{args.workers} workers x 1 thread, memory limit {args.memory_limit}")
        sampler = MemorySampler()
        timings = {}

        def best(name, fn):
            runs = []
            for _ in range(args.repeat):
                with sampler.sample(name, interval=0.1):
                    t = time.perf_counter()
                    fn()
                    runs.append(time.perf_counter() - t)
            timings[name] = min(runs)

        best("raw read", lambda: raw_read(client, source))
        best("raw read, in order", lambda: raw_read_in_order(client, source))
        seg = {"segment_bytes": int(args.segment_mb * 2**20)} if args.segment_mb else {}
        best("sequential", lambda: fit_stream(store, "kf4lls", engine="sequential",
                                              client=client, progress=False, **seg))
        best("scan", lambda: fit_stream(store, "kf4lls", engine="scan", client=client,
                                        progress=False))
        if gb <= args.max_lstsq_gb:
            X = np.asarray(cached_array(str(store), None, "X")[:])
            y = np.asarray(cached_array(str(store), None, "y")[:])
            t = time.perf_counter()
            np.linalg.lstsq(X, y, rcond=None)
            timings["numpy lstsq (in memory)"] = time.perf_counter() - t
            del X, y
        peaks = sampler.to_pandas().max() / 2**20 if timings else {}
        floor = source.n_rows / timings["raw read"]
        print(f"\n{'run':<26}{'seconds':>9}{'rows/s':>14}{'vs raw read':>13}{'peak MiB':>10}")
        for name, sec in timings.items():
            rate = source.n_rows / sec
            peak = f"{peaks[name]:.0f}" if name in peaks else "-"
            print(f"{name:<26}{sec:>9.2f}{rate:>14.3e}{rate / floor:>13.2f}{peak:>10}")


if __name__ == "__main__":
    main()
