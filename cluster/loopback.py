#!/usr/bin/env python
"""Start (and stop) a real Dask scheduler and N workers on the loopback interface.

Separate processes started with dask's own command-line entry points, exactly
as on a real cluster, but bound to 127.0.0.1. The test suite uses it to check
that results do not depend on the cluster they run on.

    python cluster/loopback.py start --workers 2 --memory-limit 1GB --state /tmp/lb.json
    DASK_SCHEDULER_ADDRESS=$(python cluster/loopback.py address --state /tmp/lb.json) \
        streamlsq fit kf4lls data.zarr --out fit.zarr
    python cluster/loopback.py stop --state /tmp/lb.json

From Python: ``with LoopbackCluster(n_workers=2) as address: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["LoopbackCluster"]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"loopback cluster: {what} did not come up in {timeout:.0f} s")
        time.sleep(0.1)


class LoopbackCluster:
    """A scheduler and ``n_workers`` single-process workers on 127.0.0.1.

    ``memory_limit`` is passed to each worker (dask pauses, spills and finally
    restarts a worker that goes past it), ``nthreads`` per worker.
    """

    def __init__(self, n_workers: int = 2, nthreads: int = 1, memory_limit: str = "auto",
                 timeout: float = 60.0):
        self.n_workers = n_workers
        self.nthreads = nthreads
        self.memory_limit = memory_limit
        self.timeout = timeout
        self.procs: list[subprocess.Popen] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="streamlsq-loopback-")
        self.scheduler_file = Path(self._tmp.name) / "scheduler.json"
        self.address: str | None = None

    def start(self) -> str:
        env = dict(os.environ, DASK_DISTRIBUTED__LOGGING__DISTRIBUTED="error")
        common = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--dashboard-address", "127.0.0.1:0",
             "--scheduler-file", str(self.scheduler_file)],
            **common,
        ))
        _wait_for(self.scheduler_file.exists, self.timeout, "the scheduler")
        _wait_for(lambda: self.scheduler_file.stat().st_size > 0, self.timeout, "the scheduler")
        self.address = json.loads(self.scheduler_file.read_text())["address"]
        for i in range(self.n_workers):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", self.address,
                 "--host", "127.0.0.1", "--nthreads", str(self.nthreads), "--nworkers", "1",
                 "--memory-limit", str(self.memory_limit), "--name", f"loopback-{i}",
                 "--no-dashboard", "--local-directory", self._tmp.name],
                **common,
            ))
        from distributed import Client

        with Client(self.address, timeout=self.timeout) as client:
            client.wait_for_workers(self.n_workers, timeout=self.timeout)
        return self.address

    def stop(self) -> None:
        # the workers first, then the scheduler: a worker whose scheduler closes under it
        # waits out its reconnection attempts before it ends
        for group in (self.procs[1:], self.procs[:1]):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
            for p in group:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()
        self._tmp.cleanup()

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start in the background and print the address")
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--threads", type=int, default=1)
    start.add_argument("--memory-limit", default="auto")
    for name in ("start", "stop", "address"):
        p = start if name == "start" else sub.add_parser(name)
        p.add_argument("--state", required=True, help="JSON file recording the processes")
    args = parser.parse_args(argv)
    state = Path(args.state)
    if args.command == "start":
        cluster = LoopbackCluster(args.workers, args.threads, args.memory_limit)
        address = cluster.start()
        # hand the processes over to the state file; stop() of a later call ends them
        state.write_text(json.dumps({"address": address, "pids": [p.pid for p in cluster.procs],
                                     "tmp": cluster._tmp.name}))
        print(address)
        return 0
    if not state.exists():
        print(f"loopback: no state file {state}", file=sys.stderr)
        return 2
    info = json.loads(state.read_text())
    if args.command == "address":
        print(info["address"])
        return 0
    for pid in reversed(info["pids"]):
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    for pid in info["pids"]:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    state.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
