"""Re-test round 13 (part A), inputs, formulas and GLMs: the cases found broken or weak, each
refused in one line (exit 2 or InputError) naming what and where, the folder left as it was.

A GLM's record of what it applies to new rows (its offset and exposure variables, its family
and link) and any fit's ``fit_intercept`` could be edited to other valid values without
``info --check`` noticing (``predict`` used another column, or blamed the new rows);
``fit_glm(var_weights=...)`` was a bare TypeError; an array or Series given for a variable's
name was printed whole over many lines; the partition key of a Parquet folder named by
``--groups`` or ``--weights`` beside a formula lost the note saying what it is; a negative
exposure or frequency weight had no remedy."""

from __future__ import annotations

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

DAMAGED = "the result is damaged: compute it again"


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], size=n)
    expo = rng.uniform(0.5, 2.0, size=n)
    eta = 0.3 + 0.5 * x1 - 0.2 * x2 + 0.4 * (g == "b")
    return pd.DataFrame({"x1": x1, "x2": x2, "g": g, "expo": expo,
                         "w": rng.uniform(0.5, 2.0, size=n),
                         "cnt": rng.poisson(np.exp(eta) * expo).astype(float)})


@pytest.fixture(scope="module")
def glm(tmp_path_factory, client):
    """A Poisson GLM of ``cnt ~ x1 + C(g)`` with ``--exposure expo``, and its table."""
    folder = tmp_path_factory.mktemp("glm")
    frame = _frame()
    frame.to_parquet(folder / "t.parquet")
    streamlsq.fit_glm(folder / "t.parquet", family="poisson", formula="cnt ~ x1 + C(g)",
                      exposure="expo", out=folder / "g.zarr", client=client, progress=False)
    return folder / "g.zarr"


def _copy(src, folder, name):
    import shutil

    shutil.copytree(src, folder / name)
    return folder / name


# -- K2. a GLM's offset, exposure, family or link edited to other valid values --------------

@pytest.mark.parametrize("attr, value, said", [
    ("exposure_variable", "w", "its attribute exposure_variable is 'w', but its attribute "
                               "parameters records the exposure 'expo'"),
    ("offset_variable", "x2", "its attribute offset_variable is 'x2', but its attribute "
                              "parameters records the offset none"),
    ("exposure_variable", None, "its attribute exposure_variable is missing, but its "
                                "attribute parameters records the exposure 'expo'"),
    ("family", "gamma", "its attribute family is 'gamma', but its attribute parameters "
                        "records the family 'poisson'"),
    ("link", "identity", "its attribute link is 'identity', but its attribute parameters "
                         "records the link 'log'"),
])
def test_a_glms_record_of_what_it_applies_edited_is_refused(glm, tmp_path, cli, attr, value,
                                                            said):
    """Round 13: ``exposure_variable`` edited to another real column of the data (or an
    offset added, the family made another that takes the link) passed ``info --check``,
    and ``predict`` applied it without a word."""
    fit = _copy(glm, tmp_path, "e.zarr")
    g = zarr.open_group(str(fit), mode="r+")
    if value is None:
        del g.attrs[attr]
    else:
        g.attrs[attr] = value
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    wanted = (f"streamlsq: error: {fit}: {said}: one of them was edited since the fit; "
              f"{DAMAGED}")
    for args in (("info", fit, "--check"),
                 ("predict", fit, glm.parent / "t.parquet", "--out", out)):
        assert one_line(cli(*args)) == wanted
    with pytest.raises(InputError) as refused:
        streamlsq.open_result(fit)
    assert str(refused.value) == wanted.removeprefix("streamlsq: error: ")
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_glm_as_written_passes_its_check_and_predicts_as_statsmodels(glm, cli, client):
    """The check refuses nothing a fit wrote: the fit above predicts as statsmodels."""
    run = cli("info", glm, "--check")
    assert run.exit_code == 0, run.output
    frame = pd.read_parquet(glm.parent / "t.parquet")
    ref = smf.glm("cnt ~ x1 + C(g)", frame, family=sm.families.Poisson(),
                  exposure=frame.expo).fit()
    got = streamlsq.predict(glm, frame, client=client)
    np.testing.assert_allclose(got.yhat.values[:, 0], ref.predict(frame, exposure=frame.expo),
                               rtol=1e-10)


# -- E15. fit_intercept edited -------------------------------------------------------------

@pytest.mark.parametrize("how, value", [
    (dict(formula="cnt ~ x1 + C(g)"), False),
    (dict(formula="cnt ~ 1"), False),
    (dict(x="x1,x2", y="cnt", fit_intercept=True), False),
    (dict(x="x1,x2", y="cnt"), True),
])
def test_fit_intercept_edited_is_refused_naming_it(tmp_path, cli, client, how, value):
    """Round 13: ``fit_intercept`` edited passed ``info --check``; ``predict`` blamed the new
    rows: ``t.parquet: has 2 feature column(s) but e.zarr was fitted on 2``, ``variable
    'design' is empty (shape (400, 0))``."""
    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet")
    fit = tmp_path / "f.zarr"
    streamlsq.fit_glm(tmp_path / "t.parquet", family="poisson", out=fit, client=client,
                      progress=False, **how)
    g = zarr.open_group(str(fit), mode="r+")
    assert g.attrs["fit_intercept"] is (not value)
    labels = [str(v) for v in g["feature"][...]]
    g.attrs["fit_intercept"] = value
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    wanted = (f"streamlsq: error: {fit}: its attribute fit_intercept is {value}, but its "
              f"coefficients are those of {labels!r}: the attribute was edited since the "
              f"fit; {DAMAGED}")
    for args in (("info", fit, "--check"), ("predict", fit, tmp_path / "t.parquet", "--out",
                                            out)):
        assert one_line(cli(*args)) == wanted
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_column_named_intercept_fitted_without_one_passes(tmp_path, cli, client):
    """A fit of named columns, one of them called 'intercept', without an intercept: its
    first label is the column's, and the check leaves it be."""
    frame = _frame().rename(columns={"x1": "intercept"})
    frame.to_parquet(tmp_path / "t.parquet")
    fit = tmp_path / "f.zarr"
    streamlsq.fit_stream(tmp_path / "t.parquet", "kf4lls", x="intercept,x2", y="cnt",
                         out=fit, client=client, progress=False)
    run = cli("info", fit, "--check")
    assert run.exit_code == 0, run.output
    ref = sm.OLS(frame.cnt, frame[["intercept", "x2"]]).fit()
    np.testing.assert_allclose(streamlsq.open_result(fit).coef.values[-1, :, 0],
                               ref.params.values, rtol=1e-8)


# -- K1. fit_glm's unknown keywords ------------------------------------------------------

def test_an_unknown_keyword_of_fit_glm_is_named_with_those_it_takes():
    """Round 13: ``fit_glm(..., var_weights="w")`` (statsmodels' name) was ``TypeError:
    fit_glm takes no option 'var_weights'``."""
    frame = _frame()
    with pytest.raises(InputError) as refused:
        streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", var_weights="w")
    line = str(refused.value)
    assert line.startswith("fit_glm takes no keyword 'var_weights': statsmodels' var_weights "
                           "is weights= here; the keywords are "), line
    assert "\n" not in line and ", weights, " in line and ", exposure, " in line \
        and ", client, " in line, line
    with pytest.raises(InputError) as refused:
        streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", weight="w")
    assert str(refused.value).startswith("fit_glm takes no keyword 'weight'; the keywords "
                                         "are group, x, y, "), refused.value


# -- D8-D10. an array given for a variable's name ------------------------------------------

@pytest.mark.parametrize("key", ["exposure", "offset", "weights"])
def test_an_array_given_for_a_variables_name_is_one_line(key):
    """Round 13: ``fit_glm(frame, exposure=frame.expo)`` (statsmodels takes the array) was
    refused with the Series' repr, eleven lines (an array's, dozens)."""
    frame = _frame()
    for given in (frame.expo, frame.expo.to_numpy()):
        with pytest.raises(InputError) as refused:
            streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", **{key: given})
        kind = "pandas Series" if isinstance(given, pd.Series) else "numpy ndarray"
        assert str(refused.value) == (f"{key} must be the name of a variable of the data (a "
                                      "string: an array is added to the data as a column and "
                                      f"named) or None, got a {kind} of shape (400,)")


# -- H12, H18. a partition key named beside a formula ---------------------------------------

@pytest.mark.parametrize("command, option", [
    (("fit", "glm"), ("--cov-type", "cluster", "--groups", "g")),
    (("fit", "glm"), ("--weights", "g")),
    (("fit", "kf4lls"), ("--cov-type", "cluster", "--groups", "g")),
])
def test_a_partition_key_named_beside_a_formula_is_said_to_be_one(tmp_path, cli, command,
                                                                   option):
    """Round 13: with a formula, the partition key named by --groups or --weights was only
    `is missing ...; name one of the variables found with --groups`."""
    _frame().to_parquet(tmp_path / "hive", partition_cols=["g"])
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    line = one_line(cli(*command, tmp_path / "hive", "--out", out, "--formula", "cnt ~ x1",
                        *option))
    assert f"variable 'g' named by {option[-2]} ({option[-2][2:]}=) is missing" in line, line
    assert line.endswith("'g' is a partition key of the folder's paths (g=a/...), which "
                         "streamlsq does not read as a column (pandas does): give the frame "
                         "pd.read_parquet(folder) from Python, or write the column into the "
                         "files"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- D20. a negative exposure or frequency weight -----------------------------------------

@pytest.mark.parametrize("option, said", [
    ("--exposure", "an exposure must be > 0 (its logarithm is the offset)"),
    ("--freq-weights", "a frequency weight must be >= 0"),
])
def test_a_negative_exposure_or_frequency_weight_says_what_to_do(tmp_path, cli, option, said):
    frame = _frame()
    frame.loc[7, "w"] = -1.0
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", "cnt ~ x1", option, "w"))
    assert line == (f"streamlsq: error: {tmp_path / 't.parquet'}: variable 'w' row 7: {said}; "
                    "correct the row, or drop it (a NaN there and --missing drop "
                    "(missing=\"drop\"))"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- L4, L12. a CSV glob whose files do not all hold a column read --------------------------

def test_a_csv_file_of_a_glob_without_a_column_read_is_named(tmp_path, cli, client):
    """Round 13: ``convert 'p*.csv'`` (or a fit reading ``w``) where ``p2.csv`` has no column
    ``w``: ``p*.csv: partition 1 (rows 200-399) cannot be read (KeyError: "['w'] not in
    index")``, naming neither the file nor what it lacks."""
    frame = _frame()
    frame.iloc[:200].to_csv(tmp_path / "p1.csv", index=False)
    frame.iloc[200:].drop(columns=["w"]).to_csv(tmp_path / "p2.csv", index=False)
    glob = str(tmp_path / "p*.csv")
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    wanted = (f"streamlsq: error: {tmp_path / 'p2.csv'}: has no column 'w', where "
              f"{tmp_path / 'p1.csv'} has it; the files of one table hold the same columns: "
              "write the column into every file, or leave it out")
    for args in (("convert", glob, "--out", out),
                 ("fit", "glm", glob, "--out", out, "--family", "poisson", "--formula",
                  "cnt ~ x1", "--weights", "w"),
                 ("fit", "kf4lls", glob, "--out", out, "--x", "x1,w", "--y", "cnt")):
        assert one_line(cli(*args)) == wanted
        assert snapshot(tmp_path) == before and leftovers(out) == []
    # the columns every file holds are read as before, as statsmodels fits them
    fit = streamlsq.fit_glm(glob, family="poisson", formula="cnt ~ x1", client=client,
                            progress=False)
    ref = smf.glm("cnt ~ x1", frame, family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-10)


# -- M5, M7. the bound of a formula's terms: nesting, a power that is no integer ------------

def test_a_chain_of_nestings_is_fitted_as_formulaic_expands_it(client):
    """Round 13: ``y ~ v0/v1/.../v25`` (formulaic: 27 terms, at once) was refused as
    ``expanding its interactions takes more than 92,672 terms``: the bound doubled at each
    ``/``, where formulaic adds a term."""
    from formulaic import model_matrix

    frame = _frame()
    for i in range(26):
        frame[f"v{i}"] = np.random.default_rng(100 + i).normal(size=len(frame))
    formula = "x1 ~ " + "/".join(f"v{i}" for i in range(26))
    fit = streamlsq.fit_glm(frame, formula=formula, client=client, progress=False)
    design = model_matrix(formula, frame).rhs
    assert [str(v) for v in fit.feature.values] == list(design.columns)
    ref = sm.GLM(frame.x1, design).fit()
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-8)


def test_a_power_that_is_no_integer_is_refused_for_what_it_is():
    """Round 13: ``(x1 + x2)**0.5`` was refused as an explosion of interactions; formulaic
    takes a positive integer there, and says so."""
    with pytest.raises(InputError) as refused:
        streamlsq.fit_glm(_frame(), family="poisson", formula="cnt ~ (x1 + x2)**0.5")
    assert str(refused.value) == ("formula 'cnt ~ (x1 + x2)**0.5' cannot be parsed "
                                  "(FormulaSyntaxError: The right-hand argument of `**` must "
                                  "be a positive integer.)")


# -- O8, O9, O2. a column whose name formulaic or the fit reads as something else ------------

@pytest.mark.parametrize("rename, formula, said", [
    ({"x1": "1"}, "cnt ~ `1`",
     "`1` in backticks is read by formulaic as 1, the intercept's term, not as a column "
     "named '1'; rename such a column (e.g. to 'c1') and write that name"),
    ({"x1": "C(g)"}, "cnt ~ `C(g)` + C(g)",
     "the column 'C(g)' (in backticks) has the name of the term C(g) the formula also makes, "
     "and formulaic takes the two for one term, leaving one out; rename the column and write "
     "that name"),
])
def test_a_backticked_column_formulaic_reads_otherwise_is_refused(tmp_path, cli, rename,
                                                                 formula, said):
    """Round 13: `` cnt ~ `1` `` (a column named '1', as a CSV of numbered columns has) was
    fitted as the intercept alone, and `` cnt ~ `C(g)` + C(g) `` as one of the two terms,
    each without a word."""
    _frame().rename(columns=rename).to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", formula))
    assert line == f"streamlsq: error: formula {formula!r}: {said}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_backticked_column_read_once_is_still_a_column(client):
    """A name in backticks that is not a number, and not a term written elsewhere, fits as
    statsmodels' fit of the column renamed."""
    frame = _frame().rename(columns={"x1": "C(g)", "x2": "2"})
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ `C(g)` + `2` + g",
                            client=client, progress=False)
    ref = smf.glm("cnt ~ x1 + x2 + g", _frame(), family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params[
        ["Intercept", "x1", "x2", "g[T.b]", "g[T.c]"]].values, rtol=1e-10)


@pytest.mark.parametrize("command", [("fit", "glm", "--family", "poisson"), ("fit", "kf4lls")])
def test_a_feature_named_intercept_beside_the_intercept_is_refused(tmp_path, cli, command):
    """Round 13: ``--x intercept,x2 --intercept`` published coefficients labelled
    ['intercept', 'intercept', 'x2']."""
    _frame().rename(columns={"x1": "intercept"}).to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli(*command[:2], tmp_path / "t.parquet", "--out", out, *command[2:],
                        "--x", "intercept,x2", "--y", "cnt", "--intercept"))
    assert line == (f"streamlsq: error: {tmp_path / 't.parquet'}: the feature 'intercept' has "
                    "the name the fit gives its constant column (--intercept, "
                    "fit_intercept=True): two coefficients would be labelled 'intercept'; "
                    "rename the column, or leave out --intercept"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- L10. convert given a Zarr store ----------------------------------------------------------

def test_convert_of_a_zarr_store_says_it_is_already_a_stream(tmp_path, cli, client):
    """Round 13: ``convert cols.zarr`` said only ``'cols.zarr': not a table (Parquet or CSV
    files, a pandas, polars or dask DataFrame)``."""
    import xarray as xr

    frame = _frame()
    xr.Dataset({c: ("sample", frame[c].to_numpy()) for c in ("x1", "cnt")}).to_zarr(
        tmp_path / "cols.zarr", zarr_format=3)
    before = snapshot(tmp_path)
    out = tmp_path / "c.zarr"
    line = one_line(cli("convert", tmp_path / "cols.zarr", "--out", out))
    assert line == (f"streamlsq: error: {str(tmp_path / 'cols.zarr')!r}: not a table (Parquet or "
                    "CSV files, a pandas, polars or dask DataFrame); a Zarr store is already a "
                    "stream: fit it as it is (--x, --y or --formula name its variables; "
                    "streamlsq info describes it)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # the remedy: the store fitted as it is, as statsmodels fits its columns
    fit = streamlsq.fit_glm(tmp_path / "cols.zarr", family="poisson", formula="cnt ~ x1",
                            client=client, progress=False)
    ref = smf.glm("cnt ~ x1", frame, family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-10)


# -- F20. a structured formula ---------------------------------------------------------------

def test_a_formula_of_parts_says_what_the_bar_does(tmp_path, cli):
    """Round 13: ``cnt ~ x1 | g`` was refused as ``must be 'response ~ terms'``, which it
    is."""
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", "cnt ~ x1 | g"))
    assert line == ("streamlsq: error: formula 'cnt ~ x1 | g': '|' splits its right side into "
                    "2 parts (formulaic's structured formulas); a fit takes one design: write "
                    "its terms joined by '+' (a variable of the rows' clusters is --groups with "
                    "--cov-type cluster)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_fit_in_memory_with_its_record_edited_is_refused_by_predict(client):
    """As a store is: ``streamlsq.predict(fit, rows)`` of a fit held in memory applied an
    edited ``exposure_variable`` (or blamed the rows for an edited ``fit_intercept``)."""
    frame = _frame()
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", exposure="expo",
                            client=client, progress=False)
    for attr, value, said in (
            ("exposure_variable", "w", "its attribute exposure_variable is 'w', but its "
                                       "attribute parameters records the exposure 'expo': one "
                                       "of them was edited since the fit"),
            ("fit_intercept", False, "its attribute fit_intercept is False, but its "
                                     "coefficients are those of ['Intercept', 'x1']: the "
                                     "attribute was edited since the fit")):
        edited = fit.copy()
        edited.attrs = {**fit.attrs, attr: value}
        with pytest.raises(InputError) as refused:
            streamlsq.predict(edited, frame, client=client)
        assert str(refused.value) == f"the fit: {said}; {DAMAGED}"
    ref = smf.glm("cnt ~ x1", frame, family=sm.families.Poisson(), exposure=frame.expo).fit()
    np.testing.assert_allclose(streamlsq.predict(fit, frame, client=client).yhat.values[:, 0],
                               ref.predict(frame, exposure=frame.expo), rtol=1e-10)


# -- F2. a method called on a call's value -----------------------------------------------------

def test_a_method_of_a_value_is_refused_as_python(tmp_path, cli):
    """Round 13: ``cnt ~ np.exp(x1).sum()`` was ``cannot be parsed (SyntaxError: invalid
    syntax (<unknown>, line 1))``: formulaic's parser stops there, naming nothing."""
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", "cnt ~ np.exp(x1).sum()"))
    assert line == ("streamlsq: error: formula 'cnt ~ np.exp(x1).sum()': calls the method "
                    ".sum() of a value; a formula is never run as Python: it names "
                    "columns, numbers, I(), C() and the declared transforms (np.log, np.sqrt, "
                    "np.exp, np.power, ...: docs/tables.md#formulas)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
