"""A run's first failing task stops the run only once no other task of it is still running:
cancelling a future does not stop a task a worker runs, and a late one wrote into the run's
partial output after it had been removed (a refused predict left ``.pred.zarr.partial-*``)."""

import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from streamlsq.runtime.progress import track_futures


def _task(i: int, folder: str) -> int:
    if i == 0:
        raise ValueError("the first task fails at once")
    time.sleep(1.0)
    (Path(folder) / f"written-by-{i}").write_text("late")
    return 1


def test_the_error_leaves_only_once_the_running_tasks_have_ended(tmp_path):
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        futures = [client.submit(_task, i, str(tmp_path), pure=False) for i in range(3)]
        with pytest.raises(ValueError, match="fails at once"):
            track_futures(client, futures, 3, "tasks", enabled=False)
        # what the caller then removes stays removed: nothing of the run writes after it
        written = sorted(p.name for p in tmp_path.iterdir())
        time.sleep(1.5)
        assert sorted(p.name for p in tmp_path.iterdir()) == written
