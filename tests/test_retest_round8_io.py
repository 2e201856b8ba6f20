"""What the eighth re-test found in streamlsq's inputs and outputs.

``predict``, ``convert`` and ``simulate`` with an output on ``memory://`` ended with exit 1
``unexpected error (GroupNotFoundError)``: their Dask workers, other processes, opened the
temporary store on a ``memory://`` of their own, empty. Their tasks' writes now travel back
and are written by the run's process, as a fit's result is.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import signal
import time

import fsspec
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import zarr

import streamlsq

from faultkit import leftovers, snapshot


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, client):
    """A stream store and its kf4lls and GLM fits, a Parquet table, a task store and its
    model."""
    root = tmp_path_factory.mktemp("round8")
    data = streamlsq.simulate_stream(root / "data.zarr", n_rows=2_000, n_features=3,
                                     chunk_rows=500, seed=4, client=client)
    streamlsq.fit_stream(data, "kf4lls", out=root / "fit.zarr", client=client)
    streamlsq.fit_glm(data, family="gaussian", out=root / "glm.zarr", client=client)
    frame = pd.DataFrame(np.random.default_rng(1).standard_normal((300, 3)),
                         columns=["a", "b", "y"])
    frame["k"] = np.where(frame.a > 0, "up", "down")
    frame.to_parquet(root / "t.parquet")
    streamlsq.simulate_mlr(root / "tasks.zarr", k=2, d=3, n_light=60, t_light=4, n_heavy=10,
                           t_heavy=20, n_light2=20, t_light2=6, client=client)
    streamlsq.metalearn(root / "tasks.zarr", 2, out=root / "m.zarr", client=client,
                        progress=False)
    return root


#: each command writing its chunks on the workers, as a function of (the inputs' folder,
#: the output, the client)
WRITERS = {
    "predict": lambda r, out, c: streamlsq.predict(r / "fit.zarr", r / "data.zarr", out=out,
                                                   client=c),
    "predict glm": lambda r, out, c: streamlsq.predict(r / "glm.zarr", r / "data.zarr",
                                                       out=out, client=c),
    "predict tasks": lambda r, out, c: streamlsq.predict(r / "m.zarr", r / "tasks.zarr",
                                                         out=out, holdout=2, yhat=True,
                                                         client=c),
    "convert": lambda r, out, c: streamlsq.convert(r / "t.parquet", out, chunk_rows=100,
                                                   client=c),
    "simulate stream": lambda r, out, c: streamlsq.simulate_stream(
        out, n_rows=1_000, n_features=2, chunk_rows=300, seed=3, client=c),
    "simulate mlr": lambda r, out, c: streamlsq.simulate_mlr(
        out, k=2, d=3, n_light=30, t_light=4, n_heavy=5, t_heavy=20, n_light2=10,
        t_light2=6, seed=5, client=c),
}


def _arrays(group: zarr.Group) -> dict:
    return {name: arr[...] for name, arr in group.arrays()}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_command_writing_its_chunks_on_the_workers_writes_to_memory(inputs, client,
                                                                      command):
    """W1: it used to end with `unexpected error (GroupNotFoundError ... /.p.zarr.partial-...)`
    (exit 1): the workers wrote into memory:// filesystems of their own."""
    memory = fsspec.filesystem("memory")
    local = inputs / f"{command.replace(' ', '-')}.zarr"
    WRITERS[command](inputs, local, client)
    try:
        WRITERS[command](inputs, "memory://p.zarr", client)
        # memory:// is this process's: read here, not by the cluster's worker processes
        written = zarr.open_group("memory://p.zarr", mode="r")
        expected = zarr.open_group(local, mode="r")
        got, want = _arrays(written), _arrays(expected)
        assert sorted(got) == sorted(want) and want
        for name, values in want.items():
            np.testing.assert_array_equal(got[name], values, err_msg=name)
        assert written.attrs["complete"] is True
        assert [p["name"] for p in memory.ls("/")] == ["/p.zarr"]  # no temporary left
    finally:
        with contextlib.suppress(FileNotFoundError):
            memory.rm("/p.zarr", recursive=True)


# -- 2: decimal columns of polars and pandas frames -----------------------------------------


@pytest.mark.parametrize("kind", ["polars", "pandas"])
def test_a_decimal_column_of_a_frame_fits_as_its_float64_column(kind, client):
    """W2: a polars Decimal column (and a pandas column of Decimal objects) used to be refused
    as `a Decimal in a column of Python objects ... (e.g. pandas' astype(float))`."""
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(7)
    text = [f"{v:.2f}" for v in 20_000 + 1_000 * rng.normal(size=200)]
    text[0] = "20640.42"  # Arrow's own cast to float64 gives 20640.420000000002
    frame = pd.DataFrame({"x1": [float(t) for t in text], "x2": rng.normal(size=200)})
    frame["y"] = 1 + 0.001 * frame.x1 + 2 * frame.x2 + 0.1 * rng.normal(size=200)
    if kind == "polars":
        decimals = pl.from_pandas(frame).with_columns(
            pl.Series("x1", text).str.to_decimal(scale=2))
        assert isinstance(decimals.schema["x1"], pl.Decimal)
    else:
        decimals = frame.assign(x1=[decimal.Decimal(t) for t in text])
    fits = [streamlsq.fit_stream(f, "kf4lls", x=["x1", "x2"], y="y", fit_intercept=True,
                                 client=client, progress=False).coef.values[-1, :, 0]
            for f in (decimals, frame)]
    np.testing.assert_array_equal(fits[0], fits[1])
    X = sm.add_constant(frame[["x1", "x2"]])
    np.testing.assert_allclose(fits[0], sm.OLS(frame.y, X).fit().params.to_numpy(), rtol=1e-8)


# -- 3: an interrupt swallowed on its way ---------------------------------------------------


@pytest.mark.parametrize("command", ["convert", "predict"])
def test_an_interrupt_swallowed_in_a_callback_still_ends_the_run(inputs, tmp_path, cli,
                                                                 monkeypatch, command):
    """W3: once in ten trials Ctrl-C was raised where it was dropped (Python prints and drops
    an exception raised in a __del__ or a weakref callback, which it runs at any moment on
    the main thread): the run went on and published, exit 0. The command line's handler now
    notes the interrupt, and nothing is published after one."""
    from streamlsq.runtime import progress

    update = progress.tqdm.update

    def dropping(self, n=1):
        try:  # Ctrl-C at the progress bar, dropped as a __del__ drops it
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass
        return update(self, n)

    monkeypatch.setattr(progress.tqdm, "update", dropping)
    args = {"convert": ["convert", inputs / "t.parquet"],
            "predict": ["predict", inputs / "fit.zarr", inputs / "data.zarr"]}[command]
    out = tmp_path / "out.zarr"
    before = snapshot(tmp_path)
    result = cli(*args, "--out", out)
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == "streamlsq: error: interrupted"
    assert snapshot(tmp_path) == before and leftovers(out) == []
    monkeypatch.setattr(progress.tqdm, "update", update)  # the next run is not interrupted
    assert cli(*args, "--out", out).exit_code == 0
