"""Re-test round 14, the output folders of ``study`` and ``demo`` (rows 35, 42-44, 46, 47, 51,
73 of its findings): a rerun deletes only the files the earlier run provably wrote (its
record lists each with the digest of its bytes), an empty folder of the user's is left as
found (round 16: refused, never replaced; a new folder is named inside it), SIGTERM undoes
what the run made as Ctrl-C does, and every refusal is one line before any work, naming
what and where, the folder left as it was found."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess

import pytest

from conftest import CHECKPOINTED_FIT as FIT
from faultkit import cli as command_line
from faultkit import invoke, leftovers, refusal, snapshot

DEMO = ("--rows", 5_000, "--features", 4, "--tasks", 500)


def sha256(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def edit(path, change) -> None:
    """The JSON file ``path`` rewritten with ``change(its object)`` applied."""
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def study_run(tmp_path_factory, client):
    """``mkdir results && streamlsq study lms --quick --out results/lms``: (the folder, the
    run). Round 16: ``--out results`` itself, the user's empty folder, is refused
    (tests/test_retest_round16_d.py)."""
    out = tmp_path_factory.mktemp("study") / "results" / "lms"
    out.parent.mkdir()
    return out, invoke("study", "lms", "--quick", "--out", out,
                       scheduler=client.scheduler.address)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, client):
    """``streamlsq demo --out dm/a/b`` where ``dm`` exists and ``dm/a`` does not."""
    root = tmp_path_factory.mktemp("demo") / "dm"
    root.mkdir()
    return root / "a" / "b", invoke("demo", "--out", root / "a" / "b", *DEMO,
                                    scheduler=client.scheduler.address)


def copy_of(folder, tmp_path):
    out = tmp_path / folder.name
    shutil.copytree(folder, out)
    return out


# -- 35: an empty folder of the user's ---------------------------------------------------------

def test_a_study_writes_a_folder_inside_an_empty_folder_of_the_users(study_run):
    """Round 14: ``mkdir u; study lms --out u`` was refused after the work with ``u: exists
    and was not written by streamlsq; --overwrite replaces only streamlsq's own results``,
    an option study does not have. Round 16: refused before any work, in a line naming
    ``u/st``; a folder named inside it is written."""
    out, run = study_run
    assert run.exit_code == 0, run.output
    assert run.output.startswith(f"wrote {out}: convergence.csv, convergence.png, "
                                 "demonstration.csv, demonstration.png, fits.csv, summary.md (")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["convergence.csv", "convergence.png", "demonstration.csv",
                     "demonstration.png", "fits.csv", "study.json", "summary.md"]
    # the record keeps each file's digest, computed here from the bytes
    meta = json.loads((out / "study.json").read_text())
    assert meta["digests"] == {n: sha256(out / n) for n in names if n != "study.json"}


@pytest.mark.parametrize("command", ["study", "demo"])
def test_a_failed_run_leaves_an_empty_folder_of_the_users_as_found(tmp_path, client,
                                                                   monkeypatch, command):
    """The empty folder is the user's: a run that fails into a folder inside it leaves it
    there, empty."""
    from streamlsq.studies import demo, lms

    class Boom(Exception):
        pass

    def boom(*args, **kwargs):
        raise Boom("stopped")

    monkeypatch.setattr(*((lms, "lms_convergence_table") if command == "study"
                          else (demo, "simulate_stream")), boom)
    out = tmp_path / "u" / "st"
    out.parent.mkdir()
    before = snapshot(tmp_path)
    args = ("study", "lms", "--quick") if command == "study" else ("demo", *DEMO)
    run = invoke(*args, "--out", out, scheduler=client.scheduler.address)
    assert run.exit_code == 1 and isinstance(run.exception, SystemExit)
    assert "Boom: stopped" in run.stderr
    assert snapshot(tmp_path) == before and out.parent.is_dir() and not out.exists()
    assert leftovers(out) == []


def test_a_study_rerun_replaces_its_own_files(study_run, tmp_path, client):
    out = copy_of(study_run[0], tmp_path)
    before = json.loads((out / "study.json").read_text())["digests"]
    run = invoke("study", "lms", "--quick", "--seed", 1, "--out", out,
                 scheduler=client.scheduler.address)
    assert run.exit_code == 0, run.output
    after = json.loads((out / "study.json").read_text())["digests"]
    assert set(after) == set(before) and after["fits.csv"] != before["fits.csv"]
    assert after == {n: sha256(out / n) for n in after}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lms"]


# -- 46, 47: a record edited to list a user's file ---------------------------------------------

@pytest.mark.parametrize("listed", ["with another digest", "without a digest"])
def test_a_study_record_listing_a_users_file_does_not_delete_it(study_run, tmp_path, client,
                                                               listed):
    """Round 14: ``study.json`` edited to list ``notes.csv`` (and ``../victim.csv``), the
    user's file put in the folder: the rerun deleted notes.csv, exit 0."""
    out = copy_of(study_run[0], tmp_path)
    (out / "notes.csv").write_text("a,b\n1,2\n")
    (tmp_path / "victim.csv").write_text("mine\n")

    def lists(meta):
        meta["tables"] += ["notes.csv", "../victim.csv"]
        if listed == "with another digest":
            meta["digests"]["notes.csv"] = "sha256:" + hashlib.sha256(b"other").hexdigest()
            meta["digests"]["../victim.csv"] = sha256(tmp_path / "victim.csv")

    edit(out / "study.json", lists)
    before = snapshot(tmp_path)
    line = refusal(invoke("study", "lms", "--quick", "--out", out,
                          scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds notes.csv, which streamlsq did not "
                    "write; move it or choose another --out"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_study_record_without_digests_is_not_trusted(study_run, tmp_path, client):
    """A record of an earlier version lists names only, which an edit can extend: nothing in
    the folder is shown to be the study's, and the user is told how to go on."""
    out = copy_of(study_run[0], tmp_path)
    edit(out / "study.json", lambda meta: meta.pop("digests"))
    before = snapshot(tmp_path)
    line = refusal(invoke("study", "lms", "--quick", "--out", out,
                          scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds convergence.csv and 5 more, which its "
                    "study.json (of an earlier streamlsq) records without a digest, so it "
                    "cannot be told from a file of yours; move them (or remove the folder "
                    "yourself) or choose another --out"), line
    assert snapshot(tmp_path) == before


def test_the_demo_makes_the_missing_folders_above_its_out(demo_run):
    """Round 14: ``demo --out dm/a/b`` (dm/a missing) was refused after the cluster started,
    ``dm/a: output folder does not exist``; a study makes them."""
    out, run = demo_run
    assert run.exit_code == 0, run.output
    assert "6. figures:" in run.output
    meta = json.loads((out / "demo.json").read_text())
    assert meta["complete"] is True
    assert meta["files"] == {n: sha256(out / n) for n in ("metalearn.png", "stream.png",
                                                           "summary.md")}


@pytest.mark.parametrize("case", ["a file named in the marker", "a file in a store",
                                  "a marker without digests"])
def test_a_demo_record_listing_a_users_file_does_not_delete_it(demo_run, tmp_path, client,
                                                              case):
    """Round 14: ``demo.json`` edited to list the user's ``notes.txt`` (and
    ``../dvictim.txt``): the rerun deleted notes.txt, exit 0. A name the demo never writes is
    not its own, whatever the marker says, nor a file put inside one of its stores."""
    out = copy_of(demo_run[0], tmp_path)
    if case == "a file named in the marker":
        (out / "notes.txt").write_text("mine\n")
        (tmp_path / "dvictim.txt").write_text("mine\n")
        edit(out / "demo.json", lambda meta: meta["files"].update(
            {"notes.txt": sha256(out / "notes.txt"),
             "../dvictim.txt": sha256(tmp_path / "dvictim.txt")}))
        said = "notes.txt, which streamlsq demo did not write; move it"
    elif case == "a file in a store":
        (out / "stream.zarr" / "notes.txt").write_text("mine\n")
        said = "stream.zarr/notes.txt, which streamlsq demo did not write; move it"
    else:  # an earlier version's marker: the names alone
        edit(out / "demo.json", lambda meta: meta.update(files=sorted(meta["files"])))
        said = ("metalearn.png and 2 more, which its demo.json (of an earlier streamlsq, or "
                "of a demo that was stopped) records without a digest, so it cannot be told "
                "from a file of yours; move them (or remove the folder yourself)")
    before = snapshot(tmp_path)
    line = refusal(invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address))
    assert line == f"streamlsq: error: {out}: holds {said} or choose another --out", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- 43, 44, 73: refused before any work, as the other commands say it -------------------------

@pytest.mark.parametrize("command", [("study", "lms", "--quick"), ("demo", *DEMO)])
def test_an_out_under_a_file_is_refused_as_other_commands_say_it(tmp_path, cli, command):
    """Round 14: ``study --out afile/st`` said ``afile: File exists`` (Python's words, when
    the folder was made, after the work); ``demo`` said ``output folder does not exist``."""
    (tmp_path / "afile").write_text("mine\n")
    before = snapshot(tmp_path)
    out = tmp_path / "afile" / "x" / "st"
    line = refusal(cli(*command, "--out", out))
    assert line == (f"streamlsq: error: {out}: {tmp_path / 'afile'} is a file, not a folder; "
                    "choose another --out"), line
    assert snapshot(tmp_path) == before


def test_demo_out_empty_is_refused_as_study_refuses_it(tmp_path, cli, monkeypatch):
    """Round 14: ``demo --out ''`` said ``.: exists and was not written by streamlsq demo``."""
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    line = refusal(cli("demo", *DEMO, "--out", ""))
    assert line == "streamlsq: error: --out is empty: name the path to write", line
    assert snapshot(tmp_path) == before


# -- 42: SIGTERM ---------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["study", "demo"])
@pytest.mark.parametrize("out", ["x/y/st", "empty/st"])
def test_sigterm_undoes_what_the_run_made_as_ctrl_c_does(tmp_path, client, monkeypatch,
                                                         command, out):
    """Round 14: SIGTERM (``kill``, ``timeout``, a scheduler stopping a job) during ``study
    --out keep/x/y/st`` ended the process at once (exit 143, no word), leaving ``keep/x``
    and ``keep/x/y``, which the study had made; Ctrl-C removed them. Now one line, exit
    143, and the folders as found (an empty folder of the user's kept, empty)."""
    from streamlsq.studies import demo, lms

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM was not handled")

    monkeypatch.setattr(*((lms, "lms_convergence_table") if command == "study"
                          else (demo, "simulate_stream")), terminated)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "empty").mkdir()
    before, handler = snapshot(tmp_path), signal.getsignal(signal.SIGTERM)
    args = ("study", "lms", "--quick") if command == "study" else ("demo", *DEMO)
    run = invoke(*args, "--out", keep / out, scheduler=client.scheduler.address)
    assert run.exit_code == 143, run.output
    assert run.stderr.strip() == "streamlsq: error: terminated"
    assert snapshot(tmp_path) == before and leftovers(keep / out) == []
    assert signal.getsignal(signal.SIGTERM) == handler  # the command's handler taken back


# -- 51: a folder where a checkpoint writes a file -----------------------------------------------

@pytest.mark.parametrize("resume", [False, True])
def test_a_folder_in_a_checkpoint_where_it_writes_a_file_is_named(checkpointed_rows,
                                                                  stopped_fit, tmp_path,
                                                                  client, resume):
    """Round 14: ``progress.json`` replaced by a folder holding the user's ``mine``:
    ``--resume`` said ``checkpoint is corrupt ...; rerun without --resume``, and without it
    ``writing the checkpoint failed (Is a directory ...) free space ... run again with
    --resume``: a circle. Both now name the folder, which is not streamlsq's, before any
    work."""
    (stopped_fit / "progress.json").unlink()
    (stopped_fit / "progress.json").mkdir()
    (stopped_fit / "progress.json" / "mine").write_text("mine\n")
    before = snapshot(tmp_path)
    done = subprocess.run(
        command_line("fit", "kf4lls", checkpointed_rows, "--out", tmp_path / "o.zarr",
                     "--block-size", FIT["block_size"], "--segment-size",
                     FIT["segment_bytes"] / 2**20, "--checkpoint", stopped_fit,
                     *(["--resume"] if resume else []), "--scheduler",
                     client.scheduler.address),
        capture_output=True, text=True, timeout=120)
    line = refusal(done)
    assert line == (f"streamlsq: error: {stopped_fit}: holds progress.json, a folder where the "
                    "run writes a file, which streamlsq did not make and will not remove: "
                    "move it or choose another --checkpoint"), line
    assert snapshot(tmp_path) == before
