"""fit_stream end to end on real clusters: both engines against numpy.linalg.lstsq, and
results independent of chunking, block size, number of workers and the cluster used."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from streamlsq import fit_stream, open_result, simulate_stream

from conftest import lstsq, read_all, write_stream


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_final_coef_equals_lstsq_on_200k_by_20(stream_200k, client, engine, tmp_path):
    X, Y = read_all(stream_200k)
    ds = fit_stream(stream_200k, "kf4lls", engine=engine, client=client, out=tmp_path / "r.zarr")
    assert _rel(ds.coef.isel(step=-1).values, lstsq(X, Y)) < 1e-10
    assert int(ds.rows_seen[-1]) == 200_000
    stored = open_result(tmp_path / "r.zarr")
    assert stored.attrs["complete"] is True and stored.attrs["engine"] == engine
    xr.testing.assert_identical(stored.coef.load(), ds.coef)


def test_engines_agree_on_every_recorded_step(stream_200k, client):
    X, Y = read_all(stream_200k)
    kw = dict(block_size=4_000, first_block_size=5_000, record_every=3, client=client)
    seq = fit_stream(stream_200k, "kf4lls", engine="sequential", **kw)
    scan = fit_stream(stream_200k, "kf4lls", engine="scan", **kw)
    np.testing.assert_array_equal(seq.step, scan.step)
    np.testing.assert_array_equal(seq.rows_seen, scan.rows_seen)
    assert seq.step.values[-1] == seq.attrs["n_blocks"]
    np.testing.assert_allclose(seq.coef, scan.coef, rtol=1e-10, atol=1e-12)
    for step in seq.step.values[[0, 7, -1]]:
        n = int(seq.rows_seen.sel(step=step))
        assert _rel(seq.coef.sel(step=step).values, lstsq(X[:n], Y[:n])) < 1e-10


def test_engines_agree_with_forgetting_and_ridge(stream_200k, client):
    kw = dict(block_size=9_000, record_every=1, client=client, forgetting=0.7, ridge=2.0)
    seq = fit_stream(stream_200k, "rls", engine="sequential", **kw)
    scan = fit_stream(stream_200k, "rls", engine="scan", **kw)
    np.testing.assert_allclose(seq.coef, scan.coef, rtol=1e-10, atol=1e-12)


def test_result_does_not_depend_on_chunk_size(tmp_path, client):
    a = simulate_stream(tmp_path / "a.zarr", 60_000, 12, 2, chunk_rows=7_000, seed=5,
                        client=client)
    b = simulate_stream(tmp_path / "b.zarr", 60_000, 12, 2, chunk_rows=16_384, seed=5,
                        client=client)
    (Xa, Ya), (Xb, Yb) = read_all(a), read_all(b)
    np.testing.assert_array_equal(Xa, Xb)  # the generator is reproducible by row
    np.testing.assert_array_equal(Ya, Yb)
    for engine in ("sequential", "scan"):
        ra = fit_stream(a, engine=engine, block_size=5_000, record_every=1, client=client)
        rb = fit_stream(b, engine=engine, block_size=5_000, record_every=1, client=client)
        np.testing.assert_allclose(ra.coef, rb.coef, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("block_size", [1_000, 6_999, 27_000, 200_000])
def test_final_step_does_not_depend_on_block_size(stream_200k, client, block_size):
    X, Y = read_all(stream_200k)
    ds = fit_stream(stream_200k, block_size=block_size, client=client)
    assert ds.attrs["n_blocks"] == -(-200_000 // block_size)
    assert _rel(ds.coef.isel(step=-1).values, lstsq(X, Y)) < 1e-10


def test_one_worker_and_two_workers_agree(stream_200k, client):
    from distributed import Client, LocalCluster

    two = fit_stream(stream_200k, engine="scan", block_size=10_000, record_every=1,
                     client=client)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as one_cluster, Client(one_cluster) as one:
        single = fit_stream(stream_200k, engine="scan", block_size=10_000, record_every=1,
                            client=one)
    np.testing.assert_array_equal(two.coef.values, single.coef.values)


@pytest.mark.cluster
def test_loopback_cluster_gives_the_same_answer(stream_200k, client, loopback_address):
    local = fit_stream(stream_200k, block_size=20_000, record_every=1, client=client)
    for engine in ("sequential", "scan"):
        remote = fit_stream(stream_200k, engine=engine, block_size=20_000, record_every=1,
                            scheduler=loopback_address)
        np.testing.assert_allclose(remote.coef, local.coef, rtol=1e-12, atol=1e-13)


def test_per_sample_rls_g1_is_the_expanding_window_trajectory(tmp_path, client):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 4))
    y = X @ [1.0, -2.0, 0.5, 3.0] + 0.1 * rng.standard_normal(400)
    path = write_stream(tmp_path / "s.zarr", X, y[:, None], chunk_rows=64)
    ds = fit_stream(path, "rls", forgetting=1.0, block_size=1, first_block_size=6,
                    record_every=1, client=client)
    assert ds.sizes["step"] == 400 - 6 + 1
    for step in ds.step.values:
        n = int(ds.rows_seen.sel(step=step))
        ref = np.linalg.lstsq(X[:n], y[:n, None], rcond=None)[0]
        np.testing.assert_allclose(ds.coef.sel(step=step).values, ref, rtol=1e-9, atol=1e-11)


def test_per_sample_rls_g_below_1_is_weighted_least_squares(tmp_path, client):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 3))
    y = X @ [0.5, 1.0, -1.0] + 0.2 * rng.standard_normal(300)
    path = write_stream(tmp_path / "s.zarr", X, y[:, None], chunk_rows=50)
    g = 0.97
    ds = fit_stream(path, "rls", forgetting=g, block_size=1, first_block_size=5,
                    record_every=1, client=client)
    edges = np.concatenate([[0], np.arange(5, 301)])
    for i, step in enumerate(ds.step.values):
        m = int(step)
        w = np.repeat(g ** np.arange(m - 1, -1, -1.0), np.diff(edges[: m + 1]))
        sw = np.sqrt(w)
        n = edges[m]
        ref = np.linalg.lstsq(X[:n] * sw[:, None], y[:n] * sw, rcond=None)[0]
        np.testing.assert_allclose(ds.coef.values[i, :, 0], ref, rtol=1e-9, atol=1e-11)


def test_float32_store_is_fitted(tmp_path, client):
    path = simulate_stream(tmp_path / "f32.zarr", 20_000, 6, 1, dtype="float32", seed=2,
                           client=client)
    X, Y = read_all(path)
    ds = fit_stream(path, client=client)
    ref = lstsq(X.astype(np.float64), Y.astype(np.float64))
    assert _rel(ds.coef.isel(step=-1).values, ref) < 1e-10  # computed in float64
    ds32 = fit_stream(path, client=client, dtype="float32")
    assert ds32.coef.dtype == np.float32
    assert _rel(ds32.coef.isel(step=-1).values, ref) < 1e-4


@pytest.mark.cluster
def test_cli_uses_dask_scheduler_address_from_the_environment(stream_200k, loopback_address,
                                                              tmp_path, client):
    import os
    import subprocess
    import sys

    from distributed import Client

    out = tmp_path / "env.zarr"
    env = dict(os.environ, DASK_SCHEDULER_ADDRESS=loopback_address)
    def executed(dask_worker):
        return dask_worker.state.executed_count

    with Client(loopback_address) as remote:
        before = sum(remote.run(executed).values())
        r = subprocess.run([sys.executable, "-m", "streamlsq.cli", "fit", "kf4lls",
                            str(stream_200k), "--out", str(out)], env=env, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        # the fold tasks ran on the loopback workers, not on an embedded cluster
        after = sum(remote.run(executed).values())
    assert after > before
    X, Y = read_all(stream_200k)
    assert _rel(open_result(out).coef.isel(step=-1).values, lstsq(X, Y)) < 1e-10


def test_store_rewritten_at_the_same_path_is_read_afresh(client, tmp_path):
    # workers cache opened arrays per path; a rewrite (other rows, other chunking) must not
    # be read through the old metadata
    path = tmp_path / "s.zarr"
    simulate_stream(path, 20_000, 5, 1, chunk_rows=4_000, seed=1, client=client)
    first = fit_stream(path, "lms", client=client, block_size=1_000)
    simulate_stream(path, 60_000, 5, 1, chunk_rows=25_000, seed=2, client=client,
                    overwrite=True)
    again = fit_stream(path, "kf4lls", client=client, block_size=2_000)
    X, Y = read_all(path)
    np.testing.assert_allclose(again.coef.isel(step=-1).values, lstsq(X, Y), rtol=1e-8,
                               atol=1e-10)
    assert int(again.rows_seen[-1]) == 60_000 and int(first.rows_seen[-1]) == 20_000
