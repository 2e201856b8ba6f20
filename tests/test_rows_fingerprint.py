"""What a fit keeps of the rows it read, for ``--continue-from``: a variable of fixed width
(one row per stamped chunk), so that the result's metadata does not grow with the input;
results written with the earlier attribute are still continued; changed rows are named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from streamlsq import InputError, fit_stream, open_result
from streamlsq.stream.resume import FINGERPRINT_FIELDS, rows_fingerprint, stamp_digest

from conftest import write_stream


def _store(path, n_rows, chunk, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, 3))
    return write_stream(path, X, X @ [[1.0], [2.0], [3.0]] + rng.standard_normal((n_rows, 1)),
                        chunk)


def _root_metadata_bytes(result) -> int:
    return len((Path(result) / "zarr.json").read_bytes())


def test_the_metadata_of_a_result_does_not_grow_with_the_chunks_read(tmp_path, client):
    sizes = {}
    for chunks in (4, 400):
        store = _store(tmp_path / f"s{chunks}.zarr", 40_000, 40_000 // chunks)
        out = tmp_path / f"fit{chunks}.zarr"
        fit_stream(store, "kf4lls", block_size=40_000, out=out, client=client)
        res = open_result(out)
        table = res["rows_fingerprint"]
        assert table.dims == ("fingerprint_entry", "fingerprint_field")
        assert list(res["fingerprint_field"].values) == list(FINGERPRINT_FIELDS)
        assert table.shape == (2 * chunks, len(FINGERPRINT_FIELDS))  # X and y, every chunk
        assert res.attrs["rows_fingerprint"].startswith("sha256:")
        sizes[chunks] = _root_metadata_bytes(out)
    # the same attributes whatever the chunks; only the table's length differs (a few bytes
    # of the consolidated metadata's shape)
    assert abs(sizes[400] - sizes[4]) < 100


def test_the_table_holds_the_stamps_of_every_chunk(tmp_path, client):
    store = _store(tmp_path / "s.zarr", 1_000, 300)
    out = tmp_path / "fit.zarr"
    fit_stream(store, "kf4lls", block_size=100, out=out, client=client)
    from streamlsq import open_stream

    source = open_stream(store)
    expected = [[i, a, b, stamp_digest(s)]
                for i, name in enumerate(("X", "y"))
                for a, b, s in rows_fingerprint(source, 1_000)[name]]
    np.testing.assert_array_equal(open_result(out)["rows_fingerprint"].values, expected)


def _append(store, rows, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, 3))
    xr.Dataset({"X": (("sample", "feature"), X),
                "y": (("sample", "target"), X @ [[1.0], [2.0], [3.0]])}).to_zarr(
        store, append_dim="sample")


@pytest.mark.parametrize("earlier_version", [False, True])
def test_a_continued_fit_refuses_changed_rows_naming_them(tmp_path, client, earlier_version):
    store = _store(tmp_path / "s.zarr", 1_000, 300)
    first = tmp_path / "first.zarr"
    fit_stream(store, "kf4lls", block_size=100, out=first, client=client)
    if earlier_version:  # the fingerprint as the attribute results had before (JSON)
        from streamlsq import open_stream

        ds = open_result(first, lazy=False).load().drop_vars(
            ["rows_fingerprint", "fingerprint_field"])
        ds.attrs["rows_fingerprint"] = json.dumps(rows_fingerprint(open_stream(store), 1_000))
        # results of that version were not marked as published with every chunk written
        ds.attrs.pop("every_chunk_written", None)
        first = tmp_path / "earlier.zarr"
        ds.to_zarr(first, zarr_format=3)
    _append(store, 200, 1)
    more = fit_stream(store, "kf4lls", block_size=100, continue_from=first, client=client)
    assert int(more.rows_seen[-1]) == 1_200 and more["rows_fingerprint"].shape[0] == 2 * 4
    zarr.open_group(str(store), mode="r+")["X"][650, 0] = 5.0  # an earlier row changed
    with pytest.raises(InputError, match=r"variable 'X' rows 600-899 changed since"):
        fit_stream(store, "kf4lls", block_size=100, continue_from=first, client=client)


def test_a_tables_parts_are_stamped_without_reading_them(tmp_path, monkeypatch):
    """A CSV table's parts (files, byte ranges) have unequal rows: each is stamped by its
    file, never read and hashed (which parsed every part once per column, in the command's
    process: a 1 GB CSV's command took 190 s, 18 s without it). A table is never
    continued."""
    import pandas as pd

    from streamlsq import open_stream
    from streamlsq.io.tables import TableRows

    rng = np.random.default_rng(0)
    for i, n in enumerate((1_000, 1_700, 300)):  # one part per file: parts of unequal rows
        frame = pd.DataFrame(rng.standard_normal((n, 4)), columns=["a", "b", "c", "y"])
        frame.to_csv(tmp_path / f"t-{i}.csv", index=False)
    source = open_stream(str(tmp_path / "t-*.csv"), x=["a", "b", "c"], y="y")
    assert len(set(np.diff(np.asarray(source.rows.edges)))) == 3
    reads = []
    monkeypatch.setattr(TableRows, "_read_part",
                        lambda self, *a, **k: reads.append(a) or pytest.fail("a part read"))
    found = rows_fingerprint(source, source.n_rows)
    assert not reads
    assert list(found) == ["a", "b", "c", "y"]
    stamps = source.chunk_stamps(["a"])["a"]
    assert found["a"] == [[int(a), int(b), s] for a, b, s in stamps]  # the files' stamps
