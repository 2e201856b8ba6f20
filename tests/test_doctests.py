"""The examples in the docstrings run as written (doctests), and every public name has one.

The modules are imported by their package names (``streamlsq.*``), as a user imports
them; examples that need a Dask cluster use the session's client, which is the default
client of this process (see ``streamlsq.dask_client``).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import streamlsq
import streamlsq.kernels

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules() -> list[str]:
    names = []
    for package in (streamlsq, streamlsq.kernels):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return sorted(set(names))


@pytest.mark.parametrize("module", _modules())
def test_docstring_examples_run(module, client):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=OPTIONS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {module}"


PUBLIC = [(streamlsq, name) for name in streamlsq.__all__ if name != "__version__"] + [
    (streamlsq.kernels, name) for name in streamlsq.kernels.__all__
    if not isinstance(getattr(streamlsq.kernels, name), type(streamlsq)) and name != "State"]


@pytest.mark.parametrize("package, name", PUBLIC, ids=lambda v: getattr(v, "__name__", v))
def test_every_public_name_has_an_example(package, name):
    obj = getattr(package, name)
    doc = obj.__doc__ if not isinstance(obj, streamlsq.kernels.recursions.registry.Registry) \
        else type(obj).__doc__
    assert doc and ">>>" in doc, f"{package.__name__}.{name} has no runnable example"
