"""notebooks/timeseries.ipynb: the analysis a user publishes on statsmodels' macrodata and
grunfeld, read from Parquet, executed again in quick mode on the session cluster; every
difference to statsmodels it prints (HAC, rolling and HC0 windows, predictions, five panel
covariances among them hac-panel) is below 1e-9 and it draws its three figures."""

from __future__ import annotations

import re

from conftest import stored_notebook

#: "name   1.2e-15" lines: the largest relative differences the notebook prints
DIFFERENCE = re.compile(r"^\s+(\S.*?)\s+(\d\.\de[+-]\d\d)\s*$", re.MULTILINE)


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_timeseries_notebook_executes_and_agrees_with_statsmodels(kernel_env, client):
    from nbclient import NotebookClient

    nb = stored_notebook("timeseries")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(kernel_env.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(_text(c) for c in code)
    differences = dict(DIFFERENCE.findall(text))
    # HAC statistics, the rolling windows, the prediction frame; each panel covariance
    for name in ("bse", "cov_params", "rsquared_adj", "obs_ci_lower", "mean_se", "HC0 bse",
                 "HC0 tvalues"):
        assert name in differences, (name, text)
    assert sum(line.startswith(("nonrobust", "cluster by firm", "two-way", "HAC within firms",
                                "Driscoll")) for line in text.splitlines()) >= 5
    panel = re.findall(r"\s(\d\.\de[+-]\d\d)\s*$", text.split("nonrobust", 1)[1],
                       re.MULTILINE)[:5]
    assert len(panel) == 5
    for value in [*differences.values(), *panel]:
        assert float(value) < 1e-9, text
    assert "HAC (bartlett kernel, 4 lags, without small-sample correction)" in text
    assert "periods of 'year'" in text and "164 windows of 40 quarters" in text
    assert "200 expanding windows (rows 4 to 203)" in text
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3
    assert (kernel_env / "timeseries" / "hac.zarr").exists()
    assert len(client.scheduler_info()["workers"]) == 2  # the shared cluster stays up
