"""What every job and command takes, declared once, as data: :class:`Options`.

An :class:`Options` is an ordered set of :class:`~streamlsq.kernels.recursions.params.Param`
declarations (type, default, choices, range, unit, help) and of :class:`Rule` objects (which
options require or exclude which others). From that one declaration:

- :meth:`Options.check` refuses a bad value or combination in one line
  (:class:`~streamlsq.errors.InputError`) and returns the values converted; the run path
  (:meth:`streamlsq.jobs.Run.execute`) calls it before any input is opened or any Dask
  client is started, and the command line before it starts a cluster;
- the command line's options are generated (:mod:`streamlsq.cli.options`), with their help
  written once;
- the Python functions keep explicit keyword signatures for users and IDEs, and a test holds
  them equal to the declarations.

This package imports NumPy and the declarations only (no SciPy, no numba, no Dask), so that
``--help`` and the option checks start at once. The declarations of each family of jobs
are modules of it: :mod:`.run` (what every run takes) and one module per family.

Examples
--------
>>> from streamlsq.options import Options, Param, Rule
>>> opts = Options(
...     Param("cov_type", None, "Covariance.", type=str, optional=True,
...           choices=("HC1", "cluster")),
...     Param("groups", None, "Group labels.", type=str, optional=True),
...     rules=[Rule("cov_type", "cluster", needs={"groups": Rule.GIVEN}),
...            Rule("groups", needs={"cov_type": "cluster"})])
>>> opts.check({"cov_type": "HC1"})
{'cov_type': 'HC1', 'groups': None}
>>> opts.check({"cov_type": "HC9"})
Traceback (most recent call last):
...
streamlsq.errors.InputError: cov_type must be 'HC1', 'cluster' or None, got 'HC9'
>>> opts.check({"groups": "firm"})
Traceback (most recent call last):
...
streamlsq.errors.InputError: --groups goes with --cov-type cluster
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamlsq.errors import InputError
from streamlsq.kernels.recursions.params import Param, must_be

__all__ = ["Options", "Param", "Rule", "given", "must_be"]


class _Given:
    """The condition "given" of a :class:`Rule` (any value but None and False)."""

    def __repr__(self):
        return "GIVEN"


def given(value) -> bool:
    """Whether an option was given: any value but ``None``, ``False`` and an empty tuple."""
    return value is not None and value is not False and value != ()


@dataclass(frozen=True)
class Rule:
    """A rule between options: when ``option`` is given (or equals ``value``; ``None``: when
    it is not given), every option of ``needs`` must be given (:attr:`GIVEN`) or equal the
    value stated, and no option of ``excludes`` may be given. ``message`` words the refusal
    when the one built from the declaration ("--groups goes with --cov-type cluster",
    "--resume needs --checkpoint") is not the one wanted.
    """

    GIVEN = _Given()

    option: str
    value: Any = GIVEN
    needs: Mapping[str, Any] = field(default_factory=dict)
    excludes: tuple[str, ...] = ()
    message: str | None = None

    def applies(self, values: Mapping) -> bool:
        return _meets(values.get(self.option), self.value)

    def broken(self, values: Mapping, options: Options) -> str | None:
        """The refusal of ``values`` by this rule, or None when they keep it."""
        if not self.applies(values):
            return None
        when = self._words(options, self.option, self.value)
        for name, wanted in self.needs.items():
            if not _meets(values.get(name), wanted):
                need = self._words(options, name, wanted)
                verb = "goes with" if wanted is not Rule.GIVEN else "needs"
                return self.message or f"{when} {verb} {need}"
        for name in self.excludes:
            if given(values.get(name)):
                return self.message or (f"{when} does not go with "
                                        f"{options.param(name).option}")
        return None

    @staticmethod
    def _words(options: Options, name: str, value) -> str:
        flag = options.param(name).option
        if value is Rule.GIVEN or value is True:
            return flag
        return f"{flag} {value}"


def _meets(value, wanted) -> bool:
    return given(value) if wanted is Rule.GIVEN else value == wanted


class Options:
    """The options of a job or a command, declared once: an ordered set of parameters and
    the rules between them (see the module's docstring)."""

    def __init__(self, *params: Param | Options, rules: Iterable[Rule] = ()):
        self._params: dict[str, Param] = {}
        self.rules: tuple[Rule, ...] = ()
        for p in params:
            for q in (p if isinstance(p, Options) else [p]):
                self._params[q.name] = q  # a later declaration of a name replaces one before
            if isinstance(p, Options):
                self.rules += p.rules
        self.rules += tuple(rules)
        for rule in self.rules:
            for name in (rule.option, *rule.needs, *rule.excludes):
                if name not in self._params:
                    raise ValueError(f"a rule names {name!r}, which is not declared")

    # -- the declarations ------------------------------------------------------------
    def __iter__(self) -> Iterator[Param]:
        return iter(self._params.values())

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, name) -> bool:
        return name in self._params

    def __add__(self, other: Options) -> Options:
        return Options(self, other)

    def __repr__(self) -> str:
        return f"Options({', '.join(self._params)})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._params)

    def param(self, name: str) -> Param:
        return self._params[name]

    def defaults(self) -> dict:
        """Every option's default value."""
        return {p.name: p.default for p in self}

    def without(self, *names: str) -> Options:
        """These options less ``names`` (and the rules that name them)."""
        kept = [p for p in self if p.name not in names]
        rules = [r for r in self.rules
                 if not {r.option, *r.needs, *r.excludes} & set(names)]
        return Options(*kept, rules=rules)

    def replace(self, name: str, **changes) -> Options:
        """These options with the declaration of ``name`` changed (its default, help, …)."""
        params = [p.replace(**changes) if p.name == name else p for p in self]
        return Options(*params, rules=self.rules)

    # -- the check -------------------------------------------------------------------
    def refuse_unknown(self, names: Iterable[str], who: str | None = None,
                       also: Iterable[str] = ()) -> None:
        """:class:`~streamlsq.errors.InputError` naming the first of ``names`` that is
        neither one of these options nor in ``also`` (a function's other keywords), with
        the names taken; a name the help of an option gives as statsmodels' (``var_weights``
        for ``weights``) is said to be that option. ``who`` names the function refusing it.

        >>> from streamlsq.options.glm import GLM
        >>> GLM.refuse_unknown(["var_weights"], "fit_glm", also=["out"])
        Traceback (most recent call last):
        ...
        streamlsq.errors.InputError: fit_glm takes no keyword 'var_weights': statsmodels' \
var_weights is weights= here; the keywords are ...
        """
        taken = [*self._params, *(n for n in also if n not in self._params)]
        unknown = [name for name in names if name not in taken]
        if not unknown:
            return
        name = unknown[0]
        alias = next((p.name for p in self if p.name != name and
                      re.search(rf"statsmodels' {re.escape(name)}\b", p.help or "")), None)
        said = f"unknown option {name!r}" if who is None else \
            f"{who} takes no keyword {name!r}"
        if alias is not None:
            said += f": statsmodels' {name} is {alias}= here"
        raise InputError(f"{said}; the {'options' if who is None else 'keywords'} are "
                         f"{', '.join(taken)}")

    def check(self, values: Mapping) -> dict:
        """``values`` (option name → value; the default for those not named) checked and
        converted, or :class:`~streamlsq.errors.InputError` naming the first bad option and
        its value, or the first broken rule. Names that are not declared are refused."""
        self.refuse_unknown(values)
        out = {}
        for p in self:
            value = values.get(p.name, p.default)
            try:
                out[p.name] = value if value is p.default and value is None else p.check(value)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        for rule in self.rules:
            refusal = rule.broken(out, self)
            if refusal is not None:
                raise InputError(refusal)
        return out
