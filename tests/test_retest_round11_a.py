"""Cases of the eleventh re-test (part A): a relative ``--out`` of a command whose Dask
tasks write the result (``predict``, ``simulate``) failed with ``input/output error
(FileNotFoundError: .p.zarr.partial-... does not exist)`` when the workers of ``--scheduler``
ran in another folder; ..."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
import zarr

import streamlsq
from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], size=n)
    expo = rng.uniform(0.5, 2.0, size=n)
    eta = 0.3 + 0.5 * x1 - 0.2 * x2 + 0.4 * (g == "b")
    trials = rng.integers(1, 8, size=n)
    return pd.DataFrame({
        "x1": x1, "x2": x2, "g": g, "expo": expo,
        "cnt": rng.poisson(np.exp(eta) * expo).astype(float),
        "trials": trials.astype(float),
        "succ": rng.binomial(trials, 1 / (1 + np.exp(-eta))).astype(float),
        "yb": (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float),
    })


# -- a relative --out on a cluster whose workers run in another folder ------------------------

@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The command's working folder, other than the session cluster's workers' (they were
    started in the folder pytest runs in), as with ``--scheduler`` to a cluster started
    elsewhere."""
    here = tmp_path / "here"
    here.mkdir()
    assert os.path.realpath(os.getcwd()) != os.path.realpath(here)
    monkeypatch.chdir(here)
    return here


def test_predict_with_a_relative_out_writes_where_the_command_runs(elsewhere, cli, client):
    frame = _frame()
    frame.to_parquet(elsewhere / "t.parquet")
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1 + C(g)",
                            exposure="expo", out=elsewhere / "fit.zarr", client=client)
    result = cli("predict", "fit.zarr", "t.parquet", "--out", "p.zarr")
    assert result.exit_code == 0, result.stderr
    ref = smf.glm("cnt ~ x1 + C(g)", frame, family=sm.families.Poisson(),
                  exposure=frame.expo).fit()
    yhat = zarr.open_group(str(elsewhere / "p.zarr"), mode="r")["yhat"][:, 0]
    np.testing.assert_allclose(yhat, ref.predict(frame, exposure=frame.expo), rtol=1e-10)
    assert fit is not None and leftovers(elsewhere / "p.zarr") == []


def test_simulate_with_a_relative_out_writes_where_the_command_runs(elsewhere, cli):
    result = cli("simulate", "stream", "--out", "s.zarr", "--rows", 300, "--features", 2)
    assert result.exit_code == 0, result.stderr
    assert zarr.open_group(str(elsewhere / "s.zarr"), mode="r")["X"].shape == (300, 2)
    assert leftovers(elsewhere / "s.zarr") == []
