"""One rank rule for both solvers and both engines (``kernels.linalg.column_rank``).

Ill-conditioned but well-posed designs (polynomials on few rows, whose columns differ in
scale by many decades) are fitted to the accuracy of an in-memory Householder QR of the
same float64 rows, measured against a 100-digit solution; an exactly aliased column is
never published, and its refusal names it.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.linalg as sla
import xarray as xr

from streamlsq import fit_stream
from streamlsq.kernels import KF4LLS, SingularMatrixError, block_edges
from streamlsq.kernels.linalg import aliased_phrase, column_rank, rank_tolerance

from conftest import (
    one_line,
    write_aliased_columns_store,
    write_stream,
    write_weighted_stream,
)
from faultkit import leftovers

EPS = np.finfo(np.float64).eps

#: (degree, interval of t, rows): column-equilibrated condition numbers 1e3 to 1e11
POLYNOMIALS = [(5, (5.0, 10.0), 60), (6, (0.0, 20.0), 97), (7, (2.0, 4.0), 82),
               (8, (1.0, 10.0), 70), (9, (3.0, 8.0), 90), (10, (2.0, 6.0), 82),
               (10, (0.0, 20.0), 82), (10, (2.0, 4.0), 82)]


def _exact(X: np.ndarray, Y: np.ndarray) -> list[np.ndarray]:
    """The least-squares solution of the float64 rows in 100 digits for each column of
    ``Y`` (normal equations in mpmath: κ² ≤ 1e30 leaves more than 70 of them; the normal
    matrix is formed once for all columns)."""
    with mpmath.workdps(100):
        A = mpmath.matrix(X.tolist())
        At = A.T
        normal = At * A
        out = []
        for t in range(Y.shape[1]):
            x = mpmath.lu_solve(normal, At * mpmath.matrix(Y[:, t].tolist()))
            out.append(np.array([float(v) for v in x]))
        return out


def _digits(estimate: np.ndarray, exact: np.ndarray) -> float:
    err = np.linalg.norm(estimate - exact) / np.linalg.norm(exact)
    return float(-np.log10(max(err, EPS / 10)))


def _householder(X: np.ndarray, y: np.ndarray, exact: np.ndarray) -> float:
    """The digits of an in-memory Householder QR of the rows: the lower of numpy's
    (LAPACK geqrf, Q formed, Qᵀy) and LAPACK geqrt's on [X y] (the routine of the store's
    fit). Two Householder QRs of the same rows differ by up to a digit on these designs
    by the luck of their rounding (1.1 measured on 25 random polynomial designs, both
    ways, the mean difference 0.1): the rows are the same, the rounding is not."""
    Q, R = np.linalg.qr(X)
    numpy_qr = _digits(sla.solve_triangular(R, Q.T @ y), exact)
    M = np.asfortranarray(np.column_stack([X, y]))
    k = X.shape[1]
    geqrt = sla.get_lapack_funcs("geqrt", (M,))
    A = np.triu(geqrt(min(8, k + 1), M)[0][:k + 1])
    return min(numpy_qr, _digits(sla.solve_triangular(A[:k, :k], A[:k, k]), exact))


#: right-hand sides per design (targets of one store), compared on their median
TARGETS = 5


def _polynomial(degree, interval, rows, seed):
    rng = np.random.default_rng(seed)
    t = np.linspace(*interval, rows)
    X = np.vander(t, degree + 1, increasing=True)
    Y = X @ rng.standard_normal((degree + 1, TARGETS)) + 0.1 * rng.standard_normal(
        (rows, TARGETS))
    return X, Y


@pytest.fixture(scope="module")
def polynomial_stores(tmp_path_factory):
    """Each design's store, its 100-digit solutions and the digits of an in-memory
    Householder QR per target (computed once for both engines: the mpmath solves are
    most of this module's time)."""
    root = tmp_path_factory.mktemp("poly")
    out = []
    for i, (degree, interval, rows) in enumerate(POLYNOMIALS):
        X, Y = _polynomial(degree, interval, rows, seed=i)
        exact = _exact(X, Y)
        householder = [_householder(X, Y[:, t], exact[t]) for t in range(TARGETS)]
        out.append((write_stream(root / f"p{i}.zarr", X, Y, 5), exact, householder))
    return out


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_polynomials_match_100_digits_as_householder_does(polynomial_stores, client, engine):
    for (path, exact, householder), case in zip(polynomial_stores, POLYNOMIALS, strict=True):
        ds = fit_stream(path, "kf4lls", engine=engine, client=client, progress=False)
        got = [_digits(ds.coef.values[-1][:, t], exact[t]) for t in range(TARGETS)]
        assert np.median(got) >= np.median(householder) - 1, (case, got, householder)
        assert min(got) >= min(householder) - 1.5, (case, got, householder)


def test_the_polynomials_are_ill_conditioned_but_full_rank():
    """What the designs above are: unscaled κ up to 1e14, equilibrated κ up to 1e11 (the
    column-equilibrated rule accepts them; numpy's lstsq default cut, max(m, k)·ε on the
    unscaled singular values, would drop a direction of the worst)."""
    kappas = []
    for i, (degree, interval, rows) in enumerate(POLYNOMIALS):
        X, _ = _polynomial(degree, interval, rows, seed=i)
        found = column_rank(np.linalg.qr(X)[1], rows)
        assert found.rank == degree + 1 and found.aliased == ()
        kappas.append(1 / found.rcond)
    assert max(kappas) > 1e10 and min(kappas) < 1e5


def test_an_exact_alias_is_found_by_every_form_at_every_size():
    """A column equal to another (or to the intercept) is below the tolerance whatever the
    rows, block sizes and solver; the refusal carries which."""
    rng = np.random.default_rng(0)
    for m in (12, 200, 20_000):
        x = rng.normal(0.3, 0.3, m)
        X = np.column_stack([np.ones(m), x, np.ones(m)])
        Y = rng.standard_normal((m, 1))
        for rec, size in ((KF4LLS(), m), (KF4LLS(), 5), (KF4LLS(), 1),
                          (KF4LLS(solver="normal"), m), (KF4LLS(solver="normal"), 5)):
            with pytest.raises(SingularMatrixError) as info:
                rec.fold(rec.init(3, 1), X, Y, block_edges(m, size, 10), 1, 10**9)
            assert (info.value.rank, info.value.size) == (2, 3)
            assert info.value.aliased == ((2, (0,)),)


def test_aliased_columns_are_named_by_their_labels():
    x = np.linspace(0, 1, 30)
    X = np.column_stack([np.ones(30), x, 2 * x - 1, np.zeros(30), x**2])
    found = column_rank(np.linalg.qr(X)[1], 30)
    assert found.rank == 3
    assert aliased_phrase(found.aliased, ["intercept", "a", "b", "z", "c"]) == (
        "column 'b' is aliased with 'intercept', 'a'; column 'z' is zero in every row")


def test_the_tolerance():
    """τ = √(max(m, k)·k)·ε; exact aliases of this suite sit 10 to 1000 times below it."""
    assert rank_tolerance(82, 11) == pytest.approx(np.sqrt(82 * 11) * EPS)
    assert rank_tolerance(3, 5) == pytest.approx(5 * EPS)


@pytest.mark.parametrize("solver", ["qr", "normal"])
@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize(("columns", "named"), [
    ("x1,one", "column 'one' is aliased with 'intercept'"),
    ("x1,x1copy", "column 'x1copy' is aliased with 'x1'"),
])
@pytest.mark.parametrize("block", [None, "40"])
def test_an_aliased_column_is_never_published(tmp_path, cli, engine, solver, columns, named,
                                              block):
    data = write_aliased_columns_store(tmp_path / "d.zarr")
    out = tmp_path / "out.zarr"
    args = ["fit", "kf4lls", data, "--x", columns, "--y", "y", "--sample-dim", "row",
            "--intercept", "--engine", engine, "--solver", solver, "--out", out]
    if block:
        args += ["--block-size", block]
    line = one_line(cli(*args))
    assert named in line, line
    assert "numerical rank 2 of 3" in line
    assert not out.exists() and leftovers(out) == []


def test_a_formula_fit_names_its_intercept_as_its_result_does(tmp_path, cli):
    """A formula fit labels its intercept 'Intercept' (formulaic's, statsmodels'): the
    refusal of a first block in which a column is aliased with it names it so too."""
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal(40), rng.standard_normal(40)
    x2[:5] = 1.0  # constant in the first block only: aliased with the intercept there
    data = tmp_path / "d.zarr"
    columns = {"x1": x1, "x2": x2, "y": x1 + rng.standard_normal(40)}
    xr.Dataset({k: ("row", v) for k, v in columns.items()}).chunk({"row": 5}).to_zarr(data)
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "bfgs", data, "--formula", "y ~ x1 + x2", "--sample-dim",
                        "row", "--first-block-size", "5", "--out", out))
    assert "the first block (rows 0-4)" in line, line
    assert "column 'x2' is aliased with 'Intercept'" in line, line
    assert not out.exists() and leftovers(out) == []


# -- statistics of too few rows or of rows the fit passes through -------------------------


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_too_few_rows_are_named_as_such(tmp_path, cli, engine):
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    zero = write_weighted_stream(tmp_path / "zero.zarr", X, Y, np.zeros(20))
    one_left, none_left = X.copy(), X.copy()
    one_left[1:, 0] = np.nan
    none_left[:, 1] = np.nan
    cases = [
        (zero, ["--weights", "w"], "variable 'X': no rows with positive weight: the rows "
         "never identify the coefficients"),
        (write_stream(tmp_path / "one.zarr", one_left, Y, 5), ["--missing", "drop"],
         "variable 'X': only 1 row left after dropping missing values for 2 coefficients: "
         "the rows never identify the coefficients"),
        (write_stream(tmp_path / "none.zarr", none_left, Y, 5), ["--missing", "drop"],
         "variable 'X': no rows with positive weight after dropping missing values: the "
         "rows never identify the coefficients"),
    ]
    for data, options, message in cases:
        out = tmp_path / "out.zarr"
        line = one_line(cli("fit", "kf4lls", data, "--engine", engine, "--out", out, *options))
        assert line.endswith(f"{data}: {message}"), line
        assert "--ridge" not in line and "collinear" not in line
        assert not out.exists() and leftovers(out) == []


@pytest.mark.parametrize("cov_type", ["HC2", "HC3"])
def test_hc2_hc3_refuse_a_row_of_leverage_one_naming_it(tmp_path, cli, cov_type):
    """A row the fit passes through (the only one with a nonzero third column; or every
    row when there are as many as coefficients): its residual is 0 and 1 − h is 0, so
    HC2/HC3 are 0/0 there. statsmodels returns the quotient of the two rounding errors
    (a number that changes with the BLAS); the refusal names the row."""
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.standard_normal((20, 2)), np.zeros(20)])
    X[7, 2] = 1.0
    lever = write_stream(tmp_path / "lever.zarr", X, rng.standard_normal((20, 1)), 5)
    square = write_stream(tmp_path / "square.zarr", rng.standard_normal((3, 3)),
                          rng.standard_normal((3, 1)), 3)
    for data, where in ((lever, "variable 'X' chunk 1 row 7 has leverage 1"),
                        (square, "variable 'X' chunk 0 row 0 has leverage 1")):
        out = tmp_path / "out.zarr"
        line = one_line(cli("fit", "kf4lls", data, "--cov-type", cov_type, "--out", out))
        assert f"{data}: {where}" in line, line
        assert (f"so its residual is 0 and {cov_type} divides it by 1 − h = 0 (a quotient of "
                "rounding errors); leave the row out, or use --cov-type nonrobust") in line
        assert not out.exists() and leftovers(out) == []


@pytest.mark.parametrize("cov_type", ["HC0", "HC1"])
def test_hc0_hc1_refuse_the_f_test_of_a_row_of_leverage_one(tmp_path, cli, cov_type):
    """The row that alone identifies the third coefficient has residual 0: HC0/HC1 put
    nothing (a rounding error squared) in that coefficient's direction, and the robust
    covariance of the slopes is singular, so their joint F test has no value: refused in
    one line (it was an unexpected error, exit 1), nothing written."""
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.standard_normal((20, 2)), np.zeros(20)])
    X[7, 2] = 1.0
    lever = write_stream(tmp_path / "lever.zarr", X, rng.standard_normal((20, 1)), 5)
    out = tmp_path / "out.zarr"
    line = one_line(cli("fit", "kf4lls", lever, "--cov-type", cov_type, "--out", out))
    assert line.endswith(f"{lever}: --cov-type {cov_type}: the robust covariance is singular "
                         "in the slopes: a coefficient that a single row (of leverage 1) or a "
                         "single group alone identifies has no robust standard error; leave "
                         "that row (or group) out, or use --cov-type nonrobust"), line
    assert not out.exists() and leftovers(out) == []
