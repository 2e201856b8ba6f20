"""Re-test round 14's findings fixed in round 15 (part B): a fit's record of its model bound to
its coefficients, records ``info --check`` passed and restrictions read otherwise than
statsmodels reads them.

A GLM's exposure edited consistently in both of its records (``exposure_variable`` and the
``parameters``), or removed from both, passed ``info --check`` and ``predict`` applied it: a
fit now keeps the sha256 of its record (``model_digest``) and every reader computes it again.
A family no GLM has and a ``fit_intercept`` that is not a boolean passed ``info --check``;
``wald_test(g, 'Intercept = x1 = 0')`` tested one restriction where statsmodels tests two;
a number out of range, a ``q`` beside a string, ``==``, a column named with a backtick and
R's ``offset()`` in a formula had no remedy."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
import zarr

import streamlsq
from streamlsq.errors import InputError
from streamlsq.io.results import DIGEST, DIGESTED, SEALED, record_digest

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
    _frame().to_parquet(folder / "t.parquet")
    streamlsq.fit_glm(folder / "t.parquet", family="poisson", formula="cnt ~ x1 + C(g)",
                      exposure="expo", out=folder / "g.zarr", client=client, progress=False)
    return folder / "g.zarr"


def _edited(glm, folder, **attrs):
    """A copy of the fit ``glm`` in ``folder`` with ``attrs`` set (None: deleted)."""
    fit = folder / "e.zarr"
    shutil.copytree(glm, fit)
    g = zarr.open_group(str(fit), mode="r+")
    for name, value in attrs.items():
        if value is None:
            del g.attrs[name]
        else:
            g.attrs[name] = value
    return fit


def _parameters(glm, **changed) -> str:
    recorded = json.loads(zarr.open_group(str(glm), mode="r").attrs["parameters"])
    return json.dumps(recorded | changed, sort_keys=True)


def _digest_refusal(label, attrs: dict) -> str:
    names = ", ".join(name for name in DIGESTED if name in attrs)
    return (f"{label}: its attributes ({names}) or its coefficients' labels are not those its "
            f"attribute {DIGEST} was computed from at the fit: they were edited since the "
            f"fit; {DAMAGED}")


# -- rows 1 and 84: the record edited consistently in both places --------------------------

@pytest.mark.parametrize("edit", [
    dict(exposure_variable="w", parameters=("exposure", "w")),  # row 1
    dict(exposure_variable=None, parameters=("exposure", None)),  # row 84
    dict(offset_variable="w", parameters=("offset", "w")),
])
def test_a_record_edited_consistently_is_refused_by_every_reader(tmp_path, cli, client, glm,
                                                                 edit):
    """Round 14: rc 0 for ``info --check`` and ``predict``, whose yhat used the edited
    exposure (2.99 vs 3.44 in row 0)."""
    edit = dict(edit)
    key, value = edit.pop("parameters")
    fit = _edited(glm, tmp_path, **edit, parameters=_parameters(glm, **{key: value}))
    attrs = dict(zarr.open_group(str(fit), mode="r").attrs)
    # the comparisons of one record with another see nothing: the two agree
    assert attrs.get(f"{key}_variable") == json.loads(attrs["parameters"])[key]
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    wanted = f"streamlsq: error: {_digest_refusal(fit, attrs)}"
    assert one_line(cli("info", fit, "--check")) == wanted
    assert one_line(cli("predict", fit, glm.parent / "t.parquet", "--out", out)) == wanted
    assert snapshot(tmp_path) == before and leftovers(out) == []
    with pytest.raises(InputError) as refused:
        streamlsq.open_result(fit)
    assert str(refused.value) == _digest_refusal(fit, attrs)


def test_an_opened_fit_edited_in_memory_is_refused_by_predict(client, glm):
    """``streamlsq.predict`` given the Dataset of an opened result checks it as a store."""
    ds = streamlsq.open_result(glm)
    ds.attrs["exposure_variable"] = "w"
    ds.attrs["parameters"] = _parameters(glm, exposure="w")
    with pytest.raises(InputError, match=f"were edited since the fit; {DAMAGED}"):
        streamlsq.predict(ds, pd.read_parquet(glm.parent / "t.parquet"), client=client)


def test_the_digest_is_that_of_the_record_and_a_result_without_one_is_read_as_before(
        tmp_path, cli, client, glm):
    """The digest is the sha256 of the record (its JSON read as values, so that spacing does
    not count) and the labels; a result written before it has none and predicts as
    statsmodels does."""
    g = zarr.open_group(str(glm), mode="r")
    attrs = dict(g.attrs)
    labels = [str(v) for v in g["feature"][...]]
    assert len(attrs[DIGEST]) == 64 and attrs[DIGEST] == record_digest(attrs, labels)
    spaced = attrs | {"parameters": json.dumps(json.loads(attrs["parameters"]), indent=2)}
    assert record_digest(spaced, labels) == attrs[DIGEST]
    assert record_digest(attrs, labels[::-1]) != attrs[DIGEST]
    old = _edited(glm, tmp_path, **{DIGEST: None, SEALED: None})  # as written before it
    run = cli("info", old, "--check")
    assert run.exit_code == 0, run.output
    frame = pd.read_parquet(glm.parent / "t.parquet")
    ref = smf.glm("cnt ~ x1 + C(g)", frame, family=sm.families.Poisson(),
                  exposure=frame.expo).fit()
    got = streamlsq.predict(old, frame, client=client)
    np.testing.assert_allclose(got.yhat.values[:, 0], ref.predict(frame, exposure=frame.expo),
                               rtol=1e-10)


def test_a_stream_fit_written_chunk_by_chunk_is_bound_too(tmp_path, cli, client):
    """A stream fit's arrays are written into its store by the workers: its digest is
    computed from the store, and an edit of its record is refused."""
    _frame().to_parquet(tmp_path / "t.parquet")
    fit = tmp_path / "f.zarr"
    streamlsq.fit_stream(tmp_path / "t.parquet", "kf4lls", formula="cnt ~ x1 + x2",
                         out=fit, client=client, progress=False)
    g = zarr.open_group(str(fit), mode="r+")
    assert g.attrs[DIGEST] == record_digest(dict(g.attrs),
                                            [str(v) for v in g["feature"][...]])
    assert cli("info", fit, "--check").exit_code == 0
    g.attrs["weights_variable"] = "w"  # a record no other attribute is compared with
    before = snapshot(tmp_path)
    line = one_line(cli("info", fit, "--check"))
    assert line == f"streamlsq: error: {_digest_refusal(fit, dict(g.attrs))}"
    assert snapshot(tmp_path) == before


# -- row 4: a family no GLM has -------------------------------------------------------------

def test_a_family_no_glm_has_is_refused_when_opened_as_by_predict(tmp_path, cli, glm):
    """Round 14: ``info --check`` and ``open_result`` passed ``family='banana'``, which
    ``predict`` refused."""
    fit = _edited(glm, tmp_path, family="banana")
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    wanted = (f"{fit}: its attributes family and link ('banana', 'log') are refused: family "
              "must be one of gaussian, binomial, poisson, gamma, inverse_gaussian, "
              f"negative_binomial, tweedie, got 'banana'; {DAMAGED}")
    assert one_line(cli("info", fit, "--check")) == f"streamlsq: error: {wanted}"
    assert one_line(cli("predict", fit, glm.parent / "t.parquet", "--out", out)) == \
        f"streamlsq: error: {wanted}"
    with pytest.raises(InputError) as refused:
        streamlsq.open_result(fit)
    assert str(refused.value) == wanted
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- row 6: fit_intercept not a boolean -----------------------------------------------------

@pytest.mark.parametrize("value", ["yes", 1, "false"])
def test_a_fit_intercept_not_a_boolean_is_refused(tmp_path, cli, glm, value):
    fit = _edited(glm, tmp_path, fit_intercept=value)
    before = snapshot(tmp_path)
    assert one_line(cli("info", fit, "--check")) == (
        f"streamlsq: error: {fit}: its attribute fit_intercept is {value!r}, not true or "
        f"false; {DAMAGED}")
    assert snapshot(tmp_path) == before


# -- row 53: a chained equality -------------------------------------------------------------

#: chained equalities and the number of restrictions statsmodels reads in each
CHAINED = [("Intercept = x1 = 0", 2), ("x1 = x2 = 0.1", 2), ("Intercept = x1 = 0, x2 = 0", 3),
           ("x1 = 2 * x2 = -0.5", 2), ("Intercept = x1 = x2 = 0", 3)]


@pytest.fixture(scope="module")
def fits(tmp_path_factory, client):
    """A GLM and a least-squares fit of the same formula, with statsmodels' fits."""
    folder = tmp_path_factory.mktemp("chained")
    frame = _frame()
    frame.to_parquet(folder / "t.parquet")
    formula = "cnt ~ x1 + x2 + C(g)"
    glm = streamlsq.fit_glm(folder / "t.parquet", family="poisson", formula=formula,
                            client=client, progress=False)
    ols = streamlsq.fit_stream(folder / "t.parquet", "kf4lls", formula=formula,
                               client=client, progress=False)
    return {"glm": (glm, smf.glm(formula, frame, family=sm.families.Poisson()).fit()),
            "ols": (ols, smf.ols(formula, frame).fit())}


@pytest.mark.parametrize("kind", ["glm", "ols"])
@pytest.mark.parametrize("spec, restrictions", CHAINED)
def test_a_chained_equality_is_read_as_statsmodels_reads_it(fits, kind, spec, restrictions):
    """Round 14: ``'Intercept = x1 = 0'`` was one restriction (F 1.84, p 0.175), where
    statsmodels' ``f_test`` reads two (F 99.7, p 8.5e-36)."""
    fit, ref = fits[kind]
    got = streamlsq.wald_test(fit, spec)
    want = ref.f_test(spec)
    assert got.df_num == int(want.df_num) == restrictions
    np.testing.assert_allclose([got.fvalue, got.pvalue],
                               [float(np.squeeze(want.fvalue)), float(want.pvalue)],
                               rtol=1e-6)
    # a list of restrictions, as statsmodels takes one
    assert streamlsq.wald_test(fit, spec.split(", ")).df_num == got.df_num


def test_labels_in_backquotes_keep_their_equal_signs(fits):
    """A label in backquotes is not split at an '=' inside it: none here, so the label is
    named as missing, not a chain of three."""
    fit, _ = fits["ols"]
    with pytest.raises(InputError, match=r"no coefficient 'a=b'"):
        streamlsq.wald_test(fit, "`a=b` = 0")


# -- rows 54, 87, 88: restrictions refused with their remedy --------------------------------

@pytest.mark.parametrize("spec, q, wanted", [
    ("x1 = 1e400", None, "'x1 = 1e400': the number 1e400 is out of range (not finite in "
                         "double precision); a restriction's numbers must be finite"),
    ("x1 = 0", [1], "restrictions 'x1 = 0' with q [1]: a string of restrictions holds its "
                    "own right-hand sides ('x1 = 1'): leave q out, or give a matrix R (J, k) "
                    "with q (J,)"),
    ("x1 == 0", None, "'x1 == 0': not a list of linear restrictions (Unknown operator '=='.); "
                      "write each restriction with one '=' (as 'x1 = 0', 'x1 = x2'), "
                      "restrictions separated by ','"),
    ("x1 > 0", None, "'x1 > 0': not a list of linear restrictions (Unknown operator '>'.); "
                     "write each restriction with one '=' (as 'x1 = 0', 'x1 = x2'), "
                     "restrictions separated by ','"),
])
def test_restrictions_refused_with_their_remedy(fits, spec, q, wanted):
    fit, _ = fits["glm"]
    with pytest.raises(InputError) as refused:
        streamlsq.wald_test(fit, spec, q)
    assert str(refused.value) == wanted


# -- rows 18 and 82: formulas ---------------------------------------------------------------

BACKTICK = ("a column name holding a backtick cannot be written in a formula (a backtick "
            "ends the quoted name, and formulaic has no escape for one): rename the column")


@pytest.mark.parametrize("formula, wanted", [
    ("cnt ~ `a``b` + x1", "cannot be parsed (FormulaSyntaxError: Missing operator between "
                          f"`a` and `b`.); {BACKTICK}"),
    ("cnt ~ a`b + x1", "cannot be parsed (FormulaSyntaxError: Formula ended before quote "
                       f"context was closed. Expected: `); {BACKTICK}"),
    ("cnt ~ `a\\`b` + x1", f"is missing (found: ['a`b', 'cnt', 'expo', 'g', 'w', 'x1', "
                           f"'x2']); the column 'a`b': {BACKTICK}"),
    ("cnt ~ x1 + offset(np.log(expo))", "calls 'offset', which is not a declared transform: "
                                        "an offset is given apart from the formula, --offset "
                                        "COLUMN (offset= in Python), or --exposure COLUMN for "
                                        "the logarithm of an exposure (exposure=)"),
])
def test_formulas_refused_with_their_remedy(tmp_path, cli, formula, wanted):
    """Round 14: a column named ``a`b`` had formulaic's parse error alone; ``offset()`` was
    'not a declared transform' without a word of --offset and --exposure."""
    frame = _frame().rename(columns={"x2": "a`b"}).assign(x2=0.0)
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--family", "poisson",
                        "--formula", formula, "--out", out))
    assert line.startswith("streamlsq: error: ") and line.endswith(wanted), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_an_unclosed_backtick_has_no_note_on_names(tmp_path, cli):
    """A quote left open after a space is a typo, not a name holding a backtick."""
    _frame().to_parquet(tmp_path / "t.parquet")
    line = one_line(cli("fit", "glm", tmp_path / "t.parquet", "--family", "poisson",
                        "--formula", "cnt ~ `my col", "--out", tmp_path / "f.zarr"))
    assert "quote context was closed" in line and "backtick" not in line, line
