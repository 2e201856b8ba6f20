"""Results read back (docs/faults.md, "Results as inputs"): a result store with a chunk
missing, unreadable or holding a non-finite value is refused by open_result, predict (of a
stream fit and of a meta-learned model) and --continue-from, in one line naming the result,
the variable and the chunk; nothing is written. A large prediction is checked chunk by chunk
as it is read, never read whole to be opened."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import zarr

from streamlsq import fit_stream, metalearn, open_result, predict, simulate_mlr, simulate_stream
from streamlsq.errors import InputError
from streamlsq.io.stores import consolidate

from faultkit import invoke, leftovers, refusal, snapshot

DAMAGES = ["missing", "truncated", "nan"]


@pytest.fixture(scope="module")
def made(tmp_path_factory, client):
    """A stream store and its fit, a task store and its model, made once; each test damages
    a copy."""
    root = tmp_path_factory.mktemp("results")
    stream = simulate_stream(root / "s.zarr", 6_000, 3, 1, chunk_rows=1_000, seed=4,
                             client=client)
    fit_stream(stream, "kf4lls", out=root / "fit.zarr", block_size=500, record_every=1,
               client=client)
    tasks = simulate_mlr(root / "t.zarr", k=2, d=3, n_light=2_000, t_light=4, n_heavy=40,
                         t_heavy=30, n_light2=400, t_light2=6, seed=3, client=client)
    metalearn(tasks, 2, out=root / "model.zarr", client=client)
    return root


def _damage(store, name, how):
    """Damage the first chunk file of variable ``name``: removed, truncated, or rewritten
    with a NaN in its first value (a valid chunk: the value is what is wrong)."""
    files = sorted(p for p in (store / name / "c").rglob("*") if p.is_file())
    if how == "missing":
        files[0].unlink()
    elif how == "truncated":
        files[0].write_bytes(files[0].read_bytes()[:7])
    else:
        arr = zarr.open_group(str(store), mode="r+", use_consolidated=False)[name]
        values = arr[...]
        values.flat[0] = np.nan
        arr[...] = values


def _copy(made, tmp_path, name):
    shutil.copytree(made / name, tmp_path / name)
    return tmp_path / name


def _expected(how, name):
    return {"missing": rf"variable '{name}' chunk \(0[, 0]*\) \([a-z_]+ 0-\d+\) is missing",
            "truncated": rf"variable '{name}' chunk 0 \(rows 0-\d+\) cannot be read .*the chunk "
                         r"file is truncated or corrupt",
            "nan": rf"variable '{name}' chunk 0 has NaN at [a-z_]+ 0"}[how] + \
        ".*the result is damaged: compute it again"


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("consumer", ["open_result", "predict", "continue-from"])
def test_a_damaged_fit_is_refused_where_it_is_read(made, tmp_path, client, how, consumer):
    """With a coef chunk deleted, open_result used to return NaN marked complete, and predict
    and --continue-from to publish NaN results marked complete."""
    import re

    fit = _copy(made, tmp_path, "fit.zarr")
    _damage(fit, "coef", how)
    if consumer == "open_result":
        with pytest.raises(InputError, match=f"{re.escape(str(fit))}: " + _expected(how, "coef")):
            open_result(fit)
        return
    out = tmp_path / "out.zarr"
    args = (("predict", fit, made / "s.zarr", "--out", out) if consumer == "predict" else
            ("fit", "kf4lls", made / "s.zarr", "--out", out, "--block-size", 500,
             "--continue-from", fit))
    before = snapshot(tmp_path)
    line = refusal(invoke(*args, scheduler=client.scheduler.address))
    assert re.search(re.escape(str(fit)) + ": " + _expected(how, "coef"), line), line
    assert snapshot(tmp_path) == before and not out.exists() and leftovers(out) == []


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", ["coef", "weight", "noise_var"])
def test_a_damaged_model_is_named_not_the_tasks(made, tmp_path, client, how, name):
    """A model missing a coef, weight or noise_var chunk used to be blamed on the tasks
    store; a truncated one was "unexpected error" without naming it."""
    import re

    model = _copy(made, tmp_path, "model.zarr")
    _damage(model, name, how)
    out = tmp_path / "pred.zarr"
    before = snapshot(tmp_path)
    line = refusal(invoke("predict", model, made / "t.zarr", "--out", out,
                          scheduler=client.scheduler.address))
    assert re.search(re.escape(str(model)) + ": " + _expected(how, name), line), line
    assert str(made / "t.zarr") not in line
    assert snapshot(tmp_path) == before and not out.exists() and leftovers(out) == []


def test_a_large_prediction_is_checked_as_it_is_read(made, tmp_path, client, monkeypatch):
    """Opening a prediction reads none of its large arrays (a damaged chunk does not stop
    its attributes from being read); computing them checks each chunk read."""
    import streamlsq.io.results as results

    out = tmp_path / "pred.zarr"
    predict(made / "model.zarr", made / "t.zarr", out=out, chunk_tasks=500, client=client)
    whole = open_result(out).coef.values
    monkeypatch.setattr(results, "CHECKED_WHEN_OPENED", 0)  # every array counts as large
    files = sorted((out / "coef" / "c").rglob("*"))
    files = [p for p in files if p.is_file()]
    files[2].write_bytes(files[2].read_bytes()[:9])  # chunk 2: tasks 1000-1499
    pred = open_result(out)
    assert pred.attrs["estimator"] == "bayes" and pred.sizes["task"] == whole.shape[0]
    np.testing.assert_array_equal(pred.coef[:1_000].values, whole[:1_000])  # chunks 0 and 1
    with pytest.raises(InputError, match=r"pred.zarr: variable 'coef' chunk 2 \(rows "
                                         r"1000-1499\) cannot be read"):
        pred.coef.load()
    arr = zarr.open_group(str(out), mode="r+", use_consolidated=False)["posterior"]
    values = arr[...]
    values[1_234, 1] = np.inf
    arr[...] = values
    with pytest.raises(InputError, match=r"variable 'posterior' chunk 2 has Inf at task 1234"):
        open_result(out).posterior.sum().compute()


def test_an_earlier_results_unstored_chunk_of_zeros_reads_as_zeros(made, tmp_path):
    """Integers equal to their fill value (0) are not stored by zarr's default
    (write_empty_chunks=False): in a result published without every_chunk_written such a
    chunk is read as zeros, as written; in one published with it, it is damage."""
    fit = _copy(made, tmp_path, "fit.zarr")
    g = zarr.open_group(str(fit), mode="r+", use_consolidated=False)
    assert g.attrs["every_chunk_written"] is True and not g["epoch"][...].any()
    epoch = next(p for p in (fit / "epoch" / "c").rglob("*") if p.is_file())
    epoch.unlink()  # what an earlier version's result looks like
    with pytest.raises(InputError, match=r"variable 'epoch' chunk \(0,\) \(step 0-11\) is "
                                         "missing"):
        open_result(fit)
    g.attrs["every_chunk_written"] = False
    consolidate(fit)
    assert not open_result(fit).epoch.values.any()


def test_info_check_names_a_damaged_result(made, tmp_path, client):
    fit = _copy(made, tmp_path, "fit.zarr")
    ok = invoke("info", fit, "--check")
    assert ok.exit_code == 0 and "checked: every chunk of every variable written, readable " \
        "and finite" in ok.output
    _damage(fit, "state_psi", "nan")
    line = refusal(invoke("info", fit, "--check"))
    assert f"{fit}: variable 'state_psi' chunk 0 has NaN at feature 0; the result is " \
           "damaged" in line


def test_a_result_encoded_in_memory_is_the_store_zarr_writes_itself(made, tmp_path):
    """``write_result`` encodes a result held in memory in a zarr MemoryStore and writes its
    objects as files (``_write_encoded``); the same dataset written by zarr to the
    temporary folder itself (``atomic_store``) gives the same files, byte for byte, but for
    the attributes of the root (its consolidated metadata lists the same arrays)."""
    import json

    from streamlsq.io.results import _write_dataset, atomic_store, write_result

    ds = open_result(made / "fit.zarr", lazy=False)
    ds.attrs = {k: v for k, v in ds.attrs.items()
                if k not in ("complete", "written_by", "every_chunk_written")}
    encoded = write_result(ds, tmp_path / "encoded.zarr")
    copy = ds.copy()
    copy.attrs["complete"] = False
    with atomic_store(tmp_path / "by-zarr.zarr") as tmp:
        _write_dataset(copy, tmp)
    by_zarr = tmp_path / "by-zarr.zarr"
    files = sorted(p.relative_to(encoded) for p in encoded.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(by_zarr) for p in by_zarr.rglob("*") if p.is_file())
    assert len(files) > 20
    for name in files:
        a, b = (encoded / name).read_bytes(), (by_zarr / name).read_bytes()
        if name.name != "zarr.json":
            assert a == b, name
        elif name.parent != type(name)("."):
            assert json.loads(a) == json.loads(b), name
    roots = [json.loads((p / "zarr.json").read_bytes()) for p in (encoded, by_zarr)]
    assert roots[0]["attributes"] == roots[1]["attributes"]
    assert roots[0]["consolidated_metadata"] == roots[1]["consolidated_metadata"]


def test_importing_ahead_writes_nothing_and_ends_with_xarray_imported(tmp_path):
    # a fresh process, as a command's: the fit path has imported neither xarray nor pandas
    code = """
import sys, threading
from streamlsq.io.results import imports_ahead
assert "xarray" not in sys.modules and "pandas" not in sys.modules
with imports_ahead():
    assert [t for t in threading.enumerate() if t.name == "streamlsq-import-ahead"]
assert "xarray" in sys.modules and "pandas" in sys.modules
assert not [t for t in threading.enumerate() if t.name == "streamlsq-import-ahead"]
import xarray.conventions  # a submodule right after the block: the import has ended
import xarray as xr
print(xr.Dataset({"a": ("x", [1.0])}).sizes["x"])
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "1", run.stderr
    assert list(tmp_path.iterdir()) == []
