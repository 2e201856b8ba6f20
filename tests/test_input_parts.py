"""The parts of an input (``io/parts.py``), the record of what a fit read
(``stream/fit_inputs.py``) and a recursion's optional abilities (the recursion contract).

The protocols are checked against the real implementations, member by member: a method with
the protocol's parameters, a property where the protocol has one (``in_memory`` and
``from_table`` are properties everywhere), the data members on inputs really opened. The
record is checked against the attributes a real fit writes, against results of earlier
layouts (attributes left out), and by the robust pass of a published formula fit, compared
with statsmodels' ``ols(formula).fit(cov_type="HC1")``.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from streamlsq import fit_stream, robust_covariance, simulate_stream
from streamlsq.io.formulas import DesignInput, DesignRows
from streamlsq.io.parts import OpenedInput, RowsReader
from streamlsq.io.sources import DatasetInput, DatasetRows, StoreInput, _open_input
from streamlsq.io.stores import StoreRows
from streamlsq.io.tables import TableInput, TableRows
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.kernels.recursions.registry import RECURSIONS
from streamlsq.stream.fit_inputs import FitInputs

READERS = (StoreRows, DatasetRows, TableRows, DesignRows)
OPENED = (StoreInput, DatasetInput, TableInput, DesignInput)


def _members(protocol) -> dict[str, str]:
    """{name: 'property' | 'method' | 'data'} of the members a protocol declares."""
    out = {}
    for name, value in vars(protocol).items():
        if isinstance(value, property):
            out[name] = "property"
        elif inspect.isfunction(value) and not name.startswith("_"):
            out[name] = "method"
    out.update({name: "data" for name in protocol.__annotations__})
    return out


@pytest.mark.parametrize("protocol, classes", [(RowsReader, READERS), (OpenedInput, OPENED)])
def test_every_implementation_has_every_member_of_its_protocol_of_the_same_kind(protocol,
                                                                                  classes):
    members = _members(protocol)
    assert {"in_memory", "from_table", "read", "chunk_stamps"} <= set(members) \
        or {"columns", "rows", "categories"} <= set(members)
    for cls in classes:
        fields = getattr(cls, "__dataclass_fields__", {})
        for name, kind in members.items():
            where = f"{cls.__name__}.{name}"
            if kind == "method":
                assert inspect.isfunction(getattr(cls, name, None)), where
                wanted = list(inspect.signature(getattr(protocol, name)).parameters)
                assert list(inspect.signature(getattr(cls, name)).parameters) == wanted, where
            elif name in ("in_memory", "from_table"):  # the same kind everywhere
                assert isinstance(inspect.getattr_static(cls, name), property), where
            elif kind == "property":  # a property, a field or a class attribute
                assert name in fields or hasattr(cls, name), where
    if protocol is OpenedInput:
        assert all(isinstance(cls.sample_first, bool) for cls in classes)


def test_opened_inputs_hold_the_data_members_and_give_their_rows_reader(tmp_path):
    path = simulate_stream(str(tmp_path / "s.zarr"), n_rows=300, n_features=2, seed=1,
                           progress=False)
    frame = pd.DataFrame({"y": np.arange(6.0), "x": np.ones(6), "k": list("ababab")})
    ds = xr.Dataset({"a": ("t", np.arange(5.0)), "b": ("t", np.arange(5.0) ** 2)})
    opened = [_open_input(path, None, None), _open_input(ds, None, None),
              _open_input(frame, None, None)]
    opened.append(DesignInput(_open_input(frame, None, None), "y ~ x + C(k)", None))
    assert [type(o) for o in opened] == list(OPENED)
    for table in opened:
        for name in ("sample_first", "label", "members", "found", "attrs"):
            assert hasattr(table, name), (type(table).__name__, name)
    # the rows readers they give once their columns are selected, as open_stream asks
    selected = [("X", "y"), ("a",), ("x", "y"), ("design", "response")]
    dims = ["sample", "t", "row", "row"]
    readers = []
    for table, names, dim, n in zip(opened, selected, dims, (300, 5, 6, 6), strict=True):
        columns = table.columns(names, dim)
        assert [c.n_rows for c in columns.values()] == [n] * len(names)
        readers.append(table.rows(n))
    assert [type(r) for r in readers] == list(READERS)
    assert [r.in_memory for r in readers] == [False, True, True, True]
    assert [r.from_table for r in readers] == [False, False, True, True]


def test_the_record_of_what_a_fit_read_is_what_the_result_keeps(tmp_path):
    rng = np.random.default_rng(4)
    n = 600
    frame = pd.DataFrame({"x": rng.standard_normal(n), "k": rng.choice(["p", "q", "r"], n),
                          "w": rng.uniform(0.5, 2.0, n)})
    frame["y"] = 1.0 + 2.0 * frame.x + frame.k.map({"p": 0.0, "q": 1.0, "r": -1.0}) \
        + rng.standard_normal(n)
    fit = fit_stream(frame, formula="y ~ x + C(k)", weights="w", progress=False)
    read = FitInputs.from_attrs(fit.attrs)
    assert read == FitInputs(("design",), ("response",), "row", True, "raise", "w", None,
                             "y ~ x + C(k)", {"k": ["p", "q", "r"]},
                             read.contrasts)
    assert read.contrasts["C(k)"]["levels"] == ["p", "q", "r"]
    written = read.to_attrs()
    assert {k: fit.attrs[k] for k in written} == written
    assert "groups_variable" not in written and "groups_variable" not in fit.attrs


def test_results_of_earlier_layouts_read_with_one_set_of_defaults():
    assert FitInputs.from_attrs({"method": "kf4lls"}) == FitInputs()
    assert FitInputs.from_attrs({}).to_attrs() == {
        "x_variables": '["X"]', "y_variables": '["y"]', "sample_dim": "sample",
        "fit_intercept": False, "missing": "raise"}
    # a kernel's own constant (LMS) was on unless its parameters turned it off
    assert FitInputs.from_attrs({"method": "lms", "parameters": "{}"}).intercept is True
    off = {"method": "lms", "parameters": json.dumps({"intercept": False})}
    assert FitInputs.from_attrs(off).intercept is False
    assert FitInputs.from_attrs({**off, "fit_intercept": True}).intercept is True


def test_the_robust_pass_of_a_published_formula_fit_reads_its_rows_through_the_formula(
        tmp_path, client):
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(7)
    n = 2_000
    frame = pd.DataFrame({"x": rng.standard_normal(n), "k": rng.choice(["a", "b", "c"], n)})
    frame["y"] = 0.5 - frame.x + (frame.k == "b") * 2.0 \
        + (1 + np.abs(frame.x)) * rng.standard_normal(n)
    formula = "y ~ x + C(k)"
    fit_stream(frame, formula=formula, out=tmp_path / "fit.zarr", client=client,
               progress=False)
    ds = robust_covariance(tmp_path / "fit.zarr", frame, cov_type="HC1", client=client,
                           progress=False)
    ref = smf.ols(formula, data=frame).fit(cov_type="HC1")
    labels = ["Intercept" if v == "intercept" else str(v) for v in ds.feature.values]
    assert ds.attrs["cov_type"] == "HC1" and sorted(labels) == sorted(ref.params.index)
    np.testing.assert_allclose(ds.coef.values[-1, :, 0], ref.params[labels].to_numpy(),
                               rtol=1e-10)
    np.testing.assert_allclose(ds.bse.values[:, 0], ref.bse[labels].to_numpy(), rtol=1e-8)


def test_a_recursion_declares_its_optional_abilities_with_their_defaults():
    for name in ("diagnostics", "identify", "intercept"):
        assert getattr(Recursion, name) is False
    for name, cls in RECURSIONS.items():
        rec = cls.example(np.random.default_rng(0))[0]
        for ability in ("diagnostics", "identify", "intercept"):
            assert isinstance(getattr(rec, ability), bool), (name, ability)
        assert not rec.intercept or cls.intercept_kind == "kernel", name
    assert RECURSIONS["lms"]().intercept is True
    assert RECURSIONS["lms"](intercept=False).intercept is False
