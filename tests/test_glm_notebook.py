"""notebooks/glm.ipynb runs in quick mode on the session cluster: its comparisons with
statsmodels print differences below 1e-8, it draws its figure, and the stores it wrote hold
statsmodels' fit and predictions (computed here again, independently of the notebook)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
import xarray as xr

import streamlsq

from conftest import stored_notebook

ROOT = Path(__file__).resolve().parents[1]
#: a relative difference as the notebook prints it (1.6e-11)
DIFFERENCE = re.compile(r"\d\.\d+e[-+]\d+")


def _text(cell) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                   for o in cell.get("outputs", []))


def test_glm_notebook_executes_in_quick_mode(kernel_env, client):
    from nbclient import NotebookClient

    nb = stored_notebook("glm")
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(kernel_env.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = {c.id: _text(c) for c in code}
    everything = "".join(text.values())
    assert "Model Family:                  poisson" in everything
    assert "No. Observations:                 6366" in everything
    # every relative difference to statsmodels the notebook prints: GLM (both covariances),
    # get_prediction, the 6,366 rows with HC1, star98's two-column binomial
    compared = [line for line in everything.splitlines() if "relative difference" in line]
    assert len(compared) == 5, compared
    for line in compared:
        if "cluster:" in line:  # the 6,366 rows' CRV1 counts N differently (see the notebook)
            line = line.split("of their standard errors")[0]
        values = [float(v) for v in DIFFERENCE.findall(line)]
        assert values and max(values) < 1e-8, line
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    # the stores: statsmodels' fit of the women one row each, and its predictions
    data = kernel_env / "glm"
    frame = sm.datasets.fair.load_pandas().data
    formula = "children ~ C(religious) + C(rate_marriage) + educ + age + C(yrs_married)"
    res = smf.glm(formula, frame, family=sm.families.Poisson()).fit(cov_type="HC1")
    fit = streamlsq.open_result(data / "children-hc1.zarr", lazy=False)
    assert fit.attrs["freq_weights_variable"] == "n" and fit.attrs["cov_type"] == "HC1"
    params = pd.Series(fit.coef.isel(step=-1, target=0).values,
                       index=[str(f).replace("intercept", "Intercept")
                              for f in fit.feature.values])
    np.testing.assert_allclose(params[res.params.index], res.params, rtol=1e-8, atol=0)
    bse = pd.Series(fit.bse[:, 0].values, index=params.index)
    np.testing.assert_allclose(bse[res.bse.index], res.bse, rtol=1e-8, atol=0)
    grid = pd.read_parquet(data / "new-rows.parquet")
    pred = xr.open_zarr(data / "new-rows-pred.zarr")
    ref = res.get_prediction(grid).summary_frame()
    np.testing.assert_allclose(pred.yhat[:, 0], ref["mean"], rtol=1e-8)
    np.testing.assert_allclose(pred.mean_ci_upper[:, 0], ref["mean_ci_upper"], rtol=1e-8)
    assert len(client.scheduler_info()["workers"]) == 2  # the shared cluster left running
