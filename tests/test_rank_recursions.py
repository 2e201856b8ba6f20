"""The one rank rule (``kernels.linalg.column_rank``) in every recursion with a
least-squares solve beyond KF4LLS and RLS: interleaved KF4LLS (its steps, on either
solver and engine, and the closed form of its Lemma 1) and the least-squares start of
incremental BFGS. An exactly aliased column is refused naming it, and nothing is
published; an ill-conditioned but well-posed design is fitted, to the accuracy that its
condition number allows, measured against a 100-digit solution.
"""

from __future__ import annotations

import re

import mpmath
import numpy as np
import pytest

from streamlsq import InputError, fit_interleaved, fit_stream
from streamlsq.kernels import IncrementalBFGS, InterleavedKF4LLS, SingularMatrixError
from streamlsq.kernels.linalg import column_rank
from streamlsq.kernels.recursions import interleaved as il

from conftest import (
    one_line,
    write_aliased_columns_store,
    write_stream,
    write_weighted_stream,
)
from faultkit import leftovers

EPS = np.finfo(np.float64).eps


def _exact(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares solution of the float64 rows in 100 digits."""
    with mpmath.workdps(100):
        A = mpmath.matrix(X.tolist())
        b = mpmath.matrix(y.tolist())
        return np.array([float(v) for v in mpmath.lu_solve(A.T * A, A.T * b)])


def _error_bound(X: np.ndarray, exact: np.ndarray, y: np.ndarray) -> float:
    """The relative error of the column-scaled coefficients that a backward-stable
    least-squares solve may make on these rows (Higham 2002, Theorem 20.3, with the
    column-equilibrated condition number κ: ε·(κ + κ²·‖r‖/(‖A‖‖x‖))), times a constant
    for the sizes of the problem."""
    norms = np.linalg.norm(X, axis=0)
    As, xs = X / norms, exact * norms
    kappa = 1 / column_rank(np.linalg.qr(X)[1], len(X)).rcond
    r = np.linalg.norm(y - X @ exact)
    bound = EPS * (kappa + kappa**2 * r / (np.linalg.norm(As, 2) * np.linalg.norm(xs)))
    return 10 * np.sqrt(X.shape[0] * X.shape[1]) * bound


def _scaled_error(X, estimate, exact) -> float:
    norms = np.linalg.norm(X, axis=0)
    return float(np.linalg.norm((estimate - exact) * norms) / np.linalg.norm(exact * norms))


def _householder_error(X, y, exact) -> float:
    """The same error of an in-memory Householder QR of the rows (numpy's): a recursion
    over blocks rounds differently (rotations, merges of factors) and is asked to be within
    two digits of it, as KF4LLS is within 1.5 in ``test_rank_rule``."""
    Q, R = np.linalg.qr(X)
    return _scaled_error(X, np.linalg.solve(R, Q.T @ y), exact)


def _polynomial(degree, interval, rows, seed, constant=True):
    rng = np.random.default_rng(seed)
    t = np.linspace(*interval, rows)
    X = np.vander(t, degree + 1, increasing=True)[:, 0 if constant else 1:]
    return X, X @ rng.standard_normal(X.shape[1]) + 0.1 * rng.standard_normal(rows)


#: (degree, interval of t, rows): column-equilibrated condition numbers 1e4 to 1e9
POLYNOMIALS = [(6, (0.0, 20.0), 30), (7, (2.0, 4.0), 40), (8, (1.0, 10.0), 25)]


# -- incremental BFGS: its first block is a least-squares fit --------------------------


@pytest.mark.parametrize(("degree", "interval", "rows"), POLYNOMIALS)
def test_bfgs_fits_an_ill_conditioned_first_block_as_householder_does(degree, interval,
                                                                     rows):
    X, y = _polynomial(degree, interval, rows, seed=degree)
    kappa = 1 / column_rank(np.linalg.qr(X)[1], rows).rcond
    assert kappa > 1e4  # ill-conditioned: the Cholesky of XᵀX refused these before
    exact = _exact(X, y)
    rec = IncrementalBFGS()
    state = rec.update(rec.init(X.shape[1], 1), X, y[:, None])
    got = _scaled_error(X, rec.coef(state)[:, 0], exact)
    assert got <= _error_bound(X, exact, y), (got, _error_bound(X, exact, y), kappa)
    assert got <= 100 * _householder_error(X, y, exact) + 100 * EPS
    assert not rec.ridge_used(state)


@pytest.mark.parametrize(("column", "aliased"), [("ones", ((2, (0,)),)),
                                                 ("copy", ((2, (1,)),))])
def test_bfgs_refuses_an_aliased_first_block_naming_the_column(column, aliased):
    rng = np.random.default_rng(3)
    x = rng.normal(0.3, 0.3, 50)
    X = np.column_stack([np.ones(50), x, np.ones(50) if column == "ones" else x])
    Y = rng.standard_normal((50, 1))
    rec = IncrementalBFGS()
    with pytest.raises(SingularMatrixError, match="ridge") as info:
        rec.update(rec.init(3, 1), X, Y)
    assert (info.value.rank, info.value.size, info.value.aliased) == (2, 3, aliased)
    # with a ridge start the user asked for, the same block is fitted (ridge regression)
    ridge = IncrementalBFGS(ridge=1e-3)
    state = ridge.update(ridge.init(3, 1), X, Y)
    assert ridge.ridge_used(state)
    expected = np.linalg.solve(X.T @ X + 1e-3 * np.eye(3), X.T @ Y)
    np.testing.assert_allclose(ridge.coef(state), expected, rtol=1e-9)


# -- interleaved KF4LLS ---------------------------------------------------------------


def _two_populations(rows, seed, duplicate=False):
    rng = np.random.default_rng(seed)
    U, V = rng.standard_normal((rows, 3)), rng.standard_normal((rows, 3))
    if duplicate:
        U[:, 2], V[:, 2] = U[:, 0], V[:, 0]
    return (U, U @ [1.0, 2.0, 3.0] + rng.standard_normal(rows),
            V, V @ [3.0, 0.0, 1.0] + rng.standard_normal(rows))


def test_the_closed_form_refuses_an_aliased_column_and_solves_a_full_one():
    U, b, V, f = _two_populations(30, 1, duplicate=True)
    with pytest.raises(SingularMatrixError) as info:
        il.interleaved_closed_form(U, b, V, f, 0.3)
    assert (info.value.rank, info.value.aliased) == (2, ((2, (0,)),))
    U, b, V, f = _two_populations(30, 1)
    rows = np.concatenate([np.sqrt(0.3) * (U - U.mean(0)), np.sqrt(0.7) * (V - V.mean(0))])
    y = np.concatenate([np.sqrt(0.3) * (b - b.mean()), np.sqrt(0.7) * (f - f.mean())])
    np.testing.assert_allclose(il.interleaved_closed_form(U, b, V, f, 0.3), _exact(rows, y),
                               rtol=1e-12)


def _interleaved_fold(rec, U, b, V, f, size, engine):
    """ψ after all the blocks (of ``size`` rows, alternating A and B) by one engine."""
    n = len(U) // size
    blocks = []
    for i in range(n):
        s = slice(i * size, (i + 1) * size)
        blocks += [(U[s], b[s, None]), (V[s], f[s, None])]
    state = rec.init(U.shape[1], 1)
    if engine == "sequential":
        for X, Y in blocks:
            state = rec.update(state, X, Y)
        return rec.coef(state)
    X = np.concatenate([x for x, _ in blocks])
    Y = np.concatenate([y for _, y in blocks])
    edges = np.arange(0, len(X) + 1, size)
    summaries = rec.summarize(X, Y, edges, np.array([len(blocks)]))
    info = rec.scan(rec.to_info(state), summaries)[-1]
    return rec.coef(rec.finish(info))


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize("solver", ["qr", "normal"])
def test_interleaved_refuses_an_aliased_column_on_every_form(engine, solver):
    U, b, V, f = _two_populations(40, 2, duplicate=True)
    rec = InterleavedKF4LLS(alpha=0.4, solver=solver)
    with pytest.raises(SingularMatrixError) as info:
        _interleaved_fold(rec, U, b, V, f, 10, engine)
    assert (info.value.rank, info.value.size, info.value.aliased) == (2, 3, ((2, (0,)),))


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize(("degree", "interval", "rows"), POLYNOMIALS)
def test_interleaved_fits_an_ill_conditioned_design_as_householder_does(engine, degree,
                                                                       interval, rows):
    """A polynomial without its constant (centring removes it) in both populations: the
    weighted, centred rows are ill-conditioned but of full rank, and fitted."""
    U, b = _polynomial(degree, interval, 2 * rows, seed=degree, constant=False)
    V, f = _polynomial(degree, interval, 2 * rows, seed=degree + 1, constant=False)
    size, alpha = rows // 2, 0.4
    centred = []
    for i in range(4):
        s = slice(i * size, (i + 1) * size)
        for X, y, w in ((U[s], b[s], alpha), (V[s], f[s], 1 - alpha)):
            centred.append((np.sqrt(w) * (X - X.mean(0)), np.sqrt(w) * (y - y.mean())))
    X = np.concatenate([x for x, _ in centred])
    y = np.concatenate([v for _, v in centred])
    exact = _exact(X, y)
    rec = InterleavedKF4LLS(alpha=alpha)
    got = _interleaved_fold(rec, U[:4 * size], b[:4 * size], V[:4 * size], f[:4 * size],
                            size, engine)[:, 0]
    assert _scaled_error(X, got, exact) <= _error_bound(X, exact, y)
    assert _scaled_error(X, got, exact) <= 100 * _householder_error(X, y, exact) + 100 * EPS


# -- from the command line and from Python: refused in one line, nothing published ------


@pytest.mark.parametrize(("columns", "named"), [
    ("x1,one", "column 'one' is aliased with 'intercept'"),
    ("x1,x1copy", "column 'x1copy' is aliased with 'x1'"),
])
def test_bfgs_never_publishes_an_aliased_column(tmp_path, cli, client, columns, named):
    data = write_aliased_columns_store(tmp_path / "d.zarr")
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "bfgs", data, "--x", columns, "--y", "y", "--sample-dim",
                        "row", "--intercept", "--first-block-size", "20", "--out", out))
    assert named in line and "numerical rank 2 of 3" in line, line
    assert "the first block (rows 0-19)" in line and "--ridge" in line, line
    assert not out.exists() and leftovers(out) == []
    with pytest.raises(InputError, match=named):
        fit_stream(data, "bfgs", x=columns.split(","), y="y", sample_dim="row",
                   fit_intercept=True, first_block_size=20, out=out, progress=False,
                   client=client)
    assert not out.exists() and leftovers(out) == []


def _aliased_populations(tmp_path):
    U, b, V, f = _two_populations(40, 5, duplicate=True)
    return (write_stream(tmp_path / "a.zarr", U, b[:, None], 10),
            write_stream(tmp_path / "b.zarr", V, f[:, None], 10))


@pytest.mark.parametrize("solver", ["qr", "normal"])
@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_interleaved_never_publishes_an_aliased_column(tmp_path, cli, client, engine,
                                                       solver):
    a, b = _aliased_populations(tmp_path)
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "interleaved", a, b, "--alpha", "0.4", "--engine", engine,
                        "--solver", solver, "--out", out))
    assert "numerical rank 2 of 3: column 2 is aliased with 0" in line, line
    # the scan engine solves every step at once: the first task to fail names its step
    where = "the first block" if engine == "sequential" else r"(the first block|step \d+)"
    assert re.search(where + r"( \(rows [0-9-]+\))? leaves the normal matrix singular", line), line
    assert not out.exists() and leftovers(out) == []
    with pytest.raises(InputError, match="column 2 is aliased with 0"):
        fit_interleaved(a, b, alpha=0.4, engine=engine, solver=solver, out=out,
                        client=client, progress=False)
    assert not out.exists() and leftovers(out) == []


# -- a fit that saw no row of positive weight ------------------------------------------


#: (method, options, the end of the refusal): with a ridge start the coefficients would be
#: the start's (0) whatever the rows, without one the rows never identify them
NO_WEIGHT = [
    ("kf4lls", ["--ridge", "1"], "no rows with positive weight: the fit saw no data, its "
     "coefficients would be its ridge start's; give some rows a positive weight in 'w'"),
    ("rls", ["--ridge", "0.1"], "no rows with positive weight: the fit saw no data, its "
     "coefficients would be its ridge start's; give some rows a positive weight in 'w'"),
    ("rls", [], "no rows with positive weight: the rows never identify the coefficients"),
]


@pytest.mark.parametrize("solver", ["qr", "normal"])
@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize(("method", "options", "message"), NO_WEIGHT)
def test_a_fit_without_a_row_of_positive_weight_is_refused(tmp_path, cli, client, engine,
                                                           solver, method, options, message):
    rng = np.random.default_rng(6)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    data = write_weighted_stream(tmp_path / "zero.zarr", X, Y, np.zeros(20))
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", method, data, "--weights", "w", "--engine", engine,
                        "--solver", solver, "--out", out, *options))
    assert line == f"streamlsq: error: {data}: variable 'X': {message}", line
    assert not out.exists() and leftovers(out) == []
    params = {"ridge": float(options[1])} if options else {}
    with pytest.raises(InputError) as info:
        fit_stream(data, method, weights="w", engine=engine, solver=solver, out=out,
                   progress=False, client=client, **params)
    assert f"streamlsq: error: {info.value}" == line
    assert not out.exists() and leftovers(out) == []


def test_a_ridge_fit_whose_rows_all_miss_a_value_is_refused(tmp_path, cli):
    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    X[:, 1] = np.nan
    data = write_stream(tmp_path / "nan.zarr", X, Y, 5)
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "kf4lls", data, "--missing", "drop", "--ridge", "1", "--out",
                        out))
    assert line == (f"streamlsq: error: {data}: variable 'X': no rows with positive weight "
                    "after dropping "
                    "missing values: the fit saw no data, its coefficients would be its ridge "
                    "start's; every row misses a value: fill them, or leave out the variables "
                    "that miss them"), line
    assert not out.exists() and leftovers(out) == []


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_a_ridge_fit_with_some_rows_of_positive_weight_counts_them(tmp_path, client, engine):
    """The count a weighted ridge fit now keeps is that of its rows of positive weight, on
    either engine, and the fit is ridge regression of those rows."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    w = np.where(np.arange(20) % 3 == 0, 2.0, 0.0)
    data = write_weighted_stream(tmp_path / "some.zarr", X, Y, w)
    ds = fit_stream(data, "kf4lls", weights="w", ridge=1.0, engine=engine, progress=False,
                    client=client)
    assert int(ds.state_nobs) == 7
    expected = np.linalg.solve(np.eye(2) + X.T @ (w[:, None] * X), X.T @ (w[:, None] * Y))
    np.testing.assert_allclose(ds.coef.values[-1], expected, rtol=1e-12)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_rls_on_the_normal_equations_starts_at_the_first_row_of_positive_weight(
        tmp_path, client, engine):
    """The normal equations without statistics (a forgetting factor) refuse a singular step;
    a block of rows of weight 0 only leaves the state as it was (H = 0), so the fit starts
    with the first rows that weigh, records no step before them, and gives the numbers of
    the QR form."""
    rng = np.random.default_rng(9)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    w = np.where(np.arange(20) < 10, 0.0, 1.0 + np.arange(20) % 3)
    data = write_weighted_stream(tmp_path / "late.zarr", X, Y, w)
    fits = {solver: fit_stream(data, "rls", weights="w", solver=solver, engine=engine,
                               block_size=5, record_every=1, progress=False, client=client)
            for solver in ("normal", "qr")}
    for ds in fits.values():
        assert ds.step.values.tolist() == [3, 4]
        assert int(ds.state_nobs) == 10
    decay = 0.99 ** np.repeat([3, 2, 1, 0], 5) * w
    expected = np.linalg.solve(X.T @ (decay[:, None] * X), X.T @ (decay[:, None] * Y))
    for ds in fits.values():
        np.testing.assert_allclose(ds.coef.values[-1], expected, rtol=1e-10)
