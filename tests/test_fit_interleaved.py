"""Interleaved KF4LLS through the pipeline: two stores (or two groups of one), alternating
whole blocks, against the kernel on the same blocks, the closed form of Lemma 1, weighted
least squares, and the test population's diagnostics computed directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from streamlsq import InputError, fit_interleaved, open_result, simulate_interleaved
from streamlsq.cli.main import main
from streamlsq.kernels import block_edges
from streamlsq.kernels.recursions import interleaved as il

from conftest import write_stream

ALPHA, NB, QB, STEPS = 0.25, 60, 4, 6


@pytest.fixture(scope="module")
def pop(tmp_path_factory, client):
    """Three simulated populations (Figure 1 process) as groups a, b, c of one store."""
    path = tmp_path_factory.mktemp("il") / "pop.zarr"
    return simulate_interleaved(path, alpha=ALPHA, n=NB, q=QB, steps=STEPS, seed=4,
                                chunk_blocks=4, client=client)


def blocks(path, group, size):
    g = zarr.open_group(str(path), mode="r", path=group)
    X, Y = g["X"][:], g["y"][:]
    edges = block_edges(len(X), size)
    return [(X[a:b], Y[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def kernel_run(A, B, alpha, start):
    """The kernel's update on the alternating blocks, in memory: ψ after every step."""
    model = il.InterleavedKF4LLS(alpha, start=start)
    state = model.init(A[0][0].shape[1], A[0][1].shape[1])
    psis = []
    for p, i in il.interleaved_block_order(len(A), len(B), start):
        X, Y = (A if p == "a" else B)[i]
        state = model.update(state, X, Y)
        psis.append(model.coef(state))
    return np.array(psis)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize("start", ["a", "b"])
@pytest.mark.parametrize("block", [None, 45])  # 45: blocks straddle the 240-row chunks
def test_pipeline_equals_the_kernel_on_the_same_blocks(pop, client, engine, start, block):
    ds = fit_interleaved(f"{pop}#a", f"{pop}#b", alpha=ALPHA, start=start, block_size=block,
                         record_every=1, engine=engine, segment_bytes=3_000, client=client)
    size = block or NB
    A, B = blocks(pop, "a", size), blocks(pop, "b", size)
    ref = kernel_run(A, B, ALPHA, start)
    assert ds.sizes["step"] == len(ref) == 2 * len(A)
    if engine == "sequential":
        np.testing.assert_array_equal(ds.coef.values, ref)
    else:
        np.testing.assert_allclose(ds.coef.values, ref, rtol=1e-9, atol=1e-12)
    other = "b" if start == "a" else "a"
    assert list(ds.population.values[:2]) == [start, other]
    np.testing.assert_array_equal(ds.rows_seen, np.cumsum([len(X) for X, _ in (
        (A if p == "a" else B)[i] for p, i in il.interleaved_block_order(len(A), len(B), start)
    )]))


def test_starting_orders_agree_at_every_even_step_and_psi2_is_the_closed_form(pop, client):
    kw = dict(alpha=ALPHA, record_every=1, client=client)
    a_first = fit_interleaved(f"{pop}#a", f"{pop}#b", start="a", **kw)
    b_first = fit_interleaved(f"{pop}#a", f"{pop}#b", start="b", **kw)
    even = a_first.step.values % 2 == 0
    np.testing.assert_allclose(a_first.coef.values[even], b_first.coef.values[even],
                               rtol=1e-10, atol=1e-12)
    assert not np.allclose(a_first.coef.values[0], b_first.coef.values[0])  # odd steps differ
    A, B = blocks(pop, "a", NB), blocks(pop, "b", NB)
    psi2 = il.interleaved_closed_form(A[0][0], A[0][1], B[0][0], B[0][1], ALPHA)
    np.testing.assert_allclose(a_first.coef.sel(step=2).values, psi2, rtol=1e-10)
    # every even step 2m: weighted least squares on the centred blocks 1..m of each
    for m in (2, 6):
        rows = [(np.sqrt(w) * (X - X.mean(0)), np.sqrt(w) * (Y - Y.mean(0)))
                for P, w in ((A, ALPHA), (B, 1 - ALPHA)) for X, Y in P[:m]]
        ref = np.linalg.lstsq(np.vstack([r[0] for r in rows]), np.vstack([r[1] for r in rows]),
                              rcond=None)[0]
        np.testing.assert_allclose(b_first.coef.sel(step=2 * m).values, ref, rtol=1e-9)


@pytest.fixture
def unequal(tmp_path):
    """A: 170 rows in blocks of 50 (4 blocks, the last of 20 rows); B: 5 blocks of 50."""
    rng = np.random.default_rng(21)
    out = {}
    for name, n, mu in (("a", 170, 2.0), ("b", 250, -3.0)):
        X = rng.normal(mu, 1.0, (n, 3))
        y = X @ [[1.0], [-2.0], [0.5]] + rng.standard_normal((n, 1))
        out[name] = write_stream(tmp_path / f"{name}.zarr", X, y, 64, attrs={"block_size": 50})
    return out


@pytest.mark.parametrize("start,steps,used_a,used_b", [("a", 8, 4, 4), ("b", 9, 4, 5)])
def test_unequal_populations_stop_when_the_population_due_next_runs_out(
    unequal, client, start, steps, used_a, used_b
):
    ds = fit_interleaved(unequal["a"], unequal["b"], alpha=0.4, start=start, record_every=1,
                         client=client)
    assert ds.sizes["step"] == steps
    assert (ds.attrs["blocks_used_a"], ds.attrs["blocks_used_b"]) == (used_a, used_b)
    assert ds.attrs["rows_unused_a"] == 0
    assert ds.attrs["rows_unused_b"] == 250 - 50 * used_b
    A, B = blocks(unequal["a"], None, 50), blocks(unequal["b"], None, 50)
    assert [len(X) for X, _ in A] == [50, 50, 50, 20]
    np.testing.assert_array_equal(ds.coef.values, kernel_run(A, B, 0.4, start))
    assert int(ds.rows_seen[-1]) == 170 + 50 * used_b


def test_test_population_diagnostics(pop, client):
    # C in blocks of 75 rows: 5 blocks, fewer than the 12 steps of the stream
    ds = fit_interleaved(f"{pop}#a", f"{pop}#b", alpha=ALPHA, test=f"{pop}#c", block_size=NB,
                         record_every=1, client=client)
    g = zarr.open_group(str(pop), mode="r")
    n_test, r_p = g["c/X"].shape[0], g["c/coef_true"][:]
    ds75 = fit_interleaved(f"{pop}#a", f"{pop}#b", alpha=ALPHA, test=f"{pop}#c",
                           block_size=75, record_every=2, client=client)
    for res, size in ((ds, NB), (ds75, 75)):
        C = blocks(pop, "c", size)
        for t, psi, mse, bias in zip(res.step.values, res.coef.values, res.test_mse.values,
                                     res.bias.values, strict=True):
            seen = C[: min(t, len(C))]
            assert mse == pytest.approx(il.test_mse(psi, [Zi for Zi, _ in seen],
                                                    [pi for _, pi in seen]), rel=1e-9)
            assert bias == pytest.approx(np.mean(np.abs(psi - r_p)), rel=1e-12)
        assert int(res.test_rows[-1]) == n_test
    np.testing.assert_allclose(ds.coef_true_test.values, r_p)
    # the shape of Figure 1 in one run: the interleaved fit is much closer to r_p than the
    # distance between the two training populations' truths
    D = np.mean(np.abs(g["a/coef_true"][:] - g["b/coef_true"][:]))
    assert float(ds.bias[-1]) < 0.25 * D


def test_estimated_alpha_is_close_to_the_truth(tmp_path, client):
    alpha = 0.3
    path = simulate_interleaved(tmp_path / "big.zarr", alpha=alpha, n=400, q=3, steps=10,
                                seed=9, chunk_blocks=3, client=client)
    means = fit_interleaved(f"{path}#a", f"{path}#b", test=f"{path}#c",
                            estimate_alpha="means", client=client, out=tmp_path / "m.zarr")
    # the Figure 1 process pairs the rows (Z = aU + (1-a)V row by row), so the column means
    # satisfy the mixture exactly: the ratio of means returns alpha to rounding
    assert means.attrs["alpha"] == pytest.approx(alpha, abs=1e-9)
    np.testing.assert_allclose(means.alpha_per_column, alpha, atol=1e-9)
    assert means.attrs["alpha_source"] == "means"
    assert open_result(tmp_path / "m.zarr").attrs["alpha"] == means.attrs["alpha"]

    grid = fit_interleaved(f"{path}#a", f"{path}#b", test=f"{path}#c",
                           estimate_alpha="grid", client=client)
    g = zarr.open_group(str(path), mode="r")
    mom = [il.column_moments(g[f"{k}/X"][:]) for k in "abc"]
    # the chunked reduction gives the in-memory moments' estimate
    ref = il.estimate_alpha_grid(*mom)
    np.testing.assert_array_equal(grid.alpha_per_column, ref.per_column)
    assert grid.attrs["alpha"] == ref.combined and grid.attrs["alpha_source"] == "grid"
    assert grid.alpha_criterion.shape == (3, 1001)
    # tolerance as in the kernel tests: 5 delta-method standard errors of the mean-only
    # estimate plus one grid step
    se = np.sqrt(mom[2].var / mom[2].count + alpha**2 * mom[0].var / mom[0].count
                 + (1 - alpha) ** 2 * mom[1].var / mom[1].count)
    se = se / np.abs(mom[0].mean - mom[1].mean)
    assert np.all(np.abs(grid.alpha_per_column.values - alpha) <= 5 * se + 1e-3)
    assert abs(grid.attrs["alpha"] - alpha) <= (5 * se + 1e-3).max()


def test_checkpoint_and_resume(pop, client, tmp_path, stop_after_commits):
    kw = dict(alpha=ALPHA, test=f"{pop}#c", block_size=45, record_every=1,
              segment_bytes=2_000, client=client)
    whole = fit_interleaved(f"{pop}#a", f"{pop}#b", **kw)
    ckpt = tmp_path / "ckpt"
    with stop_after_commits(3):
        fit_interleaved(f"{pop}#a", f"{pop}#b", checkpoint=ckpt, **kw)
    with pytest.raises(InputError, match=r"different run \(differs in: --block-size 45 then, "
                       r"50 now\)"):
        fit_interleaved(f"{pop}#a", f"{pop}#b", checkpoint=ckpt, resume=True,
                        **{**kw, "block_size": 50})
    resumed = fit_interleaved(f"{pop}#a", f"{pop}#b", checkpoint=ckpt, resume=True, **kw)
    np.testing.assert_array_equal(resumed.coef.values, whole.coef.values)
    np.testing.assert_array_equal(resumed.test_mse.values, whole.test_mse.values)


def test_simulate_interleaved_cli_writes_the_three_populations(tmp_path, client):
    address = client.scheduler.address
    runner = CliRunner()
    paths = []
    for chunk in ("2", "5"):
        out = tmp_path / f"sim{chunk}.zarr"
        res = runner.invoke(main, ["simulate", "interleaved", "--out", str(out), "--alpha", "0.4",
                                   "--n", "30", "--q", "3", "--steps", "5", "--seed", "2",
                                   "--chunk-blocks", chunk, "--scheduler", address])
        assert res.exit_code == 0, res.output
        paths.append(out)
    g, h = (zarr.open_group(str(p), mode="r") for p in paths)
    for k in "abc":  # the numbers do not depend on the chunking
        np.testing.assert_array_equal(g[f"{k}/X"][:], h[f"{k}/X"][:])
        np.testing.assert_array_equal(g[f"{k}/y"][:], h[f"{k}/y"][:])
        assert g[k].attrs["block_size"] == 30 and g[f"{k}/X"].shape == (150, 3)
    np.testing.assert_allclose(g["c/X"][:], 0.4 * g["a/X"][:] + 0.6 * g["b/X"][:], rtol=1e-14)
    np.testing.assert_allclose(g["c/coef_true"][:],
                               0.4 * g["a/coef_true"][:] + 0.6 * g["b/coef_true"][:])
    ds = fit_interleaved(f"{paths[0]}#a", f"{paths[0]}#b", alpha=0.4, test=f"{paths[0]}#c",
                         client=client)
    assert ds.sizes["step"] == 10 and "bias" in ds


# -- bad input: exit code 2, one line, nothing written --------------------------------------


@pytest.fixture
def run(client):
    address = client.scheduler.address

    def _run(*args):
        return CliRunner().invoke(main, ["fit", "interleaved", *map(str, args),
                                         "--scheduler", address])

    return _run


def _refused(result, out: Path, *words):
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.partial-*"))


def test_bad_input_is_refused_before_anything_is_written(pop, run, tmp_path):
    a, b, c = f"{pop}#a", f"{pop}#b", f"{pop}#c"
    out = tmp_path / "r.zarr"
    _refused(run(a, b, "--out", out, "--alpha", "1.5"), out, "alpha", "[0, 1]")
    _refused(run(a, b, "--out", out, "--alpha", "-0.1", "--test", c), out, "alpha")
    _refused(run(a, b, "--out", out, "--estimate-alpha", "means"), out, "--test")
    _refused(run(a, b, "--out", out), out, "--alpha", "--estimate-alpha")
    _refused(run(a, b, "--out", out, "--alpha", "0.3", "--estimate-alpha", "grid", "--test", c),
             out, "either")
    _refused(run(a, b, "--out", out, "--alpha", "0"), out, "weight 0", "start")
    _refused(run(a, f"{pop}#nope", "--out", out, "--alpha", "0.3"), out, "nope")
    X = np.random.default_rng(0).standard_normal((120, QB + 1))
    wide = write_stream(tmp_path / "wide.zarr", X, X[:, :1], 60)
    _refused(run(a, wide, "--out", out, "--alpha", "0.3"), out, str(wide), "variable 'X'",
             f"{QB + 1} features", str(pop))
    _refused(run(a, b, "--out", out, "--alpha", "0.3", "--test", wide), out, str(wide),
             "features")
    ckpt = tmp_path / "ckpt"
    _refused(run(a, b, "--out", out, "--estimate-alpha", "grid", "--checkpoint", ckpt), out,
             "--test")
    assert not ckpt.exists()


def test_alpha_that_the_means_cannot_identify_is_refused(tmp_path, run):
    rng = np.random.default_rng(3)
    stores = []
    for name, mu in (("a", [1.0, 2.0]), ("b", [1.0, -2.0]), ("c", [1.0, 0.0])):
        X = rng.normal(0, 1, (200, 2))
        X[:, 0] = mu[0]  # the same constant column in A and B
        X[:, 1] += mu[1]
        stores.append(write_stream(tmp_path / f"{name}.zarr", X, X[:, 1:], 100))
    out = tmp_path / "r.zarr"
    _refused(run(stores[0], stores[1], "--test", stores[2], "--estimate-alpha", "means",
                 "--out", out), out, "column 0", "--estimate-alpha grid")


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_singular_first_block_names_the_remedy(pop, run, tmp_path, engine):
    # a centred block of 4 rows has rank <= 3 < q = 4: H_1 is singular with H_0 = 0
    out = tmp_path / "r.zarr"
    _refused(run(f"{pop}#a", f"{pop}#b", "--alpha", "0.3", "--block-size", "4", "--engine",
                 engine, "--out", out), out, "group 'a'", "variable 'X'", "first block",
             "--ridge", "--block-size")
    ok = run(f"{pop}#a", f"{pop}#b", "--alpha", "0.3", "--block-size", "4", "--engine", engine,
             "--ridge", "1e-6", "--out", out)
    assert ok.exit_code == 0, ok.output
