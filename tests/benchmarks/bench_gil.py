#!/usr/bin/env python
"""Do the kernels' sums let worker threads run at once? numpy's ``@`` against ``np.dot``.

numpy's matrix product ``@`` (the ``matmul`` ufunc) holds the GIL during its BLAS call
(numpy issue 11821); ``np.dot`` runs the same BLAS routine and releases it. In-process
worker threads (the embedded cluster of a small store, ``DASK_STREAMLSQ__EMBEDDED_WORKERS=
threads``) then sum their chunks one after the other with ``@``, at once with ``np.dot``.

For each form, ``--rounds`` rounds of: one thread summing the ``--chunks`` chunks of two
arrays of ``--rows`` × ``--features`` (XᵀX, XᵀY and the column sums, as
:func:`streamlsq.kernels.block_sums` computes them), then two threads each summing the
chunks of one array; prints the speed-up of the two threads over the one (2 on two free
cores, 1 or less when the GIL serialises them), median and spread, the load average
before and after, and the kernel's own ``block_sums`` beside them (it must read as
``np.dot``). One BLAS thread throughout. Not part of the test suite:

    python tests/benchmarks/bench_gil.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np
from threadpoolctl import threadpool_limits

from streamlsq.kernels import block_sums


def with_matmul(X, Y, ones):
    return X.T @ X, X.T @ Y, ones @ X


def with_dot(X, Y, ones):
    return np.dot(X.T, X), np.dot(X.T, Y), np.dot(ones, X)


def with_kernel(X, Y, ones):
    return block_sums(X, Y, totals=True)


def speedup(form, arrays, Y, ones, chunks: int) -> float:
    def run(X):
        for _ in range(chunks):
            form(X, Y, ones)

    t = time.perf_counter()
    for X in arrays:
        run(X)
    one = time.perf_counter() - t
    threads = [threading.Thread(target=run, args=(X,)) for X in arrays]
    t = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return one / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=160_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--chunks", type=int, default=30, help="chunks each thread sums")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((args.rows, args.features)) for _ in range(2)]
    Y, ones = rng.standard_normal((args.rows, 1)), np.ones(args.rows)
    for a, b in zip(with_matmul(arrays[0], Y, ones), with_dot(arrays[0], Y, ones),
                    strict=True):
        assert np.array_equal(a, b)  # the same BLAS call: the same bits
    print(f"load average before {os.getloadavg()}")
    with threadpool_limits(1):
        for name, form in (("@ (matmul)", with_matmul), ("np.dot", with_dot),
                           ("block_sums", with_kernel)):
            ratios = [speedup(form, arrays, Y, ones, args.chunks) for _ in range(args.rounds)]
            print(f"{name:12s} two threads over one: median {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f})", flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
