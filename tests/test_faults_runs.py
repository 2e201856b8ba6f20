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
from streamlsq.io.checkpoint import Checkpoint
from streamlsq.io.results import atomic_store, write_result

from faultkit import cli, invoke, leftovers, refusal, snapshot, start


@pytest.fixture
def run(client):
    def _run(*args):
        return invoke(*args, scheduler=client.scheduler.address)
    return _run


@pytest.fixture
def data(tmp_path, client):
    return simulate_stream(tmp_path / "d.zarr", 12_000, 4, 1, chunk_rows=1_000, seed=2,
                           client=client)


FIT = ("--block-size", "500", "--record-every", "1", "--segment-size", "0.03")


def test_publication_is_exclusive(tmp_path):
    import xarray as xr

    out = tmp_path / "r.zarr"
    first = xr.Dataset({"v": ("i", np.arange(3.0))}, attrs={"streamlsq_version": "x"})
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
    assert "checkpoint of a 'fit-scan' run, not of 'fit'" in line


def test_resume_of_a_scan_fit_matches_an_uninterrupted_run(data, tmp_path, client):
    ckpt = tmp_path / "ckpt"
    _stopped_scan(data, ckpt, 4, client=client, **SCAN)
    resumed = fit_stream(data, "kf4lls", checkpoint=ckpt, resume=True, client=client, **SCAN)
    fresh = fit_stream(data, "kf4lls", client=client, **SCAN)
    np.testing.assert_array_equal(resumed.coef, fresh.coef)
    np.testing.assert_array_equal(resumed.state_H, fresh.state_H)
