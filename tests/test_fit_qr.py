"""The QR solver through the pipeline: ill-conditioned stores on both engines, the normal
equations kept as ``solver="normal"``, recursive residuals in result stores, the CLI.

Tolerances as in test_sqrt_solver.py: 1e3·ε·κ(X) against lstsq on the same rows (the
error bound of a backward-stable least-squares solver with the constant of a streaming
QR); the two engines group the same rows otherwise and agree to rounding, ~ε·κ.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamlsq import InputError, fit_stream, open_result
from streamlsq.kernels import KF4LLS, RLS, block_edges

from conftest import read_all, write_stream

EPS = np.finfo(np.float64).eps


def _ill_conditioned_store(path, kappa, n_rows=200_000, n=10, chunk=27_000, seed=0):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n_rows, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    X = (U * np.logspace(0, -np.log10(kappa), n)) @ V.T
    Y = X @ rng.standard_normal((n, 1)) + 1e-3 * rng.standard_normal((n_rows, 1))
    return write_stream(path, X, Y, chunk)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def kappa_stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("kappa")
    return {k: _ill_conditioned_store(root / f"k{k:.0e}.zarr", k, seed=int(np.log10(k)))
            for k in (1e6, 1e12)}


@pytest.mark.parametrize("kappa", [1e6, 1e12])
@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_200k_by_10_store_is_exact_to_eps_kappa(kappa_stores, client, engine, kappa):
    path = kappa_stores[kappa]
    X, Y = read_all(path)
    ref = np.linalg.lstsq(X, Y, rcond=1e-15)[0]
    ds = fit_stream(path, "kf4lls", engine=engine, block_size=20_000, record_every=2,
                    client=client, progress=False)
    err = _rel(ds.coef.values[-1], ref)
    assert err <= 1e3 * EPS * kappa
    if kappa == 1e6:
        assert err <= 1e-9  # the bound we promise for κ = 1e6
    assert ds.attrs["condition_number"] == pytest.approx(kappa, rel=1e-3)
    assert ds.attrs["digits_trusted"] == pytest.approx(-np.log10(EPS * kappa), abs=0.1)
    # and every recorded step against lstsq on the rows seen by then
    step = int(ds.step[0])
    n = int(ds.rows_seen.sel(step=step))
    assert _rel(ds.coef.sel(step=step).values,
                np.linalg.lstsq(X[:n], Y[:n], rcond=1e-15)[0]) <= 1e3 * EPS * kappa


def test_normal_solver_refuses_what_the_qr_solver_fits(kappa_stores, client):
    with pytest.raises(InputError, match="singular.*--ridge"):
        fit_stream(kappa_stores[1e12], "kf4lls", solver="normal", block_size=20_000,
                   client=client, progress=False)


def test_columns_scaled_over_ten_decades_are_fitted(tmp_path, client):
    """A user's store: 200,000 x 6, columns scaled from 1e-5 to 1e5 (refused by the
    normal equations as numerical rank 4 of 6)."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((200_000, 6))
    Y = A @ rng.standard_normal((6, 1)) + 0.1 * rng.standard_normal((200_000, 1))
    d = np.logspace(-5, 5, 6)
    path = write_stream(tmp_path / "scaled.zarr", A * d, Y, 40_000)
    exact = np.linalg.lstsq(A, Y, rcond=None)[0] / d[:, None]
    tol = 1e3 * EPS * np.linalg.cond(A)  # column scaling does not enter the QR's error
    for engine in ("sequential", "scan"):
        ds = fit_stream(path, "kf4lls", engine=engine, client=client, progress=False)
        assert np.max(np.abs(ds.coef.values[-1] - exact) / np.abs(exact)) <= tol
    with pytest.raises(InputError, match="numerical rank"):
        fit_stream(path, "kf4lls", solver="normal", client=client, progress=False)


@pytest.mark.parametrize("solver", ["qr", "normal"])
@pytest.mark.parametrize(("method", "params"), [
    ("kf4lls", dict(block_size=3_000, first_block_size=4_000)),
    ("rls", dict(block_size=5_000, forgetting=0.8, ridge=1.0)),
])
def test_engines_agree_under_both_solvers_and_segment_sizes(stream_200k, client, solver,
                                                            method, params):
    runs = [fit_stream(stream_200k, method, engine=engine, record_every=2, solver=solver,
                       segment_bytes=seg, client=client, progress=False, **params)
            for engine in ("sequential", "scan") for seg in (None, 3 * 2**20)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.step, runs[0].step)
        np.testing.assert_allclose(other.coef, runs[0].coef, rtol=1e-10, atol=1e-12)


def test_normal_solver_keeps_the_normal_equations_numbers(stream_200k, client):
    """``solver="normal"`` is the code of the normal-equation form, unchanged: the pipeline
    gives what that kernel's fold gives on the same rows and blocks."""
    X, Y = read_all(stream_200k)
    ds = fit_stream(stream_200k, "rls", solver="normal", forgetting=0.95, ridge=1.0,
                    block_size=7_000, record_every=1, client=client, progress=False)
    rec = RLS(forgetting=0.95, ridge=1.0, solver="normal")
    res = rec.fold(rec.init(20, 1), X, Y, block_edges(200_000, 7_000), 1, 1)
    np.testing.assert_allclose(ds.coef.values, res.coefs, rtol=1e-13, atol=1e-15)
    assert "state_H" in ds and "state_R" not in ds


def test_per_sample_diagnostics_in_the_result(tmp_path, client):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3_000, 3))
    beta = np.where(np.arange(3_000)[:, None] < 2_000, 1.0, 1.5)  # a break at row 2,000
    Y = (X * beta).sum(axis=1, keepdims=True) + 0.1 * rng.standard_normal((3_000, 1))
    path = write_stream(tmp_path / "break.zarr", X, Y, 700)
    ds = fit_stream(path, "kf4lls", block_size=1, first_block_size=3, record_every=10,
                    diagnostics=True, client=client, progress=False, out=tmp_path / "r.zarr")
    rec = KF4LLS(diagnostics=True)
    res = rec.fold(rec.init(3, 1), X, Y, block_edges(3_000, 1, 3), 1, 10)
    assert ds.step.values[-1] == 2_998 and len(res.steps) == ds.sizes["step"] - 1
    for name, values in res.diagnostics.items():  # the pipeline also records the last step
        np.testing.assert_array_equal(ds[name].values[:-1], values, err_msg=name)
        np.testing.assert_array_equal(ds[name].values[-1], rec.state_diagnostics(
            rec.fold(rec.init(3, 1), X, Y, block_edges(3_000, 1, 3), 1, 10**9).state)[name])
    assert {"cusum", "cusum_bound", "cusum_squares", "cusum_squares_lower",
            "cusum_squares_upper"} <= set(ds.data_vars)
    assert ds.attrs["recursive_residuals"] == 3_000 - 3
    assert ds.attrs["cusum_squares_outside"][0] > 0  # the break is found
    stored = open_result(tmp_path / "r.zarr")
    np.testing.assert_array_equal(stored.cusum.values, ds.cusum.values)
    assert all(np.isfinite(ds[v].values).all() for v in ds.data_vars
               if np.issubdtype(ds[v].dtype, np.floating))
    with pytest.raises(InputError, match="sequential"):
        fit_stream(path, "kf4lls", engine="scan", diagnostics=True, client=client)


def test_cli_solver_diagnostics_and_plot(tmp_path, kappa_stores, cli):
    out = tmp_path / "fit.zarr"
    r = cli("fit", "kf4lls", kappa_stores[1e12], "--out", out, "--block-size", "50000")
    assert r.exit_code == 0, r.output
    assert "condition number 1e+12: about 4 significant digits" in r.output
    r = cli("fit", "kf4lls", kappa_stores[1e12], "--out", tmp_path / "n.zarr", "--solver",
            "normal")
    assert r.exit_code == 2 and "--ridge" in r.output
    rng = np.random.default_rng(5)
    X = rng.standard_normal((500, 2))
    data = write_stream(tmp_path / "d.zarr", X, X @ [[1.0], [2.0]] + rng.standard_normal((500, 1)),
                        100)
    out = tmp_path / "rls.zarr"
    r = cli("fit", "rls", data, "--out", out, "--block-size", "1", "--ridge", "1e-3",
            "--forgetting", "1", "--diagnostics")
    assert r.exit_code == 0, r.output
    assert "CUSUM and CUSUM of squares within their 5% bounds" in r.output
    png = tmp_path / "rls.png"
    r = cli("info", out, "--plot", png)
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 10_000 and "CUSUM tests" in r.output
