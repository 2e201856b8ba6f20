"""notebooks/cluster.ipynb runs in quick mode on the session cluster (DASK_SCHEDULER_ADDRESS),
shows the dashboard link, a progress bar, the trajectory figure and the clusters found."""

from __future__ import annotations

import numpy as np
import zarr

from conftest import lstsq, read_all, stored_notebook


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        data = o.get("data", {})
        parts.append(data.get("text/plain", "") + data.get("text/html", ""))
    return "".join(parts)


def test_cluster_notebook_executes_in_quick_mode(kernel_env, client):
    from nbclient import NotebookClient

    nb = stored_notebook("cluster")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(kernel_env.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    everything = "".join(_text(c) for c in code)
    assert client.scheduler.address in everything and "dashboard:" in everything
    assert "Open the Dask dashboard" in everything or "dashboard: None" in everything
    assert "rows/s" in everything
    # distributed's progress bar over the first pass, run to the end
    assert "100% Completed" in everything and "feature means within" in everything
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    # the stores it wrote: a complete fit equal to the store's least squares, and a model
    data = kernel_env / "cluster"
    X, Y = read_all(data / "stream.zarr")
    coef = zarr.open_group(str(data / "kf4lls.zarr"), mode="r")["coef"][-1]
    np.testing.assert_allclose(coef, lstsq(X, Y), rtol=1e-8, atol=1e-10)
    model = zarr.open_group(str(data / "model.zarr"), mode="r")
    assert model.attrs["heavy_accuracy"] == 1.0
    # the shared cluster is left running
    assert len(client.scheduler_info()["workers"]) == 2
