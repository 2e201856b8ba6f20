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
from streamlsq.errors import InputError  # noqa: F401 (the refusals below)

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


# -- fit glm --missing drop: the line names the rows dropped -----------------------------------

def test_the_glm_line_says_the_rows_missing_drop_left_out(tmp_path, cli):
    frame = _frame()
    frame.loc[[6, 40], "expo"] = np.nan
    frame.to_parquet(tmp_path / "t.parquet")
    result = cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                 "--family", "poisson", "--formula", "cnt ~ x1", "--exposure", "expo",
                 "--missing", "drop")
    assert result.exit_code == 0, result.stderr
    assert "GLM poisson (log) over 400 rows (398 fitted, 2 dropped: --missing drop), " \
        "converged" in result.stdout, result.stdout
    kept = frame.dropna()
    ref = smf.glm("cnt ~ x1", kept, family=sm.families.Poisson(), exposure=kept.expo).fit()
    fit = streamlsq.open_result(tmp_path / "g.zarr", lazy=False)
    assert int(fit.nobs.values[0]) == 398
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-10)


# -- a Parquet folder written partitioned (g=a/part.parquet) -----------------------------------

@pytest.fixture
def partitioned(tmp_path):
    """A folder written by pandas' ``partition_cols=["g"]``: the column g is in the folders'
    names (g=a/, g=b/, g=c/), not in the files."""
    frame = _frame()
    frame.to_parquet(tmp_path / "hive", partition_cols=["g"])
    assert "g" in pd.read_parquet(tmp_path / "hive").columns  # as pandas reads it
    return tmp_path / "hive"


def test_convert_of_a_partitioned_folder_does_not_drop_its_key_silently(partitioned, cli):
    before = snapshot(partitioned.parent)
    out = partitioned.parent / "c.zarr"
    line = one_line(cli("convert", partitioned, "--out", out))
    assert f"{partitioned}: its files lie in partition folders (g=a/...), whose key 'g' " \
        "streamlsq does not read as a column (pandas does), so the store would go without " \
        "it; convert the frame pd.read_parquet(folder) from Python" in line, line
    assert "--columns" in line
    assert snapshot(partitioned.parent) == before and leftovers(out) == []
    # the files' columns, named, are converted
    result = cli("convert", partitioned, "--out", out, "--columns", "x1,cnt")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("how", [("--formula", "cnt ~ x1 + C(g)"), ("--x", "x1,g")])
def test_a_partition_key_named_by_a_fit_is_said_to_be_one(partitioned, cli, how):
    before = snapshot(partitioned.parent)
    out = partitioned.parent / "g.zarr"
    args = [*how] if how[0] == "--formula" else [*how, "--y", "cnt"]
    line = one_line(cli("fit", "glm", partitioned, "--out", out, "--family", "poisson",
                        *args))
    assert "'g'" in line and "is missing" in line, line
    assert line.endswith("'g' is a partition key of the folder's paths (g=a/...), which "
                         "streamlsq does not read as a column (pandas does): give the frame "
                         "pd.read_parquet(folder) from Python, or write the column into the "
                         "files"), line
    assert snapshot(partitioned.parent) == before and leftovers(out) == []


def test_the_remedy_for_a_partition_key_fits_as_statsmodels(partitioned, client):
    frame = pd.read_parquet(partitioned)
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1 + C(g)",
                            client=client)
    ref = smf.glm("cnt ~ x1 + C(g)", frame, family=sm.families.Poisson()).fit()
    labels = [str(v) for v in fit.feature.values]
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params[labels].values,
                               rtol=1e-10)
