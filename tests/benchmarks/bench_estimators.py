#!/usr/bin/env python
"""Overhead of the scikit-learn estimators over their kernels, in one run on the same data.

For each estimator (KF4LLS with both solvers, RLS, LMS) on one in-memory data set
(default 1,000,000 × 20, float64, one target), the rows/s of:

- the estimator: ``Estimator(...).fit(X, y)`` (validation, the kernel's fold, the fitted
  attributes);
- its kernel alone: ``kernel.init`` + ``kernel.fold`` on the arrays the estimator hands
  it (for KF4LLS/RLS with ``fit_intercept=True``: X with a leading column of ones, built
  before the clock starts);

and the ratio kernel-time / estimator-time (the target: the estimator within
1.5× of its kernel, i.e. a ratio ≥ 0.67). Round-robin over ``--repeat`` rounds (the
median and the spread are printed); the coefficients of both are compared. Writes JSON.

    python tests/benchmarks/bench_estimators.py
    python tests/benchmarks/bench_estimators.py --rows 200000 --repeat 7 --json est.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from streamlsq import KF4LLSRegressor, LMSRegressor, RLSRegressor
from streamlsq.kernels import KF4LLS, LMS, RLS


def cases(block):
    """(name, estimator factory, kernel factory, kernel sees a column of ones)."""
    return [
        ("KF4LLS qr", lambda: KF4LLSRegressor(block_size=block),
         lambda: KF4LLS(solver="qr"), True),
        ("KF4LLS normal", lambda: KF4LLSRegressor(block_size=block, solver="normal"),
         lambda: KF4LLS(solver="normal"), True),
        ("RLS 0.999", lambda: RLSRegressor(block_size=block, forgetting=0.999, ridge=1e-3),
         lambda: RLS(forgetting=0.999, ridge=1e-3), True),
        ("LMS", lambda: LMSRegressor(rate=0.001, block_size=block),
         lambda: LMS(rate=0.001), False),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--block-size", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default="bench_estimators.json")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    n, q = args.rows, args.features
    X = rng.standard_normal((n, q))
    y = X @ rng.standard_normal(q) + 0.5 + rng.standard_normal(n)
    X1 = np.hstack([np.ones((n, 1)), X])
    Y = y[:, None]
    edges = np.append(np.arange(0, n, args.block_size), n)

    runs = {name: {"estimator": [], "kernel": []} for name, *_ in cases(args.block_size)}
    coefs = {}
    for _name, est, ker, ones in cases(args.block_size):  # warm up: numba, caches
        est().fit(X[:20_000], y[:20_000])
        k = ker()
        k.fold(k.init(q + ones, 1), (X1 if ones else X)[:20_000], Y[:20_000],
               np.array([0, 20_000]), 1, 10**9)
    for _ in range(args.repeat):
        for name, est, ker, ones in cases(args.block_size):
            t = time.perf_counter()
            e = est().fit(X, y)
            runs[name]["estimator"].append(time.perf_counter() - t)
            k = ker()
            D = X1 if ones else X
            t = time.perf_counter()
            res = k.fold(k.init(q + ones, 1), D, Y, edges, 1, 10**9)
            W = np.asarray(k.coef(res.state))
            runs[name]["kernel"].append(time.perf_counter() - t)
            coefs[name] = float(np.max(np.abs(np.r_[e.intercept_, e.coef_] - W.ravel())))

    load = os.getloadavg()
    print(f"data: {n} x {q} float64 in memory, blocks of {args.block_size} rows; "
          f"{args.repeat} round-robin rounds; load average {load[0]:.2f} {load[1]:.2f}")
    print(f"\n{'estimator':<16}{'est rows/s':>12}{'kernel rows/s':>15}{'kernel/est':>12}"
          f"{'spread':>16}{'max|Δcoef|':>12}")
    table = []
    for name, r in runs.items():
        e, k = np.array(r["estimator"]), np.array(r["kernel"])
        ratios = k / e
        row = {"estimator": name, "estimator_rows_per_s": n / float(np.median(e)),
               "kernel_rows_per_s": n / float(np.median(k)),
               "ratio_median": float(np.median(ratios)), "ratio_min": float(ratios.min()),
               "ratio_max": float(ratios.max()), "max_coef_diff": coefs[name],
               "estimator_seconds": e.tolist(), "kernel_seconds": k.tolist()}
        table.append(row)
        print(f"{name:<16}{row['estimator_rows_per_s']:>12.3e}{row['kernel_rows_per_s']:>15.3e}"
              f"{row['ratio_median']:>12.2f}{f'{ratios.min():.2f}–{ratios.max():.2f}':>16}"
              f"{coefs[name]:>12.1e}")
    with open(args.json, "w") as f:
        json.dump({"rows": n, "features": q, "block_size": args.block_size,
                   "repeat": args.repeat, "load_average": load, "results": table}, f, indent=1)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
