"""The registry of recursions: every recursion streamlsq can run, by name.

One line per recursion. Everything a user reaches a recursion through is derived
from this table and from the recursion's own declarations (``name``, ``summary``,
``params``, its scan base class): ``fit_stream`` and ``streamlsq fit NAME`` with one
option per parameter, the scikit-learn estimator
(:func:`streamlsq.estimators.regressor_for`), the result store's attributes, and the
contract checks the test suite runs over every entry (:mod:`.checks`). Adding a
recursion is one kernel class and one ``RECURSIONS.register`` line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from streamlsq.kernels.recursions.bfgs import IncrementalBFGS
from streamlsq.kernels.recursions.contract import Param, Recursion, ScanRecursion
from streamlsq.kernels.recursions.interleaved import InterleavedKF4LLS
from streamlsq.kernels.recursions.irma import IRMA, IRMARLS, IRMAGradientDescent
from streamlsq.kernels.recursions.kf4lls import KF4LLS, RLS
from streamlsq.kernels.recursions.lms import LMS

__all__ = ["RECURSIONS", "Registry"]


class Registry(Mapping):
    """Recursion classes by ``name``, in the order they were registered (read-only mapping).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.registry import RECURSIONS
    >>> RECURSIONS.stream_methods()
    ['kf4lls', 'rls', 'lms', 'bfgs', 'irma', 'irma-gd', 'irma-rls']
    >>> RECURSIONS.engines("rls")
    ('sequential', 'scan')
    """

    def __init__(self):
        self._classes: dict[str, type[Recursion]] = {}

    def register(self, cls: type[Recursion]) -> type[Recursion]:
        """Add ``cls`` under ``cls.name``; refuse a taken name or a malformed declaration."""
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

    def unregister(self, name: str) -> None:
        del self._classes[name]

    @contextlib.contextmanager
    def registered(self, cls: type[Recursion]) -> Iterator[type[Recursion]]:
        """Register ``cls`` for the duration of a ``with`` block (tests, experiments)."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(cls.name)

    def __getitem__(self, name: str) -> type[Recursion]:
        return self._classes[name]

    def __iter__(self):
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def stream_methods(self) -> list[str]:
        """Names of the recursions that read one stream store (``fit_stream``, ``fit NAME``)."""
        return [n for n, c in self._classes.items() if len(c.inputs) == 1]

    def engines(self, name: str) -> tuple[str, ...]:
        """The engines that can run ``name``: sequential always, scan for a ScanRecursion."""
        scan = issubclass(self._classes[name], ScanRecursion)
        return ("sequential", "scan") if scan else ("sequential",)


RECURSIONS = Registry()
RECURSIONS.register(KF4LLS)
RECURSIONS.register(RLS)
RECURSIONS.register(LMS)
RECURSIONS.register(IncrementalBFGS)
RECURSIONS.register(IRMA)
RECURSIONS.register(IRMAGradientDescent)
RECURSIONS.register(IRMARLS)
RECURSIONS.register(InterleavedKF4LLS)
