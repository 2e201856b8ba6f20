"""The registry of recursions: every recursion streamlsq can run, by name.

The registry knows the recursions of the package :mod:`streamlsq.kernels.recursions` by
their declarations (:mod:`.declarations`: name, summary, parameters, ..., and the class
that runs each), without importing their kernels (Numba, SciPy): the command line builds
``streamlsq fit NAME`` and checks its options from ``RECURSIONS.declaration(NAME)``, and
``RECURSIONS[NAME]`` imports the class when a fit runs. It also finds by itself every
other recursion: the classes defined in a module of the package that no declaration
names (imported when the recursions are listed or an unknown name is asked for), and
every module or class named by an entry point of the group ``streamlsq.recursions`` of
an installed distribution (a plugin, imported then too). Such a module contributes each
:class:`~.contract.Recursion` subclass it defines that declares its own ``name`` in its
class body: not a helper base class without one, nor a class it imports from another
module; its declaration is read off its class attributes
(:meth:`~.declarations.RecursionDeclaration.of`).

Everything a user reaches a recursion through is derived from this table and from the
recursions' declarations (``name``, ``summary``, ``description``, ``examples``,
``params``, ``inputs``, the scan form): ``fit_stream`` and ``streamlsq fit NAME``
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
from types import ModuleType
from typing import TYPE_CHECKING

from streamlsq.kernels.recursions.declarations import RecursionDeclaration
from streamlsq.kernels.recursions.params import Param

if TYPE_CHECKING:
    from streamlsq.kernels.recursions.contract import Recursion

__all__ = ["ENTRY_POINT_GROUP", "RECURSIONS", "Registry", "recursions_defined_in"]

#: the entry-point group of plugins: each entry point names a module or a recursion class
ENTRY_POINT_GROUP = "streamlsq.recursions"


def recursions_defined_in(module: ModuleType) -> list[type[Recursion]]:
    """The recursion classes ``module`` defines that declare their own ``name``."""
    # here, not at the top: the registry's declarations (a command's help) need no numpy
    from streamlsq.kernels.recursions.contract import Recursion

    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Recursion) and obj is not Recursion
            and obj.__module__ == module.__name__ and "name" in vars(obj)]


class Registry(Mapping):
    """Recursion classes by ``name``, listed in order of name (a read-only mapping), and
    their declarations (:meth:`declaration`).

    ``Registry()`` reads the declarations of ``package`` (its module ``declarations``:
    ``DECLARATIONS`` and ``SUPPORT_MODULES``) when it is first used, and finds the other
    recursions of the package and those of the installed plugins of the entry-point
    ``group`` when the recursions are listed, an unknown name is asked for, or by
    :meth:`find` (see the module docstring); :meth:`register` adds one more by hand
    (tests, experiments). A declared recursion's class is imported when it is first
    looked up (``RECURSIONS[name]``).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.registry import RECURSIONS
    >>> RECURSIONS.stream_methods()
    ['bfgs', 'irma', 'irma-gd', 'irma-rls', 'kf4lls', 'lms', 'rls']
    >>> RECURSIONS.engines("rls")
    ('sequential', 'scan')
    >>> RECURSIONS.declaration("rls").summary
    'RLS with a forgetting factor (per block, or per sample with --block-size 1)'
    """

    def __init__(self, package: str = "streamlsq.kernels.recursions",
                 group: str = ENTRY_POINT_GROUP):
        #: the declaration of every recursion known so far, and the classes imported so far
        self._declarations: dict[str, RecursionDeclaration] = {}
        self._classes: dict[str, type[Recursion]] = {}
        self._package, self._group = package, group
        self._support: frozenset[str] = frozenset()
        self._read = self._found = self._finding = False
        # another thread waits while the first one imports the modules; the thread that
        # imports may come back (a plugin module that registers a class by hand)
        self._lock = threading.RLock()

    # -- discovery -------------------------------------------------------------------
    def find(self) -> None:
        """Find every recursion now, importing the modules of the package that no
        declaration names and the plugins (listing the recursions does it anyway)."""
        self._discover()

    def _read_declarations(self) -> None:
        """The declarations of the package's own recursions (imports no kernel)."""
        with self._lock:
            if self._read:
                return
            name = f"{self._package}.declarations"
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:  # a package without declarations
                if exc.name != name:
                    raise
                module = None
            for declaration in getattr(module, "DECLARATIONS", {}).values():
                self._declarations.setdefault(declaration.name, declaration)
            self._support = frozenset(getattr(module, "SUPPORT_MODULES", ()))
            self._read = True

    def _discover(self) -> None:
        with self._lock:
            if self._found or self._finding:
                return
            self._finding = True
            try:
                self._read_declarations()
                package = importlib.import_module(self._package)
                declared = {d.module for d in self._declarations.values()}
                for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                    short = info.name.rpartition(".")[2]
                    if info.name in declared or short in self._support:
                        continue  # its recursions are declared, or it defines none
                    for cls in recursions_defined_in(importlib.import_module(info.name)):
                        self._add(cls)
                # importlib.metadata (tens of ms) when the plugins are looked for only
                from importlib.metadata import entry_points

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
        name = getattr(cls, "name", None)
        if self._classes.get(name) is cls:  # once per class
            return
        if (name in self._declarations and name not in self._classes
                and vars(cls).get("declaration") is self._declarations[name]):
            self._classes[name] = cls  # a declared class, named by an entry point too
            return
        self._register(cls)

    def _register(self, cls: type[Recursion]) -> type[Recursion]:
        from streamlsq.kernels.recursions.contract import Recursion

        if not (isinstance(cls, type) and issubclass(cls, Recursion)):
            raise TypeError(f"only Recursion subclasses can be registered, got {cls!r}")
        name = getattr(cls, "name", "")
        if not name or name == Recursion.name:
            raise ValueError(f"{cls.__name__} must declare a name")
        if name in self._declarations:
            raise ValueError(f"a recursion named {name!r} is registered already "
                             f"({self._declarations[name].class_name})")
        seen = set()
        for p in cls.params:
            if not isinstance(p, Param):
                raise TypeError(f"{cls.__name__}.params must hold Param objects, got {p!r}")
            if p.name in seen:
                raise ValueError(f"{cls.__name__} declares parameter {p.name!r} twice")
            seen.add(p.name)
        self._declarations[name] = cls.declaration or RecursionDeclaration.of(cls)
        self._classes[name] = cls
        return cls

    def _load(self, declaration: RecursionDeclaration) -> type[Recursion]:
        """The class of a declared recursion, imported now; it must take its declaration."""
        from streamlsq.kernels.recursions.contract import Recursion

        cls = declaration.load()
        if not (isinstance(cls, type) and issubclass(cls, Recursion)
                and vars(cls).get("declaration") is declaration):
            raise TypeError(f"{declaration.class_path} is not the recursion class of the "
                            f"declaration {declaration.name!r} (its class body must say "
                            f"declaration = DECLARATIONS[{declaration.name!r}])")
        return cls

    # -- by hand -----------------------------------------------------------------------
    def register(self, cls: type[Recursion]) -> type[Recursion]:
        """Add ``cls`` under ``cls.name``; refuse a taken name or a malformed declaration."""
        with self._lock:
            self._discover()
            return self._register(cls)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._discover()
            del self._declarations[name]
            self._classes.pop(name, None)

    @contextlib.contextmanager
    def registered(self, cls: type[Recursion]) -> Iterator[type[Recursion]]:
        """Register ``cls`` for the duration of a ``with`` block (tests, experiments)."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(cls.name)

    # -- declarations ------------------------------------------------------------------
    def declaration(self, name: str) -> RecursionDeclaration:
        """The declaration of the recursion ``name`` (``KeyError``: none of that name):
        everything a user reaches it through, without importing its kernel when it is
        one of the package's own."""
        with self._lock:
            self._read_declarations()
            if name not in self._declarations:
                self._discover()
            return self._declarations[name]

    # -- the mapping ---------------------------------------------------------------------
    def __getitem__(self, name: str) -> type[Recursion]:
        with self._lock:
            if name not in self._classes:
                declaration = self.declaration(name)  # KeyError: not registered
                if name not in self._classes:  # a declared class: imported now
                    self._classes[name] = self._load(declaration)
            return self._classes[name]

    def __contains__(self, name) -> bool:
        try:
            self.declaration(name)
        except (KeyError, TypeError):  # TypeError: not a name (unhashable)
            return False
        return True

    def __iter__(self):
        self._discover()
        return iter(sorted(self._declarations))

    def __len__(self) -> int:
        self._discover()
        return len(self._declarations)

    def stream_methods(self) -> list[str]:
        """Names of the recursions that read one stream store (``fit_stream``, ``fit NAME``)."""
        return [n for n in self if len(self.declaration(n).inputs) == 1]

    def engines(self, name: str) -> tuple[str, ...]:
        """The engines that can run ``name``: sequential always, scan for a ScanRecursion."""
        return self.declaration(name).engines

    def by_class_name(self, class_name: str) -> type[Recursion] | None:
        """The registered recursion whose class is called ``class_name``, or None (a
        declared one is the only one imported)."""
        for find in (self._read_declarations, self._discover):
            find()
            for name, declaration in list(self._declarations.items()):
                if declaration.class_name == class_name:
                    return self[name]
        return None


#: the recursions of this package and of the installed plugins. The package's own are
#: known by their declarations as soon as the registry is used, and their classes (with
#: their kernels' libraries, Numba and SciPy) imported when they are looked up: by a fit,
#: by a Dask worker that unpickles a recursion, by the worker processes of a command,
#: which import the recursion's module as they start (``preload``). The package's public
#: names (:mod:`streamlsq.kernels`) import the registry on first use.
RECURSIONS = Registry()
