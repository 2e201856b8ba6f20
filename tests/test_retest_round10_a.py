"""Cases of the tenth re-test: ``info --check`` refused every multi-task store (it opened
each as a stream store, asking for ``--x``, which info has no such option for); a chunk
file removed from a store streamlsq wrote (which records that every chunk was written) was
called "never written ... or written with write_empty_chunks=False"; ``--checkpoint`` under
folders that do not exist created them and left them behind; ``simulate mlr --codec none``
still compressed ``task_ptr``, ``role`` and the truth; a table's fit continued on its
converted store (as the table's refusal advised) or a fit continued on a copy of its store
said that rows "changed since", naming a variable ('design') no store holds."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
import zarr

import streamlsq
from streamlsq.errors import InputError

from conftest import one_line
from faultkit import leftovers, snapshot

# -- info --check of a multi-task store ----------------------------------------------------

@pytest.fixture
def tasks(tmp_path, client):
    """A multi-task store written by ``simulate mlr``, in a folder of its own."""
    return streamlsq.simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=50, t_light=4,
                                  n_heavy=20, t_heavy=30, n_light2=10, t_light2=6,
                                  chunk_rows=64,
                                  client=client)


def test_info_check_reads_a_multi_task_store(tasks, cli):
    result = cli("info", tasks, "--check")
    assert result.exit_code == 0, result.output
    g = zarr.open_group(str(tasks), mode="r")  # the counts as the store holds them
    rows, n_tasks = g["X"].shape[0], g["task_ptr"].shape[0] - 1
    assert (rows, n_tasks) == (50 * 4 + 20 * 30 + 10 * 6, 80)
    assert result.output.splitlines()[-1] == (
        f"checked: every chunk of every variable read, every value finite in {rows} rows of "
        f"{n_tasks} tasks, none so large that the least-squares sums overflow")


def test_info_check_of_a_multi_task_store_names_what_metalearn_refuses(tasks, cli, client):
    g = zarr.open_group(str(tasks), mode="r+")
    g["X"][301, 1] = np.nan  # chunk 4 of 64 rows
    before = snapshot(tasks.parent)
    line = one_line(cli("info", tasks, "--check"))
    assert "variable 'X' chunk 4 has NaN at row 301" in line, line
    # metalearn refuses the same value by the same words
    with pytest.raises(InputError, match="variable 'X' chunk 4 has NaN at row 301"):
        streamlsq.metalearn(tasks, k=2, client=client)
    assert snapshot(tasks.parent) == before


def test_info_check_of_a_multi_task_store_refuses_what_would_overflow(tasks, cli):
    g = zarr.open_group(str(tasks), mode="r+")
    g["y"][650] = 1e160
    line = one_line(cli("info", tasks, "--check"))
    assert "variable 'y' has |value| 1e+160 at row 650 (task 65), above" in line, line
    assert "rescale the data" in line


def test_info_check_of_a_multi_task_store_names_a_removed_chunk(tasks, cli):
    os.remove(tasks / "task_ptr" / "c" / "0")
    before = snapshot(tasks.parent)
    line = one_line(cli("info", tasks, "--check"))
    assert "variable 'task_ptr' chunk (0,)" in line and "is missing" in line, line
    assert snapshot(tasks.parent) == before


# -- a chunk file removed from a store that records every chunk written ----------------------

@pytest.fixture
def stream(tmp_path, client):
    """A stream store of ``simulate stream``: 2000 rows in 4 chunks of 500."""
    return streamlsq.simulate_stream(tmp_path / "s.zarr", 2000, 3, chunk_rows=500,
                                     client=client)


def _without_chunk(stream, how: str):
    """``stream`` with the chunk file X/c/2/0 removed, or a folder or a link to nothing in its
    place; returns the path of the chunk file."""
    chunk = stream / "X" / "c" / "2" / "0"
    chunk.unlink()
    if how == "folder":
        chunk.mkdir()
    elif how == "link":
        chunk.symlink_to(stream / "X" / "c" / "2" / "gone")
    return chunk


@pytest.mark.parametrize("how", ["removed", "folder", "link"])
def test_a_chunk_removed_from_a_store_streamlsq_wrote_is_called_removed(stream, cli, how):
    assert zarr.open_group(str(stream), mode="r").attrs["every_chunk_written"] is True
    chunk = _without_chunk(stream, how)
    before = snapshot(stream.parent)
    out = stream.parent / "o.zarr"
    line = one_line(cli("fit", "kf4lls", stream, "--out", out))
    where = (f"streamlsq: error: {stream}: variable 'X' chunk (2, 0) (rows 1000-1499; 1 of 4 "
             "chunks missing; it would read as the fill value nan) is missing: ")
    assert line == where + {
        "removed": f"its file {chunk} was removed since the store was written (it records "
                   "that every chunk was written); restore it",
        "folder": f"{chunk} is a folder, not a chunk file; restore the chunk file in its place",
        "link": f"its file {chunk} is a symbolic link to '{stream}/X/c/2/gone', which does "
                "not exist; restore the chunk file in its place",
    }[how], line
    assert "write_empty_chunks" not in line
    assert snapshot(stream.parent) == before and not out.exists() and leftovers(out) == []


def test_a_chunk_never_written_by_a_user_is_still_called_never_written(tmp_path, cli):
    """A store that does not record every chunk written: zarr leaves chunks of the fill
    value out unless told otherwise, and that is what the message says."""
    g = zarr.open_group(str(tmp_path / "u.zarr"), mode="w", zarr_format=3)
    for name, width, dims in (("X", 2, ["sample", "feature"]), ("y", 1, ["sample", "target"])):
        g.create_array(name, shape=(40, width), chunks=(10, width), dtype="float64",
                       dimension_names=dims, fill_value=np.nan)[:] = 1.0
    (tmp_path / "u.zarr" / "X" / "c" / "1" / "0").unlink()
    line = one_line(cli("fit", "kf4lls", tmp_path / "u.zarr", "--out", tmp_path / "o.zarr"))
    assert line.endswith("was never written (rows 10-19; 1 of 4 chunks missing; it would "
                         "read as the fill value nan); the store is incomplete, or was "
                         "written with write_empty_chunks=False: rewrite it with "
                         "write_empty_chunks=True"), line


def _final_coef(path) -> np.ndarray:
    """The coefficients (feature, target) of a fit after its last row."""
    coef = streamlsq.open_result(path)["coef"]
    return (coef.isel(step=-1) if "step" in coef.dims else coef).values


# -- --checkpoint under folders that do not exist ----------------------------------------------

def test_a_checkpoint_whose_folder_does_not_exist_is_refused_before_any_work(stream, cli):
    (stream / "X" / "c" / "2" / "0").write_bytes(b"")  # a fit would fail half-way
    before = snapshot(stream.parent)
    out = stream.parent / "o.zarr"
    ck = stream.parent / "new" / "a" / "ck"
    line = one_line(cli("fit", "kf4lls", stream, "--out", out, "--checkpoint", ck))
    assert line == (f"streamlsq: error: {ck.parent}: folder of --checkpoint {ck} does not "
                    "exist; streamlsq creates the checkpoint folder only inside an existing "
                    "folder: create it first, or choose another --checkpoint"), line
    assert snapshot(stream.parent) == before and not (stream.parent / "new").exists()
    # a file where its folder should be
    (stream.parent / "notes").write_text("mine")
    line = one_line(cli("fit", "kf4lls", stream, "--out", out, "--checkpoint",
                        stream.parent / "notes" / "ck"))
    assert line == (f"streamlsq: error: {stream.parent / 'notes' / 'ck'}: notes is a file, "
                    "not a folder; choose another --checkpoint"), line
    assert (stream.parent / "notes").read_text() == "mine"


def test_a_checkpoint_whose_folder_does_not_exist_from_python(stream, client):
    ck = stream.parent / "new" / "ck"
    with pytest.raises(InputError, match="folder of --checkpoint .* does not exist"):
        streamlsq.fit_stream(stream, "kf4lls", out=stream.parent / "o.zarr", checkpoint=ck,
                             client=client)
    assert not (stream.parent / "new").exists() and not (stream.parent / "o.zarr").exists()


def test_a_checkpoint_in_an_existing_folder_is_created_and_removed(stream, cli):
    (stream.parent / "cks").mkdir()
    out = stream.parent / "o.zarr"
    result = cli("fit", "kf4lls", stream, "--out", out, "--checkpoint",
                 stream.parent / "cks" / "ck")
    assert result.exit_code == 0, result.output
    assert list((stream.parent / "cks").iterdir()) == []  # the checkpoint, and only it, gone
    X, y = (zarr.open_group(str(stream), mode="r")[n][:] for n in ("X", "y"))
    np.testing.assert_allclose(_final_coef(out), np.linalg.lstsq(X, y, rcond=None)[0],
                               rtol=1e-8, atol=1e-10)


# -- --codec applies to every array a command writes -----------------------------------------

def _compressors(path) -> dict[str, list[str]]:
    """The codecs of every array of a store, as its metadata names them (bytes codecs and
    the like, which every array has, left out)."""
    out = {}
    for root, _, files in os.walk(path):
        if "zarr.json" in files and root != str(path):
            meta = json.loads(open(os.path.join(root, "zarr.json")).read())
            if meta.get("node_type") == "array":
                out[os.path.relpath(root, path)] = [c["name"] for c in meta["codecs"]
                                                    if c["name"] not in ("bytes", "transpose")]
    return out


@pytest.mark.parametrize("codec, names", [("none", []), ("zstd", ["zstd"]),
                                          ("blosc-lz4", ["blosc"])])
def test_simulate_mlr_codec_applies_to_every_array(tmp_path, cli, codec, names):
    out = tmp_path / "t.zarr"
    result = cli("simulate", "mlr", "--out", out, "--k", "2", "--d", "3", "--n-light", "50",
                 "--n-heavy", "20", "--n-light2", "0", "--codec", codec)
    assert result.exit_code == 0, result.output
    found = _compressors(out)
    assert {"X", "y", "task_ptr", "role", "component", "w_true", "s_true", "p_true"} \
        <= set(found)
    assert all(v == names for v in found.values()), found


def test_simulate_stream_codec_applies_to_coef_true(tmp_path, cli):
    out = tmp_path / "s.zarr"
    result = cli("simulate", "stream", "--out", out, "--rows", "200", "--features", "3",
                 "--codec", "none")
    assert result.exit_code == 0, result.output
    found = _compressors(out)
    assert {"X", "y", "coef_true"} <= set(found) and all(v == [] for v in found.values()), \
        found


def test_simulate_interleaved_codec_applies_to_coef_true(tmp_path, client):
    out = streamlsq.simulate_interleaved(tmp_path / "i.zarr", n=20, q=3, steps=4,
                                         codec="none", client=client)
    found = _compressors(out)
    assert {"a/X", "a/coef_true", "c/y", "c/coef_true"} <= set(found), found
    assert all(v == [] for v in found.values()), found


# -- --continue-from a result fitted on another input ------------------------------------------

def _table(tmp_path, n=400):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    df["y"] = 1 + df.a - df.b + rng.normal(size=n)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    return df


def test_a_tables_fit_continued_on_its_converted_store_names_the_table(tmp_path, cli):
    df = _table(tmp_path)
    table, store = tmp_path / "t.parquet", tmp_path / "s.zarr"
    assert cli("fit", "kf4lls", table, "--formula", "y ~ a + b", "--out",
               tmp_path / "rt.zarr").exit_code == 0
    line = one_line(cli("fit", "kf4lls", table, "--formula", "y ~ a + b", "--out",
                        tmp_path / "o.zarr", "--continue-from", tmp_path / "rt.zarr"))
    assert "fit the store once, then append the new rows to it and continue that fit" in line
    assert cli("convert", table, "--out", store).exit_code == 0
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", store, "--formula", "y ~ a + b", "--out",
                        tmp_path / "o.zarr", "--continue-from", tmp_path / "rt.zarr"))
    assert line == (f"streamlsq: error: {store}: --continue-from {tmp_path / 'rt.zarr'} was "
                    f"fitted on the table {table} (as the result records), not on this store; "
                    "a fit of a table is not continued on a store: fit the store once "
                    "(without --continue-from), then continue that result as rows are "
                    "appended"), line
    assert snapshot(tmp_path) == before
    # the remedy: the store fitted once, and that fit continued, as statsmodels fits the table
    assert cli("fit", "kf4lls", store, "--formula", "y ~ a + b", "--out",
               tmp_path / "rs.zarr").exit_code == 0
    result = cli("fit", "kf4lls", store, "--formula", "y ~ a + b", "--out",
                 tmp_path / "o.zarr", "--continue-from", tmp_path / "rs.zarr")
    assert result.exit_code == 0, result.output
    ref = smf.ols("y ~ a + b", df).fit().params.to_numpy()
    np.testing.assert_allclose(_final_coef(tmp_path / "o.zarr")[:, 0], ref, rtol=1e-9)


def test_a_fit_continued_on_a_copy_of_its_store_names_the_store_it_was_fitted_on(stream, cli):
    fit = stream.parent / "f.zarr"
    assert cli("fit", "kf4lls", stream, "--out", fit).exit_code == 0
    copy = stream.parent / "copy.zarr"
    # as `cp -r` copies: new files, whose times are not those the fit kept
    shutil.copytree(stream, copy, copy_function=shutil.copyfile)
    before = snapshot(stream.parent)
    line = one_line(cli("fit", "kf4lls", copy, "--out", stream.parent / "o.zarr",
                        "--continue-from", fit))
    assert line == (f"streamlsq: error: {copy}: --continue-from {fit} was fitted on another "
                    f"input, {stream} (as the result records), whose chunks are not this "
                    "store's (a copy has files of its own): continue it on the store it was "
                    "fitted on, or fit this store once (without --continue-from) and "
                    "continue that result"), line
    assert snapshot(stream.parent) == before
    # on the store it was fitted on, the rows unchanged: continued
    result = cli("fit", "kf4lls", stream, "--out", stream.parent / "o.zarr",
                 "--continue-from", fit)
    assert result.exit_code == 0, result.output
