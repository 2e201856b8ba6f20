"""Fitting a recursion over a stream store: the public ``fit_stream`` and its result layout."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.errors import InputError, check_int
from streamlsq.io.checkpoint import Checkpoint, fingerprint_digest, prepare_run
from streamlsq.io.provenance import provenance
from streamlsq.io.results import write_result
from streamlsq.io.stream import StreamSource, open_stream
from streamlsq.kernels.limits import state_is_finite
from streamlsq.kernels.recursions.contract import BlockGrid, Recursion, ScanRecursion
from streamlsq.runtime.client import dask_client
from streamlsq.stream.engines import Trajectory, run_scan, run_sequential
from streamlsq.stream.methods import METHODS, make_method, params_from_store
from streamlsq.stream.plans import Section, StreamPlan
from streamlsq.stream.resume import (
    continued_plan,
    continued_result,
    fit_checkpoint,
    join_previous,
    previous_state,
    remove_finished_checkpoint,
    rows_fingerprint,
    run_fingerprint,
)
from streamlsq.stream.stability import add_stability

__all__ = ["fit_stream", "run_plan", "trajectory_dataset", "DEFAULT_RECORDED_STEPS"]

#: with ``record_every=None`` about this many steps are recorded
DEFAULT_RECORDED_STEPS = 1000
ENGINES = ("sequential", "scan")


def fit_stream(
    data,
    method: str | Recursion = "kf4lls",
    *,
    out=None,
    group: str | None = None,
    x=None,
    y=None,
    sample_dim: str | None = None,
    fit_intercept: bool | None = None,
    continue_from=None,
    storage_options: dict | None = None,
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
    data : str, os.PathLike, zarr store or xarray.Dataset
        A stream store (``X (sample, feature)``, ``y (sample, target)``; see
        ``docs/stores.md``): a path, an fsspec URL (``s3://bucket/data.zarr``,
        ``gs://…``; ``storage_options`` for its filesystem) or a zarr store object; or an
        :class:`xarray.Dataset`, lazy (dask-backed, e.g. opened from NetCDF files) or in
        memory.
    method : str or Recursion
        A name of :data:`streamlsq.METHODS` (``"kf4lls"``, ``"rls"``, ``"lms"``,
        ``"bfgs"``, ``"irma"``, ``"irma-gd"``, ``"irma-rls"``) or a configured kernel
        object.
    out : str, os.PathLike, zarr store or None
        Write the result store here (a path, an fsspec URL or a zarr store object;
        atomically: ``complete=True`` last).
    group : str or None
        A group inside the store ``data``.
    x, y : str, list of str or None
        The feature and target variables: one 2-D variable each (default ``"X"`` and
        ``"y"``) or several 1-D variables along ``sample_dim`` (columns as variables,
        ``x=["a", "b", "c"], y="d"``). Feature labels (variable names, or the coordinate
        of X's feature dimension) label ``feature`` in the result.
    sample_dim : str or None
        The dimension along which rows are stored (default ``"sample"``; for a Dataset,
        the one dimension all selected variables share).
    fit_intercept : bool or None
        Fit an intercept, the coefficient labelled ``intercept`` (the first row of
        ``feature``): a constant column prepended to the features (LMS: its own constant
        term). None: the method's default, off for KF4LLS, RLS and BFGS (the store is the
        model), on for LMS; the IRMA family refuses True (the constant function is in its
        basis).
    continue_from : str, os.PathLike, zarr store or None
        A previous result of this fit on the same store, which has grown since along
        ``sample``: the recursion restarts from the final state stored in it and reads
        only the rows after its ``rows_seen``; the result holds the earlier recorded
        steps and the new ones, as one fit over all rows would. Refused when the earlier
        rows changed (chunk stamps of the rows it read) or the method or its options
        differ. The blocks of the new rows start at the earlier run's last row: the
        result equals a fit from scratch to rounding when that row was a block edge (always
        for least squares with KF4LLS and for the per-sample recursions).
    storage_options : dict or None
        Options of the fsspec filesystem of a URL given as ``data``, ``out`` or
        ``continue_from`` (credentials, ``endpoint_url``, …); by default fsspec's and the
        cloud libraries' own configuration (environment variables).
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

    Columns as variables of an in-memory Dataset, with an intercept:

    >>> import xarray as xr
    >>> rng = np.random.default_rng(0)
    >>> table = xr.Dataset({c: ("row", rng.standard_normal(500)) for c in "abc"})
    >>> table["d"] = 2 * table.a - table.c + 3
    >>> fit = streamlsq.fit_stream(table, x=["a", "b", "c"], y="d", sample_dim="row",
    ...                            fit_intercept=True)
    >>> final = fit.coef.isel(step=-1, target=0).round(6) + 0.0  # + 0.0: no -0.0
    >>> dict(zip(final.feature.values.tolist(), final.values.tolist()))
    {'intercept': 3.0, 'a': 2.0, 'b': 0.0, 'c': -1.0}
    >>> tmp.cleanup()
    """
    check_run_options(engine, dtype, checkpoint, resume, record_every, segment_bytes)
    column, params = intercept_options(method, fit_intercept, params)
    source = open_stream(data, group, x=x, y=y, sample_dim=sample_dim, fit_intercept=column,
                         storage_options=storage_options)
    rec = make_method(method, **params_from_store(method, params, source.attrs))
    if engine == "scan" and not isinstance(rec, ScanRecursion):
        raise InputError(f"method '{rec.name}' has no scan form; use --engine sequential")
    if engine == "scan" and rec.scan_unavailable():
        raise InputError(f"{rec.name}: {rec.scan_unavailable()}: use --engine sequential")
    check_layout(source, rec, dtype)
    epochs = check_int("epochs", epochs, 1, "a positive integer")
    seed = check_int("seed", seed, 0, "a non-negative integer")
    previous = None
    if continue_from is not None:
        previous = continued_result(continue_from, source, rec, dtype, block_size, epochs,
                                    shuffle, storage_options)
        plan, record_every = continued_plan(previous, source, record_every)
        if plan is None:  # no row was appended since: the earlier result is the answer
            ds = previous.copy()
            ds.attrs.update({"continued_from": str(continue_from),
                             "rows_continued": int(previous.attrs["n_rows"])})
            for key in ("complete", "written_by", "already_complete"):
                ds.attrs.pop(key, None)
            if out is not None:
                write_result(ds, out, overwrite, inputs=[source],
                             storage_options=storage_options)
            return ds
    else:
        try:
            size = source.block_size if block_size is None else int(block_size)
            grids = [BlockGrid(source.n_rows, size, first_block_size if e == 0 else None)
                     for e in range(epochs)]
        except ValueError as exc:
            raise InputError(f"{source.label}: {exc}") from None
        sections = [Section(0, 0, source.n_rows, grid, epoch=e, shuffle=bool(shuffle),
                            seed=seed) for e, grid in enumerate(grids)]
        plan = StreamPlan((source,), sections, attrs={
            "epochs": epochs, "shuffle": bool(shuffle), "seed": seed,
            "rows_per_epoch": source.n_rows,
        })
    record_every = resolve_record_every(plan, record_every)
    fingerprint = run_fingerprint(plan, rec, record_every, dtype, engine)
    done = prepare_run(out, overwrite, checkpoint, resume, fingerprint, plan.sources,
                       lambda: remove_finished_checkpoint(checkpoint, fingerprint, engine,
                                                          plan.sources),
                       storage_options=storage_options)
    if done is not None:
        return done
    with fit_checkpoint(checkpoint, resume, plan, rec, record_every, dtype, engine,
                        Checkpoint) as ckpt:
        traj, seconds, record_every = run_plan(
            plan, rec, engine=engine, record_every=record_every, dtype=dtype,
            client=client, scheduler=scheduler, checkpoint=ckpt, resume=resume,
            progress=progress, segment_bytes=segment_bytes,
            initial_state=None if previous is None else previous_state(previous, rec),
        )
        ds = trajectory_dataset(traj, rec, plan, record_every, engine, dtype, seconds)
        ds["epoch"] = (("step",), step_sections(plan, traj.steps, "epoch"))
        ds.attrs.update(rec.result_attrs(traj.state))
        if previous is not None:
            ds = join_previous(previous, ds, continue_from)
        ds = add_stability(ds)  # CUSUM tests, when the fit recorded recursive residuals
        ds.attrs["run_fingerprint"] = fingerprint_digest(fingerprint)
        ds.attrs["rows_fingerprint"] = json.dumps(rows_fingerprint(source, source.n_rows))
        if out is not None:
            write_result(ds, out, overwrite, inputs=plan.sources,
                         storage_options=storage_options)
            if ckpt is not None:
                ckpt.remove()
    return ds


def intercept_options(method, fit_intercept, params: dict) -> tuple[bool, dict]:
    """(whether the reading path prepends a constant column, the recursion's parameters)
    for ``fit_intercept``: the column for recursions fitted on X as it is, the kernel's
    own switch for LMS, a refusal where the constant is part of the model (IRMA's basis,
    interleaved KF4LLS's centred blocks)."""
    cls = type(method) if isinstance(method, Recursion) else METHODS.get(method)
    if cls is None:
        return bool(fit_intercept), params
    if fit_intercept is not None and not isinstance(fit_intercept, bool | np.bool_):
        raise InputError(f"fit_intercept must be True, False or None, got {fit_intercept!r}")
    kind = getattr(cls, "intercept_kind", "column")
    if kind in ("basis", "centred"):
        if fit_intercept:
            why = ("the constant function is one of its basis functions" if kind == "basis"
                   else "its blocks are centred")
            raise InputError(f"{cls.name}: --intercept does not apply: {why}")
        return False, params
    flag = cls.default_intercept if fit_intercept is None else bool(fit_intercept)
    if kind == "kernel":
        if isinstance(method, Recursion):
            if fit_intercept is not None and bool(method.intercept) != flag:
                raise InputError(f"{cls.name}: fit_intercept={flag} but the kernel object has "
                                 f"intercept={method.intercept}")
            return False, params
        return False, {**params, "intercept": flag}
    return flag, params

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
    initial_state: dict | None = None,
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
                                checkpoint=checkpoint, initial_state=initial_state)
            else:
                traj = run_sequential(cl, plan, rec, record_every, dtype, checkpoint, progress,
                                      segment_bytes, initial_state=initial_state)
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
    feature = coef_labels(rec, plan.sources[0], n_coef)
    targets = plan.sources[0].targets
    target = (np.asarray(targets) if len(targets) == traj.coefs.shape[2]
              else np.arange(traj.coefs.shape[2]))
    ds = xr.Dataset(
        {
            "coef": (("step", "feature", "target"), traj.coefs),
            "rows_seen": (("step",), traj.rows_seen),
        },
        coords={"step": traj.steps, "feature": feature, "target": target},
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
            "rows_per_second": round(plan.n_new_rows / seconds, 1) if seconds > 0 else None,
        }
    )
    ds.attrs.update(plan.attrs)
    selection = plan.sources[0].selection() if hasattr(plan.sources[0], "selection") else {}
    if selection:
        ds.attrs.update({"x_variables": json.dumps(selection["x"]),
                         "y_variables": json.dumps(selection["y"]),
                         "sample_dim": selection["sample_dim"],
                         "fit_intercept": bool(selection["fit_intercept"]
                                               or getattr(rec, "intercept", False) is True)})
    return ds


def coef_labels(rec: Recursion, source, n_coef: int) -> np.ndarray:
    """Labels of the rows of ``coef``: the basis functions of the IRMA family; else
    ``intercept`` first when one is fitted, then the data's feature labels (their variable
    names or the coordinate of X's feature dimension), or ``x0, x1, …`` beside an
    intercept, or the numbers 0..q−1 when the data name none."""
    kind = getattr(rec, "intercept_kind", "column")
    names = rec.coef_names(n_coef) if kind not in ("column", "kernel") else None
    if names is not None:
        return np.asarray(names)
    if kind == "kernel":
        has_constant = bool(getattr(rec, "intercept", True))
    else:
        has_constant = bool(getattr(source, "intercept", False))
    n_data = n_coef - int(has_constant)
    data = list(getattr(source, "features", ()) or ())
    if len(data) != n_data:
        data = []
    if not has_constant:
        if data:
            ints = all(isinstance(v, int) for v in data)
            return np.asarray(data if ints else [str(v) for v in data])
        if kind == "kernel":  # LMS labels its rows by name
            return np.asarray([f"x{j}" for j in range(n_data)])
        return np.arange(n_coef)
    data = [str(v) for v in data] or [f"x{j}" for j in range(n_data)]
    return np.asarray(["intercept", *data])
