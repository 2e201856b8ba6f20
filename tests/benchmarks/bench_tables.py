#!/usr/bin/env python
"""Tables out of core: a fit of a Parquet file and of a CSV file of the same rows, side by
side with the same rows converted to a stream store (``streamlsq convert``), and how many
times each part of a table is read, with the read path before and after in one run.

Writes a Parquet file of ``--rows`` rows of float64 (``--features`` columns and a target y,
row groups of ``--row-group`` rows, unequal when ``--ragged``: then the virtual chunks of the
reader straddle row groups), a CSV file of the same rows (read in byte ranges of 64 MB: its
parts are unequal, so chunks straddle them) and the store ``streamlsq.convert`` writes from
the Parquet file. On one LocalCluster of ``--workers`` worker processes limited to
``--memory-limit`` each, fits each input with KF4LLS on both engines, ``--repeat`` rounds
round-robin (every input sees the same load), and prints for each:

- rows/s: the median and the spread (min–max) over the rounds, and its ratio to the store's
  on the same engine;
- the peak resident memory of the largest single worker (psutil, every 0.05 s), over the
  rounds;
- **reads/part**: the reads of parts of the table on the workers (a Parquet row group
  decoded, a CSV byte range parsed; counted in ``TableRows._read_part``, one run at a time)
  over its parts, and the columns each read took. Read once for all the fit's columns, a
  part is 1.00 read of 25 columns (a part two scan pieces share, on two workers, is read on
  each: a little above 1).
- ``--before`` adds each table read the two ways it was before, in the same rounds, made so
  on the workers: ``per column``, each column of a part read on its own by every chunk that
  overlaps the part (``TableRows.reading`` a no-op and nothing shared between reads: 4 reads
  of each part for 3 features and a target); ``per chunk``, each chunk reading the parts it
  overlaps once for all its columns but sharing nothing with the next chunk (a part two
  chunks straddle read by both).

The coefficients of every recorded step of every run are compared with those of the first
input on the same engine (max relative difference: 0 when they are equal bit for bit).
Prints the load average before and after; writes JSON. Not part of the test suite:

    python tests/benchmarks/bench_tables.py --rows 200000 --repeat 3 --before --dir /tmp
    python tests/benchmarks/bench_tables.py --rows 3200000 --memory-limit 600MB --ragged
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path

import numpy as np
from _memory import WorkerPeak
from distributed import Client, LocalCluster

from streamlsq import convert, fit_stream

#: the read paths a table is fitted with: the one of the package, and the two before it
PATHS = ("", "per column", "per chunk")


def write_tables(parquet: Path, csv: Path, rows: int, features: int, group_rows: int,
                 ragged: bool) -> list:
    """The Parquet file, row group by row group, and the CSV file of the same rows."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    beta = rng.standard_normal(features)
    names = [f"x{j}" for j in range(features)]
    schema = pa.schema([(n, pa.float64()) for n in [*names, "y"]])
    with pq.ParquetWriter(parquet, schema) as writer, pacsv.CSVWriter(csv, schema) as text:
        a = 0
        while a < rows:
            n = min(rows - a, group_rows if not ragged else int(group_rows * rng.uniform(0.5, 1.5)))
            X = rng.standard_normal((n, features))
            columns = {name: X[:, j] for j, name in enumerate(names)}
            columns["y"] = X @ beta + rng.standard_normal(n)
            table = pa.table(columns, schema=schema)
            writer.write_table(table, row_group_size=n)
            text.write_table(table)
            a += n
    return names


def _count_part_reads(path: str) -> None:
    """In a worker: count the parts of tables read, and the columns each read took, from
    now on, read the way ``path`` names (one of PATHS)."""
    import contextlib

    from streamlsq.io import tables

    rows = tables.TableRows
    if not hasattr(rows, "_bench_counts"):
        read, reading, read_part = rows._read_part, rows.reading, rows.read_part

        def counted(self, i, names):
            rows._bench_counts[0] += 1
            rows._bench_counts[1] += len(names)
            return read(self, i, names)

        rows._read_part = counted
        rows._bench_paths = (reading, read_part)
    reading, read_part = rows._bench_paths
    rows.reading = (lambda self, names, start, stop: contextlib.nullcontext()) \
        if path == "per column" else reading
    rows.read_part = (lambda self, i, names, lo=0, hi=None: self._read_part(i, list(names))) \
        if path else read_part
    rows._bench_counts = [0, 0]
    tables.forget_parts()  # every run reads its parts anew


def _part_reads() -> list:
    from streamlsq.io.tables import TableRows

    return getattr(TableRows, "_bench_counts", [0, 0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--features", type=int, default=24)
    p.add_argument("--row-group", type=int, default=100_000)
    p.add_argument("--ragged", action="store_true", help="row groups of unequal rows")
    p.add_argument("--memory-limit", default="2GB")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--before", action="store_true",
                   help="also each table read per column and per chunk (the reads before)")
    p.add_argument("--dir", type=Path, default=Path("."))
    p.add_argument("--json", type=Path, default=Path("bench_tables.json"))
    args = p.parse_args()
    parquet, csv = args.dir / "bench-table.parquet", args.dir / "bench-table.csv"
    store = args.dir / "bench-table.zarr"
    names = write_tables(parquet, csv, args.rows, args.features, args.row_group, args.ragged)
    load_before = os.getloadavg()
    from streamlsq.io.tables import open_table

    parts = {"parquet": len(open_table(str(parquet)).table_rows.parts),
             "csv": len(open_table(str(csv)).table_rows.parts)}
    inputs = [(f"{kind}, {path}" if path else kind, kind, path)
              for kind in ("parquet", "csv") for path in (PATHS if args.before else ("",))]
    inputs.append(("zarr", "zarr", ""))
    paths = {"parquet": str(parquet), "csv": str(csv), "zarr": str(store)}
    runs = {(label, engine): {"seconds": [], "peak": 0, "reads": None, "columns": None,
                              "coef": None}
            for label, _, _ in inputs for engine in ("sequential", "scan")}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        convert(str(parquet), store, client=client, overwrite=True, progress=False)
        for _ in range(args.repeat):  # round-robin: every input sees the same load
            for label, kind, path in inputs:
                for engine in ("sequential", "scan"):
                    client.run(_count_part_reads, path)
                    with WorkerPeak(client) as peak:
                        start = time.perf_counter()
                        ds = fit_stream(paths[kind], engine=engine, x=names, y="y",
                                        sample_dim="row", client=client,
                                        block_size=args.row_group, progress=False)
                        seconds = time.perf_counter() - start
                    run = runs[(label, engine)]
                    run["seconds"].append(seconds)
                    run["peak"] = max(run["peak"], peak.peak)
                    counts = np.sum(list(client.run(_part_reads).values()), axis=0)
                    if kind != "zarr":
                        run["reads"], run["columns"] = int(counts[0]), int(counts[1])
                    run["coef"] = ds.coef.values
        client.run(_count_part_reads, "")
    load_after = os.getloadavg()
    first = {engine: runs[(inputs[0][0], engine)]["coef"] for engine in ("sequential", "scan")}
    print(f"{args.rows} rows x {args.features + 1} float64 columns (row groups of "
          f"{args.row_group}{', ragged' if args.ragged else ''}; Parquet {parts['parquet']} "
          f"parts, CSV {parts['csv']} parts); {args.workers} workers x 1 thread of "
          f"{args.memory_limit}; {args.repeat} rounds")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}")
    head = (f"{'input':<22}{'engine':<12}{'rows/s':>11}{'spread':>21}{'vs zarr':>9}"
            f"{'peak MB':>9}{'reads/part':>12}{'cols/read':>11}{'coef diff':>11}")
    print(head)
    out = []
    for (label, engine), run in runs.items():
        rates = [args.rows / s for s in run["seconds"]]
        median = statistics.median(rates)
        zarr = statistics.median(args.rows / s for s in runs[("zarr", engine)]["seconds"])
        kind = label.split(",")[0]
        reads = None if run["reads"] is None else run["reads"] / parts[kind]
        columns = None if not run["reads"] else run["columns"] / run["reads"]
        # every recorded step of the trajectory, against the first input's on the same
        # engine (the two engines' sums differ by rounding)
        ref = first[engine]
        diff = float(np.abs(run["coef"] - ref).max() / np.abs(ref).max())
        row = {"input": label, "engine": engine, "rows": args.rows, "rows_per_s": median,
               "spread": [min(rates), max(rates)], "vs_zarr": median / zarr,
               "peak_worker_mb": run["peak"] / 1e6, "parts": parts.get(kind),
               "part_reads": run["reads"], "reads_per_part": reads,
               "columns_per_read": columns, "coef_rel_diff": diff,
               "coef_equal_to_bit": bool(np.array_equal(run["coef"], ref))}
        out.append(row)
        print(f"{label:<22}{engine:<12}{median:>11.3e}"
              f"{f'{min(rates):.3e}–{max(rates):.3e}':>21}{median / zarr:>9.2f}"
              f"{run['peak'] / 1e6:>9.0f}{'' if reads is None else f'{reads:.2f}':>12}"
              f"{'' if columns is None else f'{columns:.1f}':>11}{diff:>11.1e}")
    args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                     "load_before": load_before, "load_after": load_after,
                                     "runs": out}, indent=1))


if __name__ == "__main__":
    main()
