"""Multi-task stores (``docs/stores.md``): ragged tasks in CSR layout, validated, planned in chunks.

Layout of a multi-task store (Zarr v3, one group):

==============  ==================  ======================================================
variable        dims                notes
==============  ==================  ======================================================
``X``           (row, feature)      rows of all tasks, task after task; real numeric dtype
``y``           (row,)              one target per row
``task_ptr``    (task_edge,)        int64 offsets, length n_tasks + 1: rows of task i are
                                    ``task_ptr[i]:task_ptr[i+1]``; starts at 0, never
                                    decreases, ends at the number of rows
``role``        (task,)             optional: the role of each task, written as users
                                    write it (:func:`decode_roles`): the strings
                                    ``light`` (D_L1), ``heavy`` (D_H), ``light2`` (D_L2)
                                    (fixed or variable length), integer codes named by
                                    CF attributes ``flag_values`` / ``flag_meanings``, or
                                    the codes 0 light, 1 heavy, 2 light2 without them
``component``   (task,)             optional, synthetic only: the true component of a task
``w_true``      (component, feature)  optional, synthetic only
``s_true``      (component,)        optional: true noise standard deviations
``p_true``      (component,)        optional: true weights
==============  ==================  ======================================================

``simulate mlr`` writes int8 codes with ``flag_values = [0, 1, 2]`` and
``flag_meanings = "light heavy light2"`` (CF flags: xarray and netCDF readers
name the codes); a store written by hand may hold the names themselves, e.g.
``xr.Dataset({"role": ("task", ["light", "heavy", ...])}).to_zarr(...)``.
Names are read without regard to case or surrounding blanks, and ``light1``
is accepted for ``light``. Anything else is refused by value and task.

Roles of a store without ``role`` are assigned by rows per task
(:func:`task_sets` with ``roles="rows"``): every task with at least 2 rows is a
light task used both for the subspace (D_L1) and for classification and
refinement (D_L2), and the tasks with at least ``heavy_rows`` rows are also
heavy tasks (D_H). Reusing tasks across the steps gives up the independence the
paper's analysis assumes, but it is what a small real dataset affords; a store
that wants disjoint sets says so with ``role``. Tasks with fewer than 2 rows
are then left out of every set (their count is reported). Without
``heavy_rows`` the threshold comes from the store's task sizes
(``kernels.mlr.default_heavy_rows``): the larger half of the tasks (at least
the median number of rows), never fewer than 2 rows per split group (4L), and
at most :data:`MAX_DEFAULT_HEAVY` tasks (the largest ones).

Validation on open (:func:`open_tasks`): names, dims and dtypes of every
variable, ``task_ptr`` monotone, starting at 0 and ending at the number of rows
(naming the first bad index), role codes, and every chunk of every variable
present. Values are checked for NaN/Inf inside the task that reads them; the
error names the store, variable, chunk and row.

Work is planned in chunks of about 10⁴ tasks (:func:`plan_chunks`), aligned to
task boundaries: a Dask task reads its chunk's rows itself and hands them to a
vectorised kernel, never one Dask task per small task.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.location import check_storage_options, locate
from streamlsq.io.stores import (
    StoreRows,
    StoreSource,
    cf_decodings,
    check_complete,
    check_numeric,
    dimension_names,
    get_array,
    open_group,
    read_checked,
    require_dimension_names,
    require_variables,
    store_label,
    store_token,
)
from streamlsq.kernels import mlr
from streamlsq.options.mlr import DEFAULT_CHUNK_TASKS, HOLDOUT  # declared with the options
from streamlsq.runtime.memory import fast_large_allocations

__all__ = [
    "MAX_DEFAULT_HEAVY",
    "HOLDOUT",
    "ROLE_CODES",
    "TASK_VARIABLES",
    "TaskChunk",
    "TaskSets",
    "TaskSource",
    "decode_roles",
    "open_tasks",
    "plan_chunks",
    "task_input_identity",
    "task_sets",
]

#: the variables of a multi-task store whose chunks a run reads (a checkpoint stamps them)
TASK_VARIABLES = ("X", "y", "task_ptr", "role")
#: role name -> code stored in ``role``
ROLE_CODES = {"light": 0, "heavy": 1, "light2": 2}
ROLE_ATTRS = {"flag_values": [0, 1, 2], "flag_meanings": "light heavy light2"}
#: role names read from strings or flag meanings (case and blanks ignored)
ROLE_NAMES = {"light": 0, "light1": 0, "heavy": 1, "light2": 2}
#: most heavy tasks the default rule assigns (average linkage holds all their distances)
MAX_DEFAULT_HEAVY = 5_000
TASK_DIMS = {
    "X": ("row", "feature"),
    "y": ("row",),
    "task_ptr": ("task_edge",),
    "role": ("task",),
    "component": ("task",),
    "w_true": ("component", "feature"),
    "s_true": ("component",),
    "p_true": ("component",),
}
TRUTH = ("component", "w_true", "s_true", "p_true")
#: tasks per chunk of work (~10⁴ tasks amortise a scheduler hop; docs/architecture.md)
CHUNK_TASKS = DEFAULT_CHUNK_TASKS
#: rows one chunk of work may span (64 MB of X at d = 8): bounds a worker's memory
MAX_CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class TaskSource(StoreSource):
    """A validated multi-task store: enough to read any task range on any worker (picklable).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=3, n_light=100, t_light=4,
    ...                               n_heavy=20, t_heavy=30, n_light2=10, t_light2=6)
    >>> source = streamlsq.open_tasks(path)
    >>> X, y, task_ptr = source.read_tasks(0, 3)  # the rows of tasks 0, 1 and 2
    >>> X.shape, task_ptr.tolist()
    ((12, 3), [0, 4, 8, 12])
    >>> tmp.cleanup()
    """

    rows: StoreRows
    n_rows: int
    n_features: int
    n_tasks: int
    chunk_rows: int
    has_role: bool
    has_truth: bool
    attrs: dict = field(default_factory=dict, compare=False, hash=False)
    #: a task's rows are its evidence: no task command drops them (none has --missing)
    nan_remedy = "remove or impute the non-finite values"

    def task_ptr(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Offsets ``task_ptr[lo:hi+1]`` (global row numbers), int64."""
        hi = self.n_tasks if hi is None else hi
        return self.read_rows("task_ptr", lo, hi + 1, np.int64, check=False)

    def roles(self) -> np.ndarray | None:
        """Role codes (n_tasks,) int8 (0 light, 1 heavy, 2 light2) decoded from the stored
        ``role`` (:func:`decode_roles`), or None when the store has no ``role``."""
        if not self.has_role:
            return None
        arr = self.array("role")
        values = read_checked(self.path, self.group, "role", arr, 0, self.n_tasks, self.label)
        return decode_roles(values, dict(arr.attrs), self.label)

    def truth(self) -> dict | None:
        """{"component", "w_true", "s_true", "p_true"} of a synthetic store, else None."""
        if not self.has_truth:
            return None
        return {name: np.asarray(self.array(name)[:]) for name in TRUTH}

    def read_tasks(self, lo: int, hi: int, dtype=np.float64, ptr: np.ndarray | None = None):
        """Tasks ``lo:hi`` as (X (n, d), y (n,), local task_ptr from 0); refuses NaN/Inf.
        ``ptr``: their offsets ``task_ptr[lo:hi+1]`` when known (not read again)."""
        ptr = self.task_ptr(lo, hi) if ptr is None else np.asarray(ptr, np.int64)
        r0, r1 = int(ptr[0]), int(ptr[-1])
        X = self.read_rows("X", r0, r1, dtype)
        y = self.read_rows("y", r0, r1, dtype)
        return X, y, ptr - r0


def open_tasks(path: str | os.PathLike, group: str | None = None, *,
               targets: bool = True, storage_options: dict | None = None) -> TaskSource:
    """Open and validate a multi-task store's layout; raise :class:`InputError` on any defect.

    ``targets=False`` opens a store of new covariates: ``y`` may be missing
    (``predict(..., new_rows=...)`` reads only ``X`` and ``task_ptr``). ``path`` may be an
    fsspec URL (with ``storage_options``) or a zarr store object.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=2, d=3, n_light=100, t_light=4,
    ...                               n_heavy=20, t_heavy=30, n_light2=10, t_light2=6)
    >>> source = streamlsq.open_tasks(path)
    >>> source.n_tasks, source.n_features, source.n_rows
    (130, 3, 1060)
    >>> tmp.cleanup()
    """
    check_storage_options(storage_options, [path])  # a local path would ignore them
    loc = locate(path, storage_options)
    if loc is None:
        raise InputError(f"{path!r}: a multi-task store is read by path, URL or zarr store "
                         "object")
    path = loc.url
    label = store_label(loc.shown or path, group)
    g = open_group(loc, group)
    if targets:
        members = require_variables(g, label, ("X", "y", "task_ptr"), "a multi-task store "
                                    "needs X (row, feature), y (row,) and task_ptr (task_edge,)")
    else:
        members = require_variables(g, label, ("X", "task_ptr"), "a store of new covariates "
                                    "needs X (row, feature) and task_ptr (task_edge,)")
    arrays = {name: get_array(g, label, name) for name in TASK_DIMS if name in members}
    for name, arr in arrays.items():
        require_dimension_names(arr, label, loc.shown or path, group, name,
                                wanted=TASK_DIMS[name])
        if dimension_names(arr) != TASK_DIMS[name]:
            raise InputError(
                f"{label}: variable '{name}' has dims {dimension_names(arr) or arr.shape}, "
                f"expected {TASK_DIMS[name]}"
            )
    # the rows are read as xarray decodes them (as a stream store's are); the truth as stored
    decodings = cf_decodings(loc, group, {n: arrays[n] for n in ("X", "y") if n in arrays},
                             label)
    for name in ("X", "y", "w_true", "s_true", "p_true"):
        if name in arrays:
            check_numeric(label, name, arrays[name].dtype, decodings.get(name))
    for name in ("task_ptr", "component"):
        if name in arrays and np.dtype(arrays[name].dtype).kind not in "iu":
            raise InputError(
                f"{label}: variable '{name}' has dtype {arrays[name].dtype}, expected integers"
            )
    X, ptr_arr = arrays["X"], arrays["task_ptr"]
    y = arrays.get("y", X)
    if y.shape[0] != X.shape[0]:
        raise InputError(f"{label}: variable 'y' has {y.shape[0]} rows but 'X' has {X.shape[0]}")
    if X.shape[1] == 0:
        raise InputError(f"{label}: variable 'X' has no features")
    n_tasks = ptr_arr.shape[0] - 1
    if n_tasks < 1:
        raise InputError(f"{label}: variable 'task_ptr' must hold at least 2 offsets (one task)")
    for name, arr in arrays.items():
        if name in ("role", "component") and arr.shape[0] != n_tasks:
            raise InputError(
                f"{label}: variable '{name}' has {arr.shape[0]} entries for {n_tasks} tasks"
            )
    for name, arr in arrays.items():
        check_complete(label, name, arr, dict(g.attrs), path, group)
    ptr = np.asarray(read_checked(path, group, "task_ptr", ptr_arr, 0, ptr_arr.shape[0],
                                  label))
    try:
        mlr.validate_task_ptr(ptr, X.shape[0])
    except ValueError as exc:
        raise InputError(f"{label}: variable 'task_ptr': {exc}") from None
    if "role" in arrays:
        role = read_checked(path, group, "role", arrays["role"], 0, n_tasks, label)
        decode_roles(role, dict(arrays["role"].attrs), label)
    has_truth = all(name in arrays for name in TRUTH)
    if has_truth:
        k = arrays["w_true"].shape[0]
        if arrays["w_true"].shape[1] != X.shape[1] or any(
            arrays[n].shape != (k,) for n in ("s_true", "p_true")
        ):
            raise InputError(
                f"{label}: variables 'w_true', 's_true', 'p_true' disagree on the components "
                "or features"
            )
    return TaskSource(
        rows=StoreRows(loc, group, store_token(loc), decodings),
        n_rows=int(X.shape[0]),
        n_features=int(X.shape[1]),
        n_tasks=int(n_tasks),
        chunk_rows=int(X.chunks[0]),
        has_role="role" in arrays,
        has_truth=has_truth,
        attrs=dict(g.attrs),
    )


def _role_name(value) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return str(value).strip().lower()


def _flag_map(attrs: dict, label: str) -> dict | None:
    """{code: role code} from CF ``flag_values``/``flag_meanings``, or None without them."""
    if "flag_values" not in attrs and "flag_meanings" not in attrs:
        return None
    values = np.atleast_1d(np.asarray(attrs.get("flag_values", [])))
    meanings = str(attrs.get("flag_meanings", "")).split()
    if values.size != len(meanings) or values.dtype.kind not in "iu":
        raise InputError(
            f"{label}: variable 'role' has flag_values {values.tolist()} and flag_meanings "
            f"{meanings}; expected as many integer codes as names"
        )
    out = {}
    for code, meaning in zip(values.tolist(), meanings, strict=True):
        if _role_name(meaning) not in ROLE_NAMES:
            raise InputError(
                f"{label}: variable 'role' names code {code} '{meaning}' in flag_meanings; "
                "expected light, heavy or light2"
            )
        out[int(code)] = ROLE_NAMES[_role_name(meaning)]
    return out


def decode_roles(values, attrs: dict, label: str) -> np.ndarray:
    """Role codes (n_tasks,) int8 — 0 light, 1 heavy, 2 light2 — from a stored ``role``.

    Accepts the names as strings (fixed-length ``<U``/``S``, variable-length
    or object; case and blanks ignored, ``light1`` = ``light``), integer codes
    named by CF ``flag_values``/``flag_meanings`` in any order, or the integer
    codes 0, 1, 2 without those attributes. Anything else raises
    :class:`InputError` naming the store, the variable, the bad value and the
    first task that holds it.

    Examples
    --------
    >>> decode_roles(["heavy", "Light", "light2"], {}, "tasks.zarr").tolist()
    [1, 0, 2]
    >>> decode_roles([5, 7], {"flag_values": [5, 7], "flag_meanings": "light2 heavy"},
    ...              "tasks.zarr").tolist()
    [2, 1]
    """
    values = np.asarray(values)
    expected = ("expected light, heavy or light2 (strings, or integer codes named by "
                "flag_values/flag_meanings, or 0, 1, 2)")
    if values.dtype.kind in "USTO":
        names = np.array([_role_name(v) for v in values.ravel()], dtype=object)
        uniq, inverse = np.unique(names.astype(str), return_inverse=True)
        codes = np.array([ROLE_NAMES.get(u, -1) for u in uniq], dtype=np.int8)[inverse]
        bad = codes < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{label}: variable 'role' has value {str(values.ravel()[i])!r} at task {i}; "
                f"{expected}"
            )
        return codes
    if values.dtype.kind not in "iu":
        raise InputError(f"{label}: variable 'role' has dtype {values.dtype}; {expected}")
    mapping = _flag_map(attrs, label) or {0: 0, 1: 1, 2: 2}
    codes = np.full(values.shape, -1, dtype=np.int8)
    for code, role in mapping.items():
        codes[values == code] = role
    bad = codes < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        named = ", ".join(f"{c} ({n})" for c, n in zip(
            mapping, [("light", "heavy", "light2")[r] for r in mapping.values()], strict=True))
        raise InputError(
            f"{label}: variable 'role' has code {int(values[i])} at task {i}; expected "
            f"{named}"
        )
    return codes


def task_input_identity(source: TaskSource) -> list:
    """What identifies a multi-task input in a checkpoint's fingerprint: its place, shape
    and metadata version (a store rewritten since is refused on resume)."""
    return [source.identity(), source.group or "", source.n_rows,
            source.n_features, source.n_tasks, f"token:{source.token}"]


# -- task sets ---------------------------------------------------------------------
@dataclass
class TaskSets:
    """Which tasks play which role: boolean masks (n_tasks,) for D_L1, D_H and D_L2."""

    light: np.ndarray
    heavy: np.ndarray
    light2: np.ndarray
    rule: str
    unused: int = 0
    heavy_rows: int | None = None

    def mask(self, role: str) -> np.ndarray:
        return getattr(self, role)


def task_sets(
    source: TaskSource,
    ptr: np.ndarray,
    roles: str = "auto",
    heavy_rows: int | None = None,
    holdout: int = 0,
    splits: int = 1,
) -> TaskSets:
    """Task sets from the stored ``role`` or by rows per task (module docstring).

    ``roles``: "store" (needs ``role``), "rows", or "auto" ("store" when the
    store has ``role``, else "rows"). By rows, tasks with at least ``heavy_rows``
    rows are heavy; without ``heavy_rows`` the threshold is
    ``kernels.mlr.default_heavy_rows`` of the task sizes and ``splits`` (L).
    Refuses a light task with fewer than 2 rows or a light2 task without rows,
    naming the task. Rows are counted after holding out the last ``holdout``
    rows of every task. ``heavy_rows`` with the store's roles is refused: it would
    choose nothing.
    """
    sizes = np.diff(ptr) - holdout
    if roles == "auto":
        roles = "store" if source.has_role else "rows"
        if roles == "store" and heavy_rows is not None:  # it would choose nothing
            raise InputError(
                f"{source.label}: --heavy-rows {heavy_rows} (heavy_rows={heavy_rows}) goes "
                "with roles by rows per task, and the store's variable 'role' gives the roles "
                "(--roles auto takes it); give --roles rows (roles='rows') to let "
                "--heavy-rows choose the heavy tasks"
            )
    if roles == "store":
        role = source.roles()
        if role is None:
            raise InputError(
                f"{source.label}: variable 'role' is missing; assign roles by rows per task "
                "(roles='rows', --roles rows on the command line)"
            )
        sets = TaskSets(role == 0, role == 1, role == 2, "store")
        for name, need in (("light", 2), ("light2", 1)):
            short = sets.mask(name) & (sizes < need)
            if short.any():
                i = int(np.flatnonzero(short)[0])
                raise InputError(
                    f"{source.label}: task {i} (role {name}) has {int(sizes[i])} row(s); a "
                    f"{name} task needs at least {need}"
                    + (" (its rows are split in halves)" if need == 2 else "")
                )
        return sets
    if roles == "rows":
        if heavy_rows is None:
            try:
                heavy_rows = mlr.default_heavy_rows(sizes, splits, MAX_DEFAULT_HEAVY)
            except ValueError as exc:
                raise InputError(f"{source.label}: {exc}") from None
            rule = (f"rows (heavy_rows={heavy_rows}: default, h >= 4L = {4 * splits} "
                    "maximising h*sqrt(tasks with >= h rows))")
        elif heavy_rows < 2:
            raise InputError(
                f"{source.label}: assigning roles by rows needs heavy_rows >= 2 "
                f"(--heavy-rows N), got {heavy_rows}"
            )
        else:
            rule = f"rows (heavy_rows={heavy_rows})"
        light = sizes >= 2
        return TaskSets(light, sizes >= heavy_rows, light.copy(), rule,
                        unused=int((~light).sum()), heavy_rows=int(heavy_rows))
    raise InputError(f"roles must be 'auto', 'store' or 'rows', got {roles!r}")


# -- planning ------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskChunk:
    """Tasks ``lo:hi`` of the store, of which those with ``select`` (None: all) are used.

    ``first`` is the number of used tasks before ``lo`` (this chunk's offset in
    its task set), ``n`` the number used here. ``ptr``: the offsets
    ``task_ptr[lo:hi+1]`` when the plan knows them, so that the Dask task reading the
    chunk does not read (and decode a whole storage chunk of) ``task_ptr`` again.
    """

    lo: int
    hi: int
    first: int
    n: int
    select: np.ndarray | None = None
    ptr: np.ndarray | None = None


def plan_chunks(
    ptr: np.ndarray,
    mask: np.ndarray | None = None,
    chunk_tasks: int = CHUNK_TASKS,
    max_rows: int = MAX_CHUNK_ROWS,
) -> list[TaskChunk]:
    """Group the selected tasks into chunks of ≤ ``chunk_tasks`` tasks spanning ≤ ``max_rows`` rows.

    Chunks follow task order and cut only at task boundaries; a chunk's rows
    are the contiguous span from its first to its last selected task (so tasks
    of another role inside the span are read and skipped: with roles stored in
    contiguous runs, as ``simulate mlr`` writes them, nothing is skipped). A
    single task longer than ``max_rows`` gets a chunk of its own. The plan is a
    loop over chunks, not tasks.
    """
    if chunk_tasks < 1:
        raise InputError(f"chunk_tasks must be a positive integer, got {chunk_tasks}")
    n_tasks = ptr.size - 1
    sel = np.arange(n_tasks) if mask is None else np.flatnonzero(mask)
    starts, ends = ptr[sel], ptr[sel + 1]
    out, i = [], 0
    while i < sel.size:
        j = min(i + chunk_tasks, sel.size)
        j = min(j, int(np.searchsorted(ends, starts[i] + max_rows, side="right")))
        j = max(j, i + 1)
        lo, hi = int(sel[i]), int(sel[j - 1]) + 1
        select = None
        if hi - lo != j - i:
            select = np.zeros(hi - lo, dtype=bool)
            select[sel[i:j] - lo] = True
        out.append(TaskChunk(lo, hi, i, j - i, select, np.array(ptr[lo:hi + 1], np.int64)))
        i = j
    return out


def load_chunk(source: TaskSource, chunk: TaskChunk, transform=None, holdout: int = 0):
    """Read a chunk inside the task that uses it: (X, y, task_ptr) of its selected tasks.

    ``transform`` = (mean, T) whitens the features (``kernels.whiten``);
    ``holdout`` > 0 drops the last ``holdout`` rows of every task (they are
    held out for evaluation). Kernel refusals become :class:`InputError`
    naming the store and the task range.
    """
    X, y, ptr = source.read_tasks(chunk.lo, chunk.hi, ptr=chunk.ptr)
    try:
        if chunk.select is not None:
            X, y, ptr = mlr.select_tasks(X, y, ptr, chunk.select)
        if holdout:
            (X, y, ptr), _ = mlr.holdout_split(X, y, ptr, holdout)
        if transform is not None:
            X = mlr.whiten(X, *transform)
    except ValueError as exc:
        raise chunk_error(source, chunk, exc) from None
    return X, y, ptr


def chunk_error(source: TaskSource, chunk: TaskChunk, exc: Exception) -> InputError:
    """A kernel's refusal, as one line naming the store and the chunk's task range."""
    if isinstance(exc, InputError):
        return exc
    return InputError(f"{source.label}: tasks {chunk.lo}-{chunk.hi - 1}: {exc}")


@contextlib.contextmanager
def reading_chunk(source: TaskSource, chunk: TaskChunk):
    """The frame of a Dask task that reads one chunk of tasks: the reading allocator
    settings, and a kernel's ``ValueError`` turned into one line naming the tasks."""
    try:
        with fast_large_allocations():
            yield
    except InputError:
        raise
    except ValueError as exc:
        raise chunk_error(source, chunk, exc) from None
