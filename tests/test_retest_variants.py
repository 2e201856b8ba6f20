"""Variants of the table, formula and result faults that the earlier tests did not try: a
Dataset's string variable in a formula, a CSV text column whose first rows are missing, a CSV
header naming a column twice, a result's record of its inputs and a converted store's levels
edited by hand, a non-finite value of a formula's column. Each refusal is one line, exit code 2,
and leaves the folder as it was; each fit equals statsmodels'."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
import xarray as xr
import zarr

import streamlsq
from streamlsq import InputError

from conftest import one_line
from faultkit import leftovers, snapshot


def _frame(n=60, seed=5):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                          "g": rng.choice(["a", "b", "c"], n)})
    frame["y"] = 1 + 2 * frame.x1 - frame.x2 + (frame.g == "b") + 0.1 * rng.normal(size=n)
    return frame


def _same_as_statsmodels(fit, formula: str, frame) -> None:
    """The last step's coefficients of ``fit`` (a result or its path) equal statsmodels'
    ``ols`` on ``frame``, label by label."""
    fit = streamlsq.open_result(fit) if not isinstance(fit, xr.Dataset) else fit
    coef = fit.coef.isel(step=-1, target=0)
    got = pd.Series(np.asarray(coef.values), index=[str(v) for v in coef.feature.values])
    expected = smf.ols(formula, frame).fit().params
    assert sorted(got.index) == sorted(expected.index)
    np.testing.assert_allclose(got[expected.index].to_numpy(), expected.to_numpy(),
                               rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, client):
    """A formula fit of a table with a category, published by the command line's code."""
    root = tmp_path_factory.mktemp("fitted")
    frame = _frame()
    frame.to_parquet(root / "t.parquet", row_group_size=20)
    frame.drop(columns="y").to_csv(root / "new.csv", index=False)
    streamlsq.fit_stream(root / "t.parquet", formula="y ~ x1 + x2 + C(g)",
                         out=root / "fit.zarr", client=client, progress=False)
    return root


def test_a_datasets_string_variable_enters_a_formula_as_statsmodels_reads_it(client):
    # a NumPy '<U1' variable reaches the formula as a pandas string dtype (pandas 3), which is
    # no NumPy dtype: the fit used to raise a raw TypeError ("Cannot interpret
    # '<StringDtype(na_value=nan)>' as a data type")
    frame = _frame()
    ds = xr.Dataset({name: ("row", frame[name].to_numpy(dtype=str if name == "g" else float))
                     for name in frame})
    assert ds.g.dtype.kind == "U"
    fit = streamlsq.fit_stream(ds, formula="y ~ x1 + x2 + C(g)", client=client,
                               progress=False)
    _same_as_statsmodels(fit, "y ~ x1 + x2 + C(g)", frame)


def test_converting_a_dataset_names_it_by_its_type_in_one_line(tmp_path, client):
    ds = xr.Dataset({"x": ("row", np.arange(5.0))})
    with pytest.raises(InputError) as err:
        streamlsq.convert(ds, tmp_path / "c.zarr", client=client)
    message = str(err.value)
    assert message.startswith("a xarray Dataset: not a table") and len(message) < 250, message
    assert "\n" not in message and list(tmp_path.iterdir()) == []


def test_a_csv_text_column_whose_first_rows_are_missing_fits_as_statsmodels(tmp_path, cli):
    # dask infers a CSV column's dtype from its first 10 rows: a category missing there was
    # read as numbers and its first level refused ("holds the value 'b' at row 20 ..., where
    # its first rows are float64 numbers; correct the value")
    frame = _frame()
    frame.loc[:19, "g"] = None
    frame.to_csv(tmp_path / "c.csv", index=False)
    r = cli("fit", "kf4lls", tmp_path / "c.csv", "--out", tmp_path / "f.zarr",
            "--formula", "y ~ x1 + x2 + C(g)", "--missing", "drop")
    assert r.exit_code == 0, r.output
    _same_as_statsmodels(tmp_path / "f.zarr", "y ~ x1 + x2 + C(g)", frame)


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path, cli):
    # pandas renames the second 'x' to 'x.1': --x x used to fit the first without a word
    (tmp_path / "d.csv").write_text("y,x,x\n1,2,3\n4,5,7\n3,1,1\n")
    before = snapshot(tmp_path)
    for args in (("fit", "kf4lls", tmp_path / "d.csv", "--out", tmp_path / "f.zarr",
                  "--x", "x", "--y", "y"),
                 ("convert", tmp_path / "d.csv", "--out", tmp_path / "s.zarr")):
        line = one_line(cli(*args))
        assert line.startswith("streamlsq: error: ") and line.endswith(
            "d.csv: the column name 'x' appears 2 times in the header; the columns of a table "
            "need distinct names"), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("attr, value, said", [
    ("formula_levels", "not json", "its attribute formula_levels is not JSON: Expecting value"),
    ("formula_levels", '{"g": [1, [2]]}',
     "its attribute formula_levels is not an object of lists of levels"),
    ("x_variables", "[", "its attribute x_variables is not JSON"),
    ("parameters", "[1,2", "its attribute parameters is not JSON"),
])
def test_a_results_record_edited_by_hand_is_refused_by_predict_and_info_check(
        fitted, tmp_path, cli, attr, value, said):
    # each used to be "unexpected error (JSONDecodeError ...)", exit 1, in predict (or a
    # refusal blaming the new rows' levels), while info --check called the result sound
    fit = tmp_path / "fit.zarr"
    shutil.copytree(fitted / "fit.zarr", fit)
    zarr.open_group(str(fit), mode="r+").attrs[attr] = value
    before = snapshot(tmp_path)
    out = tmp_path / "p.zarr"
    for args in (("predict", fit, fitted / "new.csv", "--out", out), ("info", fit, "--check")):
        line = one_line(cli(*args))
        assert f"fit.zarr: {said}" in line and line.endswith(
            "the result is damaged: compute it again"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


@pytest.fixture(scope="module")
def converted(tmp_path_factory, client):
    """``_frame()`` converted to a store."""
    store = tmp_path_factory.mktemp("converted") / "s.zarr"
    streamlsq.convert(_frame(), store, client=client)
    return store


@pytest.mark.parametrize("categories, rows", [
    ("not a list", None), (["a", "b", "c", "a"], None), (["a", "b", {"x": 1}], None),
    (["a", "b", "c"], "60"),
])
def test_a_stores_levels_edited_by_hand_are_refused_naming_the_attribute(
        converted, tmp_path, cli, categories, rows):
    # a string was read as its letters (the fit "did not see" 'b'); duplicated levels and a
    # dict were "unexpected error (ValueError/TypeError ...)", exit 1
    store = tmp_path / "s.zarr"
    shutil.copytree(converted, store)
    g = zarr.open_group(str(store), mode="r+")["g"]
    g.attrs["categories"] = categories
    if rows is not None:
        g.attrs["categories_rows"] = rows
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", store, "--out", out, "--formula", "y ~ x1 + C(g)"))
    bad = "categories" if rows is None else "categories_rows"
    assert f"s.zarr: variable 'g': its attribute {bad} (" in line and line.endswith(
        "is not what streamlsq convert writes (a list of distinct levels, the rows they were "
        "found over); the store is damaged: remove the attribute (the levels are then found "
        "by a pass over the rows) or convert the table again"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_stores_levels_removed_are_found_by_a_pass(converted, tmp_path, client):
    # the remedy the refusal above gives: without the attribute, the fit equals statsmodels'
    frame = _frame()
    store = tmp_path / "s.zarr"
    shutil.copytree(converted, store)
    g = zarr.open_group(str(store), mode="r+")["g"]
    del g.attrs["categories"]
    fit = streamlsq.fit_stream(store, formula="y ~ x1 + C(g)", client=client, progress=False)
    _same_as_statsmodels(fit, "y ~ x1 + C(g)", frame)


def test_a_non_finite_value_of_a_formula_names_its_column(tmp_path, cli):
    # used to be "variable 'design' chunk 0 has NaN at row 1", a variable the user never named
    frame = _frame()
    frame.loc[7, "x2"] = np.nan
    frame.to_parquet(tmp_path / "m.parquet", row_group_size=20)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    x1 = frame.x1.to_numpy()
    line = one_line(cli("fit", "kf4lls", tmp_path / "m.parquet", "--out", out,
                        "--formula", "y ~ x2 + np.log(x1)"))
    first = int(np.flatnonzero(x1 <= 0)[0])
    assert line.endswith(f"m.parquet: the column 'np.log(x1)' of the formula's design chunk "
                         f"{first // 20} has NaN at row {first}; remove or impute non-finite "
                         "values, or drop their rows with --missing drop "
                         '(missing="drop")'), line
    line = one_line(cli("fit", "kf4lls", tmp_path / "m.parquet", "--out", out,
                        "--formula", "y ~ x1 + x2"))
    assert line.endswith("m.parquet: the formula's design (a value missing in column "
                         "'x2') chunk 0 has NaN at row 7; remove or impute "
                         "non-finite values, or drop their rows with --missing drop "
                         '(missing="drop")'), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_info_of_a_table_says_it_is_a_table(fitted, tmp_path, cli):
    # used to be "not a readable Zarr group (No group found in store ...)"
    frame = _frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    before = snapshot(tmp_path)
    for table in (fitted / "t.parquet", tmp_path / "t.csv"):
        line = one_line(cli("info", table, "--check"))
        assert line.endswith(f"{table}: a table (Parquet or CSV), not a Zarr store: info "
                             "describes stores and results; a fit reads the table as it is, "
                             "and 'streamlsq convert' writes it as a store that info --check "
                             "reads"), line
    assert snapshot(tmp_path) == before


def test_convert_with_no_column_named_is_one_line(fitted, tmp_path, cli):
    # --columns "" used to be "unexpected error (IndexError ...)", exit 1
    out = tmp_path / "s.zarr"
    for given in ("", ","):
        line = one_line(cli("convert", fitted / "t.parquet", "--out", out,
                            "--columns", given))
        assert line.endswith("t.parquet: --columns names no column (found: ['g', 'x1', 'x2', "
                             "'y'])"), line
    assert list(tmp_path.iterdir()) == [] and leftovers(out) == []


@pytest.mark.parametrize("categories, said", [
    ("not a list", "variable 'g': its attribute categories ('not a list') is not what "
                   "streamlsq convert writes"),
    (["a", "c"], "variable 'g' has the level 'b' at row "),
])
def test_info_check_refuses_a_stores_levels_edited_by_hand(converted, tmp_path, cli,
                                                           categories, said):
    # info --check used to call such a store sound ("every chunk of every column written and
    # readable") while its fits were refused or read the string's letters as levels
    store = tmp_path / "s.zarr"
    shutil.copytree(converted, store)
    zarr.open_group(str(store), mode="r+")["g"].attrs["categories"] = categories
    before = snapshot(tmp_path)
    line = one_line(cli("info", store, "--check"))
    assert f"s.zarr: {said}" in line and line.endswith(
        "the store is damaged: remove the attribute (the levels are then found by a pass over "
        "the rows) or convert the table again"), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("planted", ["file", "link", "marker link"])
def test_a_users_file_named_as_a_checkpoint_file_is_never_removed(fitted, tmp_path, cli,
                                                                  planted):
    # a folder holding only a user's progress.json (or a link of that name) was taken for an
    # earlier version's checkpoint: the fit ran and removed the file with the checkpoint
    folder, mine = tmp_path / "ck", tmp_path / "mine.txt"
    folder.mkdir()
    mine.write_text("precious")
    if planted == "file":
        (folder / "progress.json").write_text("my notes, not streamlsq's")
        name = "progress.json"
    else:
        name = "progress.json" if planted == "link" else "streamlsq-checkpoint.json"
        (folder / name).symlink_to(mine)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    for resume in ((), ("--resume",)):
        line = one_line(cli("fit", "kf4lls", fitted / "t.parquet", "--out", out,
                            "--formula", "y ~ x1", "--checkpoint", folder, *resume))
        assert line.endswith(f"{folder}: not a streamlsq checkpoint (it holds {name}); "
                             "streamlsq uses only a new or empty folder for --checkpoint: "
                             "choose another"), line
    assert snapshot(tmp_path) == before and mine.read_text() == "precious"


def test_resume_refuses_a_csv_table_replaced_with_the_same_size_and_time(
        tmp_path, client, cli, stop_after_commits):
    # the variant of a Parquet file replaced under a checkpoint: CSV files by a glob, read
    # through a formula with a category, the first file replaced by one of as many bytes and
    # the same modification time
    import os

    def write(path, seed):
        rng = np.random.default_rng(seed)
        frame = pd.DataFrame({"a": rng.uniform(1, 2, 500), "g": rng.choice(["p", "q"], 500)})
        frame["y"] = frame.a + (frame.g == "q")
        frame.to_csv(path, index=False, float_format="%.6f")

    for i in range(4):
        write(tmp_path / f"t-{i}.csv", i)
    first = tmp_path / "t-0.csv"
    table = str(tmp_path / "t-*.csv")
    ckpt, out = tmp_path / "ckpt", tmp_path / "fit.zarr"
    options = dict(formula="y ~ a + C(g)", block_size=250, segment_bytes=500 * 32,
                   client=client, progress=False)
    with stop_after_commits(2):
        streamlsq.fit_stream(table, "kf4lls", checkpoint=ckpt, **options)
    before = os.stat(first)
    write(tmp_path / "other.csv", 9)
    assert os.stat(tmp_path / "other.csv").st_size == before.st_size
    os.replace(tmp_path / "other.csv", first)
    os.utime(first, ns=(before.st_atime_ns, before.st_mtime_ns))
    files = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", table, "--formula", "y ~ a + C(g)", "--out", out,
                        "--checkpoint", ckpt, "--resume", "--block-size", 250,
                        "--segment-size", f"{500 * 32 / 2**20}"))
    assert "changed since the checkpoint" in line, line
    assert "resuming would mix two datasets: rerun without --resume" in line
    files.pop("ckpt/lock")  # the lock's description names the last run that took it
    after = snapshot(tmp_path)
    assert after.pop("ckpt/lock")[0] == "file"
    assert after == files and not out.exists() and leftovers(out) == []


@pytest.mark.parametrize("table", ["s3://streamlsq-none/t.csv", "s3://streamlsq-none/t.parquet"])
def test_a_table_url_without_credentials_is_one_line(tmp_path, cli, monkeypatch, table):
    # used to be "unexpected error (NoCredentialsError: Unable to locate credentials)", exit 1
    pytest.importorskip("s3fs")
    for name in list(__import__("os").environ):
        if name.startswith(("AWS_", "FSSPEC_S3")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", table, "--formula", "y ~ x1", "--out", out))
    assert line.endswith(f"{table}: cannot be reached (NoCredentialsError: Unable to locate "
                         "credentials); check the URL, the credentials and the storage "
                         "options"), line
    assert list(tmp_path.iterdir()) == [] and leftovers(out) == []


@pytest.mark.parametrize("option", ["--out", "--checkpoint"])
def test_an_empty_output_path_is_refused_as_empty(fitted, tmp_path, cli, option):
    # --out "" used to be read as the current folder: "--out /cwd contains the input store"
    args = {"--out": tmp_path / "f.zarr", "--checkpoint": None, option: ""}
    given = [a for key, value in args.items() if value is not None for a in (key, value)]
    before = snapshot(fitted)
    line = one_line(cli("fit", "kf4lls", fitted / "t.parquet", "--formula", "y ~ x1", *given))
    assert line.endswith(f"{option} is empty: name the path to write"), line
    assert snapshot(fitted) == before and list(tmp_path.iterdir()) == []
