"""A new recursion is one new module and nothing else edited.

The test lays the package out in a temporary folder (``pipeline/`` as ``streamlsq``,
``kernels/`` as ``streamlsq.kernels``, as ``pyproject.toml`` maps them), writes one new
module into ``streamlsq/kernels/recursions/`` and runs Python with that folder first on
its path. Without any other file touched, the recursion is found by ``fit_stream`` (both
engines, against ``numpy.linalg.lstsq``), by ``streamlsq fit NAME`` and its help, by
``regressor_for`` and its generated estimator, in the public lists, by the contract
checks and in the docs' table of recursions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the whole new module: a ridge least squares from accumulated normal equations
MODULE = '''
"""A toy: ridge least squares from accumulated normal equations."""

import numpy as np

from streamlsq.kernels.linalg import spd_solve, symmetrize
from streamlsq.kernels.recursions.contract import Param, ScanRecursion


class ToyRidge(ScanRecursion):
    """(ΣXᵀX + penalty·I) ψ = ΣXᵀY, from the sums of the blocks seen."""

    name = "toy-ridge"
    summary = "ridge least squares from accumulated normal equations (a toy)"
    params = (Param("penalty", 0.0, "Ridge penalty added to X'X before the solve.", ge=0),)
    intercept_kind = "column"

    def init(self, n_features, n_targets, dtype=np.float64):
        return {"G": np.zeros((n_features, n_features), dtype),
                "b": np.zeros((n_features, n_targets), dtype),
                "rows": np.int64(0), "blocks": np.int64(0)}

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
'''

#: what the new module must show up in, checked in a Python that finds the laid-out package
CHECKS = '''
import json, sys, tempfile
from pathlib import Path
import numpy as np
import streamlsq
import streamlsq.kernels
import streamlsq.kernels.recursions as recursions
from streamlsq.estimators import regressor_for
from streamlsq.kernels.recursions.checks import recursion_checks

assert Path(streamlsq.__file__).is_relative_to(sys.argv[1]), streamlsq.__file__
out = {}
tmp = tempfile.mkdtemp()
path = streamlsq.simulate_stream(f"{tmp}/data.zarr", n_rows=30_000, n_features=4, seed=3)
X, Y = streamlsq.open_stream(path).read(0, 30_000)
reference = np.linalg.lstsq(X, Y, rcond=None)[0]
for engine in ("sequential", "scan"):
    ds = streamlsq.fit_stream(path, "toy-ridge", engine=engine, block_size=5_000,
                              out=f"{tmp}/fit-{engine}.zarr")
    out[engine] = float(np.max(np.abs(ds.coef.isel(step=-1).values - reference)))
    out[engine + "_method"] = streamlsq.open_result(f"{tmp}/fit-{engine}.zarr").attrs["method"]
cls = streamlsq.RECURSIONS["toy-ridge"]
out["checks"] = 0
for _name, check in recursion_checks(cls):
    check()
    out["checks"] += 1
est = regressor_for("toy-ridge")(block_size=1_000).fit(X[:, 1:], Y[:, 0])
out["estimator"] = type(est).__name__
lin = np.linalg.lstsq(np.column_stack([np.ones(len(X)), X[:, 1:]]), Y[:, 0], rcond=None)[0]
out["estimator_error"] = float(np.max(np.abs(np.r_[est.intercept_, est.coef_] - lin)))
out["lists"] = {
    "RECURSIONS": "toy-ridge" in streamlsq.RECURSIONS,
    "recursions.__all__": "ToyRidge" in recursions.__all__,
    "kernels.__all__": "ToyRidge" in streamlsq.kernels.__all__,
    "kernels.ToyRidge": streamlsq.kernels.ToyRidge is cls,
    "estimators.__all__": out["estimator"] in streamlsq.estimators.__all__,
    "streamlsq.__all__": out["estimator"] in streamlsq.__all__,
    "streamlsq.ToyRidgeRegressor": streamlsq.ToyRidgeRegressor is type(est),
}
sys.path.insert(0, sys.argv[2])
from recursions_table import recursions_table
out["docs_table"] = "`toy-ridge`" in recursions_table()
print(json.dumps(out))
'''


def _lay_out_package(target: Path) -> Path:
    """The installed layout of the package (pyproject's package-dir), as copies."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    top = target / "streamlsq"
    shutil.copytree(ROOT / mapping["streamlsq"], top,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / mapping["streamlsq.kernels"], top / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return top


@pytest.fixture(scope="module")
def package_with_toy(tmp_path_factory) -> tuple[Path, dict]:
    site = tmp_path_factory.mktemp("site")
    top = _lay_out_package(site)
    (top / "kernels" / "recursions" / "toy_ridge.py").write_text(textwrap.dedent(MODULE))
    env = dict(os.environ, PYTHONPATH=str(site))
    return site, env


def _python(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_one_new_module_reaches_every_entry_point(package_with_toy):
    site, env = package_with_toy
    res = _python(env, "-c", CHECKS, str(site), str(ROOT / "docs" / "_hooks"))
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["sequential"] < 1e-10 and got["scan"] < 1e-10, got
    assert got["sequential_method"] == got["scan_method"] == "toy-ridge"
    assert got["checks"] >= 5
    assert got["estimator"] == "ToyRidgeRegressor" and got["estimator_error"] < 1e-9
    assert all(got["lists"].values()), got["lists"]
    assert got["docs_table"]


def test_one_new_module_is_a_command_with_its_help(package_with_toy, tmp_path):
    site, env = package_with_toy
    listing = _python(env, "-m", "streamlsq.cli", "fit", "--help")
    assert listing.returncode == 0 and "toy-ridge" in listing.stdout, listing.stderr
    assert "(a toy)" in " ".join(listing.stdout.split())  # the summary, however wrapped
    help_text = _python(env, "-m", "streamlsq.cli", "fit", "toy-ridge", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--penalty" in help_text.stdout and "--engine" in help_text.stdout
    data = tmp_path / "data.zarr"
    made = _python(env, "-m", "streamlsq.cli", "simulate", "stream", "--out", str(data),
                   "--rows", "20000", "--features", "3", "--seed", "1")
    assert made.returncode == 0, made.stderr
    fitted = _python(env, "-m", "streamlsq.cli", "fit", "toy-ridge", str(data), "--out",
                     str(tmp_path / "fit.zarr"), "--engine", "scan", "--penalty", "0")
    assert fitted.returncode == 0, fitted.stderr
    assert "toy-ridge (scan)" in fitted.stdout
    refused = _python(env, "-m", "streamlsq.cli", "fit", "toy-ridge", str(data), "--out",
                      str(tmp_path / "bad.zarr"), "--penalty", "-1")
    assert refused.returncode == 2 and "penalty must be a finite number >= 0" in \
        refused.stderr, refused.stderr
