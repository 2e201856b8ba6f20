"""Pipeline == estimator: for every estimator class, fitting a store through the pipeline
and fitting the in-memory estimator on the same rows, in the same order, with the same
blocks, give the same coefficients and the same final kernel state — bit for bit where
the code path is the same (the kernel's fold over the same blocks), to rounding where it
is not (the scan engine's sums; a non-orthonormal IRMA basis, whose coordinates change
at every fold boundary)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from streamlsq import (
    IncrementalBFGSRegressor,
    InterleavedKF4LLSRegressor,
    IRMAGradientDescentRegressor,
    IRMARegressor,
    IRMARLSRegressor,
    KF4LLSRegressor,
    LMSRegressor,
    RLSRegressor,
    fit_interleaved,
    fit_stream,
)
from streamlsq.kernels.synthetic.streams import irma_rows

from conftest import write_stream

N, Q, K, CHUNK = 601, 3, 2, 64


def _linear(seed=0, n=N, q=Q, k=K, noise=0.2, shift=0.4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q)) + shift
    return X, 0.5 + X @ rng.standard_normal((q, k)) + noise * rng.standard_normal((n, k))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """In-memory rows and the same rows as stores (chunks of 64 rows: blocks straddle them)."""
    root = tmp_path_factory.mktemp("vs")
    X, Y = _linear(1)
    labels = (X[:, :1] + 0.1 * np.random.default_rng(2).standard_normal((N, 1)) > 0.4)
    x, t = irma_rows(3, 0, 200)
    data = {
        "linear": (X, Y),
        "labels": (X, labels.astype(np.float64)),
        "irma": (x, t),
        "intercept": (X, Y),
    }
    paths = {name: write_stream(root / f"{name}.zarr", *arrays, CHUNK)
             for name, arrays in data.items() if name != "intercept"}
    # a constant column stored in X stands for the estimators' fit_intercept=True
    paths["intercept"] = write_stream(root / "ones.zarr", np.hstack([np.ones((N, 1)), X]), Y,
                                      CHUNK)
    paths["lms-chunks"] = write_stream(root / "lms50.zarr", X, Y, 50)
    return data, paths


SCHEDULE = dict(schedule="inverse", rate=0.05, tau=300.0)

# (id, estimator, data, pipeline method, pipeline parameters)
CASES = [
    ("kf4lls", KF4LLSRegressor(block_size=40, first_block_size=70, fit_intercept=False),
     "linear", "kf4lls", dict(block_size=40, first_block_size=70)),
    ("kf4lls-ridge", KF4LLSRegressor(block_size=1, ridge=0.5, fit_intercept=False),
     "linear", "kf4lls", dict(block_size=1, ridge=0.5)),
    ("rls", RLSRegressor(forgetting=0.98, ridge=1e-3, block_size=1, fit_intercept=False),
     "linear", "rls", dict(forgetting=0.98, ridge=1e-3, block_size=1)),
    ("rls-blocks", RLSRegressor(forgetting=0.9, ridge=0.0, block_size=25, first_block_size=50,
                                fit_intercept=False),
     "linear", "rls", dict(forgetting=0.9, ridge=0.0, block_size=25, first_block_size=50)),
    ("lms", LMSRegressor(block_size=37, **SCHEDULE), "linear", "lms",
     dict(block_size=37, **SCHEDULE)),
    ("lms-normalized", LMSRegressor(normalized=True, rate=0.5, epochs=2, block_size=10),
     "linear", "lms", dict(normalized=True, rate=0.5, epochs=2, block_size=10)),
    # shuffled epochs: the estimator shuffles like the pipeline when chunks have block_size rows
    ("lms-shuffled", LMSRegressor(epochs=3, shuffle=True, random_state=7, block_size=50,
                                  **SCHEDULE),
     "lms-chunks", "lms", dict(epochs=3, shuffle=True, seed=7, block_size=50, **SCHEDULE)),
    ("bfgs", IncrementalBFGSRegressor(block_size=37, first_block_size=50, fit_intercept=False),
     "linear", "bfgs", dict(block_size=37, first_block_size=50)),
    ("bfgs-rate", IncrementalBFGSRegressor(rate=0.6, block_size=30, fit_intercept=False),
     "linear", "bfgs", dict(rate=0.6, block_size=30)),
    ("bfgs-ridge", IncrementalBFGSRegressor(ridge=0.1, block_size=2, fit_intercept=False),
     "linear", "bfgs", dict(ridge=0.1, block_size=2)),
    ("bfgs-balanced", IncrementalBFGSRegressor(rate=1.0, balanced=True,
                                               balance_counts="cumulative", block_size=40,
                                               fit_intercept=False),
     "labels", "bfgs", dict(rate=1.0, balanced=True, balance_counts="cumulative",
                            block_size=40)),
    ("irma", IRMARegressor(order=10, domain=(0.0, 3.0), block_size=1), "irma", "irma",
     dict(order=10, domain=(0.0, 3.0), block_size=1)),
    ("irma-additive", IRMARegressor(order=6, domain=(0.0, 3.0), stiffness="additive",
                                    stiffness_initial=0.3, stiffness_rate=0.02, block_size=9),
     "irma", "irma", dict(order=6, domain=(0.0, 3.0), stiffness="additive",
                          stiffness_initial=0.3, stiffness_rate=0.02, block_size=9)),
    ("irma-monomial", IRMARegressor(order=4, domain=(0.0, 3.0), basis="monomial",
                                    block_size=5),
     "irma", "irma", dict(order=4, domain=(0.0, 3.0), basis="monomial", block_size=5)),
    ("irma-gd", IRMAGradientDescentRegressor(order=6, domain=(0.0, 3.0), mu=0.05,
                                             block_size=1),
     "irma", "irma-gd", dict(order=6, domain=(0.0, 3.0), mu=0.05, block_size=1)),
    ("irma-rls", IRMARLSRegressor(order=6, domain=(0.0, 3.0), basis="monomial",
                                  forgetting=0.9, mu=0.05, p0=1.0, block_size=3),
     "irma", "irma-rls", dict(order=6, domain=(0.0, 3.0), basis="monomial", forgetting=0.9,
                              mu=0.05, p0=1.0, block_size=3)),
]


def _same_state(est, ds, exact: bool):
    for key, value in est.state_.items():
        got = ds[f"state_{key}"].values
        if exact or not np.issubdtype(np.asarray(value).dtype, np.floating):
            np.testing.assert_array_equal(got, value, err_msg=key)
        else:
            np.testing.assert_allclose(got, value, rtol=1e-10, atol=1e-13, err_msg=key)


def _est_coef_matrix(est) -> np.ndarray:
    """The estimator's coefficients in the pipeline's (feature, target) layout."""
    coef = np.asarray(est.coef_)
    W = coef[:, None] if coef.ndim == 1 else coef.T
    if isinstance(est, LMSRegressor):  # row 0 of the kernel's W is the intercept
        W = np.vstack([np.atleast_1d(est.intercept_)[None, :], W])
    return W


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pipeline_equals_the_estimator(stores, client, case):
    name, est, kind, method, params = case
    data, paths = stores
    X, Y = data["linear" if kind == "lms-chunks" else kind]
    est = clone(est)
    y = Y[:, 0] if Y.shape[1] == 1 else Y
    est.fit(X, y)
    ds = fit_stream(paths[kind], method, client=client, segment_bytes=3_000, **params)
    # the same code path (the kernel's fold over the same blocks) except the coordinates
    # of a monomial basis, re-entered at every fold boundary
    exact = not (params.get("basis") == "monomial" and method == "irma")
    _same_state(est, ds, exact)
    W = ds.coef.values[-1]
    if exact:
        np.testing.assert_array_equal(W, _est_coef_matrix(est))
    else:
        np.testing.assert_allclose(W, _est_coef_matrix(est), rtol=1e-10, atol=1e-13)
    assert est.n_steps_ == ds.attrs["n_blocks"] and est.rows_seen_ == ds.attrs["n_rows"]
    if method == "bfgs":
        assert est.n_skipped_ == ds.attrs["n_skipped"]
        assert est.ridge_used_ == bool(ds.attrs["ridge_used"])
    if method.startswith("irma"):
        assert list(ds.feature.values) == est.basis_.names
        grid = np.linspace(0.0, 3.0, 11)[:, None]
        np.testing.assert_allclose(est.basis_.evaluate(grid, W)[:, 0], est.predict(grid),
                                   rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method,cls,params", [
    ("kf4lls", KF4LLSRegressor, dict(block_size=40)),
    ("rls", RLSRegressor, dict(forgetting=0.95, ridge=1e-2, block_size=20)),
])
def test_scan_engine_equals_the_estimator_to_rounding(stores, client, method, cls, params):
    data, paths = stores
    X, Y = data["linear"]
    est = cls(fit_intercept=False, **params).fit(X, Y)
    ds = fit_stream(paths["linear"], method, engine="scan", client=client, **params)
    np.testing.assert_allclose(ds.coef.values[-1], est.coef_.T, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls,params", [
    (KF4LLSRegressor, dict(block_size=40)),
    (RLSRegressor, dict(forgetting=0.99, ridge=1e-3, block_size=1)),
    (IncrementalBFGSRegressor, dict(block_size=40)),
])
def test_fit_intercept_is_a_stored_column_of_ones(stores, client, cls, params):
    data, paths = stores
    X, Y = data["intercept"]
    est = cls(fit_intercept=True, **params).fit(X, Y)
    method = {KF4LLSRegressor: "kf4lls", RLSRegressor: "rls",
              IncrementalBFGSRegressor: "bfgs"}[cls]
    ds = fit_stream(paths["intercept"], method, client=client, **params)
    W = ds.coef.values[-1]
    np.testing.assert_array_equal(W[0], est.intercept_)
    np.testing.assert_array_equal(W[1:], est.coef_.T)


@pytest.mark.parametrize("cls,params,method", [
    (IncrementalBFGSRegressor, dict(block_size=30, fit_intercept=False), "bfgs"),
    (LMSRegressor, dict(block_size=30, **SCHEDULE), "lms"),
    (IRMARegressor, dict(order=10, domain=(0.0, 3.0), block_size=5), "irma"),
])
def test_partial_fit_over_whole_blocks_equals_the_pipeline(stores, client, cls, params,
                                                           method):
    data, paths = stores
    kind = "irma" if method == "irma" else "linear"
    X, Y = data[kind]
    y = Y[:, 0] if kind == "irma" else Y
    est = cls(**params)
    for a, b in ((0, 90), (90, 150), (150, len(X))):  # pieces of whole blocks
        est.partial_fit(X[a:b], y[a:b])
    kw = {k: v for k, v in params.items() if k != "fit_intercept"}
    ds = fit_stream(paths[kind], method, client=client, **kw)
    np.testing.assert_array_equal(ds.coef.values[-1], _est_coef_matrix(est))


@pytest.mark.parametrize("start", ["a", "b"])
@pytest.mark.parametrize("block", [None, 45])
def test_interleaved_pipeline_equals_the_estimator(tmp_path, client, start, block):
    # two populations of unequal length in stores of 64-row chunks; the estimator gets
    # the same rows stacked, with one population label per row
    XA, YA = _linear(5, n=300, shift=2.0)
    XB, YB = _linear(6, n=250, shift=-1.0)
    size = block or 50
    a = write_stream(tmp_path / "a.zarr", XA, YA, CHUNK, attrs={"block_size": size})
    b = write_stream(tmp_path / "b.zarr", XB, YB, CHUNK, attrs={"block_size": size})
    ds = fit_interleaved(a, b, alpha=0.3, start=start, block_size=block, client=client,
                         segment_bytes=3_000)
    est = InterleavedKF4LLSRegressor(alpha=0.3, start=start, block_size=size)
    labels = np.array(["a"] * len(XA) + ["b"] * len(XB))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(np.vstack([XA, XB]), np.vstack([YA, YB]), population=labels)
    # both drop the same surplus: the longer population's blocks after the other ran out
    unused = ds.attrs["rows_unused_a"] + ds.attrs["rows_unused_b"]
    # start b: A may use as many blocks as B has; start a: one more, i.e. all of A's
    assert unused == (300 - -(-250 // size) * size if start == "b" else 0)
    said = [str(w.message) for w in caught if "rows were not used" in str(w.message)]
    assert said == ([f"InterleavedKF4LLSRegressor: {unused} of 550 rows were not used: "
                     "the alternation stops when the population due next has no block "
                     f"left (blocks: a={-(-300 // size)}, b={-(-250 // size)})"]
                    if unused else [])
    np.testing.assert_array_equal(ds.coef.values[-1], est.coef_.T)
    _same_state(est, ds, exact=True)
    assert est.n_steps_ == ds.attrs["n_blocks"]
    assert est.rows_seen_ == ds.attrs["n_rows"]
