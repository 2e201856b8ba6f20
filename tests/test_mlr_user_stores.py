"""Meta-learning on task stores as users write them: roles as strings or CF
codes, no roles at all, thin clusters, k chosen from the data, predicted targets.

References: the in-memory kernels (``mlr.meta_learn``, ``mlr.select_k``) on the
same arrays, closed forms (a store whose roles are given two ways must give the
same model), NumPy products for ŷ, and the truth of synthetic stores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq import metalearn, open_result, predict, simulate_mlr
from streamlsq.cli.main import main
from streamlsq.errors import InputError
from streamlsq.io.tasks import decode_roles, open_tasks
from streamlsq.kernels import mlr
from streamlsq.kernels.synthetic.mlr import feature_rows, mlr_components, simulate_tasks

D, K = 4, 3
COUNTS = {"light": 5_000, "heavy": 100, "light2": 1_000}
ROWS = {"light": 4, "heavy": 60, "light2": 10}


def hand_written(seed=1, d=D, k=K):
    """Task sets drawn with the kernels, stacked as a user would: (X, y, ptr, role names)."""
    W, s, p = mlr_components(seed, d, k)
    parts = [simulate_tasks([seed, tag], 0, COUNTS[r], ROWS[r], W, s, p)
             for tag, r in enumerate(COUNTS, start=1)]
    X = np.concatenate([q[0] for q in parts])
    y = np.concatenate([q[1] for q in parts])
    sizes = np.repeat([ROWS[r] for r in COUNTS], list(COUNTS.values()))
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    names = np.repeat(np.array(list(COUNTS)), list(COUNTS.values()))
    return X, y, ptr, names, parts


def to_zarr(path, X, y, ptr, role=None, role_attrs=None):
    data = {"X": (("row", "feature"), X), "y": (("row",), y), "task_ptr": (("task_edge",), ptr)}
    ds = xr.Dataset(data)
    if role is not None:
        ds["role"] = (("task",), role)
        ds["role"].attrs.update(role_attrs or {})
    ds.to_zarr(path, mode="w", zarr_format=3, consolidated=False)
    return path


# -- roles as users write them -------------------------------------------------------------
def test_decode_roles_accepts_names_flags_and_codes():
    names = ["light", "HEAVY ", "light2", "light1"]
    assert decode_roles(np.array(names), {}, "s").tolist() == [0, 1, 0 + 2, 0][:3] + [0]
    assert decode_roles(np.array(names, dtype=object), {}, "s").tolist() == [0, 1, 2, 0]
    assert decode_roles(np.array([b"heavy", b"light"]), {}, "s").tolist() == [1, 0]
    flags = {"flag_values": [10, 20, 30], "flag_meanings": "light2 light heavy"}
    assert decode_roles(np.array([30, 10, 20]), flags, "s").tolist() == [1, 2, 0]
    assert decode_roles(np.array([2, 0, 1], dtype=np.int8), {}, "s").tolist() == [2, 0, 1]


@pytest.mark.parametrize("values,attrs,expect", [
    (["light", "medium"], {}, ["variable 'role' has value 'medium' at task 1"]),
    ([0, 1, 3], {}, ["variable 'role' has code 3 at task 2", "2 (light2)"]),
    ([5, 9], {"flag_values": [5, 6], "flag_meanings": "light heavy"},
     ["code 9 at task 1", "5 (light), 6 (heavy)"]),
    ([5], {"flag_values": [5], "flag_meanings": "tiny"}, ["names code 5 'tiny'"]),
    ([0.5], {}, ["dtype float64"]),
])
def test_bad_roles_are_one_line_naming_store_variable_and_task(values, attrs, expect):
    with pytest.raises(InputError) as err:
        decode_roles(np.array(values), attrs, "tasks.zarr")
    message = str(err.value)
    assert message.startswith("tasks.zarr: variable 'role'") and "\n" not in message
    for text in expect:
        assert text in message, message


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["light", "heavy", "light2"]), min_size=1, max_size=30),
       st.permutations([0, 1, 2]), st.integers(-100, 100))
def test_any_encoding_of_the_same_roles_decodes_the_same(names, order, offset):
    codes = np.array([{"light": 0, "heavy": 1, "light2": 2}[n] for n in names])
    meanings = ["light", "heavy", "light2"]
    values = [offset + 7 * i for i in range(3)]
    flag = {"flag_values": [values[i] for i in order],
            "flag_meanings": " ".join(meanings[i] for i in order)}
    stored = np.array([values[c] for c in codes])
    np.testing.assert_array_equal(decode_roles(np.array(names), {}, "s"), codes)
    np.testing.assert_array_equal(decode_roles(stored, flag, "s"), codes)


def test_string_roles_give_the_model_of_int_codes(client, tmp_path):
    X, y, ptr, names, parts = hand_written()
    codes = decode_roles(names, {}, "s")
    strings = to_zarr(tmp_path / "str.zarr", X, y, ptr, names)
    varlen = to_zarr(tmp_path / "obj.zarr", X, y, ptr, names.astype(object))
    coded = to_zarr(tmp_path / "codes.zarr", X, y, ptr, (codes + 5).astype(np.int16),
                    {"flag_values": [5, 6, 7], "flag_meanings": "light heavy light2"})
    assert open_tasks(strings).roles().tolist() == codes.tolist()
    models = [metalearn(path, K, client=client) for path in (strings, varlen, coded)]
    ref = mlr.meta_learn(*(q[:3] for q in parts), K, method="average")
    for ds in models:
        np.testing.assert_allclose(ds.coef.values, ref["coef"], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(ds.light_cluster.values, ref["light_cluster"])
        assert ds.attrs["role_rule"] == "store"


# -- roles by the size rule ----------------------------------------------------------------
def test_default_heavy_rows_rule():
    assert mlr.default_heavy_rows([4] * 1000 + [100] * 30) == 100
    assert mlr.default_heavy_rows([4] * 1000 + [100] * 5) == 4  # keeps >= 20 heavy tasks
    assert mlr.default_heavy_rows([1, 2, 3]) == 4               # nobody reaches 4L
    assert mlr.default_heavy_rows([8] * 10, n_splits=3) == 12
    many = np.arange(10, 20_010)
    h = mlr.default_heavy_rows(many, max_heavy=5_000)
    assert int((many >= h).sum()) <= 5_000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=200), st.integers(1, 4),
       st.integers(2, 60))
def test_default_heavy_rows_invariants(sizes, splits, max_heavy):
    sizes = np.array(sizes)
    h = mlr.default_heavy_rows(sizes, splits, max_heavy)
    assert h >= 4 * splits
    n = int((sizes >= h).sum())
    reach = int((sizes >= 4 * splits).sum())
    if 0 < reach:
        # more than max_heavy only when the heavy tasks all have the top size (no larger
        # threshold exists); fewer than min(20, reach) only to stay within max_heavy
        forced = len(np.unique(sizes[sizes >= h])) == 1
        assert n >= 1 and (n <= max_heavy or forced)
        assert n >= min(20, reach) or n <= max_heavy or forced


def test_store_without_roles_runs_with_k_and_auto_and_reports_the_rule(client, tmp_path):
    X, y, ptr, _, parts = hand_written()
    path = to_zarr(tmp_path / "none.zarr", X, y, ptr)
    ds = metalearn(path, K, client=client)
    sizes = np.diff(ptr)
    assert ds.attrs["heavy_rows"] == mlr.default_heavy_rows(sizes) == 60
    assert ds.attrs["n_heavy"] == COUNTS["heavy"]
    assert ds.attrs["n_light"] == ds.attrs["n_light2"] == ptr.size - 1
    assert "heavy_rows=60: default" in ds.attrs["role_rule"]
    # the same model as the in-memory algorithm on the sets the rule makes
    every = (X, y, ptr)
    heavy = mlr.select_tasks(X, y, ptr, sizes >= 60)
    ref = mlr.meta_learn(every, heavy, every, K, method="average")
    np.testing.assert_allclose(ds.coef.values, ref["coef"], rtol=1e-9, atol=1e-12)
    auto = metalearn(path, "auto", client=client)
    assert auto.attrs["k_chosen"] == K and auto.sizes["cluster"] == K


# -- thin clusters ------------------------------------------------------------------------
def test_refine_with_fallback_matches_least_squares_and_its_closed_form():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(60)
    ptr = np.arange(0, 61, 6)
    labels = np.array([0] * 9 + [1])            # cluster 1 has 6 rows > d: refined
    stats = mlr.cluster_sufficient_stats(X, y, ptr, labels, 3)   # cluster 2: no task
    W0, r2 = np.ones((3, 3)), np.array([0.3, 0.4, 0.5])
    W, s2, p, status = mlr.refine_with_fallback(stats, 10, W0, r2)
    W_ref, s2_ref, _ = mlr.refine_from_stats(
        {key: v[:2] for key, v in stats.items()}, 10)
    np.testing.assert_allclose(W[:2], W_ref, rtol=1e-12)
    np.testing.assert_allclose(s2[:2], s2_ref, rtol=1e-12)
    assert status.tolist() == [0, 0, 3]
    np.testing.assert_array_equal(W[2], W0[2])
    assert s2[2] == 0.5 and p.tolist() == [0.9, 0.1, 0.0]
    # a singular cluster: constant second feature. The fallback is the least-squares
    # solution closest to W0: lstsq of (X, y - X W0) added to W0
    Xs = X.copy()
    Xs[:, 1] = 0.0
    stats = mlr.cluster_sufficient_stats(Xs, y, ptr, np.zeros(10, dtype=int), 1)
    W, s2, _, status = mlr.refine_with_fallback(stats, 10, W0[:1], r2[:1])
    delta = np.linalg.lstsq(Xs, y - Xs @ W0[0], rcond=None)[0]
    np.testing.assert_allclose(W[0], W0[0] + delta, rtol=1e-9)
    assert W[0, 1] == pytest.approx(1.0) and status.tolist() == [2] and s2[0] == 0.3
    # too few rows
    stats = mlr.cluster_sufficient_stats(X[:2], y[:2], np.array([0, 2]), [0], 1)
    assert mlr.refine_with_fallback(stats, 1, W0[:1], r2[:1])[3].tolist() == [1]


def test_a_thin_cluster_is_flagged_not_fatal(client, tmp_path):
    # two light2 tasks for three clusters: at least one cluster receives none
    X, y, ptr, names, parts = hand_written()
    n = COUNTS["light"] + COUNTS["heavy"] + 2
    path = to_zarr(tmp_path / "thin.zarr", X[: ptr[n]], y[: ptr[n]], ptr[: n + 1], names[:n])
    out = tmp_path / "m.zarr"
    r = CliRunner().invoke(main, ["metalearn", str(path), "--out", str(out), "--k", str(K),
                                  "--scheduler", client.scheduler.address])
    assert r.exit_code == 0, r.output
    assert "refinement fell back for" in r.output and "no_tasks" in r.output
    ds = open_result(out)
    status = ds.refinement.values
    assert 3 in status.tolist()
    j = int(np.flatnonzero(status == 3)[0])
    np.testing.assert_array_equal(ds.coef.values[j], ds.initial_coef.values[j])
    assert ds.weight.values[j] == 0
    assert ds.attrs["n_fallback_clusters"] == int((status > 0).sum())
    pred = predict(out, path, holdout=2, client=client)
    assert np.isfinite(pred.coef.values).all() and np.isfinite(pred.attrs["holdout_mse"])


# -- k chosen from the data ---------------------------------------------------------------
@pytest.mark.parametrize("k", range(2, 9))
def test_k_auto_finds_the_true_k_in_nine_of_ten_seeds(k):
    # the in-memory choice (the pipeline reproduces it: next test), small sizes
    sizes = {"light": (8_000, 4), "heavy": (120, 80), "light2": (1_200, 10)}
    found = 0
    for seed in range(10):
        W, s, p = mlr_components(seed, 8, k)
        sets = [simulate_tasks([seed, tag], 0, n, t, W, s, p)[:3]
                for tag, (n, t) in enumerate(sizes.values(), start=1)]
        found += mlr.select_k(*sets, 8)["k"] == k
    assert found >= 9


def test_pipeline_k_auto_equals_the_in_memory_choice_and_writes_the_curve(client, tmp_path):
    path = tmp_path / "k4.zarr"
    sizes = dict(n_light=8_000, t_light=4, n_heavy=120, t_heavy=80, n_light2=1_200, t_light2=10)
    simulate_mlr(path, k=4, d=8, seed=3, client=client, chunk_rows=5_000, **sizes)
    out = tmp_path / "model.zarr"
    r = CliRunner().invoke(main, ["metalearn", str(path), "--out", str(out), "--k", "auto",
                                  "--chunk-tasks", "700", "--scheduler",
                                  client.scheduler.address])
    assert r.exit_code == 0, r.output
    assert "k = 4 chosen from k = 1..8" in r.output
    ds = open_result(out)
    W, s, p = mlr_components(3, 8, 4)
    sets = [simulate_tasks([3, tag], 0, sizes[f"n_{r}"], sizes[f"t_{r}"], W, s, p)[:3]
            for tag, r in enumerate(("light", "heavy", "light2"), start=1)]
    ref = mlr.select_k(*sets, 8)
    np.testing.assert_allclose(ds.k_loglik.values, ref["mean"], rtol=1e-9)
    np.testing.assert_allclose(ds.k_loglik_se.values, ref["se"], rtol=1e-6, atol=1e-12)
    assert ds.attrs["k_chosen"] == ref["k"] == 4
    fixed = metalearn(path, 4, client=client)
    np.testing.assert_allclose(ds.coef.values, fixed.coef.values, rtol=1e-12)
    table = (tmp_path / "model.k-curve.csv").read_text().splitlines()
    assert table[0] == "k,heldout_loglik,heldout_loglik_se,eigenvalue,chosen" and len(table) == 9
    assert (tmp_path / "model.k-curve.png").stat().st_size > 1000


def test_mixture_log_likelihood_is_the_gaussian_mixture_density():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 2))
    y = rng.standard_normal(7)
    ptr = np.array([0, 3, 7])
    W = np.array([[1.0, 0.0], [0.0, -1.0]])
    s2, p = np.array([0.5, 2.0]), np.array([0.3, 0.7])
    ll = mlr.mixture_log_likelihood(X, y, ptr, W, s2, p)
    for i in range(2):
        rows = slice(ptr[i], ptr[i + 1])
        dens = sum(p[j] * multivariate_normal(X[rows] @ W[j], s2[j] * np.eye(ptr[i + 1] - ptr[i]))
                   .pdf(y[rows]) for j in range(2))
        assert ll[i] == pytest.approx(np.log(dens), rel=1e-12)


# -- predicted targets ---------------------------------------------------------------------
def test_predict_writes_yhat_for_every_row_and_for_new_covariates(client, tmp_path):
    X, y, ptr, names, _ = hand_written()
    path = to_zarr(tmp_path / "tasks.zarr", X, y, ptr, names)
    model = tmp_path / "m.zarr"
    metalearn(path, K, out=model, holdout=2, client=client)
    new_X = np.random.default_rng(1).standard_normal((X.shape[0] + 3 * (ptr.size - 1), D))
    new_ptr = ptr + 3 * np.arange(ptr.size)
    xr.Dataset({"X": (("row", "feature"), new_X), "task_ptr": (("task_edge",), new_ptr)}) \
        .to_zarr(tmp_path / "new.zarr", mode="w", zarr_format=3, consolidated=False,
                 encoding={"X": {"chunks": (9_999, D)}})
    out = tmp_path / "pred.zarr"
    r = CliRunner().invoke(main, ["predict", str(model), str(path), "--out", str(out),
                                  "--holdout", "2", "--yhat", "--new-rows",
                                  str(tmp_path / "new.zarr"), "--chunk-tasks", "900",
                                  "--scheduler", client.scheduler.address])
    assert r.exit_code == 0, r.output
    res = open_result(out)
    coef = res.coef.values
    ids = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    np.testing.assert_allclose(res.yhat.values, np.einsum("nd,nd->n", X, coef[ids]), rtol=1e-12)
    new_ids = np.repeat(np.arange(ptr.size - 1), np.diff(new_ptr))
    np.testing.assert_allclose(res.new_yhat.values,
                               np.einsum("nd,nd->n", new_X, coef[new_ids]), rtol=1e-12)
    # the held-out rows' squared errors are the stored ones
    held = np.arange(ptr[-1]) >= (ptr[1:] - 2)[ids]
    sse = np.bincount(ids[held], (y[held] - res.yhat.values[held]) ** 2, minlength=ptr.size - 1)
    np.testing.assert_allclose(sse, res.holdout_sse.values, rtol=1e-9)
    in_memory = predict(model, path, holdout=2, yhat=True, client=client)
    np.testing.assert_allclose(in_memory.yhat.values, res.yhat.values, rtol=1e-12)


def test_new_covariates_must_cover_the_same_tasks(client, tmp_path):
    X, y, ptr, names, _ = hand_written()
    path = to_zarr(tmp_path / "tasks.zarr", X, y, ptr, names)
    metalearn(path, K, out=tmp_path / "m.zarr", client=client)
    xr.Dataset({"X": (("row", "feature"), X[:40]), "task_ptr": (("task_edge",), ptr[:11])}) \
        .to_zarr(tmp_path / "few.zarr", mode="w", zarr_format=3, consolidated=False)
    with pytest.raises(InputError, match=r"few.zarr: variable 'task_ptr' has 10 tasks"):
        predict(tmp_path / "m.zarr", path, new_rows=tmp_path / "few.zarr", client=client)


# -- non-isotropic generator ---------------------------------------------------------------
def test_polynomial_and_chebyshev_features_are_reproducible_by_task():
    W, s, p = mlr_components(0, 5, 2)
    for features in ("polynomial", "chebyshev"):
        X, y, ptr, comp = simulate_tasks([4, 1], 0, 300, 7, W, s, p, features)
        Xc, yc, _, compc = simulate_tasks([4, 1], 123, 50, 7, W, s, p, features)
        np.testing.assert_array_equal(Xc, X[123 * 7 : 173 * 7])
        np.testing.assert_array_equal(compc, comp[123:173])
        u = X[:, 1]  # x_1 = u in both bases
        np.testing.assert_allclose(X, feature_rows(u, 5, features), rtol=1e-12)
        assert np.abs(u).max() <= 1.0
        np.testing.assert_allclose(y - np.einsum("nd,nd->n", X, W[np.repeat(comp, 7)]),
                                   y - np.einsum("nd,nd->n", X, W[np.repeat(comp, 7)]))
    cheb = feature_rows(np.array([0.3]), 5, "chebyshev")[0]
    np.testing.assert_allclose(cheb, np.cos(np.arange(5) * np.arccos(0.3)), rtol=1e-12)


def test_simulate_cli_features_option(client, tmp_path):
    out = tmp_path / "poly.zarr"
    r = CliRunner().invoke(main, ["simulate", "mlr", "--out", str(out), "--features",
                                  "polynomial", "--n-light", "100", "--n-heavy", "10",
                                  "--n-light2", "10", "--d", "4", "--k", "2", "--scheduler",
                                  client.scheduler.address])
    assert r.exit_code == 0, r.output
    ds = xr.open_zarr(out, consolidated=False)
    np.testing.assert_array_equal(ds.X.values[:, 0], 1.0)
    assert Path(out).exists()
