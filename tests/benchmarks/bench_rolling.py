#!/usr/bin/env python
"""Rolling least squares: rows per second of a sliding window, and the cost of a window
position as the window grows.

Times, on one thread and in memory, a window of ``--window`` rows (default 1,000) sliding
one row at a time over ``--rows`` rows (default 10⁷) of ``--features`` features (default
20) and one target:

- ``streamlsq``: :func:`streamlsq.kernels.inference.rolling.rolling_fit` (QR factors merged
  by a two-stack queue, no downdating: exact at every window);
- ``statsmodels``: ``RollingOLS(y, X, window).fit()`` (rolling XᵀX, added and subtracted);
- ``polars-ols``: ``pl.col(y).least_squares.rolling_ols(...)`` (Woodbury updates, no
  statistics), when ``polars-ols`` is installed (the ``bench`` extra);

each on the rows that fit in memory (``--rows`` is cut to what ``--memory`` GB hold), then
the cost of one window position of ``streamlsq`` for windows of 100 … 100,000 rows (it must
not grow with the window: each row enters two factors, each position is one merge).
Writes JSON. Not part of the test suite; a small run:

    python tests/benchmarks/bench_rolling.py --rows 20000 --features 5 --window 200
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _ours(X, y, window):
    from streamlsq.kernels.inference.rolling import rolling_fit

    return rolling_fit(X, y, window, constant=0)


def _statsmodels(X, y, window):
    from statsmodels.regression.rolling import RollingOLS

    return RollingOLS(y, X, window=window).fit()


def _polars_ols(X, y, window):
    import polars as pl
    import polars_ols  # noqa: F401 - registers the least_squares namespace

    frame = pl.DataFrame({"y": y, **{f"x{j}": X[:, j] for j in range(X.shape[1])}})
    features = [pl.col(f"x{j}") for j in range(X.shape[1])]
    return frame.select(pl.col("y").least_squares.rolling_ols(
        *features, window_size=window, mode="coefficients"))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--window", type=int, default=1_000)
    parser.add_argument("--memory", type=float, default=4.0, help="GB the rows may take")
    parser.add_argument("--windows", default="100,1000,10000,100000",
                        help="window lengths of the cost per position")
    parser.add_argument("--out", default=None, help="write the JSON here")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rng = np.random.default_rng(0)
    fit_rows = int(args.memory * 2**30 / (8 * (args.features + 1) * 4))  # rows and copies
    n = min(args.rows, fit_rows)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, args.features - 1))])
    y = X @ rng.standard_normal(args.features) + rng.standard_normal(n)
    report = {"rows": n, "features": args.features, "window": args.window, "rows_per_s": {}}
    candidates = {"streamlsq": _ours, "statsmodels": _statsmodels}
    try:
        import polars_ols  # noqa: F401

        candidates["polars-ols"] = _polars_ols
    except ImportError:
        report["polars-ols"] = "not installed (pip install -e '.[bench]')"
    for name, fn in candidates.items():
        seconds = _timed(lambda fn=fn: fn(X, y, args.window))
        report["rows_per_s"][name] = n / seconds
    per_position = {}
    for window in (int(w) for w in args.windows.split(",")):
        rows = min(n, 4 * window + 2_000)
        if rows <= window:
            continue
        seconds = _timed(lambda rows=rows, window=window: _ours(X[:rows], y[:rows], window))
        per_position[window] = seconds / (rows - window + 1)
    report["seconds_per_position"] = per_position
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return report


if __name__ == "__main__":
    main()
