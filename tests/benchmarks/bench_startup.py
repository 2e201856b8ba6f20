#!/usr/bin/env python
"""Where a user waits: whole-process wall time of the command line, in one run.

Times, as separate processes (what a user waits for), round-robin over ``--repeat``
rounds, median and spread:

- ``streamlsq --help`` and ``streamlsq info STORE``;
- ``streamlsq fit kf4lls STORE`` on a ``--rows`` × ``--features`` store written by
  ``simulate`` (default 100,000 × 20), with the embedded cluster as chosen
  (``auto``: in-process workers for a store this small) and with worker processes
  forced (``DASK_STREAMLSQ__EMBEDDED_WORKERS=processes``, the cluster every command
  started before);
- the fit's compute alone: ``fit_stream`` in a warm process on a running cluster (the
  issue's target: the whole command within about this plus one second).

Also ``python -X importtime``'s total for ``import streamlsq.cli``. Writes JSON. Not
part of the test suite:

    python tests/benchmarks/bench_startup.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: the console script a user runs (``python -m streamlsq.cli`` when it is not on PATH)
EXE = [shutil.which("streamlsq")] if shutil.which("streamlsq") else [sys.executable, "-m",
                                                                     "streamlsq.cli"]


def timed(cmd, env=None, cwd=None) -> float:
    t = time.perf_counter()
    run = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    sec = time.perf_counter() - t
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {run.stderr[-2000:]}")
    return sec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default="bench_startup.json")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        store = Path(tmp) / "small.zarr"
        subprocess.run([*EXE, "simulate", "stream", "--out", str(store), "--rows",
                        str(args.rows), "--features", str(args.features), "--seed", "1"],
                       check=True, capture_output=True)
        env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
        procs = {**env, "DASK_STREAMLSQ__EMBEDDED_WORKERS": "processes"}
        out = Path(tmp) / "fit.zarr"

        def fit(environment):
            def run():
                shutil.rmtree(out, ignore_errors=True)
                return timed([*EXE, "fit", "kf4lls", str(store), "--out", str(out)],
                             environment)
            return run

        cases = {
            "streamlsq --help": lambda: timed([*EXE, "--help"], env),
            "streamlsq info STORE": lambda: timed([*EXE, "info", str(store)], env),
            "streamlsq fit kf4lls STORE (auto: in-process workers)": fit(env),
            "streamlsq fit kf4lls STORE (worker processes forced)": fit(procs),
        }
        runs = {name: [] for name in cases}
        runs["fit_stream compute alone (warm process, running cluster)"] = []
        from distributed import Client, LocalCluster

        from streamlsq import fit_stream

        with LocalCluster(processes=False, dashboard_address=":0",
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            fit_stream(store, "kf4lls", client=client, progress=False)  # warm
            for _ in range(args.repeat):
                for name, fn in cases.items():
                    runs[name].append(fn())
                t = time.perf_counter()
                fit_stream(store, "kf4lls", client=client, progress=False)
                runs["fit_stream compute alone (warm process, running cluster)"].append(
                    time.perf_counter() - t)
        imp = subprocess.run([sys.executable, "-X", "importtime", "-c", "import streamlsq.cli"],
                             capture_output=True, text=True).stderr.strip().split("\n")[-1]
        import_s = int(imp.split("|")[1]) / 1e6
    load = os.getloadavg()
    print(f"store: {args.rows} x {args.features}; {args.repeat} round-robin rounds; load "
          f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print(f"{'command (whole process)':<60}{'median s':>10}{'spread':>16}")
    table = {}
    for name, secs in runs.items():
        s = np.array(secs)
        table[name] = {"median": float(np.median(s)), "min": float(s.min()),
                       "max": float(s.max()), "seconds": secs}
        print(f"{name:<60}{np.median(s):>10.2f}{f'{s.min():.2f}-{s.max():.2f}':>16}")
    print(f"\nimport streamlsq.cli: {import_s:.3f} s (python -X importtime, cumulative)")
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average": load, "import_cli_s": import_s,
                   "results": table}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
