"""``streamlsq info``: what is in a store, validated."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np
import zarr

from streamlsq.errors import InputError
from streamlsq.io.formulas import undeclared_level
from streamlsq.io.location import locate
from streamlsq.io.sources import declared_levels, open_stream
from streamlsq.io.stores import (
    array_names,
    check_complete,
    dimension_names,
    get_array,
    group_paths,
    open_group,
    read_checked,
    unwritten_chunks,
)
from streamlsq.kernels.limits import largest_safe_magnitude
from streamlsq.runtime.memory import fast_large_allocations

if TYPE_CHECKING:  # distributed is imported by --check only: `streamlsq info` starts fast
    from distributed import Client

__all__ = ["check_table", "check_tasks", "check_values", "describe", "group_kinds",
           "store_kind"]

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
    if not names and any(True for _ in g.group_keys()):  # simulate interleaved's
        return "groups"
    if "written_by" in g.attrs:  # streamlsq's, no data: a result whose method is gone,
        return "result"  # refused as such by info --check (open_result)
    return "unknown"


def group_kinds(g: zarr.Group) -> dict[str, str]:
    """The kind (:func:`store_kind`) of every group of ``g`` at any depth, by its path in
    ``g`` (``lvl/t``), each group before the groups it holds."""
    return {path: store_kind(g[path]) for path in group_paths(g)}


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
    root = str(path).rstrip("/") or str(path)
    for sub, sub_kind in group_kinds(g).items():
        lines.append(f"  group {sub}/: {sub_kind} (read as {root}#{sub})")
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
    elif kind == CONVERTED:
        state = "complete" if g.attrs.get("complete") is True else "INCOMPLETE (interrupted run)"
        if g.attrs.get("n_rows") is not None:  # not in the claim of a killed publication
            lines.append(f"  {g.attrs.get('n_rows')} rows, one variable per column along "
                         "'row'")
        lines.append(f"  table {g.attrs.get('input')} converted: {state}")
    elif kind == "result":
        state = "complete" if g.attrs.get("complete") is True else "INCOMPLETE (interrupted run)"
        method = g.attrs.get("method")
        lines.append(f"  result of {method or 'an unknown command'}: {state}")
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


def check_values(path: str, client: Client, group: str | None = None) -> int:
    """Read every chunk of a stream store in parallel and refuse NaN/Inf, unreadable chunks and
    values so large that the solvers' sums would overflow
    (:func:`~streamlsq.kernels.limits.largest_safe_magnitude`); returns rows checked."""
    from streamlsq.runtime.progress import track_futures

    loc = locate(path)
    if loc is None or not loc.exists():
        raise InputError(f"{path}: no such store")
    source = open_stream(path, group)
    edges = source.chunk_edges()
    tag = uuid.uuid4().hex[:8]
    futures = [
        client.submit(_check_range, source, int(a), int(b), key=f"check-{tag}-{i}")
        for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))
    ]
    return int(np.sum(track_futures(client, futures, source.n_rows, "check")))


def _check_tasks_chunk(source, chunk, limit):
    """Tasks of ``chunk`` read as a fit of tasks reads them (every chunk file present and
    decodable, NaN/Inf refused by variable, chunk and row) and their values held to
    ``limit``; returns the rows read."""
    from streamlsq.io.tasks import reading_chunk

    with reading_chunk(source, chunk):
        X, y, ptr = source.read_tasks(chunk.lo, chunk.hi, ptr=chunk.ptr)
    r0 = int(chunk.ptr[0])
    for name, A in (("X", X), ("y", y)):
        big = np.abs(A) > limit
        if big.any():
            at = tuple(int(v) for v in np.argwhere(big)[0])
            i = at[0]
            task = chunk.lo + int(np.searchsorted(ptr, i, side="right")) - 1
            raise InputError(
                f"{source.label}: variable '{name}' has |value| {abs(float(A[at])):.3g} "
                f"at row {r0 + i} (task {task}), above {limit:.3g}, where the least-squares "
                f"sums over the store's {source.n_rows} rows overflow float64: rescale the "
                "data")
    return int(ptr[-1])


def check_tasks(path: str, client: Client, group: str | None = None) -> tuple[int, int]:
    """Read every chunk of every variable of a multi-task store, as the task commands read
    it (:func:`~streamlsq.io.tasks.open_tasks`: layout, ``task_ptr``, roles; then the rows
    of every task in parallel: NaN/Inf and values so large that the least-squares sums
    would overflow refused). Returns (rows, tasks) checked."""
    from streamlsq.io.tasks import TRUTH, open_tasks, plan_chunks
    from streamlsq.runtime.progress import track_futures

    source = open_tasks(path, group)
    for name in TRUTH if source.has_truth else ():  # read as stored: every chunk present
        read_checked(source.path, source.group, name, source.array(name), 0,
                     int(source.array(name).shape[0]), source.label)
    ptr = source.task_ptr()
    limit = largest_safe_magnitude(source.n_rows)
    tag = uuid.uuid4().hex[:8]
    futures = [client.submit(_check_tasks_chunk, source, chunk, limit,
                             key=f"check-{tag}-{i}")
               for i, chunk in enumerate(plan_chunks(ptr))]
    return int(np.sum(track_futures(client, futures, source.n_rows, "check"))), source.n_tasks


def _read_column(where: str, path: str, name: str, a: int, b: int) -> int:
    """Rows ``a:b`` of a converted table's column ``name`` read (each chunk file present and
    decodable) from ``where`` (its absolute path or URL; ``path`` as given, for messages);
    returns the missing values among them (NaN, or the empty string)."""
    g = open_group(where, None)
    arr = get_array(g, path, name)
    values = read_checked(where, None, name, arr, a, b, path, remedy="convert the table again")
    if values.dtype.kind == "f":
        return int(np.isnan(values).sum())
    levels = declared_levels(arr.attrs, arr.shape[0], f"{path}: variable '{name}'")
    if levels is not None:  # every value one of the levels the store declares
        import pandas as pd

        column = pd.Series(values.ravel(), dtype=object)
        unknown = np.flatnonzero(~column.isin([*levels, "", None]).to_numpy())
        if unknown.size:
            i = int(unknown[0])
            raise InputError(undeclared_level(path, name, column[i], a + i, levels))
    return int(sum(1 for v in values.ravel() if v == "" or v is None))


def check_table(path: str, client: Client) -> tuple[int, dict[str, int]]:
    """Read every chunk of every column of a table written by ``streamlsq convert`` in
    parallel: a chunk never written or unreadable is refused naming it; missing values (NaN,
    the empty string) are the table's own and are counted, not refused. Returns the rows and
    the missing values of each column that has any."""
    from streamlsq.runtime.progress import track_futures

    g = open_group(path, None)
    # the workers run in a folder of their own: a relative path would name another store
    where = locate(path).url
    names = sorted(array_names(g, path))
    n = int(g.attrs.get("n_rows", 0))
    tag = uuid.uuid4().hex[:8]
    futures = {}
    for name in names:
        arr = get_array(g, path, name)
        check_complete(path, name, arr, dict(g.attrs), path)
        declared_levels(arr.attrs, arr.shape[0], f"{path}: variable '{name}'")
        rows = int(arr.chunks[0]) if arr.ndim else 1
        for i, a in enumerate(range(0, max(int(arr.shape[0]) if arr.ndim else 1, 1), rows)):
            b = min(a + rows, int(arr.shape[0]) if arr.ndim else 1)
            futures[(name, i)] = client.submit(_read_column, where, path, name, a, b,
                                               key=f"check-{tag}-{name}-{i}")
    counts = track_futures(client, list(futures.values()), n, "check")
    missing: dict[str, int] = {}
    for (name, _), count in zip(futures, counts, strict=True):
        missing[name] = missing.get(name, 0) + int(count)
    return n, {k: v for k, v in missing.items() if v}
