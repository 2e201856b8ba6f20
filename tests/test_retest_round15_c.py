"""Re-test round 14's weak cases (c): a URL with too few slashes, ``PATH#`` and a missing
store's group, a column only a later CSV file holds, ``--plot memory://``, and the standard
output whose reader stops, that is full or closed: each one line naming what and where with
its remedy (exit 2, or InputError), the folder left as it was; a reader that stops is no
failure (exit 0)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import streamlsq
from streamlsq.errors import InputError
from streamlsq.io.results import prepare_output

from conftest import groups_store, one_line
from faultkit import cli as command_line
from faultkit import invoke, leftovers, snapshot


@pytest.fixture(scope="module")
def pop(tmp_path_factory):
    return groups_store(tmp_path_factory.mktemp("pop") / "pop.zarr", ["a", "b"])


@pytest.fixture(scope="module")
def fitted(pop, tmp_path_factory, client):
    out = tmp_path_factory.mktemp("fitted") / "fa.zarr"
    streamlsq.fit_stream(pop, "kf4lls", group="a", out=out, block_size=100, client=client)
    return out


def _in(folder, run):
    """``run()`` with ``folder`` as the working folder (the user's relative names)."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        return run()
    finally:
        os.chdir(here)


# -- row 23: --plot memory:// ----------------------------------------------------------------

def test_a_plot_in_memory_asks_for_a_png_file_path(fitted, tmp_path):
    """Round 14: the line spoke of a store, a folder and ``fit_stream(out=)`` where a PNG file
    is meant."""
    before = snapshot(fitted.parent)
    line = one_line(invoke("info", fitted, "--plot", "memory://x.png"))
    assert line == ("streamlsq: error: --plot memory://x.png: memory:// lives in the process "
                    "and is gone when the command ends: name a PNG file path"), line
    assert snapshot(fitted.parent) == before


# -- row 24: a URL with too few slashes ------------------------------------------------------

@pytest.mark.parametrize(("given", "fixed", "remedy"), [
    ("memory:/f.zarr", "memory://f.zarr",
     "to write into a local folder named 'memory:', create it first (mkdir './memory:')"),
    ("s3:bucket/f.zarr", "s3://bucket/f.zarr",
     "to write into a local folder named 's3:bucket', create it first (mkdir './s3:bucket')"),
    ("memory:f.zarr", "memory://f.zarr",
     "to write a local path of that name, write ./memory:f.zarr"),
])
def test_an_output_url_with_too_few_slashes_is_named_not_a_url(pop, tmp_path, given, fixed,
                                                                remedy):
    """Round 14: ``--out memory:/f.zarr`` said ``memory:: output folder does not exist``
    (read as a local path, which it is: no remedy, no word of the URL it was meant to be);
    ``memory:f.zarr`` wrote a local folder of that name."""
    before = snapshot(tmp_path)
    line = _in(tmp_path, lambda: one_line(invoke("fit", "kf4lls", f"{pop}#a", "--out", given)))
    assert line == (f"streamlsq: error: {given}: not a URL, which is scheme://... (here "
                    f"{fixed}); {remedy}"), line
    assert snapshot(tmp_path) == before


def test_an_input_or_plot_url_with_too_few_slashes_is_named_not_a_url(fitted, tmp_path):
    before = snapshot(tmp_path)
    line = _in(tmp_path, lambda: one_line(invoke("info", "memory:/g.zarr")))
    assert line == ("streamlsq: error: memory:/g.zarr: not a URL, which is scheme://... (here "
                    "memory://g.zarr), and no local file or folder 'memory:' exists"), line
    line = _in(tmp_path, lambda: one_line(invoke("fit", "glm", "file:t.parquet", "--formula",
                                                 "y ~ x", "--out", "o.zarr")))
    assert line == ("streamlsq: error: file:t.parquet: not a URL, which is scheme://... (here "
                    "file://t.parquet), and no local file or folder 'file:t.parquet' "
                    "exists"), line
    line = _in(tmp_path, lambda: one_line(invoke("info", fitted, "--plot", "memory:/x.png")))
    assert line == ("streamlsq: error: memory:/x.png: not a URL, which is scheme://... (here "
                    "memory://x.png); to write into a local folder named 'memory:', create "
                    "it first (mkdir './memory:')"), line
    assert snapshot(tmp_path) == before


def test_a_local_path_holding_a_colon_is_still_a_local_path(tmp_path):
    """A folder ``memory:`` that exists, ``./memory:f.zarr``, a name whose first part is no
    fsspec protocol, or ``data:`` (an ordinary word): local outputs as before."""
    (tmp_path / "memory:").mkdir()
    for name in ("memory:/f.zarr", "./memory:f.zarr", "run:2/f.zarr", "data:v1.zarr"):
        if name == "run:2/f.zarr":
            (tmp_path / "run:2").mkdir()
        out = _in(tmp_path, lambda name=name: prepare_output(name))
        assert str(out) == os.path.normpath(name), out


# -- rows 27, 33, 32: PATH# and a missing store's group --------------------------------------

def test_a_hash_naming_no_group_says_what_to_do(pop, fitted, tmp_path):
    """Round 14: ``pop.zarr#`` gave ``expected PATH or PATH#GROUP``, no remedy."""
    before = snapshot(tmp_path)
    wanted = (f"{pop}#: names no group after '#': give a group's path, as {pop}#GROUP (as "
              f"info lists them), or leave out the '#' to read the store itself")
    assert one_line(invoke("info", f"{pop}#")) == f"streamlsq: error: {wanted}"
    assert one_line(invoke("fit", "kf4lls", f"{pop}#", "--out", tmp_path / "z.zarr")) == \
        f"streamlsq: error: {wanted}"
    with pytest.raises(InputError) as err:
        streamlsq.open_stream(f"{pop}#")
    assert str(err.value) == wanted
    line = _in(tmp_path, lambda: one_line(invoke("info", "#a")))
    assert line == ("streamlsq: error: #a: names no store before '#': give the store's path, "
                    "as data.zarr#a"), line
    # a result is never a group: the '#' is what to leave out
    with pytest.raises(InputError) as err:
        streamlsq.open_result(f"{fitted}#")
    assert str(err.value) == (f"{fitted}#: names no group after '#', and a result is a store "
                              "of its own, never a group: leave out the '#'")
    assert snapshot(tmp_path) == before


def test_a_result_named_as_a_group_of_a_missing_store_says_the_store_is_missing(
        fitted, tmp_path):
    """Round 14: ``open_result('nothere.zarr#r')`` said only that a result is never a group:
    renamed ``nothere.zarr``, it then said that the store does not exist."""
    with pytest.raises(InputError) as err:
        streamlsq.open_result(tmp_path / "nothere.zarr#r")
    assert str(err.value) == (f"{tmp_path / 'nothere.zarr#r'}: no such store "
                              f"{tmp_path / 'nothere.zarr'} (and a result is a store of its "
                              "own, never a group: give its path)")
    with pytest.raises(InputError, match="names the group 'r' of .*fa.zarr; a result is a "):
        streamlsq.open_result(f"{fitted}#r")  # the store exists: as before
    assert list(tmp_path.iterdir()) == []


# -- row 61: a column only a later CSV file holds -------------------------------------------

def test_a_column_only_a_later_csv_file_holds_names_both_files(tmp_path):
    """Round 14: ``'r*.csv'`` where only r2.csv has ``extra``: ``r*.csv: column 'extra' of
    the formula ... is missing (found: ...)``, where a file holds it."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x1": rng.normal(size=40), "cnt": rng.poisson(2, size=40) * 1.0})
    frame.iloc[:20].to_csv(tmp_path / "r1.csv", index=False)
    frame.iloc[20:].assign(extra=1.0).to_csv(tmp_path / "r2.csv", index=False)
    glob, out = str(tmp_path / "r*.csv"), tmp_path / "o.zarr"
    before = snapshot(tmp_path)
    wanted = (f"streamlsq: error: {tmp_path / 'r1.csv'}: has no column 'extra', where "
              f"{tmp_path / 'r2.csv'} has it; the files of one table hold the same columns: "
              "write the column into every file, or leave it out")
    for args in (("fit", "glm", glob, "--family", "poisson", "--formula", "cnt ~ x1 + extra",
                  "--out", out),
                 ("fit", "kf4lls", glob, "--x", "x1,extra", "--y", "cnt", "--out", out),
                 ("convert", glob, "--columns", "x1,extra", "--out", out)):
        assert one_line(invoke(*args)) == wanted
        assert snapshot(tmp_path) == before and leftovers(out) == []
    # a column no file holds is missing, as before
    line = one_line(invoke("fit", "kf4lls", glob, "--x", "x9", "--y", "cnt", "--out", out))
    assert "variable 'x9' named by --x (x=) is missing (found: ['cnt', 'x1'])" in line, line


# -- rows 67-70: the standard output -----------------------------------------------------------

def _run(args, stdout, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(command_line(*args), stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["fit", "--help"]])
def test_a_reader_that_reads_nothing_is_not_a_failure(args):
    """Round 14: ``streamlsq --help | true`` and ``--version | head -c0`` ended with exit 1
    and no word (click's own handling of EPIPE), where a reader that stops is no failure."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write meets EPIPE
    try:
        run = _run(args, write)
    finally:
        os.close(write)
    assert (run.returncode, run.stderr) == (0, "")


full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@full
@pytest.mark.parametrize("args", [["--help"], ["--version"], ["fit", "--help"]])
def test_help_and_version_to_a_full_device_are_one_line(args):
    """Round 14: ``streamlsq --version > /dev/full`` printed click's 30-line traceback."""
    with open("/dev/full", "w") as device:
        run = _run(args, device)
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("streamlsq: error: writing to the standard output failed (No "
                          "space left on device)\n")


@full
def test_a_fit_whose_report_meets_a_full_device_says_its_result_was_written(pop, tmp_path,
                                                                           client):
    """Round 14: ``fit ... > /dev/full`` said ``input/output error (OSError: No space left
    on device)``, as if the fit had failed, where its result was written; ``info`` the
    same, with nothing written."""
    with open("/dev/full", "w") as device:
        run = _run(["fit", "kf4lls", f"{pop}#a", "--out", "f.zarr", "--block-size", "100"],
                   device, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("streamlsq: error: writing to the standard output failed (No space "
                          "left on device); f.zarr was written\n")
    fit = streamlsq.open_result(tmp_path / "f.zarr")  # complete and sound
    ref = streamlsq.fit_stream(pop, "kf4lls", group="a", block_size=100, client=client)
    np.testing.assert_array_equal(fit.coef.values, ref.coef.values)
    assert leftovers(tmp_path / "f.zarr") == []
    with open("/dev/full", "w") as device:
        run = _run(["info", tmp_path / "f.zarr"], device)
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("streamlsq: error: writing to the standard output failed (No space "
                          "left on device)\n")


def test_a_failure_whose_message_meets_a_closed_pipe_still_fails(tmp_path):
    """``fit ... 2>&1 | head -c0`` of a fit that failed ended with exit 0 and no result:
    its one line met the closed pipe, and the broken pipe was read as a reader that
    stopped after the output. The exit code must still tell the failure."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run(command_line("fit", "kf4lls", "nothere.zarr", "--out", "f.zarr"),
                             stdout=write, stderr=write, timeout=300, cwd=tmp_path)
    finally:
        os.close(write)
    assert run.returncode == 2
    assert list(tmp_path.iterdir()) == []
