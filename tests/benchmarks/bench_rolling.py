#!/usr/bin/env python
"""Rolling least squares: rows per second of a sliding window, and the cost of a window
position as the window grows.

On one thread and in memory, a window of ``--window`` rows (default 1,000) sliding one row
at a time over ``--rows`` rows (default 10⁷) of ``--features`` features (default 20, the
first a constant) and one target, round-robin over ``--repeat`` rounds (the machine's load
falls on every run alike):

- ``streamlsq``: :func:`streamlsq.kernels.inference.rolling.rolling_fit` (QR factors merged
  by a two-stack queue, no downdating: exact at every window, with every statistic) over
  all the rows, in pieces of ``--piece`` rows (each piece with the window − 1 rows before
  it, as the pipeline's tasks read them; each piece's result dropped before the next);
- ``streamlsq, peer rows``: the same in one call on the rows the peers get, the ratio's
  numerator;
- ``statsmodels``: ``RollingOLS(y, X, window).fit()`` and its ``bse`` (rolling XᵀX, added
  and subtracted; it keeps two k × k matrices a row, so it gets the rows ``--memory`` GB
  hold);
- ``polars-ols``: ``pl.col(y).least_squares.rolling_ols(...)`` (coefficients only), when
  ``polars-ols`` is installed (the ``bench`` extra), on the same rows;

then the seconds per window position of ``streamlsq`` for windows of ``--windows`` rows
(default 100 … 100,000; 3·window + 2,001 positions each): it must not grow with the
window (each position is one merge of two p × p factors and three rows rotated in). Prints
medians and spreads (min–max), the ratios per round, the load average before and after,
with rows per CPU second beside rows per second (the load changes CPU time far less than
wall time), and writes everything as JSON. Not part of the test suite; a small run:

    python tests/benchmarks/bench_rolling.py --rows 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def _rows(piece: int, size: int, features: int, beta: np.ndarray):
    """Rows of piece ``piece`` (its own seed: the same rows whatever the pieces' use)."""
    rng = np.random.default_rng([1, piece])
    X = np.column_stack([np.ones(size), rng.standard_normal((size, features - 1))])
    return X, X @ beta + rng.standard_normal(size)


def _ours(X, y, window):
    from streamlsq.kernels.inference.rolling import rolling_fit

    return rolling_fit(X, y, window, constant=0)


def _statsmodels(X, y, window):
    from statsmodels.regression.rolling import RollingOLS

    fit = RollingOLS(y, X, window=window).fit()
    return fit.bse


def _polars_ols(X, y, window):
    import polars as pl
    import polars_ols  # noqa: F401 - registers the least_squares namespace

    frame = pl.DataFrame({"y": y, **{f"x{j}": X[:, j] for j in range(X.shape[1])}})
    features = [pl.col(f"x{j}") for j in range(X.shape[1])]
    return frame.select(pl.col("y").least_squares.rolling_ols(
        *features, window_size=window, mode="coefficients"))


def _ours_in_pieces(args, beta) -> tuple[float, float]:
    """Seconds and CPU seconds of rolling_fit over ``args.rows`` rows, piece by piece
    (the rows made outside the timer)."""
    seconds, cpu, tail_X, tail_y = 0.0, 0.0, None, None
    for piece, start in enumerate(range(0, args.rows, args.piece)):
        X, y = _rows(piece, min(args.piece, args.rows - start), args.features, beta)
        if tail_X is not None:
            X, y = np.vstack([tail_X, X]), np.concatenate([tail_y, y])
        if len(y) >= args.window:
            started, started_cpu = time.perf_counter(), time.process_time()
            _ours(X, y, args.window)
            seconds += time.perf_counter() - started
            cpu += time.process_time() - started_cpu
        keep = max(0, len(y) - args.window + 1)
        tail_X, tail_y = X[keep:], y[keep:]
    return seconds, cpu


def _spread(values) -> dict:
    v = np.asarray(values, float)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--window", type=int, default=1_000)
    parser.add_argument("--piece", type=int, default=1_000_000,
                        help="rows of one streamlsq call over all the rows")
    parser.add_argument("--memory", type=float, default=2.0,
                        help="GB the peers' rows and results may take")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--windows", default="100,1000,10000,100000",
                        help="window lengths of the cost per position")
    parser.add_argument("--json", type=Path, default=Path("bench_rolling.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("POLARS_MAX_THREADS", "1")  # every run on one thread
    from threadpoolctl import threadpool_limits

    load_before = os.getloadavg()
    k = args.features
    beta = np.random.default_rng(0).standard_normal(k)
    # RollingOLS keeps (XᵀX)⁻¹ and a k × k meat per row, besides params and the rows
    peer_rows = min(args.rows, int(args.memory * 2**30 / (8 * (2 * k * k + 4 * k + 16))))
    X, y = _rows(0, peer_rows, k, beta)
    candidates = {"streamlsq": lambda: _ours_in_pieces(args, beta),
                  "streamlsq, peer rows": lambda: _ours(X, y, args.window),
                  "statsmodels": lambda: _statsmodels(X, y, args.window)}
    report = {"command": "bench_rolling.py " + " ".join(argv or sys.argv[1:]),
              "rows": args.rows, "peer_rows": peer_rows, "features": k,
              "window": args.window, "repeat": args.repeat, "load_before": load_before}
    try:
        import polars_ols  # noqa: F401

        candidates["polars-ols"] = lambda: _polars_ols(X, y, args.window)
    except ImportError:
        report["polars-ols"] = "not installed (pip install -e '.[bench]')"
    rows_of = {name: (args.rows if name == "streamlsq" else peer_rows) for name in candidates}
    windows = [int(w) for w in args.windows.split(",")]
    seconds = {name: [] for name in candidates}
    cpu = {name: [] for name in candidates}
    per_position = {w: [] for w in windows}
    with threadpool_limits(1):
        _ours(X[:3 * k + 10], y[:3 * k + 10], 2 * k)  # compiled (or loaded) outside the timer
        for round_ in range(args.repeat):
            for name, fn in candidates.items():
                started, started_cpu = time.perf_counter(), time.process_time()
                timed = fn()
                elapsed = time.perf_counter() - started
                seconds[name].append(timed[0] if name == "streamlsq" else elapsed)
                cpu[name].append(timed[1] if name == "streamlsq"
                                 else time.process_time() - started_cpu)
            for w in windows:
                rows = 4 * w + 2_000
                Xw, yw = _rows(7, rows, k, beta)
                started = time.perf_counter()
                _ours(Xw, yw, w)
                per_position[w].append((time.perf_counter() - started) / (rows - w + 1))
            print(f"round {round_ + 1}: seconds {[round(v[-1], 2) for v in seconds.values()]}, "
                  f"CPU {[round(v[-1], 2) for v in cpu.values()]}, load {os.getloadavg()[0]:.1f}",
                  flush=True)
    rows_per_s = {name: [rows_of[name] / s for s in seconds[name]] for name in candidates}
    rows_per_cpu_s = {name: [rows_of[name] / s for s in cpu[name]] for name in candidates}
    report["rows_per_s"] = {name: _spread(v) for name, v in rows_per_s.items()}
    report["rows_per_cpu_s"] = {name: _spread(v) for name, v in rows_per_cpu_s.items()}
    peers = [name for name in candidates if name not in ("streamlsq", "streamlsq, peer rows")]
    report["ratio_per_round"] = {
        f"streamlsq / {peer}": _spread(np.asarray(rows_per_s["streamlsq, peer rows"])
                                       / np.asarray(rows_per_s[peer])) for peer in peers}
    report["cpu_ratio_per_round"] = {
        f"streamlsq / {peer}": _spread(np.asarray(rows_per_cpu_s["streamlsq, peer rows"])
                                       / np.asarray(rows_per_cpu_s[peer])) for peer in peers}
    report["seconds_per_position"] = {w: _spread(v) for w, v in per_position.items()}
    report["load_after"] = os.getloadavg()
    print(f"{args.rows:,} rows × {k} features, window {args.window}, {args.repeat} rounds, "
          f"load {load_before[0]:.1f} → {report['load_after'][0]:.1f}")
    print(f"{'run':<24}{'rows':>12}{'rows/s median':>16}{'spread':>26}"
          f"{'rows/CPU s median':>20}{'spread':>26}")
    for name, s in report["rows_per_s"].items():
        c = report["rows_per_cpu_s"][name]
        print(f"{name:<24}{rows_of[name]:>12,}{s['median']:>16,.0f}"
              f"{s['min']:>13,.0f} – {s['max']:<11,.0f}{c['median']:>20,.0f}"
              f"{c['min']:>13,.0f} – {c['max']:<11,.0f}")
    for what in ("ratio_per_round", "cpu_ratio_per_round"):
        for name, s in report[what].items():
            print(f"{what} {name:<34} {s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})")
    for w, s in report["seconds_per_position"].items():
        print(f"window {w:>7,}: {1e6 * s['median']:.2f} µs a position "
              f"({1e6 * s['min']:.2f}–{1e6 * s['max']:.2f})")
    args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
