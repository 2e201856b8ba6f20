"""Locks held for the life of a run: an OS-level advisory lock (``fcntl.flock``) on a file.

Why ``flock`` rather than a file whose mere existence is the lock, or the ``filelock``
package: the kernel drops the lock the moment the process holding it dies, even by
SIGKILL, so a later run tells a live owner from a dead one at once, without timeouts
or stale-lock guesses, and no dependency is added. On Linux NFS, ``flock`` is carried
by POSIX byte-range locks, so it also holds between machines sharing a folder.

A lock file holds one line describing its owner (host, process id, start time), shown
when another run finds the lock taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["FileLock"]


class FileLock:
    """An exclusive, non-blocking lock on the file ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, describe: bool = True) -> bool:
        """Take the lock if no live process holds it; True when taken. With ``describe``
        the file is rewritten with this process's description."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            # the file may have been unlinked (and recreated) by its previous owner between
            # our open and our lock: then we hold a lock on a file nobody else can see
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        if describe:
            command = " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]) if sys.argv else ""
            text = (f"host {socket.gethostname()}, process {os.getpid()}, since "
                    f"{datetime.now(UTC).isoformat(timespec='seconds')}: {command}\n")
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
        return True

    def owner(self) -> str:
        """The description written by the process that holds (or last held) the lock."""
        try:
            return self.path.read_text().strip() or "unknown owner"
        except OSError:
            return "unknown owner"

    def release(self, unlink: bool = False) -> None:
        """Give the lock up; with ``unlink`` remove the file first (while still holding it,
        so that no other process can have taken it in between)."""
        if self._fd is None:
            return
        if unlink:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self._fd)  # closing the descriptor drops the lock
        self._fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
