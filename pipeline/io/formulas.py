"""Formulas: the features and targets of a stream built from its columns by a Wilkinson formula
(``arr_delay ~ dep_delay + C(carrier) + np.log(distance) + hour:origin``), with formulaic
(``docs/tables.md#formulas``).

A formula is evaluated chunk by chunk, so its design matrix must be the same in every chunk:
the levels of every categorical column are found before the fit by one parallel pass over the
rows (or read from a pandas category), formulaic's ``ModelSpec`` is built once from the first
rows with those levels, and every chunk is encoded by that spec. Rows with a missing value in
any column the formula reads reach the engines as rows of NaN, where ``missing=`` refuses them
(naming the row) or drops them, as for any input. A level the spec has not seen (new rows
given to a fit's prediction) is refused in one line naming the level and the column.

The formula's intercept is the fit's: its ``Intercept`` column is left out of the design and
the fit prepends its own constant column (``fit_intercept``), so that the statistics know the
model has one. A result keeps the formula, the levels and the contrast coding of each factor
(``formula``, ``formula_levels``, ``formula_contrasts``, in the record of what a fit read:
``streamlsq.stream.fit_inputs``): the result alone rebuilds the design.

Stateful transforms whose state depends on the rows they see (``center``, ``scale``, splines
and polynomials) would differ from chunk to chunk: they are refused.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.parts import Column, OpenedInput, RowsReader
from streamlsq.io.tables import read_frame

__all__ = ["DESIGN", "RESPONSE", "Design", "DesignInput", "DesignRows", "formula_intercept"]

#: the variables a formula's source reads: the design matrix X and the response y
DESIGN, RESPONSE = "design", "response"
#: the second dimension of each: the design's columns (terms) and the response's
TERM_DIM, RESPONSE_DIM = "term", "response"
#: row ranges of design a process keeps (X and y of one chunk are read one after the other)
KEPT = 4
_kept: OrderedDict = OrderedDict()
_lock = threading.Lock()


def parse(formula: str):
    """The formulaic ``Formula`` of ``formula``, which must have a left-hand side."""
    from formulaic import Formula

    if not isinstance(formula, str) or "~" not in formula:
        raise InputError(f"formula must be 'response ~ terms', got {formula!r}")
    try:
        parsed = Formula(formula)
    except Exception as exc:
        raise InputError(f"formula {formula!r} cannot be parsed ({type(exc).__name__}: "
                         f"{_first_line(exc)})") from None
    if not hasattr(parsed, "lhs") or not hasattr(parsed, "rhs"):
        raise InputError(f"formula {formula!r} must be 'response ~ terms'")
    return parsed


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else "no message"


def formula_intercept(formula: str, fit_intercept: bool | None) -> bool:
    """Whether ``formula`` has an intercept (``1``, the default; ``- 1`` or ``0 +`` remove
    it); refuses a ``fit_intercept`` that says otherwise."""
    has = any(str(term) == "1" for term in parse(formula).rhs)
    if fit_intercept is not None and bool(fit_intercept) != has:
        said = "has an" if has else "has no"
        raise InputError(f"formula {formula!r} {said} intercept but fit_intercept="
                         f"{bool(fit_intercept)} (--intercept): the formula decides (write "
                         "'- 1' to remove it, '+ 1' to add it)")
    return has


def _variables(side, columns) -> tuple[str, ...]:
    """The data columns one side of a formula reads, sorted: formulaic's required variables,
    and the input's ``columns`` named in a factor (formulaic leaves out those inside a
    stateful transform, ``center(x)``)."""
    found = {str(v) for v in side.required_variables
             if getattr(v, "source", "data") in (None, "data")}
    for term in side:
        for factor in term.factors:
            names = re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", str(getattr(factor, "expr", factor)))
            found |= set(names) & set(columns)
    return tuple(sorted(found))


def _in_categories(side, names) -> set[str]:
    """The columns of ``names`` that a ``C(...)`` term of the formula reads (numbers made
    categories, whose levels must be found too)."""
    out = set()
    for term in side:
        for factor in term.factors:
            expr = str(getattr(factor, "expr", factor))
            if expr.startswith("C("):
                out |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", expr)) & set(names)
    return out


@dataclass(frozen=True)
class Design:
    """A formula made a fixed encoding of rows: the levels of its categorical columns
    (``levels``: (column, levels) pairs), the formulaic specs of its two sides (built once),
    the labels of the design's columns (``terms``, without the intercept) and of the response
    (``responses``), and whether the formula has an intercept."""

    formula: str
    levels: tuple
    terms: tuple[str, ...]
    responses: tuple[str, ...]
    intercept: bool
    rhs_variables: tuple[str, ...]
    lhs_variables: tuple[str, ...]
    keep: tuple[int, ...]
    rhs_spec: object = field(compare=False, hash=False, repr=False)
    lhs_spec: object = field(default=None, compare=False, hash=False, repr=False)
    contrasts: tuple = ()

    def encode(self, frame, label: str, start: int):
        """The frame's categorical columns as pandas categories of the design's levels; a
        value that is not one of them is refused naming the column, level and row."""
        import pandas as pd

        frame = frame.copy()
        for name, levels in self.levels:
            if name not in frame:  # a column of the other side
                continue
            values = frame[name]
            present = values.notna().to_numpy()
            known = values.isin(list(levels)).to_numpy()
            unseen = np.flatnonzero(present & ~known)
            if unseen.size:
                i = int(unseen[0])
                raise InputError(f"{label}: column '{name}' has the level {values.iloc[i]!r} at "
                                 f"row {start + i}, which the fit did not see (its levels: "
                                 f"{_shown(levels)}); a formula's design holds the levels of "
                                 "the rows it was fitted on")
            frame[name] = pd.Categorical(values, categories=list(levels))
        return frame

    def matrix(self, frame, side: str, label: str, start: int) -> np.ndarray:
        """The design (``side=DESIGN``, without the intercept column) or the response of the
        rows of ``frame``, rows with a missing value in a column the formula reads as NaN."""
        names = self.rhs_variables if side == DESIGN else self.lhs_variables
        spec = self.rhs_spec if side == DESIGN else self.lhs_spec
        frame = self.encode(frame[list(names)], label, start)
        try:
            values = np.asarray(spec.get_model_matrix(frame), dtype=np.float64)
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"{label}: rows {start}-{start + len(frame) - 1}: the formula "
                             f"{self.formula!r} cannot be evaluated ({type(exc).__name__}: "
                             f"{_first_line(exc)})") from None
        if side == DESIGN:
            values = values[:, list(self.keep)]
        missing = frame.isna().any(axis=1).to_numpy()
        if missing.any():
            values = values.copy()
            values[missing] = np.nan
        return values


def _shown(levels) -> str:
    text = ", ".join(map(repr, levels[:8]))
    return text + (f", … ({len(levels)} in all)" if len(levels) > 8 else "")


def _sorted_levels(values) -> tuple:
    try:
        return tuple(sorted(values))
    except TypeError:  # mixed kinds: as text
        return tuple(sorted(values, key=str))


def _levels_of(rows: RowsReader, names, start: int, stop: int) -> dict:
    frame = read_frame(rows, names, start, stop)
    return {name: set(frame[name].dropna().unique().tolist()) for name in names}


def find_levels(rows: RowsReader, names, n_rows: int, chunk_rows: int) -> dict[str, tuple]:
    """The levels of the columns ``names`` over all rows, sorted: one parallel pass, chunk by
    chunk (on the current Dask client's workers, else on threads of this process)."""
    if not names:
        return {}
    import dask

    spans = [(a, min(a + chunk_rows, n_rows)) for a in range(0, n_rows, chunk_rows)]
    # the rows part as one opaque value: never traversed for the collections it holds
    whole = dask.delayed(rows, traverse=False)
    parts = dask.compute(*[dask.delayed(_levels_of)(whole, tuple(names), a, b)
                           for a, b in spans])
    found = {name: set() for name in names}
    for part in parts:
        for name, values in part.items():
            found[name] |= values
    return {name: _sorted_levels(values) for name, values in found.items()}


def build_design(formula: str, rows: RowsReader, label: str, n_rows: int, chunk_rows: int,
                 kinds: dict, categories: dict, levels: dict | None = None,
                 response: bool = True, columns=()) -> Design:
    """The :class:`Design` of ``formula`` on the rows ``rows``: the levels of its categorical
    columns (``levels`` given, e.g. a fit's; else ``categories`` a column declares, else one
    pass over the rows), and the specs of its sides built on the first rows. ``kinds``: which
    columns are numbers (True) or categories (False); ``response``: whether the rows hold the
    left-hand side; ``columns``: the input's columns."""
    from formulaic import model_matrix

    parsed = parse(formula)
    rhs_vars, lhs_vars = _variables(parsed.rhs, columns), _variables(parsed.lhs, columns)
    used = tuple(sorted(set(rhs_vars) | (set(lhs_vars) if response else set())))
    categorical = sorted({n for n in used if not kinds[n]}
                         | _in_categories(parsed.rhs, used) | _in_categories(parsed.lhs, used))
    if levels is None:
        levels = {n: categories[n] for n in categorical if categories.get(n) is not None}
        levels.update(find_levels(rows, [n for n in categorical if n not in levels], n_rows,
                                  chunk_rows))
    else:
        missing = [n for n in categorical if n not in levels]
        if missing:
            raise InputError(f"{label}: column '{missing[0]}' is a category the fit's design "
                             "does not know")
        levels = {n: tuple(levels[n]) for n in categorical}
    draft = Design(formula, tuple((n, tuple(levels[n])) for n in categorical), (), (), False,
                   rhs_vars, lhs_vars, (), None)
    first = draft.encode(read_frame(rows, used, 0, min(n_rows, chunk_rows)), label, 0)
    specs = {}
    for side, names in (("rhs", rhs_vars), ("lhs", lhs_vars if response else None)):
        if names is None:
            continue
        try:
            specs[side] = model_matrix(getattr(parsed, side), first[list(names)],
                                       na_action="ignore").model_spec
        except Exception as exc:
            raise InputError(f"{label}: the formula {formula!r} cannot be evaluated on its rows "
                             f"({type(exc).__name__}: {_first_line(exc)})") from None
        stateful = ", ".join(map(str, specs[side].transform_state))
        if stateful:
            raise InputError(f"{label}: the formula {formula!r} has a transform that depends "
                             f"on the rows it sees ({stateful}): the design would differ from "
                             "chunk to chunk; compute that column before the fit")
    rhs = specs["rhs"]
    columns = list(rhs.column_names)
    keep = tuple(i for i, c in enumerate(columns) if c != "Intercept")
    contrasts = tuple((str(factor), {"coding": type(state.contrasts).__name__,
                                     "levels": [_plain(v) for v in state.levels]})
                      for spec in specs.values()
                      for factor, state in spec.factor_contrasts.items())
    responses = tuple(specs["lhs"].column_names) if "lhs" in specs else tuple(lhs_vars)
    return Design(formula, draft.levels, tuple(columns[i] for i in keep), responses,
                  "Intercept" in columns, rhs_vars, lhs_vars, keep, rhs, specs.get("lhs"),
                  contrasts)


def _plain(value):
    """A level as JSON writes it."""
    return value.item() if isinstance(value, np.generic) else value


# -- the rows part ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DesignRows:
    """A :class:`~streamlsq.io.parts.RowsReader`: rows read through a formula: ``design`` and
    ``response`` are the formula's two sides evaluated on the rows of ``inner`` (a store's, a
    Dataset's or a table's), any other variable (weights, group labels) is ``inner``'s own."""

    inner: RowsReader
    design: Design = field(compare=False, hash=False)

    @property
    def path(self) -> str:
        return self.inner.path

    @property
    def shown(self) -> str:
        return self.inner.shown

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def token(self) -> str:
        return self.inner.token

    @property
    def group(self):
        return self.inner.group

    @property
    def in_memory(self) -> bool:
        return self.inner.in_memory

    @property
    def from_table(self) -> bool:
        return self.inner.from_table

    def raw(self, name: str) -> tuple[str, ...]:
        """The inner variables behind variable ``name``."""
        if name == DESIGN:
            return self.design.rhs_variables
        if name == RESPONSE:
            return self.design.lhs_variables
        return (name,)

    def array(self, name: str):
        return self.inner.array(self.raw(name)[0])

    def rows_per_chunk(self, name: str) -> int:
        names = self.raw(name)
        return self.inner.rows_per_chunk(names[0]) if names else self.inner.rows_per_chunk(
            self.design.lhs_variables[0])

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        if name not in (DESIGN, RESPONSE):
            return self.inner.read(name, start, stop)
        key = (self.inner.token, self.inner.path, self.design.formula, self.design.levels,
               name, start, stop)
        with _lock:
            if key in _kept:
                return _kept[key]
        frame = read_frame(self.inner, self.raw(name), start, stop)
        values = self.design.matrix(frame, name, self.label, start)
        with _lock:
            _kept[key] = values
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
        return values

    def chunk_stamps(self, names) -> dict:
        """The stamps of the inner variables behind each of ``names``, joined chunk by
        chunk."""
        out = {}
        for name in names:
            inner = self.inner.chunk_stamps(list(self.raw(name)))
            joined: dict = {}
            for entries in inner.values():
                for a, b, stamp in entries:
                    joined[(a, b)] = joined.get((a, b), "") + stamp
            if joined:
                out[name] = [(a, b, s) for (a, b), s in sorted(joined.items())]
        return out

    def read_variable(self, name: str):
        return self.inner.read_variable(name)


# -- the input -------------------------------------------------------------------------------


class DesignInput:
    """An :class:`~streamlsq.io.parts.OpenedInput` (a store, a Dataset or a table) read
    through a formula, itself an opened input: its variables are ``design`` (row, term)
    and, when the input holds the formula's left-hand side, ``response`` (row, response);
    the input's own variables stay readable (weights, group labels)."""

    sample_first = False

    def __init__(self, inner: OpenedInput, formula: str, levels: dict | None,
                 targets: bool = True):
        self.inner, self.formula, self.given_levels = inner, formula, levels
        parsed = parse(formula)
        self.rhs_vars = _variables(parsed.rhs, inner.members)
        self.lhs_vars = _variables(parsed.lhs, inner.members)
        self.label, self.attrs, self.found = inner.label, inner.attrs, inner.found
        # new rows to predict may lack the left-hand side; a fit's rows must hold it
        self.response = targets or all(n in inner.members for n in self.lhs_vars)
        self.members = set(inner.members) | {DESIGN} | ({RESPONSE} if self.response else set())
        self.design: Design | None = None

    def default_sample_dim(self, names) -> str:
        """The dimension the formula's columns share: a store's columns are read along their
        first (``streamlsq convert`` writes ``row``), a Dataset's along the one they share."""
        used = list(self.rhs_vars) or list(self.lhs_vars)
        if self.inner.sample_first and all(n in self.inner.members for n in used):
            firsts = {c.dims[:1] for c in self.inner.columns(used, None).values()}
            if len(firsts) == 1 and firsts != {()}:
                return firsts.pop()[0]
        return self.inner.default_sample_dim(used)

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        """The formula's columns opened, checked and encoded (the levels found), then the
        design and response as the variables they make."""
        used = tuple(sorted(set(self.rhs_vars) | (set(self.lhs_vars) if self.response
                                                  else set())))
        for name in used:
            if name not in self.inner.members:
                raise InputError(f"{self.label}: column '{name}' of the formula "
                                 f"{self.formula!r} is missing (found: {self.found or 'none'})")
        per_row = [n for n in names if n not in (DESIGN, RESPONSE)]
        raw = self.inner.columns(tuple(dict.fromkeys((*used, *per_row))), dim)
        for name in used:
            if raw[name].dims[:1] != (dim,) or len(raw[name].shape) != 1:
                raise InputError(f"{self.label}: column '{name}' of the formula has dims "
                                 f"{raw[name].dims}, expected ('{dim}',): one value per row")
        read = self.inner.as_read({n: raw[n] for n in used}, labels=used)
        kinds = {n: np.dtype(c.dtype).kind in "iufb" for n, c in read.items()}
        n = raw[used[0]].n_rows if used else 0
        self.chunk = self.inner.chunk_rows(used[0], n, max(len(used), 1))
        self.inner_rows = self.inner.rows(self.chunk)
        categories = {name: self.inner.categories(name) for name in used}
        self.design = build_design(self.formula, self.inner_rows, self.label, n, self.chunk,
                                   kinds, categories, self.given_levels, self.response,
                                   self.inner.members)
        out = {DESIGN: Column((dim, TERM_DIM), (n, len(self.design.terms)),
                               np.dtype(np.float64))}
        if self.response:
            out[RESPONSE] = Column((dim, RESPONSE_DIM), (n, len(self.design.responses)),
                                    np.dtype(np.float64))
        out.update({name: raw[name] for name in per_row})
        return {name: out[name] for name in names}

    def as_read(self, columns: dict[str, Column], labels: tuple = ()) -> dict[str, Column]:
        own = {n: c for n, c in columns.items() if n not in (DESIGN, RESPONSE)}
        read = self.inner.as_read(own, labels) if own else {}
        return {n: read.get(n, c) for n, c in columns.items()}

    def check_complete(self) -> None:
        self.inner.check_complete()

    def coordinate(self, dim: str, size: int) -> tuple | None:
        if dim == TERM_DIM:
            return self.design.terms
        if dim == RESPONSE_DIM:
            return self.design.responses
        return None

    def chunk_rows(self, first: str, n: int, width: int) -> int:
        return self.chunk

    def rows(self, chunk_rows: int) -> DesignRows:
        return DesignRows(self.inner_rows, self.design)

    def categories(self, name: str) -> tuple | None:
        """The levels the input declares for its own column ``name`` (the design and the
        response are numbers)."""
        return None if name in (DESIGN, RESPONSE) else self.inner.categories(name)
