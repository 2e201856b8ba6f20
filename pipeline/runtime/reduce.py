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
"""

from __future__ import annotations

import uuid

from distributed import Client, as_completed

from streamlsq.runtime.progress import row_bar

__all__ = ["map_chunks", "tree_reduce", "wait_progress"]

#: fan-in of each combine task
SPLIT_EVERY = 8


def map_chunks(client: Client, fn, items, *args, name: str, **kwargs) -> list:
    """One task per item: ``fn(item, *args, **kwargs)``; keys say what they are."""
    tag = uuid.uuid4().hex[:8]
    return [
        client.submit(fn, item, *args, key=f"{name}-{tag}-{i}", pure=False, **kwargs)
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
