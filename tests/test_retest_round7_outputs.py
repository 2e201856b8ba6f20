"""What the seventh re-test found in streamlsq's outputs and object-store handling.

``--overwrite`` of a result that holds a user's file removed the file with the result (exit
0), locally and on S3: it is now refused before any work, the store as it was. An output at
the root of a filesystem (``memory://fit.zarr``) could not be written (its temporaries were
placed under ``memory:``). A checkpoint URL became a local folder ``./s3:/...``; an output
under a user's object (``s3://b/notes.txt/fit.zarr``) made the object a prefix too;
``storage_options`` with local paths only were ignored; an output on an unreachable endpoint
or with a wrong secret was an unexpected error; ``info`` of a killed publication's claim
said ``result of None``.
"""

from __future__ import annotations

import contextlib
import json
import os

import fsspec
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import streamlsq
from streamlsq import InputError, open_result

from conftest import S3_BUCKET, moto_server, one_line, s3_filesystem
from faultkit import leftovers, snapshot

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

BUCKET = S3_BUCKET
NOTE = "MY-NOTES.txt"


@pytest.fixture
def data(tmp_path, client):
    path = streamlsq.simulate_stream(tmp_path / "data.zarr", n_rows=2_000, n_features=3,
                                     chunk_rows=500, seed=4, client=client)
    pd.DataFrame(np.random.default_rng(1).standard_normal((300, 3)),
                 columns=["a", "b", "y"]).to_parquet(tmp_path / "t.parquet")
    return path


def _listing(options, prefix=""):
    """Every object of the bucket under ``prefix`` with its bytes."""
    fs = s3_filesystem(options)
    return {key: fs.cat_file(key) for key in fs.find(f"{BUCKET}/{prefix}")}


#: each command that takes --overwrite and writes a result store: (arguments with {d} the
#: stream store, {t} the Parquet table, {m} a stream fit; the output last)
COMMANDS = {
    "fit": ["fit", "kf4lls", "{d}"],
    "fit glm": ["fit", "glm", "{d}", "--family", "gaussian"],
    "convert": ["convert", "{t}"],
    "simulate": ["simulate", "stream", "--rows", "1000", "--features", "2"],
    "predict": ["predict", "{m}", "{d}"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_overwrite_of_a_result_holding_a_users_file_is_refused(tmp_path, cli, data,
                                                               command):
    """B2: the user's file used to be removed with the earlier result (exit 0)."""
    model = tmp_path / "m.zarr"
    assert cli("fit", "kf4lls", data, "--out", model).exit_code == 0
    args = [a.format(d=data, t=tmp_path / "t.parquet", m=model) for a in COMMANDS[command]]
    out = tmp_path / "out.zarr"
    first = cli(*args, "--out", out)
    assert first.exit_code == 0, first.output
    # a file at the top, a folder of the user's (named, not each file in it) inside an array
    nested = "coef/notes/mine.txt" if command.startswith("fit") else f"sub/{NOTE}"
    for place, named in ((NOTE, NOTE), (nested, nested.rsplit("/", 1)[0])):
        (out / place).parent.mkdir(parents=True, exist_ok=True)
        (out / place).write_text("my notes")
        before = snapshot(tmp_path)
        line = one_line(cli(*args, "--out", out, "--overwrite"))
        assert line == (f"streamlsq: error: {out}: holds {named}, which streamlsq did not "
                        "write; move it or choose another --out")
        assert snapshot(tmp_path) == before and leftovers(out) == []
        os.remove(out / place)
        if "/" in place:
            os.removedirs((out / place).parent)
    # streamlsq's own store alone is replaced
    again = cli(*args, "--out", out, "--overwrite")
    assert again.exit_code == 0, again.output
    assert leftovers(out) == []


def test_what_a_result_store_may_hold():
    """Only the root metadata, the metadata of the nodes the result records and the chunk
    keys of its arrays (within the grid) are streamlsq's."""
    from streamlsq.io.outputs import foreign_entries

    store = zarr.storage.MemoryStore()
    g = zarr.open_group(store, mode="w", zarr_format=3)
    g.create_array("coef", shape=(3, 4), chunks=(2, 4), dtype="f8")[:] = 1.0
    g.create_array("nobs", shape=(), dtype="i8")[...] = 3
    zarr.consolidate_metadata(store)
    objects = {k: json.loads(v.to_bytes()) for k, v in store._store_dict.items()
               if k.endswith("zarr.json")}
    keys = set(store._store_dict)
    assert sorted(keys - set(objects)) == ["coef/c/0/0", "coef/c/1/0", "nobs/c"]
    assert foreign_entries(keys, objects.get, ["coef", "coef/c", "coef/c/0", "nobs"]) == []
    extra = {"coef/c/2/0", "coef/c/0/0/0", "coef/c.0.0", "nobs/c/0", "notes.txt",
             "other/zarr.json", "coef/zarr.json.bak"}
    assert foreign_entries(keys | extra, objects.get, ["coef", "empty"]) == sorted(
        extra | {"empty"})


def test_a_result_at_the_root_of_a_filesystem_is_written(data, client):
    """B1: memory://fit.zarr used to be refused (`cannot write here (FileNotFoundError ...
    'memory:/.streamlsq-probe-...')`); memory://dir/fit.zarr worked."""
    memory = fsspec.filesystem("memory")
    try:
        fit = streamlsq.fit_stream(data, "kf4lls", out="memory://fit.zarr", client=client)
        local = streamlsq.fit_stream(data, "kf4lls", client=client)
        # memory:// is this process's: read here, not by the cluster's worker processes
        stored = open_result("memory://fit.zarr", lazy=False)
        for name in ("coef", "bse", "cov_params"):
            np.testing.assert_array_equal(stored[name].values, local[name].values)
        np.testing.assert_array_equal(fit.coef.values, local.coef.values)
        assert [p["name"] for p in memory.ls("/")] == ["/fit.zarr"]  # no temporary left
    finally:
        with contextlib.suppress(FileNotFoundError):
            memory.rm("/fit.zarr", recursive=True)


def test_a_checkpoint_url_is_refused_before_anything_is_created(tmp_path, cli, data,
                                                                monkeypatch):
    """W4: it used to become the local folder ./s3:/bucket/ck."""
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", data, "--out", "fit.zarr", "--checkpoint",
                        "s3://bucket/ck"))
    assert line == ("streamlsq: error: --checkpoint s3://bucket/ck: a checkpoint is a local "
                    "folder (it is locked with flock); name a local path")
    assert snapshot(tmp_path) == before


def test_storage_options_for_local_paths_only_are_refused(tmp_path, data, client,
                                                          monkeypatch):
    """W6: they used to be ignored without a word; with a URL among the roles they apply."""
    monkeypatch.chdir(tmp_path)
    options = {"anon": True}
    streamlsq.fit_stream(data, out="fit.zarr", client=client)
    before = snapshot(tmp_path)
    for kwargs in ({}, {"out": "new.zarr"}):
        with pytest.raises(InputError) as info:
            streamlsq.fit_stream("data.zarr", "kf4lls", storage_options=options,
                                 client=client, **kwargs)
        assert str(info.value) == ("storage_options apply to URLs (s3://, gs://, "
                                   "memory://...); data.zarr is a local path")
    with pytest.raises(InputError, match="; t.parquet is a local path"):
        streamlsq.fit_stream("t.parquet", x=["a", "b"], y="y", storage_options=options,
                             client=client)
    with pytest.raises(InputError, match="; fit.zarr is a local path"):
        streamlsq.predict_stream("fit.zarr", "data.zarr", storage_options=options,
                                 client=client)
    assert snapshot(tmp_path) == before
    memory = fsspec.filesystem("memory")
    try:  # an output URL: the options are its own
        streamlsq.fit_stream(data, "kf4lls", out="memory://dir/w6.zarr",
                             storage_options={"skip_instance_cache": True}, client=client)
    finally:
        with contextlib.suppress(FileNotFoundError):
            memory.rm("/dir", recursive=True)


def test_overwrite_on_s3_of_a_result_holding_a_users_object_is_refused(s3, data, client):
    """B2 on an object store: s3://bucket/fit.zarr/MY-NOTES.txt used to be removed."""
    endpoint, options = s3
    out = f"s3://{BUCKET}/fit.zarr"
    streamlsq.fit_stream(data, "kf4lls", out=out, storage_options=options, client=client)
    s3_filesystem(options).pipe_file(f"{BUCKET}/fit.zarr/{NOTE}", b"my notes")
    before = _listing(options)
    with pytest.raises(InputError) as info:
        streamlsq.fit_stream(data, "rls", out=out, overwrite=True, storage_options=options,
                             client=client)
    assert str(info.value) == (f"{out}: holds {NOTE}, which streamlsq did not write; move it "
                               "or choose another --out")
    assert _listing(options) == before
    s3_filesystem(options).rm_file(f"{BUCKET}/fit.zarr/{NOTE}")
    streamlsq.fit_stream(data, "rls", out=out, overwrite=True, storage_options=options,
                         client=client)
    assert open_result(out, storage_options=options).attrs["method"] == "rls"


def test_an_output_url_in_the_wrong_place_is_refused_on_s3(s3, data, client):
    """W5: an output under a user's object made it an object and a prefix; a bucket-only URL
    named a bucket of its own."""
    endpoint, options = s3
    s3_filesystem(options).pipe_file(f"{BUCKET}/notes.txt", b"my notes")
    before = _listing(options)
    cases = {f"s3://{BUCKET}/notes.txt/new.zarr": f"s3://{BUCKET}/notes.txt/new.zarr: "
             "notes.txt is a file, not a folder; choose another --out",
             "s3://newbucket.zarr": "s3://newbucket.zarr: names a bucket; a result is "
             "written inside one: write s3://BUCKET/NAME"}
    for out, message in cases.items():
        with pytest.raises(InputError) as info:
            streamlsq.fit_stream(data, "kf4lls", out=out, storage_options=options,
                                 client=client)
        assert str(info.value) == message
    assert _listing(options) == before
    assert s3_filesystem(options).ls("") == [BUCKET]


def test_an_unreachable_output_endpoint_is_one_line(tmp_path, cli, data, monkeypatch):
    """W2: exit 1 `unexpected error (EndpointConnectionError ...)`."""
    # the FSSPEC_S3_* environment as fsspec read it when it was imported
    monkeypatch.setitem(fsspec.config.conf, "s3", {
        "endpoint_url": "http://127.0.0.1:9", "key": "testing", "secret": "testing"})
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", data, "--out", "s3://b/dead.zarr"))
    assert line.startswith("streamlsq: error: s3://b/dead.zarr: cannot be reached "
                           "(EndpointConnectionError: ")
    assert line.endswith("check the URL, the credentials and the storage options")
    assert snapshot(tmp_path) == before


def test_a_wrong_secret_for_the_output_names_the_credentials(tmp_path, cli, data,
                                                             monkeypatch):
    """W1: `input/output error (PermissionError: Forbidden)`."""
    import boto3

    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as endpoint:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="a", aws_secret_access_key="b")
        iam.create_user(UserName="u")
        key = iam.create_access_key(UserName="u")["AccessKey"]
        iam.put_user_policy(UserName="u", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        good = {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"],
                "client_kwargs": {"endpoint_url": endpoint}}
        s3_filesystem(good).mkdir("auth")
        monkeypatch.setitem(fsspec.config.conf, "s3", {
            "endpoint_url": endpoint, "key": key["AccessKeyId"], "secret": "wrong"})
        line = one_line(cli("fit", "kf4lls", data, "--out", "s3://auth/fit.zarr"))
        assert line == ("streamlsq: error: s3://auth/fit.zarr: cannot write here "
                        "(PermissionError: Forbidden); check the credentials or choose "
                        "another output")
        assert s3_filesystem(good).find("auth") == []


def test_info_names_the_command_of_a_killed_publications_claim(data, cli, client,
                                                               monkeypatch):
    """W8: `result of None: INCOMPLETE (interrupted run)`."""
    memory = fsspec.filesystem("memory")

    def killed(self, *args, **kwargs):  # the publication dies after its claim
        raise KeyboardInterrupt

    try:
        with monkeypatch.context() as m:
            m.setattr(type(memory), "pipe", killed)
            with pytest.raises(KeyboardInterrupt):
                streamlsq.fit_stream(data, "kf4lls", out="memory://claim/fit.zarr",
                                     client=client)
        root = json.loads(memory.cat_file("/claim/fit.zarr/zarr.json"))
        assert root["attributes"]["complete"] is False
        r = cli("info", "memory://claim/fit.zarr")
        assert r.exit_code == 0, r.output
        assert "result of kf4lls: INCOMPLETE (interrupted run)" in r.output
        # a claim of an earlier version records no method
        root["attributes"].pop("method")
        memory.pipe_file("/claim/fit.zarr/zarr.json", json.dumps(root).encode())
        r = cli("info", "memory://claim/fit.zarr")
        assert "result of an unknown command: INCOMPLETE (interrupted run)" in r.output
        with pytest.raises(InputError, match="incomplete"):
            open_result("memory://claim/fit.zarr")
        # --overwrite replaces the claim
        streamlsq.fit_stream(data, "kf4lls", out="memory://claim/fit.zarr", overwrite=True,
                             client=client)
        assert open_result("memory://claim/fit.zarr").attrs["complete"] is True
    finally:
        with contextlib.suppress(FileNotFoundError):
            memory.rm("/claim", recursive=True)



@contextlib.contextmanager
def _server_to_kill():
    """A moto server of this test's own, which the test stops mid-write: (endpoint, options,
    the server's process)."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
    try:
        for _ in range(300):
            with contextlib.suppress(Exception):
                s3_filesystem(options).mkdir("gone")
                break
            time.sleep(0.2)
        yield options, server
    finally:
        server.kill()
        server.wait(timeout=60)


def test_an_object_store_that_stops_answering_mid_write_is_one_line(monkeypatch):
    """W3: the server dying while predict wrote to it was exit 1, `unexpected error
    (EndpointConnectionError ...)` and ~100 lines of tracebacks; the temporary prefix's
    removal failing replaced the run's own error."""
    from streamlsq.errors import OutputError
    from streamlsq.io.results import atomic_store, write_result

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with _server_to_kill() as (options, server):
        with pytest.raises(OutputError) as info:
            with atomic_store("s3://gone/pred.zarr", storage_options=options) as tmp:
                g = zarr.open_group(tmp, mode="w", zarr_format=3)
                g.create_array("yhat", shape=(4,), dtype="f8")[:] = 1.0
                server.kill()
                server.wait(timeout=60)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("s3://gone/pred.zarr: the object store failed while the result "
                              "was written (EndpointConnectionError: ")
    assert message.endswith("nothing was published: remove s3://gone/.pred.zarr.partial-"
                            f"{message.split('.partial-')[1][:8]} if it remains, and run the "
                            "command again")
    with _server_to_kill() as (options, server):
        ds = xr.Dataset({"coef": ("feature", np.ones(3))})
        real = s3fs.S3FileSystem._pipe_file

        async def dies(self, *args, **kwargs):  # the server stops after the claim
            if kwargs.get("mode") != "create":
                server.kill()
                server.wait(timeout=60)
            return await real(self, *args, **kwargs)

        monkeypatch.setattr(s3fs.S3FileSystem, "_pipe_file", dies)
        with pytest.raises(OutputError, match=r"^s3://gone/fit.zarr: the object store failed "
                           r"while the result was written \(.*\); nothing was published: an "
                           "incomplete store left there is replaced by --overwrite, and run "
                           "the command again$"):
            write_result(ds, "s3://gone/fit.zarr", storage_options=options)


@pytest.mark.parametrize("command", [["metalearn", "--k", "2"],
                                     ["fit", "em", "--k", "2", "--init", "truth"]])
def test_overwrite_of_a_model_holding_a_users_file_is_refused(tmp_path, cli, client, command):
    """B2 for the commands that write a model (metalearn, fit em)."""
    tasks = streamlsq.simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=400, t_light=4,
                                   n_heavy=20, t_heavy=30, n_light2=50, t_light2=6,
                                   client=client)
    out = tmp_path / "model.zarr"
    first = cli(*command, tasks, "--out", out)
    assert first.exit_code == 0, first.output
    (out / NOTE).write_text("my notes")
    before = snapshot(tmp_path)
    line = one_line(cli(*command, tasks, "--out", out, "--overwrite"))
    assert line == (f"streamlsq: error: {out}: holds {NOTE}, which streamlsq did not write; "
                    "move it or choose another --out")
    assert snapshot(tmp_path) == before and leftovers(out) == []
    (out / NOTE).unlink()
    again = cli(*command, tasks, "--out", out, "--overwrite")
    assert again.exit_code == 0, again.output


def test_overwrite_through_a_link_to_a_result_is_refused(data, tmp_path, cli):
    """Re-test round 8 (OV6): --out a symbolic link to a streamlsq result, with --overwrite,
    replaced the user's link with a folder (and left the old result where it pointed)."""
    target = tmp_path / "target.zarr"
    assert cli("fit", "kf4lls", data, "--out", target).exit_code == 0
    link = tmp_path / "link.zarr"
    link.symlink_to(target)
    before = snapshot(tmp_path)
    line = one_line(cli("fit", "kf4lls", data, "--out", link, "--overwrite"))
    assert line.endswith(f"{link}: is a symbolic link; streamlsq never writes through or "
                         "over a link: give the path it points to, or choose another --out")
    assert snapshot(tmp_path) == before and link.is_symlink()
