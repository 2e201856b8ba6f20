"""Incremental BFGS and the IRMA family through the pipeline: the same numbers as the
kernels on the same blocks whatever the chunking, their diagnostics (BFGS's skipped
updates, IRMA's cumulative loss), the IRMA study's simulated store, bad input refused
with exit code 2 and one line, and checkpoint + resume."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from streamlsq import InputError, fit_stream, open_result, simulate_irma
from streamlsq.cli.main import main
from streamlsq.kernels import (
    IRMA,
    IRMARLS,
    BadRowError,
    IncrementalBFGS,
    IRMAGradientDescent,
    LegendreBasis,
    MonomialBasis,
    StiffnessSchedule,
    block_edges,
    make_basis,
)
from streamlsq.kernels.synthetic.streams import irma_rows, irma_target

from conftest import read_all, write_stream

N, Q = 1_003, 4


@pytest.fixture
def run(client):
    address = client.scheduler.address

    def _run(*args):
        return CliRunner().invoke(main, [*map(str, args), "--scheduler", address])

    return _run


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def nothing_written(out):
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.partial-*"))


def kernel_fold(model, X, Y, edges, record_every=1):
    """The kernel's fold over all rows in memory, from a fresh state."""
    return model.fold(model.init(X.shape[1], Y.shape[1]), X, Y, edges, 1, record_every)


# ---------------------------------------------------------------------------
# BFGS
# ---------------------------------------------------------------------------
def _regression(K=1, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, Q)) + 0.3
    return X, X @ rng.standard_normal((Q, K)) + noise * rng.standard_normal((N, K))


@pytest.fixture(scope="module")
def bfgs_stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("bfgs")
    out = {}
    for K in (1, 2):
        X, Y = _regression(K, seed=K)
        out[K] = (X, Y, {c: write_stream(root / f"k{K}c{c}.zarr", X, Y, c) for c in (64, 250)})
    return out


@pytest.mark.parametrize("K", [1, 2])
@pytest.mark.parametrize("chunk", [64, 250])
@pytest.mark.parametrize("rate", ["exact", 0.7])
def test_bfgs_pipeline_equals_the_kernel_on_the_same_blocks(bfgs_stores, client, K, chunk,
                                                             rate):
    X, Y, paths = bfgs_stores[K]
    # blocks of 37 rows after a first block of 50 straddle the chunks; several segments
    ds = fit_stream(paths[chunk], "bfgs", rate=rate, block_size=37, first_block_size=50,
                    record_every=1, segment_bytes=6_000, client=client)
    ref = kernel_fold(IncrementalBFGS(rate=rate), X, Y, block_edges(N, 37, 50))
    np.testing.assert_array_equal(ds.step, ref.steps)
    np.testing.assert_array_equal(ds.coef.values, ref.coefs)
    np.testing.assert_array_equal(ds.rows_seen, ref.rows_seen)
    np.testing.assert_array_equal(ds.state_B.values, ref.state["B"])
    np.testing.assert_array_equal(ds.n_skipped, ref.diagnostics["n_skipped"])
    assert ds.attrs["method"] == "bfgs" and ds.attrs["n_skipped"] == int(ref.state["n_skipped"])
    assert ds.attrs["ridge_used"] is False or ds.attrs["ridge_used"] == 0


def test_bfgs_first_block_is_least_squares_and_every_step_descends(bfgs_stores, client):
    X, Y, paths = bfgs_stores[1]
    ds = fit_stream(paths[64], "bfgs", block_size=100, record_every=1, client=client)
    np.testing.assert_allclose(ds.coef.values[0], np.linalg.lstsq(X[:100], Y[:100],
                                                                  rcond=None)[0], rtol=1e-10)
    # exact line search: each block's loss does not increase along its own step
    for k in range(1, ds.sizes["step"]):
        a, b = 100 * k, min(100 * (k + 1), N)
        before = np.sum((Y[a:b] - X[a:b] @ ds.coef.values[k - 1]) ** 2)
        after = np.sum((Y[a:b] - X[a:b] @ ds.coef.values[k]) ** 2)
        assert after <= before * (1 + 1e-12)


def test_bfgs_skipped_updates_are_counted_and_reported(tmp_path, client, run):
    # two identical target columns: the K×K curvature zᵀδW is singular after the first
    # block, so every later B update is skipped (the kernel's documented safeguard)
    X, y = _regression(1, seed=5)
    data = write_stream(tmp_path / "twins.zarr", X, np.hstack([y, y]), 128)
    ds = fit_stream(data, "bfgs", block_size=100, record_every=1, client=client)
    np.testing.assert_array_equal(ds.n_skipped, ds.step.values - 1)
    assert int(ds.state_n_skipped) == ds.attrs["n_skipped"] == 10
    out = tmp_path / "twins-fit.zarr"
    res = run("fit", "bfgs", data, "--out", out, "--block-size", 100)
    assert res.exit_code == 0, res.output
    assert "11 blocks" in res.output and "10 skipped B update(s)" in res.output
    got = open_result(out)
    assert got.attrs["n_skipped"] == 10 and got.attrs["complete"] is True
    np.testing.assert_array_equal(got.coef.values, fit_stream(
        data, "bfgs", block_size=100, client=client).coef.values)


def test_bfgs_ridge_start_is_reported(bfgs_stores, tmp_path, run, client):
    path = bfgs_stores[1][2][64]
    out = tmp_path / "ridge.zarr"
    res = run("fit", "bfgs", path, "--out", out, "--block-size", 50, "--first-block-size", 2,
              "--ridge", "0.01")
    assert res.exit_code == 0, res.output
    assert "ridge start H0 + 0.01*I used" in res.output
    assert open_result(out).attrs["ridge_used"] in (True, 1)


def test_bfgs_has_no_scan_form(bfgs_stores, client):
    with pytest.raises(InputError, match="'bfgs' has no scan form; use --engine sequential"):
        fit_stream(bfgs_stores[1][2][64], "bfgs", engine="scan", client=client)


# ---------------------------------------------------------------------------
# the IRMA study's store
# ---------------------------------------------------------------------------
def test_irma_rows_do_not_depend_on_the_cut():
    x, y = irma_rows(4, 0, 20_000)
    for a, b in ((0, 1), (8_000, 8_193), (8_191, 16_385), (19_999, 20_000)):
        xa, ya = irma_rows(4, a, b)
        np.testing.assert_array_equal(xa, x[a:b])
        np.testing.assert_array_equal(ya, y[a:b])
    assert x.min() >= 0.0 and x.max() < 3.0 and abs(x.mean() - 1.5) < 0.03
    u = y[:, 0] - x[:, 0] * np.exp(-x[:, 0] ** 2)  # the noise, computed independently
    assert np.abs(u).max() <= 0.05 and abs(u.mean()) < 2e-3
    assert abs(u.std() - 0.1 / np.sqrt(12)) < 1e-3  # std of U(-0.05, 0.05)
    x2, y2 = irma_rows(4, 0, 100, domain=(-2.0, -1.0), noise=0.0)
    assert x2.min() >= -2.0 and x2.max() < -1.0
    np.testing.assert_array_equal(y2, irma_target(x2))
    with pytest.raises(ValueError, match="domain"):
        irma_rows(0, 0, 10, domain=(3.0, 0.0))
    with pytest.raises(ValueError, match="noise"):
        irma_rows(0, 0, 10, noise=-0.1)


def test_simulate_irma_any_chunking_gives_the_same_store(tmp_path, client, run):
    a = simulate_irma(tmp_path / "a.zarr", 1_000, seed=2, chunk_rows=64, client=client)
    out = tmp_path / "b.zarr"
    res = run("simulate", "irma", "--out", out, "--rows", 1_000, "--seed", 2)
    assert res.exit_code == 0, res.output
    (xa, ya), (xb, yb) = read_all(a), read_all(out)
    np.testing.assert_array_equal(xa, xb)
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_array_equal((xa, ya), irma_rows(2, 0, 1_000))
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["domain"] == [0.0, 3.0] and g.attrs["block_size"] == 1
    assert g["X"].metadata.dimension_names == ("sample", "feature")
    bad = tmp_path / "bad.zarr"
    line = one_error_line(run("simulate", "irma", "--out", bad, "--domain", 3, 0))
    assert "domain" in line
    nothing_written(bad)


# ---------------------------------------------------------------------------
# IRMA and its baselines
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def irma150(tmp_path_factory, client):
    """The paper's setting: 150 examples of x·exp(−x²) + U(±0.05) on [0, 3], in chunks
    of 40, 150 and 7 rows (the same rows: the generator is keyed by row)."""
    root = tmp_path_factory.mktemp("irma")
    paths = {c: simulate_irma(root / f"c{c}.zarr", 150, seed=9, chunk_rows=c, client=client)
             for c in (7, 40, 150)}
    x, y = read_all(paths[40])
    return x, y, paths


def _written_out_irma(x, y, basis, lam):
    """θ += φe/(λ + ‖φ‖²) for an orthonormal basis, sample by sample, in NumPy."""
    theta, losses, thetas = np.zeros(basis.n_basis), [], []
    for xt, yt, lt in zip(x, y[:, 0], lam, strict=True):
        phi = basis.expand(xt[None, :])[0]
        e = yt - phi @ theta
        losses.append(e**2)
        theta = theta + phi * e / (lt + phi @ phi)
        thetas.append(theta)
    return np.array(thetas), np.cumsum(losses)


def test_irma_order_10_over_150_samples_equals_the_kernel(irma150, client):
    x, y, paths = irma150
    basis = LegendreBasis(10, (0.0, 3.0))
    model = IRMA(basis, StiffnessSchedule.paper())
    ref = kernel_fold(model, x, y, block_edges(150, 1))
    for chunk, path in paths.items():
        ds = fit_stream(path, "irma", order=10, record_every=1, segment_bytes=100,
                        client=client)  # domain from the store's attrs; several segments
        assert ds.sizes["step"] == 150, chunk
        np.testing.assert_array_equal(ds.coef.values, ref.coefs)
        np.testing.assert_array_equal(ds.cumulative_loss, ref.diagnostics["cumulative_loss"])
        assert ds.attrs["cumulative_loss"] == float(ref.state["cumulative_loss"])
        assert list(ds.feature.values) == basis.names
    # and both equal the update written out, to rounding
    thetas, cum = _written_out_irma(x, y, basis, StiffnessSchedule.paper().values(0, 150))
    np.testing.assert_allclose(ds.coef.values[:, :, 0], thetas, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ds.cumulative_loss, cum, rtol=1e-10)
    # the basis is rebuilt from the attrs and predicts like the kernel
    rebuilt = make_basis(json.loads(ds.attrs["basis"]))
    grid = np.linspace(0, 3, 7)
    np.testing.assert_array_equal(rebuilt.evaluate(grid, ds.coef.values[-1]),
                                  model.predict(ref.state, grid))


@pytest.mark.parametrize("block", [1, 13, 150])
@pytest.mark.parametrize("method,params,kernel", [
    ("irma", {"stiffness": "additive", "stiffness_initial": 0.2, "stiffness_rate": 0.01},
     lambda b: IRMA(b, StiffnessSchedule("additive", 0.2, 0.01))),
    ("irma", {"basis": "monomial", "order": 4}, None),
    ("irma-gd", {"mu": 0.05}, lambda b: IRMAGradientDescent(b, mu=0.05)),
    ("irma-rls", {"forgetting": 0.9, "mu": 0.05, "p0": 2.0},
     lambda b: IRMARLS(b, forgetting=0.9, mu=0.05, p0=2.0)),
], ids=["irma-additive", "irma-monomial", "irma-gd", "irma-rls"])
def test_irma_family_through_the_pipeline_equals_the_kernel(irma150, client, block, method,
                                                            params, kernel):
    x, y, paths = irma150
    params = {"order": 6, "domain": (0.0, 3.0), **params}
    if kernel is None:
        basis = MonomialBasis(params["order"], params["domain"])
        model = IRMA(basis)
    else:
        basis = LegendreBasis(params["order"], params["domain"])
        model = kernel(basis)
    ref = kernel_fold(model, x, y, block_edges(150, block), record_every=2)
    ds = fit_stream(paths[7], method, block_size=block, record_every=2, segment_bytes=100,
                    client=client, **params)
    recorded = ds.step.values % 2 == 0
    np.testing.assert_array_equal(ds.step.values[recorded], ref.steps)
    if basis.orthonormal:  # the same per-sample loop over the same rows: bit for bit
        same = np.testing.assert_array_equal
    else:
        # a non-orthonormal basis runs in the coordinates ψ = Lᵀθ inside each fold and
        # stores θ: the round trip at every fold boundary (segment, chunk) is rounding
        def same(a, b):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    same(ds.coef.values[recorded], ref.coefs)
    same(ds.cumulative_loss.values[recorded], ref.diagnostics["cumulative_loss"])
    same(ds.coef.values[-1], model.coef(ref.state))
    assert ds.cumulative_loss.values[-1] == ds.attrs["cumulative_loss"]
    assert make_basis(json.loads(ds.attrs["basis"])).get_params() == basis.get_params()


def test_irma_box_domain_from_the_cli(tmp_path, run):
    rng = np.random.default_rng(3)
    x = np.c_[rng.uniform(0, 1, 300), rng.uniform(-1, 1, 300)]
    y = (x[:, 0] * x[:, 1])[:, None]
    data = write_stream(tmp_path / "box.zarr", x, y, 64)
    out = tmp_path / "box-fit.zarr"
    res = run("fit", "irma", data, "--out", out, "--order", 2, "--domain", 0, 1, "--domain",
              -1, 1, "--stiffness", "constant", "--stiffness-initial", 1e-3,
              "--block-size", 300)
    assert res.exit_code == 0, res.output
    assert "final cumulative loss" in res.output
    got = open_result(out)
    basis = make_basis(json.loads(got.attrs["basis"]))
    assert basis.dim == 2 and got.sizes["feature"] == 9
    model = IRMA(basis, StiffnessSchedule("constant", 1e-3))
    ref = kernel_fold(model, x, y, block_edges(300, 300))
    np.testing.assert_array_equal(got.coef.values[-1], ref.coefs[-1])


# ---------------------------------------------------------------------------
# checkpoint and resume
# ---------------------------------------------------------------------------
def test_irma_checkpoint_and_resume(irma150, client, tmp_path, stop_after_commits):
    paths = irma150[2]
    kw = dict(order=10, record_every=3, segment_bytes=100, client=client)
    whole = fit_stream(paths[7], "irma", **kw)
    ckpt, out = tmp_path / "ckpt", tmp_path / "r.zarr"
    with stop_after_commits(8):
        fit_stream(paths[7], "irma", checkpoint=ckpt, out=out, **kw)
    assert not out.exists()
    with pytest.raises(InputError, match="different run .*parameters"):
        fit_stream(paths[7], "irma", checkpoint=ckpt, resume=True, **{**kw, "order": 9})
    resumed = fit_stream(paths[7], "irma", checkpoint=ckpt, resume=True, out=out, **kw)
    for name in ("step", "coef", "cumulative_loss", "state_theta"):
        np.testing.assert_array_equal(resumed[name].values, whole[name].values)
    assert open_result(out).attrs["cumulative_loss"] == whole.attrs["cumulative_loss"]


# ---------------------------------------------------------------------------
# bad input: exit code 2, one line naming store/variable/chunk/row, nothing written
# ---------------------------------------------------------------------------
@pytest.fixture
def outside(tmp_path):
    """150 rows on [0, 3] in chunks of 20, except x = 3.25 at row 77 (chunk 3)."""
    x, y = irma_rows(1, 0, 150)
    x[77, 0] = 3.25
    return write_stream(tmp_path / "outside.zarr", x, y, 20)


def test_kernels_name_the_bad_row_for_the_engines():
    basis = LegendreBasis(3, (0.0, 3.0))
    with pytest.raises(BadRowError) as info:
        basis.expand(np.array([[1.0], [2.0], [3.5]]), name="X", row_offset=40)
    err = info.value
    assert (err.variable, err.row) == ("X", 42)
    assert str(err) == "X row 42 ([3.5]) is outside the basis domain (0.0, 3.0)"
    assert err.reason == "([3.5]) is outside the basis domain (0.0, 3.0)"
    back = pickle.loads(pickle.dumps(err))  # the fields survive a trip between processes
    assert (type(back), str(back), back.variable, back.row, back.reason) == (
        BadRowError, str(err), "X", 42, err.reason)
    model = IncrementalBFGS(rate=1.0, balanced=True)
    state = model.update(model.init(1, 1), np.ones((3, 1)), np.array([[0.0], [1.0], [1.0]]))
    with pytest.raises(BadRowError) as info:
        model.update(state, np.ones((2, 1)), np.array([[1.0], [2.0]]))
    assert (info.value.variable, info.value.row) == ("Y", 4)


@pytest.mark.parametrize("method", ["irma", "irma-gd", "irma-rls"])
def test_x_outside_the_domain_names_the_row(outside, tmp_path, run, method):
    out = tmp_path / "o.zarr"
    line = one_error_line(run("fit", method, outside, "--out", out, "--domain", 0, 3,
                              "--segment-size", 0.0005))
    assert str(outside) in line and "variable 'X' chunk 3 row 77" in line
    assert "[3.25]" in line and "outside the basis domain (0.0, 3.0)" in line
    nothing_written(out)


def test_x_outside_the_domain_in_a_shuffled_epoch_names_the_stored_row(outside, client):
    # the rows of a shuffled epoch are permuted: the error still names the stored row
    with pytest.raises(InputError, match=r"variable 'X' chunk 3 row 77 \(epoch 0\)"):
        fit_stream(outside, "irma", domain=(0, 3.0), order=4, epochs=2, shuffle=True, seed=4,
                   client=client)


@pytest.mark.parametrize("args,words", [
    (["irma", "--basis", "monomial", "--order", "10", "--domain", "0", "3"],
     ["irma", "Gramian", "singular", "MonomialBasis(order=10"]),
    (["irma", "--domain", "0", "3", "--stiffness-initial", "0"], ["stiffness", "> 0"]),
    (["irma", "--domain", "0", "3", "--stiffness", "additive", "--stiffness-rate", "-1"],
     ["additive", "increment", ">= 0"]),
    (["irma-rls", "--domain", "0", "3", "--forgetting", "0"], ["forgetting", "(0, 1]"]),
    (["irma-rls", "--domain", "0", "3", "--p0", "-1"], ["p0", "> 0"]),
    (["irma-gd", "--domain", "0", "3", "--mu", "-0.1"], ["mu", ">= 0"]),
    (["irma"], ["--domain A B"]),
    (["irma", "--domain", "0", "3", "--domain", "0", "3"],
     ["variable 'X' has 1 column(s)", "2 input dimension(s)"]),
    (["bfgs", "--rate", "0"], ["rate", "positive"]),
    (["bfgs", "--rate", "fast"], ["--rate", "'exact'", "'fast'"]),
    (["bfgs", "--balanced"], ["balanced", "reference rate"]),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, run, args, words):
    x, y = irma_rows(1, 0, 100)
    data = write_stream(tmp_path / "plain.zarr", x, y, 30)  # no domain attribute
    out = tmp_path / "o.zarr"
    line = one_error_line(run("fit", args[0], data, "--out", out, *args[1:]))
    assert all(w in line for w in words), line
    nothing_written(out)


def test_bad_stores_for_bfgs_and_irma(tmp_path, run):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 5))
    y = X @ np.ones((5, 1))
    out = tmp_path / "o.zarr"
    # a rank-deficient first block: 3 rows for 5 features
    data = write_stream(tmp_path / "rank.zarr", X, y, 64)
    line = one_error_line(run("fit", "bfgs", data, "--out", out, "--block-size", 3))
    assert str(data) in line and "the first block" in line and "(rows 0-2)" in line
    assert "rank 3 of 5" in line and "--ridge" in line
    nothing_written(out)
    # non-binary targets with balanced rates: the first bad row is named
    labels = (X[:, :1] > 0).astype(float)
    labels[133, 0] = 0.5
    data = write_stream(tmp_path / "labels.zarr", X, labels, 64)
    line = one_error_line(run("fit", "bfgs", data, "--out", out, "--block-size", 50,
                              "--rate", 1, "--balanced"))
    assert "variable 'y' chunk 2 row 133 has 0.5" in line and "binary" in line
    nothing_written(out)
    # a refusal without a row (two codings in one block) names the blocks being folded
    labels[labels == 0] = -1.0
    labels[133, 0] = 0.0
    data = write_stream(tmp_path / "codings.zarr", X, labels, 64)
    line = one_error_line(run("fit", "bfgs", data, "--out", out, "--block-size", 50,
                              "--rate", 1, "--balanced", "--segment-size", 0.001))
    assert str(data) in line and "block 3 (rows 100-149)" in line and "one coding" in line
    nothing_written(out)
    # IRMA: raw inputs of the wrong dimension, several targets
    data = write_stream(tmp_path / "wide.zarr", X, y, 64)
    line = one_error_line(run("fit", "irma", data, "--out", out, "--domain", -9, 9))
    assert "variable 'X' has 5 column(s)" in line and "1 input dimension(s)" in line
    x, y1 = irma_rows(0, 0, 50)
    data = write_stream(tmp_path / "two.zarr", x, np.hstack([y1, y1]), 64)
    line = one_error_line(run("fit", "irma", data, "--out", out, "--domain", 0, 3))
    assert "variable 'y' has 2 targets" in line and "one scalar target" in line
    nothing_written(out)


def test_irma_has_no_scan_form(irma150, client):
    with pytest.raises(InputError, match="'irma' has no scan form"):
        fit_stream(irma150[2][40], "irma", engine="scan", client=client)
