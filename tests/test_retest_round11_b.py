"""Re-test round 11, part B: ``metalearn``'s ``--k`` meant both the number of components
and, with ``--threshold``, the subspace's rank alone (one word, two things): the rank of a
cut at a distance is now ``--rank``; and the cases found weak or broken by the re-test."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import streamlsq
from streamlsq.errors import InputError

from conftest import CHECKPOINTED_FIT as FIT
from conftest import one_line
from faultkit import leftovers, snapshot, unlocked


class Stop(Exception):
    pass


@contextlib.contextmanager
def stopped_after_first_save(monkeypatch, owner: str, method: str):
    """The block's run stops (``Stop``) right after the checkpoint class ``owner`` of
    ``streamlsq.io.checkpoint`` has saved its first step with ``method``: a run interrupted
    after its first commit."""
    from streamlsq.io import checkpoint

    cls = getattr(checkpoint, owner)
    save = getattr(cls, method)

    def save_then_stop(self, name, *args, **kwargs):
        save(self, name, *args, **kwargs)
        raise Stop(name)

    with monkeypatch.context() as m:
        m.setattr(cls, method, save_then_stop)
        with pytest.raises(Stop):
            yield


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    """Three well separated components: a cut at Δ²/2 = 1 finds them."""
    root = tmp_path_factory.mktemp("tasks")
    return streamlsq.simulate_mlr(root / "tasks.zarr", k=3, d=5, n_light=600, t_light=4,
                                  n_heavy=60, t_heavy=40, n_light2=200, t_light2=8, seed=3,
                                  client=client)


def _values(model) -> dict:
    return {name: model[name].values for name in model.data_vars
            if not name.startswith("seconds")}


# -- 1. metalearn: --rank with --threshold ---------------------------------------------------

def test_a_cut_at_a_distance_takes_its_rank_from_rank(tasks, tmp_path, cli, client):
    """Round 11: ``--k 3 --threshold 1`` (the rank 3, the clusters the cut's) is now
    ``--rank 3 --threshold 1``; where the cut finds the 3 components, the model is bit for
    bit ``--k 3``'s (the same subspace, the same clusters), and its ``parameters`` say
    ``rank``, not ``k``."""
    out = tmp_path / "m.zarr"
    run = cli("metalearn", tasks, "--out", out, "--rank", 3, "--threshold", 1.0)
    assert run.exit_code == 0, run.output
    assert (f"wrote {out}: 3 clusters (cut at --threshold 1, of a subspace of --rank 3) "
            "from") in run.output
    cut = streamlsq.open_result(out, lazy=False)
    by_k = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    assert cut.sizes["cluster"] == 3 and cut.sizes["rank"] == 3
    cut_values, k_values = _values(cut), _values(by_k)
    assert cut_values.keys() == k_values.keys()
    for name, value in k_values.items():
        np.testing.assert_array_equal(cut_values[name], value, name)
    import json

    parameters = json.loads(cut.attrs["parameters"])
    assert parameters["rank"] == 3 and parameters["threshold"] == 1.0
    assert "k" not in parameters


def test_the_rank_of_a_cut_is_the_rank_of_its_subspace(tasks, client):
    """A cut finding fewer clusters than the rank: the subspace is still ``rank``'s (the
    basis of ``k=rank``), the clusters the cut's."""
    cut = streamlsq.metalearn(tasks, threshold=1e6, rank=3, client=client, progress=False)
    by_k = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    np.testing.assert_array_equal(cut.basis.values, by_k.basis.values)
    assert cut.sizes["cluster"] == 1


@pytest.mark.parametrize("given, wanted", [
    (("--k", 3, "--threshold", 1.0),
     "--k (k=) does not go with --threshold (threshold=): the cut finds the clusters; give "
     "the subspace's rank as --rank R (rank=R)"),
    (("--rank", 3),
     "--rank (rank=) goes with --threshold T (threshold=T), a cut of the linkage at a "
     "distance; without it, --k K is both the subspace's rank and the clusters"),
    (("--k", 3, "--rank", 3),
     "--rank (rank=) goes with --threshold T (threshold=T), a cut of the linkage at a "
     "distance; without it, --k K is both the subspace's rank and the clusters"),
    (("--threshold", 1.0),
     "--threshold (threshold=) goes with --rank R (rank=R), the subspace's rank (the cut "
     "then finds the clusters); without --threshold, --k K is both the rank and the "
     "clusters"),
    (("--rank", 3, "--threshold", 1.0, "--k-max", 3),
     "--k-max (k_max=) goes with --k auto (k='auto', the default), the largest k it tries; "
     "--threshold (threshold=) cuts at a distance"),
])
def test_k_with_a_threshold_is_refused_naming_rank(tasks, tmp_path, cli, given, wanted):
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, *given))
    assert line == f"streamlsq: error: {wanted}", line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_k_with_a_threshold_from_python(tasks, tmp_path, client):
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match=r"^--k \(k=\) does not go with --threshold "
                                         r"\(threshold=\): .* --rank R \(rank=R\)$"):
        streamlsq.metalearn(tasks, 3, threshold=1.0, out=tmp_path / "m.zarr", client=client)
    assert snapshot(tmp_path) == before


def test_a_rank_above_the_features_names_rank(tasks, tmp_path, cli):
    before = snapshot(tmp_path)
    out = tmp_path / "m.zarr"
    line = one_line(cli("metalearn", tasks, "--out", out, "--rank", 9, "--threshold", 1.0))
    assert line.startswith(f"streamlsq: error: {tasks}: --rank 9 is larger than the number "
                           "of features d = 5"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_resume_with_another_rank_names_rank(tasks, tmp_path, client, monkeypatch):
    ckpt = tmp_path / "ck"
    with stopped_after_first_save(monkeypatch, "EntryCheckpoint", "save"):
        streamlsq.metalearn(tasks, rank=3, threshold=1.0, checkpoint=ckpt, client=client,
                            progress=False)
    with pytest.raises(InputError, match=r"differs in: --rank 3 then, 2 now\)"):
        streamlsq.metalearn(tasks, rank=2, threshold=1.0, checkpoint=ckpt, resume=True,
                            client=client, progress=False)
    resumed = streamlsq.metalearn(tasks, rank=3, threshold=1.0, checkpoint=ckpt, resume=True,
                                  client=client, progress=False)
    whole = streamlsq.metalearn(tasks, rank=3, threshold=1.0, client=client, progress=False)
    for name, value in _values(whole).items():
        np.testing.assert_array_equal(_values(resumed)[name], value, name)


# -- 2. a relative --out with workers of another working folder -------------------------------

@pytest.mark.parametrize("command", [
    ("simulate", "stream", "--rows", 600, "--features", 2, "--chunk-size", 200),
    ("simulate", "mlr", "--k", 2, "--d", 3, "--n-light", 40, "--t-light", 4, "--n-heavy",
     10, "--t-heavy", 20, "--n-light2", 10, "--t-light2", 6),
])
def test_a_relative_out_is_written_where_the_user_is(tmp_path, cli, monkeypatch, command):
    """Round 11: the workers of a running scheduler (the session's: their own working
    folder) wrote the chunks of ``--out s.zarr`` under their own folder's name:
    ``input/output error (FileNotFoundError: .s.zarr.partial-2fb86d64 does not exist)``."""
    import os

    monkeypatch.chdir(tmp_path)
    run = cli(*command, "--out", "s.zarr")
    assert run.exit_code == 0, run.output
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]
    assert streamlsq.open_dataset(tmp_path / "s.zarr").attrs["complete"] is True


def test_the_workers_work_in_another_folder(client, tmp_path):
    """What the case above needs: the session's workers do not share the test's folder."""
    import os

    assert all(cwd != str(tmp_path) for cwd in client.run(os.getcwd).values())


# -- 3. checkpoints: a file removed, another kind of run, another method or input -----------

@pytest.fixture(scope="module")
def rows(checkpointed_rows):
    return checkpointed_rows


def test_a_checkpoint_whose_input_stamps_were_removed_is_corrupt(rows, stopped_fit,
                                                                 tmp_path, client):
    """Round 11: without ``inputs.json`` (the stamps of the chunks the committed work read)
    a resume went on without checking them: a chunk changed since was mixed in."""
    (stopped_fit / "inputs.json").unlink()
    before = unlocked(snapshot(tmp_path))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                             client=client, **FIT)
    assert str(refused.value) == (
        f"{stopped_fit}: checkpoint is corrupt (inputs.json: missing (removed since it was "
        "written)); rerun without --resume to start afresh")
    assert unlocked(snapshot(tmp_path)) == before


def test_a_checkpoint_file_removed_is_named_without_errno(rows, stopped_fit, tmp_path, client):
    """Round 11: ``(state-000000.npz: FileNotFoundError: [Errno 2] No such file or
    directory: 'ckb/state-000000.npz')``."""
    state = next(stopped_fit.glob("state-*.npz"))
    state.unlink()
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(rows, "kf4lls", checkpoint=stopped_fit, resume=True,
                             client=client, **FIT)
    assert str(refused.value) == (
        f"{stopped_fit}: checkpoint is corrupt ({state.name}: missing (removed since it was "
        "written)); rerun without --resume to start afresh")


def test_a_resume_names_the_method_and_the_input_that_changed(rows, stopped_fit, tmp_path,
                                                              client, cli):
    """Round 11: ``differs in: method, parameters (forgetting 1.0 then, 0.99 now)`` and
    ``differs in: inputs``, without the methods or the stores."""
    other = streamlsq.simulate_stream(tmp_path / "other.zarr", n_rows=3_001, n_features=3,
                                      chunk_rows=500, seed=5, client=client)
    before = unlocked(snapshot(tmp_path))
    out = tmp_path / "o.zarr"
    common = ("--out", out, "--checkpoint", stopped_fit, "--resume", "--block-size", 100,
              "--segment-size", 2**12 / 2**20)
    line = one_line(cli("fit", "rls", rows, *common))
    assert "differs in: method (kf4lls then, rls now), parameters (" in line, line
    line = one_line(cli("fit", "kf4lls", other, *common))
    assert line == (f"streamlsq: error: {stopped_fit}: checkpoint belongs to a different run "
                    f"(differs in: inputs (data {rows} then, {other} now)); rerun without "
                    "--resume or point --checkpoint elsewhere"), line
    assert unlocked(snapshot(tmp_path)) == before and leftovers(out) == []


@pytest.fixture
def stopped_em(tasks, tmp_path, client, monkeypatch):
    ckpt = tmp_path / "em-ck"
    with stopped_after_first_save(monkeypatch, "EntryCheckpoint", "save"):
        streamlsq.fit_em(tasks, 3, checkpoint=ckpt, client=client, progress=False)
    return ckpt


@pytest.mark.parametrize("command, named", [
    (("fit", "kf4lls", "{rows}", "--engine", "scan"), "streamlsq fit kf4lls --engine scan"),
    (("fit", "kf4lls", "{rows}"), "streamlsq fit kf4lls (--engine sequential)"),
    (("fit", "glm", "{rows}"), "streamlsq fit glm"),
    (("metalearn", "{tasks}", "--k", 3), "streamlsq metalearn"),
])
def test_a_checkpoint_of_another_command_names_both_commands(rows, tasks, stopped_em,
                                                             tmp_path, cli, command, named):
    """Round 11: ``the checkpoint of a 'em' run, not of 'fit-scan'`` (internal names)."""
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    args = [str(a).format(rows=rows, tasks=tasks) for a in command]
    line = one_line(cli(*args, "--out", out, "--checkpoint", stopped_em, "--resume"))
    assert line == (f"streamlsq: error: {stopped_em}: the checkpoint of a 'streamlsq fit em' "
                    f"run; this is '{named}': choose another --checkpoint, or remove it"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


# -- 4. fit em: --k other than the truth's with a start at the truth ------------------------

def test_em_k_other_than_the_stores_components_says_what_to_give(tasks, tmp_path, cli):
    """Round 11: ``init 'perturbed' needs k = 3 (the store's components), got k = 2``
    (Python's spelling, no remedy)."""
    before = snapshot(tmp_path)
    out = tmp_path / "e.zarr"
    line = one_line(cli("fit", "em", tasks, "--out", out, "--k", 2))
    assert line == (f"streamlsq: error: {tasks}: --init perturbed (init='perturbed') starts at "
                    "the store's truth, of 3 components; this is --k 2 (k=2): give --k 3, or "
                    "--init random"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    model = streamlsq.fit_em(tasks, 2, init="random", iterations=3, progress=False)
    assert model.sizes["cluster"] == 2


# -- 5. the Python functions with odd inputs -------------------------------------------------

def test_regressor_for_an_unknown_method_names_the_known_ones():
    """Round 11: a bare ``KeyError: 'kf4lz'``."""
    from streamlsq.estimators import regressor_for

    with pytest.raises(InputError, match=r"^unknown method 'kf4lz'; available: .*kf4lls"):
        regressor_for("kf4lz")


def test_a_wald_test_of_no_restriction_is_refused(rows, client):
    """Round 11: ``ZeroDivisionError: float division by zero``."""
    fit = streamlsq.fit_stream(rows, "kf4lls", client=client, progress=False)
    for none in ("", np.zeros((0, 3))):
        with pytest.raises(InputError, match=r"^no restriction to test \(J = 0\)"):
            streamlsq.wald_test(fit, none)
    assert streamlsq.wald_test(fit, np.eye(3)[:1]).df_num == 1


def test_open_result_of_none_and_the_summary_of_a_data_store(rows):
    """Round 11: ``GroupNotFoundError: No group found in store None``; the summary of a
    data store called it ``the result of None``."""
    with pytest.raises(InputError, match=r"^None: not a path, URL or zarr store of a result"):
        streamlsq.open_result(None)
    with pytest.raises(InputError) as refused:
        streamlsq.summary(rows)
    assert str(refused.value).startswith(f"{rows}: not a result (no attribute method: a data "
                                         "store?), which has no coef"), refused.value


def test_predict_of_a_model_of_tasks_in_memory_is_one_line(tasks, tmp_path, client):
    """Round 11: ``TypeError: Unsupported type for store_like: 'Dataset'``."""
    model = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    before = snapshot(tmp_path)
    with pytest.raises(InputError) as refused:
        streamlsq.predict(model, tasks, out=tmp_path / "p.zarr", client=client)
    assert str(refused.value) == (
        "the model: a model of tasks (method 'metalearn') held in memory; predict reads a "
        "model of tasks from its store: write it with out=PATH and give PATH")
    assert snapshot(tmp_path) == before
    path = tmp_path / "m.zarr"
    streamlsq.metalearn(tasks, 3, out=path, client=client, progress=False)
    assert streamlsq.predict(path, tasks, client=client).sizes["task"] > 0


# -- 6. PATH#GROUP, as docs/stores.md says, for every command that reads a store -------------

@pytest.fixture(scope="module")
def populations(tmp_path_factory, client):
    root = tmp_path_factory.mktemp("pops")
    return streamlsq.simulate_interleaved(root / "pop.zarr", seed=1, client=client)


def test_a_group_named_path_hash_group_is_read_by_every_command(populations, tasks, tmp_path,
                                                                cli, client):
    """Round 11: ``fit kf4lls pop.zarr#a`` (docs/stores.md: ``PATH#GROUP`` on the command
    line), ``info pop.zarr#a``, ``metalearn grp.zarr#t`` were ``pop.zarr#a: no such
    store``."""
    import shutil

    import zarr

    out = tmp_path / "a.zarr"
    run = cli("fit", "kf4lls", f"{populations}#a", "--out", out)
    assert run.exit_code == 0, run.output
    by_option = streamlsq.fit_stream(populations, "kf4lls", group="a", client=client,
                                     progress=False)
    np.testing.assert_array_equal(streamlsq.open_result(out).coef.values,
                                  by_option.coef.values)
    run = cli("info", "--check", f"{populations}#b")
    assert run.exit_code == 0 and "valid stream: 600 rows" in run.output, run.output
    # a multi-task store inside a group
    grp = tmp_path / "grp.zarr"
    zarr.open_group(str(grp), mode="w")
    shutil.copytree(tasks, grp / "t")
    run = cli("metalearn", f"{grp}#t", "--out", tmp_path / "m.zarr", "--k", 3)
    assert run.exit_code == 0, run.output
    whole = streamlsq.metalearn(tasks, 3, client=client, progress=False)
    np.testing.assert_array_equal(streamlsq.open_result(tmp_path / "m.zarr").coef.values,
                                  whole.coef.values)


def test_a_group_named_twice_differently_is_refused(populations, tmp_path, cli):
    before = snapshot(tmp_path)
    out = tmp_path / "a.zarr"
    line = one_line(cli("fit", "kf4lls", f"{populations}#a", "--group", "b", "--out", out))
    assert line == (f"streamlsq: error: {populations}#a names the group 'a', and --group "
                    "(group=) 'b': name the group once"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_info_of_a_store_of_groups_calls_it_so_and_checks_each(populations, cli):
    """Round 11: ``pop.zarr: result store``, ``result of an unknown command: complete``;
    ``info --check`` refused it: ``variable 'X' is missing``."""
    run = cli("info", populations)
    assert run.exit_code == 0, run.output
    assert run.output.splitlines()[:2] == [
        f"{populations}: groups store (Zarr v3)",
        f"  group a/: stream (read as {populations}#a)"]
    assert "result of" not in run.output
    run = cli("info", "--check", populations)
    assert run.exit_code == 0, run.output
    assert run.output.splitlines()[-3:] == [
        f"checked: group {g}/: every value finite in 600 rows, none so large that the "
        "least-squares sums overflow" for g in "abc"]


# -- 7. fit glm and the studies resumed with an option or the input changed -----------------

@pytest.fixture
def stopped_glm(rows, tmp_path, client, monkeypatch):
    ckpt = tmp_path / "glm-ck"
    with stopped_after_first_save(monkeypatch, "CheckpointFolder", "save_step"):
        streamlsq.fit_glm(rows, checkpoint=ckpt, client=client, progress=False)
    return ckpt


def test_a_glm_resume_names_the_option_and_the_input_as_typed(rows, stopped_glm, tmp_path,
                                                              cli, client):
    """Round 11: ``differs in: options (family 'gaussian' then, 'poisson' now)``,
    ``options (cov_type None then, 'HC1' now)``, ``options (segment_bytes None then, 65536
    now)`` (Python's spelling, bytes), and for another store of other rows ``differs in:
    chunk_rows, n_rows`` (the store not named)."""
    other = streamlsq.simulate_stream(tmp_path / "other.zarr", n_rows=2_000, n_features=3,
                                      chunk_rows=400, seed=5, client=client)
    before = unlocked(snapshot(tmp_path))
    out = tmp_path / "g.zarr"
    for given, named in ((("--family", "poisson"), "--family gaussian then, poisson now"),
                         (("--cov-type", "HC1"), "--cov-type not given then, HC1 now"),
                         (("--segment-size", 0.0625), "--segment-size not given then, "
                                                      "0.0625 now")):
        line = one_line(cli("fit", "glm", rows, "--out", out, "--checkpoint", stopped_glm,
                            "--resume", *given))
        assert line == "streamlsq: error: " + (
            f"{stopped_glm}: checkpoint belongs to a different run (differs in: {named}); "
            "rerun without --resume or point --checkpoint elsewhere"), line
    line = one_line(cli("fit", "glm", other, "--out", out, "--checkpoint", stopped_glm,
                        "--resume"))
    assert f"(differs in: input ({rows} then, {other} now))" in line, line
    assert unlocked(snapshot(tmp_path)) == before and leftovers(out) == []
    resumed = streamlsq.fit_glm(rows, checkpoint=stopped_glm, resume=True, client=client,
                                progress=False)
    whole = streamlsq.fit_glm(rows, client=client, progress=False)
    np.testing.assert_array_equal(resumed.coef.values, whole.coef.values)


def test_a_study_resume_names_its_own_option_as_typed(tmp_path, cli, client, monkeypatch):
    """Round 11: ``differs in: options (replicates None then, 2 now)``."""
    from streamlsq.studies import run_study

    ckpt = tmp_path / "study-ck"
    with stopped_after_first_save(monkeypatch, "EntryCheckpoint", "save"):
        run_study("mlr", tmp_path / "s", quick=True, client=client, checkpoint=ckpt,
                  replicates=None)
    before = unlocked(snapshot(tmp_path))
    line = one_line(cli("study", "mlr", "--out", tmp_path / "s", "--quick", "--replicates", 2,
                        "--checkpoint", ckpt, "--resume"))
    assert line == (f"streamlsq: error: {ckpt}: checkpoint belongs to a different run (differs "
                    "in: --replicates not given then, 2 now); rerun without --resume or point "
                    "--checkpoint elsewhere"), line
    assert unlocked(snapshot(tmp_path)) == before


# -- 8. --out inside another Zarr store ------------------------------------------------------

@pytest.mark.parametrize("inside", ["fit.zarr/inner.zarr", "tasks.zarr/X/new.zarr"])
def test_an_output_inside_another_store_is_refused(rows, tmp_path, cli, client, inside):
    """Round 11: ``--out fit.zarr/inner.zarr`` (a result, not an input of the run) was
    written, the result becoming a group of ``fit.zarr``; so was one inside a data store."""
    import shutil

    streamlsq.fit_stream(rows, "kf4lls", out=tmp_path / "fit.zarr", client=client,
                         progress=False)
    shutil.copytree(rows, tmp_path / "tasks.zarr")
    before = snapshot(tmp_path)
    out = tmp_path / inside
    outer = inside.split("/")[0]
    line = one_line(cli("fit", "kf4lls", rows, "--out", out))
    assert line == (f"streamlsq: error: {out}: {outer} is a Zarr store; a store is not "
                    "written inside another (it would become one of its groups): choose "
                    "another --out"), line
    assert snapshot(tmp_path) == before


def test_an_output_inside_another_store_on_s3_is_refused(rows, s3, client):
    from conftest import S3_BUCKET, s3_filesystem

    _, options = s3
    outer = f"s3://{S3_BUCKET}/r11b/fit.zarr"
    streamlsq.fit_stream(rows, "kf4lls", out=outer, storage_options=options, client=client,
                         progress=False)
    fs = s3_filesystem(options)
    before = sorted(fs.find(f"{S3_BUCKET}/r11b"))
    with pytest.raises(InputError) as refused:
        streamlsq.fit_stream(rows, "kf4lls", out=f"{outer}/inner.zarr",
                             storage_options=options, client=client, progress=False)
    assert str(refused.value) == (f"{outer}/inner.zarr: fit.zarr is a Zarr store; a store is "
                                  "not written inside another (it would become one of its "
                                  "groups): choose another --out")
    assert sorted(s3_filesystem(options).find(f"{S3_BUCKET}/r11b")) == before


def test_a_resume_of_a_cut_at_k_clusters_with_a_rank_names_both(tasks, tmp_path, client,
                                                                 monkeypatch):
    """A checkpoint of ``--k 3`` resumed as ``--rank 3 --threshold 1``: every option named
    with both values (``rank``, bare, before: the checkpoint's run had no rank)."""
    ckpt = tmp_path / "ck"
    with stopped_after_first_save(monkeypatch, "EntryCheckpoint", "save"):
        streamlsq.metalearn(tasks, 3, checkpoint=ckpt, client=client, progress=False)
    with pytest.raises(InputError) as refused:
        streamlsq.metalearn(tasks, rank=3, threshold=1.0, checkpoint=ckpt, resume=True,
                            client=client, progress=False)
    assert ("differs in: --k 3 then, not given now, --rank not given then, 3 now, "
            "--threshold not given then, 1.0 now)") in str(refused.value), refused.value


# -- 9. simulate mlr: more components than features ------------------------------------------

def test_simulate_mlr_with_more_orthonormal_components_than_features(tmp_path, cli):
    """Round 11: ``simulate mlr: kind='orthonormal' needs k <= d, got k = 3, d = 2``
    (Python's spelling, no remedy)."""
    before = snapshot(tmp_path)
    out = tmp_path / "t.zarr"
    line = one_line(cli("simulate", "mlr", "--out", out, "--k", 3, "--d", 2))
    assert line == ("streamlsq: error: simulate mlr: --kind orthonormal (kind='orthonormal') "
                    "has at most d components: --k 3 (k=3) > --d 2 (d=2); give --d >= --k, or "
                    "--kind gaussian"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []
    run = cli("simulate", "mlr", "--out", out, "--k", 3, "--d", 2, "--kind", "gaussian",
              "--n-light", 40, "--n-heavy", 10, "--n-light2", 10)
    assert run.exit_code == 0, run.output


# -- 10. info --check of a converted table by a relative path; info of streamlsq's folders ----

def test_info_check_of_a_converted_table_by_a_relative_path(tmp_path, cli, monkeypatch):
    """Round 11: ``info --check tab.zarr`` (relative) described the store, then ended
    ``tab.zarr: no such store`` (exit 2): the workers, in their own folder, were given the
    relative path."""
    import pandas as pd

    pd.DataFrame({"a": np.arange(50.0), "y": np.arange(50.0) * 2}).to_parquet(
        tmp_path / "t.parquet")
    monkeypatch.chdir(tmp_path)
    assert cli("convert", "t.parquet", "--out", "t.zarr").exit_code == 0
    before = snapshot(tmp_path)
    run = cli("info", "--check", "t.zarr")
    assert run.exit_code == 0, run.output
    assert run.output.splitlines()[-1] == ("checked: every chunk of every column written and "
                                           "readable in 50 rows; missing values: none")
    assert snapshot(tmp_path) == before


def test_info_of_a_checkpoint_or_a_study_folder_says_what_it_is(stopped_fit, tmp_path, cli,
                                                                client):
    """Round 11: ``ck: not a readable Zarr group (No group found in store '/abs/ck' at path
    '')``."""
    before = unlocked(snapshot(tmp_path))
    line = one_line(cli("info", stopped_fit))
    assert line == (f"streamlsq: error: {stopped_fit}: a checkpoint folder (continue its run "
                    f"with --checkpoint {stopped_fit} --resume), not a Zarr store: info "
                    "describes stores and results"), line
    from streamlsq.studies import run_study

    run_study("irma", tmp_path / "study", quick=True, client=client)
    line = one_line(cli("info", tmp_path / "study"))
    assert line == (f"streamlsq: error: {tmp_path / 'study'}: a study's folder (its summary.md "
                    "says what it holds), not a Zarr store: info describes stores and "
                    "results"), line
    assert unlocked(snapshot(tmp_path)).items() >= before.items()


# -- 11. --continue-from with no row appended since -----------------------------------------

def test_a_continuation_with_no_row_appended_says_so(rows, tmp_path, cli, client):
    """Round 11: ``wrote g7.zarr: ... 1.63e+05 rows/s, ..., continued from g2.zarr after its
    15000 rows``: the earlier run's speed (copied into the result), and nothing saying no
    row was read."""
    first = tmp_path / "first.zarr"
    streamlsq.fit_stream(rows, "kf4lls", out=first, client=client, progress=False)
    out = tmp_path / "again.zarr"
    run = cli("fit", "kf4lls", rows, "--out", out, "--continue-from", first)
    assert run.exit_code == 0, run.output
    assert "rows/s" not in run.output, run.output
    assert run.output.rstrip().endswith(f"continued from {first} after its 3001 rows: no row "
                                        "appended since, its coefficients unchanged")
    again = streamlsq.open_result(out, lazy=False)
    assert again.attrs["rows_per_second"] == 0.0
    np.testing.assert_array_equal(again.coef.values,
                                  streamlsq.open_result(first, lazy=False).coef.values)


# -- 12. a model with its curve replaced by one without ----------------------------------------

def test_a_model_replaced_by_one_without_its_curve_takes_the_curve_with_it(tasks, tmp_path,
                                                                          cli):
    """Round 11: ``metalearn --overwrite --k 3`` over a ``--k auto`` model left its
    ``m.k-curve.csv`` and ``.png`` (describing a model no longer there); a later ``--k auto
    --overwrite`` refused them: ``m.k-curve.csv: exists and was not written by streamlsq (or
    was changed since)``. A curve file the user changed since stays."""
    import os

    out = tmp_path / "m.zarr"
    assert cli("metalearn", tasks, "--out", out, "--k-max", 3).exit_code == 0
    assert sorted(os.listdir(tmp_path)) == ["m.k-curve.csv", "m.k-curve.png", "m.zarr"]
    run = cli("metalearn", tasks, "--out", out, "--overwrite", "--k", 3)
    assert run.exit_code == 0, run.output
    assert sorted(os.listdir(tmp_path)) == ["m.zarr"]
    run = cli("metalearn", tasks, "--out", out, "--overwrite", "--k-max", 3)
    assert run.exit_code == 0, run.output
    assert sorted(os.listdir(tmp_path)) == ["m.k-curve.csv", "m.k-curve.png", "m.zarr"]
    with open(tmp_path / "m.k-curve.csv", "a") as f:
        f.write("# my note\n")
    assert cli("metalearn", tasks, "--out", out, "--overwrite", "--k", 3).exit_code == 0
    assert sorted(os.listdir(tmp_path)) == ["m.k-curve.csv", "m.zarr"]


# -- 13. summary, wald_test and plot_fit with odd arguments ----------------------------------

def test_summary_wald_test_and_plot_fit_with_odd_arguments(rows, tasks, tmp_path, client):
    """Round 11: ``target must be one of [np.int64(0)], got 5`` (NumPy's repr); a NaN in R
    called ``the restrictions are linearly dependent (R V Rᵀ is singular)``; ``plot_fit`` of
    a store's path: ``AttributeError: 'str' object has no attribute 'rows_seen'``, of a
    model the same."""
    path = tmp_path / "fit.zarr"
    fit = streamlsq.fit_stream(rows, "kf4lls", out=path, client=client, progress=False)
    with pytest.raises(InputError, match=r"^target must be one of \[0\], got 5$"):
        streamlsq.summary(fit, target=5)
    with pytest.raises(InputError, match=r"^the restrictions R and q must be finite numbers"):
        streamlsq.wald_test(fit, np.full((1, 3), np.nan))
    with pytest.raises(InputError, match=r"^the restrictions R and q must be finite numbers"):
        streamlsq.wald_test(fit, np.eye(3)[:1], q=[np.inf])
    figure = streamlsq.plot_fit(path)
    assert figure.axes[0].get_title() == streamlsq.plot_fit(fit).axes[0].get_title()
    model = tmp_path / "em.zarr"
    streamlsq.fit_em(tasks, 3, out=model, client=client, progress=False)
    with pytest.raises(InputError) as refused:
        streamlsq.plot_fit(model)
    assert str(refused.value) == (
        f"{model}: the result of 'em', not a stream fit's: plot_fit draws a stream fit's "
        "coefficients against the rows seen (rows_seen, coef (step, feature, target))")


def test_a_checkpoint_inside_a_store_is_refused(rows, tmp_path, cli, client):
    """Round 11: ``--checkpoint m.zarr/ck`` (a result, not an input) was created inside the
    store, which held a folder of another kind for as long as the run lasted (and after a
    kill)."""
    streamlsq.fit_stream(rows, "kf4lls", out=tmp_path / "m.zarr", client=client,
                         progress=False)
    before = snapshot(tmp_path)
    out = tmp_path / "o.zarr"
    ckpt = tmp_path / "m.zarr" / "ck"
    line = one_line(cli("fit", "kf4lls", rows, "--out", out, "--checkpoint", ckpt))
    assert line == (f"streamlsq: error: {ckpt}: m.zarr is a Zarr store; a checkpoint is not "
                    "written inside a store: choose another --checkpoint"), line
    assert snapshot(tmp_path) == before and leftovers(out) == []


def test_a_relative_out_of_predict_and_convert(tasks, tmp_path, cli, client, monkeypatch):
    """Round 11: the same for ``predict --out p.zarr`` and ``convert --out t.zarr``:
    ``input/output error (FileNotFoundError: .p.zarr.partial-7d36fdc4 does not exist)``."""
    import os

    import pandas as pd

    model = tmp_path / "m.zarr"
    streamlsq.metalearn(tasks, 3, out=model, client=client, progress=False)
    pd.DataFrame({"a": np.arange(20.0), "y": np.arange(20.0)}).to_parquet(tmp_path / "t.pq")
    monkeypatch.chdir(tmp_path)
    run = cli("predict", "m.zarr", tasks, "--out", "p.zarr", "--yhat")
    assert run.exit_code == 0, run.output
    run = cli("convert", "t.pq", "--out", "t.zarr")
    assert run.exit_code == 0, run.output
    assert sorted(os.listdir(tmp_path)) == ["m.zarr", "p.zarr", "t.pq", "t.zarr"]
    assert streamlsq.open_result("p.zarr").yhat.shape == (streamlsq.open_tasks(tasks).n_rows,)
