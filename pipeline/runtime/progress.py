"""Progress bars (tqdm) for work spread over the cluster.

Bars appear only on a terminal and only for work that lasts more than a couple
of seconds (``delay``), and show rows per second.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import CancelledError

from distributed import Client, as_completed
from tqdm import tqdm  # the text bar: tqdm.auto warns in notebooks without ipywidgets

__all__ = ["row_bar", "track_futures"]


def row_bar(total: int, desc: str, unit: str = "rows", enabled: bool | None = None) -> tqdm:
    """A tqdm bar over rows; ``enabled=None`` shows it only on an interactive stderr."""
    disable = (not sys.stderr.isatty()) if enabled is None else not enabled
    return tqdm(
        total=total, desc=desc, unit=unit, unit_scale=True, delay=2.0, disable=disable,
        leave=False, dynamic_ncols=True,
    )


def track_futures(
    client: Client, futures, total: int, desc: str, unit: str = "rows", enabled=None,
    on_result=None,
) -> list:
    """Wait for ``futures`` (each returning a row count or a (rows, value) pair), showing progress.

    Returns the results in submission order. On the first failure the others are
    cancelled and the error is raised, so no caller continues with a partial set.
    ``on_result(i, result)`` is called as future ``i`` finishes (e.g. to checkpoint it).
    """
    order = {f.key: i for i, f in enumerate(futures)}
    results = [None] * len(futures)
    with row_bar(total, desc, unit, enabled) as bar:
        try:
            for fut in as_completed(futures, loop=client.loop):
                res = fut.result()
                results[order[fut.key]] = res
                if on_result is not None:
                    on_result(order[fut.key], res)
                bar.update(res[0] if isinstance(res, tuple) else int(res))
        except BaseException as exc:
            client.cancel(futures)
            # a task's own error (not a lost connection, a cancellation or an interrupt):
            # the cluster is there, and the other tasks may still be running
            if isinstance(exc, Exception) and not isinstance(
                    exc, (OSError, TimeoutError, CancelledError)) and client.status == "running":
                _wait_until_stopped(client, {f.key for f in futures})
            raise
    return results


def _executing_keys(dask_worker) -> list:
    return [ts.key for ts in dask_worker.state.executing]


def _wait_until_stopped(client: Client, keys: set, timeout: float = 60.0) -> None:
    """Wait (up to ``timeout`` seconds) until no worker still runs a task of ``keys``.

    Cancelling a future does not stop a task that a worker is running: it runs to its end
    and may still write into the run's partial output. The caller removes that output
    once the error leaves, and a late write would create it again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = client.run(_executing_keys)
        except Exception:  # noqa: BLE001 - the cluster is gone: nothing runs there
            return
        if not any(keys & set(v) for v in running.values()):
            return
        time.sleep(0.05)
