"""Cases of the re-test of round 10 (right outcome, unclear way): a resume with one option
changed named five candidate options (and one that had not changed) without values, or a
field in Python's spelling (``record_every``, ``chunk_tasks``), or the checkpoint's kind by
an internal name (``'fit'``, ``'fit-scan'``); ``fit kf4lls --solver normal --diagnostics``
was refused in Python's spelling on the command line; ``open_stream``, ``open_tasks`` and
``open_dataset`` ignored ``storage_options`` for a local path without a word (``open_result``
refused them); metalearn's refusals of ``heavy_rows``, ``k_max`` and ``threshold`` named the
command line's options alone to a Python caller."""

from __future__ import annotations

import json

import pytest

import streamlsq
from streamlsq.errors import InputError

from conftest import CHECKPOINTED_FIT as FIT
from conftest import one_line
from faultkit import leftovers, snapshot, unlocked


class Stop(Exception):
    pass


@pytest.fixture(scope="module")
def rows(checkpointed_rows):
    return checkpointed_rows


def _different(ckpt, change: str) -> str:
    return (f"{ckpt}: checkpoint belongs to a different run (differs in: {change}); rerun "
            "without --resume or point --checkpoint elsewhere")


# -- 1. a fit resumed with one option changed ------------------------------------------------

@pytest.mark.parametrize("changed, named", [
    ({"block_size": 50}, "--block-size 100 then, 50 now"),
    ({"epochs": 2}, "--epochs 1 then, 2 now"),
    ({"shuffle": True}, "--shuffle not given then, given now"),
    ({"dtype": "float32"}, "--dtype float64 then, float32 now"),
    ({"record_every": 2}, "--record-every not given then, 2 now"),
])
def test_a_resume_names_the_option_changed_with_both_values(rows, stopped_fit, tmp_path,
                                                            client, changed, named):
    """Round 10: ``differs in: plan (the blocks: --block-size, --first-block-size, --epochs,
    --shuffle, --seed), segments (the rows per task: --segment-size)`` for --block-size
    alone (--segment-size unchanged), ``record_every (--record-every)`` without values."""
    before = unlocked(snapshot(tmp_path))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                             client=client, **{**FIT, **changed})
    assert str(refused.value) == _different(stopped_fit, named)
    assert unlocked(snapshot(tmp_path)) == before


def test_the_command_line_names_them_so_too(rows, stopped_fit, tmp_path, cli):
    before = unlocked(snapshot(tmp_path))
    out = tmp_path / "o.zarr"
    common = ("fit", "kf4lls", rows, "--out", out, "--checkpoint", stopped_fit, "--resume",
              "--segment-size", 2**12 / 2**20)
    line = one_line(cli(*common, "--block-size", 250, "--epochs", 2))
    assert line == "streamlsq: error: " + _different(
        stopped_fit, "--block-size 100 then, 250 now, --epochs 1 then, 2 now"), line
    line = one_line(cli(*common, "--block-size", 100, "--engine", "scan"))
    assert line == (f"streamlsq: error: {stopped_fit}: the checkpoint of an --engine "
                    "sequential fit; this is --engine scan: run it with --engine sequential, "
                    "or choose another --checkpoint"), line
    assert unlocked(snapshot(tmp_path)) == before and leftovers(out) == []


def test_a_checkpoint_that_kept_no_options_keeps_the_earlier_wording(rows, stopped_fit,
                                                                     client):
    """A checkpoint of an earlier version (no ``options`` in its marker and progress) is
    still refused, naming the entries and the options that shape them."""
    for name in ("progress.json", "streamlsq-checkpoint.json"):
        path = stopped_fit / name
        saved = json.loads(path.read_text())
        saved.pop("options")
        path.write_text(json.dumps(saved))
    with pytest.raises(InputError, match=r"differs in: plan \(the blocks: --block-size, "
                                         r"--first-block-size, --epochs, --shuffle, --seed\)"):
        streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                             client=client, **{**FIT, "block_size": 50})


# -- 2. metalearn resumed with one option changed ------------------------------------------

@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    """A task store with the variable 'role'."""
    root = tmp_path_factory.mktemp("tasks")
    return streamlsq.simulate_mlr(root / "tasks.zarr", k=2, d=3, n_light=300, t_light=4,
                                  n_heavy=40, t_heavy=30, n_light2=100, t_light2=6, seed=1,
                                  client=client)


@pytest.fixture
def stopped_metalearn(tasks, tmp_path, client, monkeypatch):
    from streamlsq.io.checkpoint import EntryCheckpoint

    save = EntryCheckpoint.save

    def save_then_stop(self, name, value, reads=()):
        save(self, name, value, reads)
        raise Stop(name)

    ckpt = tmp_path / "mk"
    with monkeypatch.context() as m:
        m.setattr(EntryCheckpoint, "save", save_then_stop)
        with pytest.raises(Stop):
            streamlsq.metalearn(tasks, 2, checkpoint=ckpt, chunk_tasks=50, client=client,
                                progress=False)
    assert (ckpt / "progress.json").exists()
    return ckpt


@pytest.mark.parametrize("changed, named", [
    ({"chunk_tasks": 60}, "--chunk-tasks 50 then, 60 now"),
    ({"splits": 2}, "--splits 1 then, 2 now"),
    ({"k": 3}, "--k 2 then, 3 now"),
])
def test_a_metalearn_resume_names_the_option_with_both_values(tasks, stopped_metalearn,
                                                              tmp_path, client, changed,
                                                              named):
    """Round 10: ``differs in: chunk_tasks``, ``splits``, ``k`` (Python's names, no
    values)."""
    before = unlocked(snapshot(tmp_path))
    options = {"k": 2, "chunk_tasks": 50, **changed}
    with pytest.raises(InputError) as refused:
        streamlsq.metalearn(tasks, checkpoint=stopped_metalearn, resume=True, client=client,
                            progress=False, **options)
    assert str(refused.value) == _different(stopped_metalearn, named)
    assert unlocked(snapshot(tmp_path)) == before


def test_a_metalearn_resume_from_the_command_line(tasks, stopped_metalearn, tmp_path, cli):
    before = unlocked(snapshot(tmp_path))
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--k", 2, "--out", out, "--checkpoint",
                        stopped_metalearn, "--resume", "--chunk-tasks", 60))
    assert line == "streamlsq: error: " + _different(stopped_metalearn,
                                                     "--chunk-tasks 50 then, 60 now"), line
    assert unlocked(snapshot(tmp_path)) == before and leftovers(out) == []


# -- 3. --diagnostics with --solver normal, on the command line -------------------------------

@pytest.mark.parametrize("method", ["kf4lls", "rls"])
def test_diagnostics_with_the_normal_solver_in_the_command_lines_words(rows, tmp_path, cli,
                                                                        method):
    """Round 10: ``kf4lls: diagnostics must be False unless solver='qr' (...), got True``."""
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    line = one_line(cli("fit", method, rows, "--out", out, "--solver", "normal",
                        "--diagnostics"))
    assert line == ("streamlsq: error: --diagnostics goes with --solver qr (the recursive "
                    "residuals come from the QR form)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- 4. storage_options for a local path, in every opener -----------------------------------

@pytest.mark.parametrize("opener", ["open_stream", "open_dataset", "open_tasks"])
def test_every_opener_refuses_storage_options_for_a_local_path(rows, tasks, tmp_path,
                                                               monkeypatch, opener):
    """Round 10: open_result refused them; the other openers ignored them."""
    store = tasks if opener == "open_tasks" else rows
    monkeypatch.chdir(store.parent)
    before = snapshot(store.parent)
    with pytest.raises(InputError) as info:
        getattr(streamlsq, opener)(store.name, storage_options={"anon": True})
    assert str(info.value) == ("storage_options apply to URLs (s3://, gs://, memory://...); "
                               f"{store.name} is a local path")
    assert snapshot(store.parent) == before
    getattr(streamlsq, opener)(store.name)  # without them, it opens


# -- 5. metalearn's shared refusals in both spellings ---------------------------------------

@pytest.mark.parametrize("options, wanted", [
    ({"k": 2, "heavy_rows": 20},
     "{tasks}: --heavy-rows 20 (heavy_rows=20) goes with roles by rows per task, and the "
     "store's variable 'role' gives the roles (--roles auto takes it); give --roles rows "
     "(roles='rows') to let --heavy-rows choose the heavy tasks"),
    ({"k": 2, "k_max": 3},
     "--k-max (k_max=) goes with --k auto (k='auto', the default), the largest k it tries"),
    ({"threshold": 0.5},
     "--threshold (threshold=) goes with --rank R (rank=R), the subspace's rank (the cut "
     "then finds the clusters); without --threshold, --k K is both the rank and the "
     "clusters"),
])
def test_metalearn_refusals_name_pythons_spelling_too(tasks, tmp_path, client, options,
                                                      wanted):
    """Round 10: from Python these named ``--heavy-rows``, ``--roles rows``, ``--k-max``,
    ``--k K`` alone."""
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as refused:
        streamlsq.metalearn(tasks, out=tmp_path / "m.zarr", client=client, progress=False,
                            **options)
    assert str(refused.value) == wanted.format(tasks=tasks)
    assert snapshot(tmp_path) == before
