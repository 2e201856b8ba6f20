"""Synthetic stores written in parallel, one task per chunk, larger than memory if asked.

The numbers come from the pure generators in :mod:`streamlsq.kernels.synthetic`
(reproducible by row index, so the data do not depend on the chunking or the
number of workers); this module only lays out the store and maps chunk writers
over the cluster. Each store is built under a temporary name and renamed into
place when every chunk is written.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import zarr
from distributed import Client

from .cluster import dask_client
from .errors import InputError
from .progress import track_futures
from .stores import consolidate, prepare_output

__all__ = ["simulate_stream", "default_chunk_rows"]

#: about 25 MB of float64 per chunk of X: big enough to amortise a task, small for memory
TARGET_CHUNK_ELEMENTS = 3_200_000


def default_chunk_rows(n_features: int, n_rows: int) -> int:
    return int(max(1, min(n_rows, TARGET_CHUNK_ELEMENTS // max(n_features, 1))))


def _write_stream_chunk(path, seed, design, start, stop, dtype) -> int:
    from streamlsq.kernels.synthetic import stream_rows

    X, Y = stream_rows(seed, design, start, stop, dtype=dtype)
    g = zarr.open_group(path, mode="r+")
    g["X"][start:stop] = X
    g["y"][start:stop] = Y
    return stop - start


def simulate_stream(
    out: str | os.PathLike,
    n_rows: int = 200_000,
    n_features: int = 20,
    n_targets: int = 1,
    *,
    noise: float = 1.0,
    condition: float = 10.0,
    chunk_rows: int | None = None,
    block_size: int | None = None,
    seed: int = 0,
    dtype: str = "float64",
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
) -> Path:
    """Write a synthetic stream store (DESIGN.md §3) and return its path.

    X has ``n_rows`` rows of ``n_features`` correlated Gaussian features with
    condition number about ``condition``; y = X·coef_true + noise·N(0, 1) with
    ``n_targets`` columns. Chunks of ``chunk_rows`` rows (default ≈ 25 MB of X)
    are generated and written in parallel on the cluster.
    """
    from streamlsq.kernels.synthetic import stream_design

    if n_rows < 1 or n_features < 1 or n_targets < 1:
        raise InputError("simulate: rows, features and targets must be positive")
    if np.dtype(dtype).kind != "f":
        raise InputError(f"simulate: dtype must be float32 or float64, got {dtype}")
    try:
        design = stream_design(seed, n_features, n_targets, condition, noise)
    except ValueError as exc:
        raise InputError(f"simulate: {exc}") from None
    chunk_rows = chunk_rows or default_chunk_rows(n_features, n_rows)
    if chunk_rows < 1:
        raise InputError(f"simulate: chunk size must be positive, got {chunk_rows}")
    out = prepare_output(out, overwrite)
    tmp = out.with_name(f".{out.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        g = zarr.open_group(str(tmp), mode="w", zarr_format=3)
        g.attrs.update(
            {
                "generator": "streamlsq.simulate_stream",
                "parameters": {
                    "n_rows": n_rows,
                    "n_features": n_features,
                    "n_targets": n_targets,
                    "noise": noise,
                    "condition": condition,
                    "dtype": str(np.dtype(dtype)),
                },
                "seed": seed,
                "block_size": int(block_size or chunk_rows),
            }
        )
        g.create_array(
            "X", shape=(n_rows, n_features), chunks=(chunk_rows, n_features), dtype=dtype,
            dimension_names=["sample", "feature"], fill_value=np.nan,
        )
        g.create_array(
            "y", shape=(n_rows, n_targets), chunks=(chunk_rows, n_targets), dtype=dtype,
            dimension_names=["sample", "target"], fill_value=np.nan,
        )
        c = g.create_array(
            "coef_true", shape=(n_features, n_targets), dtype="float64",
            dimension_names=["feature", "target"],
        )
        c[...] = design["coef"]
        edges = list(range(0, n_rows, chunk_rows)) + [n_rows]
        with dask_client(client, scheduler) as cl:
            futures = [
                cl.submit(
                    _write_stream_chunk, str(tmp), seed, design, a, b, dtype, pure=False,
                    key=f"simulate-stream-{uuid.uuid4().hex[:6]}-{i}",
                )
                for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))
            ]
            track_futures(cl, futures, total=n_rows, desc="simulate", unit="rows",
                          enabled=progress)
        g.attrs["complete"] = True
        consolidate(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
