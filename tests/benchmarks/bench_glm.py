#!/usr/bin/env python
"""Generalised linear models by exact IRLS on the cluster, against the work floor and the
in-memory peers, in one run.

On a stream store written by ``simulate`` (default 8,000,000 × 20; ``--store`` for an
existing one) with two targets written beside X chunk by chunk (a binary ``yb`` from a
logistic model and a count ``yc`` from a Poisson model, seeded per chunk):

- **one IRLS iteration against the work floor**: the floor is what bench_stream.py
  calls it (every chunk decoded by the workers in parallel, plus XᵀX of every chunk on
  one thread divided over the workers); an iteration is the fit's seconds over its passes
  (``passes`` attribute: the mean pass, the start, one per iteration, the final pass),
  reported as the ratio iteration rows/s ÷ floor rows/s (target ≥ 0.5);
- **the whole fit against statsmodels GLM and scikit-learn LogisticRegression
  (penalty=None)** on the first ``--peer-rows`` rows in memory (their time, and the
  relative difference of the coefficients from streamlsq's fit of the same rows);
- with ``--memory-rows 1e6,1e7,1e8``: the workers' peak RSS (``_memory.WorkerPeak``)
  during a logistic fit of stores of those sizes (it should stay flat).

Writes everything as JSON. Not part of the test suite:

    python tests/benchmarks/bench_glm.py --rows 8000000 --features 20
    python tests/benchmarks/bench_glm.py --rows 200000 --peer-rows 50000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from distributed import Client, LocalCluster

from streamlsq import fit_glm, open_stream, simulate_stream

try:  # run as a script from this folder
    from _memory import WorkerPeak
    from bench_stream import raw_read, xtx_of_chunks
except ImportError:  # pragma: no cover
    from tests.benchmarks._memory import WorkerPeak
    from tests.benchmarks.bench_stream import raw_read, xtx_of_chunks


def _targets_of_chunk(path, a, b, seed):
    """Write yb (logistic) and yc (Poisson) for rows a:b, from X and a fixed β."""
    source = open_stream(path)
    X = source.read_features(a, b)
    beta = np.linspace(-1.0, 1.0, X.shape[1]) / np.sqrt(X.shape[1])
    eta = X @ beta
    rng = np.random.default_rng([seed, a])
    g = zarr.open_group(str(path), mode="r+")
    g["yb"][a:b] = (rng.random(b - a) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    g["yc"][a:b] = rng.poisson(np.exp(0.5 * eta)).astype(np.float64)
    return b - a


def write_targets(client, path, seed=0) -> None:
    source = open_stream(path)
    g = zarr.open_group(str(path), mode="r+")
    for name in ("yb", "yc"):
        if name not in g:
            g.create_array(name, shape=(source.n_rows,), chunks=(source.chunk_rows,),
                           dtype="float64", dimension_names=["sample"])
    zarr.consolidate_metadata(str(path))  # the store's metadata is consolidated: add them
    edges = source.chunk_edges()
    futures = [client.submit(_targets_of_chunk, path, int(a), int(b), seed, pure=False)
               for a, b in zip(edges[:-1], edges[1:], strict=True)]
    assert sum(client.gather(futures)) == source.n_rows


def fit(path, client, family, y, **kw):
    t = time.perf_counter()
    ds = fit_glm(str(path), x="X", y=y, fit_intercept=True, family=family, client=client,
                 **kw)
    return ds, time.perf_counter() - t


def floor_rows_per_second(client, path, workers) -> float:
    source = open_stream(path)
    decode = raw_read(client, source)
    chunks = [source.read_features(int(a), int(b))
              for a, b in zip(source.chunk_edges()[:-1], source.chunk_edges()[1:],
                              strict=True)][:8]
    rows = sum(len(c) for c in chunks)
    t = time.perf_counter()
    xtx_of_chunks(chunks)
    xtx = (time.perf_counter() - t) / rows
    return 1.0 / (decode / source.n_rows + xtx / workers)


def peers(path, n, ref_b, ref_c) -> dict:
    import warnings

    import statsmodels.api as sm
    from sklearn.linear_model import LogisticRegression

    source = open_stream(path)
    X = source.read_features(0, n)
    g = zarr.open_group(str(path), mode="r")
    yb, yc = g["yb"][:n], g["yc"][:n]
    Xc = np.column_stack([np.ones(n), X])
    out = {}
    for name, y, family, ref in (("statsmodels GLM binomial", yb, sm.families.Binomial(),
                                  ref_b),
                                 ("statsmodels GLM poisson", yc, sm.families.Poisson(),
                                  ref_c)):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = sm.GLM(y, Xc, family=family).fit()
        out[name] = {"seconds": time.perf_counter() - t,
                     "rel_diff": float(np.max(np.abs(res.params - ref) / np.abs(ref)))}
    t = time.perf_counter()
    lr = LogisticRegression(penalty=None, tol=1e-10, max_iter=1000).fit(X, yb)
    coef = np.concatenate([lr.intercept_, lr.coef_[0]])
    out["sklearn LogisticRegression(penalty=None)"] = {
        "seconds": time.perf_counter() - t,
        "rel_diff": float(np.max(np.abs(coef - ref_b) / np.abs(ref_b)))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--peer-rows", type=int, default=1_000_000)
    parser.add_argument("--memory-rows", type=str, default="")
    parser.add_argument("--json", type=Path, default=Path("bench_glm.json"))
    args = parser.parse_args()
    results: dict = {"rows": args.rows, "features": args.features, "workers": args.workers}
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=args.workers, threads_per_worker=1) as cluster, \
            Client(cluster) as client:
        path = args.store or Path(tmp) / "glm.zarr"
        if args.store is None:
            simulate_stream(path, args.rows, args.features, 1, seed=3, client=client)
        write_targets(client, path)
        floor = floor_rows_per_second(client, path, args.workers)
        fits = {}
        for family, y in (("binomial", "yb"), ("poisson", "yc")):
            ds, seconds = fit(path, client, family, y)
            n = int(ds.attrs["n_rows"])
            per_pass = seconds / int(ds.attrs["passes"])
            fits[family] = ds
            results[family] = {"seconds": seconds, "passes": int(ds.attrs["passes"]),
                               "iterations": int(ds.attrs["iterations"]),
                               "iteration_rows_per_s": n / per_pass,
                               "ratio_to_floor": n / per_pass / floor}
        results["floor_rows_per_s"] = floor
        m = min(args.peer_rows, args.rows)
        sub_b = fit_glm(str(path), x="X", y="yb", fit_intercept=True, family="binomial",
                        client=client) if m == args.rows else None
        if sub_b is None:  # the peers' rows: the first m, fitted here as well
            import xarray as xr

            ds = xr.open_zarr(str(path)).isel(sample=slice(0, m))
            sub_b = fit_glm(ds, x="X", y="yb", fit_intercept=True, family="binomial",
                            client=client)
            sub_c = fit_glm(ds, x="X", y="yc", fit_intercept=True, family="poisson",
                            client=client)
        else:
            sub_c = fits["poisson"]
        results["peers"] = peers(path, m, sub_b.coef.values[0, :, 0],
                                 sub_c.coef.values[0, :, 0])
        results["peer_rows"] = m
        memory = {}
        for rows in [int(float(r)) for r in args.memory_rows.split(",") if r]:
            store = Path(tmp) / f"m{rows}.zarr"
            simulate_stream(store, rows, args.features, 1, seed=5, client=client)
            write_targets(client, store)
            with WorkerPeak(client) as peak:
                fit(store, client, "binomial", "yb")
            memory[rows] = peak.peak
        results["worker_peak_bytes"] = memory
    args.json.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
