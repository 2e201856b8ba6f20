"""Formulas: the features and targets of a stream built from its columns by a Wilkinson formula
(``arr_delay ~ dep_delay + C(carrier) + np.log(distance) + hour:origin``), with formulaic
(``docs/tables.md#formulas``).

A formula is evaluated chunk by chunk, so its design matrix must be the same in every chunk: the
levels of every categorical column are found before the fit by one parallel pass over the rows
(or read from a pandas category), formulaic's ``ModelSpec`` is built once from the first few
rows with those levels (:data:`SPEC_ROWS`; a design too wide for a fit's state is refused
before, :func:`check_design_size`), and every chunk is encoded by that spec. Rows with a missing
value in any column the formula reads reach the engines as rows of NaN, where ``missing=``
refuses them (naming the row) or drops them, as for any input. A level the spec has not seen
(new rows given to a fit's prediction) is refused in one line naming the level and the column.

The formula's intercept is the fit's: its ``Intercept`` column is left out of the design and the
fit prepends its own constant column (``fit_intercept``), so that the statistics know the model
has one; it is labelled ``Intercept``, as formulaic labels it. A result keeps the formula, the
levels and the contrast coding of each factor (``formula``, ``formula_levels``,
``formula_contrasts``, in the record of what a fit read: ``streamlsq.stream.fit_inputs``): the
result alone rebuilds the design.

Stateful transforms whose state depends on the rows they see (``center``, ``scale``, splines and
polynomials) would differ from chunk to chunk: they are refused.

A formula is data, never code (``docs/tables.md#formula-grammar``): formulaic's parser splits it
into terms and factors, and every factor is checked (:func:`check_formula`) before anything is
evaluated or opened — a column name, a number, an ``I()`` of arithmetic on columns and numbers,
a ``C()`` of a column, and the transforms declared once in :data:`TRANSFORMS`; any other name,
attribute, subscript, call, lambda or string is refused in one line naming it. The design is
then built by formulaic's materializer in a namespace holding only those transforms
(:func:`namespace`). A formula a result keeps is checked the same way when the result is read
(``open_result``, ``predict``, ``info --check``).
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.names import look_alike
from streamlsq.io.parts import Column, OpenedInput, RowsReader
from streamlsq.io.tables import (
    column_of_later_files,
    numbers_as_text,
    partition_note,
    read_frame,
    text_for_numbers,
)

__all__ = ["DESIGN", "RESPONSE", "TRANSFORMS", "Design", "DesignInput", "DesignRows",
           "FormulaColumns", "check_formula", "formula_intercept"]

#: the variables a formula's source reads: the design matrix X and the response y
DESIGN, RESPONSE = "design", "response"
#: the second dimension of each: the design's columns (terms) and the response's
TERM_DIM, RESPONSE_DIM = "term", "response"
#: row ranges of design a process keeps (X and y of one chunk are read one after the other)
KEPT = 4
_kept: OrderedDict = OrderedDict()
_lock = threading.Lock()

#: the functions of NumPy a formula may call, with their number of arguments, declared once:
#: written ``np.NAME`` or ``numpy.NAME`` (``np.log(distance)``, ``np.power(x, 3)``); each is
#: stateless (the same value for a row whichever rows it is computed with)
NUMPY_TRANSFORMS = {
    "log": 1, "log2": 1, "log10": 1, "log1p": 1, "exp": 1, "exp2": 1, "expm1": 1,
    "sqrt": 1, "cbrt": 1, "square": 1, "power": 2, "abs": 1, "sign": 1,
    "sin": 1, "cos": 1, "tan": 1, "arcsin": 1, "arccos": 1, "arctan": 1,
    "sinh": 1, "cosh": 1, "tanh": 1, "arcsinh": 1, "floor": 1, "ceil": 1,
}
#: the names of NumPy's functions formulaic itself lets a formula write bare (``log(x)``)
BARE_TRANSFORMS = ("log", "log2", "log10", "exp", "exp2")
#: every transform a formula may call: the name it writes -> (NumPy's function name, number
#: of arguments); besides them ``I(...)`` (arithmetic as written) and ``C(column)`` (a
#: categorical term in treatment coding)
TRANSFORMS: dict[str, tuple[str, int]] = {
    **{f"{prefix}.{name}": (name, n) for prefix in ("np", "numpy")
       for name, n in NUMPY_TRANSFORMS.items()},
    **{name: (name, NUMPY_TRANSFORMS[name]) for name in BARE_TRANSFORMS},
}
#: formulaic's transforms whose state depends on the rows they see: refused with that reason
ROW_DEPENDENT = ("center", "scale", "standardize", "poly", "bs", "cr", "cs", "cc", "lag",
                 "hashed", "te")
#: arithmetic an ``I()`` or a transform's argument may hold
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
              ast.UAdd, ast.USub, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
#: rows the formulaic specs of a design are built on
SPEC_ROWS = 16


@lru_cache(maxsize=1)
def namespace() -> dict:
    """The only names formulaic's materializer finds besides the columns: the declared
    transforms (``np`` and ``numpy`` are namespaces of those alone), ``I`` and ``C``."""
    from formulaic.transforms import C, identity

    numpy_like = SimpleNamespace(**{name: getattr(np, name) for name in NUMPY_TRANSFORMS})
    return {"np": numpy_like, "numpy": numpy_like, "I": identity, "C": C,
            **{name: getattr(np, name) for name in BARE_TRANSFORMS}}


@dataclass(frozen=True)
class FormulaColumns:
    """The columns a checked formula reads: on its right-hand side (``rhs``) and left-hand
    side (``lhs``), and those of each side a ``C()`` makes categorical."""

    rhs: tuple[str, ...]
    lhs: tuple[str, ...]
    rhs_categorical: tuple[str, ...]
    lhs_categorical: tuple[str, ...]
    #: (column, factor) for each column a factor computes with (``np.log(x)``, ``x + 1``):
    #: the first such factor of each side, right-hand side first, not one in ``C()`` alone
    computed: tuple[tuple[str, str], ...] = ()


class _Refused(Exception):
    """What a factor of a formula holds that a formula may not (its description, and True
    when the description gives the remedy itself)."""


def _callee(node: ast.AST) -> str | None:
    """The dotted name a call calls (``np.log``), or None when it is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _callee(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _root_name(node: ast.AST) -> str:
    """The name an expression starts from (``open`` of ``open('f').write``), else its text."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return ast.unparse(node)


def _refuse_call(node: ast.Call) -> None:
    name = _callee(node.func)
    text = ast.unparse(node.func)
    if name is None:
        raise _Refused(f"calls '{_root_name(node.func)}' (in {text})")
    if name.split(".")[-1] in ROW_DEPENDENT:
        raise _Refused(f"the transform {name}() depends on the rows it sees: the design would "
                       "differ from chunk to chunk; compute that column before the fit", True)
    if name == "offset":  # R's and patsy's offset(): an option of the fit here
        raise _Refused("calls 'offset', which is not a declared transform: an offset is given "
                       "apart from the formula, --offset COLUMN (offset= in Python), or "
                       "--exposure COLUMN for the logarithm of an exposure (exposure=)", True)
    raise _Refused(f"calls '{name}', which is not a declared transform")


def _constant(node: ast.AST) -> bool:
    """Whether ``node`` holds numbers only (no column)."""
    return not any(isinstance(n, ast.Name) for n in ast.walk(node))


def _walk(node: ast.AST, columns: set, categorical: set, aliases: dict) -> None:
    """Check one node of a factor's Python expression against what a formula may hold, and
    collect the columns it reads; nothing is evaluated."""
    if isinstance(node, ast.Expression):
        _walk(node.body, columns, categorical, aliases)
    elif isinstance(node, ast.Name):
        # a name of the namespace (np, C, log) read as a value is a column's: one the
        # formula also calls is refused by check_formula, which sees the whole side
        name = aliases.get(node.id, node.id)
        if name.startswith("__"):
            raise _Refused(f"names '{name}', which is no column")
        columns.add(name)
    elif isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise _Refused(f"holds the constant {node.value!r} (only numbers)")
    elif isinstance(node, ast.BinOp | ast.UnaryOp):
        if not isinstance(node.op, _OPERATORS):
            raise _Refused(f"holds the operator {type(node.op).__name__} "
                           f"(in {ast.unparse(node)})")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow) and _constant(node.left) and _constant(node.right):
                raise _Refused(f"holds the power of numbers {ast.unparse(node)}: write its "
                               "value")
            _walk(node.left, columns, categorical, aliases)
            _walk(node.right, columns, categorical, aliases)
        else:
            _walk(node.operand, columns, categorical, aliases)
    elif isinstance(node, ast.Compare):
        bad = [op for op in node.ops if not isinstance(op, _OPERATORS)]
        if bad:
            raise _Refused(f"holds the operator {type(bad[0]).__name__} "
                           f"(in {ast.unparse(node)})")
        for child in (node.left, *node.comparators):
            _walk(child, columns, categorical, aliases)
    elif isinstance(node, ast.Call):
        name = _callee(node.func)
        if name not in (*TRANSFORMS, "I", "C"):
            _refuse_call(node)
        wanted = TRANSFORMS[name][1] if name in TRANSFORMS else 1
        if name == "C" and (node.keywords or len(node.args) != 1):
            # C(g, Treatment('b')), C(g, levels=[...]): statsmodels' way to choose the
            # reference level; here the levels' own order does
            extra = "a keyword argument" if node.keywords else "another argument"
            raise _Refused(f"calls C() with more than its column ({extra}, in "
                           f"{ast.unparse(node)}); "
                           "C() takes one column, in treatment coding with its first level "
                           "as the reference: to choose the reference, give the column as a "
                           "pandas category whose first level it is (a DataFrame, or a "
                           "Parquet file written from one: docs/tables.md#formulas)", True)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _Refused(f"passes {name}() keyword or starred arguments (in "
                           f"{ast.unparse(node)})")
        if len(node.args) != wanted:
            raise _Refused(f"calls {name}() with {len(node.args)} argument(s), not {wanted}")
        if name == "C":
            if not isinstance(node.args[0], ast.Name):
                raise _Refused(f"makes a category of {ast.unparse(node.args[0])}: C() takes "
                               "a column")
            inner: set = set()
            _walk(node.args[0], inner, categorical, aliases)
            columns |= inner
            categorical |= inner
            return
        for arg in node.args:
            _walk(arg, columns, categorical, aliases)
    else:
        kind = {ast.Attribute: "the attribute", ast.Subscript: "the subscript",
                ast.Lambda: "a lambda", ast.NamedExpr: "an assignment"}.get(type(node))
        # Python's own name of the node kept beside the words (IfExp, ListComp, ...)
        words = {ast.IfExp: "a conditional expression", ast.BoolOp: "a Boolean operation",
                 ast.JoinedStr: "an f-string", ast.Dict: "a dict", ast.Set: "a set",
                 ast.List: "a list", ast.Tuple: "a tuple", ast.Starred: "a starred argument",
                 ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
                 ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension",
                 }.get(type(node), "the Python expression")
        what = kind or f"{words} ({type(node).__name__})"
        raise _Refused(f"holds {what} {ast.unparse(node)}")


def _quoted(text: str) -> frozenset:
    """The names written in backticks in ``text`` (formulaic's quoting of a column name)."""
    return frozenset(re.findall(r"`([^`]*)`", text))


def _quoted_keywords(text: str) -> list[str]:
    """The names in backticks in ``text`` that are Python keywords (class, None, True)."""
    return sorted(w for w in _quoted(text) if keyword.iskeyword(w))


def _factor_columns(factor, columns: set, categorical: set, called: dict | None = None,
                   quoted: frozenset = frozenset()) -> None:
    """Check one factor of formulaic's parse and collect the columns it reads (and in
    ``called``, the names of the namespace it calls: ``np`` of ``np.log(x)`` -> ``np.log``)."""
    from formulaic.utils.code import sanitize_variable_names

    expr, method = str(factor.expr), factor.eval_method.value
    if method == "literal":
        if type(ast.literal_eval(expr)) not in (int, float):
            raise _Refused(f"holds the constant {expr}")
        return
    if method == "lookup":  # a column name as written (backticks let it be any text)
        # a Python keyword (class, None, True) in backticks is a column too: formulaic
        # looks a lone name up in the data, it evaluates nothing
        if expr.startswith("__") and expr.endswith("__") or ".__" in expr:
            raise _Refused(f"names '{expr}', which is no column")
        if keyword.iskeyword(expr) and expr not in quoted:
            raise _Refused(f"names '{expr}', a Python keyword, which is no column unless "
                           f"written in backticks (`{expr}`)")
        columns.add(expr)
        return
    if method != "python":
        raise _Refused(f"holds the factor {expr} of kind {method}")
    words = _quoted_keywords(expr)
    if words:  # formulaic keeps a keyword's name as it is: Python reads it as the keyword
        raise _Refused(f"reads the column '{words[0]}', a Python keyword, inside {expr}: "
                       f"formulaic reads such a column alone (y ~ `{words[0]}`), not inside "
                       "C(), I() or a transform; rename the column", True)
    aliases: dict = {}
    try:  # backticked names made Python names, text only (formulaic's own step)
        code = ast.parse(sanitize_variable_names(expr, {}, aliases), mode="eval")
    except SyntaxError:
        raise _Refused(f"holds {expr}, which is not an expression of columns") from None
    _walk(code, columns, categorical, aliases)
    if called is not None:
        for node in ast.walk(code):
            if isinstance(node, ast.Call) and _callee(node.func):
                callee = _callee(node.func)
                called.setdefault(callee.split(".")[0], callee)


def check_formula(formula: str) -> FormulaColumns:
    """The columns ``formula`` reads, once its every factor is checked to be a column, a
    number, arithmetic, ``I()``, ``C(column)`` or a declared transform (:data:`TRANSFORMS`):
    anything else is refused in one line naming it, and nothing of the formula is evaluated
    (formulaic's parser splits it into terms and factors, Python's ``ast`` parses a factor's
    expression, neither runs it)."""
    if not isinstance(formula, str):
        raise InputError(f"formula must be 'response ~ terms', got {formula!r}")
    return _checked(formula)


#: why a column whose name holds a backtick is refused: formulaic's backticks have no escape
BACKTICK_NAME = ("a column name holding a backtick cannot be written in a formula (a backtick "
                 "ends the quoted name, and formulaic has no escape for one): rename the "
                 "column")

#: what ends the refusal of a formula's Python
_NEVER_PYTHON = ("; a formula is never run as Python: it names columns, numbers, I(), C() and "
                 "the declared transforms (np.log, np.sqrt, np.exp, np.power, ...: "
                 "docs/tables.md#formulas)")


@lru_cache(maxsize=64)
def _checked(formula: str) -> FormulaColumns:
    parsed = parse(formula)
    quoted = _quoted(formula)
    _check_quoted_apart(formula, quoted)
    sides = {}
    computed: dict[str, str] = {}
    for side in ("rhs", "lhs"):
        columns: set = set()
        categorical: set = set()
        called: dict = {}
        for term in getattr(parsed, side):
            in_term: set = set()
            for factor in term.factors:
                try:
                    read, made = set(), set()
                    _factor_columns(factor, read, made, called, quoted)
                    in_term |= read
                    columns |= read
                    categorical |= made
                    if factor.eval_method.value == "python":
                        for name in sorted(read - made):
                            computed.setdefault(name, str(factor.expr))
                except _Refused as why:
                    rule = "" if why.args[1:] else _NEVER_PYTHON
                    raise InputError(f"formula {formula!r}: {why.args[0]}{rule}") from None
            if not in_term and (side == "lhs" or str(term) != "1"):
                raise InputError(_constant_term(formula, side, str(term)))
        both = sorted(set(called) & columns)
        if both:
            raise InputError(_shadowed(formula, both[0], called[both[0]]))
        sides[side] = (tuple(sorted(columns)), tuple(sorted(categorical)))
    return FormulaColumns(sides["rhs"][0], sides["lhs"][0], sides["rhs"][1], sides["lhs"][1],
                          tuple(computed.items()))


def _check_quoted_apart(formula: str, quoted: frozenset) -> None:
    """Refuse a column in backticks that formulaic takes for another term of the formula of
    the same text, so that the two are one term and one is left out: `` `1` `` (the
    intercept's term, 1), `` `C(g)` + C(g) ``. Either was fitted as another model without a
    word."""
    bare = re.sub(r"`[^`]*`", " ", formula)
    for name in sorted(quoted):
        if name == "1":
            raise InputError(f"formula {formula!r}: `1` in backticks is read by formulaic as "
                             "1, the intercept's term, not as a column named '1'; rename such "
                             "a column (e.g. to 'c1') and write that name")
        if not name.isidentifier() and name in bare:
            raise InputError(f"formula {formula!r}: the column '{name}' (in backticks) has "
                             f"the name of the term {name} the formula also makes, and "
                             "formulaic takes the two for one term, leaving one out; rename "
                             "the column and write that name")


def _constant_term(formula: str, side: str, term: str) -> str:
    """The refusal of a term that reads no column (``I(5)``): a number, the same in every
    row, which formulaic would make a column of (the fit's design one column wider than the
    rows' own, aliased with the intercept) or a response that is no column of the data."""
    if side == "lhs":
        return (f"formula {formula!r}: its response {term} reads no column: it is the same "
                "number in every row, not a column of the data; write the response column "
                "left of '~'")
    return (f"formula {formula!r}: the term {term} reads no column: it is the same number "
            "in every row, a column aliased with the intercept, not a column of the data; "
            "leave it out (the formula's intercept is its constant term: '+ 1', or '- 1' to "
            "remove it)")


def _shadowed(formula: str, name: str, callee: str) -> str:
    """The refusal of a formula that reads a column named as something it calls (a column
    ``np`` beside ``np.log(x)``, a column ``C`` beside ``C(g)``)."""
    what = {"np": "NumPy", "numpy": "NumPy", "C": "C(), the categorical term",
            "I": "I(), the arithmetic term"}.get(name, f"the transform {name}()")
    return (f"formula {formula!r}: '{name}' is both a column it reads and {what}, which it "
            f"calls ({callee}): formulaic, which builds the design, takes '{name}' for the "
            "column in both places, and backticks do not tell them apart; rename the column "
            f"(e.g. to '{name}_') and write that name")


def parse(formula: str):
    """The formulaic ``Formula`` of ``formula``, which must have a left-hand side: parsed,
    never evaluated (formulaic's parser tokenizes it; :func:`check_formula` checks what its
    factors hold)."""
    from formulaic import Formula
    from formulaic.formula import SimpleFormula

    if not isinstance(formula, str) or "~" not in formula:
        raise InputError(f"formula must be 'response ~ terms', got {formula!r}")
    _check_term_count(formula)
    try:
        parsed = Formula(formula)
    except Exception as exc:
        method = re.search(r"\)\s*\.\s*([A-Za-z_]\w*)\s*\(",
                           re.sub(r"`[^`]*`", " ", formula))
        if isinstance(exc, SyntaxError) and method is not None:
            # formulaic's own parser stops there, saying only "invalid syntax"
            raise InputError(f"formula {formula!r}: calls the method .{method.group(1)}() of "
                             f"a value{_NEVER_PYTHON}") from None
        words = _quoted_keywords(formula)
        hint = (f"; the column '{words[0]}' is a Python keyword, which formulaic reads alone "
                f"(y ~ `{words[0]}`), not inside C(), I() or a transform: rename the column"
                if words and isinstance(exc, SyntaxError) else "")
        if not hint and ("``" in formula or re.search(r"\w`\w", formula)):
            hint = f"; {BACKTICK_NAME}"
        raise InputError(f"formula {formula!r} cannot be parsed ({type(exc).__name__}: "
                         f"{_first_line(exc)}){hint}") from None
    if isinstance(getattr(parsed, "lhs", None), SimpleFormula) and \
            isinstance(getattr(parsed, "rhs", None), tuple):
        # 'y ~ x | g': formulaic's parts (a mixed model's groups, instruments), not one design
        raise InputError(f"formula {formula!r}: '|' splits its right side into "
                         f"{len(parsed.rhs)} parts (formulaic's structured formulas); a fit "
                         "takes one design: write its terms joined by '+' (a variable of the "
                         "rows' clusters is --groups with --cov-type cluster)")
    if not isinstance(getattr(parsed, "lhs", None), SimpleFormula) or \
            not isinstance(getattr(parsed, "rhs", None), SimpleFormula):
        raise InputError(f"formula {formula!r} must be 'response ~ terms'")
    return parsed


#: the terms a formula's operators may make, counted from its parse tree before formulaic
#: expands them (a*b*...*z of 26 columns makes 2**26 terms, (a+b+c)**20 3**20 before
#: merging: hours of parsing), as a multiple of the widest design a fit's state may hold
#: (streamlsq.design-state-bytes): a formula kept in a result received from someone else is
#: parsed by predict and info --check too
TERM_SLACK = 8


def _term_bound(node, cap: int) -> int:
    """An upper bound of the terms formulaic makes of ``node`` (its parse tree: tokens and
    operator nodes) while it expands them, each count held at ``cap`` + 1 so the arithmetic
    stays small."""
    args = getattr(node, "args", None)
    if args is None:
        return 1
    op = str(getattr(node.operator, "symbol", node.operator))
    sub = [_term_bound(a, cap) for a in args]
    if op in ("-",) and sub:
        total = sub[0]
    elif op in ("*",) and len(sub) == 2:
        total = sub[0] + sub[1] + sub[0] * sub[1]
    elif op in (":", "in") and len(sub) == 2:
        total = sub[0] * sub[1]
    elif op == "/" and len(sub) == 2:
        # a / b is a + (a's terms as one):b, a term per term of b: a chain a/b/c/... of 26
        # grows by one a step (formulaic: 27 terms at once), never by doubling
        total = sub[0] + sub[1]
    elif op in ("**", "^") and len(sub) == 2:
        try:
            power = int(str(args[1]))
        except ValueError:  # (a + b)**0.5: formulaic's parse refuses it, in its own words
            power = 1
        # formulaic multiplies the base out power times before merging duplicates
        total = sub[0] ** min(power, 64) if sub[0] > 1 else 1
    else:  # +, ~, |, and any other: the terms of its sides together
        total = sum(sub)
    return min(total, cap + 1)


def _check_term_count(formula: str) -> None:
    """Refuse a formula whose operators could make more terms than any fit's design may
    hold, from its parse tree, before formulaic expands the terms."""
    from formulaic.parser import DefaultFormulaParser

    try:
        tree = DefaultFormulaParser().get_ast(formula)
    except Exception:  # refused by formulaic's own parse, with its reason
        return
    widest = widest_design()
    cap = TERM_SLACK * widest
    if _term_bound(tree, cap) > cap:
        raise InputError(f"formula {formula[:200]!r}{'...' if len(formula) > 200 else ''}: "
                         f"expanding its interactions takes more than {cap:,} terms (a power "
                         "such as (a + b + c)**20 is multiplied out before its duplicates are "
                         f"merged), where a fit's design holds {widest:,} columns at most (dask "
                         "config streamlsq.design-state-bytes); write fewer interactions or a "
                         "lower power")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else "no message"


def formula_intercept(formula: str, fit_intercept: bool | None) -> bool:
    """Whether ``formula`` has an intercept (``1``, the default; ``- 1`` or ``0 +`` remove
    it); refuses a ``fit_intercept`` that says otherwise. The formula is checked first
    (:func:`check_formula`)."""
    check_formula(formula)
    has = any(str(term) == "1" for term in parse(formula).rhs)
    if fit_intercept is not None and bool(fit_intercept) != has:
        said = "has an" if has else "has no"
        raise InputError(f"formula {formula!r} {said} intercept but fit_intercept="
                         f"{bool(fit_intercept)} "
                         f"({'--intercept' if fit_intercept else '--no-intercept'}): the "
                         "formula decides (write "
                         "'- 1' to remove it, '+ 1' to add it)")
    return has


#: bytes of a fit's p x p state up to which a formula's design is built (dask config
#: ``streamlsq.design-state-bytes``, ``docs/faults.md``)
DESIGN_STATE_BYTES = 2**30


def _state_limit() -> int:
    """The dask config ``streamlsq.design-state-bytes`` (a number of bytes or a size such as
    "4GiB"), checked."""
    import dask
    from dask.utils import parse_bytes

    from streamlsq.errors import checked
    from streamlsq.kernels.recursions.params import Param

    name = "streamlsq.design-state-bytes"
    value = dask.config.get(name, DESIGN_STATE_BYTES)
    if isinstance(value, str):
        try:
            value = parse_bytes(value)
        except (ValueError, TypeError, KeyError):
            pass  # refused below, as given
    param = Param(name, DESIGN_STATE_BYTES, "Bytes of a fit's state up to which a "
                  "formula's design is built.", gt=0,
                  label=f"the dask config {name} (DASK_STREAMLSQ__DESIGN_STATE_BYTES)")
    return int(checked(param, value))


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def widest_design() -> int:
    """The most columns of a design whose fit's state (``check_design_size``: (n + 1)²
    float64 with the intercept's column) fits ``streamlsq.design-state-bytes``."""
    return math.isqrt(_state_limit() // 8) - 1


def check_design_size(n_columns: int, formula: str, label: str, least: bool = False) -> None:
    """Refuse a design of ``n_columns`` columns (``least``: at least so many) whose fit's
    p x p state (float64, the intercept's column included) would exceed the dask config
    ``streamlsq.design-state-bytes``: before the design is built or a state allocated."""
    limit = _state_limit()
    need = 8 * (n_columns + 1) ** 2
    if need > limit:
        many = "at least " if least else ""
        raise InputError(f"{label}: the formula {formula!r} makes {many}{n_columns} columns: a "
                         f"fit's {n_columns + 1} x {n_columns + 1} state would need "
                         f"{_gib(need)}, above the limit of {_gib(limit)} (dask config "
                         "streamlsq.design-state-bytes, DASK_STREAMLSQ__DESIGN_STATE_BYTES); "
                         "fewer levels or terms, or raise the limit")


def least_columns(formula: str, levels: dict) -> int:
    """The fewest columns formulaic can make of ``formula``'s right-hand side given the
    ``levels`` of its categorical columns, counted without building anything: per term
    (the intercept left out) the product over its factors of a categorical column's levels
    less the reference level, 1 for a number (formulaic makes each factor's full or
    reduced coding, so this is exact for treatment coding beside an intercept)."""
    total = 0
    quoted = _quoted(formula)
    for term in parse(formula).rhs:
        if str(term) == "1":
            continue
        width = 1
        for factor in term.factors:
            read: set = set()
            _factor_columns(factor, read, set(), quoted=quoted)
            for name in sorted(read & set(levels)):
                width *= max(len(levels[name]) - 1, 1)
        total += width
    return total


def design_labels(formula: str, levels: dict) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The labels ``formula`` gives the design's columns (the intercept left out) and the
    response's when its categorical columns have the ``levels`` (column -> list) and every
    other column it reads holds numbers, and whether it has an intercept: what a formula
    fit's coefficients and targets are labelled by, so that a result's formula and levels
    can be checked against its coefficients without a row (formulaic's specs are built on
    one row made of the first level of each category; a label depends on the kinds of the
    columns and the levels, never on the values). The formula is checked first
    (:func:`check_formula`); a formula or levels formulaic cannot build raise ValueError."""
    import pandas as pd
    from formulaic import model_matrix

    names = check_formula(formula)
    parsed = parse(formula)
    frame = {}
    for name in sorted(set(names.rhs) | set(names.lhs)):
        if name in levels:
            kept = list(levels[name])
            frame[name] = pd.Categorical(kept[:1] or [None], categories=kept)
        elif name in names.rhs_categorical or name in names.lhs_categorical:
            raise ValueError(f"the formula makes '{name}' a category, whose levels it does "
                             "not list")
        else:
            frame[name] = [1.0]
    frame = pd.DataFrame(frame, index=[0])
    labels = []
    for side, side_names in (("rhs", names.rhs), ("lhs", names.lhs)):
        try:
            with np.errstate(all="ignore"):
                spec = model_matrix(getattr(parsed, side), _columns_of(frame, side_names),
                                    na_action="ignore", context=namespace()).model_spec
        except Exception as exc:
            raise ValueError(f"{type(exc).__name__}: {_first_line(exc)}") from None
        labels.append(tuple(str(c) for c in spec.column_names))
    rhs, lhs = labels
    return tuple(c for c in rhs if c != "Intercept"), lhs, "Intercept" in rhs


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
    #: the categorical columns whose levels the input declares itself (a converted store's
    #: attribute categories), not found by a pass over the rows: a value outside them is
    #: the input's inconsistency, not a level the fit did not see
    declared: tuple[str, ...] = ()

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
                if name in self.declared:
                    raise InputError(undeclared_level(label, name, values.iloc[i], start + i,
                                                      levels))
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
        frame = self.encode(_columns_of(frame, names), label, start)
        try:
            values = np.asarray(spec.get_model_matrix(_columns_of(frame, names),
                                                      context=namespace()), dtype=np.float64)
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


def _columns_of(frame, names):
    """The columns ``names`` of ``frame``, keeping its rows when there are none (``y ~ 1``)."""
    import pandas as pd

    return frame[list(names)] if names else pd.DataFrame(index=frame.index)


def _shown(levels) -> str:
    text = ", ".join(map(repr, levels[:8]))
    return text + (f", … ({len(levels)} in all)" if len(levels) > 8 else "")


def undeclared_level(label: str, name: str, level, row: int, levels) -> str:
    """The refusal of a value of the variable ``name`` outside the ``levels`` its attribute
    ``categories`` declares (a converted store's, edited or damaged since): the store's
    inconsistency, said alike by a fit and by ``info --check``."""
    return (f"{label}: variable '{name}' has the level {level!r} at row {row}, which its "
            f"attribute categories ({_shown(tuple(levels))}) does not list; the store is "
            "damaged: remove the attribute (the levels are then found by a pass over the rows) "
            "or convert the table again")


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

    parsed, names = parse(formula), check_formula(formula)
    rhs_vars, lhs_vars = names.rhs, names.lhs
    used = tuple(sorted(set(rhs_vars) | (set(lhs_vars) if response else set())))
    categorical = sorted({n for n in used if not kinds[n]}
                         | set(names.rhs_categorical)
                         | (set(names.lhs_categorical) if response else set()))
    for name, factor in names.computed:  # a function of text: no level makes it a number
        if name in used and not kinds[name]:
            raise InputError(text_for_numbers(rows, name, n_rows, chunk_rows, "computed",
                                              factor=factor))
    if levels is None:
        levels = {n: categories[n] for n in categorical if categories.get(n) is not None}
        declared = tuple(sorted(levels))
        levels.update(find_levels(rows, [n for n in categorical if n not in levels], n_rows,
                                  chunk_rows))
        _refuse_numbers_as_text(rows, n_rows, chunk_rows, levels, [
            n for n in categorical if n not in names.rhs_categorical
            and not (response and n in names.lhs_categorical)], rhs_vars)
    else:
        declared = ()
        missing = [n for n in categorical if n not in levels]
        if missing:
            raise InputError(f"{label}: column '{missing[0]}' is a category the fit's design "
                             "does not know")
        levels = {n: tuple(levels[n]) for n in categorical}
    _refuse_formulaic_names(formula, used, levels, categorical, label)
    check_design_size(least_columns(formula, {n: levels[n] for n in categorical
                                              if n in rhs_vars}), formula, label, least=True)
    draft = Design(formula, tuple((n, tuple(levels[n])) for n in categorical), (), (), False,
                   rhs_vars, lhs_vars, (), None, declared=declared)
    # the specs are built on a few rows: the levels are the categories' own, every transform
    # is stateless, so the spec is the same as of any rows, and the design's width is known
    # before a chunk of it is made (check_design_size)
    first = draft.encode(read_frame(rows, used, 0, min(n_rows, SPEC_ROWS)), label, 0)
    specs = {}
    for side, side_names in (("rhs", rhs_vars), ("lhs", lhs_vars if response else None)):
        if side_names is None:
            continue
        try:
            specs[side] = model_matrix(getattr(parsed, side), _columns_of(first, side_names),
                                       na_action="ignore", context=namespace()).model_spec
        except Exception as exc:
            raise InputError(f"{label}: the formula {formula!r} cannot be evaluated on its rows "
                             f"({type(exc).__name__}: {_first_line(exc)})") from None
        stateful = ", ".join(map(str, specs[side].transform_state))
        if stateful:
            raise InputError(f"{label}: the formula {formula!r} has a transform that depends "
                             f"on the rows it sees ({stateful}): the design would differ from "
                             "chunk to chunk; compute that column before the fit")
        if side == "rhs":
            check_design_size(sum(c != "Intercept" for c in specs[side].column_names),
                              formula, label)
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
                  contrasts, draft.declared)


def _refuse_numbers_as_text(rows: RowsReader, n_rows: int, chunk_rows: int, levels: dict,
                            bare, rhs) -> None:
    """Refuse a column of text read as categories though most of its distinct values are
    numbers (once thousands separators are removed): numbers a reader took for text (a
    '1,234.5' among them, or all written with separators), which as categories make a level
    per value (a singular design, or a wrong model without a word). ``bare``: the columns not
    written in C(), which says categories (offered as the remedy for a column of ``rhs``,
    the right-hand side's)."""
    for name in bare:
        counted = numbers_as_text(levels[name])
        if counted is not None:
            raise InputError(text_for_numbers(rows, name, n_rows, chunk_rows,
                                              "formula" if name in rhs else "response",
                                              counted))


def _refuse_formulaic_names(formula: str, used, levels: dict, categorical, label: str) -> None:
    """Names formulaic would take for something else, refused rather than fitted wrongly: a
    column named ``Intercept`` (the name of the design's constant, which replaces it without a
    word) and a level beginning with ``__`` (formulaic leaves that level's column out of the
    design: three levels, one column fewer than statsmodels' or R's)."""
    if "Intercept" in used:
        raise InputError(f"{label}: the formula {formula!r} reads the column 'Intercept', the "
                         "name a formula's design gives its constant, which would take the "
                         "column's place; rename the column")
    for name in categorical:
        hidden = [v for v in levels[name] if isinstance(v, str) and v.startswith("__")]
        if hidden:
            raise InputError(f"{label}: column '{name}' has the level {hidden[0]!r}: formulaic, "
                             "which builds the design, leaves out the column of a level whose "
                             "name begins with '__'; rename the level (e.g. with pandas' "
                             "cat.rename_categories) or the values")


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

    def described(self, name: str, values: np.ndarray, row: int) -> str:
        """Variable ``name`` as a message about the non-finite ``values`` of its row ``row``
        names it: the columns the formula reads that miss a value at that row (read again:
        a missing value makes the whole row NaN), else the formula's column that holds them
        (a transform undefined at a value)."""
        if name not in (DESIGN, RESPONSE):
            return f"variable '{name}'"
        side = "design" if name == DESIGN else "response"
        read = self.raw(name)
        try:  # the error's path: one row read again
            missing = [c for c, gap in read_frame(self.inner, read, row, row + 1).isna()
                       .iloc[0].items() if gap]
        except Exception:  # the row unreadable now: the columns it may be in
            missing = []
        if len(missing) == 1:
            return f"the formula's {side} (a value missing in column {missing[0]!r})"
        if missing:
            return (f"the formula's {side} (values missing in columns "
                    f"{', '.join(map(repr, missing))})")
        labels = self.design.terms if name == DESIGN else self.design.responses
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size and len(labels) == values.size:
            return f"the column {labels[bad[0]]!r} of the formula's {side}"
        return (f"the formula's {side} (a value missing in a column it reads: "
                f"{', '.join(read)})")

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
        if not self.raw(name):  # a design of the intercept alone (y ~ 1): no column
            return np.empty((stop - start, 0))
        frame = read_frame(self.inner, self.raw(name), start, stop)
        values = self.design.matrix(frame, name, self.label, start)
        with _lock:
            _kept[key] = values
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
        return values

    def reading(self, names, start: int, stop: int):
        """The inner variables behind ``names`` read together (a table's part decoded once
        for the formula's columns, the weights and the labels)."""
        return self.inner.reading(tuple(dict.fromkeys(
            v for name in names for v in self.raw(name))), start, stop)

    def chunk_stamps(self, names, contents: bool = False) -> dict:
        """The stamps of the inner variables behind each of ``names``, joined chunk by
        chunk."""
        out = {}
        for name in names:
            inner = self.inner.chunk_stamps(list(self.raw(name)), contents)
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
        names = check_formula(formula)
        self.rhs_vars, self.lhs_vars = names.rhs, names.lhs
        self.label, self.attrs, self.found = inner.label, inner.attrs, inner.found
        # a folder's partition keys, for the refusal of a weight or group variable missing
        self.partitions = getattr(inner, "partitions", {})
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

    def _backtick_note(self) -> str:
        """Why a column of the data whose name holds a backtick, which a formula cannot
        write, may be the one missing."""
        held = sorted(str(n) for n in self.inner.members if "`" in str(n))
        return f"; the column {held[0]!r}: {BACKTICK_NAME}" if held else ""

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        """The formula's columns opened, checked and encoded (the levels found), then the
        design and response as the variables they make."""
        used = tuple(sorted(set(self.rhs_vars) | (set(self.lhs_vars) if self.response
                                                  else set())))
        for name in used:
            if name not in self.inner.members:
                raise InputError(column_of_later_files(self.inner, name) or
                                 f"{self.label}: column '{name}' of the formula "
                                 f"{self.formula!r} is missing (found: {self.found or 'none'})"
                                 + (look_alike(name, self.inner.members)
                                    or partition_note(self.inner, name)
                                    or self._backtick_note()))
        per_row = [n for n in names if n not in (DESIGN, RESPONSE)]
        # the column that counts the rows: the formula's first, else (the intercept alone,
        # y ~ 1, on new rows without y) any of the input's
        counter = used[:1] or tuple(sorted(self.inner.members, key=str))[:1]
        if not counter:
            raise InputError(f"{self.label}: holds no column to count the rows of the formula "
                             f"{self.formula!r}")
        raw = self.inner.columns(tuple(dict.fromkeys((*used, *counter, *per_row))), dim)
        for name in used:
            if raw[name].dims[:1] != (dim,) or len(raw[name].shape) != 1:
                raise InputError(f"{self.label}: column '{name}' of the formula has dims "
                                 f"{raw[name].dims}, expected ('{dim}',): one value per row")
            if getattr(raw[name].dtype, "kind", "O") in "mM":
                # read as levels, a date made a column per row (singular) or, in C(),
                # levels no result can keep (unexpected error, exit 1)
                raise InputError(f"{self.label}: column '{name}' of the formula "
                                 f"{self.formula!r} holds {raw[name].dtype} values (dates or "
                                 "durations), which a formula reads neither as numbers nor as "
                                 "levels: compute a number of them before the fit (e.g. days "
                                 f"since a date), or make them text for C({name})")
        read = self.inner.as_read({n: raw[n] for n in used}, labels=used)
        # a pandas extension dtype (the strings of a Dataset's '<U' variable under pandas 3)
        # is no NumPy dtype: its kind says whether it holds numbers
        kinds = {n: getattr(c.dtype, "kind", "O") in "iufb" for n, c in read.items()}
        n = raw[counter[0]].n_rows
        self.chunk = self.inner.chunk_rows(counter[0], n, max(len(used), 1))
        self.inner_rows = self.inner.rows(self.chunk)
        categories = {name: self.inner.categories(name) for name in used}
        self.design = build_design(self.formula, self.inner_rows, self.label, n, self.chunk,
                                   kinds, categories, self.given_levels, self.response,
                                   self.inner.members)
        if not self.design.terms and not self.design.intercept:
            raise InputError(f"{self.label}: the formula {self.formula!r} makes no column (no "
                             "term and no intercept)")
        out = {DESIGN: Column((dim, TERM_DIM), (n, len(self.design.terms)),
                               np.dtype(np.float64))}
        if self.response:
            out[RESPONSE] = Column((dim, RESPONSE_DIM), (n, len(self.design.responses)),
                                    np.dtype(np.float64))
        out.update({name: raw[name] for name in per_row})
        return {name: out[name] for name in names}

    def as_read(self, columns: dict[str, Column], labels: tuple = (),
                options: dict | None = None) -> dict[str, Column]:
        own = {n: c for n, c in columns.items() if n not in (DESIGN, RESPONSE)}
        read = self.inner.as_read(own, labels, options) if own else {}
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


def intercept_label(formula: str | None) -> str:
    """The label of a fit's intercept: formulaic's and statsmodels' ``Intercept`` in a
    formula fit (every label there is formulaic's), ``intercept`` otherwise."""
    return "intercept" if formula is None else "Intercept"
