"""Concurrent runs, run identity and checkpoints (docs/faults.md, "Runs and checkpoints"):
publication is exclusive, a checkpoint belongs to one live run and to one dataset, a corrupt
checkpoint is one line, and --resume after the result was published is a no-op."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from streamlsq import fit_stream, open_result, simulate_stream
from streamlsq.errors import InputError, OutputError
from streamlsq.io.checkpoint import Checkpoint, EntryCheckpoint
from streamlsq.io.results import atomic_store, write_result

from faultkit import cli, invoke, leftovers, refusal, snapshot, start


@pytest.fixture
def run(client):
    def _run(*args):
        return invoke(*args, scheduler=client.scheduler.address)
    return _run


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, client):
    return simulate_stream(tmp_path_factory.mktemp("runs") / "d.zarr", 12_000, 4, 1,
                           chunk_rows=1_000, seed=2, client=client)


@pytest.fixture
def data(tmp_path, simulated):
    """The simulated store, a copy of its own for each test (some rewrite it)."""
    import shutil

    return shutil.copytree(simulated, tmp_path / "d.zarr")


_ENTRY_SAVE = EntryCheckpoint.save
FIT = ("--block-size", "500", "--record-every", "1", "--segment-size", "0.03")


def test_publication_is_exclusive(tmp_path):
    import xarray as xr

    out = tmp_path / "r.zarr"
    # a result names what made it (open_result refuses one without a method)
    first = xr.Dataset({"v": ("i", np.arange(3.0))},
                       attrs={"streamlsq_version": "x", "method": "predict"})
    with pytest.raises(OutputError, match=r"r.zarr: another run published a result here while "
                                          r"this one was running; nothing was replaced"):
        with atomic_store(out) as tmp:  # this run computes ...
            (first * 2).to_zarr(tmp, mode="w", zarr_format=3, consolidated=False)
            write_result(first, out)  # ... while another one publishes
    assert open_result(out).v.values.tolist() == [0.0, 1.0, 2.0]
    assert leftovers(out) == []
    with atomic_store(out, overwrite=True) as tmp:  # --overwrite: replaces a streamlsq result
        (first * 2).to_zarr(tmp, mode="w", zarr_format=3, consolidated=False)
    assert open_result(out).v.values.tolist() == [0.0, 2.0, 4.0]
    assert leftovers(out) == []


def test_two_concurrent_fits_to_one_output(data, tmp_path, client):
    out = tmp_path / "fit.zarr"
    cmd = cli("fit", "rls", data, "--out", out, "--block-size", 20, "--scheduler",
              client.scheduler.address)
    procs = [start(cmd) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    line = next(err for code, err in results if code == 2).strip()
    assert ("another run published a result here" in line or "already exists" in line), line
    assert open_result(out).attrs["complete"] is True and leftovers(out) == []


def test_a_checkpoint_in_use_by_another_run_is_refused(data, tmp_path, run):
    ckpt = tmp_path / "ckpt"
    holder = Checkpoint(ckpt, {"run": "other"})
    holder.open()  # a live run holds the lock
    try:
        before = snapshot(tmp_path)
        line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr",
                           "--checkpoint", ckpt))
        assert f"{ckpt}: checkpoint in use by another run (host " in line
        assert snapshot(tmp_path) == before
    finally:
        holder.close()
    assert run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr", "--checkpoint",
               ckpt).exit_code == 0


def test_resume_refuses_an_input_rewritten_with_the_same_shape(data, tmp_path, client,
                                                              stop_after_commits, run):
    ckpt = tmp_path / "ckpt"
    with stop_after_commits(3):
        fit_stream(data, "kf4lls", checkpoint=ckpt, block_size=500, segment_bytes=500 * 32,
                   client=client, progress=False)
    simulate_stream(data, 12_000, 4, 1, chunk_rows=1_000, seed=3, overwrite=True,
                    client=client)  # same path and shape, other numbers
    line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr", "--checkpoint",
                       ckpt, "--resume", "--block-size", "500", "--segment-size", "0.015625"))
    assert "the input store was rewritten since this checkpoint was made" in line


def test_resume_refuses_committed_rows_changed_in_place(data, tmp_path, client,
                                                        stop_after_commits):
    ckpt = tmp_path / "ckpt"
    kw = dict(block_size=500, segment_bytes=500 * 32, client=client, progress=False)
    with stop_after_commits(3):
        fit_stream(data, "kf4lls", checkpoint=ckpt, **kw)
    g = zarr.open_group(str(data), mode="r+", use_consolidated=False)
    g["X"][100:200] = 0.5  # rows a committed segment read, rewritten without new metadata
    with pytest.raises(InputError, match=r"variable 'X' rows 0-999 changed since the checkpoint "
                                         r".* read them; resuming would mix two datasets"):
        fit_stream(data, "kf4lls", checkpoint=ckpt, resume=True, **kw)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_resume_after_the_result_was_published_is_a_no_op(data, tmp_path, run, engine,
                                                          monkeypatch):
    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    args = ("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, "--engine", engine, *FIT)
    assert run(*args).exit_code == 0
    assert not ckpt.exists()  # removed once the result was published
    published = snapshot(tmp_path)
    again = run(*args, "--resume")
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (f"{out}: already complete (the run being resumed had "
                                    "finished); nothing to do")
    assert snapshot(tmp_path) == published
    # killed between publication and clean-up: the checkpoint is still there
    from streamlsq.io.checkpoint import CheckpointFolder

    monkeypatch.setattr(CheckpointFolder, "remove", lambda self: None)
    assert run(*args, "--overwrite").exit_code == 0
    assert ckpt.is_dir()
    monkeypatch.undo()
    again = run(*args, "--resume")
    assert again.exit_code == 0 and "already complete" in again.output
    assert not ckpt.exists()
    other = run("fit", "rls", data, "--out", out, "--checkpoint", ckpt, "--resume", *FIT)
    assert "already exists" in refusal(other)  # another run's result: not this one's


@pytest.mark.parametrize("damage", ["progress", "state", "segment", "marker"])
def test_a_corrupt_checkpoint_is_one_line(data, tmp_path, client, stop_after_commits, run,
                                          damage):
    ckpt = tmp_path / "ckpt"
    with stop_after_commits(3):
        fit_stream(data, "kf4lls", checkpoint=ckpt, block_size=500, segment_bytes=500 * 32,
                   client=client, progress=False)
    state = json.loads((ckpt / "progress.json").read_text())["state"]
    target = {"progress": ckpt / "progress.json", "state": ckpt / state,
              "segment": ckpt / "segment-000001.npz",
              "marker": ckpt / "streamlsq-checkpoint.json"}[damage]
    target.write_bytes(target.read_bytes()[:25])
    out = tmp_path / "o.zarr"
    line = refusal(run("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, "--resume",
                       "--block-size", "500", "--segment-size", "0.015625"))
    assert f"{ckpt}: checkpoint is corrupt ({target.name}: " in line
    assert "rerun without --resume" in line
    assert not out.exists() and leftovers(out) == []


class _Stop(RuntimeError):
    pass


def _stopped_scan(data, ckpt, n, **kw):
    """A scan fit stopped like a kill right after its n-th committed piece."""
    from streamlsq.stream.resume import ScanPieces

    original = ScanPieces.commit
    calls = []

    def commit_then_stop(self, i, result):
        original(self, i, result)
        calls.append(i)
        if len(calls) == n:
            raise _Stop

    ScanPieces.commit = commit_then_stop
    try:
        with pytest.raises(_Stop):
            fit_stream(data, "kf4lls", checkpoint=ckpt, **kw)
    finally:
        ScanPieces.commit = original


SCAN = dict(engine="scan", block_size=500, record_every=1, segment_bytes=1_000 * 32,
            progress=False)


def test_a_scan_checkpoint_is_not_resumed_by_the_sequential_engine(data, tmp_path, client,
                                                                   run):
    ckpt = tmp_path / "ckpt"
    _stopped_scan(data, ckpt, 2, client=client, **SCAN)
    line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr", "--checkpoint",
                       ckpt, "--resume", *FIT))
    assert line.endswith(f"{ckpt}: the checkpoint of an --engine scan fit; this is --engine "
                         "sequential: run it with --engine scan, or choose another "
                         "--checkpoint"), line


def test_resume_of_a_scan_fit_matches_an_uninterrupted_run(data, tmp_path, client):
    ckpt = tmp_path / "ckpt"
    _stopped_scan(data, ckpt, 4, client=client, **SCAN)
    resumed = fit_stream(data, "kf4lls", checkpoint=ckpt, resume=True, client=client, **SCAN)
    fresh = fit_stream(data, "kf4lls", client=client, **SCAN)
    np.testing.assert_array_equal(resumed.coef, fresh.coef)
    # the committed pieces' rows were not read again, and the speed does not count them
    assert 0 < resumed.attrs["rows_resumed"] < resumed.attrs["n_rows"]
    assert "rows_resumed" not in fresh.attrs
    states = [name for name in fresh.data_vars if name.startswith("state_")]
    assert states  # the final state of the recursion, whatever the solver
    for name in states:
        np.testing.assert_array_equal(resumed[name], fresh[name])


def _stop_after_saves(monkeypatch, n):
    """Entry checkpoints (metalearn steps, EM iterations, study batches) stop like a kill
    right after their n-th commit."""
    from streamlsq.io.checkpoint import EntryCheckpoint

    saved = []

    def save_then_stop(self, name, value, reads=()):
        _ENTRY_SAVE(self, name, value, reads)
        saved.append(name)
        if len(saved) == n:
            raise _Stop

    monkeypatch.setattr(EntryCheckpoint, "save", save_then_stop)


def test_metalearn_em_and_study_checkpoints_of_other_options_are_refused(tmp_path, client,
                                                                         monkeypatch, run):
    from streamlsq import fit_em, metalearn, simulate_mlr
    from streamlsq.studies import run_study

    tasks = simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=2_000, t_light=4, n_heavy=40,
                         t_heavy=30, n_light2=300, t_light2=6, client=client)
    with monkeypatch.context() as m:
        _stop_after_saves(m, 2)
        with pytest.raises(_Stop):
            metalearn(tasks, 2, checkpoint=tmp_path / "m", client=client, progress=False)
        _stop_after_saves(m, 2)
        with pytest.raises(_Stop):
            fit_em(tasks, 2, checkpoint=tmp_path / "e", iterations=5, client=client)
        _stop_after_saves(m, 2)
        with pytest.raises(_Stop):
            run_study("bfgs", tmp_path / "s", quick=True, streams=50,
                      checkpoint=tmp_path / "sc", client=client)
    line = refusal(run("metalearn", tasks, "--out", tmp_path / "m.zarr", "--k", 2,
                       "--splits", 2, "--checkpoint", tmp_path / "m", "--resume"))
    assert "checkpoint belongs to a different run (differs in: --splits 1 then, 2 now)" in line
    line = refusal(run("fit", "em", tasks, "--out", tmp_path / "e.zarr", "--k", 2,
                       "--iterations", 5, "--seed", 1, "--checkpoint", tmp_path / "e",
                       "--resume"))
    assert "checkpoint belongs to a different run (differs in: --seed " in line
    line = refusal(run("study", "bfgs", "--quick", "--streams", 50, "--seed", 1, "--out",
                       tmp_path / "s", "--checkpoint", tmp_path / "sc", "--resume"))
    assert "checkpoint belongs to a different run (differs in: --seed " in line
    line = refusal(run("study", "lms", "--quick", "--out", tmp_path / "s", "--checkpoint",
                       tmp_path / "sc", "--resume"))
    assert ("the checkpoint of a 'streamlsq study bfgs' run; this is 'streamlsq study lms'"
            in line)
    resumed = metalearn(tasks, 2, checkpoint=tmp_path / "m", resume=True, client=client)
    np.testing.assert_array_equal(resumed.coef, metalearn(tasks, 2, client=client).coef)


def test_an_explicit_segment_size_is_capped_by_the_workers_memory(tmp_path):
    """A sixteenth of the smallest worker memory limit at most, as documented: an explicit
    --segment-size above it used to be taken as given and killed the workers."""
    import logging

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GB",
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster, set_as_default=False) as c:
        data = simulate_stream(tmp_path / "d.zarr", 420_000, 20, 1, chunk_rows=10_000,
                               client=c)  # 67.2 MB of X; the cap is 1 GB / 16 = 62.5 MB
        ckpt = tmp_path / "ckpt"
        from streamlsq.io.checkpoint import CheckpointFolder

        kept = CheckpointFolder.remove
        try:
            CheckpointFolder.remove = lambda self: None  # keep the plan to look at it
            fit_stream(data, "kf4lls", out=tmp_path / "f.zarr", checkpoint=ckpt,
                       segment_bytes=2**30, client=c, progress=False)
        finally:
            CheckpointFolder.remove = kept
        segments = json.loads((ckpt / "progress.json").read_text())["segments"]
        assert len(segments) == 2, segments


_KILLED_AFTER_RENAME = """
import os, signal, sys
from streamlsq.io.outputs import OwnedTemporary
tmp = OwnedTemporary(sys.argv[1], "partial")  # its owner file, locked, then the folder
tmp.create()
os.rename(tmp.path, sys.argv[2])  # the publication's rename: the temporary is gone ...
os.kill(os.getpid(), signal.SIGKILL)  # ... and the run killed before removing its owner file
"""


@pytest.mark.parametrize("rerun", ["--resume", "again", "--overwrite"])
def test_an_owner_file_left_by_a_kill_after_publication_is_reclaimed(data, tmp_path, run,
                                                                     rerun):
    """SIGKILL right after the rename into place left .NAME.partial-*.owner, which survived
    --resume (it returned before looking) and reruns (refused before looking)."""
    import subprocess
    import sys

    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    args = ("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, *FIT)
    assert run(*args).exit_code == 0
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_RENAME, str(out),
                             str(tmp_path / "published-elsewhere")])
    assert killed.returncode == -9
    (tmp_path / "published-elsewhere").rmdir()
    assert [p.endswith(".owner") for p in leftovers(out)] == [True]
    published = snapshot(out)
    result = run(*args, rerun) if rerun != "again" else run(*args)
    if rerun == "again":
        assert "already exists" in refusal(result)
    else:
        assert result.exit_code == 0, result.output
    assert leftovers(out) == []
    if rerun != "--overwrite":
        assert snapshot(out) == published
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.zarr", "fit.zarr"]


def _file_size_limit(nbytes):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return limit


@pytest.mark.parametrize("limit, failing", [(64, "streamlsq-checkpoint.json"),
                                            (2_000, "state-000000.npz")])
def test_a_full_disk_for_the_checkpoint_is_one_line_and_resumes(data, tmp_path, client, run,
                                                                limit, failing):
    """A write into the checkpoint past the space left (RLIMIT_FSIZE: EFBIG, as a full disk
    gives ENOSPC) used to be "No space left on device" naming no path, and left its
    temporary (progress.json.tmp); at the marker, a folder holding only the lock."""
    import subprocess

    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    args = ("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, *FIT)
    before = snapshot(tmp_path)
    result = subprocess.run(cli(*args, "--scheduler", client.scheduler.address),
                            capture_output=True, text=True, preexec_fn=_file_size_limit(limit))
    line = refusal(result)
    assert f"{ckpt}: writing the checkpoint failed (File too large; {failing}); its last " \
           "commit stays valid" in line and "--resume" in line
    assert not out.exists() and leftovers(out) == []
    if failing == "streamlsq-checkpoint.json":  # nothing could be written: nothing is left
        assert snapshot(tmp_path) == before
        return
    assert not [p.name for p in ckpt.iterdir() if ".tmp" in p.name]
    resumed = run(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    fresh = fit_stream(data, "kf4lls", block_size=500, record_every=1, client=client)
    np.testing.assert_array_equal(open_result(out).coef, fresh.coef)
    assert not ckpt.exists()


_KILLED_HOLDING_THE_LOCK = """
import os, signal, sys
from pathlib import Path
from streamlsq.io.locks import FileLock
Path(sys.argv[1]).mkdir()
FileLock(Path(sys.argv[1]) / "lock").acquire()  # what CheckpointFolder.open takes first ...
os.kill(os.getpid(), signal.SIGKILL)  # ... killed before it wrote the marker
"""


@pytest.mark.parametrize("resume", [False, True])
def test_a_checkpoint_killed_between_its_lock_and_its_marker_is_used(data, tmp_path, client,
                                                                     run, resume):
    """Such a folder holds only the lock file, which says who held it: it used to be refused
    for ever as "not a streamlsq checkpoint"."""
    import subprocess
    import sys

    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    killed = subprocess.run([sys.executable, "-c", _KILLED_HOLDING_THE_LOCK, str(ckpt)])
    assert killed.returncode == -9 and [p.name for p in ckpt.iterdir()] == ["lock"]
    ok = run("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, *FIT,
             *(["--resume"] if resume else []))
    assert ok.exit_code == 0, ok.output
    fresh = fit_stream(data, "kf4lls", block_size=500, record_every=1, client=client)
    np.testing.assert_array_equal(open_result(out).coef, fresh.coef)
    assert not ckpt.exists() or not any(ckpt.iterdir())  # none of streamlsq's files left


def test_a_users_folder_holding_a_file_named_lock_is_still_refused(data, tmp_path, run):
    ckpt = tmp_path / "mine"
    ckpt.mkdir()
    (ckpt / "lock").write_text("the user's own lock file\n")
    before = snapshot(tmp_path)
    line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr", "--checkpoint",
                       ckpt))
    assert f"{ckpt}: not a streamlsq checkpoint (it holds lock)" in line
    assert snapshot(tmp_path) == before
