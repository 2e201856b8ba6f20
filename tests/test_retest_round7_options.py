"""Weak cases of the sixth re-test on options and statistics: an option no part of the run
reads was ignored without a word (``--no-use-correction`` with a covariance that has no
small-sample factor to switch off, ``--window-step`` without ``--window``, and so
``--kernel`` without a HAC covariance, ``--seed`` without ``--shuffle``); a two-way
cluster covariance with a negative variance was summarised as "no statistics: none stored";
``fit glm --help`` called three options a GLM takes "Least squares only"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import xarray as xr

import streamlsq
from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot


def _rows(seed=0, n=40):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    return pd.DataFrame({"y": 1.0 + x + rng.standard_normal(n), "x": x,
                         "a": rng.integers(0, 3, n), "b": rng.integers(0, 3, n)})


@pytest.mark.parametrize("given, cov", [
    (("--no-use-correction",), ()),
    (("--no-use-correction",), ("--cov-type", "HC1")),
    (("--use-correction",), ("--cov-type", "cluster", "--groups", "a")),
    (("--window-step", "4"), ()),
    (("--kernel", "uniform"), ("--cov-type", "HC1")),
    (("--seed", "5"), ()),
])
def test_an_option_no_part_of_the_fit_reads_is_refused(tmp_path, cli, given, cov):
    _rows().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", tmp_path / "t.parquet", "--x", "x", "--y", "y",
                        "--out", out, *given, *cov))
    wanted = {"--no-use-correction": "--no-use-correction goes with --cov-type HAC, "
                                     "hac-groupsum or hac-panel",
              "--use-correction": "--use-correction goes with --cov-type HAC, hac-groupsum "
                                  "or hac-panel",
              "--window-step": "--window-step N goes with --window N",
              "--kernel": "--kernel goes with --cov-type HAC, hac-groupsum or hac-panel",
              "--seed": "--seed goes with --shuffle (the seed of its random order)",
              }[given[0]]
    assert line == f"streamlsq: error: {wanted}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


@pytest.mark.parametrize("options, wanted", [
    ({"use_correction": False}, "--no-use-correction goes with"),
    ({"use_correction": True, "cov_type": "HC0"}, "--use-correction goes with"),
    ({"window_step": 2}, "--window-step N goes with --window N"),
    ({"kernel": "bartlett", "cov_type": "cluster", "groups": "a"}, "--kernel goes with"),
])
def test_from_python_too(client, options, wanted):
    table = xr.Dataset.from_dataframe(_rows()).rename(index="row")
    with pytest.raises(InputError, match=wanted):
        streamlsq.fit_stream(table, x="x", y="y", client=client, **options)


def test_the_switches_still_reach_the_covariances_that_read_them(client):
    rows = _rows(n=80)
    table = xr.Dataset.from_dataframe(rows).rename(index="row")
    fit = streamlsq.fit_stream(table, x="x", y="y", fit_intercept=True, client=client,
                               cov_type="HAC", maxlags=3, use_correction=False)
    ref = sm.OLS(rows.y, sm.add_constant(rows.x)).fit(
        cov_type="HAC", cov_kwds={"maxlags": 3, "use_correction": False})
    np.testing.assert_allclose(fit.bse.values[:, 0], ref.bse.to_numpy(), rtol=1e-9)
    windows = streamlsq.fit_stream(table, x="x", y="y", fit_intercept=True, client=client,
                                   window=20, window_step=5)
    np.testing.assert_array_equal(windows.window_end.values, np.arange(19, 80, 5))


def _negative_variance_rows(which: int):
    """Rows whose two-way cluster covariance (statsmodels') has a negative variance of
    coefficient ``which`` (0 the intercept, 1 the slope: then the F test's R V Rᵀ is
    negative too, which round 8 found refused as "singular in the slopes")."""
    import warnings

    for seed in range(400):
        rows = _rows(seed, n=24)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' sqrt of the negative variance
            ref = sm.OLS(rows.y, sm.add_constant(rows.x)).fit(
                cov_type="cluster", cov_kwds={"groups": rows[["a", "b"]].to_numpy()})
        if np.diag(ref.cov_params())[which] < 0:
            return rows, ref
    raise AssertionError("no seed gives a negative variance")


@pytest.mark.parametrize("which", [0, 1])
def test_a_two_way_covariance_with_a_negative_variance_says_so(tmp_path, cli, which):
    rows, ref = _negative_variance_rows(which)
    negative = [name for name, v in zip(["intercept", "x"], np.diag(ref.cov_params()),
                                        strict=True) if v < 0]
    rows.to_parquet(tmp_path / "t.parquet")
    out = tmp_path / "f.zarr"
    run = cli("fit", "kf4lls", tmp_path / "t.parquet", "--x", "x", "--y", "y", "--intercept",
              "--out", out, "--cov-type", "cluster", "--groups", "a,b")
    assert run.exit_code == 0, run.output
    ds = xr.open_zarr(out)
    # the covariance is statsmodels', stored as it is; the standard errors it leaves
    # undefined are not published, and why is said. (V_A + V_B - V_AB cancels by a factor
    # of about 11 on these rows: its entries carry about 11 ε of rounding, far inside 1e-9)
    np.testing.assert_allclose(ds.cov_params.values[:, :, 0], ref.cov_params().to_numpy(),
                               rtol=1e-9)
    np.testing.assert_allclose(ds.fvalue.values[0], ref.fvalue, rtol=1e-9)
    np.testing.assert_allclose(ds.f_pvalue.values[0], ref.f_pvalue, rtol=1e-9)
    assert "bse" not in ds and "bse" in ds.attrs["undefined_statistics"]
    because = ds.attrs["undefined_because"]
    assert f"negative variance for {', '.join(map(repr, negative))}" in because
    assert "need not be positive semi-definite" in because
    text = cli("info", out).output
    assert "none stored" not in text and "R-squared:" in text and because in text
    assert "undefined: bse" in run.output


def test_the_glm_help_does_not_call_its_own_options_least_squares_only(cli):
    run = cli("fit", "glm", "--help")
    assert run.exit_code == 0
    assert "Least squares only" not in run.output
    assert "var_weights" in run.output
    # and its refusals name only what fit glm takes (re-test round 8, G3)
    from streamlsq.options.glm import GLM

    with pytest.raises(InputError, match="^--groups VAR goes with --cov-type cluster$"):
        GLM.check({"groups": "g", "cov_type": "HC1"})
