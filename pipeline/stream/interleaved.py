"""Interleaved KF4LLS over two stream stores (``docs/algorithms.md``): ``fit_interleaved``.

Population A ("birds") and population B ("fish") are two stream stores, or two
groups of one store written ``path#group`` (e.g. ``sim.zarr#a``). The recursion
sees whole blocks alternately, A₁, B₁, A₂, B₂, … (or B₁, A₁, … with
``start="b"``), each block centred and weighted inside the kernel
(:class:`~streamlsq.kernels.interleaved.InterleavedKF4LLS`). An optional test
population C ("penguins") is evaluated at every recorded step: ``test_mse(step)``
is the mean squared residual of C's raw blocks 1..t under ψ_t, and ``bias(step)``
the mean over coordinates of |ψ_t − r_p| when C holds ``coef_true`` (= r_p).
α is given, or estimated from the three populations' column moments, computed
as a parallel chunked reduction. This module only plans reads and moves blocks
and summaries between stores and kernels.
"""

from __future__ import annotations

import json
import os
from typing import ClassVar, Unpack

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.sources import StreamSource
from streamlsq.io.stores import split_group
from streamlsq.jobs import Context, Run, RunOptions
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.kernels.recursions.interleaved import (
    InterleavedKF4LLS,
    bias_of_run,
    column_moments,
    estimate_alpha_grid,
    estimate_alpha_means,
    merge_column_moments,
    merge_residual_factors,
    residual_factor_mse,
    residual_factor_summaries,
)
from streamlsq.options import Options
from streamlsq.options.fit import (
    ALPHA_ESTIMATORS,
    INTERLEAVED,
    fit_options,
)
from streamlsq.runtime.progress import track_futures
from streamlsq.stream.engines import PIECE_BYTES, bytes_per_call, read_span
from streamlsq.stream.fit import StreamFit, check_layout
from streamlsq.stream.plans import StreamPlan, plan_segments

__all__ = ["ALPHA_ESTIMATORS", "InterleavedFit", "fit_interleaved", "open_population",
           "split_store_spec"]

def split_store_spec(spec: str | os.PathLike) -> tuple[str, str | None]:
    """``"path#group"`` → (path, group); a plain path → (path, None)."""
    path, group = split_group(str(spec))
    return str(path), group


def open_population(run: Run, spec: str | os.PathLike) -> StreamSource:
    """Open and validate the stream store (or store group) ``path[#group]``, by ``run`` (with
    its storage options)."""
    return run.open_input("stream", *split_store_spec(spec))


def _grid(source: StreamSource, block_size: int | None) -> BlockGrid:
    size = source.block_size if block_size is None else int(block_size)
    try:
        return BlockGrid(source.n_rows, size)
    except ValueError as exc:
        raise InputError(f"{source.label}: {exc}") from None


def _recorded_steps(n_blocks: int, record_every: int) -> np.ndarray:
    """The steps the engines record: multiples of ``record_every`` and the last step."""
    steps = np.arange(record_every, n_blocks + 1, record_every, dtype=np.int64)
    return np.unique(np.append(steps, n_blocks))


# -- α from column moments: a parallel chunked reduction ----------------------------------


def _moments_piece(source: StreamSource, r0: int, r1: int):
    """Dask task: column moments of rows r0:r1 of X, one chunk at a time, merged in order."""
    acc = None
    c = source.chunk_rows
    for a in range(r0, r1, c):
        m = column_moments(source.read_features(a, min(a + c, r1)))
        acc = m if acc is None else merge_column_moments(acc, m)
    return r1 - r0, acc


def population_moments(client: Client, source: StreamSource, progress=None):
    """:class:`~streamlsq.kernels.interleaved.ColumnMoments` of a store's X, on the cluster."""
    chunks = BlockGrid(source.n_rows, source.chunk_rows)
    pieces = plan_segments(StreamPlan.single(source, chunks), bytes_per_call(client, PIECE_BYTES))
    futures = [
        client.submit(_moments_piece, source, chunks.edge(K0), chunks.edge(K1), pure=False)
        for K0, K1 in pieces
    ]
    results = track_futures(client, futures, source.n_rows, f"moments {source.label}",
                            enabled=progress)
    acc = results[0][1]
    for _, m in results[1:]:
        acc = merge_column_moments(acc, m)
    return acc


def _estimate_alpha(client, how, a, b, c, progress):
    mom = [population_moments(client, s, progress) for s in (a, b, c)]
    try:
        if how == "means":
            return estimate_alpha_means(mom[0].mean, mom[1].mean, mom[2].mean)
        return estimate_alpha_grid(*mom)
    except ValueError as exc:
        hint = " (--estimate-alpha grid)" if how == "means" else ""
        raise InputError(f"{a.label}, {b.label}, {c.label}: variable 'X': {exc}{hint}") from None


# -- the test population: QR factors of C's blocks 1..t -----------------------------------


def _test_factor_piece(span, cuts):
    """Dask task: residual factors of the test blocks of one piece, per interval between cuts."""
    X, Y, _, edges = read_span(span, np.float64)
    return span.n_rows, residual_factor_summaries(X, Y, edges, cuts)


def _submit_test_factors(client, source: StreamSource, grid: BlockGrid, prefixes) -> tuple:
    """Futures of C's residual factors, cut at the block counts ``prefixes`` (sorted)."""
    plan = StreamPlan.single(source, grid)
    pieces = plan_segments(plan, bytes_per_call(client, PIECE_BYTES))
    futures = []
    for K0, K1 in pieces:
        cuts = sorted({int(j) - K0 for j in prefixes if K0 < j <= K1} | {K1 - K0})
        futures.append(client.submit(_test_factor_piece, plan.span(K0, K1), cuts, pure=False))
    return pieces, futures


def _prefix_factors(pieces, prefixes, results) -> dict:
    """{block count j: (R, rows)} for the factor of test blocks 1..j, for every j in prefixes."""
    out = {}
    R, rows = None, 0
    want = set(int(j) for j in prefixes)
    for (K0, _), (_, summaries) in zip(pieces, results, strict=True):
        end = K0
        for s in summaries:
            R = s["R"] if R is None else merge_residual_factors(R, s["R"])
            rows += int(s["rows"])
            end += int(s["blocks"])
            if end in want:
                out[end] = (R, rows)
    return out


# -- the fit ------------------------------------------------------------------------------


def fit_interleaved(
    a: str | os.PathLike,
    b: str | os.PathLike,
    *,
    alpha: float | None = None,
    estimate_alpha: str | None = None,
    test: str | os.PathLike | None = None,
    start: str = "a",
    ridge: float = 0.0,
    solver: str = "qr",
    out: str | os.PathLike | None = None,
    engine: str = "sequential",
    block_size: int | None = None,
    record_every: int | None = None,
    dtype: str = "float64",
    segment_bytes: int | None = None,
    **run: Unpack[RunOptions],
) -> xr.Dataset:
    """Interleaved KF4LLS on populations ``a`` and ``b`` (paths, or ``path#group``).

    Parameters
    ----------
    a, b : str or os.PathLike
        The two training populations (stream stores with the same features and
        targets). Blocks: each store's ``block_size`` attribute (else its chunk size),
        or ``block_size`` for all stores; the last block of a store may be shorter.
    alpha : float or None
        The mixing weight in [0, 1] (the test population is α·A + (1−α)·B); give it
        or ``estimate_alpha``.
    estimate_alpha : {"means", "grid"} or None
        ``"means"`` (ratio of the column means, combined by least squares over the
        columns) or ``"grid"`` (grid search over [0, 1] per column on the first two
        moments); needs ``test``. The estimate is stored as
        ``alpha_per_column(feature)`` and the attrs ``alpha`` (the combined value that
        was used) and ``alpha_source``.
    test : str or os.PathLike or None
        The test population C. Adds ``test_mse(step)`` (mean squared residual of C's
        raw blocks 1..t under ψ_t; once C has no block t left, all of C) and, when C
        holds ``coef_true`` (r_p), ``bias(step)`` = mean over coordinates of
        |ψ_t − r_p|.
    start : {"a", "b"}
        ``"a"`` (A₁, B₁, A₂, …) or ``"b"`` (B₁, A₁, B₂, …).
    ridge : float
        δ of a ridge start H₀ = δI (0: the paper's H₀ = 0).
    solver : {"qr", "normal"}
        ``"qr"`` (square-root information form, the default) or ``"normal"`` (normal
        equations), as for :class:`~streamlsq.kernels.KF4LLS`.
    out, engine, block_size, record_every, dtype, segment_bytes
        As for :func:`streamlsq.fit_stream`. Both engines apply.
    **run
        The options of the run around the fit (:class:`streamlsq.jobs.RunOptions`).

    Returns
    -------
    xarray.Dataset
        ``coef (step, feature, target)`` (ψ), ``rows_seen (step)``, ``population
        (step)`` ("a"/"b", the block of that step), the diagnostics above, the final
        state and the attrs of the run.

    Notes
    -----
    Populations of unequal length: the stream alternates strictly and stops when the
    population due next has no block left
    (:func:`~streamlsq.kernels.recursions.interleaved.interleaved_block_order`), so the
    surplus blocks of the longer population are not used; the attrs ``blocks_used_a``,
    ``blocks_used_b``, ``rows_unused_a`` and ``rows_unused_b`` say how much was left.

    Bad input (α outside [0, 1], populations with different features or targets, a
    test population missing when α is to be estimated) raises :class:`InputError`
    before anything is written. The method is described in ``docs/algorithms.md``
    (interleaved KF4LLS; John & Wu, 2023).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> pop = streamlsq.simulate_interleaved(f"{tmp.name}/pop.zarr", n=50, q=3, steps=4)
    >>> ds = streamlsq.fit_interleaved(f"{pop}#a", f"{pop}#b", alpha=0.25, test=f"{pop}#c")
    >>> ds.attrs["alpha"], ds.sizes["step"], "test_mse" in ds
    (0.25, 8, True)
    >>> tmp.cleanup()
    """
    given = {name: value for name, value in locals().items() if name in InterleavedFit.options}
    return Run(out, **run).execute(InterleavedFit.build([a, b], "interleaved-kf4lls", given))


class InterleavedFit(StreamFit):
    """Interleaved KF4LLS over populations A and B (:func:`fit_interleaved`): a stream fit
    whose α may first be estimated from the column moments of A, B and the test population
    C (a parallel chunked reduction), and whose recorded steps are then scored on C."""

    #: a fit of two stores, the recursion's parameters, and its own: the test population
    #: and α given or estimated (the mixing weight in place of the statistics' alpha)
    options: ClassVar[Options] = fit_options(InterleavedKF4LLS.params, several=True,
                                             own=INTERLEAVED)

    def open(self, run) -> list:
        given = self.params.get("alpha")
        if given is None:  # a provisional α until it is estimated (checks the layout)
            self.params["alpha"] = 0.5
        sources = super().open(run)
        self.params["alpha"] = given
        self.test_source = self.truth = None
        if self.test is not None:
            self.test_source = open_population(run, self.test)
            check_layout([sources[0], self.test_source], self.recursion, self.dtype)
            self.truth = read_truth(self.test_source)
        return sources + ([self.test_source] if self.test is not None else [])

    def open_sources(self, fit_intercept: bool, run: Run) -> list:
        return [open_population(run, spec) for spec in self.data]

    def fingerprint(self) -> dict:
        fp = super().fingerprint()
        if self.estimate_alpha is not None:  # α is computed from the inputs: name how
            params = {**self.recursion.get_params(), "alpha": f"estimate:{self.estimate_alpha}"}
            fp["parameters"] = json.dumps(params, sort_keys=True, default=str)
        if self.test_source is not None:
            fp["test"] = [self.test_source.identity(), self.test_source.group or "",
                          f"token:{self.test_source.token}"]
        return fp

    def input_roles(self) -> list[str]:
        return [*super().input_roles(), *(["test"] if self.test_source is not None else [])]

    @classmethod
    def notes(cls, ds: xr.Dataset) -> list[str]:
        notes = [f"alpha {ds.attrs['alpha']:.4g}", *super().notes(ds)]
        if "test_mse" in ds:
            notes.append(f"final test MSE {float(ds.test_mse[-1]):.4g}")
        return notes

    def compute(self, ctx: Context) -> xr.Dataset:
        estimate = None
        if self.estimate_alpha is not None:
            estimate = _estimate_alpha(ctx.client, self.estimate_alpha, *self.sources,
                                       self.test_source, ctx.progress)
            self.recursion = interleaved_recursion(estimate.combined, self.params)
        scoring = None
        if self.test_source is not None:  # scored on C while the fit runs
            steps = _recorded_steps(self.plan.n_blocks, self.record_every)
            scoring = TestScoring(ctx.client, self.test_source, self.block_size, steps)
        ds = super().compute(ctx)
        sec_index = self.plan.section_of_steps(ds.step.values)
        ds["population"] = (("step",), np.array(
            [self.plan.roles[self.plan.sections[i].source] for i in sec_index]))
        if scoring is not None:
            scoring.add_to(ds, ctx.progress, self.truth)
        ds.attrs.update({"start": self.recursion.start, "alpha": float(self.recursion.alpha),
                         "alpha_source": "given" if estimate is None else estimate.method})
        if estimate is not None:
            add_alpha_estimate(ds, estimate)
        return ds


def interleaved_recursion(alpha: float, params: dict) -> InterleavedKF4LLS:
    """The recursion with an estimated α (refused in one line when it cannot run)."""
    try:
        return InterleavedKF4LLS(alpha, start=params.get("start", "a"),
                                 ridge=params.get("ridge", 0.0),
                                 solver=params.get("solver", "qr"))
    except ValueError as exc:
        raise InputError(f"interleaved (estimated alpha {alpha:.6g}): {exc}") from None


def read_truth(source: StreamSource) -> np.ndarray | None:
    """The test population's ``coef_true`` (r_p), checked, or None when it has none."""
    r_p = source.read_variable("coef_true")
    if r_p is None:
        return None
    r_p = np.asarray(r_p, dtype=np.float64)
    if r_p.size != source.n_features * source.n_targets:
        raise InputError(f"{source.label}: variable 'coef_true' has shape {r_p.shape}, "
                         f"expected ({source.n_features}, {source.n_targets})")
    if not np.isfinite(r_p).all():
        raise InputError(f"{source.label}: variable 'coef_true' has NaN or Inf")
    return r_p.reshape(source.n_features, source.n_targets)


def add_alpha_estimate(ds: xr.Dataset, estimate) -> None:
    ds["alpha_per_column"] = (("feature",), np.asarray(estimate.per_column))
    if estimate.criterion is not None:
        ds["alpha_criterion"] = (("feature", "alpha_grid"), estimate.criterion)
        ds.coords["alpha_grid"] = estimate.grid


class TestScoring:
    """The test population's residual factors of blocks 1..t for every recorded step t
    (submitted when built, so they are computed while the fit runs), and the scores they
    give: ``test_mse (step)``, ``test_rows (step)`` and, with the truth, ``bias (step)``."""

    def __init__(self, client, source: StreamSource, block_size, steps):
        self.client, self.source = client, source
        self.grid = _grid(source, block_size)
        self.prefixes = np.unique(np.minimum(steps, self.grid.n_blocks))
        self.pieces, self.futures = _submit_test_factors(client, source, self.grid,
                                                         self.prefixes)

    def add_to(self, ds: xr.Dataset, progress, truth) -> None:
        results = track_futures(self.client, self.futures, self.source.n_rows,
                                "test population", enabled=progress)
        factors = _prefix_factors(self.pieces, self.prefixes, results)
        at = [factors[int(min(t, self.grid.n_blocks))] for t in ds.step.values]
        ds["test_mse"] = (("step",), np.array(
            [residual_factor_mse(psi, R, rows) for psi, (R, rows) in zip(
                ds.coef.values, at, strict=True)]))
        ds["test_rows"] = (("step",), np.array([rows for _, rows in at], dtype=np.int64))
        if truth is not None:
            ds["bias"] = (("step",), np.array([bias_of_run(psi, truth) for psi in ds.coef.values]))
            ds["coef_true_test"] = (("feature", "target"), truth)
        ds.attrs.update({"input_test": str(self.source.path),
                         "input_test_group": self.source.group or "",
                         "block_size_test": self.grid.block_size,
                         "blocks_test": self.grid.n_blocks})
