#!/usr/bin/env python
"""Meta-learning on the real multilevel examples with the defaults: held-out error of the
mixture's predictions against per-task least squares and one pooled regression.

For each dataset (``streamlsq example exam|hsb82|radon``: schools or counties as
tasks) and each shuffle seed: the store is converted with ``--min-rows`` (each
task must keep rows after the held-out ones), the last ``--holdout`` rows of
every task are held out, and ``metalearn`` runs with its defaults (k chosen by
held-out likelihood, roles by the task-size rule, default linkage, L and
whitening); then ``predict`` scores the held-out rows with the posterior mean
(bayes), MAP, per-task least squares and the pooled regression
(``fit_pooled``). With ``--variants`` the same is done for the alternatives of
the defaults (whitening on, single linkage, L = 3), to check the defaults on
real data as well. Prints, per dataset, the mean held-out MSE and its min–max
over the seeds, the k chosen, the heavy threshold and the flagged clusters.

    python tests/benchmarks/real_data.py                      # all three, seeds 0 1 2
    python tests/benchmarks/real_data.py --dataset hsb82 --variants --out real.json
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster

from streamlsq import example_tasks, fit_pooled, metalearn, predict

VARIANTS = {"defaults": {}, "whiten": {"whiten": True}, "single linkage": {"linkage": "single"},
            "L = 3": {"splits": 3}}


def run_dataset(name, args, client, tmp: Path) -> list[dict]:
    rows = []
    variants = VARIANTS if args.variants else {"defaults": {}}
    for seed in args.seeds:
        data = tmp / f"{name}-{seed}.zarr"
        _, info = example_tasks(name, data, min_rows=args.min_rows, seed=seed, overwrite=True)
        if seed == args.seeds[0]:
            print(f"\n## {name}: {info['n_tasks']} tasks, {info['n_rows']} rows, features "
                  f"{info['features']}, target {info['target']}; tasks with >= {args.min_rows} "
                  f"rows, the last {args.holdout} of each held out; shuffle seeds {args.seeds}")
        fit_pooled(data, out=tmp / "pooled.zarr", holdout=args.holdout, client=client,
                   progress=False, overwrite=True)
        for variant, options in variants.items():
            model = tmp / f"m-{variant}.zarr"
            m = metalearn(data, out=model, holdout=args.holdout, client=client, progress=False,
                          overwrite=True, **options)
            runs = [("bayes", model, "bayes"), ("map", model, "map")]
            if variant == "defaults":
                runs += [("per-task lstsq", model, "lstsq"),
                         ("pooled", tmp / "pooled.zarr", "bayes")]
            for label, path, estimator in runs:
                ds = predict(path, data, estimator=estimator, holdout=args.holdout,
                             client=client, progress=False)
                rows.append({"dataset": name, "seed": seed, "variant": variant,
                             "estimator": label, "mse": ds.attrs["holdout_mse"],
                             "k": int(m.attrs["n_clusters"]),
                             "heavy_rows": int(m.attrs["heavy_rows"]),
                             "n_heavy": int(m.attrs["n_heavy"]),
                             "fallback": m.attrs.get("fallback_clusters", "")})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'variant':<15} {'estimator':<15} {'held-out MSE':>12} {'[min, max]':>18} "
          f"{'k per seed':>12}")
    keys = dict.fromkeys((r["variant"], r["estimator"]) for r in rows)
    for variant, estimator in keys:
        sel = [r for r in rows if (r["variant"], r["estimator"]) == (variant, estimator)]
        v = np.array([r["mse"] for r in sel])
        ks = [r["k"] for r in sel] if estimator in ("bayes", "map") else ["-"]
        print(f"{variant:<15} {estimator:<15} {v.mean():>12.4f} "
              f"{f'[{v.min():.4f}, {v.max():.4f}]':>18} {str(ks):>12}")
    base = [r for r in rows if r["variant"] == "defaults" and r["estimator"] == "bayes"]
    print("heavy rows (rule) per seed: " + ", ".join(
        f"{r['heavy_rows']} ({r['n_heavy']} tasks)" for r in base))
    flagged = [f"seed {r['seed']}: {r['fallback']}" for r in base if r["fallback"]]
    print("flagged clusters: " + ("; ".join(flagged) if flagged else "none"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", nargs="+", default=["exam", "hsb82", "radon"],
                   choices=["exam", "hsb82", "radon"])
    p.add_argument("--holdout", type=int, default=2)
    p.add_argument("--min-rows", type=int, default=4)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", action="store_true",
                   help="also run the alternatives of the defaults")
    p.add_argument("--out", type=Path, default=None, help="JSON file of every row")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR
    ) as cluster, Client(cluster) as client:
        for name in args.dataset:
            here = run_dataset(name, args, client, Path(tmp))
            print_table(here)
            rows += here
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
