"""Messages that said the wrong thing (docs/faults.md): ``predict`` refusing a NaN in the new
rows advised ``--missing drop``, an option it lacks; ``info`` called a table written by
``convert`` a result store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import zarr

import streamlsq

from faultkit import invoke, leftovers, refusal, snapshot


def test_predict_refusing_a_nan_advises_what_predict_offers(tmp_path, client):
    rows = streamlsq.simulate_stream(tmp_path / "rows.zarr", n_rows=1_200, n_features=3,
                                     chunk_rows=400, seed=1, client=client)
    streamlsq.fit_stream(rows, "kf4lls", out=tmp_path / "fit.zarr", client=client,
                         progress=False)
    new = streamlsq.simulate_stream(tmp_path / "new.zarr", n_rows=800, n_features=3,
                                    chunk_rows=400, seed=2, client=client)
    zarr.open_group(str(new), mode="r+")["X"][500, 1] = np.nan
    out = tmp_path / "pred.zarr"
    before = snapshot(tmp_path)
    line = refusal(invoke("predict", tmp_path / "fit.zarr", new, "--out", out,
                          scheduler=client.scheduler.address))
    assert "variable 'X' chunk 1 has NaN at row 500; remove or impute the missing values, " \
           "or leave their rows out of DATA: predict gives every row a prediction (it has no " \
           "--missing)" in line, line
    assert "--missing drop" not in line
    assert snapshot(tmp_path) == before and leftovers(out) == [] and not out.exists()
    # a fit still advises its own option
    line = refusal(invoke("fit", "kf4lls", new, "--out", tmp_path / "f2.zarr",
                          scheduler=client.scheduler.address))
    assert "has NaN at row 500; remove or impute non-finite values, or drop their rows " \
           'with --missing drop (missing="drop")' in line


def test_info_calls_a_converted_table_a_converted_table_store(tmp_path, client):
    pd.DataFrame({"a": np.arange(10.0), "y": 2 * np.arange(10.0)}).to_parquet(
        tmp_path / "t.parquet")
    store = tmp_path / "t.zarr"
    assert invoke("convert", tmp_path / "t.parquet", "--out", store,
                  scheduler=client.scheduler.address).exit_code == 0
    before = snapshot(tmp_path)
    result = invoke("info", store)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{store}: converted table store (Zarr v3)"
    assert lines[-1] == f"  table {tmp_path / 't.parquet'} converted: complete"
    assert "result" not in result.output.replace("@", "").split("\n", 1)[0]
    assert not any(line.startswith("  result of") for line in lines)
    assert snapshot(tmp_path) == before
    checked = invoke("info", store, "--check", scheduler=client.scheduler.address)
    assert checked.exit_code == 0 and "checked: every chunk" in checked.output
