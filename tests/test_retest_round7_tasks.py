"""The seventh re-test's faults around frames and the multi-task commands. Each refusal is one
line, exit code 2 (InputError from Python), naming what is at fault, and the folder is left
as it was found; an input accepted is fitted as statsmodels fits the same rows.

1. A Parquet file polars wrote with a Categorical column, read with dask, was refused: dask
   declares such a column's categories known but empty. They are now found by a pass.
2. A polars LazyFrame was taken for a Zarr store's location.
3. The advice on a NaN: the task commands (no ``--missing``) advised ``--missing drop``; from
   Python a fit's advice now names ``missing="drop"`` too; a polars frame was called a pandas
   DataFrame.
4. An edited model (a negative weight, a variance <= 0, weights not summing to 1) was refused
   by predict blaming the tasks, with NumPy reprs; it is now refused when opened.
5. ``--k-max`` above the features was refused naming k.
6. ``fit em --k`` above the tasks was refused as ``k must be an integer in 1..n_tasks``.
7. A checkpoint of another kind of run (an EM run's given to metalearn) was silently
   discarded without ``--resume``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
import xarray as xr
import zarr

import streamlsq
from streamlsq import InputError

from conftest import one_line
from faultkit import leftovers, snapshot

FORMULA = "y ~ a + b + C(g)"


def _frame(n=600, seed=2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                       "g": rng.choice(["p", "q", "r"], n)})
    df["y"] = 3 + 2 * df.a - df.b + (df.g == "q") * 1.5 + rng.normal(size=n)
    return df


# -- 1. a polars-written categorical Parquet read with dask -----------------------------------

def test_a_polars_categorical_parquet_read_with_dask_fits_as_statsmodels(tmp_path, client):
    pl = pytest.importorskip("polars")
    dd = pytest.importorskip("dask.dataframe")
    df = _frame()
    path = tmp_path / "pl.parquet"
    pl.from_pandas(df).with_columns(pl.col("g").cast(pl.Categorical)).write_parquet(path)
    frame = dd.read_parquet(path)
    # the case itself: dask declares the categories known, and none of them
    assert frame.g.cat.known and len(frame._meta.g.cat.categories) == 0
    ref = smf.ols(FORMULA, df).fit()
    for data in (frame, path):
        fit = streamlsq.fit_stream(data, formula=FORMULA, client=client, progress=False)
        coef = fit.coef.isel(step=-1, target=0).to_series()
        np.testing.assert_allclose(coef.values, ref.params[coef.index].values, rtol=1e-9)
        np.testing.assert_allclose(fit.bse.isel(target=0).to_series()[coef.index].values,
                                   ref.bse[coef.index].values, rtol=1e-9)
        assert sorted(coef.index) == sorted(ref.params.index)


# -- 2. a polars LazyFrame ----------------------------------------------------------------------

LAZY = ("a polars LazyFrame: collect() it (a DataFrame), or write it as Parquet "
        "(sink_parquet) and give the path")


def test_a_polars_lazyframe_is_refused_in_one_line(tmp_path, client):
    pl = pytest.importorskip("polars")
    df = _frame(100)
    lazy = pl.from_pandas(df).lazy()
    fit = streamlsq.fit_stream(df, x=["a", "b"], y="y", out=tmp_path / "f.zarr",
                               client=client, progress=False)
    before = snapshot(tmp_path)
    calls = [lambda: streamlsq.fit_stream(lazy, x=["a", "b"], y="y", out=tmp_path / "o.zarr",
                                          client=client),
             lambda: streamlsq.fit_stream(lazy, formula=FORMULA, client=client),
             lambda: streamlsq.predict_stream(tmp_path / "f.zarr", lazy,
                                              out=tmp_path / "p.zarr", client=client)]
    for call in calls:
        with pytest.raises(InputError) as err:
            call()
        assert str(err.value) == LAZY
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "o.zarr") == []
    # collected, as the line says, it fits as the pandas frame
    collected = streamlsq.fit_stream(lazy.collect(), x=["a", "b"], y="y", client=client,
                                     progress=False)
    np.testing.assert_allclose(collected.coef, fit.coef, rtol=1e-12)


# -- 3. the advice on a NaN ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def tasks(tmp_path_factory, client):
    """A task store (d = 5) and its model, a store of new tasks with a NaN, a store of 3
    tasks."""
    root = tmp_path_factory.mktemp("tasks")
    streamlsq.simulate_mlr(root / "tasks.zarr", k=2, d=5, n_light=300, t_light=4,
                           n_heavy=40, t_heavy=30, n_light2=100, t_light2=6, client=client)
    streamlsq.metalearn(root / "tasks.zarr", 2, out=root / "m.zarr", client=client,
                        progress=False)
    rng = np.random.default_rng(0)
    for name, rows, nan_at in (("nan.zarr", [6] * 100, 17), ("three.zarr", [10] * 3, None)):
        X = rng.standard_normal((sum(rows), 5))
        y = X @ rng.standard_normal(5) + rng.standard_normal(sum(rows))
        if nan_at is not None:
            X[nan_at, 0] = np.nan
        ptr = np.concatenate([[0], np.cumsum(rows)]).astype("int64")
        xr.Dataset({"X": (("row", "feature"), X), "y": (("row",), y),
                    "task_ptr": (("task_edge",), ptr)}).to_zarr(root / name, zarr_format=3)
    return root


def test_the_task_commands_do_not_advise_missing_drop(tasks, tmp_path, cli):
    nan = tasks / "nan.zarr"
    before = snapshot(tmp_path)
    for args in (("metalearn", nan, "--out", tmp_path / "x.zarr", "--k", 2),
                 ("fit", "em", nan, "--out", tmp_path / "x.zarr", "--k", 2, "--init", "random"),
                 ("predict", tasks / "m.zarr", nan, "--out", tmp_path / "x.zarr")):
        line = one_line(cli(*args))
        assert line.endswith("nan.zarr: variable 'X' chunk 0 has NaN at row 17; remove or "
                             "impute the non-finite values"), line
        assert "--missing" not in line and "missing=" not in line
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "x.zarr") == []
    with pytest.raises(InputError, match=r"impute the non-finite values$"):
        streamlsq.metalearn(nan, 2, out=tmp_path / "x.zarr")
    assert snapshot(tmp_path) == before


def test_a_fits_advice_names_the_python_argument_and_a_polars_frame_is_named_so(tmp_path,
                                                                                client):
    pl = pytest.importorskip("polars")
    df = _frame(100)
    df.loc[7, "b"] = np.nan
    for data, shown in ((df, "pandas DataFrame"), (pl.from_pandas(df), "polars DataFrame")):
        with pytest.raises(InputError) as err:
            streamlsq.fit_stream(data, x=["a", "b"], y="y", out=tmp_path / "o.zarr",
                                 client=client)
        assert str(err.value) == (f"{shown}: variable 'b' chunk 0 has NaN at row 7; remove or "
                                  "impute non-finite values, or drop their rows with "
                                  '--missing drop (missing="drop")')
    assert list(tmp_path.iterdir()) == []
    # as advised: the row dropped, as statsmodels drops it
    fit = streamlsq.fit_stream(pl.from_pandas(df), x=["a", "b"], y="y", missing="drop",
                               fit_intercept=True, client=client, progress=False)
    ref = smf.ols("y ~ a + b", df, missing="drop").fit()
    np.testing.assert_allclose(fit.coef.isel(step=-1, target=0).values, ref.params.values,
                               rtol=1e-9)


# -- 4. an edited model -------------------------------------------------------------------------

DAMAGED = "the model is damaged (edited since it was written); compute it again"


@pytest.mark.parametrize("var,value,said", [
    ("weight", -0.5, "variable 'weight' [0] is -0.5, not a weight >= 0"),
    ("noise_var", 0.0, "variable 'noise_var' [0] is 0, not a variance > 0"),
    ("noise_var", -1.25, "variable 'noise_var' [0] is -1.25, not a variance > 0"),
    ("weight", 5.0, "variable 'weight' sums to {total}, not 1"),
])
def test_an_edited_model_is_refused_when_opened(tasks, tmp_path, cli, var, value, said):
    import shutil

    model = tmp_path / "m3.zarr"
    shutil.copytree(tasks / "m.zarr", model)
    g = zarr.open_group(str(model), mode="r+")
    values = g[var][:]
    values[0] = value
    g[var][:] = values
    said = said.format(total=f"{values.sum():.6g}")
    expected = f"m3.zarr: {said}: {DAMAGED}"
    before = snapshot(tmp_path)
    for args in (("predict", model, tasks / "tasks.zarr", "--out", tmp_path / "p.zarr"),
                 ("info", model, "--check")):
        line = one_line(cli(*args))
        assert line.endswith(expected), line
        assert "np.float64" not in line and "tasks" not in line.split("m3.zarr: ")[1]
    with pytest.raises(InputError) as err:
        streamlsq.open_result(model)
    assert str(err.value).endswith(expected)
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "p.zarr") == []


def test_the_models_of_every_method_pass_their_check(tasks, tmp_path, client):
    em = streamlsq.fit_em(tasks / "tasks.zarr", 2, init="random", iterations=3,
                          out=tmp_path / "em.zarr", client=client)
    for path in (tasks / "m.zarr", tmp_path / "em.zarr"):
        model = streamlsq.open_result(path, lazy=False)
        assert float(model.weight.sum()) == pytest.approx(1.0, abs=1e-12)
    assert em.attrs["method"] == "em"


# -- 5. and 6. k against the store -------------------------------------------------------------

def test_k_max_above_the_features_names_k_max(tasks, tmp_path, cli):
    before = snapshot(tmp_path)
    line = one_line(cli("metalearn", tasks / "tasks.zarr", "--out", tmp_path / "x.zarr",
                        "--k-max", 50))
    assert "tasks.zarr: --k-max 50 is larger than the number of features d = 5" in line, line
    line = one_line(cli("metalearn", tasks / "tasks.zarr", "--out", tmp_path / "x.zarr",
                        "--k", 50))
    assert "tasks.zarr: k = 50 is larger than the number of features d = 5" in line, line
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "x.zarr") == []


def test_fit_em_k_above_the_tasks_says_so(tasks, tmp_path, cli):
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "em", tasks / "three.zarr", "--out", tmp_path / "x.zarr",
                        "--k", 5, "--init", "random"))
    assert line.endswith("three.zarr: --k 5: more components than the store's 3 tasks"), line
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "x.zarr") == []


# -- 7. a checkpoint of another kind of run ------------------------------------------------------

def test_a_checkpoint_of_another_kind_of_run_is_refused_and_kept(tasks, tmp_path, cli, client,
                                                                 monkeypatch):
    from streamlsq.io.checkpoint import EntryCheckpoint

    class Stop(RuntimeError):
        pass

    save, saved = EntryCheckpoint.save, []

    def save_then_stop(self, name, value, reads=()):
        save(self, name, value, reads)
        saved.append(name)
        if len(saved) == 2:
            raise Stop

    data = tasks / "tasks.zarr"
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        m.setattr(EntryCheckpoint, "save", save_then_stop)
        with pytest.raises(Stop):
            streamlsq.fit_em(data, 2, init="random", iterations=6, checkpoint=ckpt,
                             client=client)
    assert (ckpt / "progress.json").exists()
    stream = tmp_path / "s.zarr"
    streamlsq.simulate_stream(stream, n_rows=200, n_features=2, client=client)
    before = snapshot(tmp_path)
    expected = (f"{ckpt}: the checkpoint of a 'streamlsq fit em' run; this is '{{}}': "
                "choose another --checkpoint, or remove it")
    for kind, args in (("streamlsq metalearn", ("metalearn", data, "--out", tmp_path / "x.zarr",
                                      "--k", 2, "--checkpoint", ckpt)),
                       ("streamlsq metalearn", ("metalearn", data, "--out",
                                                tmp_path / "x.zarr", "--k", 2,
                                                "--checkpoint", ckpt, "--resume")),
                       ("streamlsq fit kf4lls (--engine sequential)",
                        ("fit", "kf4lls", stream, "--out", tmp_path / "x.zarr",
                         "--checkpoint", ckpt))):
        line = one_line(cli(*args))
        assert line.endswith(expected.format(kind)), line
    assert snapshot(tmp_path) == before and leftovers(tmp_path / "x.zarr") == []
    # the EM run's progress kept: resumed, it ends where an uninterrupted run ends
    resumed = streamlsq.fit_em(data, 2, init="random", iterations=6, checkpoint=ckpt,
                               resume=True, client=client)
    fresh = streamlsq.fit_em(data, 2, init="random", iterations=6, client=client)
    np.testing.assert_allclose(resumed.coef, fresh.coef, rtol=1e-12)
    np.testing.assert_allclose(resumed.weight, fresh.weight, rtol=1e-12)
    # a metalearn checkpoint given to an EM run, likewise
    mck = tmp_path / "mck"
    with monkeypatch.context() as m:
        saved.clear()
        m.setattr(EntryCheckpoint, "save", save_then_stop)
        with pytest.raises(Stop):
            streamlsq.metalearn(data, 2, checkpoint=mck, client=client, progress=False)
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "em", data, "--out", tmp_path / "x.zarr", "--k", 2,
                        "--init", "random", "--checkpoint", mck))
    assert line.endswith(f"{mck}: the checkpoint of a 'streamlsq metalearn' run; this is "
                         "'streamlsq fit em': choose another --checkpoint, or remove it"), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("given, named", [
    (("--step", "1"), "--step applies"),
    (("--x", "X"), "--x applies"),
    (("--sample-dim", "row", "--step", "2"), "--sample-dim, --step apply"),
    (("--intervals", "--alpha", "0.1"), "--intervals, --alpha apply"),
])
def test_predict_refuses_a_stream_fits_options_for_a_model(tasks, tmp_path, cli, given,
                                                           named):
    """Re-test round 8 (M2, M3): --step and --x with a meta-learned model were ignored
    (the output bit for bit a run's without them)."""
    before = snapshot(tmp_path)
    line = one_line(cli("predict", tasks / "m.zarr", tasks / "tasks.zarr", "--out",
                        tmp_path / "p.zarr", *given))
    assert line.endswith(f"m.zarr is a meta-learned model (method 'metalearn'): {named} to "
                         "a stream fit's rows, not to tasks"), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("given, named", [
    (("--holdout", "5"), "--holdout applies"),
    (("--estimator", "map", "--yhat"), "--estimator, --yhat apply"),
    (("--chunk-tasks", "3"), "--chunk-tasks applies"),
])
def test_predict_refuses_a_models_options_for_a_stream_fit(tmp_path, cli, client, given,
                                                           named):
    """Re-test round 8 (P3-P7): the multi-task options with a stream fit were ignored."""
    rows = xr.Dataset({"x": ("row", np.arange(30.0)), "y": ("row", 2.0 * np.arange(30.0))})
    rows.to_zarr(tmp_path / "rows.zarr", zarr_format=3)
    streamlsq.fit_stream(tmp_path / "rows.zarr", x="x", y="y", sample_dim="row",
                         out=tmp_path / "fit.zarr", client=client, progress=False)
    before = snapshot(tmp_path)
    line = one_line(cli("predict", tmp_path / "fit.zarr", tmp_path / "rows.zarr", "--out",
                        tmp_path / "p.zarr", *given))
    assert line.endswith(f"fit.zarr is a stream fit (method 'kf4lls'): {named} to a "
                         "meta-learned model's tasks, not to rows"), line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("given, wanted", [
    (("--init", "truth", "--scale", "0.5"), "--scale goes with --init perturbed"),
    (("--init", "random", "--scale", "0.3"), "--scale goes with --init perturbed"),
    (("--init", "truth", "--seed", "7"), "--seed goes with --init perturbed or random"),
])
def test_em_refuses_a_start_option_its_start_does_not_read(tasks, tmp_path, cli, given,
                                                           wanted):
    """Re-test round 8 (M5, M6): fit em --init truth with --scale or --seed (and --init
    random with --scale) gave a model bit for bit a run's without them."""
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "em", tasks / "tasks.zarr", "--out", tmp_path / "e.zarr",
                        "--k", 2, *given))
    assert wanted in line, line
    assert snapshot(tmp_path) == before
