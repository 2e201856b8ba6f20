"""One class and one registry line make a recursion available everywhere: to
``fit_stream`` (both engines), to ``streamlsq fit NAME``, as a scikit-learn estimator
and to the contract checks. Shown with a toy recursion defined here."""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_allclose

from streamlsq import fit_stream, open_result, regressor_for
from streamlsq.cli.main import main
from streamlsq.errors import InputError
from streamlsq.kernels.linalg import spd_solve, symmetrize
from streamlsq.kernels.recursions.checks import recursion_checks
from streamlsq.kernels.recursions.contract import Param, ScanRecursion
from streamlsq.kernels.recursions.registry import RECURSIONS

from conftest import lstsq, read_all

# the workers of the session's cluster unpickle the toy by value (it lives in this file)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class NormalEquations(ScanRecursion):
    """Least squares from accumulated normal equations, (ΣXᵀX + penalty·I)⁻¹ΣXᵀY."""

    name = "toy-normal-equations"
    summary = "least squares from accumulated normal equations (a toy)"
    params = (Param("penalty", 0.0, "Ridge penalty added to XᵀX before the solve."),)

    def __init__(self, penalty: float = 0.0):
        if not np.isfinite(penalty) or penalty < 0:
            raise ValueError(f"penalty must be a finite number >= 0, got {penalty!r}")
        self.penalty = float(penalty)

    def init(self, n_features, n_targets, dtype=np.float64):
        return {"G": np.zeros((n_features, n_features), dtype), "b": np.zeros(
            (n_features, n_targets), dtype), "rows": np.int64(0), "blocks": np.int64(0)}

    def update(self, state, X, Y):
        return {"G": symmetrize(state["G"] + X.T @ X), "b": state["b"] + X.T @ Y,
                "rows": np.int64(state["rows"] + len(X)),
                "blocks": np.int64(state["blocks"] + 1)}

    def coef(self, state):
        G = state["G"] + self.penalty * np.eye(len(state["G"]))
        return spd_solve(G, state["b"]) if state["rows"] else np.zeros_like(state["b"])

    def state_dims(self):
        return {"G": ("feature", "feature_"), "b": ("feature", "target"), "rows": (),
                "blocks": ()}

    def to_info(self, state):
        return dict(state)

    def summarize(self, X, Y, edges, cuts):
        out, start = [], 0
        for c in cuts:
            a, b = int(edges[start]), int(edges[c])
            out.append({"G": X[a:b].T @ X[a:b], "b": X[a:b].T @ Y[a:b],
                        "rows": np.int64(b - a), "blocks": np.int64(c - start)})
            start = int(c)
        return out

    def scan(self, info, summaries):
        out = []
        for s in summaries:
            info = {k: info[k] + s[k] for k in ("G", "b", "rows", "blocks")}
            info["G"] = symmetrize(info["G"])
            out.append(info)
        return out

    def finish(self, info):
        return dict(info)


@pytest.fixture
def toy():
    with RECURSIONS.registered(NormalEquations):  # the one registry line
        yield NormalEquations.name


def test_toy_keeps_the_contract(toy):
    for _name, check in recursion_checks(RECURSIONS[toy]):
        check()


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_toy_through_fit_stream_equals_lstsq(toy, stream_200k, client, engine):
    ds = fit_stream(stream_200k, toy, engine=engine, block_size=10_000, client=client)
    X, Y = read_all(stream_200k)
    assert_allclose(ds.coef.isel(step=-1).values, lstsq(X, Y), rtol=1e-9, atol=1e-12)
    assert ds.attrs["method"] == toy and '"penalty": 0.0' in ds.attrs["parameters"]
    with pytest.raises(InputError, match="toy-normal-equations: penalty must be a finite"):
        fit_stream(stream_200k, toy, penalty=-1.0, client=client)


def test_toy_through_the_command_line(toy, stream_200k, client, tmp_path):
    out = tmp_path / "toy.zarr"
    runner = CliRunner()
    help_text = runner.invoke(main, ["fit", "--help"]).output
    assert toy in help_text and "(a toy)" in help_text
    assert "--penalty" in runner.invoke(main, ["fit", toy, "--help"]).output
    res = runner.invoke(main, ["fit", toy, str(stream_200k), "--out", str(out), "--engine",
                               "scan", "--penalty", "0", "--scheduler",
                               client.scheduler.address])
    assert res.exit_code == 0, res.output
    assert f"{toy} (scan)" in res.output
    X, Y = read_all(stream_200k)
    fitted = open_result(out)
    assert_allclose(fitted.coef.isel(step=-1).values, lstsq(X, Y), rtol=1e-9)


def test_toy_as_a_scikit_learn_estimator(toy):
    from sklearn.base import clone
    from sklearn.linear_model import LinearRegression

    cls = regressor_for(toy)
    assert cls.__name__ == "ToyNormalEquationsRegressor"
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 4))
    y = X @ rng.standard_normal(4) + 1.5 + 0.1 * rng.standard_normal(200)
    est = cls(block_size=25).fit(X, y)
    ref = LinearRegression().fit(X, y)
    assert_allclose(est.coef_, ref.coef_, rtol=1e-10)
    assert_allclose(est.intercept_, ref.intercept_, rtol=1e-10)
    assert set(est.get_params()) == {"penalty", "block_size", "first_block_size",
                                     "fit_intercept"}
    assert clone(est).get_params() == est.get_params()
    assert regressor_for(toy) is cls  # built once
