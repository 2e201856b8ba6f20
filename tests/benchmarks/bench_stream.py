#!/usr/bin/env python
"""Exact streaming least squares against the work floor of the machine, and every peer, in
one run.

On one stream store written by ``simulate`` (default 4,000,000 × 20, the default codec,
``--codec`` for another; ``--store`` for an existing one) and on the same rows in memory,
round-robin over ``--repeat`` rounds (so the machine's load falls on every row alike),
prints rows/s (median and spread min–max), the ratio of each run to the work floor of the
same round (median and spread), and the relative error of the final coefficients
against ``numpy.linalg.lstsq`` of the same rows (the error floor).

**The work floor** is the least any exact fit can cost here, measured without Dask and
without streamlsq: ``--workers`` plain processes (spawned before any cluster, one BLAS
thread each, the allocator as a fresh process has it) read and decode alternate chunks of
X and y with zarr alone, in parallel; then the same processes compute XᵀX of each of their
chunks (what the normal equations add, the cheapest exact summary) on one thread each:

    seconds per row = 1 / (decode rows/s, all processes) + 1 / (workers × XᵀX rows/s, one thread)

The runs:

- the floors: decoding in parallel in the plain processes and XᵀX of every chunk on one
  thread (the work floor from them); beside them, what the Dask workers lose: decoding on
  the Dask workers in parallel (one task per chunk) and in order (one task reading every
  chunk in turn), each read as the engines read a store's rows (a local store's chunk
  files decoded in place, ``streamlsq.io.chunk_decoding``; the floor's processes read
  through zarr, as ``work_floor`` defines it); with ``--compare-read`` the same decoding
  and the QR fits again with the workers reading through zarr's ``arr[a:b]``;
- streamlsq KF4LLS from the store: ``sequential`` and ``scan`` engines × ``qr`` and
  ``normal`` solvers (``fit_stream`` on the warm cluster);
- the scan engine and the decoding floor on a second cluster of **one** worker
  (``--one-worker``): the speed-up of two workers over one;
- ``dask.array.linalg.lstsq`` (tall-and-skinny QR) on the same Zarr store, and dask-ml's
  ``Incremental(SGDRegressor)`` over its chunks (one pass; approximate by design);
- in memory: ``numpy.linalg.lstsq``; the per-row peers on the first ``--peer-rows`` rows
  (their rows/s extrapolate; the error is against lstsq of those rows):
  statsmodels ``RecursiveLS``, polars-ols ``rls`` (no forgetting), padasip
  ``FilterRLS`` (mu = 1), river ``BayesianLinearRegression``; a peer that is not
  installed (the ``bench`` extra) is left out with a note.

The workers start with the allocator settings of the embedded cluster that ``streamlsq
fit`` starts (``--allocator streamlsq``, the default: what a user gets) or with
distributed's own (``--allocator distributed``: a cluster of the user's own, untuned).

Writes everything (every run's seconds, the load average before and after, the machine)
as JSON. Not part of the test suite:

    python tests/benchmarks/bench_stream.py --rows 4000000 --features 20 --repeat 5
    python tests/benchmarks/bench_stream.py --store big.zarr --no-peers --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import dask
import numpy as np
from distributed import Client, LocalCluster

from streamlsq import fit_stream, open_stream, simulate_stream
from streamlsq.io.stores import cached_array
from streamlsq.runtime.client import embedded_worker_environ
from streamlsq.runtime.memory import fast_large_allocations


def _floor_part(path, part, parts, gram):
    """In a plain process: read and decode chunks ``part``, ``part + parts``, … of X and y
    with zarr alone (``gram``: XᵀX of each chunk of X instead, only the product timed);
    return the seconds spent and the process's CPU seconds meanwhile."""
    import zarr

    g = zarr.open_group(str(path), mode="r")
    X, y = g["X"], g["y"]
    n, c = X.shape[0], X.chunks[0]
    seconds = cpu = 0.0
    for a in range(0, n, c)[part::parts]:
        if gram:  # only the product is timed; one chunk in memory at a time
            block = X[a:a + c]
        c0, t0 = _cpu_seconds(), time.perf_counter()
        if gram:
            block.T @ block
        else:
            X[a:a + c]
            y[a:a + c]
        seconds += time.perf_counter() - t0
        cpu += _cpu_seconds() - c0
    return seconds, cpu


class FloorPool:
    """``workers`` plain spawned processes, started with one BLAS thread each and without
    the variables a Dask nanny sets (``MALLOC_*``), before any cluster exists."""

    def __init__(self, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        saved = dict(os.environ)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = "1"
        for name in [k for k in os.environ if k.startswith("MALLOC_")]:
            del os.environ[name]
        self.workers = workers
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        try:  # every process spawned now, with this environment
            list(self.pool.map(time.sleep, [0.5] * workers))
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def _map(self, store, gram):
        parts = [(store, p, self.workers, gram) for p in range(self.workers)]
        return list(self.pool.map(_floor_part, *zip(*parts, strict=True)))

    def decode(self, store):
        """Wall seconds of the processes decoding every chunk in parallel, CPU seconds."""
        t = time.perf_counter()
        cpu = sum(c for _, c in self._map(store, False))
        return time.perf_counter() - t, cpu

    def xtx(self, store):
        """Seconds of XᵀX of every chunk on one thread (the processes' sum), CPU seconds."""
        out = self._map(store, True)
        return sum(s for s, _ in out), sum(c for _, c in out)

    def close(self):
        self.pool.shutdown()


def add_allocator_argument(parser) -> None:
    parser.add_argument(
        "--allocator", choices=("streamlsq", "distributed"), default="streamlsq",
        help="the workers' allocator settings: those of the embedded cluster `streamlsq fit` "
        "starts (streamlsq.runtime.client.WORKER_MALLOC), or distributed's default "
        "(MALLOC_TRIM_THRESHOLD_=65536: a cluster of your own, untuned)")


def worker_environ(allocator: str) -> dict:
    """The ``distributed.nanny.pre-spawn-environ`` the benchmark's workers start with."""
    if allocator == "streamlsq":
        return embedded_worker_environ()
    return dict(dask.config.get("distributed.nanny.pre-spawn-environ") or {})


def _read_chunk(source, a, b):
    # fetch and decode as the engines do (streamlsq's read of a store's rows: their chunk
    # files decoded in place where the layout allows, else zarr), no value check, no
    # arithmetic; the allocator setting of the engines' tasks, so that it is like for like
    with fast_large_allocations():
        source.rows.read("X", a, b)
        source.rows.read("y", a, b)
    return b - a


def _read_all_in_order(source):
    with fast_large_allocations():
        for a, b in zip(source.chunk_edges()[:-1], source.chunk_edges()[1:], strict=True):
            source.rows.read("X", int(a), int(b))
            source.rows.read("y", int(a), int(b))
    return source.n_rows


def _read_through_zarr(on: bool) -> None:
    """In a worker: streamlsq's reads of a store's rows through zarr's ``arr[a:b]`` (as
    before ``streamlsq.io.chunk_decoding``), or back to the chunk files."""
    import streamlsq.io.stores as stores
    from streamlsq.io.chunk_decoding import direct_rows

    stores.direct_rows = (lambda *args: None) if on else direct_rows


def through_zarr(client, fn):
    """``fn``, run with the workers' reads through zarr (``--compare-read``): the cost of
    switching is two ``client.run`` calls, a few ms of a run of seconds."""
    def run():
        client.run(_read_through_zarr, True)
        try:
            return fn()
        finally:
            client.run(_read_through_zarr, False)
    return run


def raw_read_in_order(client, source) -> float:
    """The floor of one in-order consumer: one task reads every chunk in turn."""
    t = time.perf_counter()
    assert client.submit(_read_all_in_order, source, pure=False).result() == source.n_rows
    return time.perf_counter() - t


def raw_read(client, source) -> float:
    """The parallel floor: one task per chunk, over every worker."""
    edges = source.chunk_edges()
    tag = uuid.uuid4().hex[:6]
    t = time.perf_counter()
    futs = [client.submit(_read_chunk, source, int(a), int(b), key=f"read-{tag}-{i}")
            for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))]
    assert sum(client.gather(futs)) == source.n_rows
    return time.perf_counter() - t


def one_blas_thread(fn):
    """``fn`` run with one BLAS thread in this process, as the embedded cluster's
    in-process workers run (each worker thread is the parallelism)."""
    def run():
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1, user_api="blas"):
            return fn()
    return run


def rel_error(coef, ref) -> float:
    coef, ref = np.ravel(coef), np.ravel(ref)
    return float(np.linalg.norm(coef - ref) / np.linalg.norm(ref))


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def cpu_meter(client):
    """CPU seconds (user + system) spent so far by this process and the cluster's worker
    processes: what a run costs in work, which the machine's load changes far less than
    its wall time."""
    def total():
        return _cpu_seconds() + sum(client.run(_cpu_seconds).values())
    return total


class Bench:
    """Named runs, timed round-robin; each returns its coefficients (or None). ``cpu`` (a
    meter per run, or None) adds the CPU seconds each run spent."""

    def __init__(self):
        self.runs: dict[str, dict] = {}

    def add(self, name, rows, fn, ref=None, note="", group="streamlsq", cpu=None,
            timed=False):
        """``timed``: ``fn`` measures itself and returns (seconds, CPU seconds)."""
        self.runs[name] = {"rows": rows, "fn": fn, "ref": ref, "note": note, "group": group,
                           "seconds": [], "cpu_seconds": [], "coef_rel_error": None,
                           "cpu": cpu, "timed": timed}

    def run(self, repeat):
        for name, r in self.runs.items():  # warm up: numba caches, first opens
            try:
                r["fn"]()
            except Exception as exc:  # a peer that fails: say so, keep the others
                r["failed"] = f"{type(exc).__name__}: {exc}"[:200]
                print(f"{name}: failed ({r['failed']})")
        for _ in range(repeat):
            for r in self.runs.values():
                if "failed" in r:
                    continue
                if r["timed"]:
                    seconds, cpu_seconds = r["fn"]()
                    r["seconds"].append(seconds)
                    r["cpu_seconds"].append(cpu_seconds)
                    continue
                c = r["cpu"]() if r["cpu"] else None
                t = time.perf_counter()
                coef = r["fn"]()
                r["seconds"].append(time.perf_counter() - t)
                if c is not None:
                    r["cpu_seconds"].append(r["cpu"]() - c)
                if coef is not None and r["ref"] is not None:
                    r["coef_rel_error"] = rel_error(coef, r["ref"])

    def rate(self, name):
        r = self.runs[name]
        return r["rows"] / float(np.median(r["seconds"]))


def fit_coef(ds):
    return ds.coef.values[-1, :, 0]


DECODE = "decode, plain processes (no Dask)"
XTX = "XᵀX of every chunk, one thread"
DASK_DECODE = "decode, Dask workers in parallel"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, default=None, help="existing stream store")
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--codec", default=None, help="codec of the simulated store")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="auto")
    p.add_argument("--repeat", type=int, default=5, help="round-robin rounds")
    p.add_argument("--peer-rows", type=int, default=100_000,
                   help="rows for the per-row peers (statsmodels, padasip, river, polars-ols)")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--one-worker", action=argparse.BooleanOptionalAction, default=True,
                   help="also run the scan engine and the decoding floor on one worker")
    p.add_argument("--max-memory-gb", type=float, default=4.0,
                   help="the in-memory runs (numpy lstsq, the per-row peers and the "
                   "coefficients' reference) only when X fits in this")
    p.add_argument("--compare-read", action="store_true",
                   help="also decode and fit (scan and sequential QR) with the workers "
                   "reading every chunk through zarr's arr[a:b], as before chunk files "
                   "were decoded in place (streamlsq.io.chunk_decoding)")
    p.add_argument("--threads", action="store_true",
                   help="also decode and fit (scan and sequential QR, scan normal) on a "
                   "cluster of --workers in-process worker threads, as the embedded cluster "
                   "runs them for small stores (one BLAS thread during their runs)")
    p.add_argument("--runs", default=None,
                   help="comma-separated parts of the names of the runs to keep besides the "
                   "floors (e.g. 'scan qr,scan normal')")
    add_allocator_argument(p)
    p.add_argument("--json", default="bench_stream.json")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    load_before = os.getloadavg()

    kw = dict(threads_per_worker=1, memory_limit=args.memory_limit, dashboard_address=":0",
              silence_logs=logging.ERROR)
    floor_pool = FloorPool(args.workers)  # before any nanny writes into os.environ
    # the workers start with the environment `streamlsq fit`'s embedded cluster gives them,
    # or with distributed's own (what a cluster of the user's own has)
    environ = worker_environ(args.allocator)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}), \
            tempfile.TemporaryDirectory(dir=".") as tmp, \
            LocalCluster(n_workers=args.workers, **kw) as cluster, Client(cluster) as client:
        one = threads = None
        if args.threads:  # the embedded cluster's in-process workers: one thread each
            threads_cluster = LocalCluster(n_workers=args.workers, processes=False,
                                           **kw)
            threads = Client(threads_cluster, set_as_default=False)
        if args.one_worker:
            one_cluster = LocalCluster(n_workers=1, **kw)
            one = Client(one_cluster, set_as_default=False)
        store = args.store
        if store is None:
            store = Path(tmp) / "bench.zarr"
            t = time.perf_counter()
            simulate_stream(store, args.rows, args.features, 1, chunk_rows=args.chunk_rows,
                            seed=0, client=client, codec=args.codec)
            print(f"simulated {args.rows} x {args.features} in {time.perf_counter() - t:.1f} s")
        source = open_stream(store)
        n, q = source.n_rows, source.n_features
        gb = n * (q + source.n_targets) * 8 / 1e9
        codec = str(cached_array(str(store), None, "X").compressors)
        print(f"store {store}: {n} rows x {q} features, {gb:.2f} GB in float64, chunks of "
              f"{source.chunk_rows} rows, codec {codec}; {args.workers} workers x 1 thread, "
              f"memory limit {args.memory_limit}, allocator settings of {args.allocator}: "
              f"{ {k: v for k, v in environ.items() if k.startswith('MALLOC_')} }")

        ref = None
        X = y = None
        in_memory = n * q * 8 / 1e9 <= args.max_memory_gb
        if in_memory:
            X = np.asarray(cached_array(str(store), None, "X")[:])
            y = np.asarray(cached_array(str(store), None, "y")[:])[:, 0]
            ref = np.linalg.lstsq(X, y, rcond=None)[0]

        b = Bench()
        cpu = cpu_meter(client)
        b.add(DECODE, n, lambda: floor_pool.decode(store), group="floor", timed=True)
        b.add(XTX, n, lambda: floor_pool.xtx(store), group="floor", timed=True)
        b.add(DASK_DECODE, n, lambda: raw_read(client, source), group="floor", cpu=cpu)
        b.add("decode, in order (one Dask task)", n, lambda: raw_read_in_order(client, source),
              group="floor", cpu=cpu)
        for engine in ("sequential", "scan"):
            for solver in ("qr", "normal"):
                b.add(f"KF4LLS {engine} {solver}", n,
                      lambda e=engine, s=solver: fit_coef(fit_stream(
                          store, "kf4lls", engine=e, solver=s, client=client, progress=False)),
                      ref, cpu=cpu)
        if args.compare_read:
            b.add("decode, Dask workers (zarr's read)", n,
                  through_zarr(client, lambda: raw_read(client, source)), group="floor",
                  cpu=cpu)
            for engine in ("sequential", "scan"):
                b.add(f"KF4LLS {engine} qr (zarr's read)", n, through_zarr(
                    client, lambda e=engine: fit_coef(fit_stream(
                        store, "kf4lls", engine=e, solver="qr", client=client,
                        progress=False))), ref, cpu=cpu)
        if threads is not None:
            b.add("decode, in-process threads", n,
                  one_blas_thread(lambda: raw_read(threads, source)), group="floor")
            for engine, solver in (("sequential", "qr"), ("scan", "qr"), ("scan", "normal")):
                b.add(f"KF4LLS {engine} {solver}, threads", n, one_blas_thread(
                    lambda e=engine, s=solver: fit_coef(fit_stream(
                        store, "kf4lls", engine=e, solver=s, client=threads,
                        progress=False))), ref)
        if one is not None:
            b.add("decode, 1 worker", n, lambda: raw_read(one, source), group="floor",
                  cpu=cpu_meter(one))
            b.add("KF4LLS scan qr, 1 worker", n, lambda: fit_coef(fit_stream(
                store, "kf4lls", engine="scan", client=one, progress=False)), ref,
                  cpu=cpu_meter(one))
        if in_memory:
            b.add("numpy lstsq (in memory)", n,
                  lambda: np.linalg.lstsq(X, y, rcond=None)[0], ref, group="peer")
        if not args.no_peers:
            add_dask_peers(b, store, client, ref)
            if in_memory:
                add_row_peers(b, X, y, min(args.peer_rows, n))
        if args.runs:
            keep = [part.strip() for part in args.runs.split(",")]
            b.runs = {name: r for name, r in b.runs.items()
                      if r["group"] == "floor" or any(k in name for k in keep)}
        b.run(args.repeat)
        load = os.getloadavg()
        if one is not None:
            one.close()
            one_cluster.close()
        if threads is not None:
            threads.close()
            threads_cluster.close()
    floor_pool.close()

    report(b, n, args, (load_before, load), gb, codec)


def add_dask_peers(b, store, client, ref):
    import dask.array as da

    def dask_lstsq():
        Xd = da.from_zarr(str(store), component="X")
        yd = da.from_zarr(str(store), component="y")
        return client.compute(da.linalg.lstsq(Xd, yd)[0]).result()[:, 0]

    b.add("dask.array.linalg.lstsq (same store)", None, dask_lstsq, ref, group="peer")
    try:
        from dask_ml.wrappers import Incremental
        from sklearn.linear_model import SGDRegressor

        def dask_ml_sgd():
            Xd = da.from_zarr(str(store), component="X")
            yd = da.from_zarr(str(store), component="y")[:, 0]
            model = Incremental(SGDRegressor(penalty=None, fit_intercept=False, tol=None,
                                             max_iter=1, random_state=0))
            model.fit(Xd, yd)
            return model.estimator_.coef_

        b.add("dask-ml Incremental(SGDRegressor), 1 pass", None, dask_ml_sgd, ref,
              "approximate (SGD)", group="peer")
    except ImportError as exc:
        print(f"dask-ml: not installed ({exc})")


def add_row_peers(b, X, y, m):
    Xm, ym = X[:m], y[:m]
    ref_m = np.linalg.lstsq(Xm, ym, rcond=None)[0]
    q = X.shape[1]
    note = f"first {m} rows"
    try:
        import statsmodels.api as sm

        b.add("statsmodels RecursiveLS", m, lambda: sm.RecursiveLS(ym, Xm).fit().params,
              ref_m, note, group="peer")
    except ImportError as exc:
        print(f"statsmodels: not installed ({exc})")
    try:
        import polars as pl
        from polars_ols.least_squares import RLSKwargs, compute_recursive_least_squares

        cols = [f"x{j}" for j in range(q)]
        frame = pl.DataFrame({**{c: Xm[:, j] for j, c in enumerate(cols)}, "y": ym})
        kwargs = RLSKwargs(half_life=None, initial_state_covariance=1e6)

        def polars_rls():
            out = frame.select(compute_recursive_least_squares(
                "y", *cols, mode="coefficients", rls_kwargs=kwargs).alias("c"))
            last = out["c"][-1]
            return np.array(list(last.values()) if isinstance(last, dict) else last)

        b.add("polars-ols rls", m, polars_rls, ref_m, note + ", P0 = 1e6 I", group="peer")
    except ImportError as exc:
        print(f"polars-ols: not installed ({exc})")
    try:
        import padasip as pa

        def padasip_rls():
            f = pa.filters.FilterRLS(q, mu=1.0, eps=1e-6, w="zeros")
            f.run(ym, Xm)
            return f.w

        b.add("padasip FilterRLS", m, padasip_rls, ref_m, note + ", mu = 1", group="peer")
    except ImportError as exc:
        print(f"padasip: not installed ({exc})")
    try:
        from river import linear_model

        k = min(m, 20_000)  # river is slow: fewer rows still
        rows = [dict(enumerate(r)) for r in Xm[:k].tolist()]
        ref_k = np.linalg.lstsq(Xm[:k], ym[:k], rcond=None)[0]

        def river_blr():
            model = linear_model.BayesianLinearRegression(alpha=1e-9, beta=1.0)
            for xi, yi in zip(rows, ym[:k].tolist(), strict=True):
                model.learn_one(xi, yi)
            return np.array([model.predict_one({j: 1.0}) for j in range(q)])

        b.add("river BayesianLinearRegression", k, river_blr, ref_k, f"first {k} rows",
              group="peer")
    except ImportError as exc:
        print(f"river: not installed ({exc})")


def work_floor(b, workers) -> np.ndarray:
    """The work floor of each round, rows/s: 1 / (1/decode + 1/(workers × XᵀX on one thread))."""
    dec, xtx = b.runs[DECODE], b.runs[XTX]
    per_row = (np.array(dec["seconds"]) / dec["rows"]
               + np.array(xtx["seconds"]) / xtx["rows"] / workers)
    return 1 / per_row


def cpu_per_row(r) -> float:
    """Median CPU seconds per row of a run (NaN when not metered)."""
    return float(np.median(r["cpu_seconds"])) / r["rows"] if r["cpu_seconds"] else math.nan


def machine() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), "?")
    except OSError:
        model = "?"
    return f"{os.cpu_count()} cores ({model})"


def report(b, n, args, loads, gb, codec):
    for r in b.runs.values():
        if r["rows"] is None:
            r["rows"] = n
    floor = work_floor(b, args.workers)
    fl = float(np.median(floor))
    before, after = loads
    print(f"\n{machine()}; {args.repeat} round-robin rounds; load average before "
          f"{before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, after {after[0]:.2f} "
          f"{after[1]:.2f} {after[2]:.2f}; rows/s median (spread min-max); / work floor: "
          "the ratio to the floor of the same round, median (min-max)\n")
    print(f"work floor {fl:.3e} rows/s ({floor.min():.3g}-{floor.max():.3g}): decoding "
          f"{b.rate(DECODE):.3e} rows/s on {args.workers} plain processes + XᵀX {b.rate(XTX):.3e} "
          "rows/s per thread\n")
    floor_cpu = cpu_per_row(b.runs[DECODE]) + cpu_per_row(b.runs[XTX])
    print(f"work floor in CPU: {1e6 * floor_cpu:.3f} µs per row (decoding "
          f"{1e6 * cpu_per_row(b.runs[DECODE]):.3f} + XᵀX {1e6 * cpu_per_row(b.runs[XTX]):.3f}); "
          "CPU µs/row: every process of the run (client, scheduler, workers); floor/CPU: "
          "the work floor's CPU per row over the run's\n")
    print(f"{'run':<44}{'rows':>9}{'rows/s':>11}{'spread':>21}{'/ work floor':>13}"
          f"{'spread':>12}{'CPU µs/row':>11}{'floor/CPU':>10}{'rel err':>10}  note")
    out = {}
    for name, r in b.runs.items():
        out[name] = {k: v for k, v in r.items() if k not in ("fn", "ref", "cpu")}
        if "failed" in r or not r["seconds"]:
            print(f"{name:<44} failed: {r.get('failed')}")
            continue
        rates = r["rows"] / np.array(r["seconds"])
        ratios = rates / floor[: len(rates)]
        rate, ratio = float(np.median(rates)), float(np.median(ratios))
        err = "-" if r["coef_rel_error"] is None else f"{r['coef_rel_error']:.1e}"
        cpu = cpu_per_row(r)
        cpu_text = (f"{1e6 * cpu:>11.3f}{floor_cpu / cpu:>10.2f}" if cpu == cpu
                    else f"{'-':>11}{'-':>10}")
        print(f"{name:<44}{r['rows']:>9}{rate:>11.3e}"
              f"{f'{rates.min():.3g}-{rates.max():.3g}':>21}{ratio:>13.2f}"
              f"{f'{ratios.min():.2f}-{ratios.max():.2f}':>12}{cpu_text}{err:>10}  "
              f"{r['note']}")
        out[name].update(rows_per_s=rate, rows_per_s_min=float(rates.min()),
                         rows_per_s_max=float(rates.max()), vs_work_floor=ratio,
                         vs_work_floor_min=float(ratios.min()),
                         vs_work_floor_max=float(ratios.max()),
                         cpu_us_per_row=1e6 * cpu, floor_cpu_over_cpu=floor_cpu / cpu)
    summary = {}
    for peer in ("statsmodels RecursiveLS", "polars-ols rls"):
        if peer in b.runs and b.runs[peer]["seconds"]:
            summary[f"scan qr / {peer}"] = b.rate("KF4LLS scan qr") / b.rate(peer)
    if "KF4LLS scan qr, 1 worker" in b.runs:
        summary["scan qr: 2 workers / 1 worker"] = (b.rate("KF4LLS scan qr")
                                                    / b.rate("KF4LLS scan qr, 1 worker"))
        summary["decoding: 2 workers / 1 worker"] = (b.rate(DASK_DECODE)
                                                     / b.rate("decode, 1 worker"))
    if summary:
        print("\nratios (medians of the same run):")
        for k, v in summary.items():
            print(f"  {k:<44}{v:>8.2f}")
    with open(args.json, "w") as f:
        json.dump({"settings": {k: str(v) for k, v in vars(args).items()}, "gb": gb,
                   "codec": codec, "machine": machine(), "load_average_before": before,
                   "load_average_after": after, "work_floor_rows_per_s": floor.tolist(),
                   "results": out, "summary": summary}, f, indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
