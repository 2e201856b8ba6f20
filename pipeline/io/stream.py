"""Stream stores: ``X (sample, feature)`` and ``y (sample, target)``, validated and read.

:func:`open_stream` checks the layout (names, dims, dtypes, lengths, every chunk
present) before any work or output and returns a :class:`StreamSource`, a small
picklable description that any worker uses to read a row range; values (NaN/Inf)
are checked chunk by chunk as they are read, and an error names the store, the
variable and the chunk. See ``docs/stores.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.stores import (
    StoreSource,
    check_complete,
    check_numeric,
    dimension_names,
    get_array,
    open_group,
    require_variables,
    store_label,
    store_token,
)

__all__ = [
    "StreamSource",
    "open_stream",
]


STREAM_DIMS = {"X": ("sample", "feature"), "y": ("sample", "target")}


@dataclass(frozen=True)
class StreamSource(StoreSource):
    """A validated stream store: enough to read any row range from any worker (picklable).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3)
    >>> source = streamlsq.open_stream(path)
    >>> X, Y = source.read(0, 5)
    >>> X.shape, Y.shape
    ((5, 3), (5, 1))
    >>> tmp.cleanup()
    """

    path: str
    group: str | None
    n_rows: int
    n_features: int
    n_targets: int
    chunk_rows: int
    y_is_vector: bool
    block_size: int
    attrs: dict = field(default_factory=dict, compare=False, hash=False)
    token: str = ""
    shown: str = ""

    def chunk_edges(self) -> np.ndarray:
        """Row offsets of the storage chunks of X: [0, c, 2c, ..., n_rows]."""
        edges = np.arange(0, self.n_rows, self.chunk_rows, dtype=np.int64)
        return np.append(edges, self.n_rows)

    def read(self, start: int, stop: int, dtype=np.float64, check: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start:stop`` as (X (n, q), Y (n, K)) in ``dtype``; refuses NaN/Inf by chunk.

        ``check=False`` skips the value check, for callers that check what they
        computed from the rows instead (and re-read with the check to name the row).
        """
        X = self.read_rows("X", start, stop, dtype, check)
        Y = self.read_rows("y", start, stop, dtype, check)
        return X, (Y[:, None] if Y.ndim == 1 else Y)

    def read_features(self, start: int, stop: int, dtype=np.float64) -> np.ndarray:
        """Rows ``start:stop`` of X alone (values checked like :meth:`read`)."""
        return self.read_rows("X", start, stop, dtype)



def open_stream(path: str | os.PathLike, group: str | None = None) -> StreamSource:
    """Open and validate a stream store's layout; raise :class:`InputError` on any defect.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=3,
    ...                                  chunk_rows=4_000)
    >>> source = streamlsq.open_stream(path)
    >>> source.n_rows, source.n_features, source.n_targets, source.chunk_rows
    (10000, 3, 1, 4000)
    >>> tmp.cleanup()
    """
    path = str(path)
    label = store_label(path, group)
    g = open_group(path, group)
    require_variables(g, label, ("X", "y"),
                      "a stream store needs X (sample, feature) and y (sample, target)")
    X, y = get_array(g, label, "X"), get_array(g, label, "y")
    for name, arr in (("X", X), ("y", y)):
        check_numeric(label, name, arr)
    if dimension_names(X) != STREAM_DIMS["X"] or X.ndim != 2:
        raise InputError(
            f"{label}: variable 'X' has dims {dimension_names(X) or X.shape}, "
            "expected ('sample', 'feature')"
        )
    ydims = dimension_names(y)
    if ydims not in (STREAM_DIMS["y"], ("sample",)):
        raise InputError(
            f"{label}: variable 'y' has dims {ydims or y.shape}, expected ('sample', 'target')"
        )
    if y.shape[0] != X.shape[0]:
        raise InputError(
            f"{label}: variable 'y' has {y.shape[0]} samples but 'X' has {X.shape[0]}"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{label}: variable 'X' is empty (shape {X.shape})")
    for name, arr in (("X", X), ("y", y)):
        check_complete(label, name, arr)
    chunk_rows = int(X.chunks[0])
    attrs = dict(g.attrs)
    block_size = int(attrs.get("block_size", chunk_rows))
    return StreamSource(
        path=os.path.abspath(path),
        shown=path,
        group=group,
        n_rows=int(X.shape[0]),
        n_features=int(X.shape[1]),
        n_targets=1 if y.ndim == 1 else int(y.shape[1]),
        chunk_rows=chunk_rows,
        y_is_vector=y.ndim == 1,
        block_size=block_size,
        attrs=attrs,
        token=store_token(path),
    )
