"""Tables as users keep them, and what goes wrong with them (docs/faults.md, "Tables"):
chunks of missing values alone, pandas categories in Parquet files, and files that cannot
be read as a table are each refused in one line (exit code 2) naming the file, column and
row, leaving nothing behind; what can be read fits as the same table in memory does
(statsmodels' ``ols`` is the reference)."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr

from streamlsq import InputError, convert, fit_stream

from faultkit import invoke, leftovers, refusal, snapshot


def _parquet(frame: pd.DataFrame, path, row_group_size: int) -> str:
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=row_group_size)
    return str(path)


def _by_label(ds) -> pd.Series:
    labels = ["Intercept" if v == "intercept" else str(v) for v in ds.feature.values]
    return pd.Series(ds.coef.values[-1, :, 0], index=labels)


def _frame(n: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    k = rng.choice(["b", "a", "c"], n)
    y = 1.0 + 2.0 * x + (k == "a") * 0.5 - (k == "c") * 0.7 + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"y": y, "x": x, "k": k})


# -- broken before: chunks of missing values alone, categories ----------------------------


def test_convert_writes_chunks_of_missing_values_and_its_store_checks_and_fits(
        tmp_path, client, cli):
    """An all-missing column and a row group whose column is all missing: zarr used to leave
    those chunks out (write_empty_chunks=False), and the fresh store was called damaged by
    its own info --check and refused by fit --missing drop."""
    import statsmodels.formula.api as smf

    frame = _frame()
    frame["w"] = np.random.default_rng(1).standard_normal(len(frame))
    frame.loc[40:79, "w"] = np.nan  # row group 1 of 3: missing entirely
    frame["z"] = np.nan  # missing everywhere
    table = _parquet(frame, tmp_path / "t.parquet", 40)
    store = tmp_path / "t.zarr"
    result = cli("convert", table, "--out", store)
    assert result.exit_code == 0, result.output
    for name in ("w", "z"):
        assert sorted(p.name for p in (store / name / "c").iterdir()) == ["0", "1", "2"]
    result = cli("info", store, "--check")
    assert result.exit_code == 0, result.output
    assert "missing values: w 40, z 120" in result.output
    formula = "y ~ x + w + C(k)"
    from_store = fit_stream(store, formula=formula, missing="drop", client=client,
                            progress=False)
    from_table = fit_stream(table, formula=formula, missing="drop", client=client,
                            progress=False)
    np.testing.assert_array_equal(from_store.coef.values, from_table.coef.values)
    reference = smf.ols(formula, data=frame).fit()
    coef = _by_label(from_store)
    np.testing.assert_allclose(coef[reference.params.index], reference.params, rtol=1e-10)
    assert int(from_store.nobs.values[0]) == int(reference.nobs) == 80


@pytest.fixture
def categories(tmp_path):
    """A frame whose k is a pandas category of levels in their own order (not sorted), and
    the same as a Parquet file of three row groups."""
    frame = _frame()
    frame["k"] = pd.Categorical(frame["k"], categories=["c", "a", "b"])
    return frame, _parquet(frame, tmp_path / "cat.parquet", 40)


def test_parquet_categories_fit_as_the_frame_in_memory_does(categories, tmp_path, client):
    """A Parquet column of pandas category type used to be refused by every formula fit
    ("the level 'a' ... the fit did not see (its levels: )"), and convert wrote
    ``categories: []``."""
    import statsmodels.formula.api as smf

    frame, table = categories
    formula = "y ~ x + C(k)"
    reference = smf.ols(formula, data=frame).fit()
    assert "C(k)[T.a]" in reference.params.index  # the category's own first level, c
    store = tmp_path / "cat.zarr"
    convert(table, store, client=client, progress=False)
    assert zarr.open_group(str(store), mode="r")["k"].attrs["categories"] == ["c", "a", "b"]
    fits = {kind: fit_stream(data, formula=formula, client=client, progress=False)
            for kind, data in (("frame", frame), ("parquet", table), ("store", str(store)))}
    for kind, ds in fits.items():
        coef = _by_label(ds)
        assert sorted(coef.index) == sorted(reference.params.index), kind
        np.testing.assert_allclose(coef[reference.params.index], reference.params,
                                   rtol=1e-10, err_msg=kind)


def test_a_parquet_category_without_pandas_levels_finds_them_by_a_pass(tmp_path, client):
    """A dictionary column written without pandas' metadata (no levels declared) and two
    files whose categories differ: the levels are found over the rows (sorted)."""
    import statsmodels.formula.api as smf

    frame = _frame()
    (tmp_path / "two").mkdir()
    for i, part in enumerate((frame.iloc[:60], frame.iloc[60:])):
        t = pa.Table.from_pandas(part.assign(k=part["k"].astype("category")),
                                 preserve_index=False)
        pq.write_table(t, tmp_path / "two" / f"p{i}.parquet", row_group_size=30)
    t = pa.table({"y": frame.y, "x": frame.x,
                  "k": pa.array(frame.k).dictionary_encode()})
    pq.write_table(t, tmp_path / "plain.parquet", row_group_size=50)
    reference = smf.ols("y ~ x + C(k)", data=frame).fit()
    for data in (tmp_path / "two", tmp_path / "plain.parquet"):
        ds = fit_stream(str(data), formula="y ~ x + C(k)", client=client, progress=False)
        coef = _by_label(ds)
        np.testing.assert_allclose(coef[reference.params.index], reference.params,
                                   rtol=1e-10, err_msg=str(data))


def test_a_store_grown_with_a_new_level_finds_its_levels_again(tmp_path, client):
    """Rows appended to a converted store with a level it never held: its ``categories``
    attribute is stale (it used to be trusted: "the fit did not see"); the levels are found
    by a pass, and the fit equals statsmodels' on all the rows."""
    import statsmodels.formula.api as smf

    frame = _frame(150)
    old, new = frame.iloc[:100], frame.iloc[100:].assign(k="d")
    store = tmp_path / "grown.zarr"
    convert(old, store, chunk_rows=50, client=client, progress=False)
    g = zarr.open_group(str(store), mode="r+")
    for name in ("y", "x", "k"):
        array = g[name]  # resized in place (the group's consolidated copy stays stale)
        array.resize((150,))
        array[100:] = new[name].to_numpy(dtype=object if name == "k" else np.float64)
    grown = pd.concat([old, new], ignore_index=True)
    ds = fit_stream(store, formula="y ~ x + C(k)", client=client, progress=False)
    reference = smf.ols("y ~ x + C(k)", data=grown).fit()
    np.testing.assert_allclose(_by_label(ds)[reference.params.index], reference.params,
                               rtol=1e-10)


# -- weak before: one line, exit code 2, nothing left ---------------------------------------


def _duplicate_names(root):
    t = pa.table([pa.array([1.0, 2.0, 3.0]), pa.array([1.0, 2.0, 4.0]),
                  pa.array([3.0, 4.0, 5.0])], names=["y", "x", "x"])
    pq.write_table(t, root / "d.parquet")
    return root / "d.parquet"


def _latin1(root):
    lines = [b"y,x,k"] + [f"{i},{i * i % 7},".encode() + b"caf\xe9" for i in range(20)]
    (root / "l.csv").write_bytes(b"\n".join(lines) + b"\n")
    return root / "l.csv"


def _header_only(root):
    (root / "h.csv").write_text("y,x\n")
    return root / "h.csv"


def _truncated_gz(root):
    data = gzip.compress(_frame(2000).to_csv(index=False).encode())
    (root / "t.csv.gz").write_bytes(data[: len(data) // 2])
    return root / "t.csv.gz"


def _text_in_one_file(root):
    (root / "fold").mkdir()
    frame = _frame(30)
    _parquet(frame, root / "fold" / "a.parquet", 30)
    _parquet(frame.assign(x=frame.x.astype(str)), root / "fold" / "b.parquet", 30)
    return root / "fold"


def _text_far_down(root):
    # dask infers the columns' dtypes from the first bytes: a value further down that is not
    # a number used to be "Mismatched dtypes" naming no row or column
    frame = pd.DataFrame({"y": np.arange(120_000.0), "x": np.arange(120_000.0)})
    frame["x"] = frame["x"].astype(object)
    frame.loc[110_017, "x"] = "n/a?"
    frame.to_csv(root / "m.csv", index=False)
    return root / "m.csv"


CASES = {
    "duplicate names": (_duplicate_names, r"d\.parquet: the column name 'x' appears 2 times"),
    "latin-1": (_latin1, r"l\.csv: cannot be read as CSV \(UnicodeDecodeError: byte 0xe9 is "
                         r"not UTF-8; .*iconv"),
    "header only": (_header_only, r"h\.csv: the table has no rows \(columns: y, x\)"),
    "truncated gz": (_truncated_gz, r"t\.csv\.gz: cannot be read as CSV \(EOFError: .*the "
                                    r"compressed file is truncated or corrupt"),
    "text in one file": (_text_in_one_file, r"fold/b\.parquet: column 'x' holds (str|object) "
                                            r"values where .*fold/a\.parquet holds float64"),
    # frame.loc[110_017]: the 110,018th data row, as a user counts them
    "text far down": (_text_far_down, r"m\.csv: column 'x' holds the value 'n/a\?' at row "
                                      r"110018 \(data rows counted from 1, the header not "
                                      r"counted\), where its first rows are float64 numbers; "
                                      r"correct the value"),
}


@pytest.mark.parametrize("command", ["convert", "fit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_table_that_cannot_be_read_is_one_line(tmp_path, client, case, command):
    make, message = CASES[case]
    table = make(tmp_path)
    before = snapshot(tmp_path)
    out = tmp_path / "out.zarr"
    args = ["convert", table, "--out", out] if command == "convert" else \
        ["fit", "kf4lls", table, "--out", out, "--formula", "y ~ x"]
    line = refusal(invoke(*args, scheduler=client.scheduler.address))
    assert re.search(message, line), line
    assert snapshot(tmp_path) == before and not out.exists() and not leftovers(out)


ODD_NAMES = {"..": "'..' name is not a path segment", "": "not a path segment",
             ".": "not a path segment", "a/b": "would nest it in a group of its own",
             "zarr.json": "the group's own metadata file", "__x": "reserved by Zarr",
             "c" * 300: "300 bytes, above the 255 of a file's name"}


@pytest.mark.parametrize("name", sorted(ODD_NAMES), ids=lambda n: repr(n[:12]))
def test_convert_refuses_a_column_name_a_store_cannot_hold(tmp_path, client, name):
    """Used to be "unexpected error" ('..', '', '.'), "File exists" naming the temporary
    (zarr.json), the temporary's path (300 characters) or a store where the column was
    nested out of sight (a/b)."""
    frame = _frame(20)
    frame[name] = 1.0
    table = _parquet(frame, tmp_path / "n.parquet", 10)
    before = snapshot(tmp_path)
    out = tmp_path / "n.zarr"
    line = refusal(invoke("convert", table, "--out", out, scheduler=client.scheduler.address))
    shown = repr(name[:60]) + ("…" if len(name) > 60 else "")
    assert f"n.parquet: column {shown} cannot be a variable of a Zarr store" in line, line
    assert ODD_NAMES[name] in line and "rename it, or leave it out (--columns)" in line
    assert snapshot(tmp_path) == before and not out.exists() and not leftovers(out)
    # left out, the other columns convert
    result = invoke("convert", table, "--out", out, "--columns", "y,x",
                    scheduler=client.scheduler.address)
    assert result.exit_code == 0, result.output
    assert sorted(zarr.open_group(str(out), mode="r").array_keys()) == ["x", "y"]


def test_group_labels_of_mixed_types_are_named(client):
    """Labels of Python objects mixing numbers and strings used to raise a raw TypeError
    from the sort of the groups."""
    frame = _frame(40)
    frame["g"] = pd.Series([1, "a"] * 20, dtype=object)
    with pytest.raises(InputError) as err:
        fit_stream(frame, x="x", y="y", groups="g", cov_type="cluster", client=client,
                   progress=False)
    assert str(err.value) == (
        "pandas DataFrame: variable 'g' chunk 0 has the group label 1 of type int at row 0 "
        "among labels of Python objects; the labels of one variable are all numbers or all "
        "strings: convert them (e.g. .astype(str))")
    # as strings they are groups
    ds = fit_stream(frame.assign(g=frame.g.astype(str)), x="x", y="y", groups="g",
                    cov_type="cluster", client=client, progress=False)
    assert np.isfinite(ds.bse.values).all()


def test_frames_of_no_rows_or_duplicate_names_are_refused(client):
    frame = _frame(30)
    with pytest.raises(InputError) as err:
        fit_stream(frame.iloc[:0], formula="y ~ x", client=client)
    assert str(err.value) == "pandas DataFrame: the table has no rows (columns: y, x, k)"
    twice = pd.concat([frame[["y", "x"]], frame[["x"]]], axis=1)
    with pytest.raises(InputError) as err:
        fit_stream(twice, x="x", y="y", client=client)
    assert str(err.value) == ("pandas DataFrame: the column name 'x' appears 2 times; the "
                              "columns of a table need distinct names")
