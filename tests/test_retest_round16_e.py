"""Re-test round 15's findings fixed in round 16 (part E): restrictions with a number in
scientific notation, a fit whose digest was removed, a check that could not use a digest,
a Wald test's dependent restrictions and unquoted labels, ``open_result`` of a path with a
``#``, the remedy of a URL with too few slashes, and the traceback of an interrupt raised in
a gc callback.

``wald_test(g, 'x1 = 1e-5')`` said ``no coefficient '1e'``; a GLM whose exposure was edited
consistently and whose ``model_digest`` was deleted passed every reader (it looked like a
result written before the digest); ``./memory:/f.zarr``, the spelling the not-a-URL line
suggested, failed; on SIGTERM Python sometimes printed ``Exception ignored in: <bound
method GCDiagnosis._gc_callback ...>`` and a traceback before the one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
import zarr

import streamlsq
from streamlsq.cli.common import _noting_interrupts
from streamlsq.errors import InputError, Terminated, check_interrupted, forget_interrupt, interrupt
from streamlsq.io.results import DIGEST, SEALED, SEALED_LAYOUT

from conftest import one_line
from faultkit import leftovers, snapshot

DAMAGED = "the result is damaged: compute it again"


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    g = rng.choice(["a", "b", "c"], size=n)
    expo = rng.uniform(0.5, 2.0, size=n)
    eta = 0.3 + 0.5 * x1 + 0.4 * (g == "b")
    return pd.DataFrame({"x1": x1, "my col": rng.normal(size=n), "g": g, "expo": expo,
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


@pytest.fixture(scope="module")
def reference():
    frame = _frame()
    return smf.glm("cnt ~ x1 + C(g)", frame, family=sm.families.Poisson(),
                   exposure=frame.expo).fit()


def _in(folder, run):
    """``run()`` with ``folder`` as the working folder (the user's relative names)."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        return run()
    finally:
        os.chdir(here)


# -- row 35: a number with an exponent --------------------------------------------------------

@pytest.mark.parametrize("spec", ["x1 = 1e-5", "x1 = 2.5e-1", "x1 = 1E-1", "x1 = 1e+0",
                                  "x1 = 1e1", "1e-1*x1 = 0.05", "x1 = 1e-400",
                                  "x1 = -2.5e-1", "x1 = .5e0", "Intercept = 1e-1 = x1"])
def test_a_number_with_an_exponent_is_read_as_statsmodels_reads_it(glm, reference, spec):
    """Round 15: ``'x1 = 1e-5': no coefficient '1e'; the coefficients are [...]``."""
    got = streamlsq.wald_test(streamlsq.open_result(glm), spec)
    want = reference.f_test(spec)
    np.testing.assert_allclose(got.fvalue, float(np.squeeze(want.fvalue)), rtol=1e-6)
    np.testing.assert_allclose(got.pvalue, float(want.pvalue), rtol=1e-5)
    assert got.df_num == int(want.df_num)


def test_an_exponent_gives_the_same_test_as_the_decimal_and_out_of_range_is_refused(glm):
    fit = streamlsq.open_result(glm)
    assert streamlsq.wald_test(fit, "x1 = 5e-1") == streamlsq.wald_test(fit, "x1 = 0.5")
    for spec, number in (("x1 = 1e400", "1e400"), ("x1 = -1e400", "1e400")):
        with pytest.raises(InputError) as refused:
            streamlsq.wald_test(fit, spec)
        assert str(refused.value) == (f"{spec!r}: the number {number} is out of range (not "
                                      "finite in double precision); a restriction's numbers "
                                      "must be finite")


# -- row 34: restrictions that contradict each other ------------------------------------------

@pytest.mark.parametrize("spec", ["0 = x1 = 2", "x1 = 0, x1 = 0 = Intercept"])
def test_dependent_restrictions_say_a_restriction_may_contradict_the_others(glm, spec):
    """Round 15: ``drop the ones the others imply``, where ``0 = x1 = 2`` contradict."""
    with pytest.raises(InputError) as refused:
        streamlsq.wald_test(streamlsq.open_result(glm), spec)
    assert str(refused.value) == ("the restrictions are linearly dependent (R V Rᵀ is "
                                  "singular): a restriction is implied by, or contradicts, "
                                  "the others: drop it")


# -- row 41: a label holding a space, not back-quoted -----------------------------------------

def test_a_label_holding_a_space_is_told_to_be_back_quoted(tmp_path, client):
    """Round 15: ``'my col = 0': not a list of linear restrictions (Operator `=` is
    incorrectly used.)``, no remedy; back-quoted, it equals statsmodels' ``Q("my col")``."""
    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet")
    streamlsq.fit_glm(tmp_path / "t.parquet", family="poisson",
                      formula="cnt ~ `my col` + x1", out=tmp_path / "m.zarr", client=client,
                      progress=False)
    fit = streamlsq.open_result(tmp_path / "m.zarr")
    with pytest.raises(InputError) as refused:
        streamlsq.wald_test(fit, "my col = 0")
    assert str(refused.value).startswith("'my col = 0': not a list of linear restrictions (")
    assert str(refused.value).endswith("); write a label holding spaces or operators in "
                                       "backquotes: `my col` = 0"), str(refused.value)
    got = streamlsq.wald_test(fit, "`my col` = 0")
    want = smf.glm('cnt ~ Q("my col") + x1', frame, family=sm.families.Poisson()).fit() \
        .f_test('Q("my col") = 0')
    np.testing.assert_allclose(got.fvalue, float(np.squeeze(want.fvalue)), rtol=1e-6)
    with pytest.raises(InputError) as refused:  # no such label: the remedy is not given
        streamlsq.wald_test(fit, "x1 == 0")
    assert "backquotes" not in str(refused.value)


# -- rows 26 and 27: the digest removed; a result from before the digest ----------------------

def _edited(glm, folder, name, **attrs):
    fit = folder / name
    shutil.copytree(glm, fit)
    g = zarr.open_group(str(fit), mode="r+")
    for key, value in attrs.items():
        if value is None:
            del g.attrs[key]
        else:
            g.attrs[key] = value
    return fit


def _exposure_w(glm) -> str:
    recorded = json.loads(zarr.open_group(str(glm), mode="r").attrs["parameters"])
    return json.dumps(recorded | {"exposure": "w"}, sort_keys=True)


def test_a_fit_whose_digest_was_removed_is_refused_by_every_reader(tmp_path, cli, glm):
    """Round 15: the exposure edited in both records and ``model_digest`` deleted: rc 0 from
    ``info --check``, ``predict`` and ``open_result`` (yhat 2.99 where the fit's is 3.44)."""
    assert zarr.open_group(str(glm), mode="r").attrs[SEALED] == SEALED_LAYOUT
    fit = _edited(glm, tmp_path, "e.zarr", exposure_variable="w",
                  parameters=_exposure_w(glm), **{DIGEST: None})
    wanted = (f"{fit}: its attribute model_digest is missing (its attribute "
              f"streamlsq_layout says the fit wrote one); {DAMAGED}")
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    assert one_line(cli("info", fit, "--check")) == f"streamlsq: error: {wanted}"
    assert one_line(cli("predict", fit, glm.parent / "t.parquet", "--out", out)) == \
        f"streamlsq: error: {wanted}"
    with pytest.raises(InputError) as refused:
        streamlsq.open_result(fit)
    assert str(refused.value) == wanted
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_info_check_of_a_fit_from_before_the_digest_says_the_check_was_partial(tmp_path, cli,
                                                                                glm):
    """Round 15: passed silently. A result from before the digest has neither attribute; it
    is read as before (who removes both is not caught: docs/stores.md), and ``info --check``
    says what it could not check."""
    old = _edited(glm, tmp_path, "old.zarr", **{DIGEST: None, SEALED: None})
    partial = ("not checked: its record of the model against a digest: it has no attribute "
               "model_digest (written by a streamlsq from before the digest), so an attribute "
               "edited consistently with the others is not seen")
    run = cli("info", old, "--check")
    assert run.exit_code == 0, run.output
    assert partial in run.output.splitlines()
    run = cli("info", glm, "--check")
    assert run.exit_code == 0, run.output
    assert "not checked" not in run.output


# -- row 48: open_result of a path with a '#' -------------------------------------------------

@pytest.mark.parametrize(("given", "wanted"), [
    ("missing.zarr#", "missing.zarr#: no such store missing.zarr (and a result is a store of "
                      "its own, never a group: give its path)"),
    ("#r", "#r: names no store before '#', and a result is a store of its own, never a "
           "group: give the result's path"),
    ("s3:/b/g.zarr#r", "s3:/b/g.zarr: not a URL, which is scheme://... (here s3://b/g.zarr), "
                       "and no local file or folder 's3:' exists"),
])
def test_open_result_of_a_path_with_a_hash_names_the_first_thing_to_mend(tmp_path, given,
                                                                         wanted):
    """Round 15: ``missing.zarr#`` said ``leave out the '#'``; ``#r`` suggested
    ``data.zarr#r`` (refused for a result); ``s3:/b/g.zarr#r`` said ``no such store``."""
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as refused:
        _in(tmp_path, lambda: streamlsq.open_result(given))
    assert str(refused.value) == wanted
    assert snapshot(tmp_path) == before


# -- row 49: the local remedy of the not-a-URL line works -------------------------------------

def test_the_local_remedy_of_an_output_that_is_not_a_url_works(tmp_path, cli, glm):
    """Round 15: the line said ``write ./memory:/f.zarr``, which then failed with
    ``memory:: output folder does not exist``. Each spelling it suggests is run here."""
    table = glm.parent / "t.parquet"

    def fit(out):
        return _in(tmp_path, lambda: cli("fit", "glm", table, "--family", "poisson",
                                         "--formula", "cnt ~ x1", "--out", out))

    before = snapshot(tmp_path)
    assert one_line(fit("memory:/f.zarr")) == (
        "streamlsq: error: memory:/f.zarr: not a URL, which is scheme://... (here "
        "memory://f.zarr); to write into a local folder named 'memory:', create it first "
        "(mkdir './memory:')")
    assert one_line(fit("memory:f.zarr")) == (
        "streamlsq: error: memory:f.zarr: not a URL, which is scheme://... (here "
        "memory://f.zarr); to write a local path of that name, write ./memory:f.zarr")
    assert snapshot(tmp_path) == before
    run = fit("./memory:f.zarr")
    assert run.exit_code == 0, run.output
    assert (tmp_path / "memory:f.zarr" / "zarr.json").is_file()
    (tmp_path / "memory:").mkdir()  # the remedy, as the line gives it
    for out in ("./memory:/f.zarr", "memory:/g.zarr"):
        run = fit(out)
        assert run.exit_code == 0, run.output
    assert sorted(p.name for p in (tmp_path / "memory:").iterdir()) == ["f.zarr", "g.zarr"]


# -- row 11: an interrupt raised where Python cannot propagate it -----------------------------

class _Interrupted:
    """Its ``__del__`` runs the command line's SIGTERM handler, as when the signal arrives
    while distributed's gc callback runs: the exception is unraisable."""

    def __del__(self):
        interrupt(signal.SIGTERM)


class _Failing:
    def __del__(self):
        raise ValueError("a failure of its own")


def test_a_noted_interrupt_raised_in_a_callback_prints_no_traceback(monkeypatch, capsys):
    """Round 15: ``Exception ignored in: <bound method GCDiagnosis._gc_callback ...>
    ... streamlsq.errors.Terminated`` before ``streamlsq: error: terminated``. The noted
    interrupt is dropped (and raised again by check_interrupted); any other unraisable goes
    to the hook there was, which is put back after the command."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    try:
        with _noting_interrupts():
            assert sys.unraisablehook is not seen.append
            _Failing()
            assert [type(u.exc_value) for u in seen] == [ValueError]
            _Interrupted()
            assert [type(u.exc_value) for u in seen] == [ValueError]  # dropped
            with pytest.raises(Terminated):
                check_interrupted()
        assert sys.unraisablehook == seen.append
        forget_interrupt()
        with _noting_interrupts():  # not noted: an interrupt is not the command's
            sys.unraisablehook(type("U", (), {"exc_value": KeyboardInterrupt()})())
        assert len(seen) == 2 and type(seen[1].exc_value) is KeyboardInterrupt
    finally:
        forget_interrupt()
    assert "Exception ignored" not in capsys.readouterr().err
