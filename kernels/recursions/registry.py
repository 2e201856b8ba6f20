"""The registry of recursions: every recursion streamlsq can run, by name.

The registry finds the recursions by itself: every module of the package
:mod:`streamlsq.kernels.recursions`, and every module or class named by an entry point
of the group ``streamlsq.recursions`` of an installed distribution (a plugin). A
module contributes each :class:`~.contract.Recursion` subclass it defines that declares
its own ``name`` in its class body: not a helper base class without one, nor a class it
imports from another module. There is no list to edit.

Everything a user reaches a recursion through is derived from this table and from the
recursion's own declarations (``name``, ``summary``, ``description``, ``examples``,
``params``, ``inputs``, its scan base class): ``fit_stream`` and ``streamlsq fit NAME``
with one option per parameter, the scikit-learn estimator
(:func:`streamlsq.estimators.regressor_for`), the result store's attributes, and the
contract checks the test suite runs over every entry (:mod:`.checks`).

A plugin declares its recursions in its packaging metadata, e.g. in ``pyproject.toml``::

    [project.entry-points."streamlsq.recursions"]
    sign-lms = "sign_lms"                  # a module: its recursions
    other = "my_package.recursions:Other"  # or one class
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import threading
import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from types import ModuleType

from streamlsq.kernels.recursions.contract import Param, Recursion, ScanRecursion

__all__ = ["ENTRY_POINT_GROUP", "RECURSIONS", "Registry", "recursions_defined_in"]

#: the entry-point group of plugins: each entry point names a module or a recursion class
ENTRY_POINT_GROUP = "streamlsq.recursions"


def recursions_defined_in(module: ModuleType) -> list[type[Recursion]]:
    """The recursion classes ``module`` defines that declare their own ``name``."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Recursion) and obj is not Recursion
            and obj.__module__ == module.__name__ and "name" in vars(obj)]


class Registry(Mapping):
    """Recursion classes by ``name``, listed in order of name (a read-only mapping).

    ``Registry()`` finds the recursions of ``package`` and of the installed plugins of
    the entry-point ``group`` when it is first used, or by :meth:`find` (see the module
    docstring); :meth:`register` adds one more by hand (tests, experiments).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.registry import RECURSIONS
    >>> RECURSIONS.stream_methods()
    ['bfgs', 'irma', 'irma-gd', 'irma-rls', 'kf4lls', 'lms', 'rls']
    >>> RECURSIONS.engines("rls")
    ('sequential', 'scan')
    """

    def __init__(self, package: str = "streamlsq.kernels.recursions",
                 group: str = ENTRY_POINT_GROUP):
        self._classes: dict[str, type[Recursion]] = {}
        self._package, self._group = package, group
        self._found = self._finding = False
        # another thread waits while the first one imports the modules; the thread that
        # imports may come back (a plugin module that registers a class by hand)
        self._lock = threading.RLock()

    # -- discovery -------------------------------------------------------------------
    def find(self) -> None:
        """Find the recursions now (the first use of the registry does it anyway)."""
        self._discover()

    def _discover(self) -> None:
        with self._lock:
            if self._found or self._finding:
                return
            self._finding = True
            try:
                package = importlib.import_module(self._package)
                for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                    for cls in recursions_defined_in(importlib.import_module(info.name)):
                        self._add(cls)
                for point in entry_points(group=self._group):
                    self._add_plugin(point)
                self._found = True
            finally:
                self._finding = False

    def _add_plugin(self, point) -> None:
        """The recursions of one entry point; a plugin that fails is reported and skipped,
        so that one broken installation does not stop every recursion."""
        try:
            target = point.load()
            found = (recursions_defined_in(target) if isinstance(target, ModuleType)
                     else [target])
            for cls in found:
                self._add(cls)
        except Exception as exc:  # noqa: BLE001 - any failure of a third party's code
            warnings.warn(f"the {self._group} entry point {point.name!r} ({point.value}) "
                          f"was not registered: {type(exc).__name__}: {exc}",
                          RuntimeWarning, stacklevel=3)

    def _add(self, cls: type[Recursion]) -> None:
        if self._classes.get(getattr(cls, "name", None)) is not cls:  # once per class
            self._register(cls)

    def _register(self, cls: type[Recursion]) -> type[Recursion]:
        if not (isinstance(cls, type) and issubclass(cls, Recursion)):
            raise TypeError(f"only Recursion subclasses can be registered, got {cls!r}")
        name = getattr(cls, "name", "")
        if not name or name == Recursion.name:
            raise ValueError(f"{cls.__name__} must declare a name")
        if name in self._classes:
            raise ValueError(f"a recursion named {name!r} is registered already "
                             f"({self._classes[name].__name__})")
        seen = set()
        for p in cls.params:
            if not isinstance(p, Param):
                raise TypeError(f"{cls.__name__}.params must hold Param objects, got {p!r}")
            if p.name in seen:
                raise ValueError(f"{cls.__name__} declares parameter {p.name!r} twice")
            seen.add(p.name)
        self._classes[name] = cls
        return cls

    # -- by hand -----------------------------------------------------------------------
    def register(self, cls: type[Recursion]) -> type[Recursion]:
        """Add ``cls`` under ``cls.name``; refuse a taken name or a malformed declaration."""
        self._discover()
        return self._register(cls)

    def unregister(self, name: str) -> None:
        self._discover()
        del self._classes[name]

    @contextlib.contextmanager
    def registered(self, cls: type[Recursion]) -> Iterator[type[Recursion]]:
        """Register ``cls`` for the duration of a ``with`` block (tests, experiments)."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(cls.name)

    # -- the mapping ---------------------------------------------------------------------
    def __getitem__(self, name: str) -> type[Recursion]:
        self._discover()
        return self._classes[name]

    def __iter__(self):
        self._discover()
        return iter(sorted(self._classes))

    def __len__(self) -> int:
        self._discover()
        return len(self._classes)

    def stream_methods(self) -> list[str]:
        """Names of the recursions that read one stream store (``fit_stream``, ``fit NAME``)."""
        return [n for n in self if len(self[n].inputs) == 1]

    def engines(self, name: str) -> tuple[str, ...]:
        """The engines that can run ``name``: sequential always, scan for a ScanRecursion."""
        scan = issubclass(self[name], ScanRecursion)
        return ("sequential", "scan") if scan else ("sequential",)

    def by_class_name(self, class_name: str) -> type[Recursion] | None:
        """The registered recursion whose class is called ``class_name``, or None."""
        return next((cls for cls in self.values() if cls.__name__ == class_name), None)


#: the recursions of this package and of the installed plugins. This one finds them as
#: soon as its module is imported, as the imports of every recursion module here always
#: did: a process that imports the registry runs recursions (a fit, a command, a Dask
#: worker), and loads their libraries (Numba, SciPy) then rather than in the middle of a
#: run. The package's public names (:mod:`streamlsq.kernels`) import it on first use.
RECURSIONS = Registry()
RECURSIONS.find()
