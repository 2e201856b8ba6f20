"""Maps over task chunks and tree reductions of their small results, on a Dask client.

Why ``client.submit`` and a tree of combines (rather than dask.bag or
``dask.array.reduction``): every leaf task must *read its own chunk* (a separate
load task piles raw rows up in worker memory, ``docs/architecture.md``), its result is a
small dict of sums (d×d, k×d×d), and the combine is ``kernels.mlr.combine_stats``
for every statistic. A fixed tree over the futures in submission order makes
the order of the floating-point additions depend only on the chunking — never
on which worker finished first or how many workers there are — so the same
plan gives bit-identical results on 1 or 20 workers. Only the root reaches the
client; intermediate sums stay on the workers.

How much one Dask task does is sized from the data and the workers
(:func:`task_bytes`): a pass is cut into small *units* (a scan piece, a chunk of work of
meta-learning) that fix the arithmetic, and a Dask task takes several consecutive units one
after another, so that its memory is one unit's whatever its size. Where the units' sums
meet in a tree, a task takes one whole subtree (``SPLIT_EVERY ** levels`` units,
:func:`tree_units_per_task`) and combines it as the tree would (:class:`TreeFold`): the
sums are the same bits for every task size and every worker count.
"""

from __future__ import annotations

import math
import uuid

from distributed import Client, as_completed

from streamlsq.runtime.client import setting
from streamlsq.runtime.progress import row_bar

__all__ = ["LEAST_TASK_BYTES", "MOST_TASK_BYTES", "SPLIT_EVERY", "TASKS_PER_WORKER", "TreeFold",
           "client_task_bytes", "fold_units", "map_chunks", "task_bytes", "tree_groups",
           "tree_levels", "tree_reduce", "tree_units_per_task", "units_per_task",
           "wait_progress", "worker_threads"]

#: fan-in of each combine task
SPLIT_EVERY = 8
#: Dask tasks per worker thread a parallel pass aims at: every worker busy to the end (the
#: last round of tasks is a sixteenth of a worker's share) and tasks for work stealing to
#: move, few enough that the scheduler's cost per task stays a small part of the run
#: (docs/performance.md#scaling)
TASKS_PER_WORKER = 16
#: the least bytes of data of a Dask task (unless the whole pass is smaller): 0.1-0.4 s of
#: decoding and arithmetic, against a few milliseconds of scheduling
LEAST_TASK_BYTES = 64 * 2**20
#: the most bytes of data of a Dask task unless configured: a few seconds of work, so that
#: progress, checkpoints and the work a lost worker takes with it stay fine-grained
MOST_TASK_BYTES = 2 * 2**30


def task_bytes(total_bytes: int, n_workers: int, configured: int = 0) -> int:
    """Bytes of data one Dask task of a parallel pass over ``total_bytes`` bytes reads on
    ``n_workers`` worker threads: ``configured`` when not 0 (the dask config
    ``streamlsq.task-bytes``), else the pass shared as :data:`TASKS_PER_WORKER` tasks per
    thread, within [:data:`LEAST_TASK_BYTES`, :data:`MOST_TASK_BYTES`].

    >>> task_bytes(10**12, 100) / 1e6  # a terabyte on 100 workers: 1,600 tasks
    625.0
    >>> task_bytes(10**12, 2) == MOST_TASK_BYTES, task_bytes(10**6, 2) == LEAST_TASK_BYTES
    (True, True)
    """
    if configured:
        return int(configured)
    share = -(-int(total_bytes) // (TASKS_PER_WORKER * max(1, int(n_workers))))
    return int(min(MOST_TASK_BYTES, max(LEAST_TASK_BYTES, share)))


def worker_threads(client: Client) -> int:
    """The threads of the client's workers (at least 1): the Dask tasks that run at once."""
    return max(1, sum(client.nthreads().values()))


def client_task_bytes(client: Client, total_bytes: int) -> int:
    """:func:`task_bytes` of a pass over ``total_bytes`` on the client's workers, with the
    dask config ``streamlsq.task-bytes``."""
    return task_bytes(total_bytes, worker_threads(client), int(setting("streamlsq.task-bytes")))


def units_per_task(n_units: int, unit_bytes: float, task_bytes: int) -> int:
    """Consecutive units of about ``unit_bytes`` one Dask task of ``task_bytes`` takes (at
    least 1, at most ``n_units``)."""
    return max(1, min(int(n_units), round(task_bytes / max(unit_bytes, 1.0))))


def tree_units_per_task(n_units: int, unit_bytes: float, task_bytes: int,
                        split_every: int = SPLIT_EVERY) -> int:
    """Units per Dask task where their sums meet in :func:`tree_reduce`'s tree: the power of
    ``split_every`` nearest ``task_bytes / unit_bytes`` (within a factor √split_every), so
    that a task's units are one subtree, and no more than the whole tree's leaves need.

    >>> tree_units_per_task(347_223, 2.88e6, 625e6), tree_units_per_task(5, 1e3, 1e9)
    (512, 8)
    """
    ratio = task_bytes / max(unit_bytes, 1.0)
    if ratio <= 1 or n_units <= 1:
        return 1
    depth = 0  # the levels of the whole tree: the least L with split_every**L >= n_units
    while split_every ** depth < n_units:
        depth += 1
    return split_every ** max(0, min(round(math.log(ratio, split_every)), depth))


class TreeFold:
    """The lowest ``levels`` levels of :func:`tree_reduce`'s tree, over values given one by
    one in a Dask task that takes ``split_every ** levels`` consecutive leaves (aligned):
    the same groups combined in the same order as tree_reduce's tasks would, holding at most
    ``split_every`` values per level. Its :meth:`result` is the subtree's node, which
    tree_reduce takes as a leaf of the levels above (a combine of one value copies it, so
    the root is the same bits for any ``levels``).
    """

    def __init__(self, combine, levels: int, split_every: int = SPLIT_EVERY):
        self.combine, self.levels, self.split_every = combine, int(levels), int(split_every)
        self.buffers: list[list] = [[] for _ in range(self.levels + 1)]

    def add(self, value) -> None:
        self._push(0, value)

    def _push(self, level: int, value) -> None:
        buffer = self.buffers[level]
        buffer.append(value)
        if level < self.levels and len(buffer) == self.split_every:
            self.buffers[level] = []
            self._push(level + 1, self.combine(*buffer))

    def result(self):
        for level in range(self.levels):  # the last, partial group of each level
            if self.buffers[level]:
                buffer, self.buffers[level] = self.buffers[level], []
                self._push(level + 1, self.combine(*buffer))
        top = self.buffers[self.levels]
        if len(top) != 1:
            raise ValueError(f"a subtree of {self.levels} levels got "
                             f"{'no' if not top else 'too many'} leaves")
        return top[0]


def tree_levels(units: int, split_every: int = SPLIT_EVERY) -> int:
    """The levels of a subtree of ``units`` leaves (a power of ``split_every``)."""
    levels = 0
    while split_every ** levels < units:
        levels += 1
    if split_every ** levels != units:
        raise ValueError(f"{units} is not a power of {split_every}")
    return levels


def tree_groups(client: Client, units: list, total_bytes: int) -> tuple[int, list[list]]:
    """(levels, groups): the ``units`` of a pass over ``total_bytes`` in consecutive groups
    of ``SPLIT_EVERY ** levels`` (the last one fewer), one Dask task each
    (:func:`tree_units_per_task` on these workers): each group is one subtree of
    :func:`tree_reduce`'s tree, to fold with :class:`TreeFold` of ``levels``."""
    per = tree_units_per_task(len(units), total_bytes / max(len(units), 1),
                              client_task_bytes(client, total_bytes))
    return tree_levels(per), [units[i : i + per] for i in range(0, len(units), per)]


def fold_units(units, fn, combine, levels: int, leaf=None, keep=None) -> tuple[list, object]:
    """In one Dask task: ``fn(unit)`` for each of consecutive ``units``, one after another
    (each computed and freed before the next); ``keep`` of each result, in order, and
    ``leaf`` of each (the result itself when None) combined as the lowest ``levels`` levels
    of :func:`tree_reduce`'s tree (:class:`TreeFold`: the same bits as one task a unit)."""
    fold, kept = TreeFold(combine, levels), []
    for unit in units:
        out = fn(unit)
        if keep is not None:
            kept.append(keep(out))
        fold.add(out if leaf is None else leaf(out))
    return kept, fold.result()


def map_chunks(client: Client, fn, items, *args, name: str, submit=None, **kwargs) -> list:
    """One task per item: ``fn(item, *args, **kwargs)``; keys say what they are.
    ``submit``: what submits a task in place of ``client.submit`` (a job's
    ``Context.submit``, for tasks given its output store)."""
    tag = uuid.uuid4().hex[:8]
    submit = client.submit if submit is None else submit
    return [
        submit(fn, item, *args, key=f"{name}-{tag}-{i}", pure=False, **kwargs)
        for i, item in enumerate(items)
    ]


def _combine(combine, leaf, *parts):
    if leaf is not None:
        parts = [leaf(p) for p in parts]
    return combine(*parts)


def tree_reduce(client: Client, futures: list, combine, *, leaf=None, name: str = "combine",
                split_every: int = SPLIT_EVERY):
    """A future of ``combine(*all results)`` computed as a tree of ``split_every``-way combines.

    ``leaf`` maps each leaf result first (e.g. picks the statistics out of a
    (labels, statistics) pair). Groups are consecutive in submission order.
    """
    if not futures:
        raise ValueError("tree_reduce needs at least one future")
    tag = uuid.uuid4().hex[:8]
    level, depth = list(futures), 0
    first = True
    while len(level) > 1 or first:
        level = [
            client.submit(_combine, combine, leaf if first else None, *level[i : i + split_every],
                          key=f"{name}-{tag}-{depth}-{i}", pure=False)
            for i in range(0, len(level), split_every)
        ]
        first, depth = False, depth + 1
    return level[0]


def wait_progress(client: Client, futures: list, weights, desc: str, unit: str = "tasks",
                  enabled=None) -> None:
    """Wait for ``futures`` without fetching their results; raise the first error.

    ``weights[i]`` advances the bar when future i finishes (e.g. its task count).
    On an error the other futures are cancelled, so nothing continues half done.
    """
    weight = {f.key: w for f, w in zip(futures, weights, strict=True)}
    with row_bar(int(sum(weights)), desc, unit, enabled) as bar:
        try:
            for fut in as_completed(futures, loop=client.loop):
                if fut.status == "error":
                    fut.result()  # raises the task's exception here
                bar.update(weight[fut.key])
        except BaseException:
            client.cancel(futures)
            raise
