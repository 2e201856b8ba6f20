#!/usr/bin/env python
"""The two solvers of KF4LLS side by side: accuracy at the numerical limit, speed through
the pipeline.

In one run, on one LocalCluster (2 workers x 1 thread):

1. κ sweep: 200,000 x 10 stores whose singular values are log-spaced from 1 to 1/κ
   (κ = 1e2 … 1e12, columns mixed by a random rotation, y = Xβ + 1e-3·noise); KF4LLS on
   both engines with both solvers; prints the relative error of the final coefficients
   to numpy.linalg.lstsq on the same rows (rcond 1e-15, no truncation) and that error
   in units of ε·κ (the QR form's bound is a small multiple; the normal equations lose
   ε·κ² and refuse the store from κ ≈ 1e8 on);
2. throughput: KF4LLS with ``--solver qr`` and ``--solver normal`` on both engines over
   one simulated store (``--rows`` x ``--features``), run round-robin ``--repeat`` times;
   prints median rows/s, the spread (min-max) and the ratio normal/qr, and the raw
   read of every chunk as the floor.

Writes everything as JSON with ``--json``. Not part of the test suite: run it by hand.

    python tests/benchmarks/bench_solvers.py --rows 2000000 --features 20 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from distributed import Client, LocalCluster

from streamlsq import InputError, fit_stream, simulate_stream

EPS = np.finfo(np.float64).eps


def kappa_store(path, kappa, n_rows=200_000, n=10, chunk=25_000, seed=0):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n_rows, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    X = (U * np.logspace(0, -np.log10(kappa), n)) @ V.T
    Y = X @ rng.standard_normal((n, 1)) + 1e-3 * rng.standard_normal((n_rows, 1))
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, arr, dims in (("X", X, ["sample", "feature"]), ("y", Y, ["sample", "target"])):
        a = g.create_array(name, shape=arr.shape, dtype=arr.dtype,
                           chunks=(chunk, arr.shape[1]), dimension_names=dims)
        a[...] = arr
    return X, Y


def kappa_sweep(client, tmp, kappas):
    rows = []
    print("\n1. kappa sweep, 200,000 x 10, blocks of 20,000 rows: relative error to lstsq "
          "(in units of eps*kappa)\n")
    print(f"{'kappa':>8}" + "".join(f"{e + ' ' + s:>26}" for e in ("sequential", "scan")
                                    for s in ("qr", "normal")))
    for kappa in kappas:
        path = Path(tmp) / f"k{kappa:.0e}.zarr"
        X, Y = kappa_store(path, kappa, seed=int(np.log10(kappa)))
        ref = np.linalg.lstsq(X, Y, rcond=1e-15)[0]
        line = f"{kappa:>8.0e}"
        for engine in ("sequential", "scan"):
            for solver in ("qr", "normal"):
                try:
                    ds = fit_stream(path, "kf4lls", engine=engine, solver=solver,
                                    block_size=20_000, client=client, progress=False)
                    err = float(np.linalg.norm(ds.coef.values[-1] - ref) / np.linalg.norm(ref))
                    rows.append({"kappa": kappa, "engine": engine, "solver": solver,
                                 "rel_error": err, "in_eps_kappa": err / (EPS * kappa),
                                 "digits_trusted": ds.attrs["digits_trusted"]})
                    line += f"{err:>14.1e} ({err / (EPS * kappa):>7.2g})  "
                except InputError as exc:
                    found = re.search(r"numerical rank \d+ of \d+|singular", str(exc))
                    rows.append({"kappa": kappa, "engine": engine, "solver": solver,
                                 "refused": str(exc)})
                    line += f"{'refused: ' + (found.group(0) if found else 'error'):>26}"
        print(line)
    return rows


def throughput(client, tmp, n_rows, n_features, repeat):
    store = Path(tmp) / "bench.zarr"
    simulate_stream(store, n_rows, n_features, 1, seed=0, client=client)
    from streamlsq import open_stream

    source = open_stream(store)
    edges = source.chunk_edges()

    def read(a, b):
        source.array("X")[a:b]
        source.array("y")[a:b]
        return b - a

    def raw_read():
        futs = [client.submit(read, int(a), int(b), pure=False)
                for a, b in zip(edges[:-1], edges[1:], strict=True)]
        assert sum(client.gather(futs)) == n_rows

    jobs = {"raw read (floor)": raw_read}
    for engine in ("sequential", "scan"):
        for solver in ("qr", "normal"):
            jobs[f"{engine} {solver}"] = (lambda e=engine, s=solver: fit_stream(
                store, "kf4lls", engine=e, solver=s, client=client, progress=False))
    for fn in jobs.values():  # warm up: compile, open the store
        fn()
    runs = {name: [] for name in jobs}
    for _ in range(repeat):  # round-robin: a change of load hits every run alike
        for name, fn in jobs.items():
            t = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t)
    print(f"\n2. throughput, {n_rows} x {n_features} store (chunks of {source.chunk_rows} "
          f"rows), KF4LLS, {repeat} runs each round-robin\n")
    print(f"{'run':<22}{'rows/s (median)':>17}{'spread min-max':>24}{'normal/qr':>11}")
    out = {}
    for name, secs in runs.items():
        med = float(np.median(secs))
        out[name] = {"seconds": secs, "rows_per_s": n_rows / med,
                     "rows_per_s_min": n_rows / max(secs), "rows_per_s_max": n_rows / min(secs)}
    for name, r in out.items():
        ratio = ""
        if name.endswith("normal"):
            qr = out[name.replace("normal", "qr")]["rows_per_s"]
            ratio = f"{r['rows_per_s'] / qr:.2f}"
            out[name]["normal_over_qr"] = r["rows_per_s"] / qr
        print(f"{name:<22}{r['rows_per_s']:>17.3e}"
              f"{r['rows_per_s_min']:>12.3e}-{r['rows_per_s_max']:.3e}{ratio:>11}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--kappas", type=float, nargs="*",
                   default=[1e2, 1e4, 1e6, 1e8, 1e10, 1e12])
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as tmp, LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.CRITICAL,
    ) as cluster, Client(cluster) as client:
        sweep = kappa_sweep(client, tmp, args.kappas)
        speed = throughput(client, tmp, args.rows, args.features, args.repeat)
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)},
                                         "kappa_sweep": sweep, "throughput": speed}, indent=1))


if __name__ == "__main__":
    main()
