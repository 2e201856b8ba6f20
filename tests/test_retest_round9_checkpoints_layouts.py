"""What the ninth re-test found in checkpoints and store layouts.

A checkpoint whose committed arrays were damaged (a NaN put into a segment's coefficients)
was resumed, and the run blamed the data: ``the coefficients at step 80001 ... are not
finite: the data's magnitudes overflow float64; rescale the data``. A ``--checkpoint`` that
is a dangling symbolic link was refused as ``cannot create the checkpoint folder (File
exists)``. A store whose ``X`` is stored ``(feature, sample)`` was refused with the advice
``name another layout with --x, --y and --sample-dim``, which led to a second refusal
without a remedy.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import streamlsq
from streamlsq.errors import InputError
from streamlsq.io.checkpoint import NONFINITE, EntryCheckpoint

from conftest import lstsq, one_line, read_all
from faultkit import leftovers, snapshot


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, client):
    return streamlsq.simulate_stream(tmp_path_factory.mktemp("r9") / "d.zarr", 12_000, 4, 1,
                                     chunk_rows=1_000, seed=2, client=client)


def _spoil(path, key=None):
    """Put a NaN into the first value of the array ``key`` (default: the first array of
    floats) of the checkpoint file ``path``, rewriting it whole as ``np.savez`` writes (as
    the re-tester did: a valid file, every array kept)."""
    with np.load(path) as z:
        arrays = {k: z[k].copy() for k in z.files}
    key = key or next(k for k, a in arrays.items() if a.dtype.kind == "f" and a.size)
    arrays[key] = arrays[key].astype(float)
    arrays[key].flat[0] = np.nan
    np.savez(path, **arrays)
    return key


def _without_lock_time(snap: dict) -> dict:
    """A snapshot with the checkpoint's lock file compared by kind alone: a resume takes the
    lock (the file written anew, naming its owner)."""
    return {k: v[:1] if k.endswith("/lock") else v for k, v in snap.items()}


# -- W3: NaN in a committed checkpoint file is a corrupt checkpoint -----------------------------

SEGMENTED = dict(block_size=500, segment_bytes=500 * 32, progress=False)
CLI_SEGMENTED = ("--block-size", "500", "--segment-size", "0.015625")


@pytest.mark.parametrize("file, key", [("segment-000001.npz", "coefs"),
                                       ("state", "W"),   # the factor the fold goes on from
                                       ("state", "R")])  # derived from W: was used unnoticed
def test_a_nan_in_a_sequential_checkpoint_is_a_corrupt_checkpoint(
        simulated, tmp_path, cli, client, stop_after_commits, file, key):
    data = shutil.copytree(simulated, tmp_path / "d.zarr")
    ckpt, out = tmp_path / "ck", tmp_path / "o.zarr"
    with stop_after_commits(3):
        streamlsq.fit_stream(data, "kf4lls", checkpoint=ckpt, client=client, **SEGMENTED)
    if file == "state":
        file = json.loads((ckpt / "progress.json").read_text())["state"]
    _spoil(ckpt / file, key)
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", data, "--out", out, "--checkpoint", ckpt, "--resume",
                        *CLI_SEGMENTED))
    assert line == (f"streamlsq: error: {ckpt}: checkpoint is corrupt ({file}: its array "
                    f"'{key}' holds NaN or inf, which the run did not commit); rerun without "
                    "--resume to start afresh"), line
    assert _without_lock_time(snapshot(tmp_path)) == _without_lock_time(before)
    assert leftovers(out) == []
    # the remedy: started afresh, the fit is the uninterrupted one
    fit = streamlsq.fit_stream(data, "kf4lls", checkpoint=ckpt, out=out, client=client,
                               **SEGMENTED)
    X, y = read_all(data)
    np.testing.assert_allclose(fit.coef.isel(step=-1).values, lstsq(X, y), rtol=1e-9)
    assert not ckpt.exists()


def test_a_nan_in_a_scan_piece_is_refused_before_any_piece_is_summarised(
        simulated, tmp_path, client, monkeypatch):
    from streamlsq.stream.resume import ScanPieces

    data = shutil.copytree(simulated, tmp_path / "d.zarr")
    ckpt = tmp_path / "ck"
    kw = dict(engine="scan", block_size=500, segment_bytes=1_000 * 32, progress=False,
              checkpoint=ckpt, client=client)

    class Stop(Exception):
        pass

    original = ScanPieces.commit
    with monkeypatch.context() as m:
        def commit_then_stop(self, i, result):
            original(self, i, result)
            raise Stop

        m.setattr(ScanPieces, "commit", commit_then_stop)
        with pytest.raises(Stop):
            streamlsq.fit_stream(data, "kf4lls", **kw)
    piece = sorted(ckpt.glob("entry-piece-*.npz"))[0]
    key = _spoil(piece)
    before = snapshot(tmp_path)
    started = []  # the scan's pieces are read (ScanPieces) once the checkpoint is open
    monkeypatch.setattr(ScanPieces, "start", lambda self, pieces: started.append(pieces))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(data, "kf4lls", resume=True, **kw)
    assert str(refused.value) == (
        f"{ckpt}: checkpoint is corrupt ({piece.name}: its array '{key}' holds NaN or inf, "
        "which the run did not commit); rerun without --resume to start afresh")
    assert started == []
    assert _without_lock_time(snapshot(tmp_path)) == _without_lock_time(before)


def test_a_nan_in_a_glm_pass_is_refused_before_any_pass_runs(tmp_path, client, monkeypatch):
    from streamlsq.stream.glm import GLMPass

    rng = np.random.default_rng(3)
    x = rng.standard_normal(2_000)
    table = tmp_path / "t.parquet"
    pd.DataFrame({"x": x, "y": rng.poisson(np.exp(0.3 * x)).astype(float)}).to_parquet(table)
    ckpt = tmp_path / "ck"
    options = dict(formula="y ~ x", family="poisson", checkpoint=ckpt, client=client)
    original = GLMPass.compute
    computed = []

    def dies_after_three(self, ctx):
        if len(computed) == 3:
            raise KeyboardInterrupt("killed")
        computed.append(self.label)
        return original(self, ctx)

    with monkeypatch.context() as m:
        m.setattr(GLMPass, "compute", dies_after_three)
        with pytest.raises(KeyboardInterrupt):
            streamlsq.fit_glm(table, **options)
    step = ckpt / "step-001-glm-irls-0.npz"
    key = _spoil(step)
    before = snapshot(tmp_path)
    computed.clear()
    monkeypatch.setattr(GLMPass, "compute", lambda self, ctx: computed.append(self.label))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_glm(table, resume=True, **options)
    assert str(refused.value) == (
        f"{ckpt}: checkpoint is corrupt ({step.name}: its array '{key}' holds NaN or inf, "
        "which the run did not commit); rerun without --resume to start afresh")
    assert computed == []
    assert _without_lock_time(snapshot(tmp_path)) == _without_lock_time(before)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    return streamlsq.simulate_mlr(tmp_path_factory.mktemp("r9t") / "t.zarr", k=2, d=3,
                                  n_light=2_000, t_light=4, n_heavy=40, t_heavy=30,
                                  n_light2=300, t_light2=6, seed=5, client=client)


def _finite_committed_array(ckpt):
    """(file, key) of the first array of floats of a committed entry that was finite when
    committed (not in its NONFINITE list)."""
    for path in sorted(ckpt.glob("entry-*.npz")):
        with np.load(path) as z:
            listed = set(z[NONFINITE].tolist()) if NONFINITE in z.files else set()
            for key in z.files:
                a = z[key]
                if key not in listed and a.dtype.kind == "f" and a.size:
                    return path, key
    raise AssertionError(f"no committed array of floats in {ckpt}")


@pytest.mark.parametrize("job", ["metalearn", "em"])
def test_a_nan_in_a_metalearn_or_em_entry_is_refused_before_any_work(
        tasks, tmp_path, client, monkeypatch, job):
    from streamlsq.mlr import em, metalearn

    ckpt = tmp_path / "ck"
    run = {"metalearn": lambda **kw: streamlsq.metalearn(tasks, 2, progress=False, **kw),
           "em": lambda **kw: streamlsq.fit_em(tasks, 2, iterations=6, tol=0, **kw)}[job]

    class Stop(Exception):
        pass

    saved = []
    original = EntryCheckpoint.save
    with monkeypatch.context() as m:
        def save_then_stop(self, name, value, reads=()):
            original(self, name, value, reads)
            saved.append(name)
            if len(saved) == 3:
                raise Stop

        m.setattr(EntryCheckpoint, "save", save_then_stop)
        with pytest.raises(Stop):
            run(checkpoint=ckpt, client=client)
    path, key = _finite_committed_array(ckpt)
    _spoil(path, key)
    before = snapshot(tmp_path)
    mapped = []  # every pass of both jobs maps its chunks of work (map_chunks)
    for module in (em, metalearn):
        monkeypatch.setattr(module, "map_chunks", lambda *a, **k: mapped.append(a))
    with pytest.raises(InputError) as refused:
        run(checkpoint=ckpt, resume=True, client=client)
    assert str(refused.value) == (
        f"{ckpt}: checkpoint is corrupt ({path.name}: its array '{key}' holds NaN or inf, "
        "which the run did not commit); rerun without --resume to start afresh")
    assert mapped == []
    assert _without_lock_time(snapshot(tmp_path)) == _without_lock_time(before)


def test_values_committed_not_finite_are_resumed_and_others_refused(tmp_path):
    """An entry (a study's batch, a metalearn step, an EM iteration) may hold NaN or inf
    when committed (listed in its file): resumed as they were. A NaN put since into
    another array, or into a file of an earlier version (without the list), is refused."""
    ckpt = tmp_path / "ck"
    value = {"mse": np.array([0.5, np.nan, np.inf]), "coef": np.arange(3.0), "n": 3}
    with EntryCheckpoint(ckpt, {"run": 1}, kind="study") as folder:
        folder.save("batch-0", value)
        folder.save("batch-1", value)
    with EntryCheckpoint(ckpt, {"run": 1}, resume=True, kind="study") as folder:
        got = folder.load("batch-0")
    np.testing.assert_array_equal(got["mse"], value["mse"])
    assert got["n"] == 3
    with np.load(ckpt / "entry-batch-0.npz") as z:
        assert z[NONFINITE].tolist() == ["a0"]
    _spoil(ckpt / "entry-batch-1.npz", "a1")  # coef
    with pytest.raises(InputError, match=r"checkpoint is corrupt \(entry-batch-1.npz: its array "
                                         r"'a1' holds NaN or inf"):
        EntryCheckpoint(ckpt, {"run": 1}, resume=True, kind="study").open()
    # an earlier version's file: no list, every array committed finite
    with np.load(ckpt / "entry-batch-1.npz") as z:
        arrays = {k: z[k] for k in z.files if k != NONFINITE}
    np.savez(ckpt / "entry-batch-1.npz", **arrays)
    with pytest.raises(InputError, match=r"entry-batch-1.npz: its array 'a0' holds NaN"):
        EntryCheckpoint(ckpt, {"run": 1}, resume=True, kind="study").open()


# -- W7: --checkpoint a symbolic link to nothing or to a file ------------------------------------

@pytest.fixture
def small(tmp_path, client):
    return streamlsq.simulate_stream(tmp_path / "d.zarr", 500, 2, 1, seed=1, client=client)


def test_a_checkpoint_link_to_nothing_or_to_a_file_is_refused(small, tmp_path, cli):
    folder = tmp_path / "dk"
    folder.mkdir()
    (folder / "ck").symlink_to("nowhere")
    (folder / "notes.txt").write_text("mine\n")
    (folder / "fk").symlink_to("notes.txt")
    out = folder / "o.zarr"
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", small, "--out", out, "--checkpoint", folder / "ck"))
    assert line == (f"streamlsq: error: {folder}/ck: is a symbolic link to '{folder}/nowhere', "
                    "which does not exist; streamlsq never creates a folder through a link or "
                    "writes over one: give the path it points to, or choose another "
                    "--checkpoint"), line
    line = one_line(cli("fit", "kf4lls", small, "--out", out, "--checkpoint", folder / "fk"))
    assert line == (f"streamlsq: error: {folder}/fk: is a symbolic link to a file "
                    f"('{folder}/notes.txt'); --checkpoint is a folder, and streamlsq never "
                    "writes over a link: choose another --checkpoint"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    # the remedy: the path it points to (created, then removed with the checkpoint)
    result = cli("fit", "kf4lls", small, "--out", out, "--checkpoint", folder / "nowhere")
    assert result.exit_code == 0, result.output
    assert not (folder / "nowhere").exists() and os.readlink(folder / "ck") == "nowhere"


def test_a_checkpoint_link_to_an_empty_folder_is_used_and_kept(small, tmp_path, cli):
    (tmp_path / "empty").mkdir()
    (tmp_path / "ck").symlink_to("empty")
    out = tmp_path / "o.zarr"
    result = cli("fit", "kf4lls", small, "--out", out, "--checkpoint", tmp_path / "ck")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ck").is_symlink() and list((tmp_path / "empty").iterdir()) == []


# -- W6: a store with the sample dimension second ----------------------------------------------

def _remedy(dim="sample", name="X", dims="('feature', 'sample')"):
    return (f"variable '{name}' has dims {dims}: a store is read along its variables' first "
            f"dimension, and '{dim}' is not first; rewrite the store with '{dim}' first "
            f"(xarray: xr.open_zarr(STORE).transpose('{dim}', ...).drop_encoding()"
            ".to_zarr(NEW)), or from Python give streamlsq the Dataset xr.open_zarr(STORE), "
            "which it reads transposed")


@pytest.fixture
def transposed(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.standard_normal(400)
    store = tmp_path / "s_T.zarr"
    xr.Dataset({"X": (("feature", "sample"), X.T), "y": (("sample",), y)}).chunk(
        {"sample": 100}).to_zarr(store, zarr_format=3, consolidated=False)
    return store, X, y


@pytest.mark.parametrize("given", [(), ("--x", "X", "--y", "y", "--sample-dim", "sample")])
def test_a_store_with_the_sample_dimension_second_says_how_to_rewrite_it(
        transposed, tmp_path, cli, given):
    store, X, y = transposed
    out = tmp_path / "o.zarr"
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", store, "--out", out, *given))
    assert line == f"streamlsq: error: {store}: {_remedy()}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_the_advice_on_the_sample_dimension_works(transposed, tmp_path, cli, client):
    store, X, y = transposed
    expected = lstsq(X, y[:, None])
    # from Python, the Dataset as it is: read transposed
    fit = streamlsq.fit_stream(xr.open_zarr(store), "kf4lls", client=client, progress=False)
    np.testing.assert_allclose(fit.coef.isel(step=-1).values, expected, rtol=1e-10)
    # the store rewritten as the line says, then fitted from the command line
    new = tmp_path / "rows.zarr"
    xr.open_zarr(store).transpose("sample", ...).drop_encoding().to_zarr(new, consolidated=False)
    result = cli("fit", "kf4lls", new, "--out", tmp_path / "o.zarr")
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(streamlsq.open_result(tmp_path / "o.zarr").coef.isel(
        step=-1).values, expected, rtol=1e-10)


def test_a_target_stored_with_the_sample_dimension_second(tmp_path, cli):
    rng = np.random.default_rng(2)
    store = tmp_path / "yT.zarr"
    xr.Dataset({"X": (("sample", "feature"), rng.standard_normal((40, 2))),
                "y": (("target", "sample"), rng.standard_normal((1, 40)))}).chunk(
        {"sample": 10}).to_zarr(store, zarr_format=3, consolidated=False)
    line = one_line(cli("fit", "kf4lls", store, "--out", tmp_path / "o.zarr"))
    assert line == (f"streamlsq: error: {store}: "
                    f"{_remedy(name='y', dims=str(('target', 'sample')))}"), line
