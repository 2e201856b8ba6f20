"""KF4LLS's two solvers are two forms with one interface, chosen when the recursion is
built: each gives the exponentially weighted least-squares fit, by its updates, its fold
and its scan form."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from streamlsq.kernels.recursions.contract import block_edges
from streamlsq.kernels.recursions.interleaved import InterleavedKF4LLS
from streamlsq.kernels.recursions.kf4lls import KF4LLS, RLS, NormalEquationsLS
from streamlsq.kernels.recursions.sqrtinfo import SqrtInfoLS

FORMS = {"qr": SqrtInfoLS, "normal": NormalEquationsLS}


def _public(cls) -> dict[str, list[str]]:
    return {name: list(inspect.signature(member).parameters)
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_the_forms_have_one_interface():
    qr, normal = _public(SqrtInfoLS), _public(NormalEquationsLS)
    contract = {"init", "update", "coef", "fold", "state_dims", "state_diagnostics", "to_info",
                "summarize", "scan", "finish", "condition", "digits", "rows_summary",
                "combine", "interval_weights"}
    assert contract <= set(qr) and contract <= set(normal)
    assert {name: qr[name] for name in contract} == {name: normal[name] for name in contract}


@pytest.mark.parametrize("solver", FORMS)
@pytest.mark.parametrize("recursion", [KF4LLS, RLS, InterleavedKF4LLS])
def test_the_solver_chooses_the_form_and_a_pickle_rebuilds_it(recursion, solver):
    rec = recursion(solver=solver)
    assert type(rec.form) is FORMS[solver]
    copy = pickle.loads(pickle.dumps(rec))
    assert type(copy.form) is FORMS[solver] and copy.form is not rec.form
    assert vars(copy.form) == vars(rec.form) and repr(copy) == repr(rec)


def _weighted_lstsq(X, Y, edges, g, upto):
    """argmin Σ_j g^(upto−j) ‖Y_j − X_j ψ‖² over blocks 1..upto, by lstsq on scaled rows."""
    blocks = np.repeat(np.arange(1, upto + 1), np.diff(edges[:upto + 1]))
    w = np.sqrt(g ** (upto - blocks))[:, None]
    n = edges[upto]
    return np.linalg.lstsq(w * X[:n], w * Y[:n], rcond=None)[0]


@pytest.mark.parametrize("solver", FORMS)
@pytest.mark.parametrize("forgetting", [1.0, 0.8])
def test_each_form_is_the_weighted_least_squares_fit(solver, forgetting):
    rng = np.random.default_rng(21)
    X, Y = rng.standard_normal((300, 4)), rng.standard_normal((300, 2))
    edges = block_edges(300, 23, 40)
    rec = KF4LLS(forgetting=forgetting, solver=solver)
    fold = rec.fold(rec.init(4, 2), X, Y, edges, 1, 1)
    n_blocks = len(edges) - 1
    summaries = rec.summarize(X, Y, edges, np.arange(1, n_blocks + 1))
    infos = rec.scan(rec.to_info(rec.init(4, 2)), summaries)
    for step in range(1, n_blocks + 1):
        expected = _weighted_lstsq(X, Y, edges, forgetting, step)
        assert_allclose(fold.coefs[step - 1], expected, rtol=1e-10, atol=1e-12)
        assert_allclose(rec.coef(rec.finish(infos[step - 1])), expected, rtol=1e-10,
                        atol=1e-12)
    attrs = rec.result_attrs(fold.state)
    kappa = np.linalg.cond(np.sqrt(forgetting ** (n_blocks - np.repeat(
        np.arange(1, n_blocks + 1), np.diff(edges))))[:, None] * X)
    assert_allclose(attrs["condition_number"], kappa, rtol=1e-8)
    assert 10 < attrs["digits_trusted"] <= 15.7
