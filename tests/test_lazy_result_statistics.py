"""The statistics of a fit read from a lazily opened result (``open_result(path)``, its arrays
Dask-backed) equal those of the fit in memory: ``summary``, ``summary_text`` and
``wald_test`` compute what they need instead of refusing a lazy array."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

import streamlsq
from streamlsq.stream.statistics import summary_text


def test_summary_and_wald_test_of_a_lazily_opened_result_equal_the_in_memory_fit(tmp_path,
                                                                                client):
    rng = np.random.default_rng(3)
    table = xr.Dataset({n: ("row", rng.standard_normal(400)) for n in ("a", "b")})
    table["y"] = 1.0 + 0.5 * table.a - 0.25 * table.b + rng.standard_normal(400)
    out = tmp_path / "fit.zarr"
    fitted = streamlsq.fit_stream(table, x=["a", "b"], y="y", fit_intercept=True, out=out,
                                  client=client, progress=False)
    lazy = streamlsq.open_result(out)
    assert lazy.bse.chunks is not None  # the premise: Dask-backed arrays
    got, expected = streamlsq.summary(lazy), streamlsq.summary(fitted)
    pd.testing.assert_frame_equal(got, expected)
    assert got.attrs["model"] == expected.attrs["model"]
    assert got.attrs["model"]["nobs"] == 400
    assert summary_text(lazy) == summary_text(fitted)
    assert streamlsq.wald_test(lazy, "a = b") == streamlsq.wald_test(fitted, "a = b")
