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

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import fingerprint_digest
from streamlsq.io.outputs import check_apart
from streamlsq.io.results import prepare_output, write_result
from streamlsq.io.stream import StreamSource, open_stream
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.kernels.recursions.interleaved import (
    InterleavedKF4LLS,
    bias_of_run,
    column_moments,
    estimate_alpha_grid,
    estimate_alpha_means,
    interleaved_block_order,
    merge_column_moments,
    merge_residual_factors,
    residual_factor_mse,
    residual_factor_summaries,
    validate_alpha,
)
from streamlsq.runtime.client import dask_client
from streamlsq.runtime.progress import track_futures
from streamlsq.stream.engines import PIECE_BYTES, bytes_per_call, read_segment
from streamlsq.stream.fit import (
    DEFAULT_RECORDED_STEPS,
    check_run_options,
    run_plan,
    trajectory_dataset,
)
from streamlsq.stream.plans import Section, StreamPlan, plan_segments
from streamlsq.stream.resume import (
    finished_result,
    remove_finished_checkpoint,
    run_fingerprint,
)

__all__ = ["ALPHA_ESTIMATORS", "fit_interleaved", "open_population", "split_store_spec"]

#: ways to estimate α from the three populations (``--estimate-alpha``)
ALPHA_ESTIMATORS = ("means", "grid")


def split_store_spec(spec: str | os.PathLike) -> tuple[str, str | None]:
    """``"path#group"`` → (path, group); a plain path → (path, None)."""
    spec = str(spec)
    if "#" in spec:
        path, group = spec.rsplit("#", 1)
        if not path or not group:
            raise InputError(f"{spec}: expected PATH or PATH#GROUP")
        return path, group
    return spec, None


def open_population(spec: str | os.PathLike) -> StreamSource:
    """Open and validate the stream store (or store group) ``path[#group]``."""
    return open_stream(*split_store_spec(spec))


def _check_alike(first: StreamSource, other: StreamSource) -> None:
    if other.n_features != first.n_features:
        raise InputError(
            f"{other.label}: variable 'X' has {other.n_features} features but {first.label} has "
            f"{first.n_features}; the populations must share their features"
        )
    if other.n_targets != first.n_targets:
        raise InputError(
            f"{other.label}: variable 'y' has {other.n_targets} targets but {first.label} has "
            f"{first.n_targets}; the populations must share their targets"
        )


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


def _test_factor_piece(task, cuts):
    """Dask task: residual factors of the test blocks of one piece, per interval between cuts."""
    X, Y, edges = read_segment(task, np.float64)
    return task.n_rows, residual_factor_summaries(X, Y, edges, cuts)


def _submit_test_factors(client, source: StreamSource, grid: BlockGrid, prefixes) -> tuple:
    """Futures of C's residual factors, cut at the block counts ``prefixes`` (sorted)."""
    plan = StreamPlan.single(source, grid)
    pieces = plan_segments(plan, bytes_per_call(client, PIECE_BYTES))
    futures = []
    for K0, K1 in pieces:
        cuts = sorted({int(j) - K0 for j in prefixes if K0 < j <= K1} | {K1 - K0})
        futures.append(client.submit(_test_factor_piece, plan.segment(K0, K1), cuts, pure=False))
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
    client: Client | None = None,
    scheduler: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    segment_bytes: int | None = None,
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
    out, engine, block_size, record_every, dtype, client, scheduler
        As for :func:`streamlsq.fit_stream`. Both engines apply.
    checkpoint, resume, overwrite, progress, segment_bytes
        As for :func:`streamlsq.fit_stream`.

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
    check_run_options(engine, dtype, checkpoint, resume, record_every)
    if (alpha is None) == (estimate_alpha is None):
        raise InputError("give either --alpha A (a number in [0, 1]) or --estimate-alpha "
                         f"{'|'.join(ALPHA_ESTIMATORS)}, not both or neither")
    if alpha is not None:
        try:
            alpha = validate_alpha(alpha)
        except ValueError as exc:
            raise InputError(f"--alpha: {exc}") from None
    elif estimate_alpha not in ALPHA_ESTIMATORS:
        raise InputError(f"--estimate-alpha must be one of {', '.join(ALPHA_ESTIMATORS)}, "
                         f"got {estimate_alpha!r}")
    elif test is None:
        raise InputError("--estimate-alpha needs the test population (--test C): alpha is "
                         "estimated from the column moments of A, B and C")
    if start not in ("a", "b"):
        raise InputError(f"--start must be 'a' or 'b', got {start!r}")
    src_a, src_b = open_population(a), open_population(b)
    _check_alike(src_a, src_b)
    src_c = r_p = None
    if test is not None:
        src_c = open_population(test)
        _check_alike(src_a, src_c)
        r_p = src_c.read_variable("coef_true")
        if r_p is not None:
            r_p = np.asarray(r_p, dtype=np.float64)
            if r_p.size != src_c.n_features * src_c.n_targets:
                raise InputError(
                    f"{src_c.label}: variable 'coef_true' has shape {r_p.shape}, expected "
                    f"({src_c.n_features}, {src_c.n_targets})"
                )
            r_p = r_p.reshape(src_c.n_features, src_c.n_targets)
            if not np.isfinite(r_p).all():
                raise InputError(f"{src_c.label}: variable 'coef_true' has NaN or Inf")
    input_sources = [src for src in (src_a, src_b, src_c) if src is not None]
    if out is not None and not resume:  # a resumed run may find its result published
        prepare_output(out, overwrite, inputs=input_sources)
    if out is not None and checkpoint is not None:  # the inputs first: they matter most
        check_apart(checkpoint, input_sources, "--checkpoint")
        check_apart(checkpoint, [out], "--checkpoint", of="output")
    grid_a, grid_b = _grid(src_a, block_size), _grid(src_b, block_size)
    grid_c = _grid(src_c, block_size) if src_c is not None else None
    if alpha is not None:
        try:
            InterleavedKF4LLS(alpha, start=start, ridge=ridge, solver=solver)
        except ValueError as exc:
            raise InputError(f"interleaved: {exc}") from None

    order = interleaved_block_order(grid_a.n_blocks, grid_b.n_blocks, start)
    grids = {"a": grid_a, "b": grid_b}
    sections = []
    for pop, i in order:
        g = grids[pop]
        r0, r1 = g.edge(i), g.edge(i + 1)
        sections.append(Section(0 if pop == "a" else 1, r0, r1, BlockGrid(r1 - r0, r1 - r0)))
    used = {p: sum(1 for q, _ in order if q == p) for p in "ab"}
    attrs = {
        "start": start,
        "block_size_a": grid_a.block_size,
        "block_size_b": grid_b.block_size,
        "blocks_a": grid_a.n_blocks,
        "blocks_b": grid_b.n_blocks,
        "blocks_used_a": used["a"],
        "blocks_used_b": used["b"],
        "rows_unused_a": src_a.n_rows - grid_a.edge(used["a"]),
        "rows_unused_b": src_b.n_rows - grid_b.edge(used["b"]),
    }
    roles: tuple[str, ...] = ("a", "b")
    sources: tuple[StreamSource, ...] = (src_a, src_b)
    if src_c is not None:
        attrs.update({"input_test": str(src_c.path), "input_test_group": src_c.group or "",
                      "block_size_test": grid_c.block_size, "blocks_test": grid_c.n_blocks})
    plan = StreamPlan(sources, sections, roles=roles, attrs=attrs,
                      remedy="start from a ridge (--ridge DELTA) or use larger blocks "
                             "(--block-size)")
    if record_every is None:
        record_every = max(1, -(-plan.n_blocks // DEFAULT_RECORDED_STEPS))
    steps = _recorded_steps(plan.n_blocks, record_every)

    with dask_client(client, scheduler, data_bytes=plan.nbytes) as cl:
        estimate = None
        if estimate_alpha is not None:
            estimate = _estimate_alpha(cl, estimate_alpha, src_a, src_b, src_c, progress)
            alpha = estimate.combined
        try:
            rec = InterleavedKF4LLS(alpha, start=start, ridge=ridge, solver=solver)
        except ValueError as exc:
            raise InputError(f"interleaved (estimated alpha {alpha:.6g}): {exc}") from None
        fingerprint = run_fingerprint(plan, rec, record_every, dtype, engine)
        if resume:
            done = finished_result(out, fingerprint)
            if done is not None:
                remove_finished_checkpoint(checkpoint, fingerprint, engine, plan.sources)
                return done
            if out is not None:
                prepare_output(out, overwrite, inputs=input_sources)
        test_futures = None
        if src_c is not None:
            prefixes = np.unique(np.minimum(steps, grid_c.n_blocks))
            test_pieces, test_futures = _submit_test_factors(cl, src_c, grid_c, prefixes)
        traj, seconds, record_every = run_plan(
            plan, rec, engine=engine, record_every=record_every, dtype=dtype, client=cl,
            scheduler=None, checkpoint=checkpoint, resume=resume, progress=progress,
            segment_bytes=segment_bytes,
        )
        if test_futures is not None:
            results = track_futures(cl, test_futures, src_c.n_rows, "test population",
                                    enabled=progress)
            factors = _prefix_factors(test_pieces, prefixes, results)

    ds = trajectory_dataset(traj, rec, plan, record_every, engine, dtype, seconds)
    sec_index = plan.section_of_steps(traj.steps)
    ds["population"] = (("step",), np.array([roles[plan.sections[i].source] for i in sec_index]))
    if src_c is not None:
        mse = []
        for t, psi in zip(traj.steps, traj.coefs, strict=True):
            R, rows = factors[int(min(t, grid_c.n_blocks))]
            mse.append(residual_factor_mse(psi, R, rows))
        ds["test_mse"] = (("step",), np.array(mse))
        ds["test_rows"] = (("step",), np.array(
            [factors[int(min(t, grid_c.n_blocks))][1] for t in traj.steps], dtype=np.int64))
        if r_p is not None:
            ds["bias"] = (("step",), np.array([bias_of_run(psi, r_p) for psi in traj.coefs]))
            ds["coef_true_test"] = (("feature", "target"), r_p)
    if src_c is not None:
        inputs = json.loads(ds.attrs["inputs"])
        inputs.append({"role": "test", "path": str(src_c.path), "group": src_c.group or ""})
        ds.attrs["inputs"] = json.dumps(inputs)
    ds.attrs.update(rec.result_attrs(traj.state))
    ds.attrs["alpha"] = float(alpha)
    ds.attrs["run_fingerprint"] = fingerprint_digest(fingerprint)
    ds.attrs["alpha_source"] = "given" if estimate is None else estimate.method
    if estimate is not None:
        ds["alpha_per_column"] = (("feature",), np.asarray(estimate.per_column))
        if estimate.criterion is not None:
            ds["alpha_criterion"] = (("feature", "alpha_grid"), estimate.criterion)
            ds = ds.assign_coords(alpha_grid=estimate.grid)
    if out is not None:
        write_result(ds, out, overwrite, inputs=input_sources)
        remove_finished_checkpoint(checkpoint, fingerprint, engine, plan.sources)
    return ds
