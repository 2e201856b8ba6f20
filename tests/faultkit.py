"""What the fault tests share: running the command line, and the contract of a refusal.

A refusal (``docs/faults.md``) is exit code 2, exactly one line on stderr naming what is
wrong and where, and the filesystem as it was found: :func:`snapshot` before and after,
and no temporary or owner file next to the output.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from streamlsq.cli.main import main


def cli(*args) -> list[str]:
    """The command line of ``streamlsq ARGS`` in a new interpreter."""
    return [sys.executable, "-m", "streamlsq.cli", *map(str, args)]


def invoke(*args, scheduler: str | None = None):
    """``streamlsq ARGS`` in this process (CliRunner), on ``scheduler`` when given."""
    extra = ["--scheduler", scheduler] if scheduler else []
    return CliRunner().invoke(main, [*map(str, args), *extra])


def refusal(result) -> str:
    """The one error line of a refused command (CliRunner result or CompletedProcess)."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    err = result.stderr
    assert code == 2, f"exit code {code}: {err}{getattr(result, 'output', '')}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert lines[0].startswith("streamlsq: error: "), lines[0]
    return lines[0]


def snapshot(folder, skip=None) -> dict[str, tuple]:
    """Every file and folder under ``folder``: relative path -> (kind, size, mtime, bytes
    hash of small files), to assert that a refusal left the filesystem as it found it;
    ``skip``: a path left out (a named pipe, whose reading would block)."""
    folder = Path(folder)
    out = {}
    for root, dirs, files in os.walk(folder):
        files = [f for f in files if skip is None or Path(root, f) != Path(skip)]
        for d in dirs:
            p = Path(root, d)
            out[str(p.relative_to(folder))] = ("link", os.readlink(p)) if p.is_symlink() \
                else ("dir",)
        for f in files:
            p = Path(root, f)
            if p.is_symlink():
                out[str(p.relative_to(folder))] = ("link", os.readlink(p))
                continue
            st = p.stat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size <= 1 << 20 \
                else None
            out[str(p.relative_to(folder))] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def unlocked(snap: dict) -> dict:
    """A :func:`snapshot` without the contents of a checkpoint's lock file (a refusal once
    the lock is taken has written it anew: who holds it, since when)."""
    return {k: (v[:1] if k.endswith("/lock") else v) for k, v in snap.items()}


def leftovers(out) -> list[str]:
    """Temporaries or owner files streamlsq left next to ``out``."""
    out = Path(out)
    return sorted(p.name for p in out.parent.glob(f".{out.name}.*"))


def wait_for(predicate, proc: subprocess.Popen | None = None, timeout: float = 120.0,
             poll: float = 0.01, what: str = "the condition"):
    """Poll ``predicate`` until it returns a true value (returned); fail if ``proc`` ends
    first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (code {proc.returncode}) before "
                                 f"{what}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def commits(checkpoint) -> int:
    """How much a checkpoint folder has committed: the sequential fit's next segment, or
    the number of committed entries (scan pieces, metalearn steps, study batches)."""
    try:
        progress = json.loads((Path(checkpoint) / "progress.json").read_text())
    except (OSError, ValueError):
        return 0
    if "next" in progress:
        return int(progress["next"])
    entries = progress.get("entries", {})
    iterations = [int(n.split("-")[1]) for n in entries if n.startswith("iteration-")]
    if iterations:  # EM keeps its last iteration only
        return max(iterations)
    return len([n for n in entries if n != "pieces"])


def start(cmd, **kwargs) -> subprocess.Popen:
    """A command in a session of its own (its LocalCluster's processes with it)."""
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the command and every process of its session, at once."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
