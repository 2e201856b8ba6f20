"""Stores simulate writes: the codec (--codec), read back by any codec zarr reads, and every
chunk written (a chunk equal to the fill value, e.g. roles of light tasks only, too)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import streamlsq
from streamlsq.errors import InputError
from streamlsq.io.codecs import CODECS, DEFAULT_CODEC, compressors
from streamlsq.io.tasks import plan_chunks
from streamlsq.simulate import tasks as sim_tasks


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


# zarr warns on reading numcodecs' lz4 (not a Zarr v3 codec): docs/stores.md says so
@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr")
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_writes_a_store_that_fits_the_same(codec, tmp_path, client):
    path = streamlsq.simulate_stream(tmp_path / "d.zarr", n_rows=3_000, n_features=4, seed=2,
                                     chunk_rows=1_000, codec=codec, client=client)
    arr = zarr.open_group(str(path), mode="r")["X"]
    names = [type(c).__name__ for c in arr.compressors]
    expected = [type(c).__name__ for c in compressors(codec)]
    assert names == expected
    ds = streamlsq.fit_stream(path, "kf4lls", client=client, progress=False)
    ref = streamlsq.simulate_stream(tmp_path / "z.zarr", n_rows=3_000, n_features=4, seed=2,
                                    chunk_rows=1_000, codec="zstd", client=client)
    np.testing.assert_array_equal(
        ds.coef.values, streamlsq.fit_stream(ref, "kf4lls", client=client).coef.values)


def test_the_default_and_a_bad_codec(tmp_path, client):
    path = streamlsq.simulate_stream(tmp_path / "d.zarr", n_rows=100, n_features=2,
                                     client=client)
    comp = zarr.open_group(str(path), mode="r")["X"].compressors
    assert DEFAULT_CODEC == "blosc-lz4" and comp[0].cname.value == "lz4"
    with pytest.raises(InputError, match="codec must be one of"):
        streamlsq.simulate_stream(tmp_path / "e.zarr", n_rows=100, codec="gzip", client=client)


def test_chunks_equal_to_the_fill_value_are_written(tmp_path, client, monkeypatch):
    # role codes 0 (light) for a whole storage chunk: zarr skips such chunks by default,
    # and the store would then read as incomplete
    monkeypatch.setattr(sim_tasks, "TASK_CHUNK", 64)
    path = streamlsq.simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=300, t_light=4,
                                  n_heavy=20, t_heavy=30, n_light2=10, t_light2=6,
                                  client=client)
    source = streamlsq.open_tasks(path)  # refuses a store with a missing chunk
    assert (source.roles()[:300] == 0).all()


def test_task_chunks_carry_their_offsets(tmp_path, client):
    path = streamlsq.simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=300, t_light=4,
                                  n_heavy=20, t_heavy=30, n_light2=10, t_light2=6,
                                  client=client)
    source = streamlsq.open_tasks(path)
    ptr = source.task_ptr()
    for chunk in plan_chunks(ptr, None, 70):
        np.testing.assert_array_equal(chunk.ptr, ptr[chunk.lo:chunk.hi + 1])
        X, y, local = source.read_tasks(chunk.lo, chunk.hi, ptr=chunk.ptr)
        X2, y2, local2 = source.read_tasks(chunk.lo, chunk.hi)
        np.testing.assert_array_equal(X, X2)
        np.testing.assert_array_equal(local, local2)
