"""The registry finds the recursions by itself: those of the package, and a plugin's
through its ``streamlsq.recursions`` entry points.

The plugin is a folder on ``PYTHONPATH`` holding one module and a ``*.dist-info`` folder
(``METADATA`` and ``entry_points.txt``), as an installed distribution has; a subprocess
imports streamlsq with it, so the registry of this test process never sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose

PLUGIN = '''
"""A plugin of streamlsq: sign-error LMS, W <- W + rate * x' sign(y - x W), row by row."""

import numpy as np

from streamlsq.kernels.recursions.contract import Param, Recursion
from streamlsq.kernels.recursions.kf4lls import KF4LLS  # imported: not this module's own


class _Rowwise(Recursion):
    """A helper without a name of its own: never registered."""

    def coef(self, state):
        return state["W"]

    def state_dims(self):
        return {"W": ("feature", "target"), "rows": ()}


class SignLMS(_Rowwise):
    """Sign-error LMS: W <- W + rate * x' sign(y - x W), sample by sample."""

    name = "sign-lms"
    summary = "sign-error LMS (a plugin)"
    params = (Param("rate", 0.01, "Step size rate > 0.", gt=0),)

    def init(self, n_features, n_targets, dtype=np.float64):
        return {"W": np.zeros((n_features, n_targets), dtype), "rows": np.int64(0)}

    def update(self, state, X, Y):
        W = state["W"].copy()
        for x, y in zip(X, Y):
            W += self.rate * np.outer(x, np.sign(y - x @ W))
        return {"W": W, "rows": np.int64(state["rows"] + len(X))}


'''

EXTRA = '''
"""More of the plugin: an entry point names one class of this module, not the module."""

from streamlsq.kernels.recursions.contract import Param
from sign_lms_plugin import SignLMS


class HalvedSignLMS(SignLMS):
    name = "halved-sign-lms"
    summary = "sign-error LMS from half the step (a plugin)"
    params = (Param("rate", 0.005, "Step size rate > 0.", gt=0),)


class UnlistedSignLMS(SignLMS):
    name = "unlisted-sign-lms"
    summary = "a recursion no entry point names"
'''

ENTRY_POINTS = """\
[streamlsq.recursions]
sign = sign_lms_plugin
halved = sign_lms_extra:HalvedSignLMS
broken = no_such_module_of_streamlsq
"""

PROBE = r'''
import json, pickle, sys, warnings


def _refusal(make):
    try:
        make()
    except ValueError as exc:
        return exc
    return None


import numpy as np

import streamlsq.kernels
from streamlsq.kernels import BadRowError, block_edges

before = sorted(m for m in sys.modules if m.startswith("streamlsq.kernels.recursions.")
                or m == "numba")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from streamlsq.kernels.recursions import registry

    fresh = registry.Registry()
    names = list(fresh)
from streamlsq.kernels.recursions.checks import recursion_checks

cls = fresh["sign-lms"]
for _, check in recursion_checks(cls):
    check()
rng = np.random.default_rng(4)
X, Y = rng.standard_normal((40, 2)), rng.standard_normal((40, 1))
rec = cls(rate=0.05)
fold = rec.fold(rec.init(2, 1), X, Y, np.array([0, 15, 40]), 1, 1)

import streamlsq.estimators as estimators
import streamlsq.kernels as kernels
from click.testing import CliRunner
from streamlsq.cli.main import main

est = estimators.regressor_for("sign-lms")(rate=0.05, fit_intercept=False).fit(X, Y[:, 0])
again = pickle.loads(pickle.dumps(est))
print(json.dumps({
    "before": before,
    "names": names,
    "warnings": [str(w.message) for w in caught],
    "same_class_in_both": registry.RECURSIONS["sign-lms"] is cls,
    "by_class_name": kernels.SignLMS is cls,
    "in_all": ["SignLMS" in kernels.__all__, "HalvedSignLMS" in kernels.__all__,
               "_Rowwise" in kernels.__all__, "SignLmsRegressor" in estimators.__all__],
    "estimator": [type(est).__name__, estimators.SignLmsRegressor is type(est)],
    "coefs": fold.coefs.tolist(),
    "estimator_coef": est.coef_.tolist(),
    "unpickled_coef": again.coef_.tolist(),
    "rate_refused": str(_refusal(lambda: cls(rate=0.0))),
    "help": CliRunner().invoke(main, ["fit", "sign-lms", "--help"]).output,
}))
'''


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin")
    (root / "sign_lms_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (root / "sign_lms_extra.py").write_text(EXTRA, encoding="utf-8")
    info = root / "sign_lms_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sign-lms-plugin\n"
                                   "Version: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, "-c", PROBE], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_plugin_is_found_with_the_package_recursions(plugin_run):
    names = plugin_run["names"]
    assert {"sign-lms", "halved-sign-lms", "kf4lls", "rls", "lms", "irma"} <= set(names)
    assert names == sorted(names)
    assert names.count("kf4lls") == 1  # the plugin's import of KF4LLS is not a second entry
    assert "unlisted-sign-lms" not in names  # its module is no entry point, one class is
    # the broken entry point is reported and skipped, the others registered
    assert any("'broken'" in w and "no_such_module_of_streamlsq" in w
               for w in plugin_run["warnings"])


def test_the_kernels_public_names_wait_for_the_first_use(plugin_run):
    # the package and its helpers import neither the registry, nor a recursion, nor Numba
    assert plugin_run["before"] == ["streamlsq.kernels.recursions.contract",
                                    "streamlsq.kernels.recursions.params"]


def test_a_plugin_recursion_keeps_the_contract_and_its_numbers(plugin_run):
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((40, 2)), rng.standard_normal((40, 1))
    W, expected = np.zeros((2, 1)), []
    for a, b in ((0, 15), (15, 40)):  # the update written out, block by block
        for x, y in zip(X[a:b], Y[a:b], strict=True):
            W = W + 0.05 * np.outer(x, np.sign(y - x @ W))
        expected.append(W.copy())
    assert_allclose(plugin_run["coefs"], expected, rtol=1e-14, atol=1e-15)
    # the generated estimator folds the same rows as one block: the same W, pickled too
    assert_allclose(plugin_run["estimator_coef"], expected[-1][:, 0], rtol=1e-14, atol=1e-15)
    assert plugin_run["unpickled_coef"] == plugin_run["estimator_coef"]
    assert plugin_run["rate_refused"] == "rate must be a finite number > 0, got 0.0"


def test_a_plugin_recursion_is_public_everywhere(plugin_run):
    assert plugin_run["same_class_in_both"] is True  # a fresh registry and the global one
    assert plugin_run["by_class_name"] is True
    assert plugin_run["in_all"] == [True, True, False, True]
    assert plugin_run["estimator"] == ["SignLmsRegressor", True]
    assert "Sign-error LMS (a plugin) on the stream store DATA." in plugin_run["help"]
    assert "--rate FLOAT" in plugin_run["help"] and "Step size rate > 0." in plugin_run["help"]
