"""The weak cases of the seventh re-test around results, checkpoints and the options that name
columns: each had the right outcome in an unclear way. Each refusal is now one line, exit code
2 (InputError from Python), naming what is at fault, and the folder is left as it was found.

1. A formula fit whose attribute ``formula`` or ``formula_levels`` was edited passed
   ``info --check``; ``predict`` then blamed the new rows. The formula and levels are now
   checked against the labels of the coefficients (and the targets) the result holds.
2. ``predict --x/--y`` on a formula fit ignored them without a word.
3. ``--resume`` with another ``--formula`` went on when the run had committed nothing yet.
4. A fit refused while reading its rows left the ``--checkpoint`` folder it had created.
5. A column missing for ``--exposure`` (and the other options naming a column) was refused
   advising ``--x``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import test_retest_round5 as round5
import zarr
from test_retest_round5 import DAMAGED, _copy, _frame

import streamlsq
from streamlsq import InputError

from conftest import one_line
from faultkit import leftovers, snapshot

#: the fits of round 5's table (a formula fit, a Poisson GLM, new rows), its fixture
fitted = round5.fitted

# -- 1. a result's formula or levels edited ---------------------------------------------------

#: (result, attribute, edited value, what the formula and levels then make)
EDITS = [
    ("fit.zarr", "formula", "y ~ x1 + C(g)", "['Intercept', 'x1', 'C(g)[T.b]', 'C(g)[T.c]']"),
    ("fit.zarr", "formula", "y ~ x1 + x2 + C(g) + x1:x2",
     "['Intercept', 'x1', 'x2', 'C(g)[T.b]', 'C(g)[T.c]', 'x1:x2']"),
    ("fit.zarr", "formula", "y ~ x1 + x2 + C(g) - 1",
     "['x1', 'x2', 'C(g)[a]', 'C(g)[b]', 'C(g)[c]']"),
    ("fit.zarr", "formula_levels", {"g": ["a", "b", "d"]},
     "['Intercept', 'x1', 'x2', 'C(g)[T.b]', 'C(g)[T.d]']"),
    ("fit.zarr", "formula_levels", {"g": ["a", "b"]}, "['Intercept', 'x1', 'x2', 'C(g)[T.b]']"),
    ("fit.zarr", "formula_levels", {"g": ["b", "a", "c"]},
     "['Intercept', 'x1', 'x2', 'C(g)[T.a]', 'C(g)[T.c]']"),
    ("fit.zarr", "formula_levels", {"g": ["a", "c", "b"]},
     "['Intercept', 'x1', 'x2', 'C(g)[T.c]', 'C(g)[T.b]']"),
    ("glm.zarr", "formula", "k ~ x2 + C(g)", "['Intercept', 'x2', 'C(g)[T.b]', 'C(g)[T.c]']"),
    ("glm.zarr", "formula_levels", {"g": ["c", "b", "a"]},
     "['Intercept', 'x1', 'C(g)[T.b]', 'C(g)[T.a]']"),
]


@pytest.mark.parametrize(("result", "attribute", "value", "makes"), EDITS)
def test_a_results_formula_or_levels_edited_is_refused_naming_it(fitted, tmp_path, cli,
                                                                 result, attribute, value,
                                                                 makes):
    fit = _copy(fitted, tmp_path, result)
    g = zarr.open_group(str(fit), mode="r+")
    stored = [str(v) for v in g["feature"][...]]
    g.attrs[attribute] = value if isinstance(value, str) else json.dumps(value)
    shown = repr(value) if isinstance(value, str) else json.dumps(value)
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    for args in (("info", fit, "--check"), ("predict", fit, fitted / "new.csv", "--out", out)):
        line = one_line(cli(*args))
        assert (f"{fit}: its attribute {attribute} ({shown}) makes the columns {makes}, but "
                f"its coefficients are those of {stored}: the attribute was edited since the "
                f"fit; {DAMAGED}") in line, line
        assert "new.csv" not in line  # the result is blamed, not the rows
    with pytest.raises(InputError, match="its attribute .* was edited since the fit"):
        streamlsq.open_result(fit)
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_results_response_edited_or_levels_lost_is_refused(fitted, tmp_path, cli):
    fit = _copy(fitted, tmp_path, "fit.zarr")
    g = zarr.open_group(str(fit), mode="r+")
    g.attrs["formula"] = "x2 ~ x1 + x2 + C(g)"
    line = one_line(cli("info", fit, "--check"))
    assert (f"{fit}: its attribute formula ('x2 ~ x1 + x2 + C(g)') makes the response "
            f"['x2'], but its targets are ['y']: the attribute was edited since the fit; "
            f"{DAMAGED}") in line, line
    g.attrs["formula"] = "y ~ x1 + x2 + C(g)"
    g.attrs["formula_levels"] = "{}"
    line = one_line(cli("predict", fit, fitted / "new.csv", "--out", tmp_path / "p.zarr"))
    assert (f"{fit}: its attributes formula ('y ~ x1 + x2 + C(g)') and formula_levels ({{}}) "
            "make no design (the formula makes 'g' a category, whose levels it does not "
            f"list); {DAMAGED}") in line, line


def test_results_of_every_kind_of_formula_pass_their_check(tmp_path, cli, client):
    """The check builds the labels from the formula and the levels alone: a transform, an
    interaction, a column of text outside C(), numbers in C() and a Boolean give the labels
    of the fit (the fit passes info --check and predicts as statsmodels does)."""
    import statsmodels.formula.api as smf

    frame = _frame()
    frame["b"] = frame.x2 > 0
    frame["n"] = np.arange(len(frame)) % 3
    frame.to_parquet(tmp_path / "t.parquet")
    formula = "y ~ np.log(x1 + 10) + I(x2 ** 2) + g + x1:g + C(n) + b"
    fit = tmp_path / "fit.zarr"
    assert cli("fit", "kf4lls", tmp_path / "t.parquet", "--formula", formula, "--out",
               fit).exit_code == 0
    done = cli("info", fit, "--check")
    assert done.exit_code == 0, done.output
    out = tmp_path / "p.zarr"
    assert cli("predict", fit, tmp_path / "t.parquet", "--out", out).exit_code == 0
    reference = smf.ols(formula, frame).fit().predict(frame)
    np.testing.assert_allclose(streamlsq.open_result(out).yhat.values[:, 0], reference,
                               rtol=1e-8)


# -- 2. predict --x/--y with a formula fit ---------------------------------------------------


@pytest.mark.parametrize("result", ["fit.zarr", "glm.zarr"])
@pytest.mark.parametrize("option", ["--x", "--y"])
def test_predict_refuses_names_beside_a_fits_formula(fitted, tmp_path, cli, monkeypatch,
                                                     result, option):
    import streamlsq.cli.predict as command

    def no_cluster(*args, **kwargs):  # refused before any cluster starts
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(command, "_client", no_cluster)
    formula = zarr.open_group(str(fitted / result), mode="r").attrs["formula"]
    before = snapshot(fitted)
    out = tmp_path / "p.zarr"
    line = one_line(cli("predict", fitted / result, fitted / "new.csv", "--out", out, option,
                        "x1"))
    assert line == (f"streamlsq: error: {fitted / result}: a fit of the formula {formula!r}, "
                    "which builds the features and the targets from the columns of the new "
                    f"rows: leave out {option} ({option[2:]}=)"), line
    assert snapshot(fitted) == before and not out.exists() and leftovers(out) == []


def test_predict_from_python_refuses_names_beside_a_fits_formula(fitted, client):
    for call in (lambda: streamlsq.predict(fitted / "fit.zarr", fitted / "new.csv",
                                           x=["x1", "x2"], client=client),
                 lambda: streamlsq.predict_stream(fitted / "fit.zarr", fitted / "new.csv",
                                                  y="y", client=client),
                 lambda: streamlsq.predict(fitted / "glm.zarr", fitted / "new.csv",
                                           x=["x1"], y="k", client=client)):
        with pytest.raises(InputError, match=r"a fit of the formula .*: leave out --"):
            call()


def test_predict_reads_a_formula_fits_rows_along_the_sample_dim_given(client):
    """--sample-dim (sample_dim=) was ignored as --x was: the rows are now read along it."""
    import xarray as xr

    rng = np.random.default_rng(4)
    ds = xr.Dataset({"a": ("time", rng.normal(size=50)), "b": ("time", rng.normal(size=50)),
                     "z": ("other", rng.normal(size=7))})
    ds["y"] = 1 + ds.a - ds.b + 0.1 * rng.normal(size=50)
    for fit in (streamlsq.fit_stream(ds, "kf4lls", formula="y ~ a + b", sample_dim="time",
                                     client=client, progress=False),
                streamlsq.fit_glm(ds, formula="y ~ a + b", sample_dim="time",
                                  family="gaussian", client=client, progress=False)):
        default = streamlsq.predict(fit, ds, client=client)
        given = streamlsq.predict(fit, ds, sample_dim="time", client=client)
        np.testing.assert_array_equal(given.yhat.values, default.yhat.values)
        with pytest.raises(InputError) as err:
            streamlsq.predict(fit, ds, sample_dim="other", client=client)
        assert str(err.value) == ("xarray Dataset: column 'a' of the formula has dims "
                                  "('time',), expected ('other',): one value per row")


# -- 3. --resume with another formula -------------------------------------------------------


class _Stop(RuntimeError):
    """Raised in place of a kill before the run's first commit."""


def _big_frame(n=3_000, seed=2):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                          "g": rng.choice(["a", "b", "c"], n)})
    frame["y"] = 1 + frame.x1 - frame.x2 + (frame.g == "b") + rng.normal(size=n)
    frame["k"] = rng.poisson(np.exp(0.2 + 0.3 * frame.x1))
    return frame


@pytest.mark.parametrize("kind", ["fit", "glm"])
def test_resume_before_any_commit_checks_the_formula(tmp_path, cli, client, monkeypatch,
                                                     kind):
    import streamlsq.stream.fit as fit_module
    from streamlsq.io.checkpoint import Checkpoint, EntryCheckpoint

    _big_frame().to_parquet(tmp_path / "t.parquet", row_group_size=300)
    data, ckpt = tmp_path / "t.parquet", tmp_path / "ckpt"
    lhs = "y" if kind == "fit" else "k"
    first, other = f"{lhs} ~ x1 + C(g)", f"{lhs} ~ x2 + C(g)"
    kw = dict(checkpoint=ckpt, client=client, progress=False)
    if kind == "fit":
        kw.update(block_size=100, segment_bytes=2**12)

        def fit(formula, **more):
            return streamlsq.fit_stream(data, "kf4lls", formula=formula, **kw, **more)

        class Stopping(Checkpoint):
            def save(self, i, part):
                raise _Stop(f"stopped before segment {i}")

        with monkeypatch.context() as m:
            m.setattr(fit_module, "Checkpoint", Stopping)
            with pytest.raises(_Stop):
                fit(first)
    else:
        def fit(formula, **more):
            return streamlsq.fit_glm(data, formula=formula, family="poisson", **kw, **more)

        def stop(self, name, arrays):
            raise _Stop(f"stopped before the step {name}")

        with monkeypatch.context() as m:
            m.setattr(EntryCheckpoint, "save_step", stop)
            with pytest.raises(_Stop):
                fit(first)
    assert not (ckpt / "progress.json").exists()  # nothing committed
    before = snapshot(tmp_path)
    args = ("fit", "kf4lls", data, "--block-size", 100) if kind == "fit" else \
        ("fit", "glm", data, "--family", "poisson")
    out = tmp_path / "r.zarr"
    line = one_line(cli(*args, "--formula", other, "--out", out, "--checkpoint", ckpt,
                        "--resume"))
    # the options named with both values
    which = f"inputs (formula {first!r} then, {other!r} now)" if kind == "fit" else \
        f"--formula {first} then, {other} now"  # a GLM's options named as typed (round 11)
    assert line == (f"streamlsq: error: {ckpt}: checkpoint belongs to a different run (differs "
                    f"in: {which}); rerun without --resume or point --checkpoint elsewhere")
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # the same formula goes on, to the uninterrupted fit's result
    resumed = fit(first, resume=True)
    fresh = streamlsq.fit_stream(data, "kf4lls", formula=first, block_size=100, client=client,
                                 progress=False) if kind == "fit" else \
        streamlsq.fit_glm(data, formula=first, family="poisson", client=client, progress=False)
    np.testing.assert_allclose(resumed.coef.values, fresh.coef.values, rtol=1e-10)
    assert list(resumed.feature.values) == list(fresh.feature.values)


# -- 4. a refusal while reading leaves the checkpoint folder as it found it -----------------


@pytest.mark.parametrize("found", ["none", "empty"])
@pytest.mark.parametrize("case", ["glm-support", "glm-missing-column", "fit-nan",
                                  "fit-missing-weights"])
def test_a_refused_fit_leaves_its_checkpoint_folder_as_found(tmp_path, cli, found, case):
    frame = _frame()
    frame.loc[5, "x1"] = np.nan if case == "fit-nan" else frame.loc[5, "x1"]
    frame.to_parquet(tmp_path / "t.parquet")
    ckpt = tmp_path / "ckpt"
    if found == "empty":
        ckpt.mkdir()
    args, said = {
        "glm-support": (("glm", "--family", "poisson", "--formula", "y ~ x1"),
                        "is outside the support of the poisson family"),
        "glm-missing-column": (("glm", "--family", "poisson", "--formula", "k ~ x1",
                                "--exposure", "nope"), "variable 'nope' named by --exposure"),
        "fit-nan": (("kf4lls", "--formula", "y ~ x1"),
                    "the formula's design (a value missing in column 'x1') chunk 0 has NaN at "
                    "row 5"),
        "fit-missing-weights": (("kf4lls", "--formula", "y ~ x1", "--weights", "nope"),
                                "variable 'nope' named by --weights"),
    }[case]
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", args[0], tmp_path / "t.parquet", *args[1:], "--out", out,
                        "--checkpoint", ckpt))
    assert said in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_refusal_after_committed_work_keeps_the_checkpoint(tmp_path, cli):
    frame = _big_frame()
    frame.loc[2_500, "x1"] = np.nan
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=300)
    ckpt = tmp_path / "ckpt"
    line = one_line(cli("fit", "kf4lls", tmp_path / "t.parquet", "--formula", "y ~ x1",
                        "--block-size", 100, "--segment-size", 0.004, "--out",
                        tmp_path / "f.zarr", "--checkpoint", ckpt))
    assert "has NaN at row 2500" in line, line
    assert json.loads((ckpt / "progress.json").read_text())["next"] > 0  # kept to resume


# -- 5. the option that named a missing column ------------------------------------------------

GLM_OPTIONS = [("--exposure", "exposure"), ("--offset", "offset"),
               ("--freq-weights", "freq_weights"), ("--weights", "weights"),
               ("--groups", "groups")]


@pytest.mark.parametrize(("command", "flag", "keyword"),
                         [(("glm", "--family", "poisson", "--formula", "k ~ x1"), flag, key)
                          for flag, key in GLM_OPTIONS]
                         + [(("glm", "--family", "binomial", "--formula", "k ~ x1"), "--trials",
                             "trials")]
                         + [(("kf4lls", "--formula", "y ~ x1"), flag, key)
                            for flag, key in (("--weights", "weights"), ("--groups", "groups"))]
                         + [(("kf4lls", "--x", "x1", "--y", "y"), flag, key)
                            for flag, key in (("--weights", "weights"), ("--groups", "groups"))])
def test_a_missing_column_names_the_option_that_named_it(fitted, tmp_path, cli, command, flag,
                                                          keyword):
    extra = ("--cov-type", "cluster") if flag == "--groups" else ()
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", command[0], fitted / "t.parquet", *command[1:], flag, "nope",
                        *extra, "--out", out))
    assert line.endswith(f"t.parquet: variable 'nope' named by {flag} ({keyword}=) is missing "
                         "(found: ['g', 'k', 'x1', 'x2', 'y']); name one of the variables "
                         f"found with {flag}"), line
    assert "--x" not in line
    assert snapshot(tmp_path) == before and leftovers(out) == []


@pytest.mark.parametrize("option", ["exposure", "offset"])
def test_new_rows_without_the_fits_exposure_or_offset_are_refused_naming_it(tmp_path, cli,
                                                                             client, option):
    frame = _frame()
    frame["t"] = np.linspace(1, 2, len(frame))
    frame.to_parquet(tmp_path / "t.parquet")
    frame.drop(columns=["t"]).to_parquet(tmp_path / "new.parquet")
    fit = tmp_path / "glm.zarr"
    streamlsq.fit_glm(tmp_path / "t.parquet", formula="k ~ x1", family="poisson",
                      **{option: "t"}, out=fit, client=client, progress=False)
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    line = one_line(cli("predict", fit, tmp_path / "new.parquet", "--out", out))
    assert line.endswith(f"new.parquet: variable 't' named by the fit's --{option} is missing "
                         "(found: ['g', 'k', 'x1', 'x2', 'y']); "
                         f"{fit} was fitted with --{option} t: the new rows need that "
                         "variable too"), line
    assert "--x" not in line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- round 8: the labels of a fit of named variables edited -------------------------------------

@pytest.mark.parametrize("edit", ["labels", "x_variables"])
def test_a_variables_fit_whose_labels_or_x_variables_were_edited_is_refused(fitted, tmp_path,
                                                                            cli, edit):
    """Re-test round 8 (B2): a fit of --x x1,x2 whose coefficient labels were swapped passed
    info --check, and predict --x x2,x1 then applied each coefficient to the other column
    (exit 0, predictions off by up to 211 %). The labels are now checked against the
    attribute x_variables, as a formula fit's are against its formula."""
    fit = tmp_path / "fit.zarr"
    streamlsq.fit_stream(fitted / "t.parquet", x=["x1", "x2"], y="y", fit_intercept=True,
                         out=fit, progress=False)
    assert cli("info", "--check", fit).exit_code == 0  # as fitted: consistent
    g = zarr.open_group(str(fit), mode="r+")
    if edit == "labels":
        for name in ("feature", "feature2"):
            g[name][:] = np.array(["intercept", "x2", "x1"], dtype=g[name].dtype)
        said = "labelled ['x2', 'x1'], but its attribute x_variables says ['x1', 'x2']"
    else:
        g.attrs["x_variables"] = json.dumps(["x2", "x1"])
        said = "labelled ['x1', 'x2'], but its attribute x_variables says ['x2', 'x1']"
    zarr.consolidate_metadata(str(fit))
    before = snapshot(tmp_path)
    for args in (("info", "--check", fit),
                 ("predict", fit, fitted / "new.csv", "--x", "x2,x1", "--out",
                  tmp_path / "p.zarr")):
        line = one_line(cli(*args))
        assert f"{fit}: its coefficients are {said}: one of them was edited since the fit; " \
               "the result is damaged: compute it again" in line, line
    assert snapshot(tmp_path) == before
