#!/usr/bin/env python
"""The grid that chose metalearn's defaults (linkage, splits L, whitening), and the
success rate of ``k="auto"``.

Grid (``--part grid``): for every feature kind of ``simulate mlr --features``
(isotropic ``gaussian``; non-isotropic ``chebyshev`` and ``polynomial`` of a
scalar input) and every seed, one training store and one test store of new
tasks from the same mixture; Algorithm 1 with every combination of linkage
(single, average), L (1, 3) and whitening (off, on), scored by the heavy-task
clustering accuracy, the coefficient error against the truth and the held-out
MSE of posterior-mean prediction on the test tasks (``predict --holdout``).
Prints one table row per setting and method (mean and min–max over the seeds)
and a summary per method over all settings; writes everything as JSON.

k auto (``--part kauto``): ``simulate mlr`` stores with k = 2..8 orthonormal
components in d = 8 (Δ = √2, s = 1) and ``--seeds`` seeds each; counts how
often ``metalearn(k="auto")`` finds the true k.

    python tests/benchmarks/bench_mlr_defaults.py --part grid --seeds 0 1 2 --out grid.json
    python tests/benchmarks/bench_mlr_defaults.py --part kauto --seeds 0 1 2 3 4 5 6 7 8 9

Every store is a function of its seed, so each row can be reproduced from one
``streamlsq simulate mlr`` command (printed with ``--commands``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster

from streamlsq import metalearn, predict, simulate_mlr

FEATURES = ("gaussian", "chebyshev", "polynomial")
METHODS = [dict(linkage=lk, splits=L, whiten=w)
           for lk, L, w in itertools.product(("single", "average"), (1, 3), (False, True))]


def grid(args, client, tmp: Path) -> list[dict]:
    rows = []
    for features, seed in itertools.product(args.features, args.seeds):
        sim = dict(k=args.k, d=args.d, noise=args.noise, features=features, seed=seed)
        train, test = tmp / f"{features}-{seed}.zarr", tmp / f"{features}-{seed}-test.zarr"
        sizes = dict(n_light=args.n_light, t_light=4, n_heavy=args.n_heavy,
                     t_heavy=args.t_heavy, n_light2=args.n_light2, t_light2=args.t_light2)
        if args.commands:
            print("# streamlsq simulate mlr --out train.zarr " + " ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in {**sim, **sizes}.items()))
        simulate_mlr(train, **sim, **sizes, client=client, progress=False, overwrite=True)
        simulate_mlr(test, **sim, n_light=0, n_heavy=0, n_light2=2_000,
                     t_light2=args.test_rows + 10, task_seed=1000 + seed, client=client,
                     progress=False, overwrite=True)
        for method in METHODS:
            started = time.perf_counter()
            m = metalearn(train, args.k, out=tmp / "m.zarr", overwrite=True, client=client,
                          progress=False, **method)
            pred = predict(tmp / "m.zarr", test, holdout=10, client=client, progress=False)
            rows.append({"features": features, "seed": seed, **method,
                         "heavy_accuracy": m.attrs["heavy_accuracy"],
                         "coef_error": m.attrs["coef_error"],
                         "heldout_mse": pred.attrs["holdout_mse"],
                         "seconds": time.perf_counter() - started})
    return rows


def summarise(rows: list[dict]) -> None:
    def key(r):
        return (r["linkage"], r["splits"], r["whiten"])

    print(f"{'features':<11} {'linkage':<8} {'L':>2} {'whiten':<6} {'heavy acc':>19} "
          f"{'coef err':>19} {'held-out MSE':>19}")
    for features in dict.fromkeys(r["features"] for r in rows):
        for method in dict.fromkeys(key(r) for r in rows):
            sel = [r for r in rows if r["features"] == features and key(r) == method]
            cells = []
            for name in ("heavy_accuracy", "coef_error", "heldout_mse"):
                v = np.array([r[name] for r in sel])
                cells.append(f"{v.mean():6.3f} [{v.min():.3f},{v.max():.3f}]")
            print(f"{features:<11} {method[0]:<8} {method[1]:>2} {method[2]!s:<6} "
                  + " ".join(f"{c:>19}" for c in cells))
    print("\nover all settings (mean of the per-setting means; rank of held-out MSE per store)")
    stores = {(r["features"], r["seed"]) for r in rows}
    for method in dict.fromkeys(key(r) for r in rows):
        sel = [r for r in rows if key(r) == method]
        ranks = []
        for store in stores:
            here = sorted((r["heldout_mse"], key(r)) for r in rows
                          if (r["features"], r["seed"]) == store)
            ranks.append([m for _, m in here].index(method) + 1)
        print(f"{method[0]:<8} L={method[1]} whiten={method[2]!s:<5} heavy acc "
              f"{np.mean([r['heavy_accuracy'] for r in sel]):.3f}  coef err "
              f"{np.mean([r['coef_error'] for r in sel]):.3f}  held-out MSE "
              f"{np.mean([r['heldout_mse'] for r in sel]):.4f}  mean rank {np.mean(ranks):.2f}")


def kauto(args, client, tmp: Path) -> list[dict]:
    rows = []
    print(f"{'k':>2} {'found':>6} {'chosen k per seed'}")
    for k in args.k_values:
        chosen = []
        for seed in args.seeds:
            path = tmp / f"k{k}-{seed}.zarr"
            simulate_mlr(path, k=k, d=8, seed=seed, n_light=args.n_light, t_light=4,
                         n_heavy=args.n_heavy, t_heavy=args.t_heavy, n_light2=args.n_light2,
                         t_light2=args.t_light2, client=client, progress=False, overwrite=True)
            m = metalearn(path, "auto", client=client, progress=False)
            chosen.append(int(m.attrs["k_chosen"]))
            rows.append({"k": k, "seed": seed, "k_chosen": chosen[-1],
                         "k_loglik": m.k_loglik.values.tolist(),
                         "k_loglik_se": m.k_loglik_se.values.tolist()})
        print(f"{k:>2} {sum(c == k for c in chosen):>3}/{len(chosen):<2} {chosen}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=["grid", "kauto"], default="grid")
    p.add_argument("--features", nargs="+", default=list(FEATURES), choices=FEATURES)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--k-values", type=int, nargs="+", default=list(range(2, 9)))
    p.add_argument("--d", type=int, default=6)
    p.add_argument("--noise", type=float, default=0.3)
    p.add_argument("--n-light", type=int, default=20_000)
    p.add_argument("--n-heavy", type=int, default=200)
    p.add_argument("--t-heavy", type=int, default=60)
    p.add_argument("--n-light2", type=int, default=4_000)
    p.add_argument("--t-light2", type=int, default=10)
    p.add_argument("--test-rows", type=int, default=5, help="rows a test task is fitted on")
    p.add_argument("--commands", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="JSON file of every row")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR
    ) as cluster, Client(cluster) as client:
        print(f"# {vars(args)}")
        if args.part == "grid":
            rows = grid(args, client, Path(tmp))
            summarise(rows)
        else:
            rows = kauto(args, client, Path(tmp))
    if args.out is not None:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                        "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
