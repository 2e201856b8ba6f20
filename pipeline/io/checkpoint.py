"""Checkpoints of the sequential engine: a killed run resumes from its last committed segment.

Layout of a checkpoint folder:

    progress.json        fingerprint of the run, its segments, index of the next segment and
                         the name of its state file (written last: this is the commit)
    state-000041.npz     the recursion state after segment ``next - 1``
    segment-000042.npz   recorded steps of segment 42 (one file per segment, written once)

Every file is written to a temporary name and renamed, so a kill at any moment
leaves either the previous or the new checkpoint, never a torn one. Resuming
checks that the fingerprint (inputs, method, parameters, stream plan — blocks,
epochs, shuffle seed, interleaving — record interval, dtype, segments) is the
run being resumed; otherwise it refuses.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from streamlsq.errors import InputError

__all__ = ["Checkpoint"]


def _atomic_savez(path: Path, **arrays) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


class Checkpoint:
    """Save and restore the progress of one sequential run in ``directory``."""

    def __init__(self, directory: str | os.PathLike, fingerprint: dict, resume: bool = False,
                 every: int = 1):
        self.directory = Path(directory)
        self.fingerprint = dict(fingerprint)
        self.resume = resume
        self.every = max(1, int(every))

    def saved_segments(self) -> list[tuple[int, int]] | None:
        """The segments a resumable checkpoint was cut into (the default segment size
        depends on the workers' memory, which may differ on the resuming cluster)."""
        progress = self.directory / "progress.json"
        if not (self.resume and progress.exists()):
            return None
        saved = json.loads(progress.read_text()).get("segments")
        return [tuple(s) for s in saved] if saved else None

    def bind(self, segments: list[tuple[int, int]]) -> None:
        """Fix the segment plan (part of the fingerprint); start afresh unless resuming."""
        self.segments = [[int(a), int(b)] for a, b in segments]
        digest = hashlib.sha256(json.dumps(self.segments).encode()).hexdigest()[:16]
        self.fingerprint["segments"] = digest
        self.n_segments = len(segments)
        if not self.resume and self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def load(self):
        """(next segment, state, parts so far) from the folder, or None to start from scratch."""
        progress = self.directory / "progress.json"
        if not (self.resume and progress.exists()):
            return None
        saved = json.loads(progress.read_text())
        if saved["fingerprint"] != self.fingerprint:
            diff = sorted(
                k for k in set(saved["fingerprint"]) | set(self.fingerprint)
                if saved["fingerprint"].get(k) != self.fingerprint.get(k)
            )
            raise InputError(
                f"{self.directory}: checkpoint belongs to a different run (differs in: "
                f"{', '.join(diff)}); rerun without --resume or point --checkpoint elsewhere"
            )
        nxt = int(saved["next"])
        with np.load(self.directory / saved["state"]) as z:
            state = {k: z[k] for k in z.files}
        parts = [self._load_part(i) for i in range(nxt)]
        return nxt, state, parts

    def _load_part(self, i: int) -> dict:
        with np.load(self.directory / f"segment-{i:06d}.npz") as z:
            part = {"steps": z["steps"], "rows_seen": z["rows_seen"],
                    "coefs": z["coefs"] if "coefs" in z.files else None,
                    "diagnostics": {k[5:]: z[k] for k in z.files if k.startswith("diag_")}}
        return part

    def save(self, i: int, part: dict) -> None:
        """Commit segment ``i``: its recorded steps, then (every few) the state and progress."""
        arrays = {"steps": part["steps"], "rows_seen": part["rows_seen"]}
        if part["coefs"] is not None:
            arrays["coefs"] = part["coefs"]
        arrays.update({f"diag_{k}": v for k, v in part["diagnostics"].items()})
        _atomic_savez(self.directory / f"segment-{i:06d}.npz", **arrays)
        if (i + 1) % self.every and i + 1 != self.n_segments:
            return
        name = f"state-{i:06d}.npz"
        _atomic_savez(self.directory / name, **part["state"])
        tmp = self.directory / "progress.json.tmp"
        tmp.write_text(json.dumps({"fingerprint": self.fingerprint, "segments": self.segments,
                                   "next": i + 1, "state": name}))
        os.replace(tmp, self.directory / "progress.json")
        for old in self.directory.glob("state-*.npz"):
            if old.name != name:
                old.unlink(missing_ok=True)
