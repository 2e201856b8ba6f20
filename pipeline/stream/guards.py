"""Never a NaN published: what the engines check before a state or a solve goes on.

Every fold of the sequential engine and every solve of the scan engine is checked
finite. Finite data can still overflow: values near the square root of the largest
float (:func:`~streamlsq.kernels.limits.largest_safe_magnitude`) make the sums of a
least-squares recursion Inf and its solves NaN, and a kernel fed such sums may fail
in ways that say nothing of the cause ("eigenvalues did not converge"). At the other
end, subnormal values (nonzero, below the smallest normal float: 2.2e-308) keep fewer
digits and their products underflow to 0: a factor of them looks singular, and a ridge
start turns them into subnormal coefficients. These functions find, on the error path
only, the block whose rows broke the state and name its store, variable, chunk, rows and
the value at fault, with the remedy.
"""

from __future__ import annotations

import re

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.formulas import intercept_label
from streamlsq.kernels.limits import largest_safe_magnitude, state_is_finite
from streamlsq.kernels.linalg import SingularMatrixError, aliased_phrase

__all__ = [
    "NonFiniteSolve",
    "first_nonfinite_block",
    "first_subnormal",
    "has_subnormal",
    "largest_value",
    "nonfinite_error",
    "overflow_error",
    "overflow_in_rows",
    "rank_phrase",
    "source_labels",
    "remedy",
    "unheld_levels",
    "subnormal_in_buffer",
    "subnormal_in_rows",
]


class NonFiniteSolve(InputError):
    """A solve of the scan engine at ``step`` gave a non-finite state. The engine then
    looks for the rows that caused it (:func:`~streamlsq.stream.engines.overflow_in_span`)
    to name them; this message is what the user gets when none is found."""

    def __init__(self, label: str, step: int):
        super().__init__(f"{label}: variable 'X': the solve at step {step} is not finite: "
                         "the data's magnitudes overflow float64; rescale the data "
                         "(streamlsq info --check names such values)")
        self.label, self.step = label, int(step)

    def __reduce__(self):  # keep the step on the way back from a worker
        return (type(self), (self.label, self.step))


def rank_phrase(exc: SingularMatrixError, rec, labels, rows: int | None = None) -> str:
    """"numerical rank r of k" of a refused design and, when its rows are enough and
    weigh alike (no forgetting factor; ``rec`` None: a GLM's weighted design), which
    columns are aliased, by their ``labels`` ("column 'one' is aliased with 'intercept'";
    the rule of :func:`~streamlsq.kernels.linalg.column_rank`), and for a zero column of a
    categorical level, that no row holds the level (:func:`unheld_levels`)."""
    if exc.rank is None:
        return str(exc)
    text = f"numerical rank {exc.rank} of {exc.size}"
    forgetting = 1.0 if rec is None else rec.get_params().get("forgetting", 1.0)
    if exc.aliased and forgetting == 1.0 and (rows is None or rows >= exc.size):
        text += ": " + aliased_phrase(exc.aliased, labels) + unheld_levels(exc.aliased, labels)
    return text


#: formulaic's label of the column of one level of a categorical column (treatment
#: contrasts, the only ones a formula may ask for): "g[T.z]", "C(g)[T.z]"
_LEVEL_LABEL = re.compile(r"^(?:C\((?P<called>.+)\)|(?P<column>.+))\[T\.(?P<level>.*)\]$")


def unheld_levels(aliased, labels) -> str:
    """Why a level's column is zero in every row: the rows hold no such value, though the
    column's categories declare it (a pandas ``category`` column, or a converted store's
    ``categories``). "" when no zero column is a level's."""
    found = []
    for j, others in aliased:
        match = None if others or labels is None or j >= len(labels) else \
            _LEVEL_LABEL.match(str(labels[j]))
        if match:
            found.append((match["called"] or match["column"], match["level"]))
    if not found:
        return ""
    named = ", ".join(f"level {level!r} of column {column!r}" for column, level in found)
    return (f" ({named}: declared in the column's categories, held by none of these "
            "rows; drop unused levels, e.g. with pandas' cat.remove_unused_categories(), "
            "or start with rows that hold each level)")


def source_labels(source, n_coef: int) -> list | None:
    """The labels of the columns a recursion reads from ``source`` (the intercept's first,
    labelled as the result labels it, when the reading path prepends it), or None when
    they do not number ``n_coef``: what an engine names aliased columns by (the result's
    own labels are :func:`~streamlsq.stream.layout.coef_labels`, used by the final
    check)."""
    if source is None:
        return None
    constant = [intercept_label(source.variables.formula)] if source.intercept else []
    labels = constant + [str(f) for f in source.features]
    return labels if len(labels) == n_coef else None


def largest_value(X: np.ndarray, Y: np.ndarray) -> tuple[str, int, float]:
    """(variable, row offset, value) of the largest |value| in the rows (X, Y)."""
    best = ("X", 0, 0.0)
    for name, A in (("X", X), ("y", Y)):
        if A.size:
            a = np.abs(np.nan_to_num(A, nan=0.0, posinf=np.inf, neginf=np.inf))
            i = int(np.argmax(a.reshape(len(A), -1).max(axis=1)))
            v = float(a[i].max())
            if v > best[2]:
                best = (name, i, v)
    return best


def _where(span, part, buf_start, lo, hi, offset):
    """(source, first storage row, last storage row or None, storage row of ``offset``)."""
    sec = part.section
    src = span.sources[sec.source]
    first = sec.storage_row(src, buf_start + lo)
    last = sec.storage_row(src, buf_start + hi - 1)
    row = sec.source_row(src, buf_start + lo + offset)
    return src, first, last, row


def _chunk_of(src, variable: str, row: int) -> int:
    try:
        rows = int(src.array(variable).chunks[0])
    except Exception:
        rows = src.chunk_rows
    return row // max(rows, 1)


def _message(span, part, k, j, buf_start, edges, X, Y, what: str) -> str:
    lo, hi = int(edges[j]), int(edges[j + 1])
    variable, offset, value = largest_value(X[lo:hi], Y[lo:hi])
    src, first, last, row = _where(span, part, buf_start, lo, hi, offset)
    step = part.step_base + k + j + 1
    sec = part.section
    rows = (f"rows {first}-{last}" if first is not None
            else f"epoch {sec.epoch}, shuffled rows")
    limit = largest_safe_magnitude(_stream_rows(span), X.dtype)
    size = (f"above {limit:.3g}, where the sums over the store's rows overflow {X.dtype}"
            if value > limit else "the data's scale overflows the recursion's arithmetic")
    return (f"{src.label}: variable '{variable}' chunk {_chunk_of(src, variable, row)}: block "
            f"{step} ({rows}) {what}; its largest |value| is {value:.3g} at row {row} "
            f"({size}): {remedy(X.dtype)}")


def remedy(dtype) -> str:
    """What to do about values too large for ``dtype``: a wider type first, if there is one."""
    if np.dtype(dtype) != np.float64:
        return f"compute in float64 (--dtype float64; the fit is in {np.dtype(dtype)}) or " \
            "rescale the data"
    return "rescale the data"


def _stream_rows(span) -> int:
    return max(int(s.n_rows) for s in span.sources)


def first_nonfinite_block(method, state, X, Y, edges) -> tuple[int, BaseException | None]:
    """Fold block by block from ``state``: the index of the first block after which the
    state is not finite or the kernel fails (with its error), else (len(edges) - 1, None)."""
    for j in range(len(edges) - 1):
        a, b = int(edges[j]), int(edges[j + 1])
        try:
            with np.errstate(all="ignore"):
                state = method.update(state, X[a:b], Y[a:b])
        except (ValueError, ArithmeticError) as exc:
            return j, exc
        if not state_is_finite(state):
            return j, None
    return len(edges) - 1, None


def nonfinite_error(span, part, method, state, X, Y, edges, k, buf_start) -> InputError:
    """The fold of blocks ``edges`` gave a non-finite state or coefficients: name a
    subnormal value of their rows (whose products underflow), or the block."""
    subnormal = subnormal_in_buffer(span, part, X[:int(edges[-1])], Y[:int(edges[-1])],
                                    buf_start)
    if subnormal is not None:
        return subnormal
    j, _ = first_nonfinite_block(method, state, X, Y, edges)
    j = min(j, len(edges) - 2)
    return InputError(_message(span, part, k, j, buf_start, edges, X, Y,
                               f"makes the {method.name} state non-finite"))


def overflow_error(span, part, X, Y, edges, k, buf_start) -> InputError | None:
    """When a kernel refused blocks ``edges`` and their rows hold subnormal values or
    values above the safe magnitude, the error that says so (the kernel's own message would
    mislead); else None."""
    subnormal = subnormal_in_buffer(span, part, X[:int(edges[-1])], Y[:int(edges[-1])],
                                    buf_start)
    if subnormal is not None:
        return subnormal
    limit = largest_safe_magnitude(_stream_rows(span), X.dtype)
    for j in range(len(edges) - 1):
        lo, hi = int(edges[j]), int(edges[j + 1])
        _, _, value = largest_value(X[lo:hi], Y[lo:hi])
        if value > limit:
            return InputError(_message(span, part, k, j, buf_start, edges, X, Y,
                                       f"cannot be solved in {X.dtype}"))
    return None


def first_subnormal(X: np.ndarray, Y: np.ndarray) -> tuple[str, int, float] | None:
    """(variable, row offset, value) of the first row holding a subnormal value (nonzero,
    below the smallest normal number of its dtype), X before y; None when there is none."""
    best = None
    for name, A in (("X", X), ("y", Y)):
        if not A.size or A.dtype.kind != "f":
            continue
        a = np.abs(A.reshape(len(A), -1))
        tiny = np.finfo(A.dtype).tiny
        rows = np.flatnonzero(((a < tiny) & (a > 0)).any(axis=1))
        if rows.size and (best is None or rows[0] < best[1]):
            row = int(rows[0])
            values = a[row][(a[row] < tiny) & (a[row] > 0)]
            best = (name, row, float(values[0]))
    return best


def subnormal_message(src, variable: str, row: int, value: float, dtype) -> str:
    """The line naming a subnormal value of the data (store, variable, chunk, row)."""
    tiny = np.finfo(dtype).tiny
    return (f"{src.label}: variable '{variable}' chunk {_chunk_of(src, variable, row)} has the "
            f"subnormal value {value:.3g} at row {row}, below {tiny:.3g}, the smallest normal "
            f"{np.dtype(dtype)}: it keeps fewer digits and its products underflow, so least "
            "squares on it loses them all; rescale the data")


def _span_row(span, offset: int):
    """(source, source row) of row ``offset`` of a Dask task's rows as ``read_span`` reads
    them (its parts one after another), or None past them."""
    for part in span.parts:
        n = part.last_row - part.first_row
        if offset < n:
            sec = part.section
            src = span.sources[sec.source]
            return src, sec.source_row(src, part.first_row + offset)
        offset -= n
    return None


def subnormal_in_rows(span, X, Y) -> InputError | None:
    """For a Dask task's rows as read by ``read_span`` (its parts one after another): the
    error naming the first subnormal value, or None."""
    found = first_subnormal(X, Y)
    located = None if found is None else _span_row(span, found[1])
    if located is None:
        return None
    src, row = located
    return InputError(subnormal_message(src, found[0], row, found[2], X.dtype))


def subnormal_in_buffer(span, part, X, Y, buf_start) -> InputError | None:
    """The error naming the first subnormal value among the rows a sequential segment holds
    (those of ``part`` from ``buf_start``), or None."""
    found = first_subnormal(X, Y)
    if found is None:
        return None
    variable, offset, value = found
    sec = part.section
    src = span.sources[sec.source]
    return InputError(subnormal_message(src, variable, sec.source_row(src, buf_start + offset),
                                        value, X.dtype))


def has_subnormal(values: np.ndarray) -> bool:
    """Whether ``values`` hold a subnormal number (nonzero, below the smallest normal)."""
    a = np.abs(values)
    return bool(((a > 0) & (a < np.finfo(values.dtype).tiny)).any())


def overflow_in_rows(span, X, Y) -> InputError | None:
    """For a Dask task's rows as read by ``read_span`` (its parts one after another):
    the error naming the largest value when it is above the safe magnitude, else None."""
    variable, offset, value = largest_value(X, Y)
    limit = largest_safe_magnitude(_stream_rows(span), X.dtype)
    located = None if value <= limit else _span_row(span, offset)
    if located is None:
        return None
    src, row = located
    return InputError(
        f"{src.label}: variable '{variable}' chunk {_chunk_of(src, variable, row)} has "
        f"|value| {value:.3g} at row {row}, above {limit:.3g}, where the sums over the "
        f"store's rows overflow {X.dtype}: {remedy(X.dtype)}")
