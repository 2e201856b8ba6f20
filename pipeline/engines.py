"""The two engines that run a recursion over a stream store (DESIGN.md §2).

``sequential``: the state travels, the data stay. One task folds a *segment* of
consecutive chunks (reading the next chunks in background threads while the
current one is folded) and returns the small state, which the next segment's
task takes as input. At most two segments are in flight; the client collects
each segment's recorded coefficients in order and checkpoints them.

``scan`` (recursions with ``supports_scan``): per-piece block sums computed as a
parallel map, an in-order prefix over the small summaries, then independent
solves at the recorded steps, also as a map.

Both read inside the task that consumes the data (never a separate "load"
task, see dask/distributed#7552) and produce identical results to rounding.
This module only moves blocks to kernels: the math is in ``streamlsq.kernels``.
"""

from __future__ import annotations

import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from distributed import Client

from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.recursion import BlockGrid, Recursion

from ._malloc import fast_large_allocations
from .checkpoint import Checkpoint
from .errors import InputError
from .progress import row_bar, track_futures
from .stores import StreamSource

__all__ = ["Trajectory", "plan_segments", "run_scan", "run_sequential"]

#: rows-bytes of X a sequential segment folds in one task (a few seconds of work)
SEGMENT_BYTES = 256 * 2**20
#: rows-bytes of X a scan piece summarises in one task (>= 0.1 s of work)
PIECE_BYTES = 48 * 2**20


@dataclass
class Trajectory:
    """Recorded steps of a run, in order, plus the final state."""

    steps: np.ndarray
    coefs: np.ndarray
    rows_seen: np.ndarray
    state: dict
    diagnostics: dict


def plan_segments(source: StreamSource, grid: BlockGrid, target_bytes: int) -> list[tuple]:
    """Cut the stream into block-aligned segments of about ``target_bytes`` of X each.

    Boundaries sit at the last block edge at or before a chunk boundary, so a
    segment reads whole chunks except where a block straddles two chunks.
    Returns [(k0, k1), ...] block-edge indices; every block belongs to one segment.
    """
    row_bytes = max(source.n_features, 1) * 8
    chunks_per = max(1, int(target_bytes // (source.chunk_rows * row_bytes)))
    cuts = {0, grid.n_blocks}
    for r in source.chunk_edges()[::chunks_per]:
        cuts.add(grid.floor_edge(int(r)))
    cuts = sorted(cuts)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def _chunk_aligned_reads(source: StreamSource, r0: int, r1: int) -> list[tuple[int, int]]:
    c = source.chunk_rows
    bounds = [r0] + [x for x in range((r0 // c + 1) * c, r1, c)] + [r1]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _singular_block_error(source, method, state, X, Y, edges, k, first_row, exc) -> InputError:
    """Find the block that made H singular (error path only) and say how to fix it."""
    j = 0
    for j in range(len(edges) - 1):
        try:
            state = method.update(state, X[edges[j] : edges[j + 1]], Y[edges[j] : edges[j + 1]])
        except SingularMatrixError as e:
            exc = e
            break
    row = first_row + int(edges[j])
    rank = f"numerical rank {exc.rank} of {exc.size}" if exc.rank is not None else str(exc)
    which = "the first block" if k + j == 0 else f"block {k + j + 1}"
    return InputError(
        f"{source.label}: variable 'X' chunk {row // source.chunk_rows}: {which} "
        f"(rows {row}-{first_row + int(edges[j + 1]) - 1}) leaves the normal matrix singular "
        f"({rank}); start from a ridge (--ridge DELTA) or use a larger first block "
        "(--first-block-size)"
    )


def fold_segment(
    source: StreamSource,
    method: Recursion,
    previous,
    k0: int,
    k1: int,
    grid: BlockGrid,
    record_every: int,
    dtype: str,
    prefetch: int = 2,
):
    """Task: fold blocks k0+1..k1 of the stream, starting from ``previous`` (a state or a
    previous segment's result). Returns (rows folded, result dict)."""
    # ``previous`` is the state itself or the (rows, part) result of the previous segment
    state = previous[1]["state"] if isinstance(previous, tuple) else previous
    with fast_large_allocations():
        return _fold_segment(source, method, state, k0, k1, grid, record_every, dtype, prefetch)


def _fold_segment(source, method, state, k0, k1, grid, record_every, dtype, prefetch):
    r0, r1 = grid.edge(k0), grid.edge(k1)
    reads = _chunk_aligned_reads(source, r0, r1)
    steps, coefs, rows, diags = [], [], [], {}
    k = k0
    buf_X = buf_Y = None
    buf_start = r0
    with ThreadPoolExecutor(max_workers=prefetch) as pool:
        pending = deque(pool.submit(source.read, a, b, dtype) for a, b in reads[:prefetch])
        nxt = prefetch
        for _, b in reads:
            X, Y = pending.popleft().result()
            if nxt < len(reads):
                pending.append(pool.submit(source.read, *reads[nxt], dtype))
                nxt += 1
            if buf_X is not None and len(buf_X):
                X, Y = np.concatenate([buf_X, X]), np.concatenate([buf_Y, Y])
            kend = k1 if b >= r1 else min(grid.floor_edge(b), k1)
            if kend > k:
                edges = grid.edges(k, kend) - buf_start
                try:
                    res = method.fold(state, X, Y, edges, k + 1, record_every, buf_start)
                except SingularMatrixError as exc:
                    raise _singular_block_error(
                        source, method, state, X, Y, edges, k, buf_start, exc
                    ) from None
                state = res.state
                steps.append(res.steps)
                coefs.append(res.coefs)
                rows.append(res.rows_seen)
                for name, v in res.diagnostics.items():
                    diags.setdefault(name, []).append(v)
                used = int(edges[-1])
                buf_X, buf_Y = X[used:], Y[used:]
                buf_start += used
                k = kend
            else:
                buf_X, buf_Y = X, Y
    return r1 - r0, {
        "state": state,
        "steps": np.concatenate(steps) if steps else np.zeros(0, np.int64),
        "coefs": np.concatenate(coefs) if coefs else None,
        "rows_seen": np.concatenate(rows) if rows else np.zeros(0, np.int64),
        "diagnostics": {n: np.concatenate(v) for n, v in diags.items()},
    }


def _finish_trajectory(method, parts, state, grid, source) -> Trajectory:
    steps = np.concatenate([p["steps"] for p in parts]) if parts else np.zeros(0, np.int64)
    coef_list = [p["coefs"] for p in parts if p["coefs"] is not None and len(p["coefs"])]
    rows = np.concatenate([p["rows_seen"] for p in parts]) if parts else np.zeros(0, np.int64)
    final = method.coef(state)
    coefs = np.concatenate(coef_list) if coef_list else np.zeros((0, *final.shape), final.dtype)
    names = sorted({n for p in parts for n in p["diagnostics"]})
    diags = {n: np.concatenate([p["diagnostics"][n] for p in parts if n in p["diagnostics"]])
             for n in names}
    if not len(steps) or steps[-1] != grid.n_blocks:
        steps = np.append(steps, grid.n_blocks)
        coefs = np.concatenate([coefs, final[None]])
        rows = np.append(rows, source.n_rows)
        final_diag = getattr(method, "final_diagnostics", None)
        for n in names:
            extra = final_diag(state)[n] if final_diag else np.nan
            diags[n] = np.append(diags[n], extra)
    return Trajectory(steps=steps, coefs=coefs, rows_seen=rows, state=state, diagnostics=diags)


def run_sequential(
    client: Client,
    source: StreamSource,
    method: Recursion,
    grid: BlockGrid,
    record_every: int,
    dtype: str = "float64",
    checkpoint: Checkpoint | None = None,
    progress: bool | None = None,
    segment_bytes: int = SEGMENT_BYTES,
) -> Trajectory:
    """The in-order engine; see the module docstring."""
    segments = plan_segments(source, grid, segment_bytes)
    parts: list[dict] = []
    state = method.init(source.n_features, source.n_targets, np.dtype(dtype))
    start = 0
    if checkpoint is not None:
        checkpoint.bind(segments)
        resumed = checkpoint.load()
        if resumed is not None:
            start, state, parts = resumed
    tag = uuid.uuid4().hex[:8]
    in_flight: deque = deque()
    previous = state
    nxt = start
    with row_bar(source.n_rows, f"fit {method.name} (sequential)", enabled=progress) as bar:
        bar.update(grid.edge(segments[start][0]) if start < len(segments) else source.n_rows)
        while nxt < len(segments) or in_flight:
            while nxt < len(segments) and len(in_flight) < 2:
                k0, k1 = segments[nxt]
                fut = client.submit(
                    fold_segment, source, method, previous, k0, k1, grid, record_every, dtype,
                    key=f"fold-{method.name}-{tag}-{nxt}", pure=False,
                )
                in_flight.append((nxt, fut))
                previous = fut
                nxt += 1
            i, fut = in_flight.popleft()
            try:
                n, part = fut.result()
            except BaseException:
                client.cancel([f for _, f in in_flight])
                raise
            parts.append(part)
            state = part["state"]
            bar.update(n)
            if checkpoint is not None:
                checkpoint.save(i, part)
    return _finish_trajectory(method, parts, state, grid, source)


def _piece_cuts(k0: int, k1: int, record_every: int) -> np.ndarray:
    """Local block counts inside piece (k0, k1] where an interval ends.

    Recorded steps, the piece end, and step 1 (so that a singular first block
    is refused by the scan engine exactly as by the sequential one).
    """
    first = (k0 // record_every + 1) * record_every
    rec = np.arange(first, k1 + 1, record_every, dtype=np.int64)
    extra = [1] if k0 == 0 else []
    return np.unique(np.concatenate([rec, [k1], extra]).astype(np.int64)) - k0


def summarize_piece(source, method, k0, k1, grid, record_every, dtype):
    """Task: read blocks k0+1..k1 and return their interval summaries (small)."""
    r0, r1 = grid.edge(k0), grid.edge(k1)
    with fast_large_allocations():
        X, Y = source.read(r0, r1, dtype)
    edges = grid.edges(k0, k1) - r0
    return r1 - r0, method.summarize(X, Y, edges, _piece_cuts(k0, k1, record_every))


def finish_states(method, infos, steps, label):
    """Task: the independent solves turning information states into states."""
    out = []
    for info, step in zip(infos, steps, strict=True):
        try:
            out.append(method.finish(info))
        except SingularMatrixError as exc:
            which = "the first block" if step == 1 else f"step {step}"
            raise InputError(
                f"{label}: variable 'X': {which} leaves the normal matrix singular (numerical "
                f"rank {exc.rank} of {exc.size}); start from a ridge (--ridge DELTA) or use a "
                "larger first block (--first-block-size)"
            ) from None
    return out


def run_scan(
    client: Client,
    source: StreamSource,
    method: Recursion,
    grid: BlockGrid,
    record_every: int,
    dtype: str = "float64",
    progress: bool | None = None,
    piece_bytes: int = PIECE_BYTES,
) -> Trajectory:
    """The parallel engine: map summaries, prefix in order, map solves."""
    if not getattr(method, "supports_scan", False):
        raise InputError(f"method '{method.name}' has no scan form; use --engine sequential")
    pieces = plan_segments(source, grid, piece_bytes)
    tag = uuid.uuid4().hex[:8]
    futures = [
        client.submit(
            summarize_piece, source, method, k0, k1, grid, record_every, dtype,
            key=f"summarize-{method.name}-{tag}-{i}", pure=False,
        )
        for i, (k0, k1) in enumerate(pieces)
    ]
    results = track_futures(
        client, futures, source.n_rows, f"fit {method.name} (scan)", enabled=progress
    )
    del futures
    summaries = [s for _, piece in results for s in piece]
    ends = np.concatenate(
        [k0 + _piece_cuts(k0, k1, record_every) for k0, k1 in pieces]
    )
    state0 = method.init(source.n_features, source.n_targets, np.dtype(dtype))
    infos = method.scan(method.to_info(state0), summaries)
    keep = [i for i, e in enumerate(ends) if e % record_every == 0 or e == grid.n_blocks]
    solve = sorted(set(keep) | {0})  # index 0 is step 1: checks the first block
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    per = -(-len(solve) // (4 * n_workers))
    groups = [solve[j : j + per] for j in range(0, len(solve), per)]
    solved = client.gather(client.map(
        finish_states,
        [method] * len(groups),
        [[infos[i] for i in g] for g in groups],
        [[int(ends[i]) for i in g] for g in groups],
        [source.label] * len(groups),
        key=[f"solve-{method.name}-{tag}-{j}" for j in range(len(groups))],
        pure=False,
    ))
    by_index = dict(zip(solve, (s for g in solved for s in g), strict=True))
    states = [by_index[i] for i in keep]
    steps = ends[keep]
    coefs = np.stack([method.coef(s) for s in states])
    rows = np.array([int(s["rows"]) for s in states], dtype=np.int64)
    part = {"steps": steps, "coefs": coefs, "rows_seen": rows, "diagnostics": {}}
    return _finish_trajectory(method, [part], states[-1], grid, source)
