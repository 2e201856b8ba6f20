#!/usr/bin/env python
"""Generalised linear models by exact IRLS on the cluster, against the work floor, the
in-memory peers and as the store grows, in one run.

On a stream store written by ``simulate`` (default 8,000,000 × 20; ``--store`` for an
existing one) with two targets written beside X chunk by chunk (a binary ``yb`` from a
logistic model and a count ``yc`` from a Poisson model, seeded per chunk):

- **one IRLS iteration against the work floor**, for the logistic and the Poisson fit.
  The floor is bench_stream.py's: ``--workers`` plain processes (spawned before any
  cluster) decode every chunk of X and y in parallel with zarr alone, then compute XᵀX of
  each chunk on one thread, and floor rows/s = 1 / (decode s/row + XᵀX s/row / workers).
  An iteration is one pass of the fit over the rows (``GLMPass``, timed here around each
  pass): the median of the fit's IRLS passes (``glm-irls-*``), reported as rows/s and as
  the ratio iteration rows/s ÷ floor rows/s (target ≥ 0.5); the whole fit's seconds, its
  passes (the mean pass, the start, one per iteration, the final pass) and iterations
  beside it;
- **the whole fit against statsmodels GLM** (binomial, Poisson) **and scikit-learn
  LogisticRegression without a penalty** on the first ``--peer-rows`` rows in memory (at
  most what ``--max-memory-gb`` holds of X): each one's seconds, streamlsq's on the same
  rows, and the relative difference of the coefficients from streamlsq's
  (‖b − b_streamlsq‖ / ‖b_streamlsq‖);
- **the workers' peak memory** (the largest RSS of one worker, ``_memory.WorkerPeak``)
  during the logistic fit of stores of ``--memory-rows`` rows (default 10⁶, 10⁷, 10⁸;
  each written in ``--memory-dir``, fitted, then deleted): it should stay flat, the
  growth from the smallest to the largest size is printed (target ≤ 20 %, as
  bench_memory.py's).

Check the disk first (``df -h``): the largest memory store needs rows × (features + 3) × 8
bytes (10⁸ × 20: about 18 GB; the default codec barely compresses Gaussian floats); the
script refuses to start without that much free in ``--memory-dir``. Writes everything as
JSON. Not part of the test suite:

    python tests/benchmarks/bench_glm.py                       # the defaults above
    python tests/benchmarks/bench_glm.py --memory-dir /data    # the 10⁸-row store there
    python tests/benchmarks/bench_glm.py --rows 100000 --peer-rows 50000 \\
        --memory-rows 100000,200000                            # a quick look

The workers start with the allocator settings of the embedded cluster ``streamlsq fit``
starts (``--allocator streamlsq``, the default) or with distributed's own
(``--allocator distributed``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import dask
import numpy as np
import zarr
from distributed import Client, LocalCluster

from streamlsq import fit_glm, open_stream, simulate_stream
from streamlsq.stream.glm import GLMPass

try:  # run as a script from this folder
    from _memory import WorkerPeak
    from bench_stream import FloorPool, add_allocator_argument, worker_environ
except ImportError:  # pragma: no cover
    from tests.benchmarks._memory import WorkerPeak
    from tests.benchmarks.bench_stream import FloorPool, add_allocator_argument, worker_environ

#: the fits timed: family, target
FITS = (("binomial", "yb"), ("poisson", "yc"))


def _targets_of_chunk(path, a, b, seed):
    """Write yb (logistic) and yc (Poisson) for rows a:b, from X and a fixed β."""
    g = zarr.open_group(str(path), mode="r+")
    X = g["X"][a:b]
    beta = np.linspace(-1.0, 1.0, X.shape[1]) / np.sqrt(X.shape[1])
    eta = X @ beta
    rng = np.random.default_rng([seed, a])
    g["yb"][a:b] = (rng.random(b - a) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    g["yc"][a:b] = rng.poisson(np.exp(0.5 * eta)).astype(np.float64)
    return b - a


def write_targets(client, path, seed=0) -> None:
    """The targets yb and yc beside X, written chunk by chunk on the workers."""
    source = open_stream(path)
    g = zarr.open_group(str(path), mode="r+")
    if "yb" in g and "yc" in g:  # an existing store that has them
        return
    for name in ("yb", "yc"):
        g.create_array(name, shape=(source.n_rows,), chunks=(source.chunk_rows,),
                       dtype="float64", dimension_names=["sample"], overwrite=True)
    zarr.consolidate_metadata(str(path))  # the store's metadata is consolidated: add them
    edges = source.chunk_edges()
    futures = [client.submit(_targets_of_chunk, path, int(a), int(b), seed, pure=False)
               for a, b in zip(edges[:-1], edges[1:], strict=True)]
    assert sum(client.gather(futures)) == source.n_rows


class PassTimer:
    """The seconds of every pass of the GLM fits run inside the block, by label
    (``GLMPass.compute`` timed on the client; a pass ends when its reduction is back)."""

    def __enter__(self):
        self.passes: list[tuple[str, float]] = []
        original = self._original = GLMPass.compute

        def timed(step, ctx):
            t = time.perf_counter()
            try:
                return original(step, ctx)
            finally:
                self.passes.append((step.label, time.perf_counter() - t))

        GLMPass.compute = timed
        return self

    def __exit__(self, *exc):
        GLMPass.compute = self._original

    def iterations(self) -> list[float]:
        return [s for label, s in self.passes if label.startswith("glm-irls-")]


def timed_fit(data, client, family, y):
    """(the fit, its seconds, the seconds of each of its IRLS passes)."""
    with PassTimer() as timer:
        t = time.perf_counter()
        ds = fit_glm(data, x="X", y=y, fit_intercept=True, family=family, client=client,
                     progress=False)
        seconds = time.perf_counter() - t
    return ds, seconds, timer.iterations()


def floor_rows_per_second(pool: FloorPool, store, n: int, workers: int) -> dict:
    decode, _ = pool.decode(store)
    xtx, _ = pool.xtx(store)
    return {"decode_seconds": decode, "xtx_seconds_one_thread": xtx,
            "rows_per_s": n / (decode + xtx / workers)}


def _rel(b, ref) -> float:
    return float(np.linalg.norm(np.asarray(b) - ref) / np.linalg.norm(ref))


def peers(store, m, ours: dict) -> dict:
    """statsmodels GLM (binomial, Poisson) and scikit-learn LogisticRegression without a
    penalty on the first ``m`` rows in memory: seconds and the coefficients' relative
    difference from streamlsq's fit of the same rows (``ours``: family → coefficients)."""
    import sklearn
    import statsmodels.api as sm
    from sklearn.linear_model import LogisticRegression

    g = zarr.open_group(str(store), mode="r")
    X = np.asarray(g["X"][:m])
    Xc = np.column_stack([np.ones(m), X])
    out = {}
    for family, y in FITS:
        sm_family = sm.families.Binomial() if family == "binomial" else sm.families.Poisson()
        target = np.asarray(g[y][:m])
        t = time.perf_counter()
        res = sm.GLM(target, Xc, family=sm_family).fit()
        out[f"statsmodels GLM {family}"] = {
            "seconds": time.perf_counter() - t, "iterations": res.fit_history["iteration"],
            "rel_diff": _rel(res.params, ours[family])}
    # no penalty: C=inf from scikit-learn 1.8 (penalty=None deprecated), penalty=None before
    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    unpenalised = {"C": np.inf} if (major, minor) >= (1, 8) else {"penalty": None}
    t = time.perf_counter()
    lr = LogisticRegression(**unpenalised, tol=1e-10, max_iter=1000).fit(X, g["yb"][:m])
    out["sklearn LogisticRegression (no penalty, lbfgs)"] = {
        "seconds": time.perf_counter() - t, "iterations": int(lr.n_iter_[0]),
        "rel_diff": _rel(np.concatenate([lr.intercept_, lr.coef_[0]]), ours["binomial"])}
    return out


def memory_sweep(client, sizes, features, chunk_rows, directory) -> dict:
    """The workers' peak RSS during the logistic fit of a store of each size."""
    out = {}
    for rows in sizes:
        store = Path(directory) / f"glm-memory-{rows}.zarr"
        try:
            simulate_stream(store, rows, features, 1, chunk_rows=chunk_rows, seed=5,
                            client=client, overwrite=True, progress=False)
            write_targets(client, store)
            with WorkerPeak(client) as peak:
                ds, seconds, iterations = timed_fit(str(store), client, "binomial", "yb")
            out[rows] = {"worker_peak_bytes": peak.peak, "seconds": seconds,
                         "iteration_rows_per_s": rows / float(np.median(iterations)),
                         "passes": int(ds.attrs["passes"])}
            print(f"memory: {rows} rows, worker peak {peak.peak / 2**20:.0f} MiB, "
                  f"{seconds:.1f} s")
        finally:
            shutil.rmtree(store, ignore_errors=True)
    if len(out) > 1:
        small, large = out[min(out)], out[max(out)]
        out["growth_smallest_to_largest"] = (large["worker_peak_bytes"]
                                            / small["worker_peak_bytes"] - 1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=lambda s: int(float(s)), default=8_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--chunk-rows", type=int, default=None)
    parser.add_argument("--store", type=Path, default=None, help="an existing stream store")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="auto", help="of each worker")
    parser.add_argument("--peer-rows", type=lambda s: int(float(s)), default=1_000_000,
                        help="rows the in-memory peers fit (the first ones)")
    parser.add_argument("--max-memory-gb", type=float, default=4.0,
                        help="at most this many GB of X in memory for the peers")
    parser.add_argument("--memory-rows", default="1e6,1e7,1e8",
                        help="sizes of the stores of the memory sweep ('' for none)")
    parser.add_argument("--memory-dir", type=Path, default=Path("."),
                        help="where the stores are written (a temporary folder in it)")
    parser.add_argument("--json", type=Path, default=Path("bench_glm.json"))
    add_allocator_argument(parser)
    args = parser.parse_args()
    sizes = [int(float(r)) for r in args.memory_rows.split(",") if r.strip()]
    if sizes:
        need = max(sizes) * (args.features + 3) * 8
        free = shutil.disk_usage(args.memory_dir).free
        if free < need:
            raise SystemExit(f"--memory-dir {args.memory_dir}: {free / 1e9:.1f} GB free, the "
                             f"{max(sizes)}-row store needs about {need / 1e9:.1f} GB; "
                             "give another --memory-dir or smaller --memory-rows")
    warnings.filterwarnings("ignore")
    results: dict = {"features": args.features, "workers": args.workers,
                     "memory_limit": args.memory_limit, "load_before": os.getloadavg()}
    pool = FloorPool(args.workers)  # before any nanny writes into os.environ
    kw = dict(threads_per_worker=1, memory_limit=args.memory_limit, dashboard_address=":0",
              silence_logs=logging.ERROR)
    results["allocator"] = args.allocator
    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ(args.allocator)}), \
            tempfile.TemporaryDirectory(dir=args.memory_dir) as tmp, \
            LocalCluster(n_workers=args.workers, **kw) as cluster, Client(cluster) as client:
        store = args.store or Path(tmp) / "glm.zarr"
        if args.store is None:
            simulate_stream(store, args.rows, args.features, 1, chunk_rows=args.chunk_rows,
                            seed=3, client=client, progress=False)
        write_targets(client, store)
        source = open_stream(store)
        n = source.n_rows
        results.update(rows=n, chunk_rows=source.chunk_rows)
        floor = floor_rows_per_second(pool, store, n, args.workers)
        results["floor"] = floor
        fits = {}
        for family, y in FITS:
            ds, seconds, iterations = timed_fit(str(store), client, family, y)
            per_iteration = float(np.median(iterations))
            fits[family] = ds
            results[family] = {
                "seconds": seconds, "passes": int(ds.attrs["passes"]),
                "iterations": int(ds.attrs["iterations"]),
                "iteration_seconds": iterations,
                "iteration_rows_per_s": n / per_iteration,
                "ratio_to_floor": n / per_iteration / floor["rows_per_s"]}
            print(f"{family}: {seconds:.1f} s, {results[family]['iterations']} iterations, "
                  f"one iteration {n / per_iteration:,.0f} rows/s = "
                  f"{results[family]['ratio_to_floor']:.2f} × the floor")
        m = min(args.peer_rows, n, int(args.max_memory_gb * 1e9 / (8 * (args.features + 1))))
        ours, seconds = {}, {}
        for family, y in FITS:
            if m == n:
                ours[family] = fits[family].coef.values[0, :, 0]
                seconds[family] = results[family]["seconds"]
                continue
            import xarray as xr

            head = xr.open_zarr(str(store)).isel(sample=slice(0, m))
            ds, seconds[family], _ = timed_fit(head, client, family, y)
            ours[family] = ds.coef.values[0, :, 0]
        results["peer_rows"] = m
        results["peers"] = {f"streamlsq {family}": {"seconds": seconds[family]}
                            for family, _ in FITS}
        results["peers"].update(peers(store, m, ours))
        for name, entry in results["peers"].items():
            print(f"{m} rows in memory, {name}: {entry['seconds']:.2f} s"
                  + (f", rel. diff {entry['rel_diff']:.1e}" if "rel_diff" in entry else ""))
        pool.close()
        results["memory"] = memory_sweep(client, sizes, args.features, args.chunk_rows, tmp)
        if "growth_smallest_to_largest" in results["memory"]:
            print(f"worker peak memory growth {min(sizes)} → {max(sizes)} rows: "
                  f"{results['memory']['growth_smallest_to_largest']:+.0%}")
    results["load_after"] = os.getloadavg()
    args.json.write_text(json.dumps(results, indent=2, default=str))
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
