"""The compiled two-stack queue of rolling windows (Givens rotations, suffix factors kept
at marks and rebuilt a block at a time, windows taken in batches) against the queue of
LAPACK QR calls it replaced and against a batch QR and lstsq of each window's rows; the
rank decision's bound against the SVD of has_full_column_rank."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamlsq.kernels.inference import rolling
from streamlsq.kernels.inference.rolling import rolling_fit, sliding_factors, window_ends
from streamlsq.kernels.linalg import has_full_column_rank

EPS = np.finfo(float).eps


def _lapack_factor(rows: np.ndarray, p: int) -> np.ndarray:
    R = np.zeros((p, p))
    if len(rows):
        r = sla.qr(rows, mode="r", check_finite=False)[0]
        R[:min(len(rows), p)] = r[:p]
    return R


def lapack_sliding_factors(M, starts, ends):
    """The queue as it was: every factor a LAPACK QR of stacked rows and factors (the
    appended rows into the back factor, the front's suffix factors backwards, and each
    window's merge)."""
    p = M.shape[1]
    front, mid, hi, back = {}, 0, 0, np.zeros((p, p))
    for j, (s, e) in enumerate(zip(starts, ends, strict=True)):
        if e > hi:
            back, hi = _lapack_factor(np.vstack([back, M[hi:e]]), p), e
        if s >= mid:
            front, suffix, stop = {}, np.zeros((p, p)), e
            for t in sorted({int(x) for x in starts[j:] if s <= x < e}, reverse=True):
                suffix = _lapack_factor(np.vstack([M[t:stop], suffix]), p)
                front[t], stop = suffix, t
            mid, back = e, np.zeros((p, p))
        yield _lapack_factor(np.vstack([front[int(s)], back]), p) if s < mid else back


def _signed(R: np.ndarray) -> np.ndarray:
    """R with rows scaled to a non-negative diagonal (the QR factor's one freedom)."""
    sign = np.where(np.diagonal(R, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
    return R * sign[..., :, None]


def _windows(n, window, step, min_nobs, expanding):
    ends = window_ends(n, window, min_nobs, step, expanding)
    return np.maximum(ends - window, 0), ends


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 90), p=st.integers(1, 5), window=st.integers(1, 60),
       step=st.integers(1, 7), min_nobs=st.integers(0, 8), expanding=st.booleans(),
       batch=st.sampled_from([1, 2, 5, 4096]), seed=st.integers(0, 2**16))
def test_the_compiled_queue_gives_the_factors_of_the_lapack_queue_and_of_a_batch_qr(
        n, p, window, step, min_nobs, expanding, batch, seed):
    """Every window's factor (any window, step, min_nobs, expanding or not, windows taken
    1, 2, 5 or 4,096 at a time) is the factor of its rows: RᵀR = MᵀM to rounding, and,
    where the rows determine it (p independent rows), the factor of a batch QR and of the
    LAPACK queue, row signs aside."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, p)) * rng.uniform(0.1, 10.0, p)
    M[rng.random(M.shape) < 0.2] = 0.0  # zeros: rows that skip rotations
    starts, ends = _windows(n, window, step, min_nobs, expanding)
    mp = pytest.MonkeyPatch()
    mp.setattr(rolling, "WINDOW_BATCH", batch)
    try:
        ours = list(sliding_factors(M, starts, ends))
    finally:
        mp.undo()
    theirs = list(lapack_sliding_factors(M, starts, ends))
    assert len(ours) == len(theirs) == len(ends)
    for R, L, s, e in zip(ours, theirs, starts, ends, strict=True):
        rows = M[s:e]
        scale = max(float((rows * rows).sum()), 1e-300)
        assert np.all(np.diag(R) >= 0) and np.allclose(R, np.triu(R), rtol=0, atol=0)
        assert np.abs(R.T @ R - rows.T @ rows).max() <= 1e2 * p * EPS * scale
        if e - s >= p and np.linalg.matrix_rank(rows) == p:
            batch_R = _lapack_factor(rows, p)
            tol = 1e3 * EPS * np.linalg.cond(rows) * np.abs(batch_R).max()
            np.testing.assert_allclose(R, _signed(batch_R), rtol=0, atol=tol)
            np.testing.assert_allclose(R, _signed(L), rtol=0, atol=tol)


@pytest.mark.parametrize("window", [1, 3, 50, 400, 1_000])
def test_long_windows_rebuild_their_suffix_factors_block_by_block(window):
    """Windows of 1 … 1,000 rows sliding one row at a time over 2,500 rows: the fronts of
    up to 1,000 starts are kept as marks and rebuilt in blocks of ⌈√1000⌉ = 32; every
    factor that of a batch QR of its rows, and the queue's memory 2√D factors."""
    rng = np.random.default_rng(window)
    M = rng.standard_normal((2_500, 4))
    starts, ends = _windows(2_500, window, 1, 4, False)
    queue = rolling._Queue(M, starts, ends)
    assert len(queue.block) == int(np.ceil(np.sqrt(min(window, len(ends)))))
    assert len(queue.marks) <= len(queue.block) + 2
    ours = np.concatenate([queue.factors(a, min(a + 700, len(ends)))
                           for a in range(0, len(ends), 700)])
    for j in range(0, len(ends), max(1, len(ends) // 97)):
        rows = M[starts[j]:ends[j]]
        np.testing.assert_allclose(ours[j], _signed(_lapack_factor(rows, 4)), rtol=0,
                                   atol=1e3 * EPS * np.linalg.cond(rows) * np.sqrt(window))


def _lapack_rolling_statistics(M, starts, ends, k):
    """coef and bse of each window as the module computed them before: the LAPACK queue's
    factors, batched LU solves of R against z and against I."""
    F = np.stack(list(lapack_sliding_factors(M, starts, ends)))
    Rx, z, S = F[:, :k, :k], F[:, :k, k:], F[:, k:, k:]
    coef = np.linalg.solve(Rx, z)
    T = np.linalg.solve(Rx, np.broadcast_to(np.eye(k), Rx.shape))
    n = (ends - starts).astype(float)[:, None]
    scale = np.einsum("mij,mij->mj", S, S) / (n - k)
    return coef, np.sqrt(scale[:, None, :] * np.einsum("mij,mij->mi", T, T)[:, :, None])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(10, 150), k=st.integers(1, 5), K=st.integers(1, 2),
       window=st.integers(6, 80), step=st.integers(1, 9), expanding=st.booleans(),
       seed=st.integers(0, 2**16))
@example(n=101, k=1, K=2, window=62, step=1, expanding=False, seed=1022)  # a mean near 0
def test_rolling_fit_equals_the_lapack_path_and_a_batch_lstsq_of_every_window(
        n, k, K, window, step, expanding, seed):
    """Each window's coefficients and standard errors as the LAPACK queue with LU solves
    gave them (to rounding), its coefficients within 1e3·ε·κ·(‖b‖ + κ‖r‖/‖X‖) of a batch
    lstsq of its rows, and a window recorded exactly when it has more rows than
    coefficients."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, k - 1))
                         * np.logspace(0, 3, k - 1)])
    Y = X @ rng.standard_normal((k, K)) + rng.standard_normal((n, K))
    fit = rolling_fit(X, Y, window, step=step, expanding=expanding, min_nobs=k + 1)
    ends = fit["ends"]
    starts = np.maximum(ends - window, 0)
    assert np.array_equal(ends, window_ends(n, window, k + 1, step, expanding))
    if not len(ends):
        return
    coef, bse = _lapack_rolling_statistics(np.hstack([X, Y]), starts, ends, k)
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        sv = np.linalg.svd(X[s:e], compute_uv=False)
        kappa = sv[0] / sv[-1]
        bound = 1e3 * EPS * kappa
        batch = np.linalg.lstsq(X[s:e], Y[s:e], rcond=None)[0]
        assert np.isfinite(fit["params"][i]).all()
        # a backward-stable solve's forward error: ε·κ·(‖b‖ + κ‖r‖/‖X‖), ‖X‖ = σ_max;
        # the residual's term counts where b is small beside the rows (a mean near 0)
        residual = np.linalg.norm(Y[s:e] - X[s:e] @ batch, axis=0)
        scale = np.abs(batch).max(axis=0) + residual / sv[-1]
        assert (np.abs(fit["params"][i] - batch).max(axis=0) <= bound * scale).all()
        assert (np.abs(fit["params"][i] - coef[i]).max(axis=0) <= bound * scale).all()
        np.testing.assert_allclose(fit["bse"][i], bse[i], rtol=max(bound, 1e-10))
        assert (fit["nobs"][i] == e - s).all()


def test_windows_in_batches_give_the_numbers_of_one_batch(monkeypatch):
    """The queue's state carried from batch to batch: windows of 150 rows every 2 rows,
    1, 7 or all windows a batch, the same numbers to the last bit; and with weights."""
    rng = np.random.default_rng(3)
    n = 1_200
    X = np.column_stack([np.ones(n), rng.standard_normal((n, 3))])
    y = X @ [1.0, 2.0, -1.0, 0.5] + rng.standard_normal(n)
    w = rng.uniform(0.5, 2.0, n)
    w[rng.choice(n, 100, replace=False)] = 0.0
    whole = rolling_fit(X, y, 150, step=2, weights=w)
    for batch in (1, 7):
        monkeypatch.setattr(rolling, "WINDOW_BATCH", batch)
        part = rolling_fit(X, y, 150, step=2, weights=w)
        for name in rolling.ROLLING_STATISTICS:
            np.testing.assert_array_equal(part[name], whole[name], err_msg=name)
    # weighted: each window as a batch WLS (lstsq of the rows scaled by √w)
    root = np.sqrt(w)
    for i in (0, 100, len(whole["ends"]) - 1):
        e = whole["ends"][i]
        batch = np.linalg.lstsq(X[e - 150:e] * root[e - 150:e, None],
                                y[e - 150:e] * root[e - 150:e], rcond=None)[0]
        np.testing.assert_allclose(whole["params"][i, :, 0], batch, rtol=1e-11, atol=1e-12)
        assert whole["nobs"][i, 0] == (w[e - 150:e] > 0).sum()


def test_the_rank_bound_decides_as_the_svd_of_has_full_column_rank():
    """_full_column_rank on stacks of factors (well and ill conditioned, scaled, aliased,
    zero and non-finite columns, few and many rows): the decision of
    has_full_column_rank on every one, and its SVD skipped where the bound settles it."""
    rng = np.random.default_rng(11)
    t = np.linspace(2.0, 6.0, 82)
    designs = [np.vander(t, 6), np.vander(t, 6) * np.logspace(-8, 8, 6),
               np.vander(np.linspace(0, 1, 82), 6)]
    for n in (6, 40, 400):
        a, b, c = rng.standard_normal((3, n))
        designs += [np.column_stack([np.ones(n), a, b, c, a * b, c - 1]),
                    np.column_stack([np.ones(n), a, 2 * a - 3, b, c, a + b]),
                    np.column_stack([np.ones(n), 1e9 * a, b, c, a, b * c]),
                    np.column_stack([np.ones(n), np.zeros(n), b, c, a, a]),
                    np.column_stack([np.ones(n), a, b + 1e-9 * a, c, b, a * c]),
                    np.column_stack([np.ones(n), a, b + 1e-14 * a, c, a * b, c * c])]
    factors = [np.linalg.qr(D, mode="r") for D in designs]
    rows = np.array([len(D) for D in designs] + [10])
    stack = np.stack(factors + [np.full((6, 6), np.nan)])
    normalized = np.empty((len(stack), 6))
    rolling._triangular_solves(np.concatenate([stack, np.zeros((len(stack), 6, 1))], 2), 6,
                               np.empty((len(stack), 6, 1)), normalized)
    expected = has_full_column_rank(stack, rows)
    assert rolling._full_column_rank(stack, rows, normalized).tolist() == expected.tolist()
    assert set(expected.tolist()) == {True, False}
    called = []
    original = rolling.has_full_column_rank

    def counted(F, n):
        called.append(len(F))
        return original(F, n)

    mp = pytest.MonkeyPatch()
    mp.setattr(rolling, "has_full_column_rank", counted)
    try:
        rolling._full_column_rank(stack, rows, normalized)
    finally:
        mp.undo()
    assert 0 < called[0] < len(stack)  # the well-conditioned ones were settled by the bound


def test_triangular_solves_equal_lu_solves():
    """The compiled back substitutions: R⁻¹z and the row sums of (R⁻¹)² as numpy's LU
    solves give them, on factors of κ up to 1e8."""
    rng = np.random.default_rng(4)
    F = np.triu(rng.standard_normal((8, 7, 7)))
    for c in range(8):  # diagonals graded over c decades
        F[c, range(7), range(7)] = (np.abs(F[c, range(7), range(7)]) + 0.1) * np.logspace(
            0, -c, 7)
    k = 5
    coef, normalized = np.empty((len(F), k, 2)), np.empty((len(F), k))
    rolling._triangular_solves(F, k, coef, normalized)
    Rx = F[:, :k, :k]
    T = np.linalg.solve(Rx, np.broadcast_to(np.eye(k), Rx.shape))
    for i in range(len(F)):
        kappa = np.linalg.cond(Rx[i])
        np.testing.assert_allclose(coef[i], np.linalg.solve(Rx[i], F[i, :k, k:]),
                                   rtol=1e3 * EPS * kappa)
        np.testing.assert_allclose(normalized[i], (T[i] ** 2).sum(axis=1),
                                   rtol=1e3 * EPS * kappa)


# -- expanding windows after a summary of the rows before them --------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(12, 120), k=st.integers(1, 4), cut=st.floats(0.0, 1.0),
       cut2=st.floats(0.0, 1.0), min_nobs=st.integers(0, 6), seed=st.integers(0, 2**16))
def test_expanding_windows_after_a_summary_equal_those_of_all_the_rows(
        n, k, cut, cut2, min_nobs, seed):
    """Expanding windows fitted from the rows after row c and the summary of rows [0, c)
    (merged from two runs): every statistic of every window as from all the rows, with
    weights (some zero) and a column constant only after row c (R² not centred)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, k)) + 1.0
    a = int(cut * n * 0.8)
    c = a + int(cut2 * (n * 0.8 - a))
    X[c:, -1] = 3.0  # constant after the cut only: R² centred only if no earlier row weighs
    y = X @ rng.standard_normal(k) + rng.standard_normal(n)
    w = rng.uniform(0.2, 2.0, n)
    w[rng.random(n) < 0.15] = 0.0
    window = n + 5
    ends = window_ends(n, window, min_nobs, 1, True)
    ends = ends[ends >= c]
    whole = rolling_fit(X, y, window, weights=w, ends=ends, min_nobs=min_nobs)
    prior = rolling.merge_summaries(rolling.rows_summary(X[:a], y[:a], w[:a]),
                                    rolling.rows_summary(X[a:c], y[a:c], w[a:c]))
    after = rolling_fit(X[c:], y[c:], window, weights=w[c:], ends=ends - c,
                        min_nobs=min_nobs, prior=prior)
    np.testing.assert_array_equal(after["ends"], ends - c)
    for name in rolling.ROLLING_STATISTICS:
        np.testing.assert_allclose(after[name], whole[name], rtol=1e-9, atol=1e-12,
                                   err_msg=name)
    with pytest.raises(ValueError, match="does not hold the prior"):
        rolling_fit(X[c:], y[c:], c + 1, ends=[n - c], prior=prior)


def test_groups_of_expanding_windows_read_only_their_rows(monkeypatch):
    """The groups of expanding windows of a 100,000-row stream in tasks of 2,000 windows:
    each task reads the rows its windows add (after the summary of those before), the
    summaries read each row once more: 2 reads a row, where reading from row 0 took 25."""
    import streamlsq.stream.rolling as stream_rolling

    n, window = 100_000, 150_000
    ends = window_ends(n, window, 3, 1, True)
    groups = stream_rolling.window_groups(ends, window, expanding=True)
    firsts, runs = stream_rolling.expanding_reads(ends, groups, window)
    assert len(firsts) == len(groups) == 50
    reads = sum(int(ends[j - 1]) - f for f, (i, j) in zip(firsts, groups, strict=True))
    reads += sum(b - a for a, b in runs)
    assert reads <= 2 * n
    assert sum(int(ends[j - 1]) for i, j in groups) > 25 * n  # from row 0 every time
    # rolling windows after the expanding ones start groups of their own
    ends = window_ends(n, 1_000, 3, 7, True)
    groups = stream_rolling.window_groups(ends, 1_000, expanding=True)
    assert all((ends[i:j] <= 1_000).all() or (ends[i:j] > 1_000).all() for i, j in groups)
    firsts, runs = stream_rolling.expanding_reads(ends, groups, 1_000)
    assert firsts == [0] and runs == []


@pytest.fixture(scope="module")
def macro_stores(tmp_path_factory):
    """statsmodels' macrodata as stores of 7 and 50 rows a chunk."""
    import warnings

    import statsmodels.api as sm
    import xarray as xr

    d = sm.datasets.macrodata.load_pandas().data[["infl", "unemp", "tbilrate"]]
    root = tmp_path_factory.mktemp("macro-expanding")
    paths = []
    for rows in (7, 50):
        ds = xr.Dataset({c: ("row", d[c].to_numpy()) for c in d.columns})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds.chunk({"row": rows}).to_zarr(root / f"m{rows}.zarr", mode="w", zarr_format=3,
                                            consolidated=False)
        paths.append(str(root / f"m{rows}.zarr"))
    return d, paths


def test_expanding_windows_in_many_tasks_equal_rolling_ols(macro_stores, client):
    """Expanding windows of macrodata (203 rows) growing to 150 rows then rolling, in
    tasks of 3 and of 2,000 windows, from 7- and 50-row chunks, on both engines: each
    window as RollingOLS(expanding=True) gives it, and the same numbers whatever the
    grouping and the chunking."""
    from statsmodels.regression.rolling import RollingOLS

    import streamlsq.stream.rolling as stream_rolling
    from streamlsq import fit_stream

    d, paths = macro_stores
    X = np.column_stack([np.ones(len(d)), d[["unemp", "tbilrate"]].to_numpy()])
    ref = RollingOLS(d.infl.to_numpy(), X, window=150, expanding=True).fit()
    rows = np.arange(3, len(d))
    options = dict(x=["unemp", "tbilrate"], y="infl", sample_dim="row", fit_intercept=True,
                   window=150, expanding=True, client=client)
    fits = []
    for per_task, path, engine in ((3, paths[0], "scan"), (3, paths[1], "sequential"),
                                   (2_000, paths[0], "sequential")):
        mp = pytest.MonkeyPatch()
        mp.setattr(stream_rolling, "WINDOWS_PER_TASK", per_task)
        try:
            ds = fit_stream(path, "kf4lls", engine=engine, **options)
        finally:
            mp.undo()
        np.testing.assert_array_equal(ds.window_end.values, rows)
        for name in ("params", "bse"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, :, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=1e-9)
        for name in ("rsquared", "ssr", "llf"):
            np.testing.assert_allclose(ds[f"rolling_{name}"].values[:, 0],
                                       np.asarray(getattr(ref, name))[rows], rtol=1e-9)
        fits.append(ds)
    # groupings and chunkings merge the rows' factors in other orders: the same numbers to
    # rounding, which follows the worst window's conditioning (the first, of 3 to 4 rows)
    kappa = max(np.linalg.cond(X[max(0, e - 150):e]) for e in rows + 1)
    tol = max(1e-12, 1e3 * np.finfo(float).eps * kappa)
    for ds in fits[1:]:
        for name in ("rolling_params", "rolling_bse", "rolling_rsquared", "rolling_llf"):
            np.testing.assert_allclose(ds[name].values, fits[0][name].values, rtol=tol)
