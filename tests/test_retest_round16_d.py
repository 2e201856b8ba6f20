"""Re-test round 15, the output folders of ``study`` and ``demo`` (rows 1, 3, 8, 10, 15, 18, 21
of its findings): a folder of the user's, even an empty one, is refused and never replaced;
a rerun deletes only files of the names the study declares, and only the demo's own stores;
a file the user changed is said to be changed; a URL with too few slashes is no local folder;
and a reader that stops early does not stop a run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess

import pytest

from faultkit import cli as command_line
from faultkit import invoke, leftovers, refusal, snapshot

DEMO = ("--rows", 3_000, "--features", 3, "--tasks", 40)


def sha256(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def edit(path, change) -> None:
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def study_out(tmp_path_factory, client):
    """An lms study's folder, written by ``study lms --quick``."""
    out = tmp_path_factory.mktemp("study16") / "st"
    run = invoke("study", "lms", "--quick", "--out", out, scheduler=client.scheduler.address)
    assert run.exit_code == 0, run.output
    return out


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory, client):
    out = tmp_path_factory.mktemp("demo16") / "dm"
    run = invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address)
    assert run.exit_code == 0, run.output
    return out


def copy_of(folder, tmp_path):
    out = tmp_path / folder.name
    shutil.copytree(folder, out)
    return out


# -- rows 8, 10: an empty folder of the user's -------------------------------------------------

COMMANDS = {"study": ("study", "lms", "--quick"), "demo": ("demo", *DEMO)}
INSIDE = {"study": "st", "demo": "demo"}


@pytest.mark.parametrize("command", ["study", "demo"])
@pytest.mark.parametrize("spelling", ["u", "u/.", "."])
def test_an_empty_folder_of_the_users_is_refused_not_replaced(tmp_path, cli, monkeypatch,
                                                              command, spelling):
    """Round 15: ``mkdir u; chmod 2770 u; study --out u`` removed ``u`` and made a new one
    (mode 755: the setgid bit and the group's privacy lost); ``--out .`` from inside an empty
    folder ended with ``unexpected error (ValueError: PosixPath('.') has an empty name)``."""
    u = tmp_path / "u"
    u.mkdir()
    u.chmod(0o2770)
    inode, mode = u.stat().st_ino, stat.S_IMODE(u.stat().st_mode)
    monkeypatch.chdir(u if spelling == "." else tmp_path)
    shown = "." if spelling == "." else "u"
    before = snapshot(tmp_path)
    line = refusal(cli(*COMMANDS[command], "--out", spelling))
    assert line == (f"streamlsq: error: {shown}: exists and was not written by streamlsq "
                    f"{command}; the {command} writes a new folder of its own: name one "
                    f"inside it ({shown}/{INSIDE[command]}), or choose another --out"), line
    assert snapshot(tmp_path) == before
    assert (u.stat().st_ino, stat.S_IMODE(u.stat().st_mode)) == (inode, mode)


# -- row 1: a record listing a user's file with its true digest --------------------------------

def test_a_study_record_listing_a_users_file_with_its_digest_does_not_delete_it(study_out,
                                                                                tmp_path,
                                                                                client):
    """Round 15: ``study.json`` edited to list the user's ``notes.csv`` WITH the sha256 of its
    bytes: the rerun deleted it, exit 0. A rerun now deletes only files of the names the
    study declares (its StudySpec), whatever the record says."""
    out = copy_of(study_out, tmp_path)
    (out / "notes.csv").write_text("a,b\n1,2\n")
    edit(out / "study.json", lambda meta: (meta["tables"].append("notes.csv"),
                                           meta["digests"].update(
                                               {"notes.csv": sha256(out / "notes.csv")})))
    before = snapshot(tmp_path)
    line = refusal(invoke("study", "lms", "--quick", "--out", out,
                          scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds notes.csv, which streamlsq did not "
                    "write; move it or choose another --out"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_study_writes_only_the_files_it_declares(tmp_path):
    """The declaration is what the folder checks: a table of another name is an error of the
    study's code, not a file a rerun would refuse as the user's."""
    import pandas as pd

    from streamlsq.options.study import STUDY_OUTPUTS, study_files
    from streamlsq.studies import STUDIES
    from streamlsq.studies.common import StudyFolder

    assert set(STUDY_OUTPUTS) == set(STUDIES)
    assert study_files("lms") == {
        "demonstration.csv", "fits.csv", "convergence.csv", "demonstration.png",
        "convergence.png", "summary.md", "study.json"}
    folder = StudyFolder(tmp_path / "st", "lms")
    with folder, pytest.raises(RuntimeError, match="writes notes.csv, which its declared"):
        folder.table("notes", pd.DataFrame({"a": [1]}))


def test_a_study_folder_holds_what_it_declares(study_out):
    from streamlsq.options.study import study_files

    assert {p.name for p in study_out.iterdir()} == study_files("lms")


# -- row 3: a file of the run's that the user changed ------------------------------------------

def test_a_study_file_changed_since_is_said_to_be_changed(study_out, tmp_path, client):
    """Round 15: ``fits.csv`` with a line appended: ``holds fits.csv, which streamlsq did not
    write``, where streamlsq wrote it and the user changed it."""
    out = copy_of(study_out, tmp_path)
    with open(out / "fits.csv", "a") as f:
        f.write("mine\n")
    before = snapshot(tmp_path)
    line = refusal(invoke("study", "lms", "--quick", "--out", out,
                          scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds fits.csv, changed since streamlsq wrote "
                    "it; move it or choose another --out"), line
    assert snapshot(tmp_path) == before


def test_a_demo_file_changed_since_is_said_to_be_changed(demo_out, tmp_path, client):
    out = copy_of(demo_out, tmp_path)
    with open(out / "summary.md", "a") as f:
        f.write("mine\n")
    before = snapshot(tmp_path)
    line = refusal(invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address))
    assert line == (f"streamlsq: error: {out}: holds summary.md, changed since streamlsq demo "
                    "wrote it; move it or choose another --out"), line
    assert snapshot(tmp_path) == before


# -- row 18: a store of the user's in place of the demo's --------------------------------------

def test_a_users_store_in_place_of_the_demos_is_refused(demo_out, tmp_path, client):
    """Round 15: ``model.zarr`` replaced by the user's own result store (one streamlsq wrote)
    was deleted by the rerun, exit 0. demo.json records each store by the digest of its
    root zarr.json: another store of the same name is not the demo's."""
    out = copy_of(demo_out, tmp_path)
    meta = json.loads((out / "demo.json").read_text())
    assert meta["stores"]["model.zarr"] == sha256(out / "model.zarr" / "zarr.json")
    shutil.rmtree(out / "model.zarr")
    shutil.copytree(out / "kf4lls-scan.zarr", out / "model.zarr")  # a streamlsq result
    before = snapshot(tmp_path)
    line = refusal(invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address))
    assert line.startswith(f"streamlsq: error: {out}: holds model.zarr, which this demo did "
                           "not write"), line
    assert line.endswith("; move it or choose another --out"), line
    assert snapshot(tmp_path) == before


def test_a_demo_rerun_replaces_its_own_stores(demo_out, tmp_path, client):
    """The record's digests are those the rerun checks: the demo's own folder is replaced."""
    out = copy_of(demo_out, tmp_path)
    run = invoke("demo", "--out", out, *DEMO, scheduler=client.scheduler.address)
    assert run.exit_code == 0, run.output
    meta = json.loads((out / "demo.json").read_text())
    assert meta["complete"] is True
    assert meta["stores"] == {n: sha256(out / n / "zarr.json") for n in meta["stores"]}


# -- row 15: a URL with too few slashes ---------------------------------------------------------

@pytest.mark.parametrize("command,out,fixed", [
    ("study", "s3:/b/st", "s3://b/st"), ("study", "memory:/st", "memory://st"),
    ("demo", "s3:/b/d", "s3://b/d")])
def test_a_url_with_too_few_slashes_is_no_local_folder(tmp_path, cli, monkeypatch, command,
                                                       out, fixed):
    """Round 15: ``study --out s3:/b/st`` wrote local folders ``s3:/b/st``, as other commands
    refuse to."""
    monkeypatch.chdir(tmp_path)
    line = refusal(cli(*COMMANDS[command], "--out", out))
    first = out.split("/")[0]
    assert line == (f"streamlsq: error: {out}: not a URL, which is scheme://... (here "
                    f"{fixed}); to write into a local folder named '{first}', create it first "
                    f"(mkdir './{first}')"), line
    assert list(tmp_path.iterdir()) == []


# -- row 21: a reader that stops during the run ------------------------------------------------

def test_a_demo_whose_reader_stopped_completes(tmp_path, client):
    """Round 15: ``demo --out dh | head -1`` exited 0 with nothing and no ``dh``: a progress
    line met the closed pipe and the demo stopped. The run now completes and publishes."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        run = subprocess.run(command_line("demo", "--out", tmp_path / "dh", *DEMO,
                                          "--scheduler", client.scheduler.address),
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=600)
    finally:
        os.close(write)
    assert (run.returncode, run.stderr) == (0, "")
    meta = json.loads((tmp_path / "dh" / "demo.json").read_text())
    assert meta["complete"] is True
    assert meta["files"] == {n: sha256(tmp_path / "dh" / n)
                             for n in ("metalearn.png", "stream.png", "summary.md")}


@pytest.mark.parametrize("command,what,made", [
    ("study", "a study", "tables, figures, summary.md"),
    ("demo", "the demo", "stores, figures, summary.md")])
def test_an_object_store_url_is_refused_not_written_as_a_local_folder(tmp_path, cli,
                                                                      monkeypatch, command,
                                                                      what, made):
    """Round 16: ``study --out s3://b/st`` (the spelling the not-a-URL line shows) printed
    ``wrote s3:/b/st`` and made the local folders ``s3:/b/st``: a path reads ``//`` as
    ``/``. Study and demo write local folders only."""
    monkeypatch.chdir(tmp_path)
    line = refusal(cli(*COMMANDS[command], "--out", "s3://b/st"))
    assert line == (f"streamlsq: error: s3://b/st: {what} writes a local folder ({made}); an "
                    "object store URL is not one: name a local folder, and copy it to the "
                    "store afterwards"), line
    assert list(tmp_path.iterdir()) == []
