#!/usr/bin/env python
"""Meta-learning at scale: simulate ≥ 10⁶ light tasks and run the whole pipeline on a
LocalCluster of 2 workers limited to 2 GB each, printing the wall time of every step and
the peak memory.

Steps: ``simulate mlr`` (chunk-parallel), ``metalearn`` (its own steps are timed
inside: whitening, subspace, heavy estimates, clustering, initial estimates,
classification + refinement), ``predict`` over every task with held-out rows,
and a few EM iterations (statistics recomputed per iteration when they do not
fit the cache budget). Peak memory: distributed's MemorySampler (sum of the
workers' process RSS, sampled every 0.1 s) and the largest single worker RSS
(psutil, every 0.05 s), per step; plus the client's own peak RSS.

    python tests/benchmarks/bench_metalearn.py --n-light 1000000 --out /tmp/bench-mlr
"""

from __future__ import annotations

import argparse
import logging
import resource
import shutil
import time
from pathlib import Path

from _memory import WorkerPeak
from distributed import Client, LocalCluster
from distributed.diagnostics import MemorySampler

from streamlsq import fit_em, metalearn, predict, simulate_mlr


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-mlr"))
    p.add_argument("--n-light", type=int, default=1_000_000)
    p.add_argument("--t-light", type=int, default=4)
    p.add_argument("--n-heavy", type=int, default=2_000)
    p.add_argument("--t-heavy", type=int, default=200)
    p.add_argument("--n-light2", type=int, default=1_000_000)
    p.add_argument("--t-light2", type=int, default=6)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--em-iterations", type=int, default=3)
    p.add_argument("--memory-limit", default="2GB")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data, model = args.out / "tasks.zarr", args.out / "model.zarr"
    pred, em = args.out / "pred.zarr", args.out / "em.zarr"
    for path in (data, model, pred, em):
        shutil.rmtree(path, ignore_errors=True)
    rows = (args.n_light * args.t_light + args.n_heavy * args.t_heavy
            + args.n_light2 * args.t_light2)
    print(f"{args.n_light} light x {args.t_light}, {args.n_heavy} heavy x {args.t_heavy}, "
          f"{args.n_light2} light2 x {args.t_light2}: {rows} rows, "
          f"{rows * (args.d + 1) * 8 / 1e9:.2f} GB of X and y; k = {args.k}, d = {args.d}; "
          f"{args.workers} workers limited to {args.memory_limit} each", flush=True)
    timings = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        sampler = MemorySampler()

        def step(name, fn):
            with sampler.sample(name, interval=0.1), WorkerPeak(client) as wp:
                t = time.perf_counter()
                result = fn()
                sec = time.perf_counter() - t
            timings.append((name, sec, wp.peak))
            print(f"  {name}: {sec:.1f} s", flush=True)
            return result

        step("simulate mlr", lambda: simulate_mlr(
            data, k=args.k, d=args.d, n_light=args.n_light, t_light=args.t_light,
            n_heavy=args.n_heavy, t_heavy=args.t_heavy, n_light2=args.n_light2,
            t_light2=args.t_light2, seed=1, client=client, progress=False))
        ds = step("metalearn --whiten", lambda: metalearn(
            data, args.k, out=model, whiten=True, client=client, progress=False))
        out = step("predict --holdout 2 (all tasks)", lambda: predict(
            model, data, out=pred, holdout=2, client=client, progress=False))
        fit = step(f"fit em ({args.em_iterations} iterations)", lambda: fit_em(
            data, args.k, out=em, init="perturbed", iterations=args.em_iterations,
            client=client, progress=False))
        peaks = sampler.to_pandas().max() / 2**20
    print("\nmetalearn steps (inside the run):")
    for key, value in ds.attrs.items():
        if key.startswith("seconds_"):
            print(f"  {key[8:]:<28}{value:>8.2f} s")
    print("\nmetalearn diagnostics: " + ", ".join(
        f"{k} {ds.attrs[k]:.4g}" for k in ("subspace_error", "heavy_accuracy",
                                            "classification_accuracy", "coef_error",
                                            "noise_error", "weight_error")))
    print(f"predict: held-out MSE {out.attrs['holdout_mse']:.4f} over "
          f"{out.attrs['holdout_rows']} rows")
    print(f"em: {fit.attrs['status']} after {fit.attrs['n_iterations']} iterations, "
          f"statistics cached: {fit.attrs['statistics_cached']}")
    print(f"\n{'step':<34}{'seconds':>9}{'cluster peak MiB':>18}{'worker peak MiB':>17}")
    for name, sec, peak in timings:
        print(f"{name:<34}{sec:>9.1f}{peaks[name]:>18.0f}{peak / 2**20:>17.0f}")
    client_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"client process peak RSS: {client_peak:.0f} MiB")


if __name__ == "__main__":
    main()
