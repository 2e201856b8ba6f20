#!/usr/bin/env python
"""The exact summary of a block of rows: candidate factorisations on one thread, in one run.

The scan engine summarises each interval of rows by the triangular factor A of [X Y]
(AᵀA = [X Y]ᵀ[X Y]); the sequential engine folds a block by the same factorisation
stacked under the factor so far. This script times the candidates on one block (default
160,000 × 20 rows and one target: a chunk of a store written by ``simulate``), one
BLAS thread, round-robin over ``--repeat`` rounds, beside XᵀX of the same rows (what
the normal equations cost), and checks each one's accuracy on rows of condition number
κ = 1e2 … 1e12 (200,000 × 10, singular values log-spaced): the relative error of
ψ = R⁻¹z against ``numpy.linalg.lstsq``, in units of ε·κ (the QR solver promises
≤ 1e3).

Candidates (every one returns the factor with a non-negative diagonal):

- ``before``: the summary before this script (LAPACK ``geqrt`` on 4,096-row slices, each
  copied into a freshly allocated column-major array, the slice factors merged in a
  binary tree, one ``geqrf`` per merge);
- ``kernel``: what ``SqrtInfoLS`` uses now
  (:func:`streamlsq.kernels.tallqr.rows_factor`);
- ``geqrt s=…, nb=…``: one column-major slice buffer reused for every slice, slice
  factors stacked and factored once (a two-level tree), other slice sizes and LAPACK
  block sizes; ``geqrf s=…`` the same with unblocked-panel ``geqrf``;
- ``tpqrt chain s=…``: LAPACK's triangular-pentagonal QR (``dtpqrt``) folds each slice
  into the running factor, the QR of [R; X_slice] without forming the stack;
- ``CholeskyQR2 s=…``: per slice, R₁ = chol(BᵀB), Q = B·R₁⁻¹, R = chol(QᵀQ)·R₁ (Fukaya,
  Nakatsukasa, Yanagisawa & Yamamoto, 2014), falling back to Householder for a slice
  whose R₁ is too ill-conditioned for it (κ(R₁) > 1e4: the bound of the method is
  κ ≲ (m·n·ε)^(-1/2)); ``CholeskyQR2 block``: the same on the whole block, without
  slices.

Writes everything as JSON. Not part of the test suite:

    python tests/benchmarks/bench_summaries.py --repeat 9
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.linalg as sla
from threadpoolctl import threadpool_limits

from streamlsq.kernels.synthetic.streams import stream_design, stream_rows
from streamlsq.kernels.tallqr import rows_factor

EPS = np.finfo(np.float64).eps


def _positive(R):
    R = np.triu(R)
    R[np.diag(R) < 0] *= -1
    return R


def _slices(m, s):
    return [(a, min(a + s, m)) for a in range(0, m, s)]


def before(X, Y):
    """The summary as it was: fresh buffers, a binary tree of geqrf merges."""
    geqrt = sla.get_lapack_funcs("geqrt", dtype=X.dtype)
    p = X.shape[1] + Y.shape[1]
    stack = []
    for a, b in _slices(X.shape[0], 4096):
        B = np.empty((b - a, p), order="F")
        B[:, :X.shape[1]], B[:, X.shape[1]:] = X[a:b], Y[a:b]
        qr = geqrt(max(1, min(8, b - a, p)), B, overwrite_a=1)[0]
        F = np.zeros((p, p))
        k = min(b - a, p)
        F[:k] = np.triu(qr[:k])
        level = 0
        while stack and stack[-1][0] == level:
            F = _merge(stack.pop()[1], F)
            level += 1
        stack.append((level, F))
    return _merge(np.zeros((p, p)), *(F for _, F in stack))


def _merge(*factors):
    qr = sla.lapack.dgeqrf(np.asfortranarray(np.vstack(factors)), overwrite_a=1)[0]
    return _positive(qr[: factors[0].shape[0]])


def _stacked(X, Y, s, factor_slice):
    """Slices copied into one reused column-major buffer, factored by ``factor_slice``,
    their factors stacked and factored once."""
    n, p = X.shape[1], X.shape[1] + Y.shape[1]
    cuts = _slices(X.shape[0], s)
    B = np.empty((s, p), order="F")
    stack = np.zeros((len(cuts) * p, p), order="F")
    for i, (a, b) in enumerate(cuts):
        Bs = B[: b - a] if b - a == s else np.empty((b - a, p), order="F")
        Bs[:, :n], Bs[:, n:] = X[a:b], Y[a:b]
        R = factor_slice(Bs)
        stack[i * p:i * p + R.shape[0]] = R
    return _positive(sla.lapack.dgeqrf(stack, overwrite_a=1)[0][:p])


def geqrt_slices(s, nb):
    geqrt = sla.lapack.dgeqrt

    def factor(B):
        k = min(B.shape)
        return np.triu(geqrt(max(1, min(nb, k)), B, overwrite_a=1)[0][:k])

    return lambda X, Y: _stacked(X, Y, s, factor)


def geqrf_slices(s):
    def factor(B):
        return np.triu(sla.lapack.dgeqrf(B, overwrite_a=1)[0][: min(B.shape)])

    return lambda X, Y: _stacked(X, Y, s, factor)


def tpqrt_chain(s, nb):
    def run(X, Y):
        n, p = X.shape[1], X.shape[1] + Y.shape[1]
        R = np.zeros((p, p), order="F")
        B = np.empty((s, p), order="F")
        for a, b in _slices(X.shape[0], s):
            Bs = B[: b - a] if b - a == s else np.empty((b - a, p), order="F")
            Bs[:, :n], Bs[:, n:] = X[a:b], Y[a:b]
            R = sla.lapack.dtpqrt(0, max(1, min(nb, p, b - a)), R, Bs, overwrite_a=1,
                                  overwrite_b=1)[0]
        return _positive(R)

    return run


def _cholqr2(B):
    """CholeskyQR2 of B (rows × p, C order), or None when B is too ill-conditioned for it."""
    G = B.T @ B
    try:
        R1 = sla.cholesky(G, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    rcond = sla.lapack.dtrcon(R1, norm="1", uplo="U", diag="N")[0]
    if not rcond > 1e-4:
        return None
    Qt = sla.solve_triangular(R1, B.T, trans="T", lower=False, check_finite=False)
    R2 = sla.cholesky(Qt @ Qt.T, lower=False, check_finite=False)
    return R2 @ R1


def cholqr2_slices(s):
    householder = geqrt_slices(s, 8)

    def run(X, Y):
        n, p = X.shape[1], X.shape[1] + Y.shape[1]
        cuts = _slices(X.shape[0], s)
        B = np.empty((s, p))
        stack = np.zeros((len(cuts) * p, p), order="F")
        for i, (a, b) in enumerate(cuts):
            Bs = B[: b - a]
            Bs[:, :n], Bs[:, n:] = X[a:b], Y[a:b]
            R = _cholqr2(Bs) if b - a >= p else None
            if R is None:
                R = householder(X[a:b], Y[a:b])
            stack[i * p:(i + 1) * p] = R
        return _positive(sla.lapack.dgeqrf(stack, overwrite_a=1)[0][:p])

    return run


def cholqr2_block(X, Y):
    R = _cholqr2(np.hstack([X, Y]))
    return geqrt_slices(4096, 8)(X, Y) if R is None else _positive(R)


def candidates() -> dict:
    out = {"before": before, "kernel": lambda X, Y: rows_factor(X, Y)}
    for s in (2048, 4096, 8192):
        for nb in (8, 16):
            out[f"geqrt s={s}, nb={nb}"] = geqrt_slices(s, nb)
    out["geqrf s=4096"] = geqrf_slices(4096)
    for s in (2048, 4096):
        out[f"tpqrt chain s={s}, nb=8"] = tpqrt_chain(s, 8)
    for s in (2048, 4096):
        out[f"CholeskyQR2 s={s}"] = cholqr2_slices(s)
    out["CholeskyQR2 block"] = cholqr2_block
    return out


def ill_conditioned(n_rows, n, kappa, seed):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n_rows, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    X = (U * np.logspace(0, -np.log10(kappa), n)) @ V.T
    Y = X @ rng.standard_normal((n, 1)) + 1e-3 * rng.standard_normal((n_rows, 1))
    return np.ascontiguousarray(X), Y


def accuracy(runs: dict, kappas) -> dict:
    """Relative error of ψ = R⁻¹z against lstsq, in units of ε·κ, per candidate and κ."""
    out = {name: {} for name in runs}
    for kappa in kappas:
        X, Y = ill_conditioned(200_000, 10, kappa, seed=int(np.log10(kappa)))
        ref = np.linalg.lstsq(X, Y, rcond=1e-15)[0]
        for name, fn in runs.items():
            A = fn(X, Y)
            psi = sla.solve_triangular(A[:10, :10], A[:10, 10:])
            err = float(np.linalg.norm(psi - ref) / np.linalg.norm(ref))
            out[name][f"{kappa:.0e}"] = err / (EPS * kappa)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=160_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--repeat", type=int, default=9, help="round-robin rounds")
    p.add_argument("--kappas", type=float, nargs="*",
                   default=[1e2, 1e4, 1e6, 1e8, 1e10, 1e12])
    p.add_argument("--json", default="bench_summaries.json")
    args = p.parse_args()
    design = stream_design(1, args.features, 1, condition=10.0)
    X, Y = stream_rows(1, design, 0, args.rows)
    runs = candidates()
    ref = X.T @ X
    with threadpool_limits(1):
        for name, fn in runs.items():  # warm up, and each is a factor of the rows
            A = fn(X, Y)
            err = np.abs(A[:-1, :-1].T @ A[:-1, :-1] - ref).max() / np.abs(ref).max()
            assert err < 1e-12, f"{name}: not a factor of the rows ({err:.1e})"
        seconds = {name: [] for name in [*runs, "XᵀX (normal equations)"]}
        for _ in range(args.repeat):
            for name, fn in runs.items():
                t = time.perf_counter()
                fn(X, Y)
                seconds[name].append(time.perf_counter() - t)
            t = time.perf_counter()
            X.T @ X
            X.T @ Y
            seconds["XᵀX (normal equations)"].append(time.perf_counter() - t)
        load = os.getloadavg()
        errors = accuracy(runs, args.kappas)
    base = float(np.median(seconds["before"]))
    gram = float(np.median(seconds["XᵀX (normal equations)"]))
    print(f"one block of {args.rows} x {args.features} (+1 target), one BLAS thread, "
          f"{args.repeat} round-robin rounds; load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}\n")
    print(f"{'summary':<26}{'ms (median)':>12}{'spread':>16}{'rows/s':>11}{'/ before':>9}"
          f"{'/ XᵀX':>7}   max error / (ε·κ), κ = 1e2 … 1e12")
    table = {}
    for name, secs in seconds.items():
        s = np.array(secs) * 1e3
        med = float(np.median(s))
        worst = max(errors[name].values()) if name in errors else None
        table[name] = {"ms": secs and [1e3 * v for v in secs], "median_ms": med,
                       "rows_per_s": args.rows / med * 1e3, "vs_before": base * 1e3 / med,
                       "vs_gram": gram * 1e3 / med,
                       "error_in_eps_kappa": errors.get(name)}
        print(f"{name:<26}{med:>12.2f}{f'{s.min():.2f}-{s.max():.2f}':>16}"
              f"{args.rows / med * 1e3:>11.3g}{base * 1e3 / med:>9.2f}{gram * 1e3 / med:>7.2f}"
              f"   {'-' if worst is None else f'{worst:.2g}'}")
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "load_average": load, "results": table}, f,
                  indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
