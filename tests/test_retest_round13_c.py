"""Re-test round 13 (c): the cases found broken or weak in outputs, checkpoints, PATH#GROUP,
info and the Python functions, each refused in one line (exit 2 or InputError) with the
folder left as it was, or now read as the user wrote it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import numpy as np
import pytest

import streamlsq
from streamlsq.errors import InputError

from conftest import CHECKPOINTED_FIT as FIT
from conftest import groups_store, one_line
from faultkit import cli as command_line
from faultkit import invoke, leftovers, refusal, snapshot, unlocked


@pytest.fixture(scope="module")
def pop(tmp_path_factory):
    return groups_store(tmp_path_factory.mktemp("pop") / "pop.zarr", ["a", "b", "lvl/t"])


@pytest.fixture(scope="module")
def fitted(pop, tmp_path_factory, client):
    """A result of a fit of pop.zarr's group a, its features labelled 0 and 1."""
    out = tmp_path_factory.mktemp("fitted") / "fit.zarr"
    streamlsq.fit_stream(pop, "kf4lls", group="a", out=out, client=client, block_size=100)
    return out


# -- known leftover 1: the folders a study makes above its --out -----------------------------

def test_a_study_makes_the_missing_folders_above_its_out(tmp_path, cli):
    """The study notebooks write into ``study-results/NAME`` without making the folder:
    the command makes the folders above ``--out``, and keeps them with the study."""
    out = tmp_path / "a" / "b" / "c"
    run = cli("study", "lms", "--quick", "--out", out)
    assert run.exit_code == 0, run.output
    assert json.loads((out / "study.json").read_text())["study"] == "lms"


@pytest.mark.parametrize("fails_in", ["compute", "publish"])
def test_a_failed_study_removes_the_folders_it_made_above_its_out(tmp_path, client,
                                                                  monkeypatch, fails_in):
    """Round 13: ``study NAME --out a/b/c`` made ``a/b`` (mkdir parents) and left them
    behind when the run failed; now exactly the folders it made go, and a folder of the
    user's above them stays, as found."""
    from streamlsq.studies import common, lms

    class Boom(Exception):
        pass

    def boom(*args, **kwargs):
        raise Boom("stopped")

    if fails_in == "compute":
        monkeypatch.setattr(lms, "lms_convergence_table", boom)
    else:
        monkeypatch.setattr(common.StudyFolder, "finish", boom)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(Boom):
        lms.run_lms(tmp_path / "mine" / "x" / "y" / "st", quick=True, client=client,
                    progress=False)
    assert snapshot(tmp_path) == before
    assert leftovers(tmp_path / "mine" / "x" / "y" / "st") == []


def test_a_refused_study_removes_the_folders_it_made(tmp_path, cli, stopped_fit):
    """A refusal after the folders were made (a checkpoint of another command) leaves none
    of them."""
    work = tmp_path / "work"
    work.mkdir()
    before = unlocked(snapshot(tmp_path))
    line = one_line(cli("study", "lms", "--quick", "--out", work / "x" / "st",
                        "--checkpoint", stopped_fit, "--resume"))
    assert "the checkpoint of a 'streamlsq fit kf4lls (--engine sequential)' run; this is " \
           "'streamlsq study lms'" in line
    assert unlocked(snapshot(tmp_path)) == before


# -- a study's or the demo's folder holding a user's file, or given as a link ----------------

def test_a_study_rerun_over_its_output_keeps_a_users_file(tmp_path, cli):
    """Round 13: ``study lms --out st`` over an earlier output of lms where the user had
    put ``notes.txt`` replaced the folder whole, exit 0: notes.txt was deleted."""
    out = tmp_path / "st"
    assert cli("study", "lms", "--quick", "--out", out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    line = one_line(cli("study", "lms", "--quick", "--out", out))
    assert line == (f"streamlsq: error: {out}: holds notes.txt, which streamlsq did not "
                    "write; move it or choose another --out"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_study_out_given_as_a_link_is_refused(tmp_path, cli):
    """Round 13: ``study lms --out link`` (a link to an earlier output of lms) replaced the
    link by a folder."""
    real = tmp_path / "real"
    assert cli("study", "lms", "--quick", "--out", real).exit_code == 0
    (tmp_path / "link").symlink_to(real)
    before = snapshot(tmp_path)
    line = one_line(cli("study", "lms", "--quick", "--out", tmp_path / "link"))
    assert line == (f"streamlsq: error: {tmp_path / 'link'}: is a symbolic link; streamlsq "
                    "never writes through or over a link: give the path it points to, or "
                    "choose another --out"), line
    assert snapshot(tmp_path) == before


DEMO = ("--rows", 5_000, "--features", 4, "--tasks", 500)


def test_a_demo_rerun_over_its_folder_keeps_a_users_file(tmp_path, client):
    """Round 13: the demo rerun over its folder set the earlier one aside and removed it
    whole, with the ``notes.txt`` the user had put there."""
    out = tmp_path / "dm"
    ran = invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address)
    assert ran.exit_code == 0, ran.output
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    line = refusal(invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds notes.txt, which streamlsq demo did not "
                    "write; move it or choose another --out"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- known leftover 2: open_stream reads PATH#GROUP -----------------------------------------

def test_open_stream_reads_path_hash_group(pop):
    """Round 13: ``open_stream("pop.zarr#a")`` said ``pop.zarr#a: no such store``, where
    every command reads the group."""
    by_hash = streamlsq.open_stream(f"{pop}#a")
    by_group = streamlsq.open_stream(pop, "a")
    np.testing.assert_array_equal(by_hash.read(0, 300)[0], by_group.read(0, 300)[0])
    assert streamlsq.open_stream(f"{pop}#lvl/t/").n_rows == 300
    with pytest.raises(InputError) as refused:
        streamlsq.open_stream(f"{pop}#zz")
    assert str(refused.value) == (f"{pop} (group 'zz'): {pop} has no group 'zz' (its "
                                  "groups: a, b, lvl, lvl/t)")


# -- known leftover 3: --out memory:// on the command line ----------------------------------

@pytest.mark.parametrize("command", [
    ("simulate", "stream", "--rows", 100, "--features", 2),
    ("study", "lms", "--quick"),
    ("demo", *DEMO),
])
def test_an_out_in_memory_is_refused_on_the_command_line(tmp_path, cli, command,
                                                         monkeypatch):
    """Round 13: ``simulate stream --out memory://x.zarr`` said ``wrote memory://x.zarr``,
    exit 0, and the store went with the process; ``study``/``demo --out memory://st`` wrote
    a local folder ``memory:/st``."""
    monkeypatch.chdir(tmp_path)
    line = one_line(cli(*command, "--out", "memory://st"))
    assert line == ("streamlsq: error: --out memory://st: a memory:// store lives in the "
                    "process that writes it and is gone when the command ends: name a folder "
                    "or an object store URL (memory:// is for Python: "
                    "streamlsq.fit_stream(..., out='memory://...'))"), line
    assert list(tmp_path.iterdir()) == []


def test_an_out_in_memory_from_python_still_works(pop, client):
    """From Python the memory:// store is one the session reads back."""
    import fsspec

    memory = fsspec.filesystem("memory")
    try:
        fit = streamlsq.fit_stream(pop, "kf4lls", group="a", out="memory://r13c/fit.zarr",
                                   client=client, block_size=100)
        again = streamlsq.open_result("memory://r13c/fit.zarr")
        np.testing.assert_array_equal(fit.coef.isel(step=-1).values,
                                      again.coef.isel(step=-1).values)
    finally:  # the process's memory filesystem is shared by the tests that run after
        if memory.exists("/r13c"):
            memory.rm("/r13c", recursive=True)


# -- PATH#GROUP and --group -----------------------------------------------------------------

@pytest.mark.parametrize("suffix, wanted", [
    ("#zz", "{pop} (group 'zz'): {pop} has no group 'zz' (its groups: a, b, lvl, lvl/t)"),
    ("#a/X", "{pop} (group 'a/X'): 'a/X' is an array of {pop}, not a group"),
])
def test_info_of_a_group_the_store_lacks_says_so_as_a_fit_does(pop, cli, suffix, wanted):
    """Round 13: ``info pop.zarr#zz`` said ``pop.zarr/zz: no such store``, ``info
    pop.zarr#a/X`` zarr's ``not a readable Zarr group (An array already exists in store
    file:///... at path .)``; a fit names the store's groups."""
    before = snapshot(pop.parent)
    line = one_line(cli("info", f"{pop}{suffix}"))
    assert line.startswith("streamlsq: error: " + wanted.format(pop=pop)), line
    assert snapshot(pop.parent) == before


def test_a_group_with_a_leading_slash_is_the_group(pop, fitted, tmp_path, cli):
    """Round 13: ``--group /a`` (or ``pop.zarr#/a``) was refused with ``variable 'X' chunk
    (0, 0) (rows 0-99) is missing: its file /a/X/c/0/0 was removed; restore it``, telling of
    a removal that never happened; it is the group a."""
    for args in (("--group", "/a"), ()):
        data = pop if args else f"{pop}#/a/"
        out = tmp_path / f"o{len(args)}.zarr"
        run = cli("fit", "kf4lls", data, *args, "--out", out, "--block-size", 100)
        assert run.exit_code == 0, run.output
        np.testing.assert_array_equal(streamlsq.open_result(out).coef.values,
                                      streamlsq.open_result(fitted).coef.values)


def test_an_empty_group_is_refused(pop, tmp_path, cli):
    """Round 13: ``--group ''`` read the store's root without a word (``variable 'X' is
    missing (found: none)``)."""
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", pop, "--group", "", "--out", tmp_path / "o.zarr"))
    assert line == ("streamlsq: error: --group (group=) '' names no group: give a group's "
                    "path in the store (as info lists them), or leave it out to read the "
                    "store itself"), line
    assert snapshot(tmp_path) == before


# -- checkpoints ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["inputs.json", "lock", "streamlsq-checkpoint.json"])
def test_a_checkpoint_file_replaced_by_a_pipe_is_refused_not_waited_on(
        checkpointed_rows, stopped_fit, tmp_path, client, name):
    """Round 13: ``mkfifo ck/inputs.json`` (or the lock, the marker) and ``--resume``: the
    run waited for ever reading the pipe."""
    (stopped_fit / name).unlink()
    os.mkfifo(stopped_fit / name)

    def state():  # the pipe by kind and time (reading it, as snapshot does, would block)
        pipe = os.stat(stopped_fit / name)
        kept = {k: v for k, v in snapshot(tmp_path, skip=stopped_fit / name).items()
                if not k.endswith("/lock")}
        return kept, stat.S_ISFIFO(pipe.st_mode), pipe.st_mtime_ns

    before = state()
    done = subprocess.run(
        command_line("fit", "kf4lls", checkpointed_rows, "--out", tmp_path / "o.zarr",
                     "--block-size", FIT["block_size"], "--segment-size",
                     FIT["segment_bytes"] / 2**20, "--checkpoint", stopped_fit, "--resume",
                     "--scheduler", client.scheduler.address),
        capture_output=True, text=True, timeout=120)
    line = refusal(done)
    assert line == (f"streamlsq: error: {stopped_fit}: checkpoint is corrupt ({name}: a named "
                    "pipe, where the run wrote a file); rerun without --resume to start "
                    "afresh"), line
    assert state() == before


def test_a_resume_over_a_table_that_grew_names_its_rows(tmp_path, client, stop_after_commits):
    """Round 13: a checkpointed fit of ``csvs/*.csv`` resumed after a file was added said
    ``differs in: inputs``, nothing about what."""
    import pandas as pd

    rng = np.random.default_rng(3)
    folder = tmp_path / "csvs"
    folder.mkdir()
    for i in range(3):
        x = rng.standard_normal((400, 2))
        pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": x @ [1.0, -2.0]}).to_csv(
            folder / f"p{i}.csv", index=False)
    glob = str(folder / "*.csv")
    ckpt = tmp_path / "ck"
    options = dict(x=["a", "b"], y="y", client=client, **FIT)
    with stop_after_commits(1):
        streamlsq.fit_stream(glob, "kf4lls", checkpoint=ckpt, **options)
    shutil.copy(folder / "p2.csv", folder / "p3.csv")
    before = unlocked(snapshot(tmp_path))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(glob, "kf4lls", checkpoint=ckpt, resume=True, **options)
    assert f"differs in: inputs (data {glob}: 1200 rows then, 1600 now)" in str(refused.value)
    assert unlocked(snapshot(tmp_path)) == before


# -- info --plot ----------------------------------------------------------------------------

@pytest.mark.parametrize("given, wanted", [
    ("pdir/", "pdir/: names a folder; --plot is the file to write (such as pdir/plot.png)"),
    ("made", "made: names a folder; --plot is the file to write (such as made/plot.png)"),
    ("", "--plot is empty: name the file to write"),
])
def test_info_plot_of_a_folder_or_nothing_is_refused(fitted, tmp_path, cli, monkeypatch,
                                                     given, wanted):
    """Round 13: ``--plot pdir/`` wrote a FILE named pdir (``wrote pdir/``, exit 0); an
    existing folder was called a file streamlsq did not write; ``--plot ''`` named the
    working folder ``.``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "made").mkdir()
    before = snapshot(tmp_path)
    line = one_line(cli("info", fitted, "--plot", given))
    assert line == f"streamlsq: error: {wanted}", line
    assert snapshot(tmp_path) == before


# -- the Python functions -------------------------------------------------------------------

def test_wald_test_reads_a_negative_value_as_statsmodels_does(fitted):
    """Round 13: ``wald_test(fit, "x1 = -2")`` was refused: ``not a list of linear
    restrictions (Unknown operator '=-'.)``; statsmodels reads it. The F equals the one of
    the same restriction as a matrix."""
    fit = streamlsq.open_result(fitted)
    by_text = streamlsq.wald_test(fit, "`1` = -2")
    by_matrix = streamlsq.wald_test(fit, [[0.0, 1.0]], [-2.0])
    assert by_text.fvalue == pytest.approx(by_matrix.fvalue, rel=1e-12)
    both = streamlsq.wald_test(fit, ["`0` = 1", "`1` = -2"])  # statsmodels' list of them
    assert both.fvalue == pytest.approx(
        streamlsq.wald_test(fit, np.eye(2), [1.0, -2.0]).fvalue, rel=1e-12)


@pytest.mark.parametrize("given, wanted", [
    (None, "restrictions None: give a string of restrictions on the coefficients' labels"),
    ({"a": 1}, "restrictions {'a': 1}: give a string of restrictions"),
    (True, "restrictions True: give a string of restrictions"),
    ("0 = 0", "'0 = 0': a restriction names no coefficient (a number is read as a number: "
              "back-quote a label that is one, or not a name, as `0` = 0); the "
              "coefficients are ['0', '1']"),
])
def test_wald_test_refuses_what_is_no_restriction_in_one_line(fitted, given, wanted):
    """Round 13: a dict was a ``TypeError``, None and True ``restrictions must be (J, 2)
    with q (J,), got (1, 1)``, ``'0 = 0'`` of coefficients labelled 0 and 1 ``the
    restrictions are linearly dependent``."""
    with pytest.raises(InputError) as refused:
        streamlsq.wald_test(streamlsq.open_result(fitted), given)
    assert str(refused.value).startswith(wanted), str(refused.value)


@pytest.mark.parametrize("given", [None, np.ones((3, 2)), 5])
def test_a_fit_of_what_is_no_data_is_one_line(given, tmp_path):
    """Round 13: ``fit_stream(None)`` said ``None: not a readable Zarr store (No group found
    in store None at path '')``, an array zarr's ``Unsupported type for store_like``."""
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(given, "kf4lls")
    assert f"{type(given).__name__} " in str(refused.value)
    assert "not the data of a fit: give a store's path or URL, a zarr store, an xarray " \
           "Dataset, or a table" in str(refused.value)


@pytest.mark.parametrize("suffix, wanted", [
    ("", "{pop}: variable 'X' is missing (found: none); it holds groups, not arrays (a, b, "
         "lvl, lvl/t): name one, as {pop}#a"),
    ("#lvl", "{pop} (group 'lvl'): variable 'X' is missing (found: none); it holds groups, "
             "not arrays (t): name one, as {pop}#lvl/t"),
])
def test_a_fit_of_a_group_of_groups_names_its_groups(pop, tmp_path, cli, suffix, wanted):
    """Round 13: ``fit kf4lls pop.zarr#lvl`` (a group holding the group t) said ``variable
    'X' is missing (found: none); a stream store needs X (sample, feature) and y (sample,
    target)``, the groups that hold the data not named."""
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", f"{pop}{suffix}", "--out", tmp_path / "o.zarr"))
    assert line == "streamlsq: error: " + wanted.format(pop=pop), line
    assert snapshot(tmp_path) == before
