"""Cases of the re-test of round 9 about results read back and formulas: the summary of a
lazily opened GLM (``open_result``'s default) raised ``NotImplementedError``; ``predict
--step`` of a step not recorded was an unexpected ``KeyError``; a constant term
(``y ~ I(5)``) leaked NumPy's broadcast error; a GLM formula fit labelled its intercept
``intercept``, unlike a linear formula fit's (formulaic's ``Intercept``); a column named
``np`` or ``C`` was called no column; a missing value was blamed on every column the
formula reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
import zarr

import streamlsq
from streamlsq.errors import InputError
from streamlsq.io.formulas import check_formula
from streamlsq.stream.statistics import summary_text

from conftest import one_line
from faultkit import invoke, leftovers, refusal, snapshot


def _frame(n=200, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x": rng.standard_normal(n), "z": rng.standard_normal(n),
                          "g": rng.choice(["p", "q", "r"], n)})
    frame["y"] = 1.0 + frame.x - 0.5 * frame.z + (frame.g == "q") + rng.standard_normal(n)
    frame["k"] = rng.poisson(np.exp(0.3 * frame.x)).astype(float)
    return frame


# -- B1: the summary of every kind of result, opened lazily ----------------------------------

def _same_summary(out):
    lazy, eager = streamlsq.open_result(out), streamlsq.open_result(out, lazy=False)
    assert lazy.coef.chunks is not None  # the premise: Dask-backed arrays
    got, expected = streamlsq.summary(lazy), streamlsq.summary(eager)
    pd.testing.assert_frame_equal(got, expected)
    assert got.attrs["model"] == expected.attrs["model"]
    assert summary_text(lazy) == summary_text(eager) == summary_text(out)
    return got


def test_the_summary_of_a_lazily_opened_glm_equals_the_in_memory_one(tmp_path, client):
    frame = _frame()
    out = tmp_path / "g.zarr"
    streamlsq.fit_glm(frame, formula="k ~ x", family="poisson", out=out, client=client)
    got = _same_summary(out)
    res = smf.glm("k ~ x", frame, family=sm.families.Poisson()).fit()
    assert np.allclose(got["coef"], res.params, rtol=1e-8, atol=0)
    assert np.isclose(got.attrs["model"]["deviance"], res.deviance, rtol=1e-9)
    lazy = streamlsq.open_result(out)
    assert streamlsq.wald_test(lazy, "x = 0") == streamlsq.wald_test(
        streamlsq.open_result(out, lazy=False), "x = 0")


@pytest.mark.parametrize("options", [
    {"window": 50, "cov_type": "HC0"},  # rolling windows, their own covariance
    {"cov_type": "HC1"},  # a robust covariance of the whole fit
    {"cov_type": "cluster", "groups": "g"},
])
def test_the_summary_of_a_lazily_opened_fit_of_every_covariance_equals_the_in_memory_one(
        tmp_path, client, options):
    out = tmp_path / "f.zarr"
    streamlsq.fit_stream(_frame(), formula="y ~ x + z", out=out, client=client,
                         progress=False, **options)
    got = _same_summary(out)
    assert got.attrs["model"]["nobs"] == 200


def test_the_summary_of_a_model_of_tasks_is_refused_alike_lazy_or_not(tmp_path, client):
    # used to be AttributeError: 'Dataset' object has no attribute 'target' (lazy or not)
    tasks = tmp_path / "tasks.zarr"
    streamlsq.simulate_mlr(tasks, k=2, d=4, n_light=600, t_light=4, n_heavy=60,
                           t_heavy=40, n_light2=200, t_light2=8, seed=1, client=client)
    out = tmp_path / "m.zarr"
    streamlsq.metalearn(tasks, 2, out=out, client=client, progress=False)
    wanted = ("{}: the result of 'metalearn', whose coef is (cluster, feature), not a fit's "
              "coefficients (step, feature, target): summary, summary_text and wald_test "
              "read those of a stream fit, an interleaved fit or a GLM")
    for result, shown in ((streamlsq.open_result(out), "the result"),
                          (streamlsq.open_result(out, lazy=False), "the result"),
                          (out, str(out))):
        for call in (streamlsq.summary, summary_text, lambda r: streamlsq.wald_test(r, "a")):
            with pytest.raises(InputError) as err:
                call(result)
            assert str(err.value) == wanted.format(shown)


# -- W1: predict --step of a step not recorded -----------------------------------------------

@pytest.fixture(scope="module")
def stepped(tmp_path_factory, client):
    root = tmp_path_factory.mktemp("stepped")
    streamlsq.simulate_stream(root / "d.zarr", n_rows=1000, n_features=2, seed=0,
                              client=client)
    streamlsq.fit_stream(root / "d.zarr", "kf4lls", block_size=100,
                         out=root / "fit.zarr", client=client, progress=False)
    streamlsq.fit_stream(root / "d.zarr", "kf4lls", block_size=10, record_every=1,
                         out=root / "long.zarr", client=client, progress=False)
    frame = _frame()
    frame.to_parquet(root / "t.parquet")
    streamlsq.fit_glm(frame, formula="k ~ x", family="poisson", out=root / "g.zarr",
                      client=client)
    return root


@pytest.mark.parametrize("fit, step, wanted", [
    ("fit.zarr", 99, "step 99 was not recorded; the fit recorded the steps 1, 2, 3, 4, 5, "
                     "6, 7, 8, 9, 10: give one of them to --step (step=), or leave it out "
                     "for the last"),
    ("long.zarr", 101, "step 101 was not recorded; the fit recorded the steps 1, 2, … 100 (100 "
                     "in all, its coordinate step): give one of them to --step (step=), or "
                     "leave it out for the last"),
    ("g.zarr", 2, "step 2 was not recorded; the fit recorded one step, 1: leave out --step "
                  "(step=)"),
])
def test_predict_of_a_step_not_recorded_names_the_recorded_steps(stepped, tmp_path, cli,
                                                                 fit, step, wanted):
    # used to be exit 1, "unexpected error (KeyError ...)"; a GLM said "a GLM fit has one
    # step; leave out --step"
    data = stepped / ("t.parquet" if fit == "g.zarr" else "d.zarr")
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    line = one_line(cli("predict", stepped / fit, data, "--out", out, "--step", step))
    assert line == f"streamlsq: error: {stepped / fit}: {wanted}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    with pytest.raises(InputError) as err:
        streamlsq.predict(stepped / fit, data, step=step, progress=False)
    assert str(err.value) == f"{stepped / fit}: {wanted}"


def test_predict_of_a_recorded_step_applies_its_coefficients(stepped, client):
    fit = streamlsq.open_result(stepped / "fit.zarr", lazy=False)
    pred = streamlsq.predict_stream(stepped / "fit.zarr", stepped / "d.zarr", step=3,
                                    client=client, progress=False)
    X = zarr.open_group(str(stepped / "d.zarr"), mode="r")["X"][:]
    coef = fit.coef.sel(step=3).transpose("feature", "target").values
    assert np.allclose(pred.yhat.values, X @ coef, rtol=1e-12, atol=1e-12)


# -- W2: a term of no column ------------------------------------------------------------------

@pytest.mark.parametrize("formula, term", [
    ("y ~ I(5)", "I(5)"), ("y ~ I(2) - 1", "I(2)"), ("y ~ I(1e308 * 10)", "I(1e+308 * 10)"),
    ("y ~ x + np.log(2)", "np.log(2)"),
])
def test_a_term_of_no_column_is_refused_before_any_work(tmp_path, cli, formula, term):
    # used to be numpy's "could not broadcast input array from shape (3,3) into shape (2,2)"
    _frame().to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    wanted = (f"formula {formula!r}: the term {term} reads no column: it is the same number "
              "in every row, a column aliased with the intercept, not a column of the data; "
              "leave it out (the formula's intercept is its constant term: '+ 1', or '- 1' "
              "to remove it)")
    for command in (("fit", "kf4lls"), ("fit", "glm")):
        line = one_line(cli(*command, tmp_path / "t.parquet", "--out", out, "--formula",
                            formula))
        assert line == f"streamlsq: error: {wanted}", line
        # before a cluster is reached: a scheduler no one listens at is never called
        assert refusal(invoke(*command, tmp_path / "t.parquet", "--out", out, "--formula",
                              formula, scheduler="tcp://127.0.0.1:9")) == line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    with pytest.raises(InputError) as err:  # from the formula alone: no data read
        check_formula(formula)
    assert str(err.value) == wanted


def test_a_response_of_no_column_is_refused_and_the_intercept_alone_still_fits(client):
    with pytest.raises(InputError) as err:
        check_formula("I(5) ~ x")
    assert str(err.value) == ("formula 'I(5) ~ x': its response I(5) reads no column: it is "
                              "the same number in every row, not a column of the data; "
                              "write the response column left of '~'")
    frame = _frame()
    fit = streamlsq.fit_stream(frame, formula="y ~ 1", client=client, progress=False)
    assert list(fit.feature.values) == ["Intercept"]
    assert np.isclose(fit.coef.values[-1, 0, 0], frame.y.mean(), rtol=1e-12)
    # a number inside a term of a column is a scaled column, not a constant
    scaled = streamlsq.fit_stream(frame, formula="y ~ I(2 * x)", client=client,
                                  progress=False)
    plain = streamlsq.fit_stream(frame, formula="y ~ x", client=client, progress=False)
    assert np.isclose(2 * scaled.coef.values[-1, 1, 0], plain.coef.values[-1, 1, 0],
                      rtol=1e-10)


# -- W4: a GLM formula fit labels its intercept as a linear formula fit does ------------------

def test_a_glm_formula_fit_labels_its_intercept_as_formulaic_does(tmp_path, client):
    frame = _frame()
    linear = streamlsq.fit_stream(frame, formula="k ~ x", client=client, progress=False)
    glm = streamlsq.fit_glm(frame, formula="k ~ x", family="poisson", client=client)
    assert list(glm.feature.values) == list(linear.feature.values) == ["Intercept", "x"]
    # the labels of statsmodels' formula GLM: a Wald test on them is statsmodels'
    res = smf.glm("k ~ x", frame, family=sm.families.Poisson()).fit()
    ours = streamlsq.wald_test(glm, "Intercept = 0, x = 0.3")
    theirs = res.wald_test("Intercept = 0, x = 0.3", scalar=True, use_f=True)
    assert np.isclose(ours.fvalue, theirs.statistic, rtol=1e-8)
    assert np.isclose(ours.pvalue, theirs.pvalue, rtol=1e-7)
    assert list(streamlsq.summary(glm).index) == list(res.params.index)
    # a fit of named columns (--x) labels it 'intercept', a GLM's and a linear fit's alike
    named = dict(x=["x"], y="k", fit_intercept=True, client=client)
    assert list(streamlsq.fit_glm(frame, family="poisson", **named).feature.values) == \
        list(streamlsq.fit_stream(frame, progress=False, **named).feature.values) == \
        ["intercept", "x"]


def test_a_glm_formula_fit_labelled_intercept_before_still_opens_and_predicts(tmp_path,
                                                                              client):
    frame = _frame()
    out = tmp_path / "g.zarr"
    streamlsq.fit_glm(frame, formula="k ~ x + C(g)", family="poisson", out=out,
                      client=client)
    new = _frame(20, seed=5)
    now = streamlsq.predict(out, new, client=client, progress=False)
    g = zarr.open_group(str(out), mode="r+")  # as a result written before labelled it
    for name in ("feature", "feature2"):
        labels = [str(v) for v in g[name][:]]
        assert labels[0] == "Intercept"
        g[name][:] = np.array(["intercept", *labels[1:]], dtype=g[name].dtype)
    del g.attrs["model_digest"]  # written before the digest too (round 15), and its marker
    del g.attrs["streamlsq_layout"]
    old = streamlsq.open_result(out, lazy=False)
    assert list(old.feature.values) == ["intercept", "x", "C(g)[T.q]", "C(g)[T.r]"]
    assert list(streamlsq.summary(streamlsq.open_result(out)).index)[0] == "intercept"
    before = streamlsq.predict(out, new, client=client, progress=False)
    res = smf.glm("k ~ x + C(g)", frame, family=sm.families.Poisson()).fit()
    assert np.allclose(before.yhat.values[:, 0], res.predict(new), rtol=1e-8, atol=0)
    assert np.array_equal(before.yhat.values, now.yhat.values)
    assert before.attrs["fit_intercept"] is True


# -- W8: a column named as the formula's namespace --------------------------------------------

@pytest.fixture(scope="module")
def names(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"np": rng.uniform(1, 2, 200), "C": rng.choice(["a", "b"], 200),
                          "x": rng.uniform(1, 2, 200), "y": rng.standard_normal(200)})
    frame.to_parquet(root / "n.parquet")
    return root, frame


@pytest.mark.parametrize("formula, name, what, callee", [
    ("y ~ np.log(np)", "np", "NumPy", "np.log"),
    ("y ~ np.log(`np`)", "np", "NumPy", "np.log"),  # backticks: the same Python name
    ("y ~ np + np.log(x)", "np", "NumPy", "np.log"),
    ("y ~ C(C)", "C", "C(), the categorical term", "C"),
    ("y ~ C + C(x)", "C", "C(), the categorical term", "C"),
])
def test_a_column_named_as_the_formulas_namespace_is_named_both(names, tmp_path, cli, formula,
                                                                name, what, callee):
    # used to be "names 'np', which is no column", though 'y ~ np' fits that column
    # ('y ~ np + np.log(x)': formulaic took np.log for the column's attribute)
    root, _ = names
    wanted = (f"formula {formula!r}: '{name}' is both a column it reads and {what}, which it "
              f"calls ({callee}): formulaic, which builds the design, takes '{name}' for the "
              "column in both places, and backticks do not tell them apart; rename the "
              f"column (e.g. to '{name}_') and write that name")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", root / "n.parquet", "--out", out, "--formula",
                        formula))
    assert line == f"streamlsq: error: {wanted}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    with pytest.raises(InputError) as err:  # from the formula alone: no data read
        check_formula(formula)
    assert str(err.value) == wanted


def test_a_column_named_np_or_c_read_as_a_value_fits_as_statsmodels(names, client):
    root, frame = names
    for formula, renamed, labels in (
            ("y ~ np", "y ~ n", {"np": "n"}),
            ("y ~ I(np * 2) + C", "y ~ I(n * 2) + c", {"I(np * 2)": "I(n * 2)",
                                                      "C[T.b]": "c[T.b]"}),
            ("y ~ np.log(x) + C", "y ~ np.log(x) + c", {"C[T.b]": "c[T.b]"})):
        fit = streamlsq.fit_stream(root / "n.parquet", formula=formula, client=client,
                                   progress=False)
        res = smf.ols(renamed, frame.rename(columns={"np": "n", "C": "c"})).fit()
        theirs = res.params[[labels.get(str(f), str(f)) for f in fit.feature.values]]
        assert len(theirs) == len(res.params)
        assert np.allclose(fit.coef.values[-1, :, 0], theirs, rtol=1e-9, atol=0)


# -- W9: the column of a missing value, where the row is known --------------------------------

def test_a_missing_value_names_the_columns_that_miss_it(tmp_path, cli, client):
    # used to be "the formula's design (a value missing in a column it reads: g, x)"
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.standard_normal(50), "g": rng.choice(["p", "q"], 50),
                          "z": rng.uniform(1, 2, 50), "y": rng.standard_normal(50)})
    frame.loc[5, "g"] = None
    with pytest.raises(InputError) as err:
        streamlsq.fit_stream(frame, formula="y ~ x + C(g)", client=client, progress=False)
    assert str(err.value).endswith(
        ": the formula's design (a value missing in column 'g') chunk 0 has NaN at row 5; "
        "remove or impute non-finite values, or drop their rows with --missing drop "
        '(missing="drop")'), err.value
    frame.loc[3, ["x", "z"]] = np.nan
    frame.to_parquet(tmp_path / "m.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", tmp_path / "m.parquet", "--out", out, "--formula",
                        "y ~ np.log(z) + x + C(g)"))
    assert line == (f"streamlsq: error: {tmp_path / 'm.parquet'}: the formula's design "
                    "(values missing in columns 'x', 'z') chunk 0 has NaN at row 3; remove or "
                    "impute non-finite values, or drop their rows with --missing drop "
                    '(missing="drop")'), line
    # the response's side names its own column; a transform undefined at a value its term
    frame = frame.dropna().reset_index(drop=True)
    frame.loc[8, "y"] = np.nan
    with pytest.raises(InputError, match=r"the formula's response \(a value missing in "
                                         r"column 'y'\) chunk 0 has NaN at row 8;"):
        streamlsq.fit_stream(frame, formula="y ~ x", client=client, progress=False)
    frame = frame.dropna().reset_index(drop=True)
    frame.loc[17, "z"] = -1.0
    with pytest.raises(InputError, match=r"the column 'np.log\(z\)' of the formula's design "
                                         r"chunk 0 has NaN at row 17;"):
        streamlsq.fit_stream(frame, formula="y ~ x + np.log(z)", client=client,
                             progress=False)
    assert snapshot(tmp_path) == before and leftovers(out) == []
