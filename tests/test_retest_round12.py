"""Re-test round 12: the cases found broken or weak, each refused in one line (exit 2 or
InputError) with the folder left as it was, or now read as the user wrote it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import streamlsq
from streamlsq.errors import InputError

from conftest import CHECKPOINTED_FIT as FIT
from conftest import groups_store, one_line
from faultkit import leftovers, snapshot, unlocked


class Stop(Exception):
    pass


@pytest.fixture(scope="module")
def rows(checkpointed_rows):
    return checkpointed_rows


# -- B4. inputs.json of another shape ---------------------------------------------------------

@pytest.mark.parametrize("text, reason", [
    ("[]", "not the chunk stamps of the run's 1 input(s)"),
    ("{}", "not the chunk stamps of the run's 1 input(s)"),
    ('[{"X": "x"}]', "not the chunk stamps of the run's 1 input(s)"),
    ("[{}]", "no stamps of variable 'X' of {rows}"),
    ('[{"X": [], "y": []}]', "no stamp of variable 'X' rows 0-499 of {rows}"),
])
def test_a_checkpoint_whose_input_stamps_were_replaced_is_corrupt(rows, stopped_fit, tmp_path,
                                                                  client, text, reason):
    """Round 12: ``echo '[]' > ck/inputs.json`` (valid JSON of another shape) resumed over
    changed data without a word and published a mix; only a removed file was refused."""
    (stopped_fit / "inputs.json").write_text(text)
    before = unlocked(snapshot(tmp_path))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                             client=client, **FIT)
    assert str(refused.value) == (
        f"{stopped_fit}: checkpoint is corrupt (inputs.json: {reason.format(rows=rows)}); "
        "rerun without --resume to start afresh")
    assert unlocked(snapshot(tmp_path)) == before


def test_a_checkpoint_whose_input_stamps_are_whole_still_resumes(rows, stopped_fit, client):
    """The check above refuses nothing a run wrote: its resume ends where a run without
    interruption ends."""
    resumed = streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                                   client=client, **FIT)
    whole = streamlsq.fit_stream(rows, "kf4lls", client=client, **FIT)
    np.testing.assert_array_equal(resumed.coef.values, whole.coef.values)


# -- B2, W3, W4. a folder written inside a Zarr store ------------------------------------------

@pytest.fixture(scope="module")
def result(rows, tmp_path_factory, client):
    out = tmp_path_factory.mktemp("result") / "fit.zarr"
    streamlsq.fit_stream(rows, "kf4lls", out=out, client=client, **FIT)
    return out


@pytest.mark.parametrize("command, what", [
    (("study", "lms", "--quick"), "a study's folder"),
    (("demo", "--rows", 20_000, "--features", 3), "the demo's folder"),
])
def test_a_folder_inside_a_store_is_refused_before_any_work(rows, result, cli, command,
                                                            what):
    """Round 12: ``study lms --quick --out fit.zarr/st`` (a result) and ``--out
    d2.zarr/X/st`` (an array's folder of a data store) were written, exit 0, and the store
    then refused by ``--overwrite`` (``holds st, which streamlsq did not write``); ``demo
    --out fit.zarr/demo`` was refused after the cluster started, naming
    ``fit.zarr/demo/stream.zarr``."""
    for store, out in ((result, result / "st"), (rows, rows / "X" / "st")):
        before = snapshot(store.parent)
        line = one_line(cli(*command, "--out", out))
        assert line == (f"streamlsq: error: {out}: {store.name} is a Zarr store; {what} is "
                        "not written inside a store: choose another --out"), line
        assert snapshot(store.parent) == before


def test_an_output_deep_inside_a_store_is_refused_as_inside_it(rows, result, tmp_path, cli):
    """Round 12: ``--out fit.zarr/coef/deeper/x.zarr`` said ``fit.zarr/coef/deeper: output
    folder does not exist``; the reason is that it lies inside a store (likewise a
    checkpoint)."""
    before = snapshot(result.parent)
    out = result / "coef" / "deeper" / "x.zarr"
    line = one_line(cli("fit", "kf4lls", rows, "--out", out))
    assert line == (f"streamlsq: error: {out}: fit.zarr is a Zarr store; a store is not "
                    "written inside another (it would become one of its groups): choose "
                    "another --out"), line
    ckpt = result / "coef" / "deeper" / "ck"
    line = one_line(cli("fit", "kf4lls", rows, "--out", tmp_path / "o.zarr", "--checkpoint",
                        ckpt))
    assert line == (f"streamlsq: error: {ckpt}: fit.zarr is a Zarr store; a checkpoint is not "
                    "written inside a store: choose another --checkpoint"), line
    assert snapshot(result.parent) == before and leftovers(tmp_path / "o.zarr") == []


# -- B1, W1, W2. groups by PATH#GROUP -----------------------------------------------------------

def test_a_group_whose_name_holds_a_hash_is_read_as_info_spells_it(tmp_path, cli, client):
    """Round 12: ``info odd.zarr`` said ``(read as odd.zarr#x#y)``, and ``fit kf4lls
    odd.zarr#x#y`` failed ``odd.zarr#x: no such store`` (the name cut at the last '#')."""
    odd = groups_store(tmp_path / "odd.zarr", ["x#y"])
    run = cli("info", odd)
    assert run.exit_code == 0, run.output
    assert f"group x#y/: stream (read as {odd}#x#y)" in run.output
    out = tmp_path / "o2.zarr"
    run = cli("fit", "kf4lls", f"{odd}#x#y", "--out", out, "--block-size", 50)
    assert run.exit_code == 0, run.output
    by_option = streamlsq.fit_stream(odd, "kf4lls", group="x#y", block_size=50,
                                     client=client, progress=False)
    np.testing.assert_array_equal(streamlsq.open_result(out, lazy=False).coef.values,
                                  by_option.coef.values)


def test_a_group_the_store_does_not_have_names_its_groups(rows, tmp_path, cli):
    """Round 12: ``pop.zarr (group 'zz'): not a readable Zarr group (No group found in store
    ... at path 'zz')``, and for an array ``(An array already exists in store ... at path
    X.)``."""
    pop = groups_store(tmp_path / "pop.zarr", ["a", "b", "c"])
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    for given in ((f"{pop}#zz",), (pop, "--group", "zz")):
        line = one_line(cli("fit", "kf4lls", *given, "--out", out))
        assert line == (f"streamlsq: error: {pop} (group 'zz'): {pop} has no group 'zz' (its "
                        "groups: a, b, c)"), line
    line = one_line(cli("fit", "kf4lls", f"{pop}#a/X", "--out", out))
    assert line == (f"streamlsq: error: {pop} (group 'a/X'): 'a/X' is an array of {pop}, not a "
                    "group (its groups: a, b, c); give the store without a group, and name its "
                    "arrays with --x and --y (x=, y=)"), line
    line = one_line(cli("fit", "kf4lls", f"{rows}#X", "--out", out))
    assert line == (f"streamlsq: error: {rows} (group 'X'): 'X' is an array of {rows}, not a "
                    "group (it has no group); give the store without a group, and name its "
                    "arrays with --x and --y (x=, y=)"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- B3. info --check of nested groups ---------------------------------------------------------

def test_info_check_reads_a_stream_group_at_any_depth(tmp_path, cli):
    """Round 12: a group holding only groups (``grp.zarr/lvl/t``) was skipped, and with no
    other group ``info --check grp.zarr/`` printed a garbled line."""
    grp = groups_store(tmp_path / "grp.zarr", ["lvl/t"])
    for given in (str(grp), f"{grp}/"):
        run = cli("info", given, "--check")
        assert run.exit_code == 0, run.output
        assert f"group lvl/: groups (read as {grp}#lvl)" in run.output
        assert f"group lvl/t/: stream (read as {grp}#lvl/t)" in run.output
        assert ("checked: group lvl/t/: every value finite in 300 rows, none so large that "
                "the least-squares sums overflow") in run.output, run.output
    # damaged, the nested group is named
    y = zarr.open_array(str(grp / "lvl" / "t" / "y"), mode="r+")
    y[150, 0] = np.nan
    line = one_line(cli("info", grp, "--check"))
    assert "(group 'lvl/t'): variable 'y' chunk 1 has NaN at row 150" in line, line


def test_info_check_says_which_groups_it_did_not_read(tmp_path, cli):
    """A group of another kind beside a stream one is named as not checked, not passed over
    under the line of the stream's check."""
    grp = groups_store(tmp_path / "grp.zarr", ["a"])
    zarr.open_group(str(grp / "notes"), mode="w", zarr_format=3).create_array(
        "v", shape=(3,), dtype="f8")
    run = cli("info", grp, "--check")
    assert run.exit_code == 0, run.output
    assert "checked: group a/: every value finite in 300 rows" in run.output
    assert ("not checked: group notes/ (unknown): info --check reads the stream and "
            "multi-task groups of a store of groups; give a group's path (STORE/GROUP) to "
            "check it") in run.output, run.output


# -- W5, W8. checkpoints of another method; options typed at their defaults -------------------

def test_a_checkpoint_of_another_command_names_its_method(stopped_fit, rows, tmp_path, cli):
    """Round 12: ``the checkpoint of a 'streamlsq fit METHOD (--engine sequential)' run``:
    the placeholder, not the method the checkpoint records."""
    before = unlocked(snapshot(tmp_path))
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", rows, "--out", out, "--checkpoint", stopped_fit,
                        "--resume"))
    assert line == (f"streamlsq: error: {stopped_fit}: the checkpoint of a 'streamlsq fit "
                    "kf4lls (--engine sequential)' run; this is 'streamlsq fit glm': choose "
                    "another --checkpoint, or remove it"), line
    assert unlocked(snapshot(tmp_path)) == before and leftovers(out) == []


@pytest.fixture
def stopped_glm(rows, tmp_path, client, monkeypatch):
    from streamlsq.io.checkpoint import CheckpointFolder

    save = CheckpointFolder.save_step

    def save_then_stop(self, name, arrays):
        save(self, name, arrays)
        raise Stop(name)

    ckpt = tmp_path / "glm-ck"
    with monkeypatch.context() as m:
        m.setattr(CheckpointFolder, "save_step", save_then_stop)
        with pytest.raises(Stop):
            streamlsq.fit_glm(rows, checkpoint=ckpt, client=client, progress=False)
    return ckpt


def test_a_glm_resume_with_defaults_typed_out_resumes(rows, stopped_glm, tmp_path, cli,
                                                      client):
    """Round 12: ``--link identity --cov-type nonrobust`` (gaussian's defaults) typed out
    on resume was refused ``--cov-type not given then, nonrobust now, --link not given
    then, identity now``; a value other than the default is still a different run."""
    out = tmp_path / "g.zarr"
    line = one_line(cli("fit", "glm", rows, "--out", out, "--checkpoint", stopped_glm,
                        "--resume", "--link", "log"))
    assert "(differs in: --link not given then, log now)" in line, line
    run = cli("fit", "glm", rows, "--out", out, "--checkpoint", stopped_glm, "--resume",
              "--link", "identity", "--cov-type", "nonrobust", "--alpha", 0.05)
    assert run.exit_code == 0, run.output
    whole = streamlsq.fit_glm(rows, client=client, progress=False)
    np.testing.assert_array_equal(streamlsq.open_result(out, lazy=False).coef.values,
                                  whole.coef.values)


# -- W9, W10, W11. the Python functions ---------------------------------------------------------

def test_a_wald_test_of_an_empty_list_is_no_restriction():
    """Round 12: ``wald_test(fit, [])``: ``restrictions must be (J, 6) with q (J,), got (1, 0)
    and (1,)``."""
    import xarray as xr

    rng = np.random.default_rng(1)
    table = xr.Dataset({n: ("row", rng.standard_normal(200)) for n in ("a", "b")})
    table["y"] = table.a - table.b + rng.standard_normal(200)
    fit = streamlsq.fit_stream(table, x=["a", "b"], y="y", fit_intercept=True,
                               progress=False)
    for empty in ([], np.zeros((0, 3))):
        with pytest.raises(InputError) as refused:
            streamlsq.wald_test(fit, empty)
        assert str(refused.value) == ("no restriction to test (J = 0): give at least one, "
                                      "such as 'x1 = 0' or a row of R")


def test_open_result_of_an_empty_path_a_checkpoint_or_a_group(stopped_fit, tmp_path,
                                                              monkeypatch):
    """Round 12: ``open_result('')`` named the working folder (``/tmp/r12: not a readable
    Zarr group``), ``open_result('ck3')`` said ``not a readable Zarr group``, and
    ``open_result('pop.zarr#a')`` ``no such store``."""
    pop = groups_store(tmp_path / "pop.zarr", ["a"])
    monkeypatch.chdir(tmp_path)
    before = unlocked(snapshot(tmp_path))
    for given, wanted in (
            ("", "'': an empty path; give the path (or URL) of a result store"),
            (stopped_fit, f"{stopped_fit}: a checkpoint folder (continue its run with "
                          f"--checkpoint {stopped_fit} --resume), not a Zarr store"),
            (f"{pop}#a", f"{pop}#a: names the group 'a' of {pop}; a result is a store of its "
                         "own, never a group: give its path (open_dataset(PATH, group=GROUP) "
                         "reads a group of a store)")):
        with pytest.raises(InputError) as refused:
            streamlsq.open_result(given)
        assert str(refused.value) == wanted
    assert unlocked(snapshot(tmp_path)) == before
    assert json.loads((stopped_fit / "progress.json").read_text())  # kept


# -- W7 and the minor ones ---------------------------------------------------------------------

def test_a_group_given_twice_differently_is_refused(tmp_path, cli):
    """Round 12: ``--group a --group b`` fitted b without a word (click's last one wins),
    where ``pop.zarr#a --group b`` is refused ``name the group once``; the same group twice
    is one."""
    pop = groups_store(tmp_path / "pop.zarr", ["a", "b"])
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    line = one_line(cli("fit", "kf4lls", pop, "--group", "a", "--group", "b", "--out", out))
    # (the program's name is the runner's here: 'streamlsq' from the shell)
    assert line.startswith("streamlsq: error: --group given 2 times ('a', then 'b'): name the "
                           "group once; see '") and line.endswith(" fit kf4lls --help'"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    run = cli("fit", "kf4lls", pop, "--group", "a", "--group", "a", "--out", out,
              "--block-size", 50)
    assert run.exit_code == 0, run.output


def test_info_of_an_empty_folder_says_so(tmp_path, cli):
    """Round 12: ``info emptydir`` printed zarr's own text (``No group found in store ...
    at path ''``)."""
    empty = tmp_path / "emptydir"
    empty.mkdir()
    line = one_line(cli("info", empty))
    assert line == f"streamlsq: error: {empty}: an empty folder, not a Zarr store", line
    assert list(empty.iterdir()) == []


def test_a_rank_above_the_features_is_named_a_rank(tmp_path, cli, client):
    """Round 12: ``--rank 9`` was refused as ``the subspace of k components``."""
    tasks = streamlsq.simulate_mlr(tmp_path / "tasks.zarr", k=3, d=5, n_light=200, t_light=4,
                                   n_heavy=30, t_heavy=20, n_light2=50, t_light2=8, seed=3,
                                   client=client)
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, "--rank", 9, "--threshold", 1.0))
    assert line == (f"streamlsq: error: {tasks}: --rank 9 is larger than the number of "
                    "features d = 5; the subspace has at most d dimensions"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_plot_inside_a_store_is_refused(result, cli):
    """As a folder (B2): ``info fit.zarr --plot fit.zarr/p.png`` put a file of its own into
    the store, which ``--overwrite`` then refuses as the user's."""
    before = snapshot(result.parent)
    png = result / "p.png"
    line = one_line(cli("info", result, "--plot", png))
    assert line == (f"streamlsq: error: {png}: fit.zarr is a Zarr store; a file is not "
                    "written inside a store: choose another --plot"), line
    assert snapshot(result.parent) == before
