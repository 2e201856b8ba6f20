"""The contract every recursive estimator kernel follows (``docs/architecture.md``).

A recursion consumes data blocks (X_i, Y_i) in order. Its state is a small
``dict`` of NumPy arrays (serialisable, checkpointable, storable as Zarr
variables); every method is pure: it returns a new state and never mutates
its inputs.

    init(n_features, n_targets, dtype) -> state
    update(state, X_block, Y_block)    -> state
    coef(state)                        -> (n_features, n_targets)

``fold`` applies ``update`` over consecutive blocks of a larger piece of rows
and records the coefficients at the requested steps; engines call it once per
segment, so kernels with a per-sample loop override it with a compiled one.

Recursions whose block update depends on the data only through sums of the
block (KF4LLS, RLS with forgetting) also implement the *scan* form:

    summarize(X, Y, edges, cuts)       -> [summary, ...]   # parallel, one list per piece
    scan(info_state, summaries)        -> [info_state, ...] # in order, cheap additions
    finish(info_state)                 -> state             # the solve, independent per step

by deriving from :class:`ScanRecursion` (the ``scan`` engine runs exactly those).

Every recursion also *declares* what a user may set: ``name``, a one-line
``summary``, ``params``, a tuple of :class:`Param` (name, default, type, help and the
constraints a value must meet), ``inputs`` (the roles of the stores it reads) and, for
``streamlsq fit NAME --help``, a ``description`` and ``examples``: in its class body, or,
for a recursion of this package, in its
:class:`~streamlsq.kernels.recursions.declarations.RecursionDeclaration` (importable
without the kernels), from which the class takes them (``declaration = ...``).
:meth:`Recursion.from_params` builds a configured recursion from those parameters; the
base constructor checks every declared value (``ValueError`` naming the bad one, in the
format of :func:`~streamlsq.kernels.recursions.params.must_be`) and the hook
``check_params`` the rules between them. The command line, ``fit_stream``, the
scikit-learn estimators and the result attributes are all derived from these
declarations and from the registry (:mod:`.registry`), which finds every recursion of
this package and of installed plugins by itself: a new recursion is one class.

Hooks with defaults: ``coef_names(n_features)`` (labels of the rows of ``coef``),
``state_diagnostics(state) -> {name: value}`` (per-step diagnostics read off a
state, e.g. skipped updates; the base ``fold`` records them at every recorded step
and engines at the final step), ``check_shape(n_features, n_targets)`` (refuse data
of a shape the recursion cannot take, before any reading), ``result_attrs(state)``
(method-specific attributes of a result store) and ``result_notes(attrs)`` (short
phrases the command line appends to its summary). A value of one input row that
the kernel cannot use raises :class:`BadRowError` with the row numbered from
``rows_before``, so that an engine can name the row of its store.

Optional abilities, each a class attribute of :class:`Recursion` with its default:
``diagnostics`` (recursive residuals recorded: every row from the first needed),
``identify`` (unidentified steps left unrecorded) and ``intercept`` (the recursion's own
constant term, ``intercept_kind="kernel"``); a recursion with the ability sets it.

:mod:`.checks` holds the contract as executable checks, run over every registered
recursion by the test suite (and usable on a recursion of your own).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from streamlsq.kernels.recursions.params import Param, must_be

if TYPE_CHECKING:  # the declarations import this module
    from streamlsq.kernels.recursions.declarations import RecursionDeclaration

State = dict[str, np.ndarray]

__all__ = [
    "BLOCK_SIZE",
    "BadRowError",
    "BlockGrid",
    "FIRST_BLOCK_SIZE",
    "FoldResult",
    "Param",
    "RECORD_EVERY",
    "Recursion",
    "ScanRecursion",
    "State",
    "StepRecord",
    "block_edges",
    "cut_intervals",
    "fold_blocks",
    "fold_by_updates",
    "fold_edges",
    "fold_result",
    "must_be",
]

#: rows per step of a recursion (a block), and of the very first block when it differs
BLOCK_SIZE = Param("block_size", None, "Rows per step of the recursion.", type=int, gt=0)
FIRST_BLOCK_SIZE = Param("first_block_size", None, "Rows of the very first block (default "
                         "block_size).", type=int, gt=0, optional=True)
#: a fold records the coefficients at the steps divisible by this
RECORD_EVERY = Param("record_every", 1, "Record the coefficients every N steps.", type=int,
                     gt=0)


class BadRowError(ValueError):
    """A value of one input row that a kernel cannot use (outside a basis' domain, a
    non-binary target where binary ones are needed, NaN/Inf).

    ``variable`` is the kernel's name of the array (``"X"`` or ``"Y"``), ``row`` the
    row number as the caller numbers rows (``rows_before`` plus the index in the block,
    so an engine can map it back to a row of its store) and ``reason`` says what is
    wrong with the row without naming it (e.g. ``"([3.5]) is outside the basis domain
    (0.0, 3.0)"``). The message (``str``) is complete on its own.

    Examples
    --------
    >>> from streamlsq.kernels import BadRowError
    >>> exc = BadRowError("X row 7 ([4.0]) is outside the basis domain (0.0, 3.0)",
    ...                   variable="X", row=7, reason="([4.0]) is outside the basis domain")
    >>> exc.variable, exc.row
    ('X', 7)
    """

    def __init__(self, message: str, *, variable: str, row: int, reason: str):
        super().__init__(message)
        self.variable = variable
        self.row = int(row)
        self.reason = reason

    def __reduce__(self):  # keep the fields on the way back from a worker
        return (_rebuild_bad_row_error, (str(self), self.variable, self.row, self.reason))


def block_edges(n_rows: int, block_size: int, first_block_size: int | None = None) -> np.ndarray:
    """Row offsets of the data blocks of a stream: [0, f, f+b, f+2b, ..., n_rows].

    ``f`` is the first block's size (defaults to ``b``); the last block may be
    shorter than ``b``. Blocks, not storage chunks, are the steps of a recursion.

    Examples
    --------
    >>> from streamlsq.kernels import block_edges
    >>> block_edges(10, 4).tolist(), block_edges(10, 4, first_block_size=6).tolist()
    ([0, 4, 8, 10], [0, 6, 10])
    """
    block_size = BLOCK_SIZE.check(block_size)
    first_block_size = FIRST_BLOCK_SIZE.check(first_block_size)
    f = block_size if first_block_size is None else first_block_size
    if n_rows <= f:
        return np.array([0, n_rows], dtype=np.int64)
    rest = np.arange(f, n_rows, block_size, dtype=np.int64)
    return np.concatenate([[0], rest, [n_rows]]).astype(np.int64)


@dataclass(frozen=True)
class BlockGrid:
    """The data blocks of a stream of ``n_rows`` rows, by arithmetic (no offset array).

    Edge k (0 ≤ k ≤ n_blocks) is the row offset where block k+1 starts:
    0, f, f+b, f+2b, …, n_rows (f: first block size, b: block size).

    Examples
    --------
    >>> from streamlsq.kernels import BlockGrid
    >>> grid = BlockGrid(n_rows=10, block_size=4, first_block_size=2)
    >>> grid.n_blocks, grid.edges(0, grid.n_blocks).tolist()
    (3, [0, 2, 6, 10])
    """

    n_rows: int
    block_size: int
    first_block_size: int | None = None

    def __post_init__(self):
        BLOCK_SIZE.check(self.block_size)
        FIRST_BLOCK_SIZE.check(self.first_block_size)

    @property
    def first(self) -> int:
        return self.block_size if self.first_block_size is None else int(self.first_block_size)

    @property
    def n_blocks(self) -> int:
        f, b = self.first, self.block_size
        return 1 if self.n_rows <= f else 1 + -(-(self.n_rows - f) // b)

    def edge(self, k: int) -> int:
        if k <= 0:
            return 0
        return int(min(self.n_rows, self.first + (k - 1) * self.block_size))

    def floor_edge(self, row: int) -> int:
        """Index of the last block edge at or before ``row``."""
        if row >= self.n_rows:
            return self.n_blocks
        if row < self.first:
            return 0
        return 1 + (row - self.first) // self.block_size

    def edges(self, k0: int, k1: int) -> np.ndarray:
        """Row offsets of edges k0..k1 inclusive."""
        ks = np.arange(k0, k1 + 1, dtype=np.int64)
        e = np.minimum(self.first + (ks - 1) * self.block_size, self.n_rows)
        return np.where(ks <= 0, 0, e).astype(np.int64)


def _rebuild_bad_row_error(message, variable, row, reason):
    return BadRowError(message, variable=variable, row=row, reason=reason)


@dataclass
class FoldResult:
    """What one ``fold`` over a piece of rows returns.

    ``steps`` are global 1-based block numbers that were recorded, ``coefs`` the
    coefficients after each of them (n_recorded, n_features, n_targets),
    ``rows_seen`` the number of rows consumed up to each recorded step.
    ``diagnostics`` maps a name to one value per recorded step.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import KF4LLS, block_edges
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((30, 2)), rng.standard_normal((30, 1))
    >>> res = KF4LLS().fold(KF4LLS().init(2, 1), X, Y, block_edges(30, 10), 1, 1)
    >>> res.steps.tolist(), res.rows_seen.tolist(), res.coefs.shape
    ([1, 2, 3], [10, 20, 30], (3, 2, 1))
    """

    state: State
    steps: np.ndarray
    coefs: np.ndarray
    rows_seen: np.ndarray
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)


def fold_result(state: State, coef: np.ndarray, steps, coefs, rows,
                diagnostics=None) -> FoldResult:
    """Pack recorded steps into a :class:`FoldResult`, its shapes right even when nothing
    was recorded (``coef``: the final coefficients, whose shape and dtype the recorded
    ones share)."""
    return FoldResult(
        state=state,
        steps=np.asarray(steps, dtype=np.int64),
        coefs=np.asarray(coefs, dtype=coef.dtype).reshape(len(steps), *coef.shape),
        rows_seen=np.asarray(rows, dtype=np.int64),
        diagnostics=diagnostics or {},
    )


def fold_edges(edges, n_rows: int | None = None) -> np.ndarray:
    """The block edges of a fold as int64, checked: 1-D and non-decreasing (and running
    from 0 to ``n_rows`` when given)."""
    edges = np.asarray(edges, dtype=np.int64)
    if edges.ndim != 1 or edges.size < 1 or (np.diff(edges) < 0).any():
        raise ValueError(f"edges must be a non-decreasing 1-D array of row offsets, got "
                         f"{edges}")
    if n_rows is not None and (edges[0] != 0 or edges[-1] != n_rows):
        raise ValueError(f"edges must run from 0 to {n_rows}, got {edges}")
    return edges


class StepRecord:
    """The steps a fold records, as it goes: step numbers, coefficients, rows seen and
    diagnostics.

    Block ``j`` of a fold (0-based, local) is the global step ``first_step + j``; it is
    recorded when that step is divisible by ``record_every``. Rows are counted from
    ``rows_before``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels.recursions.contract import StepRecord
    >>> record = StepRecord(first_step=3, record_every=2, rows_before=100)
    >>> [j for j in range(4) if record.due(j)]  # local blocks 1 and 3: steps 4 and 6
    [1, 3]
    >>> record.add(4, np.zeros((2, 1)), end=20)
    >>> res = record.result({}, np.zeros((2, 1)))
    >>> res.steps.tolist(), res.rows_seen.tolist(), res.coefs.shape
    ([4], [120], (1, 2, 1))
    """

    def __init__(self, first_step: int, record_every: int, rows_before: int = 0):
        self.first_step = int(first_step)
        self.record_every = RECORD_EVERY.check(record_every)
        self.rows_before = int(rows_before)
        self.steps, self.coefs, self.rows, self.diagnostics = [], [], [], []

    def due(self, j: int) -> bool:
        """Whether local block ``j`` is a recorded step."""
        return (self.first_step + j) % self.record_every == 0

    def add(self, step: int, coef: np.ndarray, end: int, diagnostics: dict | None = None):
        """Record global ``step``: its coefficients, the piece's rows up to ``end``."""
        self.steps.append(int(step))
        self.coefs.append(coef)
        self.rows.append(self.rows_before + int(end))
        self.diagnostics.append(diagnostics or {})

    def result(self, state: State, coef: np.ndarray, diagnostics: dict | None = None
               ) -> FoldResult:
        """The :class:`FoldResult`; ``diagnostics``: those of the final state, whose names,
        dtypes and shapes the recorded ones have."""
        stacked = {
            name: np.asarray([d[name] for d in self.diagnostics],
                             dtype=np.asarray(value).dtype)
            .reshape(len(self.diagnostics), *np.shape(value))
            for name, value in (diagnostics or {}).items()
        }
        return fold_result(state, coef, self.steps, self.coefs, self.rows, stacked)


def fold_blocks(stepper, state: State, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                record: StepRecord, start: int = 0, stop: int | None = None,
                weights: np.ndarray | None = None) -> State:
    """Apply ``stepper.update`` to the blocks ``X[edges[j]:edges[j+1]]``, j = start..stop−1,
    in order, recording the due steps whose coefficients are identified
    (``stepper.coef``, ``stepper.state_diagnostics``); returns the state after the last
    block. ``stepper`` is a recursion, or a form of one (the square-root and
    normal-equations forms of KF4LLS); ``weights``, the rows' precision weights, go to the
    updates of a recursion that takes them."""
    stop = len(edges) - 1 if stop is None else stop
    identified = getattr(stepper, "identified", None)
    for j in range(start, stop):
        a, b = int(edges[j]), int(edges[j + 1])
        if weights is None:
            state = stepper.update(state, X[a:b], Y[a:b])
        else:
            state = stepper.update(state, X[a:b], Y[a:b], weights=weights[a:b])
        if record.due(j) and (identified is None or identified(state)):
            record.add(record.first_step + j, stepper.coef(state), b,
                       stepper.state_diagnostics(state))
    return state


def fold_by_updates(stepper, state: State, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                    first_step: int, record_every: int, rows_before: int = 0,
                    weights: np.ndarray | None = None) -> FoldResult:
    """``fold`` as ``update`` block after block (:func:`fold_blocks` over every block): the
    base ``Recursion.fold``, and that of a form that has no faster way."""
    record = StepRecord(first_step, record_every, rows_before)
    state = fold_blocks(stepper, state, X, Y, edges, record, weights=weights)
    return record.result(state, stepper.coef(state), stepper.state_diagnostics(state))


def cut_intervals(edges: np.ndarray, cuts):
    """``(first block, end block, first row, end row)`` of each interval of a piece's blocks
    that ends at a cut (``cuts``: increasing block counts, the last one the number of
    blocks), in order: what one summary of the scan form covers."""
    start = 0
    for c in cuts:
        c = int(c)
        yield start, c, int(edges[start]), int(edges[c])
        start = c


class Recursion:
    """Base class of recursive estimators; see the module docstring for the contract.

    The constructor takes the declared parameters (:attr:`params`; positionally in the
    declared order, or by name), checks each with :meth:`Param.check`, stores it under
    its name and then calls :meth:`check_params` (the rules between parameters): a
    recursion whose parameters need nothing else writes no ``__init__``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import Recursion
    >>> from streamlsq.kernels.recursions.contract import Param
    >>> class RunningMean(Recursion):  # a toy: the coefficient is the mean of Y so far
    ...     name, summary = "running-mean", "the mean of the targets"
    ...     params = (Param("scale", 1.0, "factor applied to the mean", gt=0),)
    ...     def init(self, n_features, n_targets, dtype=np.float64):
    ...         return {"sum": np.zeros((1, n_targets), dtype), "rows": np.int64(0)}
    ...     def update(self, state, X, Y):
    ...         return {"sum": state["sum"] + Y.sum(0), "rows": state["rows"] + len(Y)}
    ...     def coef(self, state):
    ...         return self.scale * state["sum"] / max(int(state["rows"]), 1)
    >>> rec = RunningMean.from_params(scale=2.0)
    >>> rec.coef(rec.update(rec.init(1, 1), np.zeros((4, 1)), np.arange(4.0)[:, None]))
    array([[3.]])
    >>> RunningMean(scale=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: scale must be a finite number > 0, got -1.0
    """

    #: short name used by the CLI and in result attrs
    name: ClassVar[str] = "recursion"
    #: one line saying what the recursion is (the CLI's list of methods)
    summary: ClassVar[str] = ""
    #: the paragraphs of ``streamlsq fit NAME --help`` (default: built from the summary
    #: and the class docstring)
    description: ClassVar[str] = ""
    #: command lines that show the recursion's use (``streamlsq fit NAME --help``)
    examples: ClassVar[tuple[str, ...]] = ()
    #: what a user may set, in the order the CLI and the estimators show it
    params: ClassVar[tuple[Param, ...]] = ()
    #: the roles of the stores the recursion reads (one stream store: ``("data",)``;
    #: interleaved KF4LLS reads two populations, with a fit function and a command of
    #: their own)
    inputs: ClassVar[tuple[str, ...]] = ("data",)
    #: how many stores the recursion reads at once: ``len(inputs)``
    n_inputs: ClassVar[int] = 1
    #: how an intercept is fitted (``fit_intercept`` of ``fit_stream``, ``--intercept``):
    #: ``"column"`` — a constant column prepended to X before the recursion reads it;
    #: ``"kernel"`` — the recursion's own constant, switched by its ``intercept`` argument
    #: (LMS); ``"basis"`` — the constant function is one of the basis functions (IRMA),
    #: ``"centred"`` — the blocks are centred (interleaved KF4LLS): none to switch on
    intercept_kind: ClassVar[str] = "column"
    #: whether the intercept is fitted when the user does not say (``fit_intercept=None``)
    default_intercept: ClassVar[bool] = False
    #: whether the recursion takes precision weights of its rows (``fold``, ``update`` and
    #: ``summarize`` with ``weights=``: each row scaled by √w, a row of weight 0 left out):
    #: the least-squares recursions; the pipeline's ``--weights`` and ``--missing drop``
    #: (a dropped row has weight 0) need it
    weighted: ClassVar[bool] = False

    #: where the attributes above come from: a built-in recursion's
    #: :class:`~streamlsq.kernels.recursions.declarations.RecursionDeclaration`, written in
    #: its class body (``declaration = DECLARATIONS["kf4lls"]``) instead of the attributes;
    #: None for a class that writes them itself (the registry derives its declaration)
    declaration: ClassVar[RecursionDeclaration | None] = None

    # -- optional abilities: what a configured recursion does beyond the contract. Each has
    # its default here; a recursion that has the ability sets it per instance (a declared
    # parameter of that name, or its constructor), and callers read it directly.
    #: whether the recursion records recursive residuals and their CUSUM tests (KF4LLS's
    #: QR form, ``diagnostics=True``): they need every row from the first, in order, each of
    #: weight 1 (no ``--weights``, no ``--missing drop``, no ``--continue-from``)
    diagnostics: bool = False
    #: whether a step whose coefficients the rows do not yet identify goes unrecorded
    #: (:meth:`identifying` sets it): the result then says from which row they are
    identify: bool = False
    #: whether the recursion's own constant term is on, for ``intercept_kind="kernel"``
    #: (LMS's ``intercept`` parameter); always False for the others, whose constant, if any,
    #: is the column the reading path prepends (``fit_intercept``)
    intercept: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declaration = vars(cls).get("declaration")
        if declaration is None:
            cls.declaration = None  # a class's own: not the one of a class it derives from
        else:
            cls._take_declaration(declaration)
        cls.n_inputs = len(cls.inputs)
        cls.__signature__ = cls._signature()

    @classmethod
    def _take_declaration(cls, declaration: RecursionDeclaration) -> None:
        """The declared attributes from ``declaration``, which must name this class and say
        whether it has the scan form as its bases do; written once, there."""
        written = [a for a in declaration.ATTRIBUTES if a in vars(cls)]
        if written:
            raise TypeError(f"{cls.__name__} takes {', '.join(written)} from its declaration "
                            f"{declaration.name!r}: write them there, not in the class")
        path = f"{cls.__module__}:{cls.__qualname__}"
        if declaration.class_path != path:
            raise TypeError(f"the declaration {declaration.name!r} names the class "
                            f"{declaration.class_path}, not {path}")
        if declaration.scan != issubclass(cls, ScanRecursion):
            raise TypeError(f"the declaration {declaration.name!r} says scan="
                            f"{declaration.scan}, but {cls.__name__} "
                            f"{'does not derive' if declaration.scan else 'derives'} from "
                            "ScanRecursion")
        for attribute in declaration.ATTRIBUTES:
            setattr(cls, attribute, getattr(declaration, attribute))

    @classmethod
    def _signature(cls) -> inspect.Signature:
        """The constructor's signature, as ``help`` and ``inspect.signature`` show it: a
        written ``__init__`` as written, except that its ``*args, **kwargs`` stand for the
        declared parameters it passes on (:meth:`init_params`)."""
        written = list(inspect.signature(cls.__init__).parameters.values())[1:]
        kinds = {p.kind for p in written}
        if not {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds:
            return inspect.Signature(written)
        declared = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                      default=p.default) for p in cls.init_params()]
        positional = [p for p in written if p.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        keyword = [p for p in written if p.kind is inspect.Parameter.KEYWORD_ONLY]
        return inspect.Signature(positional + declared + keyword)

    def __init__(self, *args, **kwargs):
        declared = type(self).init_params()
        signature = inspect.Signature([inspect.Parameter(
            p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in declared])
        try:
            given = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            raise TypeError(f"{type(self).__name__}(): {exc}") from None
        for p in declared:
            setattr(self, p.name, p.check(given.get(p.name, p.default)))
        self.check_params()

    @classmethod
    def init_params(cls) -> tuple[Param, ...]:
        """The declared parameters the constructor takes (all of them, unless the
        recursion is built from other objects as well: IRMA from a basis)."""
        return cls.params

    def check_params(self) -> None:
        """The rules between parameters (each one alone is checked by its declaration):
        ``ValueError`` worded as :func:`must_be` (e.g. diagnostics that need the QR form)."""

    @classmethod
    def check_values(cls, params: dict) -> dict:
        """Every declared parameter's value: ``params`` checked (:meth:`Param.check`) and
        the declared defaults for the rest. Unknown names raise ``TypeError``."""
        values = {p.name: p.default for p in cls.params}
        unknown = sorted(set(params) - set(values))
        if unknown:
            raise TypeError(f"{cls.name} has no parameter {', '.join(unknown)}; "
                            f"its parameters are {', '.join(sorted(values)) or 'none'}")
        values.update(params)
        return {p.name: p.check(values[p.name]) for p in cls.params}

    @classmethod
    def from_params(cls, **params) -> Recursion:
        """A configured recursion from its declared parameters (defaults for the rest).

        Unknown names raise ``TypeError``, bad values ``ValueError`` naming the
        parameter. Recursions whose constructor takes other objects than the
        declared values (a basis, a schedule) override this.
        """
        return cls(**cls.check_values(params))

    @classmethod
    def example(cls, rng: np.random.Generator, n_rows: int = 48
                ) -> tuple[Recursion, np.ndarray, np.ndarray]:
        """A configured instance and rows (X, Y) it accepts, for the contract checks.

        The default draws Gaussian features (3 columns) and two targets; recursions
        whose data are restricted (raw inputs in a domain, one target) override it.
        """
        X = rng.standard_normal((n_rows, 3))
        Y = X @ rng.standard_normal((3, 2)) + 0.1 * rng.standard_normal((n_rows, 2))
        return cls.from_params(), X, Y

    def block_order(self, n_blocks) -> list[tuple[int, int]]:
        """The stream of a recursion that reads several stores: [(store index, block index),
        ...] for stores of ``n_blocks`` blocks each; one store is read in storage order."""
        if len(n_blocks) != 1:
            raise NotImplementedError(f"{self.name} reads one store; it has no order of "
                                      f"{len(n_blocks)} stores' blocks")
        return [(0, k) for k in range(int(n_blocks[0]))]

    # -- the contract ------------------------------------------------------
    def init(self, n_features: int, n_targets: int, dtype=np.float64) -> State:
        raise NotImplementedError

    def update(self, state: State, X: np.ndarray, Y: np.ndarray) -> State:
        raise NotImplementedError

    def coef(self, state: State) -> np.ndarray:
        raise NotImplementedError

    def state_dims(self) -> dict[str, tuple[str, ...]]:
        """Dimension names of each state array, for writing the final state."""
        raise NotImplementedError

    def get_params(self) -> dict:
        """The recursion's parameters (for result attrs and reconstruction).

        By default the attributes named by ``params``; recursions built from other
        objects (a basis, a schedule) return those objects' own parameters.
        """
        return {p.name: getattr(self, p.name) for p in type(self).params}

    def coef_names(self, n_features: int) -> list[str] | None:
        """Labels of the rows of ``coef(state)`` for data with ``n_features`` columns.

        None (the default) means the rows are the data features 0..n_features−1;
        kernels whose coefficients have other rows (an intercept, basis
        functions) return one label per row.
        """
        return None

    def state_diagnostics(self, state: State) -> dict:
        """Diagnostics of a state, recorded with the coefficients at each recorded step."""
        return {}

    def check_shape(self, n_features: int, n_targets: int) -> None:
        """Refuse data of ``n_features`` columns and ``n_targets`` targets that the
        recursion cannot take (``ValueError`` naming the variable); by default every
        shape ``init`` accepts is fine."""

    def result_attrs(self, state: State) -> dict:
        """Method-specific attributes of a result store, read off the final state."""
        return {}

    def diagnostic_dims(self) -> dict[str, tuple[str, ...]]:
        """Dimensions of the per-step diagnostics that are not one value per step or one
        per step and target (e.g. ``("step", "feature")``); the others are inferred."""
        return {}

    # -- identification and statistics (least-squares recursions) -----------------------
    def identifying(self) -> Recursion:
        """This recursion, starting once the rows identify its coefficients: a step whose
        coefficients the rows so far do not determine is not refused but not recorded
        (:meth:`identified` is False), and only a fit whose rows never identify them is
        refused (:meth:`check_identified`). The default: the recursion itself."""
        return self

    def counting_rows(self) -> Recursion:
        """This recursion keeping in its state the rows of positive weight it saw
        (``nobs``), for a fit with row weights or dropped rows (``weighted`` recursions).
        The default: the recursion itself."""
        return self

    def identified(self, state: State) -> bool:
        """Whether the coefficients of ``state`` are identified by the rows seen (always,
        by default)."""
        return True

    def check_identified(self, state: State) -> None:
        """Refuse (:class:`~streamlsq.kernels.linalg.SingularMatrixError`, with the
        numerical rank) a final state whose coefficients the rows did not identify."""

    def inference_unavailable(self) -> str | None:
        """Why this configuration has no statistics of a least-squares fit (standard errors,
        tests, intervals: :mod:`streamlsq.kernels.inference`), as a phrase; None when it
        has them (:meth:`regression`)."""
        return f"{self.name} is not a least-squares fit"

    def regression(self, state: State):
        """The least-squares problem ``state`` has factored
        (:class:`~streamlsq.kernels.inference.RegressionFactor`), when
        :meth:`inference_unavailable` is None."""
        raise NotImplementedError(self.inference_unavailable())

    @classmethod
    def result_notes(cls, attrs: dict) -> list[str]:
        """Short phrases about a result, read off its attributes, for a one-line summary."""
        return []

    # -- shared driver -------------------------------------------------------
    def fold(self, state: State, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
             first_step: int, record_every: int, rows_before: int = 0) -> FoldResult:
        """Apply ``update`` to the blocks ``X[edges[j]:edges[j+1]]`` in order.

        ``first_step`` is the global 1-based number of the first block here,
        ``rows_before`` the rows consumed before this piece. A step ``s`` is
        recorded when ``s % record_every == 0``; engines record the final step
        themselves from the returned state.
        """
        return fold_by_updates(self, state, X, Y, edges, first_step, record_every, rows_before)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class ScanRecursion(Recursion):
    """A recursion whose blocks enter only through sums: it also has the scan form.

    Besides the sequential contract it implements ``to_info(state)`` (the state in
    the form the prefix sums act on), ``summarize``, ``scan`` and ``finish`` (see the
    module docstring). The ``scan`` engine runs exactly the recursions derived from
    this class, and the contract checks compare both forms on the same rows.
    """

    def scan_unavailable(self) -> str | None:
        """Why this configuration of the recursion cannot run in the scan form (a phrase),
        or None (the default): e.g. per-row diagnostics that need every state in order."""
        return None

    def to_info(self, state: State) -> State:
        raise NotImplementedError

    def summarize(self, X: np.ndarray, Y: np.ndarray, edges: np.ndarray,
                  cuts: np.ndarray) -> list[State]:
        raise NotImplementedError

    def scan(self, info: State, summaries: list[State]) -> list[State]:
        raise NotImplementedError

    def finish(self, info: State) -> State:
        raise NotImplementedError

