"""The declarations of the built-in recursions (``kernels/recursions/declarations.py``):
one per recursion class of the package, each naming its class, the class's attributes
taken from it; the registry answers from them without importing a kernel."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

import streamlsq.kernels.recursions as recursions_package
from streamlsq.kernels.recursions.contract import Param, Recursion, ScanRecursion
from streamlsq.kernels.recursions.declarations import (
    DECLARATIONS,
    SUPPORT_MODULES,
    RecursionDeclaration,
)
from streamlsq.kernels.recursions.registry import RECURSIONS, recursions_defined_in

PACKAGE = recursions_package.__name__


def _modules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(recursions_package.__path__)]


def _recursion_classes_of_the_package() -> dict[str, type]:
    """Every recursion class a module of the package defines with a name of its own, by
    ``module:Class`` (every module imported)."""
    return {f"{cls.__module__}:{cls.__qualname__}": cls for short in _modules()
            for cls in recursions_defined_in(importlib.import_module(f"{PACKAGE}.{short}"))}


def test_every_recursion_class_of_the_package_has_its_declaration():
    classes = _recursion_classes_of_the_package()
    assert len(classes) >= 8
    missing = sorted(path for path, cls in classes.items()
                     if DECLARATIONS.get(cls.name) is None
                     or DECLARATIONS[cls.name].class_path != path)
    assert not missing, f"no declaration in declarations.py names {missing}"


def test_every_declaration_names_its_class():
    classes = _recursion_classes_of_the_package()
    for name, declaration in DECLARATIONS.items():
        assert declaration.name == name
        assert declaration.class_path in classes, f"{name}: no class {declaration.class_path}"
        cls = declaration.load()
        assert cls is classes[declaration.class_path]
        assert vars(cls)["declaration"] is declaration


def test_every_module_of_the_package_is_accounted_for():
    # a module that neither holds declared recursions nor is listed as holding none is
    # imported when the recursions are listed: with its kernels' libraries
    declared = {d.module for d in DECLARATIONS.values()}
    for short in _modules():
        assert (f"{PACKAGE}.{short}" in declared) != (short in SUPPORT_MODULES), short
    for short in SUPPORT_MODULES:
        module = importlib.import_module(f"{PACKAGE}.{short}")
        assert recursions_defined_in(module) == [], short


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_a_class_has_its_declarations_attributes(name):
    declaration = DECLARATIONS[name]
    cls = RECURSIONS[name]
    assert cls.declaration is declaration and RECURSIONS.declaration(name) is declaration
    for attribute in RecursionDeclaration.ATTRIBUTES:
        assert getattr(cls, attribute) == getattr(declaration, attribute), attribute
    assert cls.n_inputs == len(declaration.inputs)
    assert declaration.scan == issubclass(cls, ScanRecursion)
    assert RECURSIONS.engines(name) == (("sequential", "scan") if declaration.scan
                                        else ("sequential",))
    assert declaration.class_name == cls.__name__ and declaration.module == cls.__module__
    assert RecursionDeclaration.of(cls) == declaration


def test_a_declared_attribute_is_written_once():
    kf4lls = DECLARATIONS["kf4lls"]
    with pytest.raises(TypeError, match="takes summary from its declaration 'kf4lls'"):
        type("Twice", (ScanRecursion,), {"declaration": kf4lls, "summary": "again"})
    with pytest.raises(TypeError, match="names the class .*kf4lls:KF4LLS, not"):
        type("Other", (ScanRecursion,), {"declaration": kf4lls, "__module__": __name__})
    lms = DECLARATIONS["lms"]
    with pytest.raises(TypeError, match="says scan=False, but LMS derives from ScanRecursion"):
        type("LMS", (ScanRecursion,), {"declaration": lms, "__module__": lms.module})


def test_a_subclass_does_not_inherit_its_base_classes_declaration():
    KF4LLS = RECURSIONS["kf4lls"]

    class Halved(KF4LLS):
        name = "halved-kf4lls"
        summary = "a toy"

    assert Halved.declaration is None and KF4LLS.declaration is DECLARATIONS["kf4lls"]
    derived = RecursionDeclaration.of(Halved)
    assert (derived.name, derived.summary, derived.params, derived.scan,
            derived.weighted) == ("halved-kf4lls", "a toy", KF4LLS.params, True, True)
    # the help of a subclass is its own: the base class's does not describe it
    assert derived.description == "" and derived.examples == ()


def test_a_recursion_registered_by_hand_is_declared_by_its_attributes():
    class Mean(Recursion):
        """The mean of the targets (a toy)."""

        name = "toy-mean"
        summary = "the mean of the targets (a toy)"
        params = (Param("scale", 1.0, "factor", gt=0),)
        intercept_kind = "basis"

        def init(self, n_features, n_targets, dtype=np.float64):
            return {"sum": np.zeros((1, n_targets), dtype)}

    with RECURSIONS.registered(Mean):
        declaration = RECURSIONS.declaration("toy-mean")
        assert RECURSIONS["toy-mean"] is Mean
        assert declaration == RecursionDeclaration(
            name="toy-mean", summary="the mean of the targets (a toy)",
            class_path=f"{__name__}:{Mean.__qualname__}", params=Mean.params,
            intercept_kind="basis")
        assert declaration.class_name == "Mean" and RECURSIONS.engines("toy-mean") == (
            "sequential",)
        assert "toy-mean" in RECURSIONS and "toy-mean" in RECURSIONS.stream_methods()
        with pytest.raises(ValueError, match="'kf4lls' is registered already .KF4LLS."):
            RECURSIONS.register(type("Again", (Mean,), {"name": "kf4lls"}))
    assert "toy-mean" not in RECURSIONS


PROBE = r'''
import json, sys
from streamlsq.kernels.recursions.registry import RECURSIONS

names = list(RECURSIONS)
declared = {name: [RECURSIONS.declaration(name).summary, list(RECURSIONS.engines(name)),
                   RECURSIONS.declaration(name).class_name] for name in names}
listed = {"names": names, "stream_methods": RECURSIONS.stream_methods(), "declared": declared,
          "kf4lls": "kf4lls" in RECURSIONS, "nothing": "no-such-method" in RECURSIONS}
libraries = sorted({m.split(".")[0] for m in sys.modules} & {"numba", "scipy"})
kf4lls = RECURSIONS["kf4lls"]  # the class: imported now
listed["imported"] = [libraries, kf4lls.__name__, "numba" in sys.modules]
print(json.dumps(listed))
'''


def test_the_registry_lists_and_declares_without_importing_a_kernel():
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["names"] == sorted(DECLARATIONS)  # no plugin installed here
    assert got["stream_methods"] == sorted(n for n, d in DECLARATIONS.items()
                                           if len(d.inputs) == 1)
    assert got["declared"]["interleaved-kf4lls"] == [
        "interleaved KF4LLS over two populations A B", ["sequential", "scan"],
        "InterleavedKF4LLS"]
    assert got["declared"]["lms"][1:] == [["sequential"], "LMS"]
    assert got["kf4lls"] is True and got["nothing"] is False
    # nothing of Numba or SciPy until a class was asked for; then its kernels' libraries:
    # SciPy, and Numba only when a fold runs the compiled Givens kernel (givens.py)
    assert got["imported"] == [[], "KF4LLS", False]
