"""The two wrong models the sixth re-test found, both from names formulaic takes for something
else: a level beginning with ``__`` (``__other__``, ``__missing__``: common placeholders) lost
its dummy column, and a column named ``Intercept`` was replaced by the constant; each fit was
published with exit 0. Both are now refused in one line, exit code 2, the folder as it was, on
both engines, a GLM and a converted store; renamed, the same rows fit as statsmodels does."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.formula.api as smf
import xarray as xr
from test_retest_round5 import _frame

from conftest import one_line
from faultkit import leftovers, snapshot

COMMANDS = [("fit", "kf4lls"), ("fit", "kf4lls", "--engine", "scan"),
            ("fit", "glm", "--family", "gaussian")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("converted", [False, True])
def test_a_level_formulaic_would_leave_out_is_refused(tmp_path, cli, command, converted):
    frame = _frame()
    frame["g"] = frame.g.map({"a": "A", "b": "__other__", "c": "q"})
    frame.to_parquet(tmp_path / "t.parquet")
    data = tmp_path / "t.parquet"
    if converted:
        assert cli("convert", data, "--out", tmp_path / "c.zarr").exit_code == 0
        data = tmp_path / "c.zarr"
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli(*command, data, "--formula", "y ~ x1 + C(g)", "--out", out))
    assert ("column 'g' has the level '__other__': formulaic, which builds the design, leaves "
            "out the column of a level whose name begins with '__'; rename the level") in line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # renamed, the design has every level's column and the fit is statsmodels'
    frame["g"] = frame.g.replace({"__other__": "other"})
    frame.to_parquet(tmp_path / "r.parquet")
    assert cli(*command, tmp_path / "r.parquet", "--formula", "y ~ x1 + C(g)", "--out",
               out).exit_code == 0
    ref = smf.ols("y ~ x1 + C(g)", frame).fit().params
    ds = xr.open_zarr(out)
    coef = dict(zip([str(f).lower() for f in ds.feature.values],
                    ds.coef.values.reshape(-1, ds.feature.size)[-1], strict=True))
    assert sorted(coef) == sorted(name.lower() for name in ref.index)
    np.testing.assert_allclose([coef[name.lower()] for name in ref.index], ref.to_numpy(),
                               rtol=1e-9)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("formula", ["y ~ x1 + Intercept", "y ~ x1 + Intercept - 1"])
def test_a_column_named_intercept_is_refused(tmp_path, cli, command, formula):
    frame = _frame()
    frame["Intercept"] = frame.x2
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli(*command, tmp_path / "t.parquet", "--formula", formula, "--out", out))
    assert (f"the formula {formula!r} reads the column 'Intercept', the name a formula's "
            "design gives its constant, which would take the column's place; rename the "
            "column") in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []
