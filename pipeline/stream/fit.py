"""Fitting a recursion over a stream store: the public ``fit_stream`` and its result layout."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError, check_int
from streamlsq.io.checkpoint import Checkpoint, fingerprint_digest
from streamlsq.io.outputs import check_apart
from streamlsq.io.provenance import provenance
from streamlsq.io.results import prepare_output, write_result
from streamlsq.io.stream import StreamSource, open_stream
from streamlsq.kernels.limits import state_is_finite
from streamlsq.kernels.recursions.contract import BlockGrid, Recursion, ScanRecursion
from streamlsq.runtime.client import dask_client
from streamlsq.stream.engines import Trajectory, run_scan, run_sequential
from streamlsq.stream.methods import make_method, params_from_store
from streamlsq.stream.plans import Section, StreamPlan
from streamlsq.stream.resume import (
    finished_result,
    fit_checkpoint,
    remove_finished_checkpoint,
    run_fingerprint,
)
from streamlsq.stream.stability import add_stability

__all__ = ["fit_stream", "run_plan", "trajectory_dataset", "DEFAULT_RECORDED_STEPS"]

#: with ``record_every=None`` about this many steps are recorded
DEFAULT_RECORDED_STEPS = 1000
ENGINES = ("sequential", "scan")


def fit_stream(
    data: str | os.PathLike,
    method: str | Recursion = "kf4lls",
    *,
    out: str | os.PathLike | None = None,
    group: str | None = None,
    engine: str = "sequential",
    block_size: int | None = None,
    first_block_size: int | None = None,
    record_every: int | None = None,
    epochs: int = 1,
    shuffle: bool = False,
    seed: int = 0,
    dtype: str = "float64",
    client: Client | None = None,
    scheduler: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    segment_bytes: int | None = None,
    **params,
) -> xr.Dataset:
    """Run a recursive estimator over the stream store ``data`` in order.

    Parameters
    ----------
    data : str or os.PathLike
        Path of a stream store (``X (sample, feature)``, ``y (sample, target)``; see
        ``docs/stores.md``).
    method : str or Recursion
        A name of :data:`streamlsq.METHODS` (``"kf4lls"``, ``"rls"``, ``"lms"``,
        ``"bfgs"``, ``"irma"``, ``"irma-gd"``, ``"irma-rls"``) or a configured kernel
        object.
    out : str or os.PathLike or None
        Write the result store here (atomically; ``complete=True`` last).
    group : str or None
        A group inside the store ``data``.
    engine : {"sequential", "scan"}
        ``"sequential"`` (in-order fold, any recursion) or ``"scan"`` (parallel sums
        + prefix, for KF4LLS/RLS); both give the same numbers.
    block_size : int or None
        Rows per step of the recursion (default: the store's ``block_size``
        attribute, else its chunk size). Independent of the chunking.
    first_block_size : int or None
        Rows of the first block (default ``block_size``); a larger first block lets
        H_0 = 0 start with a full-rank block.
    record_every : int or None
        Record the coefficients every this many steps (default: about 1000 steps over
        the run); the final step is always recorded.
    epochs : int
        Passes over the store; the state carries over from one pass to the next
        (LMS: W and the sample counter k, so a decreasing schedule continues). Steps
        are numbered over all epochs (epoch e holds steps e·m+1..(e+1)·m for m blocks
        per epoch; ``first_block_size`` applies to the very first block only) and the
        result has an ``epoch(step)`` variable.
    shuffle, seed : bool, int
        Visit the chunks of epoch e in ``epoch_chunk_order(seed, e, n_chunks, True)``
        and the rows of chunk c in ``chunk_row_permutation(seed, e, c, rows_c, True)``
        (a two-level shuffle that depends only on the seed and the storage chunking,
        not on the workers).
    dtype : str
        Floating-point type of the arithmetic (``"float64"`` or ``"float32"``).
    client, scheduler : distributed.Client or None, str or None
        A Dask client or scheduler address; by default the ``DASK_SCHEDULER_ADDRESS``
        variable, the current default client, or an embedded LocalCluster.
    checkpoint, resume : str or os.PathLike or None, bool
        Commit progress to this folder (a new or empty folder, or a streamlsq
        checkpoint) and, with ``resume``, continue a killed run from it; the folder is
        removed once the result is published to ``out``. Both engines (the scan engine
        commits each piece's summaries). ``resume`` after the result was published
        returns it (attribute ``already_complete``).
    overwrite : bool
        Replace an existing result store at ``out``.
    progress : bool or None
        Show a progress bar (default: only when standard error is a terminal).
    segment_bytes : int or None
        Bytes of X one sequential task folds (default 256 MiB), or one scan task
        summarises (default 96 MiB); the defaults are cut to a sixteenth of the
        smallest worker memory limit. A resumed run keeps the segments of its
        checkpoint.
    **params
        The recursion's parameters, given to its constructor (e.g. ``ridge=1e-3``,
        ``forgetting=0.99``, ``schedule="inverse", rate=0.05, tau=1e4``,
        ``rate="exact"``). The IRMA family takes ``order``, ``domain`` ((a, b), or
        one interval per column of X for a box; default: the store's ``domain``
        attribute) and ``basis`` (``"legendre"``, ``"monomial"`` or a Basis object)
        instead of a basis; its store holds the raw inputs x as X and one target.

    Returns
    -------
    xarray.Dataset
        ``coef (step, feature, target)``, ``rows_seen (step)``, ``epoch (step)``, the
        final state as ``state_*`` variables and the run's attrs. Diagnostics:
        ``cumulative_loss (step)`` for the IRMA family (Σ of the squared pre-update
        errors so far), ``n_skipped (step)`` for BFGS (B updates skipped by the
        curvature safeguard so far, also the attr ``n_skipped``).
        For KF4LLS and RLS with ``diagnostics=True``: the recursive residuals and
        their CUSUM tests (:func:`streamlsq.stream.stability.stability`); KF4LLS and
        RLS results carry the attrs ``condition_number`` (κ of the rows seen) and
        ``digits_trusted``.

    Examples
    --------
    >>> import tempfile, numpy as np, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=20_000, n_features=3,
    ...                                  seed=1)
    >>> ds = streamlsq.fit_stream(path, "kf4lls", block_size=5_000, engine="scan")
    >>> ds.coef.dims, ds.sizes["step"]
    (('step', 'feature', 'target'), 4)
    >>> ds.rows_seen.values.tolist()
    [5000, 10000, 15000, 20000]
    >>> X, Y = streamlsq.open_stream(path).read(0, 20_000)
    >>> bool(np.allclose(ds.coef[-1], np.linalg.lstsq(X, Y, rcond=None)[0]))
    True
    >>> tmp.cleanup()
    """
    check_run_options(engine, dtype, checkpoint, resume, record_every, segment_bytes)
    source = open_stream(data, group)
    rec = make_method(method, **params_from_store(method, params, source.attrs))
    if engine == "scan" and not isinstance(rec, ScanRecursion):
        raise InputError(f"method '{rec.name}' has no scan form; use --engine sequential")
    if engine == "scan" and rec.scan_unavailable():
        raise InputError(f"{rec.name}: {rec.scan_unavailable()}: use --engine sequential")
    check_layout(source, rec, dtype)
    epochs = check_int("epochs", epochs, 1, "a positive integer")
    seed = check_int("seed", seed, 0, "a non-negative integer")
    try:
        size = source.block_size if block_size is None else int(block_size)
        grids = [BlockGrid(source.n_rows, size, first_block_size if e == 0 else None)
                 for e in range(epochs)]
    except ValueError as exc:
        raise InputError(f"{source.label}: {exc}") from None
    sections = [Section(0, 0, source.n_rows, grid, epoch=e, shuffle=bool(shuffle), seed=seed)
                for e, grid in enumerate(grids)]
    plan = StreamPlan((source,), sections, attrs={
        "epochs": epochs, "shuffle": bool(shuffle), "seed": seed,
        "rows_per_epoch": source.n_rows,
    })
    record_every = resolve_record_every(plan, record_every)
    fingerprint = run_fingerprint(plan, rec, record_every, dtype, engine)
    if resume:  # the run being resumed may have published its result before it was killed
        done = finished_result(out, fingerprint)
        if done is not None:
            remove_finished_checkpoint(checkpoint, fingerprint, engine, plan.sources)
            return done
    if out is not None:
        prepare_output(out, overwrite, inputs=plan.sources)
        if checkpoint is not None:  # the inputs first: they matter most
            check_apart(checkpoint, plan.sources, "--checkpoint")
            check_apart(checkpoint, [out], "--checkpoint", of="output")
    with fit_checkpoint(checkpoint, resume, plan, rec, record_every, dtype, engine,
                        Checkpoint) as ckpt:
        traj, seconds, record_every = run_plan(
            plan, rec, engine=engine, record_every=record_every, dtype=dtype, client=client,
            scheduler=scheduler, checkpoint=ckpt, resume=resume, progress=progress,
            segment_bytes=segment_bytes,
        )
        ds = trajectory_dataset(traj, rec, plan, record_every, engine, dtype, seconds)
        ds["epoch"] = (("step",), step_sections(plan, traj.steps, "epoch"))
        ds.attrs.update(rec.result_attrs(traj.state))
        ds = add_stability(ds)  # CUSUM tests, when the fit recorded recursive residuals
        ds.attrs["run_fingerprint"] = fingerprint_digest(fingerprint)
        if out is not None:
            write_result(ds, out, overwrite, inputs=plan.sources)
            if ckpt is not None:
                ckpt.remove()
    return ds


def check_layout(source: StreamSource, rec: Recursion, dtype) -> None:
    """Refuse a store whose shape the recursion cannot take (before any reading)."""
    try:
        rec.check_shape(source.n_features, source.n_targets)
        rec.init(source.n_features, source.n_targets, np.dtype(dtype))
    except ValueError as exc:
        raise InputError(f"{source.label}: {exc}") from None


def check_run_options(engine, dtype, checkpoint, resume, record_every,
                      segment_bytes=None) -> None:
    """Refuse engine/dtype/checkpoint options that cannot work (before any reading)."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'; choose one of {', '.join(ENGINES)}")
    try:
        ok = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        ok = False
    if not ok:
        raise InputError(f"dtype must be float64 or float32, got {dtype}")
    if resume and checkpoint is None:
        raise InputError("--resume needs --checkpoint DIR")
    if record_every is not None:
        check_int("record_every", record_every, 1, "a positive integer")
    if segment_bytes is not None:
        check_int("segment size (bytes)", segment_bytes, 1, "a positive number of bytes")


def resolve_record_every(plan: StreamPlan, record_every: int | None) -> int:
    """The record interval: as given, else about :data:`DEFAULT_RECORDED_STEPS` steps."""
    if record_every is None:
        return max(1, -(-plan.n_blocks // DEFAULT_RECORDED_STEPS))
    return int(record_every)


def step_sections(plan: StreamPlan, steps, attribute: str) -> np.ndarray:
    """The ``attribute`` of the section each step belongs to (e.g. its epoch or source)."""
    return np.array([getattr(plan.sections[i], attribute)
                     for i in plan.section_of_steps(steps)], dtype=np.int64)


def run_plan(
    plan: StreamPlan,
    rec: Recursion,
    *,
    engine: str,
    record_every: int | None,
    dtype: str,
    client: Client | None,
    scheduler: str | None,
    checkpoint,
    resume: bool,
    progress: bool | None,
    segment_bytes: int | None,
) -> tuple[Trajectory, float, int]:
    """Run ``rec`` over ``plan`` with the chosen engine; returns (trajectory, seconds,
    record_every).

    ``checkpoint`` is an open checkpoint (:func:`~streamlsq.stream.resume.fit_checkpoint`)
    or a folder, opened (and its lock released) here. The trajectory is checked finite:
    never a NaN coefficient in a result."""
    record_every = resolve_record_every(plan, record_every)
    with contextlib.ExitStack() as stack:
        if isinstance(checkpoint, str | os.PathLike):
            checkpoint = stack.enter_context(fit_checkpoint(
                checkpoint, resume, plan, rec, record_every, dtype, engine, Checkpoint))
        started = datetime.now(UTC)
        with dask_client(client, scheduler, data_bytes=plan.nbytes) as cl:
            if engine == "scan":
                traj = run_scan(cl, plan, rec, record_every, dtype, progress, segment_bytes,
                                checkpoint=checkpoint)
            else:
                traj = run_sequential(cl, plan, rec, record_every, dtype, checkpoint, progress,
                                      segment_bytes)
    seconds = (datetime.now(UTC) - started).total_seconds()
    check_trajectory(traj, plan)
    return traj, seconds, record_every


def check_trajectory(traj: Trajectory, plan: StreamPlan) -> None:
    """Refuse a trajectory with a non-finite coefficient or final state (the engines name
    the block that broke it; this is the last guard before anything is written)."""
    bad = ~np.isfinite(traj.coefs).reshape(len(traj.coefs), -1).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{plan.label}: the coefficients at step {int(traj.steps[i])} (after "
                         f"{int(traj.rows_seen[i])} rows) are not finite: the data's "
                         "magnitudes overflow float64; rescale the data")
    if not state_is_finite(traj.state):
        raise InputError(f"{plan.label}: the final state is not finite: the data's magnitudes "
                         "overflow float64; rescale the data")


def trajectory_dataset(
    traj: Trajectory,
    rec: Recursion,
    plan: StreamPlan,
    record_every: int,
    engine: str,
    dtype: str,
    seconds: float,
) -> xr.Dataset:
    """The result layout of a stream fit (``docs/stores.md#stream-fit-result``)."""
    n_coef = traj.coefs.shape[1]
    names = None
    coef_names = getattr(rec, "coef_names", None)
    if callable(coef_names):
        names = coef_names(plan.n_features)
    feature = np.asarray(names) if names is not None else np.arange(n_coef)
    ds = xr.Dataset(
        {
            "coef": (("step", "feature", "target"), traj.coefs),
            "rows_seen": (("step",), traj.rows_seen),
        },
        coords={"step": traj.steps, "feature": feature, "target": np.arange(traj.coefs.shape[2])},
    )
    for name, values in traj.diagnostics.items():
        values = np.asarray(values)  # one value per step, or one per step and target
        ds[name] = (("step", "target")[: values.ndim], values)
    for name, dims in rec.state_dims().items():
        value = np.asarray(traj.state[name])
        # a state axis whose length differs from the result's axis of that name gets its own
        dims = tuple(
            d if d not in ds.sizes or ds.sizes[d] == n else f"state_{d}"
            for d, n in zip(dims, value.shape, strict=True)
        )
        ds[f"state_{name}"] = (dims, value)
    first = plan.sections[0].grid
    ds.attrs.update(provenance(rec.name, rec.get_params(), plan.sources, roles=plan.roles,
                               seconds=seconds))
    ds.attrs.update(
        {
            "engine": engine,
            "n_rows": plan.n_rows,
            "block_size": first.block_size,
            "first_block_size": first.first,
            "n_blocks": plan.n_blocks,
            "record_every": record_every,
            "dtype": str(np.dtype(dtype)),
            "rows_per_second": round(plan.n_rows / seconds, 1) if seconds > 0 else None,
        }
    )
    ds.attrs.update(plan.attrs)
    return ds
