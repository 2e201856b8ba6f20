"""Stores in an object store: a real S3-compatible server (moto's server mode) started by the
test on 127.0.0.1, never a mock. Simulate into it, fit on both engines, meta-learn, predict
and apply a stream fit, each reading from it and writing to it; the numbers are those of
numpy.linalg.lstsq on the rows read back, or of the same run on a local copy. Publication:
the result is complete when it appears, a concurrent publication is refused by the
conditional write, and nothing is left under a temporary prefix."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest
import xarray as xr
import zarr

import streamlsq
from streamlsq import InputError, open_result

from conftest import S3_BUCKET, lstsq, s3_filesystem
from conftest import moto_server as _moto_server

pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")

BUCKET = S3_BUCKET


def _store(url, options):
    return zarr.storage.FsspecStore.from_url(url, storage_options=options)


def _leftovers(options, prefix=""):
    return [k for k in s3_filesystem(options).find(f"{BUCKET}/{prefix}") if ".partial-" in k]


def test_fit_on_both_engines_reads_and_writes_s3(s3, client, tmp_path):
    endpoint, options = s3
    data = f"s3://{BUCKET}/stream.zarr"
    streamlsq.simulate_stream(_store(data, options), n_rows=12_000, n_features=4, n_targets=2,
                              chunk_rows=2_000, seed=3, client=client)
    g = zarr.open_group(_store(data, options), mode="r")
    X, Y = np.asarray(g["X"][:]), np.asarray(g["y"][:])
    for engine in ("sequential", "scan"):
        out = f"s3://{BUCKET}/fit-{engine}.zarr"
        ds = streamlsq.fit_stream(data, "kf4lls", engine=engine, block_size=1_500, out=out,
                                  storage_options=options, client=client)
        np.testing.assert_allclose(ds.coef.isel(step=-1).values, lstsq(X, Y), rtol=1e-10,
                                   atol=1e-12)
        stored = open_result(out, storage_options=options)
        assert stored.attrs["complete"] is True and stored.attrs["input"] == data
        np.testing.assert_array_equal(stored.coef.values, ds.coef.values)
    # an existing result is refused, and --overwrite replaces only streamlsq's own
    with pytest.raises(InputError, match="already exists"):
        streamlsq.fit_stream(data, out=f"s3://{BUCKET}/fit-scan.zarr", storage_options=options,
                             client=client)
    users = f"s3://{BUCKET}/users.zarr"
    xr.Dataset({"v": ("i", np.arange(3.0))}).to_zarr(_store(users, options), zarr_format=3)
    with pytest.raises(InputError, match="was not written by streamlsq"):
        streamlsq.fit_stream(data, out=users, overwrite=True, storage_options=options,
                             client=client)
    again = streamlsq.fit_stream(data, out=f"s3://{BUCKET}/fit-scan.zarr", overwrite=True,
                                 storage_options=options, client=client, block_size=3_000)
    assert open_result(f"s3://{BUCKET}/fit-scan.zarr", storage_options=options
                       ).attrs["block_size"] == again.attrs["block_size"] == 3_000
    assert _leftovers(options) == []
    np.testing.assert_array_equal(
        xr.open_zarr(_store(users, options)).v.values, np.arange(3.0))  # untouched


def test_continue_and_predict_on_s3(s3, client):
    endpoint, options = s3
    rng = np.random.default_rng(8)
    X = rng.standard_normal((4_400, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.5 + 0.01 * rng.standard_normal(4_400)
    data = f"s3://{BUCKET}/grows.zarr"
    xr.Dataset({"X": (("sample", "feature"), X[:4_000]), "y": (("sample",), y[:4_000])},
               coords={"feature": ["u", "v", "w"]}).to_zarr(
        _store(data, options), zarr_format=3,
        encoding={"X": {"chunks": (700, 3)}, "y": {"chunks": (700,)}})
    first = f"s3://{BUCKET}/grows-fit.zarr"
    streamlsq.fit_stream(data, out=first, fit_intercept=True, block_size=500,
                         storage_options=options, client=client)
    xr.Dataset({"X": (("sample", "feature"), X[4_000:]), "y": (("sample",), y[4_000:])},
               coords={"feature": ["u", "v", "w"]}).to_zarr(_store(data, options),
                                                           append_dim="sample")
    more = streamlsq.fit_stream(data, continue_from=first, fit_intercept=True, block_size=500,
                                storage_options=options, client=client)
    ref = lstsq(np.hstack([np.ones((4_400, 1)), X]), y[:, None])
    np.testing.assert_allclose(more.coef.isel(step=-1).values, ref, rtol=1e-10)
    assert list(more.feature.values) == ["intercept", "u", "v", "w"]
    pred = f"s3://{BUCKET}/grows-pred.zarr"
    streamlsq.predict_stream(first, data, out=pred, storage_options=options, client=client)
    got = open_result(pred, storage_options=options)
    W = open_result(first, storage_options=options).coef.isel(step=-1).values
    np.testing.assert_allclose(got.yhat.values, np.hstack([np.ones((4_400, 1)), X]) @ W,
                               rtol=1e-12)
    assert got.residual.shape == (4_400, 1)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_cf_encoded_store_in_s3_is_read_as_xarray_decodes_it(s3, client, zarr_format):
    """X packed in int16 with scale, offset and a fill value (tests/test_reader.py): by URL
    with its options and as an FsspecStore, the rows and the fit (decoded by the workers)
    are those of xr.open_zarr of the same store."""
    endpoint, options = s3
    rng = np.random.default_rng(9)
    X = np.round(rng.uniform(-3, 3, (3_000, 3)), 2)
    y = X @ [[1.5], [-2.0], [0.5]] + 0.1 * rng.standard_normal((3_000, 1))
    data = f"s3://{BUCKET}/packed-v{zarr_format}.zarr"
    xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample", "target"), y)}).to_zarr(
        _store(data, options), zarr_format=zarr_format, encoding={
            "X": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 5.0,
                  "_FillValue": np.int16(-32768), "chunks": (700, 3)},
            "y": {"chunks": (700, 1)}})
    lazy = xr.open_zarr(_store(data, options))
    expected = lazy.X.values
    for source in (streamlsq.open_stream(data, storage_options=options),
                   streamlsq.open_stream(_store(data, options))):
        assert source.read(0, 3_000)[0].tobytes() == expected.tobytes()
    fit = streamlsq.fit_stream(data, "kf4lls", storage_options=options, client=client)
    np.testing.assert_array_equal(fit.coef.values,
                                  streamlsq.fit_stream(lazy, "kf4lls", client=client).coef.values)
    np.testing.assert_allclose(fit.coef.isel(step=-1).values, lstsq(expected, y), rtol=1e-10)


def test_metalearn_and_predict_read_and_write_s3(s3, client, tmp_path):
    endpoint, options = s3
    tasks = _store(f"s3://{BUCKET}/tasks.zarr", options)
    kw = dict(k=2, d=4, n_light=2_000, t_light=4, n_heavy=60, t_heavy=40, n_light2=500,
              t_light2=8, seed=2, client=client)
    streamlsq.simulate_mlr(tasks, **kw)
    local = streamlsq.simulate_mlr(tmp_path / "tasks.zarr", **kw)
    model = _store(f"s3://{BUCKET}/model.zarr", options)
    remote_model = streamlsq.metalearn(tasks, 2, out=model, client=client)
    local_model = streamlsq.metalearn(local, 2, client=client)
    np.testing.assert_array_equal(remote_model.coef.values, local_model.coef.values)
    assert open_result(model).attrs["complete"] is True
    out = _store(f"s3://{BUCKET}/pred.zarr", options)
    streamlsq.predict(model, tasks, out=out, holdout=2, yhat=True, client=client)
    got = open_result(out)
    ref = streamlsq.predict(model, local, holdout=2,
                            yhat=True, client=client)
    np.testing.assert_array_equal(got.coef.values, ref.coef.values)
    np.testing.assert_array_equal(got.yhat.values, ref.yhat.values)
    assert _leftovers(options) == []


def test_a_concurrent_publication_is_refused_by_the_conditional_write(s3):
    from streamlsq.errors import OutputError
    from streamlsq.io.location import locate
    from streamlsq.io.outputs import RemoteTemporary, publish_remote

    endpoint, options = s3
    out = locate(f"s3://{BUCKET}/race.zarr", options)
    with RemoteTemporary(out) as tmp:
        g = zarr.open_group(tmp.store, mode="w", zarr_format=3)
        g.attrs.update({"complete": True, "written_by": "streamlsq test"})
        g.create_array("a", shape=(3,), dtype="float64")[...] = 1.0
        # another run claims the destination between this run's check and its publication
        s3_filesystem(options).pipe_file(f"{BUCKET}/race.zarr/zarr.json",
                               b'{"zarr_format": 3, "node_type": "group", "attributes": {}}')
        with pytest.raises(OutputError, match="another run published a result here"):
            publish_remote(tmp, out, overwrite=False)
    assert s3_filesystem(options).find(f"{BUCKET}/race.zarr") == [f"{BUCKET}/race.zarr/zarr.json"]
    assert _leftovers(options, "race") == []


def test_the_command_line_reads_s3_urls_with_credentials_from_the_environment(s3):
    """A new process, as a user runs it: its embedded cluster's workers inherit the
    environment, where fsspec finds the endpoint and the credentials."""

    endpoint, options = s3
    env = {**os.environ, "FSSPEC_S3_ENDPOINT_URL": endpoint, "FSSPEC_S3_KEY": "testing",
           "FSSPEC_S3_SECRET": "testing"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    data, out = f"s3://{BUCKET}/cli.zarr", f"s3://{BUCKET}/cli-fit.zarr"
    rng = np.random.default_rng(9)
    X = rng.standard_normal((900, 2))
    y = X @ [3.0, -1.0] + 2.0
    xr.Dataset({"p": ("t", X[:, 0]), "q": ("t", X[:, 1]), "r": ("t", y)}).chunk(
        {"t": 300}).to_zarr(_store(data, options), zarr_format=3)
    res = subprocess.run([sys.executable, "-m", "streamlsq.cli", "fit", "rls", data, "--out",
                          out, "--x", "p,q", "--y", "r", "--sample-dim", "t", "--intercept",
                          "--forgetting", "1", "--workers", "1"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"wrote {out}: rls")
    assert res.stderr == ""  # no "Unclosed client session" of s3fs's sessions at the exit
    # a command whose embedded workers write to the store (re-test round 7, W7)
    made = subprocess.run([sys.executable, "-m", "streamlsq.cli", "simulate", "stream",
                           "--out", f"s3://{BUCKET}/cli-sim.zarr", "--rows", "2000",
                           "--features", "2", "--workers", "1"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and made.stderr == "", made.stderr
    fit = open_result(out, storage_options=options)
    np.testing.assert_allclose(fit.coef.isel(step=-1, target=0).values, [2.0, 3.0, -1.0],
                               rtol=1e-9)
    assert list(fit.feature.values) == ["intercept", "p", "q"]


# -- every job with its inputs in S3, reached by storage_options alone ----------------------
#
# Each job below reads its inputs from s3:// URLs with the credentials and the endpoint given
# only as storage_options, and must give what the same job gives on the local copy of the
# same stores, bit for bit. The workers are threads of this process, so they see the
# environment each test sets, as workers started in it would.

STREAM = dict(n_rows=3_000, n_features=3, n_targets=2, chunk_rows=1_000)
ROWS = dict(n_rows=1_500, n_features=3, n_targets=2, chunk_rows=500)
TASKS = dict(k=2, d=4, n_light=2_000, t_light=4, n_heavy=60, t_heavy=40, n_light2=500,
             t_light2=8)


def _make_inputs(folder, seed: int, client) -> None:
    """The jobs' inputs, simulated into ``folder`` (another ``seed``: other data, same
    layout)."""
    streamlsq.simulate_stream(folder / "stream.zarr", **STREAM, seed=seed, client=client)
    streamlsq.simulate_stream(folder / "rows.zarr", **ROWS, seed=seed + 1, client=client)
    streamlsq.simulate_interleaved(folder / "pop.zarr", n=50, q=3, steps=4, seed=seed,
                                   client=client)
    streamlsq.simulate_mlr(folder / "tasks.zarr", **TASKS, seed=seed, client=client)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((600, 2))
    import pandas as pd

    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "k": rng.choice(["u", "v"], 600),
                  "y": x @ [1.0, -2.0] + 0.1 * rng.standard_normal(600)}).to_parquet(
        folder / "table.parquet", row_group_size=200)


def _upload(folder, options) -> None:
    fs = s3_filesystem(options)
    for path in sorted(folder.iterdir()):
        fs.put(str(path), f"{BUCKET}/inputs/{path.name}", recursive=path.is_dir())
    fs.invalidate_cache()


@pytest.fixture(scope="module")
def threads():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def inputs(s3, threads, tmp_path_factory):
    """The jobs' inputs in a local folder and, the same bytes, under ``inputs/`` in S3."""
    endpoint, options = s3
    folder = tmp_path_factory.mktemp("inputs")
    _make_inputs(folder, 3, threads)
    _upload(folder, options)
    return folder


@pytest.fixture(scope="module")
def other_s3(inputs, threads, tmp_path_factory):
    """A second S3 server, in a process of its own (moto's servers in one process share their
    buckets), holding a bucket of the same name with other data under the same names; it
    records every request it receives once set up: ``(endpoint, requests)``, where
    ``requests()`` is the list of requests recorded so far."""
    recording = tmp_path_factory.mktemp("other-s3") / "requests.jsonl"
    recording.touch()
    with _moto_server({"MOTO_RECORDER_FILEPATH": str(recording)}) as endpoint:
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": endpoint}}
        s3fs.S3FileSystem(**options).mkdir(BUCKET)
        folder = tmp_path_factory.mktemp("other-inputs")
        _make_inputs(folder, 5, threads)
        _upload(folder, options)
        x = zarr.open_group(inputs / "stream.zarr", mode="r")["X"][:]
        assert not np.array_equal(x, zarr.open_group(
            _store(f"s3://{BUCKET}/inputs/stream.zarr", options), mode="r")["X"][:])
        urllib.request.urlopen(urllib.request.Request(
            f"{endpoint}/moto-api/recorder/start-recording", method="POST"), timeout=30)

        def requests():
            return recording.read_text().splitlines()

        with contextlib.suppress(urllib.error.HTTPError):  # the recording works
            urllib.request.urlopen(f"{endpoint}/", timeout=30)
        assert len(requests()) == 1 and '"GET"' in requests()[0], requests()
        yield endpoint, requests


@pytest.fixture
def only_options(monkeypatch, tmp_path):
    """No credentials or endpoint anywhere but in storage_options: no AWS_* or FSSPEC_S3_*
    variables, and the AWS configuration files point at nothing."""

    for name in list(os.environ):
        if name.startswith(("AWS_", "FSSPEC_S3")):
            monkeypatch.delenv(name)
    nothing = str(tmp_path / "no-such-aws-file")
    monkeypatch.setenv("AWS_CONFIG_FILE", nothing)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", nothing)
    s3fs.S3FileSystem.clear_instance_cache()
    yield monkeypatch
    s3fs.S3FileSystem.clear_instance_cache()


def _fit(engine):
    def job(at, out, run):
        return streamlsq.fit_stream(at("stream.zarr"), "kf4lls", engine=engine, block_size=700,
                                    **run)
    return job


def _interleaved(at, out, run):
    pop = at("pop.zarr")
    return streamlsq.fit_interleaved(f"{pop}#a", f"{pop}#b", test=f"{pop}#c",
                                     estimate_alpha="means", engine="scan", **run)


def _robust(at, out, run):
    streamlsq.fit_stream(at("stream.zarr"), "kf4lls", out=out("fit.zarr"), **run)
    return streamlsq.robust_covariance(out("fit.zarr"), at("stream.zarr"), cov_type="HC3",
                                       **run)


def _metalearn(at, out, run):
    return streamlsq.metalearn(at("tasks.zarr"), 2, **run)


def _pooled(at, out, run):
    return streamlsq.fit_pooled(at("tasks.zarr"), holdout=2, **run)


def _em(at, out, run):
    return streamlsq.fit_em(at("tasks.zarr"), 2, init="perturbed", iterations=5, **run)


def _predict_tasks(at, out, run):
    streamlsq.metalearn(at("tasks.zarr"), 2, out=out("model.zarr"), **run)
    return streamlsq.predict(out("model.zarr"), at("tasks.zarr"), out=out("pred.zarr"),
                             holdout=2, new_rows=at("tasks.zarr"), **run)


def _predict_stream(at, out, run):
    streamlsq.fit_stream(at("stream.zarr"), "kf4lls", out=out("fit.zarr"), **run)
    return streamlsq.predict_stream(out("fit.zarr"), at("rows.zarr"), out=out("pred.zarr"),
                                    intervals=True, **run)


def _predict_any_fit(at, out, run):
    streamlsq.fit_stream(at("stream.zarr"), "rls", out=out("fit.zarr"), **run)
    return streamlsq.predict(out("fit.zarr"), at("rows.zarr"), **run)


def _convert(at, out, run):
    return streamlsq.convert(at("table.parquet"), out("table.zarr"), **run)


def _fit_table(at, out, run):
    # the levels of k are found by a pass of the workers over the row groups
    return streamlsq.fit_stream(at("table.parquet"), formula="y ~ a + b + C(k)", **run)


#: every job that reads stores: name → job(at: input name → location, out: output name →
#: location, run: the run's options) → its result (streamlsq.predict opens the result to
#: tell a fit from a model: "predict-tasks" and "predict-any-fit")
JOBS = {
    "fit-sequential": _fit("sequential"),
    "fit-scan": _fit("scan"),
    "fit_interleaved": _interleaved,
    "robust_covariance": _robust,
    "metalearn": _metalearn,
    "fit_pooled": _pooled,
    "fit_em": _em,
    "predict-tasks": _predict_tasks,
    "predict_stream": _predict_stream,
    "predict-any-fit": _predict_any_fit,
    "convert": _convert,
    "fit-table": _fit_table,
}

#: attributes that are results (not provenance, which names the inputs)
RESULT_ATTRS = ("alpha", "alpha_source", "holdout_mse", "mse", "n_rows", "log_likelihood",
                "iterations", "model_step", "conf_int_alpha")

_LOCAL: dict[str, xr.Dataset] = {}


def _local_result(name, inputs, threads, tmp_path_factory) -> xr.Dataset:
    """The job on the local copy of its inputs (once per module)."""
    if name not in _LOCAL:
        folder = tmp_path_factory.mktemp(f"local-{name}")
        _LOCAL[name] = JOBS[name](lambda n: str(inputs / n), lambda n: str(folder / n),
                                  {"client": threads}).load()
    return _LOCAL[name]


def _in_s3(test: str):
    def at(name):
        return f"s3://{BUCKET}/inputs/{name}"

    def out(name):
        return f"s3://{BUCKET}/{test}/{name}"
    return at, out


def _assert_same_result(got: xr.Dataset, ref: xr.Dataset) -> None:
    """Every array equal exactly, and the attributes that are results; not the record of
    what was read (the stamps of the stores' objects, which differ between two copies)."""
    stamps = [name for name in ref.data_vars if "fingerprint" in str(name)]
    xr.testing.assert_equal(got.drop_vars(stamps).drop_attrs(), ref.drop_vars(stamps).drop_attrs())
    for name in RESULT_ATTRS:
        assert (name in got.attrs) == (name in ref.attrs), name
        if name in ref.attrs:
            np.testing.assert_array_equal(got.attrs[name], ref.attrs[name], err_msg=name)


@pytest.mark.parametrize("name", list(JOBS))
def test_each_job_reads_s3_by_its_storage_options_alone(name, s3, other_s3, inputs, threads,
                                                        only_options, tmp_path_factory):
    """The endpoint and the credentials only in storage_options, and another S3 server named
    in the environment (AWS_ENDPOINT_URL, no credentials) holding a bucket of the same name
    with other data: an opener not given the options failed (no credentials), or, given the
    credentials alone, read that server and computed from other data; and that server
    received no request at all (a read of its metadata alone, the same as here, is caught
    there too)."""
    endpoint, options = s3
    other_endpoint, other_requests = other_s3
    only_options.setenv("AWS_ENDPOINT_URL", other_endpoint)
    ref = _local_result(name, inputs, threads, tmp_path_factory)
    before = len(other_requests())
    got = JOBS[name](*_in_s3(f"options-alone-{name}"),
                     {"storage_options": options, "client": threads}).load()
    _assert_same_result(got, ref)
    assert other_requests()[before:] == []
