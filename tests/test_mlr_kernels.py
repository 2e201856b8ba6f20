"""Tests of the mixed-linear-regression kernels (docs/algorithms.md) and the generator.

References are independent of the kernels: per-task loops over numpy.linalg.lstsq,
scipy.stats.norm log-densities, SciPy's single linkage and minimum spanning tree,
closed-form moments, and Monte-Carlo averages with tolerances from their standard
errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse.csgraph import minimum_spanning_tree

from streamlsq.kernels import mlr
from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.mlr.tasks import group_ptr
from streamlsq.kernels.synthetic import mlr as synth

SETTINGS = settings(max_examples=25, deadline=None)


# -- helpers -----------------------------------------------------------------------
def ragged(rng, sizes, d, W=None, noise=1.0):
    """Random rows for tasks of the given sizes; y from a random or given coefficient."""
    sizes = np.asarray(sizes, dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    X = rng.standard_normal((int(ptr[-1]), d))
    if W is None:
        W = rng.standard_normal((sizes.size, d))
    y = np.einsum("nd,nd->n", X, W[np.repeat(np.arange(sizes.size), sizes)])
    y = y + noise * rng.standard_normal(X.shape[0])
    return X, y, ptr


def split_chunk(X, y, ptr, s):
    """The two chunks (tasks [:s] and [s:]) with local task_ptr."""
    r = ptr[s]
    return (X[:r], y[:r], ptr[: s + 1]), (X[r:], y[r:], ptr[s:] - r)


def task_rows(X, y, ptr, i):
    return X[ptr[i] : ptr[i + 1]], y[ptr[i] : ptr[i + 1]]


def gaussian_loglik(X, y, ptr, W, var):
    """Σ_rows log N(y | wᵀx, var) per task and cluster, by scipy.stats in a loop."""
    n = ptr.size - 1
    out = np.zeros((n, W.shape[0]))
    for i in range(n):
        Xi, yi = task_rows(X, y, ptr, i)
        for ell in range(W.shape[0]):
            out[i, ell] = scipy.stats.norm.logpdf(yi, Xi @ W[ell], np.sqrt(var[ell])).sum()
    return out


ragged_case = st.tuples(
    st.lists(st.integers(2, 7), min_size=0, max_size=12),
    st.integers(1, 4),
    st.integers(0, 2**31 - 1),
    st.floats(0, 1),
)


# -- task layout -------------------------------------------------------------------
@SETTINGS
@given(st.lists(st.integers(0, 6), min_size=0, max_size=15), st.data())
def test_validate_task_ptr_accepts_valid_and_names_first_bad_index(sizes, data):
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_rows = int(ptr[-1])
    out = mlr.validate_task_ptr(ptr, n_rows)
    np.testing.assert_array_equal(out, ptr)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(mlr.task_ids(ptr), np.repeat(np.arange(len(sizes)), sizes))

    with pytest.raises(ValueError, match=r"task_ptr\[0\]"):
        mlr.validate_task_ptr(ptr + 1, n_rows + 1)
    with pytest.raises(ValueError, match=rf"task_ptr\[{ptr.size - 1}\]"):
        mlr.validate_task_ptr(ptr, n_rows + 1)
    if ptr.size >= 3:
        i = data.draw(st.integers(1, ptr.size - 2))
        bad = ptr.copy()
        bad[i] = ptr[i - 1] - 1  # decreasing at i (and possibly beyond)
        with pytest.raises(ValueError, match=rf"task_ptr\[{i}\] = "):
            mlr.validate_task_ptr(bad, n_rows)
    with pytest.raises(ValueError, match="integer"):
        mlr.validate_task_ptr(ptr.astype(float), n_rows)


@SETTINGS
@given(st.lists(st.integers(0, 30), min_size=1, max_size=10), st.integers(1, 6))
def test_split_groups_contiguous_and_balanced(sizes, n_groups):
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    short = [i for i, t in enumerate(sizes) if t < n_groups]
    if short:
        with pytest.raises(ValueError, match=rf"task {short[0]} has {sizes[short[0]]} rows"):
            mlr.split_groups(ptr, n_groups)
        return
    g = mlr.split_groups(ptr, n_groups)
    gp = group_ptr(ptr, n_groups)
    for i, t in enumerate(sizes):
        gi = g[ptr[i] : ptr[i + 1]]
        assert np.all(np.diff(gi) >= 0)  # contiguous
        counts = np.bincount(gi, minlength=n_groups)
        assert counts.size == n_groups
        assert counts.max() - counts.min() <= 1
        assert counts.sum() == t
        np.testing.assert_array_equal(np.diff(gp[i * n_groups : (i + 1) * n_groups + 1]), counts)


def test_range_sums_handle_empty_ranges():
    values = np.arange(10.0)[:, None]
    ptr = np.array([0, 0, 3, 3, 3, 10, 10])
    np.testing.assert_array_equal(mlr.range_sums(values, ptr)[:, 0], [0, 3, 0, 0, 42, 0])


def test_canonical_labels_numbered_by_first_task():
    np.testing.assert_array_equal(mlr.canonical_labels([7, 7, 2, 9, 2, 7]), [0, 0, 1, 2, 1, 0])


# -- chunk invariance (hypothesis) -----------------------------------------------
@SETTINGS
@given(ragged_case, st.data())
def test_chunk_invariance_of_sums_and_per_task_results(case, data):
    sizes, d, seed, _ = case
    rng = np.random.default_rng(seed)
    X, y, ptr = ragged(rng, sizes, d)
    n = len(sizes)
    s = data.draw(st.integers(0, n))
    k = 3
    W = rng.standard_normal((k, d))
    var = rng.uniform(0.5, 2.0, k)
    p = rng.dirichlet(np.ones(k))
    labels = rng.integers(0, k, n)
    U = np.linalg.qr(rng.standard_normal((d, d)))[0][:, : min(2, d)]
    parts = split_chunk(X, y, ptr, s)
    lab_parts = (labels[:s], labels[s:])
    close = dict(rtol=1e-12, atol=1e-12)

    # additive sums
    M, nt = mlr.subspace_moment_sum(X, y, ptr)
    Ms = [mlr.subspace_moment_sum(*c) for c in parts]
    np.testing.assert_allclose(Ms[0][0] + Ms[1][0], M, **close)
    assert Ms[0][1] + Ms[1][1] == nt == n

    full = mlr.cluster_sufficient_stats(X, y, ptr, labels, k)
    both = mlr.combine_stats(
        *[mlr.cluster_sufficient_stats(*c, lab, k) for c, lab in zip(parts, lab_parts, strict=True)]
    )
    for key in full:
        np.testing.assert_allclose(both[key], full[key], **close)

    sse, rows = mlr.cluster_residual_sums(X, y, ptr, labels, W)
    pieces = [
        mlr.cluster_residual_sums(*c, lab, W) for c, lab in zip(parts, lab_parts, strict=True)
    ]
    np.testing.assert_allclose(pieces[0][0] + pieces[1][0], sse, **close)
    np.testing.assert_array_equal(pieces[0][1] + pieces[1][1], rows)

    ts = mlr.task_stats(X, y, ptr)
    gamma = rng.dirichlet(np.ones(k), size=n)
    em_full = mlr.em_accumulate(ts, gamma)
    em_both = mlr.combine_stats(
        *[
            mlr.em_accumulate(mlr.task_stats(*c), g)
            for c, g in zip(parts, (gamma[:s], gamma[s:]), strict=True)
        ]
    )
    for key in em_full:
        np.testing.assert_allclose(em_both[key], em_full[key], **close)

    mom = mlr.moment_sums(X)
    mom_both = mlr.combine_stats(*[mlr.moment_sums(c[0]) for c in parts])
    for key in mom:
        np.testing.assert_allclose(mom_both[key], mom[key], **close)

    # per-task results: the concatenation over chunks equals the one-chunk result
    def cat(f):
        return np.concatenate([f(*c) for c in parts])

    np.testing.assert_allclose(
        cat(lambda *c: mlr.split_mean_estimates(*c, 2)), mlr.split_mean_estimates(X, y, ptr, 2)
    )
    np.testing.assert_allclose(
        cat(lambda *c: mlr.classification_log_likelihood(*c, W, var)),
        mlr.classification_log_likelihood(X, y, ptr, W, var),
        **close,
    )
    np.testing.assert_allclose(
        cat(lambda *c: mlr.posterior_log_probs(*c, W, var, p)),
        mlr.posterior_log_probs(X, y, ptr, W, var, p),
        **close,
    )
    np.testing.assert_allclose(
        cat(mlr.per_task_lstsq), mlr.per_task_lstsq(X, y, ptr), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(cat(lambda *c: mlr.task_stats(*c)["xtx"]), ts["xtx"], **close)
    a, c = mlr.projected_split_estimates(X, y, ptr, U, 1)
    ac = [mlr.projected_split_estimates(*ch, U, 1) for ch in parts]
    np.testing.assert_allclose(np.concatenate([ac[0][0], ac[1][0]]), a, **close)
    np.testing.assert_allclose(np.concatenate([ac[0][1], ac[1][1]]), c, **close)


# -- subspace (step 1) -------------------------------------------------------------
def test_split_mean_estimates_match_a_loop():
    rng = np.random.default_rng(1)
    sizes = [4, 7, 9, 5]
    X, y, ptr = ragged(rng, sizes, 3)
    B = mlr.split_mean_estimates(X, y, ptr, 3)
    for i, t in enumerate(sizes):
        Xi, yi = task_rows(X, y, ptr, i)
        for g, rows in enumerate(np.array_split(np.arange(t), 3)):
            np.testing.assert_allclose(B[i, g], (yi[rows, None] * Xi[rows]).mean(axis=0))


def test_subspace_moment_is_unbiased_for_sum_p_w_wT():
    d, k, n, t = 8, 4, 40000, 4
    W, s, _ = synth.mlr_components(3, d, k, kind="gaussian")
    p = np.array([0.1, 0.2, 0.3, 0.4])
    X, y, ptr, _ = synth.simulate_tasks(3, 0, n, t, W, s, p)
    M_sum, nt = mlr.subspace_moment_sum(X, y, ptr)
    M_hat = M_sum / nt
    # per-task contributions give the Monte-Carlo standard error of each entry
    B = mlr.split_mean_estimates(X, y, ptr, 2)
    per_task = 0.5 * (B[:, 0, :, None] * B[:, 1, None, :] + B[:, 1, :, None] * B[:, 0, None, :])
    np.testing.assert_allclose(per_task.mean(axis=0), M_hat, rtol=1e-10, atol=1e-12)
    se = per_task.std(axis=0, ddof=1) / np.sqrt(n)
    M_true = (W.T * p) @ W
    assert np.all(np.abs(M_hat - M_true) <= 5 * se)
    assert se.max() < 0.05 * np.abs(M_true).max()  # the check has teeth


def test_subspace_error_small_and_falling_with_n_times_t():
    d, k, t = 8, 4, 4
    W, s, p = synth.mlr_components(5, d, k)
    errors = []
    for n in (1000, 10000, 100000):
        e = []
        for rep in range(2):
            X, y, ptr, _ = synth.simulate_tasks([5, rep], 0, n, t, W, s, p)
            M_sum, nt = mlr.subspace_moment_sum(X, y, ptr)
            e.append(mlr.subspace_error(mlr.subspace_basis(M_sum / nt, k), W))
        errors.append(np.mean(e))
    # error ~ 1/sqrt(n t): each 10x step should cut it by ~3x, 100x by ~10x
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.3 * errors[0]
    assert errors[2] < 0.1


def test_subspace_basis_top_eigenvectors_with_sign_convention():
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    lam = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    M = (Q * lam) @ Q.T
    U, vals = mlr.subspace_basis(M, 3, return_eigenvalues=True)
    np.testing.assert_allclose(vals, lam[:3])
    np.testing.assert_allclose(U.T @ U, np.eye(3), atol=1e-12)
    for j in range(3):
        np.testing.assert_allclose(np.abs(U[:, j] @ Q[:, j]), 1.0, atol=1e-10)
        assert U[np.argmax(np.abs(U[:, j])), j] > 0
    U2 = mlr.subspace_basis(M.copy(), 3)
    np.testing.assert_array_equal(U, U2)
    with pytest.raises(ValueError, match="k must be"):
        mlr.subspace_basis(M, 7)


# -- heavy tasks (step 2) ------------------------------------------------------------
def test_pairwise_distance_block_matches_definition_in_any_block():
    rng = np.random.default_rng(4)
    a_i, c_i = rng.standard_normal((2, 7, 3, 2))
    a_j, c_j = rng.standard_normal((2, 5, 3, 2))
    H = mlr.pairwise_distance_block(a_i, c_i, a_j, c_j)
    ref = np.zeros((7, 5))
    for i in range(7):
        for j in range(5):
            ref[i, j] = np.median(
                [(a_i[i, l] - a_j[j, l]) @ (c_i[i, l] - c_j[j, l]) for l in range(3)]
            )
    np.testing.assert_allclose(H, ref, atol=1e-12)
    # an entry is the same number in any block; the full matrix is exactly symmetric
    np.testing.assert_array_equal(
        mlr.pairwise_distance_block(a_i[2:4], c_i[2:4], a_j[1:], c_j[1:]), H[2:4, 1:]
    )
    a, c = np.concatenate([a_i, a_j]), np.concatenate([c_i, c_j])
    Hd = mlr.pairwise_distance_block(a, c, a, c)
    np.testing.assert_array_equal(Hd, Hd.T)
    np.testing.assert_array_equal(np.diag(Hd), 0.0)
    np.testing.assert_array_equal(Hd[:7, 7:], H)
    # even L: mean of the two middle values
    H2 = mlr.pairwise_distance_block(a_i[:, :2], c_i[:, :2], a_j[:, :2], c_j[:, :2])
    ref2 = [
        [
            np.median([(a_i[i, l] - a_j[j, l]) @ (c_i[i, l] - c_j[j, l]) for l in range(2)])
            for j in range(5)
        ]
        for i in range(7)
    ]
    np.testing.assert_allclose(H2, ref2, atol=1e-12)


def test_pairwise_distance_is_unbiased_for_projected_squared_distance():
    rng = np.random.default_rng(6)
    d, k, t, R = 8, 4, 6, 2000
    U = np.linalg.qr(rng.standard_normal((d, k)))[0]
    beta_i, beta_j = rng.standard_normal((2, d)) / np.sqrt(d)
    X_i, y_i, ptr = ragged(rng, [t] * R, d, W=np.tile(beta_i, (R, 1)))
    X_j, y_j, _ = ragged(rng, [t] * R, d, W=np.tile(beta_j, (R, 1)))
    a_i, c_i = mlr.projected_split_estimates(X_i, y_i, ptr, U, 1)
    a_j, c_j = mlr.projected_split_estimates(X_j, y_j, ptr, U, 1)
    h = np.diag(mlr.pairwise_distance_block(a_i, c_i, a_j, c_j))  # R independent pairs
    truth = np.sum((U.T @ (beta_i - beta_j)) ** 2)
    se = h.std(ddof=1) / np.sqrt(R)
    assert abs(h.mean() - truth) <= 5 * se
    assert se < 0.5 * truth


@pytest.fixture(scope="module")
def heavy_setting():
    """d = 8, k = 4, s = 1, orthonormal components; U from light tasks; heavy tasks."""
    d, k = 8, 4
    W, s, p = synth.mlr_components(11, d, k)
    X, y, ptr, _ = synth.simulate_tasks([11, 1], 0, 20000, 4, W, s, p)
    M_sum, nt = mlr.subspace_moment_sum(X, y, ptr)
    U = mlr.subspace_basis(M_sum / nt, k)
    XH, yH, ptrH, hH = synth.simulate_tasks([11, 2], 0, 120, 1200, W, s, p)
    a, c = mlr.projected_split_estimates(XH, yH, ptrH, U, 3)
    H = mlr.pairwise_distance_block(a, c, a, c)
    return dict(W=W, s=s, p=p, U=U, X=XH, y=yH, ptr=ptrH, h=hH, a=a, c=c, H=H)


def test_exact_clustering_of_well_separated_heavy_tasks(heavy_setting):
    hs = heavy_setting
    truth = mlr.canonical_labels(hs["h"])
    Delta2 = 2.0  # orthonormal components: ‖w_h − w_h'‖² = 2
    np.testing.assert_array_equal(mlr.single_linkage_labels(hs["H"], n_clusters=4), truth)
    np.testing.assert_array_equal(mlr.single_linkage_labels(hs["H"], threshold=Delta2 / 2), truth)
    np.testing.assert_array_equal(mlr.average_linkage_labels(hs["H"], n_clusters=4), truth)


def test_initial_estimates_and_residual_variance(heavy_setting):
    hs = heavy_setting
    labels = mlr.single_linkage_labels(hs["H"], n_clusters=4)
    W0, p0 = mlr.initial_cluster_estimates(hs["a"], hs["c"], labels, hs["U"])
    # cluster ℓ ↔ component of its first task
    comp = hs["h"][[np.flatnonzero(labels == ell)[0] for ell in range(4)]]
    np.testing.assert_allclose(p0, np.bincount(labels) / labels.size)
    err = np.linalg.norm(W0 - hs["W"][comp], axis=1)
    assert err.max() < 0.1
    # the same ŵ from the task means computed directly
    for ell in range(4):
        members = np.flatnonzero(labels == ell)
        proj = np.mean([(hs["a"][i].sum(0) + hs["c"][i].sum(0)) / 6 for i in members], axis=0)
        np.testing.assert_allclose(W0[ell], hs["U"] @ proj, atol=1e-12)
    sse, rows = mlr.cluster_residual_sums(hs["X"], hs["y"], hs["ptr"], labels, W0)
    r2 = mlr.residual_variance(sse, rows)
    resid = hs["y"] - np.einsum("nd,nd->n", hs["X"], W0[labels[mlr.task_ids(hs["ptr"])]])
    for ell in range(4):
        m = labels[mlr.task_ids(hs["ptr"])] == ell
        np.testing.assert_allclose(r2[ell], np.mean(resid[m] ** 2))
    # noise plus estimation error: s² + ‖ŵ − w‖² up to sampling
    np.testing.assert_allclose(r2, 1.0 + err**2, rtol=0.05)


def _tiles(n, size):
    starts = list(range(0, n, size))
    return [(r0, c0) for i, r0 in enumerate(starts) for c0 in starts[i:]]


def _tree_merge(forests):
    while len(forests) > 1:
        forests = [
            mlr.merge_spanning_forests(*forests[i : i + 2]) for i in range(0, len(forests), 2)
        ]
    return forests[0]


@SETTINGS
@given(st.integers(2, 40), st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_tilewise_single_linkage_equals_scipy(n, tile, seed):
    rng = np.random.default_rng(seed)
    pts = rng.standard_normal((n, 2))
    H = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2)
    forests = [
        mlr.tile_spanning_forest(H[r0 : r0 + tile, c0 : c0 + tile], r0, c0)
        for r0, c0 in _tiles(n, tile)
    ]
    edges, weights = _tree_merge(forests)
    assert edges.shape == (n - 1, 2)
    # the union of per-tile forests contains the MST: same total weight as SciPy's MST
    np.testing.assert_allclose(weights.sum(), minimum_spanning_tree(np.triu(H, 1)).sum())
    Z = linkage(H[np.triu_indices(n, 1)], method="single")
    for nc in range(1, min(5, n) + 1):
        ref = mlr.canonical_labels(fcluster(Z, nc, criterion="maxclust"))
        got = mlr.spanning_forest_labels(n, edges, weights, n_clusters=nc)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(mlr.single_linkage_labels(H, n_clusters=nc), ref)
    thr = float(np.median(weights))
    ref = mlr.canonical_labels(fcluster(Z, thr, criterion="distance"))
    np.testing.assert_array_equal(mlr.spanning_forest_labels(n, edges, weights, threshold=thr), ref)
    np.testing.assert_array_equal(mlr.single_linkage_labels(H, threshold=thr), ref)
    # negative estimates: a constant shift leaves single linkage unchanged
    shifted = H - thr
    e2, w2 = _tree_merge(
        [
            mlr.tile_spanning_forest(shifted[r0 : r0 + tile, c0 : c0 + tile], r0, c0)
            for r0, c0 in _tiles(n, tile)
        ]
    )
    np.testing.assert_array_equal(e2, edges)
    np.testing.assert_array_equal(
        mlr.spanning_forest_labels(n, e2, w2, threshold=0.0),
        mlr.spanning_forest_labels(n, edges, weights, threshold=thr),
    )
    np.testing.assert_array_equal(
        mlr.single_linkage_labels(shifted, n_clusters=min(3, n)),
        mlr.single_linkage_labels(H, n_clusters=min(3, n)),
    )


@SETTINGS
@given(st.integers(1, 25), st.data())
def test_tile_spanning_forest_of_any_rectangle_equals_kruskal_on_its_edges(n, data):
    """Prim on a tile (any position, overlapping the diagonal or not) vs Kruskal on its edges."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    H = rng.integers(-3, 4, (n, n)).astype(float)  # few values: many ties
    H = H + H.T
    r0 = data.draw(st.integers(0, n - 1))
    c0 = data.draw(st.integers(0, n - 1))
    n_i = data.draw(st.integers(1, n - r0))
    n_j = data.draw(st.integers(1, n - c0))
    edges, weights = mlr.tile_spanning_forest(H[r0 : r0 + n_i, c0 : c0 + n_j], r0, c0)
    gi, gj = np.meshgrid(np.arange(r0, r0 + n_i), np.arange(c0, c0 + n_j), indexing="ij")
    upper = gi < gj
    ref_e, ref_w = mlr.minimum_spanning_forest(
        np.stack([gi[upper], gj[upper]], axis=1), H[gi[upper], gj[upper]]
    )
    np.testing.assert_array_equal(edges, ref_e)
    np.testing.assert_array_equal(weights, ref_w)
    # tiles from different row and column partitions (not aligned with the diagonal),
    # merged in random order, give the forest of the whole matrix
    row_cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n, 2)]))
    col_cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n, 3)]))
    tiles = [
        mlr.tile_spanning_forest(H[a:b, c:e], a, c)
        for a, b in zip(row_cuts[:-1], row_cuts[1:], strict=True)
        for c, e in zip(col_cuts[:-1], col_cuts[1:], strict=True)
    ]
    forest = mlr.merge_spanning_forests(*[tiles[i] for i in rng.permutation(len(tiles))])
    full = mlr.tile_spanning_forest(H, 0, 0)
    np.testing.assert_array_equal(forest[0], full[0])
    np.testing.assert_array_equal(forest[1], full[1])


def test_average_linkage_with_negative_entries_is_shift_invariant():
    rng = np.random.default_rng(8)
    pts = rng.standard_normal((30, 3))
    H = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2)
    Z = linkage(H[np.triu_indices(30, 1)], method="average")
    for nc in (2, 4, 7):
        ref = mlr.canonical_labels(fcluster(Z, nc, criterion="maxclust"))
        np.testing.assert_array_equal(mlr.average_linkage_labels(H - 3.0, n_clusters=nc), ref)
    np.testing.assert_allclose(mlr.hierarchical_linkage(H - 3.0, "average")[:, 2], Z[:, 2] - 3.0)


def test_spanning_forest_refuses_missing_tiles_and_bad_cuts():
    H = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 2.0], [5.0, 2.0, 0.0]])
    e, w = mlr.tile_spanning_forest(H[:1, :2], 0, 0)  # only edge (0, 1)
    with pytest.raises(ValueError, match="components"):
        mlr.spanning_forest_labels(3, e, w, n_clusters=1)
    with pytest.raises(ValueError, match="exactly one"):
        mlr.single_linkage_labels(H)
    with pytest.raises(ValueError, match="exactly one"):
        mlr.single_linkage_labels(H, n_clusters=2, threshold=1.0)
    np.testing.assert_array_equal(mlr.single_linkage_labels(H, n_clusters=2), [0, 0, 1])


# -- classification (step 4) -------------------------------------------------------
def test_classification_log_likelihood_is_the_gaussian_form():
    rng = np.random.default_rng(9)
    X, y, ptr = ragged(rng, [3, 5, 1, 4], 3)
    W = rng.standard_normal((2, 3))
    r2 = np.array([0.7, 1.6])
    ll = mlr.classification_log_likelihood(X, y, ptr, W, r2)
    t = np.diff(ptr)
    ref = gaussian_loglik(X, y, ptr, W, r2) + 0.5 * t[:, None] * np.log(2 * np.pi)
    np.testing.assert_allclose(ll, ref, rtol=1e-12)


def test_classification_accuracy_high_for_large_t():
    W, s, p = synth.mlr_components(12, 8, 4)
    acc = {}
    for t in (2, 40):
        X, y, ptr, h = synth.simulate_tasks([12, t], 0, 2000, t, W, s, p)
        labels = mlr.classify(mlr.classification_log_likelihood(X, y, ptr, W, s**2))
        acc[t] = np.mean(labels == h)
    assert acc[40] >= 0.995
    assert acc[2] < 0.9  # the test can tell a weak classifier from a strong one


# -- refinement (step 5) -------------------------------------------------------------
def test_refinement_equals_lstsq_on_pooled_rows():
    rng = np.random.default_rng(13)
    d, k = 4, 3
    sizes = rng.integers(1, 9, 60)
    X, y, ptr = ragged(rng, sizes, d)
    labels = rng.integers(0, k, sizes.size)
    parts = split_chunk(X, y, ptr, 25)
    stats = mlr.combine_stats(
        mlr.cluster_sufficient_stats(*parts[0], labels[:25], k),
        mlr.cluster_sufficient_stats(*parts[1], labels[25:], k),
    )
    n_total = sizes.size + 5  # five tasks of D_L2 left unassigned
    W, s2, p = mlr.refine_from_stats(stats, n_total)
    row_lab = labels[mlr.task_ids(ptr)]
    for ell in range(k):
        m = row_lab == ell
        w_ref, rss, _, _ = np.linalg.lstsq(X[m], y[m], rcond=None)
        np.testing.assert_allclose(W[ell], w_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(s2[ell], rss[0] / (m.sum() - d), rtol=1e-9)
        assert p[ell] == np.sum(labels == ell) / n_total


def test_refinement_refuses_small_or_singular_clusters():
    rng = np.random.default_rng(14)
    X, y, ptr = ragged(rng, [3, 3, 20], 4)
    stats = mlr.cluster_sufficient_stats(X, y, ptr, np.array([0, 0, 1]), 2)
    with pytest.raises(ValueError, match="cluster 0 has 3 rows"):
        mlr.refine_from_stats(mlr.cluster_sufficient_stats(X, y, ptr, [0, 1, 1], 2), 3)
    assert mlr.refine_from_stats(stats, 3)[0].shape == (2, 4)
    X[:, 3] = X[:, 2]  # collinear features
    stats = mlr.cluster_sufficient_stats(X, y, ptr, np.array([0, 0, 1]), 2)
    with pytest.raises(SingularMatrixError, match="cluster 0"):
        mlr.refine_from_stats(stats, 3)
    with pytest.raises(ValueError, match=r"labels\[1\] = 5"):
        mlr.cluster_sufficient_stats(X, y, ptr, np.array([0, 5, 1]), 2)


# -- prediction (step 6) ---------------------------------------------------------------
def test_posterior_normalised_and_estimators():
    rng = np.random.default_rng(15)
    X, y, ptr = ragged(rng, [2, 6, 0, 1, 9], 3)
    W = rng.standard_normal((3, 3))
    s2 = np.array([0.5, 1.0, 2.0])
    p = np.array([0.2, 0.5, 0.3])
    logP = mlr.posterior_log_probs(X, y, ptr, W, s2, p)
    P = np.exp(logP)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    ref = gaussian_loglik(X, y, ptr, W, s2) + np.log(p)
    ref = np.exp(ref - scipy.special.logsumexp(ref, axis=1, keepdims=True))
    np.testing.assert_allclose(P, ref, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(P[2], p)  # a task without rows keeps the prior
    np.testing.assert_allclose(mlr.predict_coef(P, W, "bayes"), P @ W)
    np.testing.assert_array_equal(mlr.predict_coef(P, W, "map"), W[np.argmax(ref, axis=1)])
    with pytest.raises(ValueError, match="estimator"):
        mlr.predict_coef(P, W, "mean")
    with pytest.raises(ValueError, match="sums to"):
        mlr.predict_coef(2 * P, W)


def test_per_task_lstsq_equals_numpy_lstsq_per_task():
    rng = np.random.default_rng(16)
    d = 5
    sizes = [0, 1, 3, 5, 6, 11, 12, 30, 4]
    X, y, ptr = ragged(rng, sizes, d)
    X[ptr[6] : ptr[7], 4] = X[ptr[6] : ptr[7], 3]  # a rank-deficient task
    coef = mlr.per_task_lstsq(X, y, ptr)
    for i, t in enumerate(sizes):
        if t == 0:
            np.testing.assert_array_equal(coef[i], 0.0)
            continue
        Xi, yi = task_rows(X, y, ptr, i)
        np.testing.assert_allclose(coef[i], np.linalg.lstsq(Xi, yi, rcond=None)[0], atol=1e-10)


# -- EM baseline ---------------------------------------------------------------------
def test_em_e_step_matches_brute_force():
    rng = np.random.default_rng(17)
    X, y, ptr = ragged(rng, [3, 5, 2, 8], 3)
    W = rng.standard_normal((2, 3))
    s2 = np.array([0.8, 1.5])
    p = np.array([0.3, 0.7])
    gamma, loglik = mlr.em_e_step(mlr.task_stats(X, y, ptr), W, s2, p)
    ref = gaussian_loglik(X, y, ptr, W, s2) + np.log(p)
    lse = scipy.special.logsumexp(ref, axis=1)
    np.testing.assert_allclose(gamma, np.exp(ref - lse[:, None]), rtol=1e-9)
    np.testing.assert_allclose(loglik, lse.sum(), rtol=1e-10)


def test_em_m_step_equals_weighted_lstsq():
    rng = np.random.default_rng(18)
    d, k = 3, 2
    sizes = rng.integers(1, 7, 40)
    X, y, ptr = ragged(rng, sizes, d)
    gamma = rng.dirichlet(np.ones(k), size=sizes.size)
    parts = split_chunk(X, y, ptr, 17)
    sums = mlr.combine_stats(
        mlr.em_accumulate(mlr.task_stats(*parts[0]), gamma[:17]),
        mlr.em_accumulate(mlr.task_stats(*parts[1]), gamma[17:]),
    )
    W, s2, p = mlr.em_m_step(sums)
    tid = mlr.task_ids(ptr)
    for ell in range(k):
        sw = np.sqrt(gamma[tid, ell])
        w_ref = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)[0]
        np.testing.assert_allclose(W[ell], w_ref, rtol=1e-10)
        rss = np.sum(gamma[tid, ell] * (y - X @ w_ref) ** 2)
        np.testing.assert_allclose(s2[ell], rss / np.sum(gamma[:, ell] * sizes), rtol=1e-9)
    np.testing.assert_allclose(p, gamma.mean(axis=0))


def test_em_from_the_truth_stays_at_the_truth():
    W_true, s_true, p_true = synth.mlr_components(19, 8, 4)
    X, y, ptr, _ = synth.simulate_tasks(19, 0, 4000, 20, W_true, s_true, p_true)
    ts = mlr.task_stats(X, y, ptr)
    W, s2, p = W_true, s_true**2, p_true
    history = []
    logliks = []
    for _ in range(12):
        gamma, ll = mlr.em_e_step(ts, W, s2, p)
        W, s2, p = mlr.em_m_step(mlr.em_accumulate(ts, gamma))
        history.append((W, s2, p))
        logliks.append(ll)
    W1, s21, p1 = history[0]
    # one step from the truth lands within sampling error of it (20000 rows per component)
    assert np.linalg.norm(W1 - W_true, axis=1).max() < 0.05
    np.testing.assert_allclose(s21, 1.0, atol=0.05)
    np.testing.assert_allclose(p1, 0.25, atol=0.04)
    # ... and stays there: a fixed point
    assert np.abs(history[-1][0] - W1).max() < 1e-3
    assert np.all(np.diff(logliks) >= -1e-8 * abs(logliks[0]))


def test_em_init_perturbed_and_simplex_projection():
    W, s, p = synth.mlr_components(20, 8, 4)
    W0, s0, p0 = mlr.em_init_perturbed(0, W, s, p, 0.0)
    np.testing.assert_array_equal(W0, W)
    np.testing.assert_array_equal(s0, s)
    np.testing.assert_allclose(p0, p)
    W1, s1, p1 = mlr.em_init_perturbed(np.random.default_rng(3), W, s, p, 2.0)
    W2, _, _ = mlr.em_init_perturbed(np.random.default_rng(3), W, s, p, 2.0)
    np.testing.assert_array_equal(W1, W2)
    assert np.all(s1 > 0) and np.all(p1 >= 0.01 / 4 - 1e-15)
    np.testing.assert_allclose(p1.sum(), 1.0)
    np.testing.assert_allclose(mlr.project_to_simplex([0.5, 0.5, 3.0]), [0, 0, 1])
    q = mlr.project_to_simplex(np.array([0.4, 0.2, 0.2]))
    np.testing.assert_allclose(q, [0.4 + 0.2 / 3, 0.2 + 0.2 / 3, 0.2 + 0.2 / 3])


# -- Algorithm 1 end to end: in memory, and chunked as the pipeline does it ------------
def test_meta_learn_recovers_parameters_and_chunked_run_agrees():
    d, k = 8, 4
    W_true, s_true, p_true = synth.mlr_components(31, d, k)
    light1 = synth.simulate_tasks([31, 1], 0, 20000, 4, W_true, s_true, p_true)[:3]
    heavy = synth.simulate_tasks([31, 2], 0, 100, 1200, W_true, s_true, p_true)
    light2 = synth.simulate_tasks([31, 3], 0, 3000, 30, W_true, s_true, p_true)
    out = mlr.meta_learn(light1, heavy[:3], light2[:3], k, n_splits=3)
    comp = heavy[3][[np.flatnonzero(out["heavy_cluster"] == ell)[0] for ell in range(k)]]
    np.testing.assert_array_equal(out["heavy_cluster"], mlr.canonical_labels(heavy[3]))
    assert np.mean(comp[out["light_cluster"]] == light2[3]) > 0.99
    assert np.linalg.norm(out["coef"] - W_true[comp], axis=1).max() < 0.05
    np.testing.assert_allclose(out["noise_var"], s_true[comp] ** 2, atol=0.06)
    np.testing.assert_allclose(out["weight"], p_true[comp], atol=0.04)

    # the same steps over chunks of tasks, heavy distances as tiles + spanning forests
    def chunks(data, n_chunks):
        X, y, ptr = data[:3]
        cuts = np.linspace(0, ptr.size - 1, n_chunks + 1).astype(int)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            yield X[ptr[a] : ptr[b]], y[ptr[a] : ptr[b]], ptr[a : b + 1] - ptr[a]

    sums = [mlr.subspace_moment_sum(*c) for c in chunks(light1, 3)]
    U = mlr.subspace_basis(sum(m for m, _ in sums) / sum(n for _, n in sums), k)
    np.testing.assert_allclose(U, out["basis"], atol=1e-10)
    ac = [mlr.projected_split_estimates(*c, U, 3) for c in chunks(heavy, 2)]
    a = np.concatenate([x[0] for x in ac])
    c = np.concatenate([x[1] for x in ac])
    forests = [
        mlr.tile_spanning_forest(
            mlr.pairwise_distance_block(
                a[r0 : r0 + 40], c[r0 : r0 + 40], a[c0 : c0 + 40], c[c0 : c0 + 40]
            ),
            r0,
            c0,
        )
        for r0, c0 in _tiles(a.shape[0], 40)
    ]
    heavy_cluster = mlr.spanning_forest_labels(
        a.shape[0], *mlr.merge_spanning_forests(*forests), n_clusters=k
    )
    np.testing.assert_array_equal(heavy_cluster, out["heavy_cluster"])
    W0, _ = mlr.initial_cluster_estimates(a, c, heavy_cluster, U, k)
    off = np.concatenate([[0], np.cumsum([x[0].shape[0] for x in ac])])
    res = [
        mlr.cluster_residual_sums(*ch, heavy_cluster[off[i] : off[i + 1]], W0)
        for i, ch in enumerate(chunks(heavy, 2))
    ]
    r2 = mlr.residual_variance(sum(r[0] for r in res), sum(r[1] for r in res))
    np.testing.assert_allclose(r2, out["initial_r2"], rtol=1e-12)
    light_cluster = np.concatenate(
        [mlr.classify(mlr.classification_log_likelihood(*ch, W0, r2)) for ch in chunks(light2, 4)]
    )
    np.testing.assert_array_equal(light_cluster, out["light_cluster"])
    ends = np.linspace(0, 3000, 5).astype(int)
    stats = mlr.combine_stats(
        *[
            mlr.cluster_sufficient_stats(*ch, light_cluster[ends[i] : ends[i + 1]], k)
            for i, ch in enumerate(chunks(light2, 4))
        ]
    )
    W, s2, p = mlr.refine_from_stats(stats, 3000)
    np.testing.assert_allclose(W, out["coef"], rtol=1e-10)
    np.testing.assert_allclose(s2, out["noise_var"], rtol=1e-9)
    np.testing.assert_array_equal(p, out["weight"])


# -- whitening -----------------------------------------------------------------------
@pytest.mark.parametrize("center", [True, False])
def test_whitening_round_trip(center):
    rng = np.random.default_rng(21)
    d, n = 4, 5000
    A = rng.standard_normal((d, d))
    mu = np.array([1.0, -2.0, 0.5, 3.0])
    X = rng.standard_normal((n, d)) @ A + mu
    w_raw = rng.standard_normal(d)
    b_raw = 0.7 if center else 0.0
    y = X @ w_raw + b_raw
    sums = mlr.combine_stats(mlr.moment_sums(X[:1234]), mlr.moment_sums(X[1234:]))
    mean, T = mlr.whitening_from_moments(sums, center=center)
    Z = mlr.whiten(X, mean, T)
    second = Z.T @ Z / n if not center else np.cov(Z.T, bias=True)
    np.testing.assert_allclose(second, np.eye(d), atol=1e-10)
    if center:
        np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-10)
        design = np.column_stack([Z, np.ones(n)])
        sol = np.linalg.lstsq(design, y, rcond=None)[0]
        w_z, c = sol[:d], sol[d]
    else:
        w_z = np.linalg.lstsq(Z, y, rcond=None)[0]
        c = 0.0
    w_back = mlr.unwhiten_coef(w_z, T)
    np.testing.assert_allclose(w_back, w_raw, rtol=1e-9)
    np.testing.assert_allclose(c + mlr.unwhiten_intercept(w_back, mean), b_raw, atol=1e-9)
    np.testing.assert_allclose(mlr.whiten_coef(w_back, T), w_z, rtol=1e-9)
    # rows of coefficients (k, d) map the same way
    Wz = np.stack([w_z, 2 * w_z])
    np.testing.assert_allclose(mlr.unwhiten_coef(Wz, T), np.stack([w_raw, 2 * w_raw]), rtol=1e-9)


def test_whitening_refuses_singular_covariance():
    rng = np.random.default_rng(22)
    X = rng.standard_normal((100, 3))
    X[:, 2] = 5.0  # constant feature: zero variance once centred
    with pytest.raises(SingularMatrixError, match="feature 2"):
        mlr.whitening_from_moments(mlr.moment_sums(X), center=True)
    mlr.whitening_from_moments(mlr.moment_sums(X), center=False)  # second moment is fine


# -- generator -----------------------------------------------------------------------
@SETTINGS
@given(
    st.integers(0, 30),
    st.integers(0, 25),
    st.integers(0, 25),
    st.integers(1, 5),
    st.integers(0, 2**31 - 1),
)
def test_generator_chunk_invariance(first, n, cut, per_block, seed):
    cut = min(cut, n)
    W, s, p = synth.mlr_components(seed, 3, 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(synth, "_MAX_TASKS_PER_DRAW", per_block)  # many draws per chunk
        whole = synth.simulate_tasks(seed, first, n, 3, W, s, p)
        a = synth.simulate_tasks(seed, first, cut, 3, W, s, p)
        b = synth.simulate_tasks(seed, first + cut, n - cut, 3, W, s, p)
    np.testing.assert_array_equal(np.concatenate([a[0], b[0]]), whole[0])
    np.testing.assert_array_equal(np.concatenate([a[1], b[1]]), whole[1])
    np.testing.assert_array_equal(np.concatenate([a[3], b[3]]), whole[3])
    np.testing.assert_array_equal(whole[2], np.arange(n + 1) * 3)
    np.testing.assert_array_equal(a[2], np.arange(cut + 1) * 3)
    assert whole[0].shape == (n * 3, 3) and whole[3].shape == (n,)


def test_generator_distribution():
    W, s, p = synth.mlr_components(23, 6, 3, noise=[0.5, 1.0, 2.0], weights=[0.2, 0.3, 0.5])
    n, t = 6000, 5
    X, y, ptr, h = synth.simulate_tasks(23, 0, n, t, W, s, p)
    freq = np.bincount(h, minlength=3) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    resid = y - np.einsum("nd,nd->n", X, W[np.repeat(h, t)])
    for ell in range(3):
        r = resid[np.repeat(h, t) == ell]
        # variance of a sample variance of normals: 2σ⁴/m
        assert abs(r.var() - s[ell] ** 2) <= 5 * np.sqrt(2 / r.size) * s[ell] ** 2
    assert np.abs(X.mean(axis=0)).max() < 5 / np.sqrt(X.shape[0])


def test_mlr_components_kinds_and_separation():
    W, s, p = synth.mlr_components(1, 8, 4)
    np.testing.assert_allclose(W @ W.T, np.eye(4), atol=1e-12)
    np.testing.assert_array_equal(W, synth.mlr_components(1, 8, 4)[0])
    assert not np.array_equal(W, synth.mlr_components(2, 8, 4)[0])
    np.testing.assert_allclose(p, 0.25)
    np.testing.assert_allclose(s, 1.0)
    Wg, _, _ = synth.mlr_components(1, 8, 4, kind="gaussian", separation=3.0)
    dist = np.linalg.norm(Wg[:, None] - Wg[None], axis=2)[np.triu_indices(4, 1)]
    np.testing.assert_allclose(dist.min(), 3.0)
    with pytest.raises(ValueError, match="k <= d"):
        synth.mlr_components(1, 3, 4)
    with pytest.raises(ValueError, match="sum to 1"):
        synth.mlr_components(1, 8, 2, weights=[0.5, 0.6])


# -- input validation ----------------------------------------------------------------
def test_bad_inputs_are_refused_by_name():
    rng = np.random.default_rng(24)
    X, y, ptr = ragged(rng, [3, 4], 2)
    Xn = X.copy()
    Xn[5, 1] = np.nan
    with pytest.raises(ValueError, match="X has a non-finite value .* row 5, column 1"):
        mlr.subspace_moment_sum(Xn, y, ptr)
    with pytest.raises(ValueError, match="y must have one value per row"):
        mlr.task_stats(X, y[:-1], ptr)
    with pytest.raises(ValueError, match="task 0 has 3 rows"):
        mlr.projected_split_estimates(X, y, ptr, np.eye(2), 2)
    with pytest.raises(ValueError, match="W must be"):
        mlr.classification_log_likelihood(X, y, ptr, np.ones((2, 3)), [1.0, 1.0])
    with pytest.raises(ValueError, match=r"r2\[1\]"):
        mlr.classification_log_likelihood(X, y, ptr, np.ones((2, 2)), [1.0, 0.0])
    with pytest.raises(ValueError, match="p must sum to 1"):
        mlr.posterior_log_probs(X, y, ptr, np.ones((2, 2)), [1.0, 1.0], [0.5, 0.6])
    with pytest.raises(ValueError, match="cluster 1 has no heavy task"):
        mlr.initial_cluster_estimates(np.ones((2, 1, 2)), np.ones((2, 1, 2)), [0, 0], np.eye(2), 2)
