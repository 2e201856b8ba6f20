"""Nothing of the user's is ever deleted (docs/faults.md, "User files"): checkpoint folders,
--out and --overwrite touch only what streamlsq wrote, never an input; leftovers of killed
runs are reclaimed by the next run on the same output, a live run's never."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr

from streamlsq import open_result, simulate_stream
from streamlsq.io.outputs import reclaim_leftovers

from conftest import write_stream
from faultkit import cli, invoke, kill_session, leftovers, refusal, snapshot, start, wait_for


@pytest.fixture
def folder(tmp_path, client):
    """A user's folder: an input store and a file of theirs."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3_000, 3))
    write_stream(tmp_path / "data.zarr", X, X @ np.ones((3, 1)), chunk_rows=500)
    (tmp_path / "notes.txt").write_text("precious")
    return tmp_path


@pytest.fixture
def run(client, monkeypatch):
    def _run(folder, *args):
        monkeypatch.chdir(folder)
        return invoke(*args, scheduler=client.scheduler.address)
    return _run


def test_checkpoint_dot_holding_the_input_is_refused(folder, run):
    before = snapshot(folder)
    line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr",
                       "--checkpoint", "."))
    assert "--checkpoint . contains the input store data.zarr" in line
    assert snapshot(folder) == before


def test_checkpoint_folder_of_the_users_is_refused(folder, run):
    (folder / "precious").mkdir()
    (folder / "precious" / "mine.txt").write_text("keep me")
    before = snapshot(folder)
    line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr",
                       "--checkpoint", "precious"))
    assert "precious: not a streamlsq checkpoint (it holds mine.txt)" in line
    assert snapshot(folder) == before
    line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr",
                       "--checkpoint", "notes.txt"))
    assert "notes.txt: --checkpoint must be a folder" in line
    assert snapshot(folder) == before


def test_checkpoint_inside_the_input_is_refused(folder, run):
    before = snapshot(folder)
    line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr",
                       "--checkpoint", "data.zarr/ckpt"))
    assert "lies inside the input store data.zarr" in line
    assert snapshot(folder) == before


def test_checkpoint_apart_from_the_output(folder, run):
    before = snapshot(folder)
    for ckpt, how in (("fit.zarr", "is the output fit.zarr"),
                      ("fit.zarr/ck", "lies inside the output fit.zarr")):
        line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr",
                           "--checkpoint", ckpt))
        assert f"--checkpoint {ckpt} {how}" in line
    assert snapshot(folder) == before


def test_an_empty_checkpoint_folder_of_the_users_is_used_and_kept(folder, run):
    (folder / "ckpt").mkdir()
    ok = run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr", "--checkpoint", "ckpt")
    assert ok.exit_code == 0, ok.output
    # the checkpoint is removed with the result published; the folder was the user's
    assert (folder / "ckpt").is_dir() and not any((folder / "ckpt").iterdir())
    ok = run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit2.zarr", "--checkpoint", "new")
    assert ok.exit_code == 0, ok.output
    assert not (folder / "new").exists()  # streamlsq made it, streamlsq removed it
    assert (folder / "notes.txt").read_text() == "precious"


def test_out_equal_to_the_input_with_overwrite_is_refused(folder, run):
    before = snapshot(folder)
    for out in ("data.zarr", "data.zarr/result.zarr", "."):
        line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", out, "--overwrite"))
        assert "input store data.zarr" in line and f"--out {out} " in line
    assert snapshot(folder) == before


def test_overwrite_replaces_only_what_streamlsq_wrote(folder, run):
    (folder / "results").mkdir()
    (folder / "results" / "draft.txt").write_text("mine")
    g = zarr.open_group(str(folder / "theirs.zarr"), mode="w", zarr_format=3)
    g.attrs["owner"] = "someone else"
    before = snapshot(folder)
    for out in ("results", "theirs.zarr", "notes.txt"):
        line = refusal(run(folder, "fit", "kf4lls", "data.zarr", "--out", out, "--overwrite"))
        assert f"{out}: exists and was not written by streamlsq" in line
    assert snapshot(folder) == before
    assert run(folder, "fit", "kf4lls", "data.zarr", "--out", "fit.zarr").exit_code == 0
    again = run(folder, "fit", "rls", "data.zarr", "--out", "fit.zarr", "--overwrite")
    assert again.exit_code == 0, again.output
    assert open_result(folder / "fit.zarr").attrs["method"] == "rls"
    assert leftovers(folder / "fit.zarr") == []


def test_predict_output_apart_from_its_model_and_tasks(tmp_path, client):
    from streamlsq import metalearn, simulate_mlr

    tasks = simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=400, t_light=4, n_heavy=20,
                         t_heavy=30, n_light2=50, t_light2=6, client=client)
    metalearn(tasks, 2, out=tmp_path / "m.zarr", client=client)
    before = snapshot(tmp_path)
    for out in ("m.zarr", "t.zarr"):
        line = refusal(invoke("predict", tmp_path / "m.zarr", tasks, "--out", tmp_path / out,
                              "--overwrite", scheduler=client.scheduler.address))
        assert "is the input store" in line
    assert snapshot(tmp_path) == before


_HOLD = textwrap.dedent("""
    import sys, time
    from streamlsq.io.outputs import OwnedTemporary
    tmp = OwnedTemporary(sys.argv[1], sys.argv[2])
    tmp.create()
    print(tmp.path, flush=True)
    time.sleep(600)
""")


def _holder(out, kind):
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(out), kind],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_leftovers_of_a_killed_run_are_reclaimed_a_live_runs_are_not(tmp_path):
    out = tmp_path / "r.zarr"
    live, live_path = _holder(out, "partial")
    try:
        dead = []
        for kind in ("partial", "old", "stores"):  # what a killed fit, --overwrite, study left
            proc, path = _holder(out, kind)
            proc.kill()
            proc.wait()
            dead.append(path)
        (tmp_path / f".{out.name}.partial-legacy").mkdir()  # not made by this version: kept
        removed = reclaim_leftovers(out)
        assert sorted(str(p) for p in removed) == sorted(dead)
        assert os.path.isdir(live_path)
        assert not any(os.path.exists(p) or os.path.exists(p + ".owner") for p in dead)
        assert (tmp_path / f".{out.name}.partial-legacy").is_dir()
    finally:
        live.kill()
        live.wait()
    assert reclaim_leftovers(out) and not os.path.exists(live_path)


def test_a_killed_simulate_leaves_a_partial_store_that_the_next_run_reclaims(tmp_path,
                                                                            client):
    out = tmp_path / "sim.zarr"
    proc = start(cli("simulate", "stream", "--out", out, "--rows", 3_000_000, "--features", 10,
                     "--chunk-size", 50_000, "--workers", 1))
    partial = wait_for(lambda: [p for p in tmp_path.glob(".sim.zarr.partial-*")
                                if not p.name.endswith(".owner") and (p / "X" / "c").exists()
                                and any((p / "X" / "c").iterdir())],
                       proc, what="the first chunks of the partial store")
    kill_session(proc)
    assert partial[0].exists() and not out.exists()  # what the kill left behind
    ok = invoke("simulate", "stream", "--out", out, "--rows", 1000, "--features", 3,
                scheduler=client.scheduler.address)  # the next run: in this process
    assert ok.exit_code == 0, ok.output
    assert leftovers(out) == [] and open_result(out).attrs["complete"] is True


def test_simulate_overwrite_of_a_users_store_is_refused(tmp_path, client):
    simulate_stream(tmp_path / "ok.zarr", 1_000, 2, client=client)  # streamlsq's own: fine
    assert invoke("simulate", "stream", "--out", tmp_path / "ok.zarr", "--rows", 500,
                  "--overwrite", scheduler=client.scheduler.address).exit_code == 0
    rng = np.random.default_rng(1)
    write_stream(tmp_path / "mine.zarr", rng.standard_normal((10, 2)), np.ones((10, 1)), 5)
    before = snapshot(tmp_path)
    line = refusal(invoke("simulate", "stream", "--out", tmp_path / "mine.zarr", "--rows", 500,
                          "--overwrite", scheduler=client.scheduler.address))
    assert "was not written by streamlsq" in line
    assert snapshot(tmp_path) == before


# -- files beside the output ------------------------------------------------------------


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    from streamlsq import simulate_mlr

    return simulate_mlr(tmp_path_factory.mktemp("tasks") / "t.zarr", k=2, d=3, n_light=2_000,
                        t_light=4, n_heavy=40, t_heavy=30, n_light2=400, t_light2=6, seed=2,
                        client=client)


def _metalearn(tasks, out, client, *extra):
    return invoke("metalearn", tasks, "--out", out, *extra, scheduler=client.scheduler.address)


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("what", ["file", "link", "dangling link", "folder"])
def test_files_beside_the_output_are_the_outputs(tmp_path, tasks, client, what, overwrite):
    """metalearn --k auto writes OUT.k-curve.csv and .png: it used to write them over the
    user's files and through links, and to publish the model before refusing a folder."""
    (tmp_path / "victim.txt").write_text("the user's")
    if what == "file":
        (tmp_path / "model.k-curve.csv").write_text("the user's table")
    elif what == "folder":
        (tmp_path / "model.k-curve.csv").mkdir()
    else:
        target = tmp_path / ("victim.txt" if what == "link" else "nowhere.png")
        (tmp_path / "model.k-curve.png").symlink_to(target)
    before = snapshot(tmp_path)
    out = tmp_path / "model.zarr"
    line = refusal(_metalearn(tasks, out, client, *(["--overwrite"] if overwrite else [])))
    name = "model.k-curve.png" if "link" in what else "model.k-curve.csv"
    reason = {"file": "exists and was not written" if overwrite else "already exists",
              "link": "is a symbolic link", "dangling link": "is a symbolic link",
              "folder": "exists and is not a file"}[what]
    assert f"{tmp_path / name}: {reason}" in line, line
    assert snapshot(tmp_path) == before  # no model, no temporary, the user's bytes as they were
    assert not out.exists() and leftovers(out) == []


def test_files_beside_the_output_are_published_and_replaced_with_it(tmp_path, tasks, client):
    import pandas as pd

    out = tmp_path / "model.zarr"
    assert _metalearn(tasks, out, client).exit_code == 0
    model = open_result(out)
    table = pd.read_csv(tmp_path / "model.k-curve.csv")
    np.testing.assert_array_equal(table.k, model.k_candidate)
    np.testing.assert_allclose(table.heldout_loglik, model.k_loglik, rtol=1e-12)
    assert (tmp_path / "model.k-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(model.attrs["beside_files"]) == ["model.k-curve.csv", "model.k-curve.png"]
    ok = _metalearn(tasks, out, client, "--overwrite")  # streamlsq's own files: replaced
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.k-curve.csv", "model.k-curve.png", "model.zarr"]
    with open(tmp_path / "model.k-curve.csv", "a") as f:
        f.write("# the user's note\n")  # changed since: no longer streamlsq's to replace
    before = snapshot(tmp_path)
    line = refusal(_metalearn(tasks, out, client, "--overwrite"))
    assert "model.k-curve.csv: exists and was not written by streamlsq (or was changed " \
           "since)" in line
    assert snapshot(tmp_path) == before


# -- the demo's folder -----------------------------------------------------------------

DEMO = ("--rows", 5_000, "--features", 4, "--tasks", 500)


@pytest.mark.parametrize("holds", ["files", "store"])
def test_the_demo_refuses_a_users_folder_before_writing_anything(tmp_path, client, holds):
    """It used to replace the user's summary.md and stream.png, and to refuse a store of the
    user's named like one of its own only after writing six stores beside it. (An empty
    folder is taken as the demo's since re-test round 14: test_retest_round15_a.py.)"""
    mine = tmp_path / "mine"
    mine.mkdir()
    if holds == "files":
        (mine / "summary.md").write_text("my summary")
        (mine / "stream.png").write_bytes(b"my figure")
    elif holds == "store":
        write_stream(mine / "model.zarr", np.ones((4, 1)), np.ones((4, 1)), 2)
    before = snapshot(tmp_path)
    line = refusal(invoke("demo", "--out", mine, *DEMO, scheduler=client.scheduler.address))
    assert f"{mine}: exists and was not written by streamlsq demo" in line
    assert snapshot(tmp_path) == before


def test_info_plot_writes_only_its_own_png(folder, run):
    """--plot PNG names a file to write: never a file of the user's, never through a link;
    a PNG streamlsq drew (its Software text) is replaced."""
    assert run(folder, "fit", "rls", "data.zarr", "--out", "fit.zarr", "--block-size", 1,
               "--ridge", "1e-3", "--diagnostics").exit_code == 0
    ok = run(folder, "info", "fit.zarr", "--plot", "fit.png")
    assert ok.exit_code == 0 and (folder / "fit.png").read_bytes()[:4] == b"\x89PNG"
    assert run(folder, "info", "fit.zarr", "--plot", "fit.png").exit_code == 0  # its own
    (folder / "mine.png").write_bytes(b"\x89PNG my own figure")
    (folder / "link.png").symlink_to(folder / "notes.txt")
    before = snapshot(folder)
    line = refusal(run(folder, "info", "fit.zarr", "--plot", "mine.png"))
    assert "mine.png: exists and was not written by streamlsq" in line
    line = refusal(run(folder, "info", "fit.zarr", "--plot", "link.png"))
    assert "link.png: is a symbolic link; streamlsq never writes through a link" in line
    assert snapshot(folder) == before and leftovers(folder / "fit.png") == []
