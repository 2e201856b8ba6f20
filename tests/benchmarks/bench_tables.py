#!/usr/bin/env python
"""Tables out of core: time and peak worker memory of a fit of a Parquet file, against the
same rows converted to a stream store (``streamlsq.convert``).

Writes a Parquet file of ``--gb`` gigabytes of float64 (``--features`` columns and a target,
row groups of ``--row-group`` rows, unequal when ``--ragged``: then the virtual chunks of the
reader straddle row groups), converts it to Zarr, and on one LocalCluster whose workers are
limited to ``--memory-limit`` each fits both with KF4LLS on both engines, printing for each
run the seconds, rows/s and the peak RSS of the largest single worker (psutil, every 0.05 s).
Finishing at all with a limit below the file's size shows the bound. Writes JSON. Not part of
the test suite:

    python tests/benchmarks/bench_tables.py --gb 1 --memory-limit 600MB --dir /tmp
    python tests/benchmarks/bench_tables.py --gb 1 --ragged
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
from _memory import WorkerPeak
from distributed import Client, LocalCluster

from streamlsq import convert, fit_stream


def write_parquet(path: Path, rows: int, features: int, group_rows: int, ragged: bool) -> list:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    beta = rng.standard_normal(features)
    names = [f"x{j}" for j in range(features)]
    schema = pa.schema([(n, pa.float64()) for n in [*names, "y"]])
    with pq.ParquetWriter(path, schema) as writer:
        a = 0
        while a < rows:
            n = min(rows - a, group_rows if not ragged else int(group_rows * rng.uniform(0.5, 1.5)))
            X = rng.standard_normal((n, features))
            columns = {name: X[:, j] for j, name in enumerate(names)}
            columns["y"] = X @ beta + rng.standard_normal(n)
            writer.write_table(pa.table(columns, schema=schema), row_group_size=n)
            a += n
    return names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", type=float, default=1.0, help="gigabytes of float64 in the table")
    p.add_argument("--dir", type=Path, default=Path("."))
    p.add_argument("--features", type=int, default=24)
    p.add_argument("--row-group", type=int, default=100_000)
    p.add_argument("--ragged", action="store_true", help="row groups of unequal rows")
    p.add_argument("--memory-limit", default="600MB")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", type=Path, default=Path("bench_tables.json"))
    args = p.parse_args()
    rows = int(args.gb * 1e9 / 8 / (args.features + 1))
    table = args.dir / "bench-table.parquet"
    store = args.dir / "bench-table.zarr"
    names = write_parquet(table, rows, args.features, args.row_group, args.ragged)
    runs = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        convert(str(table), store, client=client, overwrite=True, progress=False)
        for kind, data in (("parquet", str(table)), ("zarr", str(store))):
            for engine in ("sequential", "scan"):
                with WorkerPeak(client) as peak:
                    start = time.perf_counter()
                    fit_stream(data, engine=engine, x=names, y="y", sample_dim="row",
                               client=client, block_size=args.row_group, progress=False)
                    seconds = time.perf_counter() - start
                run = {"input": kind, "engine": engine, "rows": rows, "seconds": seconds,
                       "rows_per_second": rows / seconds, "peak_worker_mb": peak.peak / 1e6}
                print(json.dumps(run))
                runs.append(run)
    args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                     "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
