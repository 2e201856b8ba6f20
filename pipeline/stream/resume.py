"""Checkpoints of stream fits on both engines, and what a resumed fit checks first.

- sequential engine: :class:`~streamlsq.io.checkpoint.Checkpoint` commits the state after
  every segment (the segments are folded in order);
- scan engine: :class:`ScanPieces` commits each piece's summaries as it arrives (pieces
  finish in any order); a resumed run summarises only the others, then redoes the
  prefix and the solves, which are cheap and deterministic.

A run is identified by its fingerprint (:func:`run_fingerprint`: inputs with their
metadata version, method, parameters, plan, record interval, dtype, engine), which the
result keeps as ``run_fingerprint``: ``--resume`` after the result was published finds
it complete (:func:`finished_result`) and does nothing but remove a checkpoint left by a
kill between publication and clean-up.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np

from streamlsq.io.checkpoint import (
    Checkpoint,
    EntryCheckpoint,
    finished_result,
    merge_spans,
    remove_finished,
)
from streamlsq.stream.plans import StreamPlan

__all__ = ["ScanPieces", "finished_result", "fit_checkpoint", "remove_finished_checkpoint",
           "run_fingerprint", "segment_reads"]


def run_fingerprint(plan: StreamPlan, rec, record_every: int, dtype, engine: str) -> dict:
    """What identifies a fit: resuming with anything different is refused."""
    fp = {
        "inputs": [[role, str(Path(s.path).resolve()), s.group or "",
                    s.n_rows, s.n_features, s.n_targets, f"token:{s.token}"]
                   for role, s in zip(plan.roles, plan.sources, strict=True)],
        "method": rec.name,
        "parameters": json.dumps(rec.get_params(), sort_keys=True, default=str),
        "plan": plan.digest(),
        "record_every": record_every,
        "dtype": str(np.dtype(dtype)),
    }
    if engine != "sequential":
        fp["engine"] = engine
    return fp


def segment_reads(plan: StreamPlan, K0: int, K1: int) -> list[tuple[int, int, int]]:
    """(input index, first row, end row) of the chunk reads of global blocks K0+1..K1."""
    loads, _ = plan.segment(K0, K1).loads()
    spans = []
    for si, chunk, lo, hi, _sec in loads:
        base = chunk * plan.sources[si].chunk_rows
        spans.append((si, base + lo, base + hi))
    return merge_spans(spans)


class ScanPieces:
    """The scan engine's checkpoint: the summaries of each piece, committed as it arrives."""

    def __init__(self, folder: EntryCheckpoint, plan: StreamPlan):
        self.folder, self.plan = folder, plan
        self.pieces = None
        if "pieces" in folder:
            try:
                self.pieces = [(int(a), int(b)) for a, b in folder.load("pieces")]
            except (TypeError, ValueError) as exc:
                raise folder.corrupt("entry-pieces.pkl", exc) from None

    def start(self, pieces) -> dict:
        """Fix the cut into pieces; the committed results {piece index: (rows, summaries)}."""
        if self.pieces is None:
            self.pieces = [tuple(p) for p in pieces]
            self.folder.save("pieces", self.pieces)
        return {i: self.folder.load(f"piece-{i:06d}") for i in range(len(self.pieces))
                if f"piece-{i:06d}" in self.folder}

    def commit(self, i: int, result) -> None:
        self.folder.save(f"piece-{i:06d}", result, reads=segment_reads(self.plan, *self.pieces[i]))

    def close(self) -> None:
        self.folder.close()

    def remove(self) -> None:
        self.folder.remove()


def open_fit_checkpoint(directory, resume: bool, plan: StreamPlan, rec, record_every: int,
                        dtype, engine: str, sequential=Checkpoint):
    """The checkpoint of a fit on ``engine``, opened (checked and locked); ``sequential``
    is the class of the sequential engine's checkpoint."""
    fp = run_fingerprint(plan, rec, record_every, dtype, engine)
    if engine == "scan":
        folder = EntryCheckpoint(directory, fp, resume=resume, inputs=plan.sources,
                                 kind="fit-scan")
        folder.open()
        try:
            return ScanPieces(folder, plan)
        except BaseException:
            folder.close()
            raise
    ckpt = sequential(directory, fp, resume=resume, inputs=plan.sources,
                      reads=lambda a, b: segment_reads(plan, a, b))
    ckpt.open()
    return ckpt


@contextlib.contextmanager
def fit_checkpoint(directory, resume: bool, plan: StreamPlan, rec, record_every: int, dtype,
                   engine: str, sequential=Checkpoint):
    """The open checkpoint for the block (None without ``directory``); its lock is released
    when the block ends, and :meth:`remove` it once the result is published."""
    if directory is None:
        yield None
        return
    ckpt = open_fit_checkpoint(directory, resume, plan, rec, record_every, dtype, engine,
                               sequential)
    try:
        yield ckpt
    finally:
        ckpt.close()


def remove_finished_checkpoint(directory, fingerprint: dict, engine: str, inputs) -> None:
    """After a resumed run found its result published: remove the checkpoint a kill between
    publication and clean-up left behind (only a streamlsq checkpoint of this run)."""
    if directory is None:
        return
    if engine == "scan":
        folder = EntryCheckpoint(directory, fingerprint, resume=True, inputs=inputs,
                                 kind="fit-scan")
    else:
        folder = Checkpoint(directory, dict(fingerprint), resume=True, inputs=inputs)
    remove_finished(folder)
