"""Inputs the seventh re-test found refused in the wrong words (right outcome, unclear way):
numbers read as text (thousands separators in every row, one ``"1,234.5"`` at row 40, a text
value among numbers) were refused as a singular design or as a column of strings, naming no
row; a Parquet ``decimal128`` column (money, as databases and Spark write it) was taken for
text; and a Zarr v2 store whose arrays have no dimension names printed their shape where it
meant their dims. Each refusal is now one line naming the file, the column, the row (counted
from 1, as a user counts data rows) and the value, with the remedy, exit code 2 and the folder
as it was; a decimal column is read as float64 and fits as the same column of float64 does."""

from __future__ import annotations

import decimal
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
import xarray as xr
import zarr

from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot

ROW = "(data rows counted from 1, the header not counted)"
SEPARATORS = ("a number written with thousands separators")
CSV_REMEDY = ("write the numbers without separators (e.g. pandas.read_csv(path, "
              "thousands=',').to_csv(new_path, index=False))")
FORMULA_SIDE = "the column is text, which a formula reads as categories, though"


def _money(n=60, seed=7):
    """Amounts of tens of thousands with cents (as a money column holds), a second feature
    and a target of both."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x1": (20_000 + 1_000 * rng.normal(size=n)).round(2),
                          "x2": rng.normal(size=n)})
    frame["y"] = 1 + 0.001 * frame.x1 + 2 * frame.x2 + 0.1 * rng.normal(size=n)
    return frame


def _grouped(frame, rows=slice(None)):
    """The frame with x1 written with thousands separators in ``rows`` (text there)."""
    out = frame.copy()
    out["x1"] = out.x1.astype(object)
    out.loc[rows, "x1"] = [f"{v:,.2f}" for v in frame.x1[rows]]
    return out


def _ols(frame, formula="y ~ x1 + x2"):
    return smf.ols(formula, frame).fit().params.to_numpy()


def _final(out) -> np.ndarray:
    ds = xr.open_zarr(out)
    return ds.coef.values.reshape(-1, ds.feature.size)[-1]


COMMANDS = {
    "x": ("fit", "kf4lls", "--x", "x1,x2", "--y", "y"),
    "formula": ("fit", "kf4lls", "--formula", "y ~ x1 + x2"),
    "glm": ("fit", "glm", "--family", "gaussian", "--formula", "y ~ x1 + x2"),
    "convert": ("convert",),
}


def _run(cli, use, data, out):
    command = COMMANDS[use]
    return one_line(cli(*command[:2], data, *command[2:], "--out", out) if use != "convert"
                    else cli("convert", data, "--out", out))


# -- 1 (a), (b): numbers written with thousands separators --------------------------------------


@pytest.mark.parametrize("use", sorted(COMMANDS))
@pytest.mark.parametrize("case", ["every row", "row 40"])
def test_numbers_with_thousands_separators_are_named_by_row_and_value(tmp_path, cli, use,
                                                                      case):
    # used to be refused as "holds string values, not numbers" (--x), as a singular design
    # (a formula took the column as 60 levels), or converted to a store of text
    frame = _money()
    rows = slice(None) if case == "every row" else [39]
    text = _grouped(frame, rows)
    text.to_csv(tmp_path / "t.csv", index=False)
    assert ('"20,' in (tmp_path / "t.csv").read_text()) == (case == "every row")
    first = 0 if case == "every row" else 39
    value = f"{frame.x1[first]:,.2f}"
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = _run(cli, use, tmp_path / "t.csv", out)
    said = f"t.csv: column 'x1' holds the value {value!r} at row {first + 1} {ROW}, {SEPARATORS}"
    assert said in line, line
    assert CSV_REMEDY in line, line
    if use in ("formula", "glm"):
        assert (f"{FORMULA_SIDE} all 60 of its distinct values are numbers; {CSV_REMEDY}, or "
                "write C(x1) in the formula to take the values as categories") in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # written as the remedy says, the table fits as statsmodels does
    pd.read_csv(tmp_path / "t.csv", thousands=",").to_csv(tmp_path / "r.csv", index=False)
    if use == "formula":
        assert cli(*COMMANDS[use][:2], tmp_path / "r.csv", *COMMANDS[use][2:], "--out",
                   out).exit_code == 0
        np.testing.assert_allclose(_final(out), _ols(frame), rtol=1e-8)


def test_a_csv_glob_names_the_file_and_its_row(tmp_path, cli):
    # the value in the second file (beyond dask's sample: dask's "Mismatched dtypes"; the row
    # used to be counted from 0 over the table) and in the first (the column read as text)
    frame = _money()
    (tmp_path / "in").mkdir()
    frame.iloc[:30].to_csv(tmp_path / "in" / "p0.csv", index=False)
    _grouped(frame, [39]).iloc[30:].to_csv(tmp_path / "in" / "p1.csv", index=False)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    value = f"{frame.x1[39]:,.2f}"
    for use in ("x", "formula", "convert"):
        line = _run(cli, use, tmp_path / "in" / "*.csv", out)
        assert (f"in/p1.csv: column 'x1' holds the value {value!r} at row 10 of the file (data "
                "rows counted from 1, the header not counted; row 40 of the table), where its "
                f"first rows are float64 numbers; {CSV_REMEDY}, or leave the column out"
                ) in line, line
    # the text in the first file: the column is text in every file
    _grouped(frame, [9]).iloc[:30].to_csv(tmp_path / "in" / "p0.csv", index=False)
    frame.iloc[30:].to_csv(tmp_path / "in" / "p1.csv", index=False)
    before = snapshot(tmp_path)
    value = f"{frame.x1[9]:,.2f}"
    for use in ("x", "formula", "convert"):
        line = _run(cli, use, tmp_path / "in" / "*.csv", out)
        assert (f"in/p0.csv: column 'x1' holds the value {value!r} at row 10 of the file (data "
                "rows counted from 1, the header not counted; row 10 of the table), "
                f"{SEPARATORS}") in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_parquet_folder_with_separators_in_one_file_names_its_row(tmp_path, cli):
    # used to name only the types: "holds str values where .../a.parquet holds float64"
    frame = _money()
    (tmp_path / "fold").mkdir()
    frame.iloc[:30].to_parquet(tmp_path / "fold" / "a.parquet")
    _grouped(frame).iloc[30:].to_parquet(tmp_path / "fold" / "b.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    value = f"{frame.x1[30]:,.2f}"
    for use in ("x", "formula", "convert"):
        line = _run(cli, use, tmp_path / "fold", out)
        assert (f"fold/b.parquet: column 'x1' holds the value {value!r} at row 1 of the file "
                f"(counted from 1), {SEPARATORS}, where ") in line, line
        assert ("fold/a.parquet holds float64 numbers; the files of one table hold numbers in "
                "the same columns: write the numbers without separators (e.g. pandas' "
                "column.str.replace(',', '').astype(float)) and rewrite the file") in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- the rule of a formula: text that is mostly numbers ------------------------------------------


def test_a_text_value_among_numbers_is_named_and_the_store_of_it_too(tmp_path, cli):
    # 'n/a?' at row 40, inside dask's sample: the column is text; a formula made 60 levels
    # of it (singular), --x said only "holds string values"
    frame = _money()
    text = frame.copy()
    text["x1"] = text.x1.astype(object)
    text.loc[39, "x1"] = "n/a?"
    text.to_csv(tmp_path / "t.csv", index=False)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = _run(cli, "x", tmp_path / "t.csv", out)
    assert line.endswith(f"t.csv: column 'x1' holds the value 'n/a?' at row 40 {ROW}, which "
                         "is not a number, where the rows before it hold numbers; correct the "
                         "value (or leave it empty: a missing value), or leave the column out")
    line = _run(cli, "formula", tmp_path / "t.csv", out)
    assert line.endswith(f"t.csv: column 'x1' holds the value 'n/a?' at row 40 {ROW}, which "
                         f"is not a number: {FORMULA_SIDE} 59 of its 60 distinct values are "
                         "numbers; correct the value (or leave it empty: a missing value), or "
                         "write C(x1) in the formula to take the values as categories"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # convert keeps text as text (it may be codes); a formula fit of the store names it
    assert cli("convert", tmp_path / "t.csv", "--out", tmp_path / "s.zarr").exit_code == 0
    before = snapshot(tmp_path)
    line = _run(cli, "formula", tmp_path / "s.zarr", out)
    assert "s.zarr: variable 'x1' holds the value 'n/a?' at row 40 (counted from 1), which is " \
           "not a number" in line, line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_codes_that_are_mostly_numbers_take_c_to_be_categories(tmp_path, cli):
    # a grade of '1'..'12' and 'K' (text in Parquet): mostly numbers, so ambiguous; refused
    # bare, naming C(); in C() it fits as statsmodels' C(grade) does
    frame = _money()
    frame["grade"] = (["K"] + [str(i) for i in range(1, 13)]) * 4 + ["K"] * 8
    frame["y"] += frame.grade.map(lambda g: 0.0 if g == "K" else float(g) / 10)
    frame.to_parquet(tmp_path / "t.parquet")
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", tmp_path / "t.parquet", "--formula",
                        "y ~ x2 + grade", "--out", out))
    assert line.endswith("t.parquet: column 'grade' holds the value 'K' at row 1 (counted from "
                         f"1), which is not a number: {FORMULA_SIDE} 12 of its 13 distinct "
                         "values are numbers; correct the value (or leave it empty: a missing "
                         "value), or write C(grade) in the formula to take the values as "
                         "categories"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    assert cli("fit", "kf4lls", tmp_path / "t.parquet", "--formula", "y ~ x2 + C(grade)",
               "--out", out).exit_code == 0
    ref = smf.ols("y ~ x2 + C(grade)", frame).fit().params  # patsy orders the terms its way
    ds = xr.open_zarr(out)
    coef = dict(zip([str(f).lower() for f in ds.feature.values], _final(out), strict=True))
    assert sorted(coef) == sorted(name.lower() for name in ref.index)
    np.testing.assert_allclose([coef[name.lower()] for name in ref.index], ref.to_numpy(),
                               rtol=1e-8)


def test_a_frame_of_decimal_objects_beside_text_names_the_text(tmp_path):
    # pandas reads a database's NUMERIC column as Decimal objects, which are read as numbers
    # (test_retest_round8_io.py); a column mixing them with text names the text
    import streamlsq

    frame = _money()
    frame["x1"] = [decimal.Decimal(f"{v:.2f}") for v in frame.x1]
    frame.loc[5, "x1"] = "n/a"
    with pytest.raises(InputError) as caught:
        streamlsq.fit_stream(frame, x=["x1", "x2"], y="y", out=tmp_path / "f.zarr",
                             progress=False)
    assert str(caught.value) == (
        "pandas DataFrame: column 'x1' holds the value 'n/a' at row 6 (counted from 1: "
        "iloc[5]), which is not a number, where the rows before it hold numbers; correct the "
        "value (or leave it empty: a missing value), or leave the column out")
    assert os.listdir(tmp_path) == []


# -- 1 (c): decimal columns are numbers ---------------------------------------------------------


def _decimal_table(frame):
    return pa.table({"x1": pa.array([decimal.Decimal(f"{v:.2f}") for v in frame.x1],
                                    pa.decimal128(10, 2)),
                     "x2": frame.x2, "y": frame.y})


@pytest.mark.parametrize("use", ["x", "formula", "glm"])
def test_a_decimal_column_fits_as_its_float64_column(tmp_path, cli, use):
    # used to be read as Decimal objects: "holds object values, not numbers", or a singular
    # design (a formula took each amount for a level)
    frame = _money()
    pq.write_table(_decimal_table(frame), tmp_path / "d.parquet")
    frame.to_parquet(tmp_path / "f.parquet")
    for fold in ("fold", "ffold"):  # decimal in one file of a folder only; float64 in both
        (tmp_path / fold).mkdir()
        frame.iloc[:30].to_parquet(tmp_path / fold / "a.parquet")
    pq.write_table(_decimal_table(frame).slice(30), tmp_path / "fold" / "b.parquet")
    frame.iloc[30:].to_parquet(tmp_path / "ffold" / "b.parquet")
    command = COMMANDS[use]
    extra = ("--intercept",) if use == "x" else ()
    fits = {}
    for name in ("d.parquet", "f.parquet", "fold", "ffold"):
        out = tmp_path / f"{name}.zarr"
        result = cli(*command[:2], tmp_path / name, *command[2:], *extra, "--out", out)
        assert result.exit_code == 0, result.output
        fits[name] = _final(out)
    # the amounts are read as the doubles nearest them, as float64 holds them: the same fit
    np.testing.assert_array_equal(fits["d.parquet"], fits["f.parquet"])
    np.testing.assert_array_equal(fits["fold"], fits["ffold"])
    np.testing.assert_allclose(fits["d.parquet"], _ols(frame), rtol=1e-8)


def test_a_decimal_column_converts_to_float64(tmp_path, cli):
    frame = _money()
    pq.write_table(_decimal_table(frame), tmp_path / "d.parquet")
    assert cli("convert", tmp_path / "d.parquet", "--out", tmp_path / "s.zarr").exit_code == 0
    ds = xr.open_zarr(tmp_path / "s.zarr")
    assert ds.x1.dtype == np.float64 and "categories" not in ds.x1.attrs
    # each value the double nearest the decimal (Arrow's own cast is not correctly rounded)
    np.testing.assert_array_equal(ds.x1.values, frame.x1.to_numpy())
    assert (pq.read_table(tmp_path / "d.parquet").column("x1").cast(pa.float64()).to_numpy()
            != frame.x1.to_numpy()).any()


# -- 2: Zarr v2 arrays without dimension names ---------------------------------------------------


def _v2_store(path, X, y):
    """A stream store as zarr-python writes it in Zarr v2 without xarray: no
    _ARRAY_DIMENSIONS."""
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    g.create_array("X", shape=X.shape, chunks=(20, X.shape[1]), dtype="f8")[:] = X
    g.create_array("y", shape=y.shape, chunks=(20,), dtype="f8")[:] = y


@pytest.mark.parametrize("args", [(), ("--x", "X", "--y", "y"),
                                  ("--x", "X", "--y", "y", "--sample-dim", "time")])
def test_a_zarr_v2_store_without_dimension_names_says_so(tmp_path, cli, args):
    # used to print the shape where it meant the dims: "variable 'X' has dims (60, 3),
    # expected ('sample', 'feature')"
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.normal(size=60)
    _v2_store(tmp_path / "v2.zarr", X, y)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", tmp_path / "v2.zarr", *args, "--out", out))
    dim = "time" if "--sample-dim" in args else "sample"
    assert line.endswith(
        "v2.zarr: variable 'X' (shape (60, 3)) has no dimension names: a Zarr v2 array "
        "without the attribute _ARRAY_DIMENSIONS, where xarray keeps them; name them, e.g. "
        f"zarr.open_group('{tmp_path / 'v2.zarr'}', mode='r+')['X'].attrs['_ARRAY_DIMENSIONS']"
        f" = ['{dim}', 'feature'], or write the store with xarray's to_zarr"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # named as the line says, the store fits as statsmodels' OLS
    g = zarr.open_group(str(tmp_path / "v2.zarr"), mode="r+")
    g["X"].attrs["_ARRAY_DIMENSIONS"] = [dim, "feature"]
    g["y"].attrs["_ARRAY_DIMENSIONS"] = [dim]
    assert cli("fit", "kf4lls", tmp_path / "v2.zarr", *args, "--out", out).exit_code == 0
    np.testing.assert_allclose(_final(out), sm.OLS(y, X).fit().params, rtol=1e-9)


def test_a_zarr_v3_array_without_dimension_names_says_so(tmp_path, cli):
    g = zarr.open_group(str(tmp_path / "v3.zarr"), mode="w", zarr_format=3)
    g.create_array("X", shape=(40, 2), chunks=(20, 2), dtype="f8")[:] = np.ones((40, 2))
    g.create_array("y", shape=(40,), chunks=(20,), dtype="f8",
                   dimension_names=["sample"])[:] = np.ones(40)
    before = snapshot(tmp_path)
    out = tmp_path / "f.zarr"
    line = one_line(cli("fit", "kf4lls", tmp_path / "v3.zarr", "--out", out))
    assert line.endswith("v3.zarr: variable 'X' (shape (40, 2)) has no dimension names: write "
                         "the array with them, e.g. zarr's create_array(..., dimension_names="
                         "['sample', 'feature']), or the store with xarray's to_zarr"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_multi_task_v2_store_without_dimension_names_says_so(tmp_path):
    from streamlsq.io.tasks import open_tasks

    g = zarr.open_group(str(tmp_path / "m.zarr"), mode="w", zarr_format=2)
    g.create_array("X", shape=(40, 2), chunks=(20, 2), dtype="f8")[:] = np.ones((40, 2))
    g.create_array("y", shape=(40,), chunks=(20,), dtype="f8")[:] = np.ones(40)
    g.create_array("task_ptr", shape=(3,), chunks=(3,), dtype="i8")[:] = [0, 20, 40]
    with pytest.raises(InputError, match=r"m\.zarr: variable 'X' \(shape \(40, 2\)\) has no "
                                         r"dimension names: a Zarr v2 array without the "
                                         r"attribute _ARRAY_DIMENSIONS.*\['row', 'feature'\]"):
        open_tasks(str(tmp_path / "m.zarr"))
