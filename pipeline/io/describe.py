"""``streamlsq info``: what is in a store, validated."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np
import zarr

from streamlsq.errors import InputError
from streamlsq.io.location import locate
from streamlsq.io.sources import open_stream
from streamlsq.io.stores import (
    array_names,
    dimension_names,
    get_array,
    open_group,
    unwritten_chunks,
)
from streamlsq.kernels.limits import largest_safe_magnitude
from streamlsq.runtime.memory import fast_large_allocations

if TYPE_CHECKING:  # distributed is imported by --check only: `streamlsq info` starts fast
    from distributed import Client

__all__ = ["check_values", "describe", "store_kind"]

#: variables of input stores whose every chunk must have been written
DATA_VARIABLES = {"X", "y", "task_ptr"}


#: the kind of a table written as a store by ``streamlsq convert`` (data, not a result)
CONVERTED = "converted table"


def store_kind(g: zarr.Group) -> str:
    names = set(g.array_keys())
    if g.attrs.get("method") == "convert":  # provenance attributes, like a result's
        return CONVERTED
    if "method" in g.attrs:
        return "result"
    if "task_ptr" in names:
        return "multi-task"
    if {"X", "y"} <= names:
        return "stream"
    if any(True for _ in g.group_keys()):
        return "groups"
    return "unknown"


def describe(path: str) -> str:
    """A readable summary of the store at ``path``; raises InputError if it is invalid."""
    g = open_group(str(path), None)
    names = array_names(g, str(path))  # a member with unreadable metadata: one line
    kind = store_kind(g)
    lines = [f"{path}: {kind} store (Zarr v{g.metadata.zarr_format})"]
    for name in sorted(names):
        a = get_array(g, str(path), name)
        # zarr does not store chunks equal to the fill value: only input data must be whole
        gaps = unwritten_chunks(a).count if name in DATA_VARIABLES and \
            kind not in ("result", CONVERTED) else 0
        missing = f", {gaps} chunks MISSING" if gaps else ""
        lines.append(
            f"  {name:<14} {str(dimension_names(a)):<28} {str(a.shape):<18} {str(a.dtype):<8} "
            f"chunks {a.chunks}{missing}"
        )
    for sub in sorted(g.group_keys()):
        lines.append(f"  group {sub}/: {store_kind(g[sub])}")
    for key, value in sorted(g.attrs.items()):
        text = str(value)
        lines.append(f"  @{key} = {text if len(text) < 120 else text[:117] + '...'}")
    if kind == "stream":
        src = open_stream(path)
        lines.append(
            f"  valid stream: {src.n_rows} rows, {src.n_features} features, {src.n_targets} "
            f"target(s), {len(src.chunk_edges()) - 1} chunks of {src.chunk_rows} rows, "
            f"block size {src.block_size}"
        )
    elif kind in ("result", CONVERTED):
        state = "complete" if g.attrs.get("complete") is True else "INCOMPLETE (interrupted run)"
        what = f"table {g.attrs.get('input')} converted" if kind == CONVERTED else \
            f"result of {g.attrs.get('method')}"
        lines.append(f"  {what}: {state}")
    return "\n".join(lines)


def _check_range(source, a, b):
    with fast_large_allocations():
        X, Y = source.read(a, b)
        limit = largest_safe_magnitude(source.n_rows)
        for name, A in (("X", X), ("y", Y)):
            big = np.abs(A) > limit
            if big.any():
                i, j = (int(v) for v in np.argwhere(big)[0])
                chunk = (a + i) // int(source.array(name).chunks[0])
                raise InputError(
                    f"{source.label}: variable '{name}' chunk {chunk} has |value| "
                    f"{abs(float(A[i, j])):.3g} at row {a + i}, above {limit:.3g}, where the "
                    f"least-squares sums over the store's {source.n_rows} rows overflow "
                    "float64: rescale the data")
    return b - a


def check_values(path: str, client: Client) -> int:
    """Read every chunk of a stream store in parallel and refuse NaN/Inf, unreadable chunks and
    values so large that the solvers' sums would overflow
    (:func:`~streamlsq.kernels.limits.largest_safe_magnitude`); returns rows checked."""
    from streamlsq.runtime.progress import track_futures

    loc = locate(path)
    if loc is None or not loc.exists():
        raise InputError(f"{path}: no such store")
    source = open_stream(path)
    edges = source.chunk_edges()
    tag = uuid.uuid4().hex[:8]
    futures = [
        client.submit(_check_range, source, int(a), int(b), key=f"check-{tag}-{i}")
        for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))
    ]
    return int(np.sum(track_futures(client, futures, source.n_rows, "check")))
