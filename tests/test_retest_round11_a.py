"""Cases of the eleventh re-test (part A), inputs, formulas, GLMs, predict and convert: a
relative ``--out`` (``predict``, ``simulate``) or store (``info --check`` of a converted table)
reached the workers of ``--scheduler`` as written, naming their folder; ``convert`` of a
partitioned Parquet folder dropped its key, and of a column of dates wrote a store its own
readers refused; ``fit glm --allow-nonconverged`` published a fit of NaN deviance; a GLM
clustered by one group divided by zero; a formula's interactions could run for hours before
anything counted them; a column named as a Python keyword could not be named at all; and
refusals that named the wrong option, advised the wrong remedy or none (a folder of CSV files,
text in --offset, successes beyond their trials, a log-link binomial, C() with a reference
level, --no-intercept, a comma in a column's name, several GLM responses, new rows named
otherwise, a fill value read as NaN, info --check of groups or of other variables)."""

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
    assert "GLM poisson (log) over 400 rows (398 fitted, 2 left out: a missing value " \
        "(--missing drop)), converged" in result.stdout, result.stdout
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


# -- a folder of CSV files given as a folder ---------------------------------------------------

def test_a_folder_of_csv_files_is_told_to_be_given_by_a_glob(tmp_path, cli):
    frame = _frame()
    (tmp_path / "csvs").mkdir()
    frame.iloc[:200].to_csv(tmp_path / "csvs" / "a.csv", index=False)
    frame.iloc[200:].to_csv(tmp_path / "csvs" / "b.csv", index=False)
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    glob = os.path.join(str(tmp_path / "csvs"), "*.csv")
    for args in (("fit", "glm", tmp_path / "csvs", "--out", out, "--family", "poisson",
                  "--formula", "cnt ~ x1"),
                 ("convert", tmp_path / "csvs", "--out", out)):
        line = one_line(cli(*args))
        assert line.endswith(f"it holds CSV files, which are read as one table when given by "
                             f"a glob: '{glob}' (a folder is read as a table of its Parquet "
                             "files)"), line
        assert snapshot(tmp_path) == before and leftovers(out) == []
    # the remedy: the glob is one table
    result = cli("fit", "glm", glob, "--out", out, "--family", "poisson", "--formula",
                 "cnt ~ x1")
    assert result.exit_code == 0, result.stderr
    ref = smf.glm("cnt ~ x1", frame, family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(streamlsq.open_result(out).coef.values[-1, :, 0],
                               ref.params.values, rtol=1e-10)


# -- info --check of a store of groups, and of a store of other variables ----------------------

def _stream_group(g, name: str, y_value: float = 1.0):
    sub = g.create_group(name)
    rng = np.random.default_rng(1)
    sub.create_array("X", shape=(100, 2), chunks=(30, 2), dtype="f8",
                     dimension_names=("sample", "feature"))[:] = rng.normal(size=(100, 2))
    sub.create_array("y", shape=(100,), chunks=(30,), dtype="f8",
                     dimension_names=("sample",))[:] = y_value
    return sub


def test_info_check_reads_every_group_of_a_store_of_groups(tmp_path, cli):
    g = zarr.open_group(str(tmp_path / "groups.zarr"), mode="w", zarr_format=3)
    _stream_group(g, "a")
    _stream_group(g, "b")
    g.create_group("notes")
    result = cli("info", tmp_path / "groups.zarr", "--check")
    assert result.exit_code == 0, result.stderr
    assert "checked: group a/: every value finite in 100 rows" in result.stdout
    assert "checked: group b/: every value finite in 100 rows" in result.stdout
    g["b"]["y"][77] = np.inf  # in group b, chunk 2
    before = snapshot(tmp_path)
    line = one_line(cli("info", tmp_path / "groups.zarr", "--check"))
    assert line == (f"streamlsq: error: {tmp_path / 'groups.zarr'} (group 'b'): variable 'y' "
                    "chunk 2 has Inf at row 77; remove or impute non-finite values"), line
    assert snapshot(tmp_path) == before


def test_info_check_of_a_store_of_other_variables_says_what_it_reads(tmp_path, cli):
    g = zarr.open_group(str(tmp_path / "cols.zarr"), mode="w", zarr_format=3)
    for name in ("a", "b", "c"):
        g.create_array(name, shape=(50,), chunks=(20,), dtype="f8",
                       dimension_names=("sample",))[:] = 1.0
    before = snapshot(tmp_path)
    line = one_line(cli("info", tmp_path / "cols.zarr", "--check"))
    assert line == (f"streamlsq: error: {tmp_path / 'cols.zarr'}: holds no X and y, task_ptr, "
                    "converted table or result (found: ['a', 'b', 'c']): info --check reads "
                    "those; variables named otherwise are checked by the fit that names them "
                    "(--x, --y), as it reads them"), line
    assert "X (sample, feature)" not in line
    assert snapshot(tmp_path) == before


# -- a decoded fill value refused as a NaN says what the store holds ----------------------------

def test_a_zarr_v2_fill_value_read_as_missing_says_the_stored_value(tmp_path, cli):
    g = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    X = g.create_array("X", shape=(60, 2), chunks=(25, 2), dtype="f8",
                       attributes={"_ARRAY_DIMENSIONS": ["sample", "feature"]})
    X[:] = np.random.default_rng(2).normal(size=(60, 2))
    y = g.create_array("y", shape=(60,), chunks=(25,), dtype="f8",
                       attributes={"_ARRAY_DIMENSIONS": ["sample"]})  # fill_value 0.0
    y[:] = np.arange(60.0) + 1
    y[31] = 0.0  # a count of 0, as xarray reads it: missing
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "v2.zarr", "--out", tmp_path / "g.zarr",
                        "--family", "poisson"))
    assert "variable 'y' chunk 1 has NaN at row 31" in line, line
    assert line.endswith("; the store holds 0.0 there, the array's fill_value, which xarray "
                         "reads as missing in Zarr v2 (write the array with fill_value=None, "
                         "or in Zarr v3): docs/stores.md#values"), line
    assert snapshot(tmp_path) == before


# -- GLM refusals in their own words ---------------------------------------------------------

def test_successes_beyond_their_trials_are_named_as_counts(tmp_path, cli):
    frame = _frame()
    frame.loc[9, "succ"] = frame.loc[9, "trials"] + 2
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "binomial", "--formula", "succ ~ x1", "--trials",
                        "trials"))
    n = frame.loc[9, "trials"]
    assert line.endswith(f"the response row 9: {n + 2:g} successes out of {n:g} trials "
                         "(--trials trials): a binomial count lies between 0 and its trials; "
                         "correct the row, or drop it (a NaN there and --missing drop "
                         "(missing=\"drop\"))"), line
    assert "proportion" not in line
    assert snapshot(tmp_path) == before


def test_a_log_link_binomial_at_probability_one_names_the_link(tmp_path, cli):
    rng = np.random.default_rng(3)
    x1 = rng.normal(size=400)
    frame = pd.DataFrame({"x1": x1, "yb": (rng.uniform(size=400) <
                                           np.minimum(np.exp(-0.2 + 0.6 * x1), 1)).astype(float)})
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "binomial", "--link", "log", "--formula", "yb ~ x1"))
    assert "row(s) fitted with probability numerically 0 or 1: the log link does not keep " \
        "the binomial mean inside (0, 1); choose a link that does (--link logit, probit or " \
        "cloglog), or --allow-nonconverged to publish it marked" in line, line
    assert "separation" not in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("option", ["--offset", "--exposure", "--weights", "--freq-weights"])
def test_text_in_a_column_an_option_reads_as_numbers_names_the_option(tmp_path, cli, option):
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", "cnt ~ x1", option, "g"))
    python = option.lstrip("-").replace("-", "_")
    assert "column 'g' holds the value" in line and "which is not a number: " \
        f"{option} ({python}=) reads a column of numbers; correct the value (or leave it " \
        f"empty: a missing value), or name another column with {option}" in line, line
    assert "C(g)" not in line
    assert snapshot(tmp_path) == before


# -- formulas and names ------------------------------------------------------------------------

@pytest.mark.parametrize(("term", "extra"), [("C(g, Treatment('b'))", "another argument"),
                                             ("C(g, levels=['b', 'a', 'c'])",
                                              "a keyword argument")])
def test_c_with_a_reference_level_says_how_to_choose_it(tmp_path, cli, term, extra):
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", f"cnt ~ x1 + {term}"))
    assert f"calls C() with more than its column ({extra}, in {term}); C() takes one " \
        "column, in " \
        "treatment coding with its first level as the reference: to choose the reference, " \
        "give the column as a pandas category whose first level it is" in line, line
    assert snapshot(tmp_path) == before


def test_the_reference_level_chosen_by_the_categorys_order_is_statsmodels(client):
    frame = _frame()
    frame["g"] = pd.Categorical(frame.g, categories=["b", "a", "c"])
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1 + C(g)",
                            client=client)
    ref = smf.glm("cnt ~ x1 + C(g, Treatment('b'))", frame,
                  family=sm.families.Poisson()).fit()
    labels = [str(v) for v in fit.feature.values]
    assert labels == ["Intercept", "x1", "C(g)[T.a]", "C(g)[T.c]"]
    ours = dict(zip(labels, fit.coef.values[-1, :, 0], strict=True))
    np.testing.assert_allclose(
        [ours["C(g)[T.a]"], ours["C(g)[T.c]"], ours["x1"]],
        [ref.params["C(g, Treatment('b'))[T.a]"], ref.params["C(g, Treatment('b'))[T.c]"],
         ref.params["x1"]], rtol=1e-9)


def test_no_intercept_is_named_as_given(tmp_path, cli):
    _frame().to_parquet(tmp_path / "t.parquet")
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", "cnt ~ x1", "--no-intercept"))
    assert "has an intercept but fit_intercept=False (--no-intercept): the formula decides" \
        in line, line


def test_a_column_with_a_comma_cut_by_x_is_named_whole(tmp_path, cli):
    frame = _frame().rename(columns={"x1": "a,b"})
    frame.to_csv(tmp_path / "t.csv", index=False)
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.csv", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--x", "a,b", "--y", "cnt"))
    assert line.endswith("the variable 'a,b' has a comma in its name, where --x and --y (and "
                         "the other options of names) cut a list: name it in a formula, in "
                         "backticks (--formula \"... ~ `a,b`\"), or rename it"), line
    assert snapshot(tmp_path) == before
    result = cli("fit", "glm", tmp_path / "t.csv", "--out", tmp_path / "g.zarr", "--family",
                 "poisson", "--formula", "cnt ~ `a,b`")
    assert result.exit_code == 0, result.stderr


def test_info_check_of_a_converted_table_by_a_relative_path(elsewhere, cli, client):
    """The check's tasks read the store on the workers: given as the user wrote it, a
    relative path named a store in the workers' folder (or none: 'no such store')."""
    frame = _frame()
    frame.loc[3, "x1"] = np.nan
    streamlsq.convert(frame, elsewhere / "c.zarr", client=client)
    result = cli("info", "c.zarr", "--check")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "checked: every chunk of every column written and readable in 400 rows; missing "
        "values: x1 1")


# -- dates and durations -----------------------------------------------------------------------

def _dated() -> pd.DataFrame:
    frame = _frame()
    frame["when"] = pd.date_range("2020-01-01", periods=len(frame), freq="h")
    return frame


@pytest.mark.parametrize("given", ["frame", "parquet"])
def test_convert_refuses_a_column_of_dates_it_would_store_unreadable(tmp_path, cli, client,
                                                                     given):
    """Written as text, the dates' declared levels (pandas' str) were not the strings
    stored (NumPy's): every fit of the store then refused it as edited."""
    frame = _dated()
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "c.zarr"
    label = "pandas DataFrame" if given == "frame" else str(tmp_path / "t.parquet")
    with pytest.raises(InputError) as err:
        streamlsq.convert(frame if given == "frame" else tmp_path / "t.parquet", out,
                          client=client)
    assert str(err.value) == (
        f"{label}: column 'when' holds {frame.when.dtype} values (dates), neither the numbers "
        "nor the text a store holds: make it numbers (e.g. days since a date) or text "
        "(astype(str)) before converting, or leave it out (--columns)")
    assert snapshot(tmp_path) == before and leftovers(out) == []
    if given == "parquet":
        line = one_line(cli("convert", tmp_path / "t.parquet", "--out", out))
        assert "column 'when' holds" in line and "(dates)" in line, line
        assert snapshot(tmp_path) == before
    # the remedy: the column as text, converted and read back as the frame's
    frame["when"] = frame.when.astype(str)
    streamlsq.convert(frame, out, client=client)
    assert list(zarr.open_group(str(out), mode="r")["when"][:2]) == list(frame.when[:2])


def test_dates_named_by_x_are_not_advised_into_a_formula(tmp_path, cli):
    _dated().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--x", "x1,when", "--y", "cnt"))
    assert "column 'when' holds datetime64[" in line and line.endswith(
        "values (dates or durations), not numbers: compute a number of them before the fit "
        "(e.g. days since a date)"), line
    assert "C(when)" not in line
    assert snapshot(tmp_path) == before


# -- a GLM's response: one -------------------------------------------------------------------

def test_a_glm_of_several_responses_says_which_and_what_to_do(tmp_path, cli):
    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet")
    import xarray as xr

    xr.Dataset({"X": (("sample", "feature"), frame[["x1", "x2"]].values),
                "y": (("sample", "target"), frame[["cnt", "yb"]].values)}).to_zarr(
        tmp_path / "y2.zarr", zarr_format=3)
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--x", "x1", "--y", "cnt,yb"))
    assert line.endswith("a GLM has one response, got 2 target columns (--y names 2 "
                         "variables, cnt, yb): fit each response in a run of its own"), line
    assert "text or levels" not in line
    line = one_line(cli("fit", "glm", tmp_path / "y2.zarr", "--out", out, "--family",
                        "poisson"))
    assert line.endswith("a GLM has one response, got 2 target columns (variable 'y' has 2 "
                         "columns): give a variable of one column with --y, e.g. one column "
                         "of it written as a variable of its own"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_new_rows_named_otherwise_say_how_to_name_them(tmp_path, cli, client):
    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet")
    fit = tmp_path / "g.zarr"
    streamlsq.fit_glm(tmp_path / "t.parquet", x="x1,x2", y="cnt", fit_intercept=True,
                      family="poisson", out=fit, client=client)
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    line = one_line(cli("predict", fit, tmp_path / "t.parquet", "--out", out, "--x",
                        "yb,trials"))
    assert line.endswith(f"its features ['yb', 'trials'] are not those {fit} was fitted on "
                         "(['x1', 'x2']): its coefficients apply to its features by name and "
                         "in order; give the new rows those columns (renamed if need be) and "
                         "leave out --x (x=), or name them in that order"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # the remedy: --x left out, the fit's columns read by name from the new rows
    got = streamlsq.predict(fit, frame[["x2", "x1"]], client=client)
    ref = sm.GLM(frame.cnt, sm.add_constant(frame[["x1", "x2"]]),
                 family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(got.yhat.values[:, 0], ref.predict(), rtol=1e-10)


# -- a GLM whose deviance is not finite ------------------------------------------------------

@pytest.mark.parametrize("allow", [False, True])
def test_a_glm_whose_deviance_is_not_finite_is_never_published(tmp_path, cli, client, allow):
    """A Tweedie fit with the identity link takes a mean below 0 (statsmodels too: NaN,
    not converged). The line said 'the deviance changed by nan'; with --allow-nonconverged
    the fit was published, and every reader then called it damaged ('variable 'deviance'
    chunk 0 has NaN ...; compute it again')."""
    rng = np.random.default_rng(4)
    x1 = rng.normal(size=400)
    frame = pd.DataFrame({"x1": x1, "yg": rng.gamma(2.0, np.exp(0.3 + 0.5 * x1) / 2)})
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "tweedie", "--link", "identity", "--formula", "yg ~ x1",
                        *(["--allow-nonconverged"] if allow else [])))
    assert "IRLS did not converge in 100 iterations: the deviance is not finite, a fitted " \
        "mean having left the tweedie family's range (a value >= 0) under the identity " \
        "link; choose a link that keeps it there (the family's default, log)" in line, line
    assert "changed by nan" not in line
    assert line.endswith("; --allow-nonconverged publishes a fit that stopped short, not one "
                         "whose deviance or coefficients are not finite") == allow, line
    assert snapshot(tmp_path) == before and not out.exists() and leftovers(out) == []
    # the remedy: the family's own link, as statsmodels fits it
    fit = streamlsq.fit_glm(frame, family="tweedie", formula="yg ~ x1", client=client)
    ref = smf.glm("yg ~ x1", frame, family=sm.families.Tweedie(var_power=1.5)).fit()
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-9)


def test_a_fit_stopped_short_is_still_published_marked(tmp_path, client):
    frame = _frame()
    fit = streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", maxiter=2,
                            allow_nonconverged=True, out=tmp_path / "g.zarr", client=client)
    assert fit.attrs["converged"] is False
    assert np.isfinite(streamlsq.open_result(tmp_path / "g.zarr", lazy=False).deviance).all()


# -- a column named as a Python keyword --------------------------------------------------------

def test_a_column_named_as_a_python_keyword_is_a_column(tmp_path, cli, client):
    """formulaic looks a lone name up in the data, keyword or not (it evaluates nothing);
    the check refused 'class', 'None', 'True' as 'names 'class', which is no column', with
    backticks too, though the docs say any text in backticks names a column."""
    frame = _frame().rename(columns={"x1": "class", "x2": "None"})
    frame.to_parquet(tmp_path / "t.parquet")
    out = tmp_path / "g.zarr"
    result = cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family", "poisson",
                 "--formula", "cnt ~ `class` + `None`")
    assert result.exit_code == 0, result.stderr
    ref = smf.glm("cnt ~ x1 + x2", _frame(), family=sm.families.Poisson()).fit()
    fit = streamlsq.open_result(out, lazy=False)
    assert [str(v) for v in fit.feature.values] == ["Intercept", "class", "None"]
    np.testing.assert_allclose(fit.coef.values[-1, :, 0], ref.params.values, rtol=1e-10)
    got = streamlsq.predict(out, frame, client=client)  # its formula read back
    np.testing.assert_allclose(got.yhat.values[:, 0], ref.predict(), rtol=1e-10)


@pytest.mark.parametrize(("formula", "word"), [("cnt ~ C(`class`)", "class"),
                                               ("cnt ~ np.log(`None` + 1)", "None")])
def test_a_keyword_column_inside_a_call_says_to_rename_it(tmp_path, cli, formula, word):
    frame = _frame().rename(columns={"x1": "class", "x2": "None"})
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", formula))
    assert f"the column '{word}'" in line and "a Python keyword" in line and \
        f"formulaic reads such a column alone (y ~ `{word}`)" in line or \
        f"which formulaic reads alone (y ~ `{word}`)" in line, line
    assert line.endswith("rename the column"), line
    assert snapshot(tmp_path) == before


def test_a_bare_keyword_is_told_to_be_backticked(tmp_path, cli):
    frame = _frame().rename(columns={"x1": "class"})
    frame.to_parquet(tmp_path / "t.parquet")
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", "cnt ~ class"))
    assert "names 'class', a Python keyword, which is no column unless written in " \
        "backticks (`class`)" in line, line


def test_dunder_names_stay_refused(tmp_path, cli):
    frame = _frame().rename(columns={"x1": "__class__"})
    frame.to_parquet(tmp_path / "t.parquet")
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                        "--family", "poisson", "--formula", "cnt ~ `__class__`"))
    assert "names '__class__', which is no column" in line, line


def test_a_glm_clustered_by_one_group_is_refused_as_a_linear_fit_is(tmp_path, cli):
    frame = _frame()
    frame["one"] = 1.0
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--out", out, "--family",
                        "poisson", "--formula", "cnt ~ x1", "--cov-type", "cluster",
                        "--groups", "one"))
    assert line == (f"streamlsq: error: {tmp_path / 't.parquet'}: variable 'one' holds 1 "
                    "group(s): a cluster-robust covariance needs at least 2"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    linear = one_line(cli("fit", "kf4lls", tmp_path / "t.parquet", "--out", out, "--formula",
                          "cnt ~ x1", "--cov-type", "cluster", "--groups", "one"))
    assert linear == line


# -- a formula whose interactions explode ------------------------------------------------------

BOMB = "cnt ~ " + "*".join(f"x{i}" for i in range(26))


def test_a_formula_of_exploding_interactions_is_refused_at_once(tmp_path):
    """formulaic expands a*b*...*z (2**26 terms) or (a + b + c)**20 (3**20 products) before
    anything can count its columns: hours of one core and memory. Refused from the parse
    tree, before the expansion."""
    import subprocess

    from faultkit import cli as command_line
    from faultkit import refusal

    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    for formula in (BOMB, "cnt ~ (x1 + x2 + g)**20"):
        result = subprocess.run(command_line("fit", "glm", tmp_path / "t.parquet", "--out",
                                             tmp_path / "g.zarr", "--formula", formula),
                                capture_output=True, text=True, timeout=120)
        line = refusal(result)
        assert "expanding its interactions takes more than 92,672 terms (a power such as " \
            "(a + b + c)**20 is multiplied out before its duplicates are merged), where a " \
            "fit's design holds 11,584 columns at most (dask config " \
            "streamlsq.design-state-bytes); write fewer interactions or a lower power" in line
        assert snapshot(tmp_path) == before


def test_a_result_whose_formula_explodes_is_refused_where_it_is_read(tmp_path, client):
    """A result received from someone else: its formula attribute is parsed by predict,
    info --check and open_result."""
    import subprocess

    from faultkit import cli as command_line
    from faultkit import refusal

    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet")
    fit = tmp_path / "g.zarr"
    streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", out=fit, client=client)
    g = zarr.open_group(str(fit), mode="r+")
    g.attrs["formula"] = BOMB
    before = snapshot(tmp_path)
    for args in (("info", fit, "--check"),
                 ("predict", fit, tmp_path / "t.parquet", "--out", tmp_path / "p.zarr")):
        result = subprocess.run(command_line(*args), capture_output=True, text=True,
                                timeout=120)
        line = refusal(result)
        assert "expanding its interactions takes more than" in line, line
        assert snapshot(tmp_path) == before


def test_a_converted_store_fitted_by_x_names_its_sample_dimension(tmp_path, cli, client):
    frame = _frame()
    streamlsq.convert(frame, tmp_path / "c.zarr", client=client)
    before = snapshot(tmp_path)
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "c.zarr", "--out", out, "--family",
                        "poisson", "--x", "x1,x2", "--y", "cnt"))
    assert line.endswith("variable 'x1' has dims ('row',), expected ('sample',) or "
                         "('sample', ...): the sample dimension first; name it with "
                         "--sample-dim (its first dimension: --sample-dim row)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    result = cli("fit", "glm", tmp_path / "c.zarr", "--out", out, "--family", "poisson",
                 "--x", "x1,x2", "--y", "cnt", "--sample-dim", "row")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("column", ["x1", "expo"])
def test_a_missing_value_in_a_glms_new_rows_advises_what_predict_offers(tmp_path, cli,
                                                                         client, column):
    """predict has no --missing: a linear fit's prediction said so; a GLM's advised
    '--missing drop (missing="drop")', an option predict does not take."""
    frame = _frame()
    fit = tmp_path / "g.zarr"
    streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1 + C(g)", exposure="expo",
                      out=fit, client=client)
    new = frame.iloc[:40].copy()
    new.loc[4, column] = np.nan
    new.to_parquet(tmp_path / "new.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    line = one_line(cli("predict", fit, tmp_path / "new.parquet", "--out", out))
    assert "has NaN at row 4; remove or impute the missing values, or leave their rows out " \
        "of DATA: predict gives every row a prediction (it has no --missing)" in line, line
    assert "missing drop" not in line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_an_exposure_of_zero_in_the_new_rows_says_what_to_do(tmp_path, cli, client):
    frame = _frame()
    fit = tmp_path / "g.zarr"
    streamlsq.fit_glm(frame, family="poisson", formula="cnt ~ x1", exposure="expo", out=fit,
                      client=client)
    new = frame.iloc[:40].copy()
    new.loc[4, "expo"] = 0.0
    new.to_parquet(tmp_path / "new.parquet")
    before = snapshot(tmp_path)
    line = one_line(cli("predict", fit, tmp_path / "new.parquet", "--out", tmp_path / "p.zarr"))
    assert line.endswith("variable 'expo' row 4: an exposure must be > 0 (its logarithm is the "
                         "offset); correct the row, or leave it out of DATA"), line
    assert snapshot(tmp_path) == before


def test_the_glm_line_says_rows_of_weight_zero_left_out_as_such(tmp_path, cli):
    frame = _frame()
    frame["w"] = 1.0
    frame.loc[[3, 8, 20], "w"] = 0.0
    frame.to_parquet(tmp_path / "t.parquet")
    result = cli("fit", "glm", tmp_path / "t.parquet", "--out", tmp_path / "g.zarr",
                 "--family", "poisson", "--formula", "cnt ~ x1", "--weights", "w")
    assert result.exit_code == 0, result.stderr
    assert "over 400 rows (397 fitted, 3 left out: a weight of 0), converged" in \
        result.stdout, result.stdout
    assert "--missing drop" not in result.stdout


def test_convert_refuses_a_column_named_twice(tmp_path, cli):
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "c.zarr"
    line = one_line(cli("convert", tmp_path / "t.parquet", "--out", out, "--columns",
                        "x1,cnt,x1"))
    assert line == (f"streamlsq: error: {tmp_path / 't.parquet'}: --columns names 'x1' twice; "
                    "name each column once"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
