#!/usr/bin/env python
"""LMS throughput, side by side, in one run on the same data (LMS against its peers).

On one in-memory data set (default 1,000,000 rows x 20 features, one target) with the
same constant step size rho for everyone (plain LMS with an intercept, one pass, rows
in order), prints rows/s and the ratio to a compiled reference loop for:

- streamlsq kernel: ``streamlsq.kernels.LMS.fold`` (the numba loop the pipeline runs);
- compiled reference: a minimal ``numba.njit`` LMS loop written here (the target:
  the kernel within 2x of a compiled loop over in-memory data);
- plain Python: a per-sample loop over lists, and a per-sample loop with NumPy vector
  operations, timed on the first ``--subset`` rows and extrapolated (rows/s);
- scikit-learn ``SGDRegressor.partial_fit`` with the matched constant learning rate
  (``learning_rate="constant", eta0=rho, penalty=None``): one call on all rows, and one
  call per block of ``--block-size`` rows as a streaming user would;
- river ``linear_model.LinearRegression`` with ``optim.SGD(rho/2)`` (river's squared
  loss has the gradient 2(y_pred - y)), ``learn_one`` on dicts built beforehand, on the
  subset and extrapolated (skipped with a note when river is not installed: it is not a
  dependency of streamlsq);
- the pipeline: ``fit_stream(store, "lms")`` with the sequential engine on an on-disk
  Zarr store holding the same rows (LocalCluster, ``--workers`` x 1 thread), next to the
  floor of reading and decoding every chunk (a parallel map, and one task reading the
  chunks in order as the sequential engine does).

Every method's final coefficients are compared with the compiled reference loop (max
absolute difference), so the rows/s compare the same computation. Not part of the test
suite; run it by hand:

    python tests/benchmarks/bench_lms.py
    python tests/benchmarks/bench_lms.py --rows 200000 --features 50 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path

import numba
import numpy as np
import zarr
from distributed import Client, LocalCluster

from streamlsq import fit_stream, open_stream
from streamlsq.io.codecs import DEFAULT_CODEC, compressors
from streamlsq.kernels import LMS, block_edges
from streamlsq.runtime.memory import fast_large_allocations


@numba.njit(cache=True)
def reference_lms(X, y, rate):  # pragma: no cover - compiled
    """The minimal compiled LMS: w ← w + ρ x̃ (y − x̃ᵀw), x̃ = [1, x], one pass in order."""
    n, q = X.shape
    w = np.zeros(q + 1)
    for i in range(n):
        pred = w[0]
        for c in range(q):
            pred += X[i, c] * w[c + 1]
        g = rate * (y[i] - pred)
        w[0] += g
        for c in range(q):
            w[c + 1] += g * X[i, c]
    return w


def python_lists_lms(rows, targets, rate):
    """Per-sample LMS in plain Python (lists of floats)."""
    q = len(rows[0])
    w = [0.0] * (q + 1)
    for x, t in zip(rows, targets, strict=True):
        pred = w[0]
        for c in range(q):
            pred += x[c] * w[c + 1]
        g = rate * (t - pred)
        w[0] += g
        for c in range(q):
            w[c + 1] += g * x[c]
    return np.array(w)


def python_numpy_lms(X, y, rate):
    """Per-sample LMS as a Python loop with NumPy vector operations."""
    w0, w = 0.0, np.zeros(X.shape[1])
    for i in range(X.shape[0]):
        x = X[i]
        g = rate * (y[i] - (w0 + x @ w))
        w0 += g
        w += g * x
    return np.concatenate([[w0], w])


#: every run's seconds, by the order of the calls to best_of (for the JSON)
TIMES: list[list[float]] = []


def best_of(repeat, fn):
    """(median seconds, last result) of ``repeat`` runs of ``fn`` (all kept in TIMES)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    TIMES.append(times)
    return float(np.median(times)), out


def _read_chunks(source, a, b):
    with fast_large_allocations():
        for lo in range(a, b, source.chunk_rows):
            hi = min(lo + source.chunk_rows, b)
            source.array("X")[lo:hi]
            source.array("y")[lo:hi]
    return b - a


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--rate", type=float, default=0.005, help="constant step size rho")
    p.add_argument("--subset", type=int, default=20_000,
                   help="rows for the plain-Python and river loops (extrapolated)")
    p.add_argument("--block-size", type=int, default=1_000,
                   help="rows per recorded step (kernel, pipeline) and per partial_fit call")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per Zarr chunk of the store (default: about 25 MB of X)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5, help="median of N runs of each")
    p.add_argument("--json", default="bench_lms.json")
    args = p.parse_args()

    n, q, rate = args.rows, args.features, args.rate
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, q))
    w_true = rng.standard_normal(q)
    y = 0.5 + X @ w_true + 0.1 * rng.standard_normal(n)
    Y = y[:, None]
    print(f"data: {n} rows x {q} features, one target, float64 in memory "
          f"({X.nbytes / 1e6:.0f} MB); constant rate rho = {rate}; median of {args.repeat}")

    results = {}  # name -> (rows/s, max |w - w_ref|, note)

    # the compiled reference loop (compiled before timing)
    reference_lms(X[:10], y[:10], rate)
    sec, w_ref = best_of(args.repeat, lambda: reference_lms(X, y, rate))
    results["compiled reference loop (numba, here)"] = (n / sec, 0.0, "all rows")

    # the streamlsq kernel: LMS.fold over blocks, recording W every block
    model = LMS(rate=rate)
    edges = block_edges(n, args.block_size)
    state0 = model.init(q, 1)
    model.fold(state0, X[:10], Y[:10], np.array([0, 10]), 1, 1)  # load the compiled loop
    sec, res = best_of(args.repeat, lambda: model.fold(state0, X, Y, edges, 1, 1))
    w_kernel = res.state["W"][:, 0]
    results["streamlsq kernel LMS.fold"] = (n / sec, np.abs(w_kernel - w_ref).max(),
                                            f"all rows, {len(edges) - 1} recorded steps")

    # the scikit-learn estimator: partial_fit on all rows at once, and per block
    from streamlsq import LMSRegressor

    def estimator(block):
        est = LMSRegressor(rate=rate)
        for a in range(0, n, block):
            est.partial_fit(X[a : a + block], y[a : a + block])
        return np.concatenate([[est.intercept_], est.coef_])

    estimator(1000)  # the compiled loop's cache
    sec, w = best_of(args.repeat, lambda: estimator(n))
    results["streamlsq LMSRegressor.partial_fit (one call)"] = (
        n / sec, np.abs(w - w_ref).max(), "all rows")
    sec, w = best_of(args.repeat, lambda: estimator(10 * args.block_size))
    results[f"streamlsq LMSRegressor.partial_fit ({10 * args.block_size}-row calls)"] = (
        n / sec, np.abs(w - w_ref).max(), "all rows")

    # plain Python on a subset, extrapolated
    m = min(args.subset, n)
    w_sub = reference_lms(X[:m], y[:m], rate)
    rows_list, t_list = X[:m].tolist(), y[:m].tolist()
    sec, w = best_of(1, lambda: python_lists_lms(rows_list, t_list, rate))
    results["plain Python loop (lists)"] = (m / sec, np.abs(w - w_sub).max(),
                                            f"first {m} rows, extrapolated")
    sec, w = best_of(1, lambda: python_numpy_lms(X[:m], y[:m], rate))
    results["plain Python loop (NumPy per row)"] = (m / sec, np.abs(w - w_sub).max(),
                                                    f"first {m} rows, extrapolated")

    # scikit-learn SGDRegressor with the matched constant rate
    from sklearn.linear_model import SGDRegressor

    def sgd(block):
        est = SGDRegressor(loss="squared_error", penalty=None, alpha=0.0,
                           learning_rate="constant", eta0=rate, fit_intercept=True,
                           shuffle=False, average=False)
        for a in range(0, n, block):
            est.partial_fit(X[a : a + block], y[a : a + block])
        return np.concatenate([est.intercept_, est.coef_])

    sec, w = best_of(args.repeat, lambda: sgd(n))
    results["sklearn SGDRegressor.partial_fit (one call)"] = (
        n / sec, np.abs(w - w_ref).max(), "all rows")
    sec, w = best_of(args.repeat, lambda: sgd(args.block_size))
    results[f"sklearn SGDRegressor.partial_fit ({args.block_size}-row calls)"] = (
        n / sec, np.abs(w - w_ref).max(), "all rows")

    # padasip, if installed (the bench extra): its LMS has no intercept, so x~ = [1, x]
    try:
        import padasip as pa
    except ImportError:
        print("padasip is not installed: its row is left out (pip install padasip)")
    else:
        X1 = np.hstack([np.ones((m, 1)), X[:m]])

        def padasip_run():
            f = pa.filters.FilterLMS(q + 1, mu=rate, w="zeros")
            f.run(y[:m], X1)
            return f.w

        sec, w = best_of(1, padasip_run)
        results["padasip FilterLMS"] = (m / sec, np.abs(w - w_sub).max(),
                                        f"first {m} rows, extrapolated")

    # river, if installed (not a dependency of streamlsq)
    try:
        from river import linear_model, optim
    except ImportError:
        print("river is not installed: its row is left out (pip install river to add it)")
    else:
        names = [f"x{c}" for c in range(q)]
        dicts = [dict(zip(names, row, strict=True)) for row in rows_list]

        def river_run():
            est = linear_model.LinearRegression(optimizer=optim.SGD(rate / 2),
                                                intercept_lr=rate / 2, l2=0.0)
            for x, t in zip(dicts, t_list, strict=True):
                est.learn_one(x, t)
            return np.array([est.intercept] + [est.weights[c] for c in names])

        sec, w = best_of(1, river_run)
        results["river LinearRegression.learn_one"] = (
            m / sec, np.abs(w - w_sub).max(), f"first {m} rows (dicts prebuilt), extrapolated")

    # the pipeline on an on-disk store with the same rows
    with tempfile.TemporaryDirectory(dir=".") as tmp, LocalCluster(
        n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
        silence_logs=logging.ERROR,
    ) as cluster, Client(cluster) as client:
        store = Path(tmp) / "lms.zarr"
        chunk = args.chunk_rows or max(1, 3_200_000 // q)
        g = zarr.open_group(str(store), mode="w", zarr_format=3)
        g.attrs["block_size"] = args.block_size
        for name, arr, dims in (("X", X, ["sample", "feature"]), ("y", Y, ["sample", "target"])):
            a = g.create_array(name, shape=arr.shape, dtype=arr.dtype,
                               chunks=(chunk, arr.shape[1]), dimension_names=dims,
                               compressors=compressors())
            a[...] = arr
        source = open_stream(store)
        tag = uuid.uuid4().hex[:6]
        edges_c = source.chunk_edges()

        def parallel_read():
            futs = [client.submit(_read_chunks, source, int(a), int(b), key=f"r-{tag}-{i}-"
                                  f"{uuid.uuid4().hex[:4]}")
                    for i, (a, b) in enumerate(zip(edges_c[:-1], edges_c[1:], strict=True))]
            return sum(client.gather(futs))

        def ordered_read():
            return client.submit(_read_chunks, source, 0, n, pure=False).result()

        def pipeline():
            return fit_stream(store, "lms", rate=rate, block_size=args.block_size,
                              record_every=1, client=client, progress=False)

        pipeline()  # warm the workers (imports, the compiled loop's cache)
        sec_par, _ = best_of(args.repeat, parallel_read)
        sec_ord, _ = best_of(args.repeat, ordered_read)
        sec_pipe, ds = best_of(args.repeat, pipeline)
        w_pipe = ds.coef.values[-1, :, 0]
        same = np.array_equal(ds.coef.values, res.coefs)
        print(f"store: chunks of {chunk} rows ({len(edges_c) - 1} chunks), {DEFAULT_CODEC},"
              f" {args.workers} workers x 1 thread; the pipeline's recorded coefficients "
              f"{'equal' if same else 'DIFFER FROM'} the in-memory kernel's bit for bit")
        results["pipeline fit_stream lms (sequential, on disk)"] = (
            n / sec_pipe, np.abs(w_pipe - w_ref).max(),
            f"all rows; {sec_par / sec_pipe:.2f}x the rows/s of the parallel read, "
            f"{sec_ord / sec_pipe:.2f}x the in-order read")
        results["  floor: read + decode every chunk (parallel map)"] = (
            n / sec_par, float("nan"), "no arithmetic")
        results["  floor: read + decode in order (one task)"] = (
            n / sec_ord, float("nan"), "no arithmetic")

    ref_rate = results["compiled reference loop (numba, here)"][0]
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"\n{'method':<52}{'rows/s':>12}{'vs compiled':>13}{'max|w-w_ref|':>14}  note")
    for name, (rps, diff, note) in results.items():
        print(f"{name:<52}{rps:>12.3e}{rps / ref_rate:>13.3f}{diff:>14.1e}  {note}")
    est = results["streamlsq LMSRegressor.partial_fit (one call)"][0]
    summary = {"estimator / compiled loop": est / ref_rate,
               "estimator / kernel": est / results["streamlsq kernel LMS.fold"][0]}
    for peer in ("river LinearRegression.learn_one", "padasip FilterLMS",
                 "sklearn SGDRegressor.partial_fit (one call)", "plain Python loop (lists)"):
        if peer in results:
            summary[f"estimator / {peer}"] = est / results[peer][0]
    print()
    for k, v in summary.items():
        print(f"  {k:<60}{v:>10.2f}")
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average": load, "summary": summary,
                   "results": {k: {"rows_per_s": r, "max_abs_diff": d, "note": note}
                               for k, (r, d, note) in results.items()},
                   "seconds": TIMES}, f, indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
