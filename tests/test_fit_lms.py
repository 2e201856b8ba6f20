"""LMS through the pipeline: on-disk epochs (plain and shuffled) equal the in-memory
kernel run on the same rows in the same order, bit for bit, whatever the chunking."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from streamlsq import InputError, fit_stream, open_result
from streamlsq.cli.main import main
from streamlsq.kernels import LMS, block_edges, chunk_row_permutation, epoch_chunk_order

from conftest import read_all, write_stream

N, Q = 1_003, 3
SCHEDULE = dict(schedule="inverse", rate=0.05, tau=200.0)


def _data(K=1, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, Q)) + 0.5
    W = rng.standard_normal((Q, K))
    return X, 0.7 + X @ W + noise * rng.standard_normal((N, K))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same rows in three chunkings (chunk edges inside and between blocks)."""
    X, Y = _data()
    root = tmp_path_factory.mktemp("lms")
    return X, Y, {c: write_stream(root / f"c{c}.zarr", X, Y, c) for c in (64, 250, N)}


def epoch_rows(seed, epoch, n_rows, chunk_rows, shuffle):
    """Row order of one epoch, from the kernel's pure functions (not from the engine)."""
    n_chunks = -(-n_rows // chunk_rows)
    parts = []
    for c in epoch_chunk_order(seed, epoch, n_chunks, shuffle):
        size = min(chunk_rows, n_rows - c * chunk_rows)
        parts.append(c * chunk_rows + chunk_row_permutation(seed, epoch, c, size, shuffle))
    return np.concatenate(parts)


def in_memory(X, Y, orders, block, record_every=1, **params):
    """The kernel's fold over each epoch's rows in memory; steps numbered on over epochs."""
    model = LMS(**params)
    state = model.init(X.shape[1], Y.shape[1])
    steps, coefs, first = [], [], 1
    for order in orders:
        edges = block_edges(len(order), block)
        res = model.fold(state, X[order], Y[order], edges, first, record_every)
        state = res.state
        steps.append(res.steps)
        coefs.append(res.coefs)
        first += len(edges) - 1
    return np.concatenate(steps), np.concatenate(coefs), state


@pytest.mark.parametrize("chunk", [64, 250, N])
@pytest.mark.parametrize("block", [1, 37, 500])
def test_one_epoch_equals_the_in_memory_run_bit_for_bit(stores, client, chunk, block):
    X, Y, paths = stores
    ds = fit_stream(paths[chunk], "lms", block_size=block, record_every=1, client=client,
                    segment_bytes=5_000, **SCHEDULE)  # several segments per run
    steps, coefs, state = in_memory(X, Y, [np.arange(N)], block, **SCHEDULE)
    np.testing.assert_array_equal(ds.step, steps)
    np.testing.assert_array_equal(ds.coef.values, coefs)
    np.testing.assert_array_equal(ds.state_W.values, state["W"])
    assert int(ds.state_k) == N and (ds.epoch.values == 0).all()
    np.testing.assert_array_equal(ds.rows_seen, np.minimum(steps * block, N))
    assert list(ds.feature.values) == ["intercept", "x0", "x1", "x2"]


@pytest.mark.parametrize("chunk", [64, 250])
def test_shuffled_epochs_equal_the_in_memory_run_on_permuted_rows(stores, client, chunk):
    X, Y, paths = stores
    ds = fit_stream(paths[chunk], "lms", block_size=45, record_every=1, epochs=3, shuffle=True,
                    seed=7, client=client, segment_bytes=8_000, **SCHEDULE)
    orders = [epoch_rows(7, e, N, chunk, True) for e in range(3)]
    assert not np.array_equal(orders[0], np.arange(N))  # the shuffle did shuffle
    assert not np.array_equal(orders[0], orders[1])  # and anew each epoch
    steps, coefs, state = in_memory(X, Y, orders, 45, **SCHEDULE)
    np.testing.assert_array_equal(ds.step, steps)
    np.testing.assert_array_equal(ds.coef.values, coefs)
    assert int(ds.state_k) == 3 * N
    per_epoch = -(-N // 45)
    np.testing.assert_array_equal(ds.epoch, (ds.step.values - 1) // per_epoch)
    other = fit_stream(paths[chunk], "lms", block_size=45, epochs=3, shuffle=True, seed=8,
                       client=client, **SCHEDULE)
    assert not np.array_equal(other.coef.values[-1], ds.coef.values[-1])


def test_two_epochs_continue_the_schedule(stores, client):
    X, Y, paths = stores
    ds = fit_stream(paths[250], "lms", block_size=100, record_every=3, epochs=2,
                    client=client, **SCHEDULE)
    # one in-memory pass over the stacked rows: k, hence rho_k, runs on from N + 1
    XX, YY = np.vstack([X, X]), np.vstack([Y, Y])
    model = LMS(**SCHEDULE)
    edges = np.concatenate([block_edges(N, 100), N + block_edges(N, 100)[1:]])
    ref = model.fold(model.init(Q, 1), XX, YY, edges, 1, 3)
    recorded = ds.step.values[:-1]  # the final step is recorded by the engine itself
    np.testing.assert_array_equal(recorded, ref.steps)
    np.testing.assert_array_equal(ds.coef.values[:-1], ref.coefs)
    np.testing.assert_array_equal(ds.state_W.values, ref.state["W"])
    assert int(ds.state_k) == 2 * N and ds.step.values[-1] == 22 and ds.attrs["epochs"] == 2
    np.testing.assert_array_equal(ds.rows_seen[:-1], ref.rows_seen)
    assert int(ds.rows_seen[-1]) == 2 * N and ds.attrs["n_rows"] == 2 * N
    assert ds.epoch.sel(step=9) == 0 and ds.epoch.sel(step=12) == 1  # 11 blocks per epoch


def test_normalized_lms_over_epochs_reaches_the_noiseless_solution(tmp_path, client):
    X, Y = _data(noise=0.0)
    path = write_stream(tmp_path / "clean.zarr", X, Y, 128)
    ds = fit_stream(path, "lms", normalized=True, rate=0.5, epochs=6, shuffle=True, seed=1,
                    client=client)
    ref = np.linalg.lstsq(np.hstack([np.ones((N, 1)), X]), Y, rcond=None)[0]
    np.testing.assert_allclose(ds.coef.values[-1], ref, atol=1e-8)


def test_k_outputs_equal_k_single_output_runs(tmp_path, client):
    X, Y = _data(K=3, seed=4)
    multi = write_stream(tmp_path / "k3.zarr", X, Y, 200)
    kw = dict(block_size=50, record_every=2, epochs=2, shuffle=True, seed=5, client=client,
              **SCHEDULE)
    ds = fit_stream(multi, "lms", **kw)
    assert ds.coef.shape[1:] == (Q + 1, 3)
    for t in range(3):
        single = write_stream(tmp_path / f"k{t}.zarr", X, Y[:, t : t + 1], 200)
        one = fit_stream(single, "lms", **kw)
        np.testing.assert_array_equal(one.coef.values[..., 0], ds.coef.values[..., t])


def test_checkpoint_and_resume_over_epochs(stores, client, tmp_path, stop_after_commits):
    X, Y, paths = stores
    kw = dict(block_size=30, record_every=2, epochs=3, shuffle=True, seed=2, client=client,
              segment_bytes=4_000, **SCHEDULE)
    whole = fit_stream(paths[64], "lms", **kw)
    ckpt, out = tmp_path / "ckpt", tmp_path / "r.zarr"
    with stop_after_commits(9):  # ~24 rows/kB: segment 9 ends inside the second epoch
        fit_stream(paths[64], "lms", checkpoint=ckpt, out=out, **kw)
    assert not out.exists()
    with pytest.raises(InputError,  # another shuffle: the option named, with both values
                       match=r"different run \(differs in: --seed 2 then, 3 now\)"):
        fit_stream(paths[64], "lms", checkpoint=ckpt, resume=True, **{**kw, "seed": 3})
    resumed = fit_stream(paths[64], "lms", checkpoint=ckpt, resume=True, out=out, **kw)
    np.testing.assert_array_equal(resumed.step, whole.step)
    np.testing.assert_array_equal(resumed.coef.values, whole.coef.values)
    np.testing.assert_array_equal(resumed.epoch, whole.epoch)
    np.testing.assert_array_equal(open_result(out).state_W.values, whole.state_W.values)


def test_lms_has_no_scan_form(stores, client):
    with pytest.raises(InputError, match="'lms' has no scan form"):
        fit_stream(stores[2][64], "lms", engine="scan", client=client)


def test_cli_fit_lms_and_its_bad_input(stores, client, tmp_path):
    X, Y, paths = stores
    address = client.scheduler.address

    def run(*args):
        return CliRunner().invoke(main, ["fit", "lms", *map(str, args), "--scheduler", address])

    out = tmp_path / "cli.zarr"
    res = run(paths[250], "--out", out, "--schedule", "inverse", "--rate", "0.05", "--tau",
              "200", "--epochs", "2", "--shuffle", "--seed", "3", "--block-size", "40")
    assert res.exit_code == 0, res.output
    got = open_result(out)
    assert got.attrs["complete"] is True and got.attrs["method"] == "lms"
    assert got.attrs["epochs"] == 2 and got.attrs["shuffle"] is True
    assert list(got.feature.values) == ["intercept", "x0", "x1", "x2"]
    ref = fit_stream(paths[250], "lms", block_size=40, epochs=2, shuffle=True, seed=3,
                     client=client, **SCHEDULE)
    np.testing.assert_array_equal(got.coef.values, ref.coef.values)
    assert read_all(paths[250])[0].shape == (N, Q)

    for args, words in [
        (["--schedule", "inverse"], ["tau"]),
        (["--rate", "-1"], ["rate"]),
        (["--epochs", "0"], ["epochs", "positive"]),
        (["--schedule", "power", "--power", "0.4"], ["power", "(0.5, 1]"]),
    ]:
        bad = tmp_path / "bad.zarr"
        res = run(paths[250], "--out", bad, *args)
        assert res.exit_code == 2, res.output
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and all(w in lines[0] for w in words), res.stderr
        assert not bad.exists() and not list(tmp_path.glob(".bad.zarr.partial-*"))
