#!/usr/bin/env python
"""Per-sample RLS with forgetting: streamlsq against the per-sample RLS peers, side by side.

In one run, on the same rows (Gaussian X, n × p, y = Xβ + 0.1·noise), g = 0.999 and a ridge
start H₀ = δI, prints for each implementation rows/s (median of ``--repeat`` runs and the
spread min–max), the ratio of streamlsq's rate to it, and the relative error of its final
coefficients against the float64 batch weighted least-squares fit of the same rows (row
weights g^(T−t), by numpy.linalg.lstsq on the rows whose weight is above 1e-30):

- streamlsq RLS kernel (``solver="qr"``: compiled Givens rotations, one row per step);
- streamlsq ``RLSRegressor`` (the scikit-learn estimator, same kernel);
- streamlsq ``fit_stream(..., "rls", block_size=1)`` through the Dask pipeline from a
  Zarr store (reading included) on a LocalCluster of 2 single-threaded workers;
- streamlsq RLS with ``solver="normal"`` (a Cholesky solve per row in Python: the path
  before the QR solver) on a prefix of the rows;
- polars-ols' ``rls`` (``half_life`` = ln ½ / ln g, mode ``coefficients``);
- padasip's ``FilterRLS`` (mu = g, eps = δ) on a prefix;
- statsmodels' ``RecursiveLS`` and river's ``BayesianLinearRegression``, which have no
  forgetting factor: run with g = 1 on a prefix, their error against lstsq on those rows
  (streamlsq with g = 1 on the same prefix is printed beside them).

Writes everything as JSON with ``--json``. Not part of the test suite: run it by hand.

    python tests/benchmarks/bench_rls_per_sample.py --rows 200000 --features 20 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np


def weighted_reference(X, Y, g):
    T = X.shape[0]
    keep = min(T, int(math.ceil(math.log(1e-30) / math.log(g))) if g < 1 else T)
    w = np.sqrt(g ** np.arange(keep - 1, -1, -1))[:, None]
    return np.linalg.lstsq(X[-keep:] * w, Y[-keep:] * w, rcond=None)[0]


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a).reshape(b.shape) - b) / np.linalg.norm(b))


class RoundRobin:
    """Runs every registered implementation once per round, ``repeat`` rounds: on a shared
    machine a change of load then hits every implementation alike."""

    def __init__(self):
        self.jobs = {}

    def add(self, name, fn, finish):
        self.jobs[name] = (fn, finish)

    def run(self, repeat):
        runs = {name: [] for name in self.jobs}
        outs = {}
        for _ in range(repeat):
            for name, (fn, _) in self.jobs.items():
                t = time.perf_counter()
                outs[name] = fn()
                runs[name].append(time.perf_counter() - t)
        for name, (_, finish) in self.jobs.items():
            finish(runs[name], outs[name])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--forgetting", type=float, default=0.999)
    p.add_argument("--ridge", type=float, default=1e-3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--prefix", type=int, default=20_000,
                   help="rows for the slow peers (padasip, statsmodels, river, normal form)")
    p.add_argument("--no-pipeline", action="store_true", help="skip the fit_stream run")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    N, n, g, delta = args.rows, args.features, args.forgetting, args.ridge
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, n))
    Y = X @ rng.standard_normal((n, 1)) + 0.1 * rng.standard_normal((N, 1))
    y = Y[:, 0]
    M = min(args.prefix, N)
    ref = weighted_reference(X, Y, g)
    ref_prefix = weighted_reference(X[:M], Y[:M], g)
    ref_prefix_g1 = np.linalg.lstsq(X[:M], Y[:M], rcond=None)[0]
    results = {}

    def record(name, rows, runs, coef, reference, note=""):
        med = float(np.median(runs))
        results[name] = {"rows": rows, "seconds": runs, "rows_per_s": rows / med,
                         "rows_per_s_min": rows / max(runs), "rows_per_s_max": rows / min(runs),
                         "coef_rel_error": rel(coef, reference), "note": note}

    from streamlsq import RLSRegressor
    from streamlsq.kernels import RLS, block_edges

    rr = RoundRobin()
    rec = RLS(forgetting=g, ridge=delta)
    edges = block_edges(N, 1)
    rec.fold(rec.init(n, 1), X[:100], Y[:100], edges[:101], 1, 10**9)  # compile once
    rr.add("streamlsq RLS kernel (qr)",
           lambda: rec.fold(rec.init(n, 1), X, Y, edges, 1, 10**9),
           lambda runs, res: record("streamlsq RLS kernel (qr)", N, runs, res.state["psi"], ref))

    est = RLSRegressor(forgetting=g, ridge=delta, fit_intercept=False)
    rr.add("streamlsq RLSRegressor", lambda: est.fit(X, y),
           lambda runs, fitted: record("streamlsq RLSRegressor", N, runs, fitted.coef_, ref))

    normal = RLS(forgetting=g, ridge=delta, solver="normal")
    rr.add("streamlsq RLS kernel (normal)",
           lambda: normal.fold(normal.init(n, 1), X[:M], Y[:M], edges[:M + 1], 1, 10**9),
           lambda runs, res: record("streamlsq RLS kernel (normal)", M, runs,
                                    res.state["psi"], ref_prefix, f"first {M} rows"))

    if not args.no_pipeline:
        from distributed import Client, LocalCluster

        from streamlsq import fit_stream

        with tempfile.TemporaryDirectory(dir=".") as tmp, LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster, Client(cluster) as client:
            import zarr
            g_ = zarr.open_group(f"{tmp}/d.zarr", mode="w", zarr_format=3)
            for name, arr, dims in (("X", X, ["sample", "feature"]),
                                    ("y", Y, ["sample", "target"])):
                a = g_.create_array(name, shape=arr.shape, dtype=arr.dtype,
                                    chunks=(50_000, arr.shape[1]), dimension_names=dims)
                a[...] = arr
            kw = dict(forgetting=g, ridge=delta, block_size=1, client=client, progress=False)
            fit_stream(f"{tmp}/d.zarr", "rls", **kw)  # workers compile once
            pipe = RoundRobin()
            pipe.add("pipeline", lambda: fit_stream(f"{tmp}/d.zarr", "rls", **kw),
                     lambda runs, ds: record("streamlsq fit_stream rls --block-size 1", N,
                                             runs, ds.coef.values[-1], ref,
                                             "Dask pipeline, reading the Zarr store"))
            pipe.run(args.repeat)

    try:
        import polars as pl
        from polars_ols.least_squares import RLSKwargs, compute_recursive_least_squares

        cols = [f"x{j}" for j in range(n)]
        frame = pl.DataFrame({**{c: X[:, j] for j, c in enumerate(cols)}, "y": y})
        half_life = math.log(0.5) / math.log(g)
        kwargs = RLSKwargs(half_life=half_life, initial_state_covariance=1.0 / delta)

        def polars_rls():
            out = frame.select(compute_recursive_least_squares(
                "y", *cols, mode="coefficients", rls_kwargs=kwargs).alias("c"))
            return np.array(out["c"][-1].struct.unnest().row(0)
                            if hasattr(out["c"][-1], "struct") else list(out["c"][-1].values()))

        rr.add("polars-ols rls", polars_rls,
               lambda runs, coef: record("polars-ols rls", N, runs, coef, ref,
                                         f"half_life {half_life:.1f}"))
    except ImportError as exc:
        print(f"polars-ols: not installed ({exc})")

    try:
        import padasip as pa

        def padasip_rls():
            f = pa.filters.FilterRLS(n, mu=g, eps=delta, w="zeros")
            f.run(y[:M], X[:M])
            return f.w

        rr.add("padasip FilterRLS", padasip_rls,
               lambda runs, coef: record("padasip FilterRLS", M, runs, coef, ref_prefix,
                                         f"first {M} rows"))
    except ImportError as exc:
        print(f"padasip: not installed ({exc})")

    g1 = RLS(forgetting=1.0, ridge=0.0)
    e1 = block_edges(M, 1, n)
    rr.add("g1", lambda: g1.fold(g1.init(n, 1), X[:M], Y[:M], e1, 1, 10**9),
           lambda runs, res: record("streamlsq RLS kernel (qr), g = 1", M, runs,
                                    res.state["psi"], ref_prefix_g1,
                                    f"first {M} rows, no forgetting: the like-for-like of "
                                    "the next two"))
    try:
        import warnings

        import statsmodels.api as sm

        def sm_rls():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return sm.RecursiveLS(y[:M], X[:M]).fit().params

        rr.add("statsmodels", sm_rls,
               lambda runs, coef: record("statsmodels RecursiveLS (g = 1)", M, runs, coef,
                                         ref_prefix_g1, f"first {M} rows, no forgetting factor"))
    except ImportError as exc:
        print(f"statsmodels: not installed ({exc})")
    try:
        from river import linear_model

        rows = [dict(enumerate(r)) for r in X[:M].tolist()]

        def river_rls():
            model = linear_model.BayesianLinearRegression(alpha=1e-9, beta=1.0)
            for xi, yi in zip(rows, y[:M].tolist(), strict=True):
                model.learn_one(xi, yi)
            # the posterior mean: the prediction of each unit vector
            return np.array([model.predict_one({j: 1.0}) for j in range(n)])

        rr.add("river", river_rls,
               lambda runs, coef: record("river BayesianLinearRegression (g = 1)", M, runs,
                                         coef, ref_prefix_g1,
                                         f"first {M} rows, no forgetting factor"))
    except ImportError as exc:
        print(f"river: not installed ({exc})")
    except Exception as exc:  # an API change of river: say so, keep the other numbers
        print(f"river: failed ({type(exc).__name__}: {exc})")

    rr.run(args.repeat)
    ours = results["streamlsq RLS kernel (qr)"]["rows_per_s"]
    peers = {k: v for k, v in results.items() if not k.startswith("streamlsq")}
    print(f"\nper-sample RLS, {N} x {n}, g = {g}, ridge {delta}, {args.repeat} runs each "
          f"(median rows/s, spread min-max)\n")
    print(f"{'implementation':<42}{'rows':>8}{'rows/s':>11}{'spread':>21}"
          f"{'ours/it':>9}{'coef rel err':>14}")
    for name, r in results.items():
        spread = f"{r['rows_per_s_min']:.3g}-{r['rows_per_s_max']:.3g}"
        print(f"{name:<42}{r['rows']:>8}{r['rows_per_s']:>11.3g}{spread:>21}"
              f"{ours / r['rows_per_s']:>9.2f}{r['coef_rel_error']:>14.2e}"
              + (f"   ({r['note']})" if r["note"] else ""))
    if peers:
        fastest = max(peers, key=lambda k: peers[k]["rows_per_s"])
        ratio = ours / peers[fastest]["rows_per_s"]
        print(f"\nfastest peer: {fastest}; streamlsq's RLS kernel is {ratio:.1f}x its rows/s")
        results["_summary"] = {"fastest_peer": fastest, "ratio_to_fastest_peer": ratio}
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)},
                                         "results": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
