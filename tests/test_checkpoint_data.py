"""A checkpoint is data whose reading runs no code (docs/faults.md, "Runs and checkpoints"):
committed entries are ``.npz`` files read with ``allow_pickle=False``; a pickle or an array of
Python objects planted in a checkpoint folder is refused on ``--resume`` in one line naming
the file, before anything is read or run, the folder left as it was; a study's batches are
named by a digest that needs no pickle."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamlsq import fit_em, fit_stream, metalearn, simulate_mlr, simulate_stream
from streamlsq.io import checkpoint as checkpoint_module
from streamlsq.io.checkpoint import EntryCheckpoint, data_digest, decode_data, encode_data

from faultkit import invoke, refusal, snapshot

_ENTRY_SAVE = EntryCheckpoint.save


class _Stop(RuntimeError):
    pass


class _Canary:
    """A pickle that, when loaded, creates the file ``path`` (what an attacker's code would
    do, harmlessly)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _stop_after_saves(monkeypatch, n):
    saved = []

    def save_then_stop(self, name, value, reads=()):
        _ENTRY_SAVE(self, name, value, reads)
        saved.append(name)
        if len(saved) == n:
            raise _Stop

    monkeypatch.setattr(EntryCheckpoint, "save", save_then_stop)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    return simulate_mlr(tmp_path_factory.mktemp("data") / "t.zarr", k=2, d=3, n_light=2_000,
                        t_light=4, n_heavy=40, t_heavy=30, n_light2=300, t_light2=6, seed=5,
                        client=client)


def _interrupted_metalearn(tasks, ckpt, client):
    with pytest.MonkeyPatch.context() as m:
        _stop_after_saves(m, 2)
        with pytest.raises(_Stop):
            metalearn(tasks, 2, checkpoint=ckpt, client=client, progress=False)


def _plant(ckpt: Path, how: str, canary: Path) -> Path:
    """Put the attacker's file into the checkpoint ``ckpt``; returns its path."""
    entry = sorted(ckpt.glob("entry-*.npz"))[-1]
    if how == "pickle":  # an earlier version's entry, or one planted beside the real ones
        target = entry.with_suffix(".pkl")
        target.write_bytes(pickle.dumps(_Canary(canary)))
    elif how == "object array in an entry":  # the committed entry, rewritten
        target = entry
        np.savez(target, structure=np.frombuffer(b'{"array": 0}', np.uint8),
                 a0=np.array([_Canary(canary)], dtype=object))
    else:  # "object array in a step": a file of the run's passes
        target = ckpt / "step-000-pass.npz"
        np.savez(target, x=np.array([_Canary(canary)], dtype=object))
    return target


@pytest.mark.parametrize("how", ["pickle", "object array in an entry",
                                 "object array in a step"])
def test_code_planted_in_a_checkpoint_is_refused_and_never_run(tasks, tmp_path, client, how):
    ckpt, canary, out = tmp_path / "ckpt", tmp_path / "canary", tmp_path / "m.zarr"
    _interrupted_metalearn(tasks, ckpt, client)
    planted = _plant(ckpt, how, canary)
    before = snapshot(tmp_path)
    line = refusal(invoke("metalearn", tasks, "--out", out, "--k", 2, "--checkpoint", ckpt,
                          "--resume", scheduler=client.scheduler.address))
    assert line.startswith(f"streamlsq: error: {planted}: "), line
    if how == "pickle":
        assert "a pickle (an earlier version's checkpoint entry), which streamlsq never " \
               "loads: it could run code; rerun without --resume" in line
    else:
        assert "holds an array of Python objects" in line and "never loads" in line
    assert not canary.exists()
    assert snapshot(tmp_path) == before  # nothing written, the lock file untouched
    assert not out.exists()
    # the planted file is live: loading it as pickle would have run the attacker's code
    if how == "pickle":
        pickle.loads(planted.read_bytes())
    else:
        with np.load(planted, allow_pickle=True) as z:
            [z[k] for k in z.files]
    assert canary.exists()
    canary.unlink()
    # starting afresh removes (or replaces) the planted file, streamlsq's kind, and ends
    # normally
    again = metalearn(tasks, 2, checkpoint=ckpt, client=client, progress=False)
    np.testing.assert_array_equal(again.coef, metalearn(tasks, 2, client=client).coef)
    assert not canary.exists() and not list(ckpt.glob("*.pkl"))
    for path in ckpt.glob("*.npz"):  # what the fresh run left is data only
        with np.load(path, allow_pickle=False) as z:
            [z[k] for k in z.files]


def test_an_object_array_in_a_sequential_fits_state_is_refused(tmp_path, client,
                                                               stop_after_commits):
    data = simulate_stream(tmp_path / "d.zarr", 6_000, 3, 1, chunk_rows=1_000, seed=2,
                           client=client)
    ckpt, canary = tmp_path / "ckpt", tmp_path / "canary"
    with stop_after_commits(2):
        fit_stream(data, "kf4lls", checkpoint=ckpt, block_size=500, segment_bytes=500 * 32,
                   client=client, progress=False)
    state = ckpt / json.loads((ckpt / "progress.json").read_text())["state"]
    arrays = dict(np.load(state))
    np.savez(state, **arrays, extra=np.array([_Canary(canary)], dtype=object))
    before = snapshot(tmp_path)
    line = refusal(invoke("fit", "kf4lls", data, "--out", tmp_path / "o.zarr", "--checkpoint",
                          ckpt, "--resume", "--block-size", 500, "--segment-size", "0.015625",
                          scheduler=client.scheduler.address))
    assert f"{state}: holds an array of Python objects ('extra')" in line
    assert not canary.exists() and snapshot(tmp_path) == before


def test_resumed_metalearn_em_and_study_equal_uninterrupted_runs(tasks, tmp_path, client,
                                                                 monkeypatch):
    from streamlsq.studies import run_study

    with monkeypatch.context() as m:
        _stop_after_saves(m, 3)
        with pytest.raises(_Stop):
            metalearn(tasks, 2, checkpoint=tmp_path / "m", client=client, progress=False)
        _stop_after_saves(m, 3)
        with pytest.raises(_Stop):
            fit_em(tasks, 2, checkpoint=tmp_path / "e", iterations=6, tol=0, client=client)
        _stop_after_saves(m, 2)
        with pytest.raises(_Stop):
            run_study("interleaved", tmp_path / "s", quick=True, iterations=1_000,
                      checkpoint=tmp_path / "sc", client=client)
    assert list((tmp_path / "m").glob("entry-*.npz")) and not list(tmp_path.rglob("*.pkl"))
    resumed = metalearn(tasks, 2, checkpoint=tmp_path / "m", resume=True, client=client)
    fresh = metalearn(tasks, 2, client=client)
    for name in ("basis", "coef", "noise_var", "weight", "light_cluster", "heavy_cluster"):
        np.testing.assert_array_equal(resumed[name], fresh[name], err_msg=name)
    resumed = fit_em(tasks, 2, checkpoint=tmp_path / "e", resume=True, iterations=6, tol=0,
                     client=client)
    fresh = fit_em(tasks, 2, iterations=6, tol=0, client=client)
    np.testing.assert_array_equal(resumed.log_likelihood, fresh.log_likelihood)
    np.testing.assert_array_equal(resumed.coef, fresh.coef)
    resumed = run_study("interleaved", tmp_path / "s", quick=True, iterations=1_000,
                        checkpoint=tmp_path / "sc", resume=True, client=client)
    fresh = run_study("interleaved", tmp_path / "f", quick=True, iterations=1_000,
                      client=client)
    assert resumed.tables.keys() == fresh.tables.keys()
    for name, table in fresh.tables.items():
        assert resumed.tables[name].equals(table), name


def test_entry_values_round_trip_with_their_types_and_bits():
    value = {"n": 3, 2: [1.5, float("nan"), None, True, "s"],
             ("a", 1): (np.float32(0.1), np.int64(7), np.arange(4, dtype=np.int16)),
             "labels": np.array(["x", "yz"]), "z": np.array([1 + 2j]), "e": np.empty((0, 3))}
    arrays = []
    structure = json.loads(json.dumps(encode_data(value, arrays)))
    got = decode_data(structure, [a.copy() for a in arrays])
    assert list(got) == ["n", 2, ("a", 1), "labels", "z", "e"]
    assert got["n"] == 3 and type(got["n"]) is int
    assert got[2][0] == 1.5 and np.isnan(got[2][1]) and got[2][2:] == [None, True, "s"]
    f32, i64, i16 = got[("a", 1)]
    assert type(f32) is np.float32 and f32 == np.float32(0.1)
    assert type(i64) is np.int64 and i64 == 7
    assert i16.dtype == np.int16 and i16.tolist() == [0, 1, 2, 3]
    assert got["labels"].tolist() == ["x", "yz"] and got["z"].tolist() == [1 + 2j]
    assert got["e"].shape == (0, 3)
    for bad in (object(), np.array([object()], dtype=object), {1, 2}, lambda: 0):
        with pytest.raises(TypeError, match="a checkpoint holds"):
            encode_data(bad, [])
    for bad in ({"array": 5}, {"eval": "1"}, {"dict": [[[1], 2]]}, {"list": 3}):
        with pytest.raises(ValueError):
            decode_data(bad, [np.zeros(1)])


def test_a_study_batch_digest_is_stable_across_processes_and_names_its_arguments():
    from streamlsq.studies.bfgs import regression_methods
    from streamlsq.studies.lms import _schedules

    args = ("batch", (0, 1, 25, regression_methods(), 60), _schedules([0.01, 0.02]))
    here = data_digest(args)
    code = ("from streamlsq.io.checkpoint import data_digest;"
            "from streamlsq.studies.bfgs import regression_methods;"
            "from streamlsq.studies.lms import _schedules;"
            "print(data_digest(('batch', (0, 1, 25, regression_methods(), 60),"
            " _schedules([0.01, 0.02]))))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.strip()
    assert here == there
    assert data_digest(("batch", (0, 1, 25, regression_methods(), 61),
                        _schedules([0.01, 0.02]))) != here
    assert data_digest(("batch", (0, 1, 25, regression_methods(), 60),
                        _schedules([0.01, 0.03]))) != here


def test_an_interrupt_inside_a_checkpoint_write_stays_an_interrupt(tmp_path, monkeypatch):
    """Ctrl-C while np.savez writes an entry (re-test round 7, W10): zipfile raised its own
    ValueError as it closed ("Can't close the ZIP file while there is an open writing
    handle"), so the command ended with exit 1 and a traceback, and the temporary stayed.
    Now the interrupt is what the command sees (exit 130, "interrupted"), and no temporary
    is left."""
    import zipfile

    opened = zipfile.ZipFile.open
    writes = []

    def open_then_interrupt(self, name, mode="r", **kw):
        handle = opened(self, name, mode, **kw)
        if mode == "w":
            writes.append(name)
            raise KeyboardInterrupt  # the writing handle open, as a Ctrl-C mid-write
        return handle

    monkeypatch.setattr(zipfile.ZipFile, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_module._atomic_savez(tmp_path / "entry-x.npz", a=np.arange(3.0))
    assert writes and list(tmp_path.iterdir()) == []
