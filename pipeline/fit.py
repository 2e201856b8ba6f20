"""Fitting a recursion over a stream store: the public ``fit_stream`` and its result layout."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import xarray as xr
from distributed import Client

from streamlsq.kernels.recursion import BlockGrid, Recursion

from .checkpoint import Checkpoint
from .cluster import dask_client
from .engines import Trajectory, run_scan, run_sequential
from .errors import InputError
from .methods import make_method
from .stores import StreamSource, open_stream, prepare_output, write_result

__all__ = ["fit_stream", "DEFAULT_RECORDED_STEPS"]

#: with ``record_every=None`` about this many steps are recorded
DEFAULT_RECORDED_STEPS = 1000
ENGINES = ("sequential", "scan")


def _version() -> str:
    from . import __version__

    return __version__


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
    data : path of a stream store (``X (sample, feature)``, ``y (sample, target)``).
    method : ``"kf4lls"``, ``"rls"``, … or a configured kernel object; ``params``
        go to its constructor (e.g. ``ridge=1e-3``, ``forgetting=0.99``).
    engine : ``"sequential"`` (in-order fold, any recursion) or ``"scan"``
        (parallel sums + prefix, for KF4LLS/RLS); both give the same numbers.
    block_size : rows per step of the recursion (default: the store's
        ``block_size`` attribute, else its chunk size). Independent of the chunking.
    first_block_size : rows of the first block (default ``block_size``); a larger
        first block lets H_0 = 0 start with a full-rank block.
    record_every : record the coefficients every this many steps (default: about
        1000 steps over the run); the final step is always recorded.
    out : write the result store here (atomically; ``complete=True`` last).
    checkpoint, resume : sequential engine only: commit progress to this folder
        and, with ``resume``, continue a killed run from it.
    segment_bytes : bytes of X one sequential task folds (default 256 MiB), or one
        scan task summarises (default 48 MiB).
    client, scheduler : a Dask client or scheduler address; by default the
        ``DASK_SCHEDULER_ADDRESS`` variable, the current default client, or an
        embedded LocalCluster.

    Returns
    -------
    xarray.Dataset with ``coef (step, feature, target)``, ``rows_seen (step)``,
    the final state as ``state_*`` variables and the run's attrs.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'; choose one of {', '.join(ENGINES)}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise InputError(f"dtype must be float64 or float32, got {dtype}")
    source = open_stream(data, group)
    rec = make_method(method, **params)
    if out is not None:
        prepare_output(out, overwrite)
    if checkpoint is not None and engine != "sequential":
        raise InputError("--checkpoint works with the sequential engine")
    if resume and checkpoint is None:
        raise InputError("--resume needs --checkpoint DIR")
    try:
        size = source.block_size if block_size is None else int(block_size)
        grid = BlockGrid(source.n_rows, size, first_block_size)
    except ValueError as exc:
        raise InputError(f"{source.label}: {exc}") from None
    if record_every is None:
        record_every = max(1, -(-grid.n_blocks // DEFAULT_RECORDED_STEPS))
    if record_every < 1:
        raise InputError(f"record_every must be a positive integer, got {record_every}")

    started = datetime.now(UTC)
    with dask_client(client, scheduler) as cl:
        if engine == "scan":
            traj = run_scan(cl, source, rec, grid, record_every, dtype, progress,
                            **({"piece_bytes": segment_bytes} if segment_bytes else {}))
        else:
            ckpt = None
            if checkpoint is not None:
                ckpt = Checkpoint(checkpoint, _fingerprint(source, rec, grid, record_every, dtype),
                                  resume=resume)
            traj = run_sequential(cl, source, rec, grid, record_every, dtype, ckpt, progress,
                                  **({"segment_bytes": segment_bytes} if segment_bytes else {}))
    seconds = (datetime.now(UTC) - started).total_seconds()
    ds = trajectory_dataset(traj, rec, source, grid, record_every, engine, dtype, seconds)
    if out is not None:
        write_result(ds, out, overwrite)
    return ds


def _fingerprint(source: StreamSource, rec: Recursion, grid: BlockGrid, record_every, dtype):
    return {
        "input": str(Path(source.path).resolve()),
        "group": source.group,
        "shape": [source.n_rows, source.n_features, source.n_targets],
        "method": rec.name,
        "parameters": json.dumps(rec.get_params(), sort_keys=True, default=str),
        "blocks": [grid.block_size, grid.first],
        "record_every": record_every,
        "dtype": str(np.dtype(dtype)),
    }


def trajectory_dataset(
    traj: Trajectory,
    rec: Recursion,
    source: StreamSource,
    grid: BlockGrid,
    record_every: int,
    engine: str,
    dtype: str,
    seconds: float,
) -> xr.Dataset:
    """The result layout of DESIGN.md §3 for a stream fit."""
    n_coef = traj.coefs.shape[1]
    names = None
    coef_names = getattr(rec, "coef_names", None)
    if callable(coef_names):
        names = coef_names(source.n_features)
    feature = np.asarray(names) if names is not None else np.arange(n_coef)
    ds = xr.Dataset(
        {
            "coef": (("step", "feature", "target"), traj.coefs),
            "rows_seen": (("step",), traj.rows_seen),
        },
        coords={"step": traj.steps, "feature": feature, "target": np.arange(traj.coefs.shape[2])},
    )
    for name, values in traj.diagnostics.items():
        ds[name] = (("step",), np.asarray(values))
    for name, dims in rec.state_dims().items():
        value = np.asarray(traj.state[name])
        # a state axis whose length differs from the result's axis of that name gets its own
        dims = tuple(
            d if d not in ds.sizes or ds.sizes[d] == n else f"state_{d}"
            for d, n in zip(dims, value.shape, strict=True)
        )
        ds[f"state_{name}"] = (dims, value)
    ds.attrs.update(
        {
            "method": rec.name,
            "parameters": json.dumps(rec.get_params(), sort_keys=True, default=str),
            "engine": engine,
            "input": str(source.path),
            "input_group": source.group or "",
            "n_rows": source.n_rows,
            "block_size": grid.block_size,
            "first_block_size": grid.first,
            "n_blocks": grid.n_blocks,
            "record_every": record_every,
            "dtype": str(np.dtype(dtype)),
            "seconds": round(seconds, 3),
            "rows_per_second": round(source.n_rows / seconds, 1) if seconds > 0 else None,
            "streamlsq_version": _version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )
    return ds
