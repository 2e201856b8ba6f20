"""Ordered stream plans: what a recursion sees, as an ordered list of reads.

A recursion consumes one *virtual stream* of blocks. Usually that is one store read
in natural order, but it may also be the same store read several times (LMS epochs,
each in a seeded shuffled order) or whole blocks taken alternately from two stores
(interleaved KF4LLS). A :class:`StreamPlan` describes that stream as a list of
:class:`Section` s — each a run of rows of one source, visited chunk by chunk, with
its own :class:`~streamlsq.kernels.recursion.BlockGrid` (blocks never straddle two
sections) — and numbers the blocks of all sections consecutively: global step
``s`` is block ``s - step_base[i]`` of section ``i``.

The engines cut the global block range into segments or pieces (:func:`plan_segments`)
and hand each Dask task the :class:`BlockSpan` of its range (a scan task, several pieces:
:meth:`BlockSpan.within` gives each its own), which lists its parts in
each section (:class:`SectionSpan`: a local block range of one section) and the chunk
*loads* those parts need. This
module only does the bookkeeping of rows, chunks and blocks; the permutations of
shuffled epochs come from the pure functions of :mod:`streamlsq.kernels.lms`.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field

import numpy as np

from streamlsq.io.sources import StreamSource
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.kernels.recursions.shuffle import chunk_row_permutation, epoch_chunk_order

__all__ = [
    "BlockSpan",
    "Section",
    "SectionSpan",
    "StreamPlan",
    "plan_fit",
    "plan_segments",
]


@dataclass(frozen=True)
class Section:
    """Rows ``start:stop`` of source ``source`` as consecutive blocks of ``grid``.

    With ``shuffle`` (only for a whole store: ``start == 0`` and ``stop == n_rows``)
    the chunks are visited in ``epoch_chunk_order(seed, epoch, n_chunks, True)`` and
    the rows of chunk ``c`` in ``chunk_row_permutation(seed, epoch, c, rows_c, True)``;
    otherwise in storage order. ``epoch`` labels the pass over the data.
    """

    source: int
    start: int
    stop: int
    grid: BlockGrid
    epoch: int = 0
    shuffle: bool = False
    seed: int = 0

    @property
    def n_rows(self) -> int:
        return self.stop - self.start

    @property
    def n_blocks(self) -> int:
        return self.grid.n_blocks

    def describe(self) -> tuple:
        g = self.grid
        return (self.source, self.start, self.stop, g.block_size, g.first, self.epoch,
                int(self.shuffle), self.seed if self.shuffle else 0)

    def chunks(self, src: StreamSource) -> tuple[list[int], list[int], int]:
        """(chunk ids in visit order, virtual row bounds of each, offset of row 0 in chunk 0).

        ``bounds`` has one entry more than ``chunks``: chunk ``chunks[p]`` holds the
        section's virtual rows ``bounds[p]:bounds[p+1]``.
        """
        cr = src.chunk_rows
        if self.shuffle:
            order = epoch_chunk_order(self.seed, self.epoch, -(-src.n_rows // cr), True)
            sizes = np.minimum(cr, src.n_rows - order * cr)
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            return order.tolist(), bounds.tolist(), 0
        c0, c1 = self.start // cr, -(-self.stop // cr)
        chunks = list(range(c0, c1))
        bounds = [0] + [c * cr - self.start for c in chunks[1:]] + [self.n_rows]
        return chunks, bounds, self.start - c0 * cr

    def slices(self, src: StreamSource, v0: int, v1: int) -> list[tuple[int, int, int, int]]:
        """Rows ``v0:v1`` of the section as [(chunk, lo, hi, virtual end), ...] in order;
        ``lo:hi`` are rows of the (permuted, when shuffled) chunk."""
        chunks, bounds, offset0 = self.chunks(src)
        p = max(bisect.bisect_right(bounds, v0) - 1, 0)
        out = []
        v = v0
        while v < v1:
            end = min(bounds[p + 1], v1)
            shift = offset0 if p == 0 else 0
            out.append((chunks[p], v - bounds[p] + shift, end - bounds[p] + shift, end))
            v = end
            p += 1
        return out

    def permutation(self, src: StreamSource, chunk: int) -> np.ndarray | None:
        """Row order of ``chunk`` in this section (None: storage order)."""
        if not self.shuffle:
            return None
        rows = min(src.chunk_rows, src.n_rows - chunk * src.chunk_rows)
        return chunk_row_permutation(self.seed, self.epoch, chunk, rows, True)

    def storage_row(self, src: StreamSource, v: int) -> int | None:
        """Source row of virtual row ``v`` (None in a shuffled section)."""
        return None if self.shuffle else self.start + int(v)

    def source_row(self, src: StreamSource, v: int) -> int:
        """Source row of virtual row ``v``, through the chunk and row permutations of a
        shuffled section (for naming one bad row; ``storage_row`` names block ranges)."""
        if not self.shuffle:
            return self.start + int(v)
        chunks, bounds, _ = self.chunks(src)
        p = bisect.bisect_right(bounds, int(v)) - 1
        chunk = chunks[p]
        return chunk * src.chunk_rows + int(self.permutation(src, chunk)[int(v) - bounds[p]])


@dataclass(frozen=True)
class SectionSpan:
    """Blocks ``k0+1..k1`` of one section, with the global numbering of its block 0."""

    section: Section
    k0: int
    k1: int
    step_base: int  # global step of the section's block j is step_base + j
    row_base: int  # virtual rows of the whole stream before the section

    @property
    def first_row(self) -> int:
        return self.section.grid.edge(self.k0)

    @property
    def last_row(self) -> int:
        return self.section.grid.edge(self.k1)


@dataclass(frozen=True)
class BlockSpan:
    """What one Dask task folds (a segment) or summarises (a piece): global blocks
    ``K0+1..K1``, as their parts in each section."""

    sources: tuple[StreamSource, ...]
    parts: tuple[SectionSpan, ...]
    K0: int
    K1: int
    remedy: str

    @property
    def n_rows(self) -> int:
        return sum(p.last_row - p.first_row for p in self.parts)

    def within(self, K0: int, K1: int) -> BlockSpan:
        """Global blocks ``K0+1..K1`` of this span (``self.K0 <= K0 < K1 <= self.K1``), as
        :meth:`StreamPlan.span` would give them: what a Dask task that summarises several
        pieces one after another hands each of them."""
        if not self.K0 <= K0 < K1 <= self.K1:
            raise ValueError(f"blocks {K0 + 1}..{K1} are not within {self.K0 + 1}..{self.K1}")
        parts = []
        for p in self.parts:
            k0, k1 = max(K0 - p.step_base, p.k0), min(K1 - p.step_base, p.k1)
            if k1 > k0:
                parts.append(SectionSpan(p.section, k0, k1, p.step_base, p.row_base))
        return BlockSpan(self.sources, tuple(parts), K0, K1, self.remedy)

    def loads(self) -> tuple[list[tuple], list[tuple]]:
        """The chunk reads this Dask task needs, in order of first use, and its slices.

        Returns ``loads`` [(source, chunk, lo, hi, section)] — rows ``lo:hi`` of the
        chunk (a whole chunk when its rows are permuted) — and ``slices``
        [(piece index, load index, lo, hi, virtual end)] with ``lo:hi`` rows of the
        loaded array. A load is reused by the next slices of the same source as long
        as no other chunk of that source was needed in between (interleaved blocks
        share a chunk; a chunk revisited by a later epoch is read again).
        """
        loads: list[list] = []
        slices: list[tuple] = []
        last_of_source: dict[int, int] = {}
        for i, part in enumerate(self.parts):
            sec = part.section
            src = self.sources[sec.source]
            for chunk, lo, hi, vend in sec.slices(src, part.first_row, part.last_row):
                key = (sec.source, chunk, sec.epoch if sec.shuffle else None)
                j = last_of_source.get(sec.source)
                if j is None or loads[j][5] != key:
                    if sec.shuffle:
                        size = min(src.chunk_rows, src.n_rows - chunk * src.chunk_rows)
                        loads.append([sec.source, chunk, 0, size, sec, key])
                    else:
                        loads.append([sec.source, chunk, lo, hi, sec, key])
                    j = len(loads) - 1
                    last_of_source[sec.source] = j
                elif not sec.shuffle:
                    loads[j][2] = min(loads[j][2], lo)
                    loads[j][3] = max(loads[j][3], hi)
                slices.append((i, j, lo, hi, vend))
        slices = [(i, j, lo - loads[j][2], hi - loads[j][2], v) for i, j, lo, hi, v in slices]
        return [tuple(ld[:5]) for ld in loads], slices


@dataclass
class StreamPlan:
    """The virtual stream a recursion sees: ordered sections over one or more sources.

    ``roles`` name the sources (e.g. ``["data"]`` or ``["a", "b"]``); ``remedy`` is
    the advice appended to a singular-block error; ``attrs`` go to the result store.
    ``step_offset`` and ``row_offset`` are the steps and rows of an earlier fit this plan
    continues (``fit_stream(..., continue_from=...)``): its blocks are then numbered from
    ``step_offset + 1`` and its rows counted from ``row_offset``, as in one fit over all
    rows.
    """

    sources: tuple[StreamSource, ...]
    sections: list[Section]
    roles: tuple[str, ...] = ("data",)
    remedy: str = ("start from a ridge (--ridge DELTA) or use a larger first block "
                   "(--first-block-size)")
    attrs: dict = field(default_factory=dict)
    step_offset: int = 0
    row_offset: int = 0

    def __post_init__(self):
        self.sources = tuple(self.sources)
        if not self.sections:
            raise ValueError("a stream plan needs at least one section")
        base, rows = [int(self.step_offset)], [int(self.row_offset)]
        for sec in self.sections:
            src = self.sources[sec.source]
            if not (0 <= sec.start < sec.stop <= src.n_rows):
                raise ValueError(f"section rows {sec.start}:{sec.stop} outside {src.label}")
            if sec.shuffle and (sec.start, sec.stop) != (0, src.n_rows):
                raise ValueError("a shuffled section must cover its whole store")
            if sec.grid.n_rows != sec.n_rows:
                raise ValueError("a section's block grid must cover its rows")
            base.append(base[-1] + sec.n_blocks)
            rows.append(rows[-1] + sec.n_rows)
        self.step_base = base  # len(sections) + 1
        self.row_base = rows

    # -- constructors ------------------------------------------------------
    @classmethod
    def single(cls, source: StreamSource, grid: BlockGrid) -> StreamPlan:
        """One store, read once in storage order (the plain case)."""
        return cls((source,), [Section(0, 0, source.n_rows, grid)])

    # -- sizes -------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return self.step_base[-1]

    @property
    def n_rows(self) -> int:
        """Rows of the virtual stream (over all sections and epochs), with the rows of the
        fit it continues."""
        return self.row_base[-1]

    @property
    def n_new_rows(self) -> int:
        """Rows this plan reads (without those of the fit it continues)."""
        return self.row_base[-1] - self.row_base[0]

    @property
    def nbytes(self) -> int:
        """Bytes of float64 the virtual stream reads (X and y, over all sections and
        epochs): how large the run is, e.g. to choose the embedded cluster's workers."""
        return sum(sec.n_rows * (self.sources[sec.source].n_features
                                 + self.sources[sec.source].n_targets) * 8
                   for sec in self.sections)

    @property
    def n_features(self) -> int:
        return self.sources[0].n_features

    @property
    def n_targets(self) -> int:
        return self.sources[0].n_targets

    @property
    def label(self) -> str:
        return " + ".join(s.label for s in self.sources)

    def edge(self, K: int) -> int:
        """Virtual row at which global block ``K + 1`` starts (``n_rows`` for the last edge)."""
        if K >= self.n_blocks:
            return self.n_rows
        i = bisect.bisect_right(self.step_base, K) - 1
        return self.row_base[i] + self.sections[i].grid.edge(K - self.step_base[i])

    def section_of_steps(self, steps) -> np.ndarray:
        """Index of the section holding each global step (1-based)."""
        steps = np.asarray(steps, dtype=np.int64)
        return np.searchsorted(np.asarray(self.step_base), steps - 1, side="right") - 1

    def digest(self) -> str:
        """A short hash of the sections (for checkpoint fingerprints)."""
        desc = np.array([s.describe() for s in self.sections], dtype=np.int64)
        if self.step_offset or self.row_offset:
            desc = np.append(desc.ravel(), [self.step_offset, self.row_offset])
        return hashlib.sha256(desc.tobytes()).hexdigest()[:16]

    def span(self, K0: int, K1: int) -> BlockSpan:
        """Global blocks ``K0+1..K1``, as their parts in each section."""
        i0 = bisect.bisect_right(self.step_base, K0) - 1
        parts = []
        i = i0
        while i < len(self.sections) and self.step_base[i] < K1:
            base = self.step_base[i]
            sec = self.sections[i]
            k0, k1 = max(K0 - base, 0), min(K1 - base, sec.n_blocks)
            if k1 > k0:
                parts.append(SectionSpan(sec, k0, k1, base, self.row_base[i]))
            i += 1
        return BlockSpan(self.sources, tuple(parts), K0, K1, self.remedy)


def plan_fit(sources, block_order, *, block_size: int | None = None,
             first_block_size: int | None = None, epochs: int = 1, shuffle: bool = False,
             seed: int = 0, roles: tuple[str, ...] = ("data",)) -> StreamPlan:
    """The stream a fit reads: one source over ``epochs`` passes (each in a seeded shuffled
    order with ``shuffle``), or several sources whose whole blocks are taken in the
    recursion's ``block_order(n_blocks of each source) -> [(source, block), ...]``.

    Blocks: ``block_size`` rows (default: each store's ``block_size`` attribute, else its
    chunk size); ``first_block_size`` for the very first block of a single source. A grid
    that cannot be cut raises ``ValueError`` naming the source.
    """
    grids = []
    for s in sources:
        size = s.block_size if block_size is None else int(block_size)
        try:
            grids.append(BlockGrid(s.n_rows, size, first_block_size if len(sources) == 1
                                   else None))
        except ValueError as exc:
            raise ValueError(f"{s.label}: {exc}") from None
    if len(sources) == 1:
        sections = [Section(0, 0, sources[0].n_rows, grids[0] if e == 0 else
                            BlockGrid(sources[0].n_rows, grids[0].block_size), epoch=e,
                            shuffle=bool(shuffle), seed=seed) for e in range(epochs)]
        return StreamPlan(tuple(sources), sections, roles=roles, attrs={
            "epochs": epochs, "shuffle": bool(shuffle), "seed": seed,
            "rows_per_epoch": sources[0].n_rows})
    order = block_order([g.n_blocks for g in grids])
    sections = []
    for i, k in order:
        r0, r1 = grids[i].edge(k), grids[i].edge(k + 1)
        sections.append(Section(i, r0, r1, BlockGrid(r1 - r0, r1 - r0)))
    attrs = {}
    for i, (role, s, g) in enumerate(zip(roles, sources, grids, strict=True)):
        used = sum(1 for j, _ in order if j == i)
        attrs.update({f"block_size_{role}": g.block_size, f"blocks_{role}": g.n_blocks,
                      f"blocks_used_{role}": used, f"rows_unused_{role}": s.n_rows - g.edge(used)})
    return StreamPlan(tuple(sources), sections, roles=roles, attrs=attrs,
                      remedy="start from a ridge (--ridge DELTA) or use larger blocks "
                             "(--block-size)")


def plan_segments(plan: StreamPlan, target_bytes: int) -> list[tuple[int, int]]:
    """Cut the virtual stream into block-aligned segments of about ``target_bytes`` of X.

    Cuts sit at the last block edge at or before a chunk boundary where the running
    byte count crosses a multiple of ``target_bytes``, so a segment reads whole
    chunks except where a block straddles two chunks (at least one chunk per
    segment). Returns [(K0, K1), ...] global block edges; every block belongs to
    exactly one segment.
    """
    cuts = [plan.step_base[0]]
    total = 0  # bytes of X before the current section
    for i, sec in enumerate(plan.sections):
        src = plan.sources[sec.source]
        row_bytes = max(src.n_features, 1) * 8
        _, bounds, _ = sec.chunks(src)
        offsets = [total + b * row_bytes for b in bounds]
        for j in range(1, len(bounds)):
            if offsets[j] // target_bytes > offsets[j - 1] // target_bytes:
                cut = plan.step_base[i] + sec.grid.floor_edge(bounds[j])
                if cut > cuts[-1]:
                    cuts.append(cut)
        total = offsets[-1]
    if cuts[-1] != plan.n_blocks:
        cuts.append(plan.n_blocks)
    return list(zip(cuts[:-1], cuts[1:], strict=True))
