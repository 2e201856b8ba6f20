"""Chunks written by Dask workers into a store that only this process holds.

A job that writes its result chunk by chunk hands the temporary output store to its Dask
tasks, which open it themselves. An output on a filesystem held in this process's memory
(fsspec's ``memory://``) is a different, empty filesystem in every worker process: the
tasks found no group there (``GroupNotFoundError``), or wrote where nobody would read.
The fits do not meet this: their tasks return what they computed and this process writes
the result. :class:`Relay` does the same for the chunk writers: each task writes into a
zarr ``MemoryStore`` of its own holding a copy of the output's objects (its metadata, and
what earlier tasks wrote), returns the objects it wrote or removed, and this process writes
them into the output, byte for byte what the task would have written there itself.
"""

from __future__ import annotations

import operator
from typing import Any

from distributed import Client

__all__ = ["Relay", "in_process_memory"]


def in_process_memory(store) -> bool:
    """Whether ``store`` is a zarr store on fsspec's ``memory://`` filesystem, which the
    Dask workers, other processes, cannot reach."""
    from fsspec.implementations.memory import MemoryFileSystem

    fs = getattr(store, "fs", None)
    fs = getattr(fs, "sync_fs", fs)  # zarr wraps a synchronous filesystem to await it
    return isinstance(fs, MemoryFileSystem)


def _objects(store) -> dict[str, bytes]:
    """Every object of the zarr ``store``, by key."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    async def read():
        keys = [k async for k in store.list()]
        found = {}
        for key in keys:
            buf = await store.get(key, prototype=default_buffer_prototype())
            if buf is not None:
                found[key] = buf.to_bytes()
        return found

    return sync(read())


def _relayed(fn, index: int, objects: dict[str, bytes], *args):
    """Dask task: ``fn(*args)`` with argument ``index`` a zarr ``MemoryStore`` holding
    ``objects``; returns its result and ``(objects written, keys removed)``."""
    from zarr.core.buffer.cpu import Buffer
    from zarr.storage import MemoryStore

    held = {key: Buffer.from_bytes(value) for key, value in objects.items()}
    args = list(args)
    args[index] = MemoryStore(held)
    result = fn(*args)
    after = {key: buf.to_bytes() for key, buf in held.items()}
    written = {key: value for key, value in after.items() if objects.get(key) != value}
    return result, (written, sorted(set(objects) - set(after)))


class Relay:
    """The Dask tasks of a job writing into ``store`` (on ``memory://``), run so that their
    writes reach it: :meth:`submit` in place of ``client.submit``, :meth:`land` before the
    store is read or published."""

    def __init__(self, store):
        self.store = store
        self.pending: list = []

    def submit(self, client: Client, fn, *args, key: str, **kwargs) -> Any:
        """``client.submit(fn, *args, key=key, **kwargs)``, the argument that is this
        relay's store replaced by a copy of the store in the task: a future of ``fn``'s
        result, its writes kept for :meth:`land`. The writes of tasks already finished
        land first, so a task reading the store sees them."""
        self.land(finished_only=True)
        index = next((i for i, arg in enumerate(args) if arg is self.store), None)
        if index is None:
            return client.submit(fn, *args, key=key, **kwargs)
        both = client.submit(_relayed, fn, index, _objects(self.store), *args,
                             key=f"{key}-relayed", **kwargs)
        self.pending.append(client.submit(operator.itemgetter(1), both,
                                          key=f"{key}-writes", pure=False))
        return client.submit(operator.itemgetter(0), both, key=key, pure=False)

    def land(self, finished_only: bool = False) -> None:
        """Write what the tasks wrote into the store (with ``finished_only``, the tasks
        finished so far; else all of them, waiting for them)."""
        from zarr.core.buffer.cpu import Buffer
        from zarr.core.sync import sync

        ready = [f for f in self.pending if not finished_only or f.status == "finished"]
        if not ready:
            return
        landing = {id(f) for f in ready}
        self.pending = [f for f in self.pending if id(f) not in landing]
        parts = ready[0].client.gather(ready)

        async def write():
            for written, removed in parts:
                for key, value in written.items():
                    await self.store.set(key, Buffer.from_bytes(value))
                for key in removed:
                    await self.store.delete(key)

        sync(write())
