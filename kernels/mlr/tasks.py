"""Ragged task sets stored CSR-style, and vectorised per-task arithmetic on them.

``docs/stores.md#multi-task-store``: the rows of all tasks are stored task after task in ``X``
(n_rows, d) and ``y`` (n_rows,); ``task_ptr`` (n_tasks + 1,) holds int64 offsets
and the rows of task i are ``task_ptr[i]:task_ptr[i+1]``. The pipeline hands a
kernel one *chunk of work*, a run of tasks with a local ``task_ptr`` starting at 0.

Everything here is vectorised over the tasks of a chunk of work (sums over row ranges
with ``np.add.reduceat``, ``np.repeat`` of task ids, padded batched stacks); there is
no Python loop over tasks. The sum over one task only touches that task's rows, so
per-task results do not depend on how tasks are grouped into chunks of work.

Inputs are upcast to float64: every quantity here is a sum over many rows or
tasks, and the stores are small per task (d ~ 10).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_task_rows",
    "canonical_labels",
    "check_labels",
    "default_heavy_rows",
    "group_ptr",
    "holdout_split",
    "padded_task_stacks",
    "range_sums",
    "select_tasks",
    "split_groups",
    "task_ids",
    "task_sizes",
    "validate_task_ptr",
]


def validate_task_ptr(task_ptr, n_rows: int) -> np.ndarray:
    """Check CSR task offsets and return them as a 1-D int64 array.

    ``task_ptr`` must be 1-D with at least one entry, of integer dtype, start at
    0, never decrease, and end at ``n_rows``. Empty tasks (equal consecutive
    offsets) are allowed here; kernels that need rows refuse them by name.
    Raises ValueError naming the first bad index.
    """
    ptr = np.asarray(task_ptr)
    if ptr.ndim != 1 or ptr.size == 0:
        raise ValueError(
            f"task_ptr must be a non-empty 1-D array of offsets, got shape {ptr.shape}"
        )
    if ptr.dtype.kind not in "iu":
        raise ValueError(f"task_ptr must be an integer array of offsets, got dtype {ptr.dtype}")
    ptr = ptr.astype(np.int64, copy=False)
    if ptr[0] != 0:
        raise ValueError(f"task_ptr must start at 0, got task_ptr[0] = {int(ptr[0])}")
    steps = np.diff(ptr)
    if steps.size and steps.min() < 0:
        i = int(np.flatnonzero(steps < 0)[0]) + 1
        raise ValueError(
            f"task_ptr must be non-decreasing: task_ptr[{i}] = {int(ptr[i])} < "
            f"task_ptr[{i - 1}] = {int(ptr[i - 1])}"
        )
    if ptr[-1] != n_rows:
        raise ValueError(
            f"task_ptr must end at the number of rows {n_rows}: "
            f"task_ptr[{ptr.size - 1}] = {int(ptr[-1])}"
        )
    return ptr


def task_sizes(task_ptr) -> np.ndarray:
    """Rows per task, t_i = task_ptr[i+1] − task_ptr[i] (int64)."""
    return np.diff(np.asarray(task_ptr, dtype=np.int64))


def task_ids(task_ptr) -> np.ndarray:
    """The task index of every row: (n_rows,) int64, ``np.repeat(arange(n_tasks), t)``."""
    sizes = task_sizes(task_ptr)
    return np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)


def as_task_rows(X, y, task_ptr, *, x_name: str = "X", y_name: str = "y"):
    """Validate a chunk of work; return (X float64 (n, d), y float64 (n,), task_ptr int64).

    ``y`` may be (n,) or (n, 1) (the stream store's 2-D target with one target).
    Raises ValueError naming the argument and the first non-finite entry.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"{x_name} must be 2-D (rows, features), got shape {X.shape}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{y_name} must have one value per row of {x_name} ({X.shape[0]}), got shape {y.shape}"
        )
    X = X.astype(np.float64, copy=False)
    y = y.astype(np.float64, copy=False)
    _check_finite(x_name, X)
    _check_finite(y_name, y)
    ptr = validate_task_ptr(task_ptr, X.shape[0])
    return X, y, ptr


def _check_finite(name: str, A: np.ndarray) -> None:
    finite = np.isfinite(A)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        where = f"row {bad[0]}" if A.ndim == 1 else f"row {bad[0]}, column {bad[1]}"
        raise ValueError(f"{name} has a non-finite value ({A[tuple(bad)]!r}) at {where}")


def range_sums(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Sums of ``values`` over the consecutive row ranges ``ptr[s]:ptr[s+1]`` along axis 0.

    Empty ranges give 0 (``np.add.reduceat`` alone would return the element at
    the offset). The sum of a range only reads that range's rows.
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    n_ranges = ptr.size - 1
    out = np.zeros((n_ranges,) + values.shape[1:], dtype=np.result_type(values, np.float64))
    nonempty = ptr[1:] > ptr[:-1]
    if nonempty.any():
        # Starts of non-empty ranges are strictly increasing and each such
        # range runs to the next non-empty start, which is its own end.
        out[nonempty] = np.add.reduceat(values, ptr[:-1][nonempty], axis=0)
    return out


def _sizes_at_least(task_ptr, minimum: int, what: str) -> np.ndarray:
    """The tasks' sizes, refusing the first task with fewer than ``minimum`` rows (``what``:
    what those rows are for, as the message says it)."""
    sizes = task_sizes(task_ptr)
    short = sizes < minimum
    if short.any():
        i = int(np.flatnonzero(short)[0])
        raise ValueError(
            f"task {i} has {int(sizes[i])} rows, fewer than the {int(minimum)} {what}"
        )
    return sizes


def _check_groups(task_ptr: np.ndarray, n_groups: int) -> np.ndarray:
    if isinstance(n_groups, bool) or not isinstance(n_groups, int | np.integer) or n_groups < 1:
        raise ValueError(f"n_groups must be a positive integer, got {n_groups!r}")
    return _sizes_at_least(task_ptr, n_groups, "groups it must be split into")


def group_ptr(task_ptr, n_groups: int) -> np.ndarray:
    """Row offsets of the (task, group) ranges: (n_tasks·n_groups + 1,) int64.

    Group g of a task with t rows holds its rows j (0-based within the task)
    with ⌊j·G/t⌋ = g, i.e. j ∈ [⌈g·t/G⌉, ⌈(g+1)·t/G⌉): contiguous, sizes ⌊t/G⌋ or
    ⌈t/G⌉. Refuses tasks with fewer rows than groups, naming the first one.
    """
    ptr = np.asarray(task_ptr, dtype=np.int64)
    sizes = _check_groups(ptr, n_groups)
    g = np.arange(n_groups, dtype=np.int64)
    # ceil(g*t/G) as -((-g*t)//G), exact in integers
    starts = ptr[:-1, None] + (-((-g[None, :] * sizes[:, None]) // n_groups))
    return np.concatenate([starts.ravel(), ptr[-1:]])


def split_groups(task_ptr, n_groups: int) -> np.ndarray:
    """Group 0..n_groups−1 of every row within its task: (n_rows,) int64.

    Contiguous and as equal as possible: row j (0-based within a task of t rows)
    is in group ⌊j·G/t⌋ (see :func:`group_ptr`). Refuses tasks with fewer rows
    than groups, naming the first such task.
    """
    ptr = np.asarray(task_ptr, dtype=np.int64)
    sizes = _check_groups(ptr, n_groups)
    tid = task_ids(ptr)
    j = np.arange(ptr[-1], dtype=np.int64) - ptr[:-1][tid]
    return (j * n_groups) // sizes[tid]


def check_labels(labels, n_tasks: int, n_clusters: int, name: str = "labels") -> np.ndarray:
    """Validate task labels: (n_tasks,) integers in [0, n_clusters); return them as int64."""
    lab = np.asarray(labels)
    if lab.shape != (n_tasks,):
        raise ValueError(f"{name} must have one entry per task ({n_tasks}), got shape {lab.shape}")
    if lab.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, got dtype {lab.dtype}")
    lab = lab.astype(np.int64, copy=False)
    bad = (lab < 0) | (lab >= n_clusters)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {int(lab[i])} is outside the clusters 0..{n_clusters - 1}")
    return lab


def canonical_labels(labels) -> np.ndarray:
    """Renumber cluster labels by the smallest task index in each cluster.

    The cluster of task 0 becomes 0, the next cluster met in task order 1, and
    so on, so two runs that find the same partition report the same labels.
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {lab.shape}")
    if lab.size == 0:
        return lab.astype(np.int64)
    _, first, inverse = np.unique(lab, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size, dtype=np.int64)
    return rank[inverse.ravel()]


def _size_buckets(sizes: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Group tasks by size into power-of-two buckets: [(task indices, padded size), ...].

    Padding a task to the largest size in its bucket at most doubles its rows,
    and there are at most log2(max t) + 1 buckets (a loop over buckets, not tasks).
    """
    key = np.zeros(sizes.shape, dtype=np.int64)
    pos = sizes > 0
    key[pos] = np.ceil(np.log2(sizes[pos])).astype(np.int64) + 1
    out = []
    for b in np.unique(key):
        idx = np.flatnonzero(key == b)
        out.append((idx, int(sizes[idx].max())))
    return out


def padded_task_stacks(X: np.ndarray, y: np.ndarray, task_ptr: np.ndarray):
    """Yield (task indices, Xs (m, T, d), ys (m, T), sizes (m,)) per size bucket.

    Each task's rows are copied into a zero-padded slab of T rows. Zero rows with
    zero targets change neither XᵀX, Xᵀy, yᵀy nor any least-squares solution, so
    batched linear algebra on the slabs gives per-task results.
    """
    ptr = np.asarray(task_ptr, dtype=np.int64)
    sizes = task_sizes(ptr)
    d = X.shape[1]
    for idx, T in _size_buckets(sizes):
        m = idx.size
        Xs = np.zeros((m, T, d), dtype=X.dtype)
        ys = np.zeros((m, T), dtype=y.dtype)
        t = sizes[idx]
        if T > 0:
            slot = np.repeat(np.arange(m, dtype=np.int64), t)
            first = np.repeat(ptr[idx], t)
            # position of each row within its task
            offsets = np.repeat(np.cumsum(t) - t, t)
            j = np.arange(slot.size, dtype=np.int64) - offsets
            rows = first + j
            Xs[slot, j] = X[rows]
            ys[slot, j] = y[rows]
        yield idx, Xs, ys, t


def select_tasks(X, y, task_ptr, mask):
    """The tasks with ``mask[i]`` true, as their own CSR task set: (X_sel, y_sel, ptr_sel).

    ``mask`` (n_tasks,) bool. Rows keep their order within and across tasks;
    ``ptr_sel`` starts at 0. A pure re-indexing: no value changes.
    """
    ptr = np.asarray(task_ptr, dtype=np.int64)
    keep = np.asarray(mask, dtype=bool)
    if keep.shape != (ptr.size - 1,):
        raise ValueError(f"mask must have one entry per task ({ptr.size - 1}), got {keep.shape}")
    sizes = task_sizes(ptr)
    rows = np.repeat(keep, sizes)
    new_ptr = np.concatenate([[0], np.cumsum(sizes[keep])]).astype(np.int64)
    return np.asarray(X)[rows], np.asarray(y)[rows], new_ptr


def holdout_split(X, y, task_ptr, n_holdout: int):
    """Split every task into its first tᵢ − N rows (kept) and its last N rows (held out).

    Returns ((X_fit, y_fit, ptr_fit), (X_out, y_out, ptr_out)), both CSR task sets
    with one entry per task (a task with exactly N rows keeps none). The rule
    depends only on each task's own rows, so it is the same in any grouping into chunks of work.
    Refuses a task with fewer than N rows, naming the first one.
    """
    ptr = np.asarray(task_ptr, dtype=np.int64)
    if isinstance(n_holdout, bool) or not isinstance(n_holdout, int | np.integer) or n_holdout < 0:
        raise ValueError(f"n_holdout must be an integer >= 0, got {n_holdout!r}")
    sizes = _sizes_at_least(ptr, n_holdout, "rows to hold out")
    tid = task_ids(ptr)
    j = np.arange(ptr[-1], dtype=np.int64) - ptr[:-1][tid]
    held = j >= (sizes - n_holdout)[tid]
    X = np.asarray(X)
    y = np.asarray(y)
    kept_sizes = sizes - n_holdout
    ptr_fit = np.concatenate([[0], np.cumsum(kept_sizes)]).astype(np.int64)
    ptr_out = np.arange(sizes.size + 1, dtype=np.int64) * int(n_holdout)
    return (X[~held], y[~held], ptr_fit), (X[held], y[held], ptr_out)


def default_heavy_rows(sizes, n_splits: int = 1, max_heavy: int = 5_000,
                       min_heavy: int = 20) -> int:
    """Rows a task needs to be heavy when a store names no roles: h (int).

    Among the thresholds h ≥ 4L (two rows per split group of the projected
    estimates, 2L groups: Kong et al. (2020), Algorithm 1 step 2;
    ``docs/algorithms.md``), with n(h) = #{tasks with ≥ h rows}, h maximises

        h · √n(h)

    subject to min(min_heavy, n(4L)) ≤ n(h) ≤ max_heavy. A heavy task's
    projected estimate has an error of order 1/√h per half, and the distance of
    two tasks one of order 1/h; averaging over a cluster of about n(h)/k tasks
    gains √n(h) more. So the rule prefers few long tasks over many short ones
    (a store of short light tasks and a few long ones gets the long ones) but
    keeps at least ``min_heavy`` heavy tasks, and at most ``max_heavy`` (the
    clustering cost grows as n(h)²). Ties go to the smaller h. When no task
    reaches 4L rows, h = 4L.

    Examples
    --------
    >>> default_heavy_rows([4] * 1000 + [100] * 30)  # light and heavy tasks apart
    100
    >>> default_heavy_rows(list(range(14, 68)) * 3)   # sizes spread evenly: h near 2/3 of the top
    45
    """
    sizes = np.asarray(sizes, dtype=np.int64).ravel()
    for name, value, low in (("n_splits", n_splits, 1), ("max_heavy", max_heavy, 2),
                             ("min_heavy", min_heavy, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    floor = 4 * int(n_splits)
    candidates = np.unique(sizes[sizes >= floor])
    if candidates.size == 0:
        return floor
    ordered = np.sort(sizes)
    n = ordered.size - np.searchsorted(ordered, candidates, side="left")
    ok = (n >= min(int(min_heavy), int(n[0]))) & (n <= int(max_heavy))
    if not ok.any():  # every threshold leaves too many tasks: the fewest possible
        few = np.flatnonzero(n <= max_heavy)
        return int(candidates[few[0]] if few.size else candidates[-1])
    score = np.where(ok, candidates * np.sqrt(n), -np.inf)
    return int(candidates[int(np.argmax(score))])
