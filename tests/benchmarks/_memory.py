"""Shared by the benchmark scripts: the peak memory of the cluster's worker processes."""

from __future__ import annotations

import threading
import time

import psutil
from distributed import Client


class WorkerPeak:
    """Largest RSS of any one worker process while the block runs."""

    def __init__(self, client: Client):
        self.pids = list(client.run(lambda: __import__("os").getpid()).values())
        self.peak = 0
        self._stop = threading.Event()

    def _loop(self):
        procs = [psutil.Process(p) for p in self.pids]
        while not self._stop.is_set():
            for p in procs:
                try:
                    self.peak = max(self.peak, p.memory_info().rss)
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.05)

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
