#!/usr/bin/env python
"""glibc's allocator settings for Dask worker processes, measured side by side in one run.

distributed's nanny starts every worker process with the variables of the dask config
``distributed.nanny.pre-spawn-environ`` (by default ``MALLOC_TRIM_THRESHOLD_=65536``).
Setting any ``MALLOC_TRIM_THRESHOLD_`` stops glibc from raising its mmap threshold as a
program frees large buffers, so every buffer above 128 KiB is mapped, faulted in and
unmapped again: each decoded chunk pays for fresh pages. This script measures, for each
candidate setting (``--settings``, each a set of environment variables):

- **decode, plain loop**: one spawned process (started with exactly those variables,
  one BLAS thread) reads and decodes every chunk of X and y with zarr alone, in order;
- **decode, reading block**: the same loop inside
  :func:`streamlsq.runtime.memory.fast_large_allocations`, as the engines' reading tasks
  run;
- **fit**: a warm ``fit_stream`` (KF4LLS, scan engine, QR and normal solvers) on a
  LocalCluster of ``--workers`` worker processes started with those variables through
  ``distributed.nanny.pre-spawn-environ``, and each worker's resident memory after the fit.

Every setting's clusters live through the whole run and the runs go round-robin over
``--repeat`` rounds, so that the machine's load falls on all alike; prints rows/s medians
with their spread (min–max) and the load average before and after:

    python tests/benchmarks/bench_allocator.py --store s.zarr --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

MIB = 2**20

#: the candidates: name -> environment variables of the worker processes (None: unset)
SETTINGS = {
    "distributed default (trim 64 KiB)": {"MALLOC_TRIM_THRESHOLD_": 65536},
    "glibc default (none set)": {"MALLOC_TRIM_THRESHOLD_": None},
    "mmap 64 MiB + trim 128 MiB": {"MALLOC_MMAP_THRESHOLD_": 64 * MIB,
                                   "MALLOC_TRIM_THRESHOLD_": 128 * MIB},
    "trim 128 MiB only": {"MALLOC_TRIM_THRESHOLD_": 128 * MIB},
}

_LOOP = r"""
import sys, time, contextlib
import zarr
path, reading_block = sys.argv[1], sys.argv[2] == "1"
if reading_block:
    from streamlsq.runtime.memory import fast_large_allocations as block
else:
    block = contextlib.nullcontext
g = zarr.open_group(path, mode="r")
X, y = g["X"], g["y"]
n, c = X.shape[0], X.chunks[0]
with block():
    for a in range(0, n, c):  # warm: imports, the page cache
        X[a:a + c]; y[a:a + c]
t = time.perf_counter()
with block():
    for a in range(0, n, c):
        X[a:a + c]; y[a:a + c]
print(n / (time.perf_counter() - t))
"""

_MALLOC = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
           "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")


def _environ(variables: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _MALLOC}
    env.update({k: str(v) for k, v in variables.items() if v is not None})
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def decode_rate(store: Path, variables: dict, reading_block: bool) -> float:
    """Rows/s of one plain process decoding every chunk in order, started with
    ``variables``."""
    out = subprocess.run([sys.executable, "-c", _LOOP, str(store), "1" if reading_block else "0"],
                         env=_environ(variables), capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def start_cluster(variables: dict, workers: int):
    import dask
    from distributed import Client, LocalCluster

    saved = dict(os.environ)
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    environ.update(variables)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
    # the nanny writes its variables into this process's environment, where the next
    # cluster's nanny would read them over its own config: put it back as it was
    os.environ.clear()
    os.environ.update(saved)
    client = Client(cluster, set_as_default=False)
    seen = client.run(lambda: {k: os.environ.get(k) for k in _MALLOC[:2]})
    return cluster, client, seen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True, help="a stream store (simulate stream)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--settings", default=None,
                   help="comma-separated parts of the names of the settings to keep")
    p.add_argument("--no-fit", action="store_true", help="only the decoding loops")
    p.add_argument("--json", default="bench_allocator.json")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    settings = {k: v for k, v in SETTINGS.items()
                if not args.settings or any(s.strip() in k for s in args.settings.split(","))}
    load_before = os.getloadavg()

    from streamlsq import fit_stream, open_stream

    n = open_stream(args.store).n_rows
    clusters = {}
    if not args.no_fit:
        for name, variables in settings.items():
            clusters[name] = start_cluster(variables, args.workers)
            print(f"{name}: workers see {clusters[name][2]}")
    runs: dict[str, dict[str, list]] = {name: {} for name in settings}

    def fit(client, solver):
        t = time.perf_counter()
        fit_stream(args.store, "kf4lls", engine="scan", solver=solver, client=client,
                   progress=False)
        return n / (time.perf_counter() - t)

    for _, client, _ in clusters.values():  # warm: imports, numba caches
        fit(client, "qr")
        fit(client, "normal")
    for i in range(args.repeat):
        print(f"round {i + 1} of {args.repeat}, load average {os.getloadavg()[0]:.2f}",
              flush=True)
        for name, variables in settings.items():
            r = runs[name]
            r.setdefault("decode, plain loop", []).append(decode_rate(args.store, variables, False))
            r.setdefault("decode, reading block", []).append(
                decode_rate(args.store, variables, True))
            if name in clusters:
                client = clusters[name][1]
                r.setdefault("fit scan qr", []).append(fit(client, "qr"))
                r.setdefault("fit scan normal", []).append(fit(client, "normal"))
                r.setdefault("worker RSS MB after", []).extend(
                    v / 1e6 for v in client.run(_rss).values())
    load_after = os.getloadavg()
    for _, client, _ in clusters.values():
        cluster = client.cluster
        client.close()
        cluster.close()

    print(f"\n{n} rows; {args.repeat} round-robin rounds; load average before "
          f"{' '.join(f'{x:.2f}' for x in load_before)}, after "
          f"{' '.join(f'{x:.2f}' for x in load_after)}; median (min-max)\n")
    columns = sorted({c for r in runs.values() for c in r}, key=lambda c: (c.startswith("w"), c))
    print(f"{'setting':<36}" + "".join(f"{c:>34}" for c in columns))
    for name, r in runs.items():
        cells = []
        for c in columns:
            v = r.get(c)
            if not v:
                cells.append(f"{'-':>34}")
                continue
            fmt = ".0f" if c.startswith("w") else ".3g"
            cells.append(f"{f'{statistics.median(v):{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})':>34}")
        print(f"{name:<36}" + "".join(cells))
    with open(args.json, "w") as f:
        json.dump({"store": str(args.store), "rows": n, "workers": args.workers,
                   "load_average_before": load_before, "load_average_after": load_after,
                   "settings": {k: {kk: str(vv) for kk, vv in v.items()}
                                for k, v in settings.items()}, "runs": runs}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
