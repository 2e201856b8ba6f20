"""The recursion contract, checked on every registered recursion (the style of
scikit-learn's ``parametrize_with_checks``), and the checks shown able to fail."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import streamlsq.kernels.recursions as recursions_package
from streamlsq.kernels.recursions import KF4LLS, RLS
from streamlsq.kernels.recursions.checks import (
    check_fold_equals_updates,
    check_inputs_unchanged,
    check_scan_equals_sequential,
    check_state_pickles,
    check_two_halves_equal_one_fit,
    recursion_checks,
)
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.kernels.recursions.registry import RECURSIONS


@pytest.mark.parametrize(
    "cls, check",
    [(cls, check) for cls in RECURSIONS.values() for _, check in recursion_checks(cls)],
    ids=[f"{name}-{check}" for name, cls in RECURSIONS.items()
         for check, _ in recursion_checks(cls)],
)
def test_registered_recursion_keeps_the_contract(cls, check):
    check()


def _classes_declaring_a_name() -> dict[str, type]:
    """Every class of a module of the package whose class body assigns ``name`` or its
    ``declaration`` (which gives the name; read off the source, not off the registry's
    rule), by that name, if it is a recursion."""
    found = {}
    for info in pkgutil.iter_modules(recursions_package.__path__):
        module = importlib.import_module(f"{recursions_package.__name__}.{info.name}")
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            targets = [t.id for stmt in node.body if isinstance(stmt, ast.Assign | ast.AnnAssign)
                       for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                       if isinstance(t, ast.Name)]
            cls = getattr(module, node.name)
            if ({"name", "declaration"} & set(targets) and issubclass(cls, Recursion)
                    and cls is not Recursion):
                assert cls.name not in found, f"{cls.name} declared twice"
                found[cls.name] = cls
    return found


def test_every_recursion_of_the_package_is_registered():
    declared = _classes_declaring_a_name()
    assert len(declared) >= 8  # KF4LLS, RLS, LMS, BFGS, IRMA and its baselines, interleaved
    for name, cls in declared.items():
        assert RECURSIONS[name] is cls, name
    # anything else registered comes from a plugin, never from a helper of the package
    for name in set(RECURSIONS) - set(declared):
        assert not RECURSIONS[name].__module__.startswith(recursions_package.__name__ + ".")
    assert list(RECURSIONS) == sorted(RECURSIONS)
    assert RECURSIONS.engines("kf4lls") == ("sequential", "scan")
    assert RECURSIONS.engines("lms") == ("sequential",)
    assert "interleaved-kf4lls" not in RECURSIONS.stream_methods()


# -- the checks can fail: each one against a recursion that breaks its rule ---------------
class _WritesIntoX(KF4LLS):
    name = "writes-into-x"

    def update(self, state, X, Y):
        X *= 1.0 + 1e-9  # the bug: scales the caller's rows in place
        return super().update(state, X, Y)


class _ForgetsLastBlock(KF4LLS):
    name = "forgets-last-block"

    def fold(self, state, X, Y, edges, first_step, record_every, rows_before=0):
        res = super().fold(state, X, Y, edges[:-1], first_step, record_every, rows_before)
        return res  # the bug: the last block of every piece is dropped


class _PickleLosesForgetting(RLS):
    name = "pickle-loses-forgetting"

    def __getstate__(self):  # the bug: a worker would receive another recursion
        return {**self.__dict__, "forgetting": 1.0}


class _ScanDrifts(KF4LLS):
    name = "scan-drifts"

    def finish(self, info):
        state = super().finish(info)
        return {**state, "psi": state["psi"] * (1 + 1e-6)}  # the bug: scan form disagrees


@pytest.mark.parametrize("broken, check", [
    (_WritesIntoX, check_inputs_unchanged),
    (_ForgetsLastBlock, check_fold_equals_updates),
    (_ForgetsLastBlock, check_two_halves_equal_one_fit),
    (_PickleLosesForgetting, check_state_pickles),
    (_ScanDrifts, check_scan_equals_sequential),
])
def test_a_broken_recursion_fails_its_check(broken, check):
    with pytest.raises((AssertionError, TypeError, AttributeError, ValueError)):
        check(broken)
