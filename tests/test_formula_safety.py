"""A formula is data, never code: every factor of a formula — given to a fit, or kept by a
result and rebuilt by ``predict``, ``info --check``, ``open_result`` — is checked against the
declared transforms before anything is evaluated or opened, and anything else is refused in
one line naming it, with nothing run and nothing written (``docs/tables.md#formulas``,
``docs/faults.md#formulas``).

The references are independent: a sentinel file a command would create, a canary file it would
empty, the folder's listing before and after; formulaic's own ``model_matrix`` on the same
pandas frame (the designs the check allows are formulaic's, column for column); statsmodels'
``ols("y ~ 1")``.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamlsq
from streamlsq import InputError, fit_stream, open_result, predict_stream

from conftest import one_line


def _frame(n=120, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.uniform(1, 3, size=n),
                          "k": rng.choice(["a", "b", "c"], size=n),
                          "m": rng.choice(["u", "v"], size=n)})
    frame["y"] = 1 + frame.x1 - 2 * np.log(frame.x2) + (frame.k == "b") \
        + 0.1 * rng.normal(size=n)
    return frame


@pytest.fixture
def folder(tmp_path):
    """A folder holding the data (CSV) and a canary file of the user's."""
    _frame().to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "canary.txt").write_text("the user's own")
    return tmp_path


#: (formula with {S} the sentinel's path and {C} the canary's, what the refusal names)
ATTACKS = [
    ("y ~ x1 + I(__import__('os').system('touch {S}').__abs__())", "'__import__'"),
    ("y ~ x1 + {{__import__('os').system('touch {S}')}}", "'__import__'"),
    ("y ~ x1 + I(x2 + 0*open('{C}','w').write('x'))", "'open'"),
    ("y ~ x1 + I(x2 + 0*len(open('{C}','w').name))", "'len'"),
    ("y ~ I(x1.__class__)", "attribute x1.__class__"),
    ("y ~ x1.__class__", "'x1.__class__'"),
    ("y ~ I(x1.__class__.__mro__[1].__subclasses__())", "'x1'"),
    ("y ~ x1 + eval(\"__import__('os').system('touch {S}')\")", "'eval'"),
    ("y ~ x1 + exec(\"open('{C}','w')\")", "'exec'"),
    ("y ~ __builtins__", "'__builtins__'"),
    ("y ~ I(__import__)", "'__import__'"),
    ("y ~ I((lambda: open('{C}','w'))())", "lambda"),
    ("y ~ x1[0]", "subscript x1[0]"),
    ("y ~ I([open('{C}','w') for v in x1])", "ListComp"),
    ("y ~ getattr(x1, 'real')", "'getattr'"),
    ("y ~ np.os.system('touch {S}')", "'np.os.system'"),
    ("y ~ np.log(x2, out=x2)", "keyword"),
    ("y ~ C(k, levels=['a'])", "keyword"),
    ("y ~ I(x1 if x1 else x2)", "IfExp"),
    ("y ~ I(x1 > 'a')", "constant 'a'"),
    ("y ~ I(x1 ** 10 ** 10 ** 10)", "power of numbers"),
    ("I(__import__('os').getpid()) ~ x1", "'__import__'"),
    ("y ~ x1 + lambda", "'lambda'"),
]


def _attack(formula: str, folder) -> str:
    return formula.format(S=folder / "sentinel", C=folder / "canary.txt")


def _untouched(folder, before: set) -> None:
    assert not (folder / "sentinel").exists()
    assert (folder / "canary.txt").read_text() == "the user's own"
    assert set(os.listdir(folder)) == before


@pytest.mark.parametrize(("formula", "named"), ATTACKS)
def test_a_formula_naming_python_is_refused_before_anything_runs(formula, named, folder, cli):
    before = set(os.listdir(folder))
    formula = _attack(formula, folder)
    result = cli("fit", "kf4lls", folder / "data.csv", "--out", folder / "fit.zarr",
                 "--formula", formula, "--checkpoint", folder / "ckpt")
    line = one_line(result)
    assert named in line and "formula" in line, line
    _untouched(folder, before)
    # refused before the input is opened: the same line for data that does not exist
    result = cli("fit", "kf4lls", folder / "nothing.csv", "--out", folder / "fit.zarr",
                 "--formula", formula)
    assert one_line(result) == line
    # from Python too
    with pytest.raises(InputError, match="formula") as err:
        fit_stream(pd.read_csv(folder / "data.csv"), formula=formula, progress=False)
    assert named in str(err.value) and len(str(err.value).splitlines()) == 1
    _untouched(folder, before)


def test_the_check_reads_the_formula_and_never_evaluates_it(monkeypatch):
    """formulaic's evaluation is not reached by a refused formula: its ``eval`` paths raise
    here, and the refusal is still the checker's one line."""
    import formulaic.utils.stateful_transforms as transforms
    import formulaic.utils.variables as variables

    from streamlsq.io.formulas import check_formula

    def forbidden(*args, **kwargs):
        raise AssertionError("formulaic evaluated an expression")

    monkeypatch.setattr(transforms, "eval", forbidden, raising=False)
    monkeypatch.setattr(variables, "eval", forbidden, raising=False)
    with pytest.raises(InputError, match="'__import__'"):
        check_formula("y ~ I(__import__('os').system('true').__abs__())")
    names = check_formula("np.log(y) ~ x1 + C(k) + I(x1**2 + x2) + np.power(x2, 3) + "
                          "x1:C(m) + `a b`")
    assert names.rhs == ("a b", "k", "m", "x1", "x2") and names.lhs == ("y",)
    assert names.rhs_categorical == ("k", "m")


@pytest.fixture(scope="module")
def published_once(tmp_path_factory, client):
    """A formula fit of the data, published once."""
    out = tmp_path_factory.mktemp("published") / "fit.zarr"
    fit_stream(_frame(), formula="y ~ x1 + np.log(x2) + C(k)", out=out, client=client,
               progress=False)
    return out


@pytest.fixture
def published(published_once, folder):
    """The published formula fit, copied into the folder (``fit.zarr``)."""
    import shutil

    shutil.copytree(published_once, folder / "fit.zarr")
    return folder / "fit.zarr"


def test_a_result_keeping_python_as_its_formula_runs_nothing(published, folder, cli):
    attack = _attack(ATTACKS[0][0], folder)
    zarr.open_group(str(published), mode="r+").attrs["formula"] = attack
    before = set(os.listdir(folder))
    result = cli("predict", published, folder / "data.csv", "--out", folder / "pred.zarr")
    line = one_line(result)
    assert "fit.zarr: its attribute formula is refused" in line and "'__import__'" in line
    result = cli("info", published, "--check")
    assert one_line(result) == line
    _untouched(folder, before)
    frame = pd.read_csv(folder / "data.csv")
    for call in (lambda: open_result(published), lambda: streamlsq.predict(published, frame),
                 lambda: predict_stream(published, frame, out=folder / "pred.zarr")):
        with pytest.raises(InputError, match="'__import__'") as err:
            call()
        assert len(str(err.value).splitlines()) == 1
    _untouched(folder, before)


def test_a_fit_in_memory_keeping_python_runs_nothing(published, folder, client):
    ds = open_result(published, lazy=False)
    ds.attrs["formula"] = _attack(ATTACKS[2][0], folder)
    before = set(os.listdir(folder))
    with pytest.raises(InputError, match="'open'"):
        predict_stream(ds, pd.read_csv(folder / "data.csv"), client=client, progress=False)
    _untouched(folder, before)


def test_a_formula_fit_labels_as_formulaic_and_predicts_as_statsmodels(published, folder,
                                                                      client):
    import formulaic
    import statsmodels.formula.api as smf

    frame = pd.read_csv(folder / "data.csv")
    ds = open_result(published)
    reference = formulaic.model_matrix("y ~ x1 + np.log(x2) + C(k)", frame)
    assert list(ds.feature.values) == list(reference.rhs.columns)
    assert ds.feature.values[0] == "Intercept"
    ols = smf.ols("y ~ x1 + np.log(x2) + C(k)", frame).fit()
    np.testing.assert_allclose(ds.coef.values[-1, :, 0], ols.params[ds.feature.values],
                               rtol=1e-9)
    pred = predict_stream(published, frame, client=client, progress=False)
    np.testing.assert_allclose(pred.yhat.values[:, 0], ols.fittedvalues, rtol=1e-9)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_the_intercept_alone_fits_as_statsmodels(engine, client):
    import statsmodels.formula.api as smf

    frame = _frame()
    ds = fit_stream(frame, formula="y ~ 1", engine=engine, client=client, progress=False)
    ols = smf.ols("y ~ 1", frame).fit()
    assert list(ds.feature.values) == ["Intercept"]
    np.testing.assert_allclose(ds.coef.values[-1, 0, 0], ols.params["Intercept"], rtol=1e-12)
    np.testing.assert_allclose(ds.bse.values[0, 0], ols.bse["Intercept"], rtol=1e-9)
    for rows in (frame, frame[["x1"]]):  # new rows with and without the response
        pred = predict_stream(ds, rows, client=client, progress=False)
        np.testing.assert_allclose(pred.yhat.values[:, 0], ols.predict(frame), rtol=1e-12)
    with pytest.raises(InputError, match=r"'y ~ 0' makes no column \(no term and no intercept"):
        fit_stream(frame, formula="y ~ 0", client=client, progress=False)


def test_irma_with_a_formula_names_the_formulas_intercept(folder, cli):
    before = set(os.listdir(folder))
    result = cli("fit", "irma", folder / "data.csv", "--out", folder / "fit.zarr",
                 "--formula", "y ~ x1")
    line = one_line(result)
    assert "irma: the formula 'y ~ x1' has an intercept" in line
    assert "write '- 1' in the formula" in line and "--intercept" not in line
    _untouched(folder, before)


def test_a_design_too_wide_for_the_state_is_refused_before_it_is_built(tmp_path, cli):
    """50,000 levels on 60,000 rows (used to grow past 7 GB): refused from the levels alone,
    naming the columns, the state's memory and the limit; the limit is the dask config."""
    import dask

    rng = np.random.default_rng(1)
    n = 60_000
    frame = pd.DataFrame({"k": [f"l{i}" for i in rng.integers(0, 50_000, n)],
                          "x": rng.normal(size=n), "y": rng.normal(size=n)})
    data = tmp_path / "wide.parquet"
    frame.to_parquet(data)
    levels = frame.k.nunique()
    before = set(os.listdir(tmp_path))
    result = cli("fit", "kf4lls", data, "--out", tmp_path / "fit.zarr", "--formula",
                 "y ~ x + C(k)")
    line = one_line(result)
    need = 8 * (levels + 1) ** 2 / 2**30
    assert f"makes at least {levels} columns" in line, line
    assert f"{levels + 1} x {levels + 1} state would need {need:.3g} GiB" in line
    assert "above the limit of 1 GiB (dask config streamlsq.design-state-bytes" in line
    assert set(os.listdir(tmp_path)) == before
    small = frame.iloc[:200].assign(k=lambda f: [f"l{i % 5}" for i in range(len(f))])
    with dask.config.set({"streamlsq.design-state-bytes": 8 * 6**2 - 1}):
        with pytest.raises(InputError, match="makes at least 5 columns: a fit's 6 x 6 state"):
            fit_stream(small, formula="y ~ x + C(k)", progress=False)
    with dask.config.set({"streamlsq.design-state-bytes": 8 * 6**2}):
        assert fit_stream(small, formula="y ~ x + C(k)", progress=False).sizes["feature"] == 6
    with dask.config.set({"streamlsq.design-state-bytes": "lots"}):
        with pytest.raises(InputError, match=r"streamlsq.design-state-bytes "
                           r"\(DASK_STREAMLSQ__DESIGN_STATE_BYTES\) must be"):
            fit_stream(small, formula="y ~ x", progress=False)


# -- the check allows what formulaic makes ---------------------------------------------------

TERMS = ["x1", "x2", "C(k)", "k", "m", "np.log(x2)", "np.sqrt(x2)", "log(x2)", "np.exp(x1)",
         "I(x1 ** 2)", "I(x1 * x2 + 1)", "I(x1 / x2 - 0.5)", "np.power(x2, 3)", "x1:x2",
         "x1:C(k)", "C(k):m", "np.abs(x1)", "I(-x1)", "np.log1p(x2):x1", "I(x1 > 0)"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TERMS), min_size=1, max_size=5, unique=True),
       st.booleans(), st.sampled_from(["y", "np.log(x2)", "I(y - x1)"]))
def test_every_allowed_formula_is_formulaics_design(terms, intercept, lhs):
    import dask
    import formulaic

    frame = _frame(n=60, seed=3)
    formula = f"{lhs} ~ {' + '.join(terms)}" + ("" if intercept else " - 1")
    reference = formulaic.model_matrix(formula, frame)
    expected = reference.rhs
    has = "Intercept" in expected.columns
    with dask.config.set(scheduler="sync"):  # the levels' pass in this process
        source = streamlsq.open_stream(frame, formula=formula, fit_intercept=has)
        X, Y = source.read(0, len(frame))
    assert ["Intercept"] * has + list(source.features) == list(expected.columns)
    np.testing.assert_array_equal(X, expected.to_numpy(dtype=float))
    np.testing.assert_array_equal(Y, reference.lhs.to_numpy(dtype=float))
