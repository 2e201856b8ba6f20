"""The two engines that run a recursion over a stream store (``docs/architecture.md``).

``sequential``: the state travels, the data stay. One task folds a *segment* of
consecutive chunks (reading the next chunks in background threads while the
current one is folded) and returns the small state, which the next segment's
task takes as input. At most two segments are in flight; the client collects
each segment's recorded coefficients in order and checkpoints them.

``scan`` (recursions derived from ``ScanRecursion``): per-piece block sums computed as a
parallel map, an in-order prefix over the small summaries, then independent
solves at the recorded steps, also as a map. The pieces (about one chunk each) fix the
summaries and so the numbers; a Dask task summarises several consecutive pieces one after
another, as many as the data and the workers call for
(:func:`~streamlsq.runtime.reduce.task_bytes`): the same bits for every task size and
worker count, and a task's memory is one piece's whatever its size.

Both run over a :class:`~streamlsq.plans.StreamPlan`: the virtual stream of
blocks the recursion sees (one store in storage order, several epochs in a
seeded shuffled order, or whole blocks alternating between two stores). A task
reads whole chunks (one read per chunk, shared by the blocks that use it; the
sequential engine prefetches the next chunks in background threads) and cuts
them into the plan's blocks.

Both read inside the task that consumes the data (never a separate "load"
task, see dask/distributed#7552) and produce identical results to rounding.
This module only moves blocks to kernels: the math is in ``streamlsq.kernels``.
"""

from __future__ import annotations

import uuid
from collections import deque
from concurrent.futures import wait
from dataclasses import dataclass

import numpy as np
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import Checkpoint
from streamlsq.io.sources import StreamSource
from streamlsq.kernels.limits import state_is_finite
from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.recursions.contract import BadRowError, Recursion, ScanRecursion
from streamlsq.runtime.client import setting
from streamlsq.runtime.memory import fast_large_allocations, read_ahead_pool
from streamlsq.runtime.progress import row_bar, track_futures
from streamlsq.runtime.reduce import task_bytes, units_per_task, worker_threads
from streamlsq.stream.guards import (
    NonFiniteSolve,
    nonfinite_error,
    overflow_error,
    overflow_in_rows,
    rank_phrase,
    source_labels,
    subnormal_in_rows,
)
from streamlsq.stream.plans import BlockSpan, Section, StreamPlan, plan_segments

__all__ = [
    "Trajectory", "plan_segments", "overflow_in_span", "read_span", "run_scan",
    "run_sequential", "bytes_per_call", "scan_tasks", "solve_groups", "solves_per_task",
    "stack_rows",
    "subnormal_coefficients_error", "summarize_pieces",
]

#: rows-bytes of X a sequential segment folds in one Dask task (a few seconds of work)
SEGMENT_BYTES = 256 * 2**20
#: rows-bytes of X a scan piece summarises at once: about one chunk of the default size
#: (25 MB of X), summarised right after it is decoded (96 MiB pieces concatenated 4 decoded
#: chunks and faulted in more pages). A Dask task summarises several pieces one after
#: another (:func:`scan_tasks`), so that the scheduler's cost per task stays small on many
#: workers (docs/performance.md#scaling)
PIECE_BYTES = 32 * 2**20
#: a Dask task's bytes may be at most this share of the smallest worker memory limit
MEMORY_SHARE = 1 / 16


def bytes_per_call(client: Client, default: int) -> int:
    """``default``, or less on workers with a small memory limit.

    A scan piece holds its rows more than twice at its peak (decoded chunks and
    their concatenation) on top of the worker's libraries (about 250 MB);
    distributed pauses a worker at 80% of its limit and restarts it at 95%.
    Measured on 600 MB workers (7,000,000 × 24 rows, 10 MB chunks): a sixteenth of
    the limit peaks at 385 MB; an eighth peaked at 501 MB here and, on the loaded
    CI machine, once went past 570 MB and had the worker restarted.
    """
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    limits = [m for m in limits if m > 0]
    if not limits:
        return default
    return max(1, min(default, int(min(limits) * MEMORY_SHARE)))


@dataclass
class Trajectory:
    """Recorded steps of a run, in order, plus the final state; ``rows_restored``: the rows
    a resumed run took from its checkpoint instead of reading them."""

    steps: np.ndarray
    coefs: np.ndarray
    rows_seen: np.ndarray
    state: dict
    diagnostics: dict
    rows_restored: int = 0


def _load(source: StreamSource, chunk: int, lo: int, hi: int, section: Section, dtype,
          check: bool = True):
    """Read rows ``lo:hi`` of ``chunk`` (values checked), in the section's row order: (X, Y,
    w), the rows' weights w None when every row weighs 1."""
    base = chunk * source.chunk_rows
    X, Y, w = source.read_weighted(base + lo, base + hi, dtype, check)
    perm = section.permutation(source, chunk)
    if perm is not None:  # a shuffled section loads whole chunks
        X, Y = X[perm], Y[perm]
        w = None if w is None else w[perm]
    return X, Y, w


def stack_rows(parts) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Pieces of rows (X, Y, w) one after another; the weights None when every piece's
    rows weigh 1."""
    X = np.concatenate([p[0] for p in parts])
    Y = np.concatenate([p[1] for p in parts])
    if all(p[2] is None for p in parts):
        return X, Y, None
    w = np.concatenate([np.ones(len(p[0])) if p[2] is None else p[2] for p in parts])
    return X, Y, w


def _weighted(weights) -> dict:
    """The keyword of a kernel call for the rows' weights (none when they all weigh 1, so
    that a recursion without weights is called as it always was)."""
    return {} if weights is None else {"weights": weights}


def _singular_block_error(span, part, method, state, X, Y, edges, k, buf_start, exc,
                          weights=None):
    """Find the block that made H singular (error path only) and say how to fix it."""
    j = 0
    for j in range(len(edges) - 1):
        a, b = int(edges[j]), int(edges[j + 1])
        try:
            state = method.update(state, X[a:b], Y[a:b],
                                  **_weighted(None if weights is None else weights[a:b]))
        except SingularMatrixError as e:
            exc = e
            break
    sec = part.section
    src = span.sources[sec.source]
    step = part.step_base + k + j + 1
    rank = rank_phrase(exc, method, source_labels(src, exc.size or 0),
                       int(state.get("rows", 0)) + int(edges[j + 1] - edges[j]))
    which = "the first block" if step == 1 else f"block {step}"
    row = sec.storage_row(src, buf_start + int(edges[j]))
    if row is None:
        where = f"{src.label}: variable 'X': {which} (epoch {sec.epoch}, shuffled rows)"
    else:
        last = sec.start + buf_start + int(edges[j + 1]) - 1
        where = (f"{src.label}: variable 'X' chunk {row // src.chunk_rows}: {which} "
                 f"(rows {row}-{last})")
    return InputError(f"{where} leaves the normal matrix singular ({rank}); {span.remedy}")


def _bad_row_error(span, part, exc: BadRowError) -> InputError:
    """Name the store, variable, chunk and row of a row the kernel refused."""
    sec = part.section
    src = span.sources[sec.source]
    row = sec.source_row(src, exc.row - part.row_base)
    variable = {"x": "X", "X": "X", "Y": "y", "y": "y"}.get(exc.variable, exc.variable)
    epoch = f" (epoch {sec.epoch})" if sec.epoch or sec.shuffle else ""
    return InputError(f"{src.label}: variable '{variable}' chunk {row // src.chunk_rows} "
                      f"row {row}{epoch} {exc.reason}")


def _kernel_error(span, part, k, kend, exc: ValueError) -> InputError:
    """Any other refusal of the kernel: name the store and the blocks it was folding."""
    sec = part.section
    src = span.sources[sec.source]
    s0, s1 = part.step_base + k + 1, part.step_base + kend
    blocks = f"block {s0}" if s0 == s1 else f"blocks {s0}-{s1}"
    a, b = sec.storage_row(src, sec.grid.edge(k)), sec.storage_row(src, sec.grid.edge(kend))
    rows = f" (rows {a}-{b - 1})" if a is not None else f" (epoch {sec.epoch}, shuffled rows)"
    return InputError(f"{src.label}: {blocks}{rows}: {exc}")


def fold_segment(
    span: BlockSpan,
    method: Recursion,
    previous,
    record_every: int,
    dtype: str,
    prefetch: int = 2,
):
    """Dask task: fold global blocks ``span.K0+1..span.K1`` starting from ``previous`` (a state or
    a previous segment's result). Returns (rows folded, result dict)."""
    # ``previous`` is the state itself or the (rows, part) result of the previous segment
    state = previous[1]["state"] if isinstance(previous, tuple) else previous
    with fast_large_allocations():
        return _fold_segment(span, method, state, record_every, dtype, prefetch)


def _fold_segment(span, method, state, record_every, dtype, prefetch):
    loads, slices = span.loads()
    futures: dict = {}  # chunk index -> its read, submitted to the read-ahead threads
    pool = read_ahead_pool(prefetch)
    try:
        return _fold_slices(span, method, state, record_every, dtype, prefetch, pool, loads,
                            slices, futures)
    finally:  # a failed fold leaves no read running on behind it
        for future in futures.values():
            future.cancel()
        wait(list(futures.values()))


def _fold_slices(span, method, state, record_every, dtype, prefetch, pool, loads, slices,
                 futures):
    last_use = {j: n for n, (_, j, *_rest) in enumerate(slices)}
    steps, coefs, rows, diags = [], [], [], {}
    submitted = 0
    current = -1
    for n, (pi, j, lo, hi, vend) in enumerate(slices):
        # keep ``prefetch`` chunk reads ahead of the one being folded
        while submitted < len(loads) and submitted <= j + prefetch:
            si, chunk, a, b, sec = loads[submitted]
            futures[submitted] = pool.submit(_load, span.sources[si], chunk, a, b, sec, dtype)
            submitted += 1
        X, Y, w = futures[j].result()
        if last_use[j] == n:
            del futures[j]
        X, Y, w = X[lo:hi], Y[lo:hi], None if w is None else w[lo:hi]
        if pi != current:  # a new section: blocks never straddle sections
            current = pi
            part = span.parts[pi]
            grid = part.section.grid
            k = part.k0
            buffer = None
            buf_start = part.first_row
        if buffer is not None and len(buffer[0]):
            X, Y, w = stack_rows([buffer, (X, Y, w)])
        kend = part.k1 if vend >= part.last_row else min(grid.floor_edge(vend), part.k1)
        if kend > k:
            edges = grid.edges(k, kend) - buf_start
            used = int(edges[-1])
            weights = None if w is None else w[:used]
            try:
                with np.errstate(all="ignore"):  # every result is checked finite below
                    res = method.fold(state, X[:used], Y[:used], edges,
                                      part.step_base + k + 1, record_every,
                                      part.row_base + buf_start, **_weighted(weights))
            except SingularMatrixError as exc:
                raise (overflow_error(span, part, X, Y, edges, k, buf_start)
                       or _singular_block_error(span, part, method, state, X, Y, edges, k,
                                                buf_start, exc, weights)) from None
            except BadRowError as exc:
                raise _bad_row_error(span, part, exc) from None
            except ValueError as exc:
                raise (overflow_error(span, part, X, Y, edges, k, buf_start)
                       or _kernel_error(span, part, k, kend, exc)) from None
            if not (state_is_finite(res.state) and np.isfinite(res.coefs).all()):
                raise nonfinite_error(span, part, method, state, X, Y, edges, k, buf_start)
            state = res.state
            steps.append(res.steps)
            coefs.append(res.coefs)
            rows.append(res.rows_seen)
            for name, v in res.diagnostics.items():
                diags.setdefault(name, []).append(v)
            buffer = (X[used:], Y[used:], None if w is None else w[used:])
            buf_start += used
            k = kend
        else:
            buffer = (X, Y, w)
    return span.n_rows, {
        "state": state,
        "steps": np.concatenate(steps) if steps else np.zeros(0, np.int64),
        "coefs": np.concatenate(coefs) if coefs else None,
        "rows_seen": np.concatenate(rows) if rows else np.zeros(0, np.int64),
        "diagnostics": {n: np.concatenate(v) for n, v in diags.items()},
    }


def _finish_trajectory(method, parts, state, plan: StreamPlan, rows_restored: int = 0
                       ) -> Trajectory:
    steps = np.concatenate([p["steps"] for p in parts]) if parts else np.zeros(0, np.int64)
    coef_list = [p["coefs"] for p in parts if p["coefs"] is not None and len(p["coefs"])]
    rows = np.concatenate([p["rows_seen"] for p in parts]) if parts else np.zeros(0, np.int64)
    final = method.coef(state)
    coefs = np.concatenate(coef_list) if coef_list else np.zeros((0, *final.shape), final.dtype)
    names = sorted({n for p in parts for n in p["diagnostics"]})
    diags = {n: np.concatenate([p["diagnostics"][n] for p in parts if n in p["diagnostics"]])
             for n in names}
    if not len(steps) or steps[-1] != plan.n_blocks:
        final_diag = method.state_diagnostics(state)
        if not len(steps):  # the final step is the only one: its diagnostics name them all
            names = sorted(final_diag)
            diags = {n: np.zeros((0, *np.shape(final_diag[n]))) for n in names}
        steps = np.append(steps, plan.n_blocks)
        coefs = np.concatenate([coefs, final[None]])
        rows = np.append(rows, plan.n_rows)
        for n in names:  # per-step values may be vectors (one per target)
            value = np.asarray(final_diag[n])
            diags[n] = np.concatenate([diags[n].reshape(-1, *value.shape), value[None]])
    return Trajectory(steps=steps, coefs=coefs, rows_seen=rows, state=state, diagnostics=diags,
                      rows_restored=int(rows_restored))


def run_sequential(
    client: Client,
    plan: StreamPlan,
    method: Recursion,
    record_every: int,
    dtype: str = "float64",
    checkpoint: Checkpoint | None = None,
    progress: bool | None = None,
    segment_bytes: int | None = None,
    initial_state: dict | None = None,
) -> Trajectory:
    """The in-order engine over the virtual stream of ``plan``; see the module docstring.

    ``segment_bytes`` defaults to :data:`SEGMENT_BYTES`, less on small workers
    (:func:`bytes_per_call`). ``initial_state``: the state to start from (a continued fit),
    instead of the recursion's ``init``."""
    segments = None
    if checkpoint is not None and segment_bytes is None:
        segments = checkpoint.saved_segments()  # resume with the cut it was started with
    if segments is None:  # an explicit size is capped by the workers' memory too
        segments = plan_segments(plan, bytes_per_call(client, segment_bytes or SEGMENT_BYTES))
    parts: list[dict] = []
    state = initial_state if initial_state is not None else \
        method.init(plan.n_features, plan.n_targets, np.dtype(dtype))
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
    at = plan.edge(segments[start][0]) if start < len(segments) else plan.n_rows
    restored = at - (plan.n_rows - plan.n_new_rows)  # not the rows of a fit continued
    with row_bar(plan.n_rows, f"fit {method.name} (sequential)", enabled=progress) as bar:
        bar.update(at)
        while nxt < len(segments) or in_flight:
            while nxt < len(segments) and len(in_flight) < 2:
                K0, K1 = segments[nxt]
                fut = client.submit(
                    fold_segment, plan.span(K0, K1), method, previous, record_every, dtype,
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
    return _finish_trajectory(method, parts, state, plan, restored)


def _piece_cuts(k0: int, k1: int, record_every: int) -> np.ndarray:
    """Local block counts inside piece (k0, k1] where an interval ends.

    Recorded steps, the piece end, and step 1 (so that a singular first block
    is refused by the scan engine exactly as by the sequential one).
    """
    first = (k0 // record_every + 1) * record_every
    rec = np.arange(first, k1 + 1, record_every, dtype=np.int64)
    extra = [1] if k0 == 0 else []
    return np.unique(np.concatenate([rec, [k1], extra]).astype(np.int64)) - k0


def read_span(span: BlockSpan, dtype, check: bool = True
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """All rows of a Dask task's blocks, concatenated in stream order, their weights (None
    when every row weighs 1) and their block edges.

    One read for a single part in storage order (the plain case); otherwise every
    chunk is loaded once and sliced (interleaved blocks share chunks).
    """
    edges = [np.zeros(1, np.int64)]
    offset = 0
    for part in span.parts:
        e = part.section.grid.edges(part.k0, part.k1) - part.first_row + offset
        edges.append(e[1:])
        offset = int(e[-1])
    edges = np.concatenate(edges)
    if len(span.parts) == 1 and not span.parts[0].section.shuffle:
        part = span.parts[0]
        sec = part.section
        X, Y, w = span.sources[sec.source].read_weighted(
            sec.start + part.first_row, sec.start + part.last_row, dtype, check)
        return X, Y, w, edges
    loads, slices = span.loads()
    data = [_load(span.sources[si], chunk, a, b, sec, dtype, check)
            for si, chunk, a, b, sec in loads]
    X, Y, w = stack_rows([(data[j][0][lo:hi], data[j][1][lo:hi],
                           None if data[j][2] is None else data[j][2][lo:hi])
                          for _, j, lo, hi, _ in slices])
    return X, Y, w, edges


def overflow_in_span(span: BlockSpan, dtype) -> InputError | None:
    """Dask span, on the error path only: read a segment's rows with every check (NaN and
    Inf raise naming their row) and return the error naming a subnormal value, or a value
    too large for the sums (:mod:`~streamlsq.stream.guards`), or None. The scan engine asks
    this of the pieces before a non-finite solve, and a fit of subnormal coefficients of
    all its pieces."""
    X, Y, _, _ = read_span(span, dtype, check=True)
    return subnormal_in_rows(span, X, Y) or overflow_in_rows(span, X, Y)


def summarize_piece(span: BlockSpan, method, record_every, dtype):
    """Dask task: read global blocks K0+1..K1 and return their interval summaries (small).

    Values are checked on the summaries rather than on every row (NaN or Inf in a
    row makes its block's sums non-finite): one pass less over the data. Only
    when a summary is not finite are the rows read again with the check, which
    names the chunk and row at fault.
    """
    # the rows are freed inside the block, whose heap keeps their pages for the next read
    # (outside it a worker's trim threshold hands them back, and every piece faults its
    # reads in afresh: measured a third of the CPU of a scan with the QR solver)
    with fast_large_allocations():
        X, Y, w, edges = read_span(span, dtype, check=False)
        with np.errstate(all="ignore"):  # the summaries are checked finite below
            summaries = method.summarize(X, Y, edges,
                                         _piece_cuts(span.K0, span.K1, record_every),
                                         **_weighted(w))
        del X, Y, w
    if not all(np.isfinite(v).all() for s in summaries for v in s.values()):
        with fast_large_allocations():
            X, Y, _, _ = read_span(span, dtype, check=True)  # raises InputError naming the row
        raise overflow_in_rows(span, X, Y) or InputError(
            f"{span.sources[span.parts[0].section.source].label}: variable 'X': the sums of "
            f"blocks {span.K0 + 1}-{span.K1} overflow; rescale the data"
        )
    return span.n_rows, summaries


def summarize_pieces(span: BlockSpan, pieces, method, record_every, dtype):
    """Dask task: the pieces ``[(K0, K1), ...]`` of ``span`` summarised one after another
    (:func:`summarize_piece`: each read, summarised and freed before the next), returning
    (rows, [(rows, summaries) of each piece])."""
    out = [summarize_piece(span.within(K0, K1), method, record_every, dtype)
           for K0, K1 in pieces]
    return sum(n for n, _ in out), out


def scan_tasks(pieces_todo, per_task: int) -> list[list[int]]:
    """The pieces (indices, increasing) each Dask task summarises: runs of at most
    ``per_task`` consecutive pieces (a piece already committed ends a run)."""
    groups: list[list[int]] = []
    for i in pieces_todo:
        if groups and len(groups[-1]) < per_task and i == groups[-1][-1] + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def pieces_per_task(client: Client, plan: StreamPlan, n_pieces: int,
                    piece_bytes: int | None) -> int:
    """Pieces one Dask task of the scan engine summarises: about
    :func:`~streamlsq.runtime.reduce.task_bytes` of the plan's rows (sized from the data and
    the workers, or the dask config ``streamlsq.task-bytes``); one when ``piece_bytes`` was
    given (``--segment-size``: the bytes of a Dask task) and the config leaves it be."""
    configured = int(setting("streamlsq.task-bytes"))
    if piece_bytes is not None and not configured:
        return 1
    total = plan.nbytes
    return units_per_task(n_pieces, total / max(n_pieces, 1),
                          task_bytes(total, worker_threads(client), configured))


def solves_per_task(n_solves: int, n_threads: int) -> int:
    """Recorded steps one Dask task solves: about four tasks per worker thread (tiny tasks,
    a few hundred at most; every worker runs some, and has loaded the solves' code)."""
    return max(1, -(-n_solves // (4 * n_threads)))


def solve_groups(n_solves: int, n_threads: int) -> int:
    """Dask tasks of the solves at the recorded steps (:func:`solves_per_task` each)."""
    return -(-n_solves // solves_per_task(n_solves, n_threads))


def finish_states(method, infos, steps, label, remedy, source=None):
    """Dask task: the independent solves turning information states into states, and the
    diagnostics of each (``state_diagnostics``); ``source`` names the columns of a
    singular one."""
    out = []
    for info, step in zip(infos, steps, strict=True):
        try:
            with np.errstate(all="ignore"):  # checked finite below
                out.append(method.finish(info))
        except SingularMatrixError as exc:
            which = "the first block" if step == 1 else f"step {step}"
            rank = rank_phrase(exc, method, source_labels(source, exc.size or 0),
                               int(info.get("rows", 0)))
            raise InputError(
                f"{label}: variable 'X': {which} leaves the normal matrix singular ({rank}); "
                f"{remedy}"
            ) from None
        except ValueError as exc:
            raise InputError(f"{label}: variable 'X': the solve at step {step} failed ({exc}); "
                             "the data's magnitudes may overflow float64: streamlsq info "
                             "--check names such values") from None
        if not state_is_finite(out[-1]):
            raise NonFiniteSolve(label, step)
    return [(state, method.state_diagnostics(state) if method.identified(state) else None)
            for state in out]


def subnormal_coefficients_error(client: Client, plan: StreamPlan, traj: Trajectory,
                                 dtype) -> InputError:
    """Subnormal coefficients (the data's scale underflows): the error naming the first
    subnormal value of the rows (a parallel search, error path only), or saying that the
    coefficients underflow."""
    pieces = plan_segments(plan, bytes_per_call(client, PIECE_BYTES))
    found = client.gather(client.map(overflow_in_span, [plan.span(*p) for p in pieces],
                                     [dtype] * len(pieces), pure=False))
    first = next((e for e in found if e is not None), None)
    if first is not None:
        return first
    a = np.abs(traj.coefs.reshape(len(traj.coefs), -1))
    i = int(np.flatnonzero(((a > 0) & (a < np.finfo(traj.coefs.dtype).tiny)).any(axis=1))[0])
    return InputError(f"{plan.label}: the coefficients at step {int(traj.steps[i])} underflow "
                      f"(below {np.finfo(traj.coefs.dtype).tiny:.3g}, the smallest normal "
                      "number): rescale the data")


def run_scan(
    client: Client,
    plan: StreamPlan,
    method: Recursion,
    record_every: int,
    dtype: str = "float64",
    progress: bool | None = None,
    piece_bytes: int | None = None,
    checkpoint=None,
    initial_state: dict | None = None,
) -> Trajectory:
    """The parallel engine over the virtual stream of ``plan``: map summaries, prefix in
    order, map solves. ``piece_bytes`` defaults to :data:`PIECE_BYTES`, less on small
    workers (:func:`bytes_per_call`); a Dask task summarises :func:`pieces_per_task`
    consecutive pieces. ``checkpoint`` (a :class:`~streamlsq.stream.resume.ScanPieces`)
    keeps each piece's summaries as its task returns them, so a resumed run summarises only
    the pieces not yet committed."""
    if not isinstance(method, ScanRecursion):
        raise InputError(f"method '{method.name}' has no scan form; use --engine sequential")
    if checkpoint is not None and checkpoint.pieces is not None:
        pieces = checkpoint.pieces  # resume with the cut it was started with
    else:
        pieces = plan_segments(plan, bytes_per_call(client, piece_bytes or PIECE_BYTES))
    done = checkpoint.start(pieces) if checkpoint is not None else {}
    tag = uuid.uuid4().hex[:8]
    todo = [i for i in range(len(pieces)) if i not in done]
    groups = scan_tasks(todo, pieces_per_task(client, plan, len(pieces), piece_bytes))
    futures = [
        client.submit(
            summarize_pieces, plan.span(pieces[g[0]][0], pieces[g[-1]][1]),
            [pieces[i] for i in g], method, record_every, dtype,
            key=f"summarize-{method.name}-{tag}-{j}", pure=False,
        )
        for j, g in enumerate(groups)
    ]

    def commit(j, res):
        for i, piece in zip(groups[j], res[1], strict=True):
            checkpoint.commit(i, piece)

    restored = sum(n for n, _ in done.values())
    fresh = track_futures(
        client, futures, plan.n_new_rows - restored,
        f"fit {method.name} (scan)", enabled=progress,
        on_result=None if checkpoint is None else commit,
    )
    del futures
    results = dict(done)
    for g, (_, parts) in zip(groups, fresh, strict=True):
        results.update(zip(g, parts, strict=True))
    summaries = [s for i in range(len(pieces)) for s in results[i][1]]
    ends = np.concatenate(
        [k0 + _piece_cuts(k0, k1, record_every) for k0, k1 in pieces]
    )
    state0 = initial_state if initial_state is not None else \
        method.init(plan.n_features, plan.n_targets, np.dtype(dtype))
    with np.errstate(all="ignore"):  # the solves of these infos are checked finite
        infos = method.scan(method.to_info(state0), summaries)
    keep = [i for i, e in enumerate(ends) if e % record_every == 0 or e == plan.n_blocks]
    solve = sorted(set(keep) | {0})  # index 0 is step 1: checks the first block
    per = solves_per_task(len(solve), worker_threads(client))
    groups = [solve[j : j + per] for j in range(0, len(solve), per)]
    try:
        solved = client.gather(client.map(
            finish_states,
            [method] * len(groups),
            [[infos[i] for i in g] for g in groups],
            [[int(ends[i]) for i in g] for g in groups],
            [plan.label] * len(groups),
            [plan.remedy] * len(groups),
            [plan.sources[0]] * len(groups),
            key=[f"solve-{method.name}-{tag}-{j}" for j in range(len(groups))],
            pure=False,
        ))
    except NonFiniteSolve as exc:
        # a summary that stayed finite (a QR factor) can still solve to Inf: name the rows
        suspects = [plan.span(k0, k1) for k0, k1 in pieces if k0 < exc.step]
        found = client.gather(client.map(overflow_in_span, suspects,
                                         [dtype] * len(suspects), pure=False))
        raise next((e for e in found if e is not None), exc) from None
    by_index = dict(zip(solve, (s for g in solved for s in g), strict=True))
    final = by_index[keep[-1]][0]
    # the steps whose coefficients the rows identify (a recursion that starts once they are)
    keep = [i for i in keep if by_index[i][1] is not None]
    states = [by_index[i][0] for i in keep]
    part = {"steps": ends[keep], "rows_seen": np.array([int(s["rows"]) for s in states],
                                                       dtype=np.int64),
            "coefs": np.stack([method.coef(s) for s in states]) if states else None,
            "diagnostics": {name: np.stack([by_index[i][1][name] for i in keep])
                            for name in (by_index[keep[0]][1] if keep else {})}}
    return _finish_trajectory(method, [part], final, plan, restored)
