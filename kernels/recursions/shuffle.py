"""Seeded visiting orders of shuffled epochs: which chunk comes next, and the rows in it.

A two-level shuffle that depends only on (seed, epoch, chunk) and the storage
chunking, never on the workers: :func:`epoch_chunk_order` permutes the chunks of one
epoch and :func:`chunk_row_permutation` the rows inside one chunk. The pipeline's
stream plans and the in-memory estimators use the same functions, so a shuffled fit
of a store equals the estimator's shuffled fit of the same rows.
"""

from __future__ import annotations

import numpy as np

from streamlsq.kernels.recursions.params import Param

__all__ = [
    "chunk_row_permutation",
    "epoch_chunk_order",
]


# ---------------------------------------------------------------------------
# Epochs and seeded shuffling
# ---------------------------------------------------------------------------
# Keys carry a tag in a fixed position: SeedSequence pads entropy with zeros,
# so [s, e] and [s, e, 0] would seed the same stream.
_TAG_CHUNK_ORDER = 0x4C4D5301


_TAG_ROW_ORDER = 0x4C4D5302


#: the parts of a shuffle's key, and the sizes it permutes: integers >= 0
_KEYS = {name: Param(name, 0, help, type=int, ge=0) for name, help in (
    ("seed", "Seed of the shuffle."), ("epoch", "Epoch number, from 0."),
    ("n_chunks", "Chunks of the store."), ("chunk_index", "Storage index of the chunk."),
    ("n_rows", "Rows of the chunk."))}


def _check_key(name: str, v) -> int:
    return _KEYS[name].check(v)


def epoch_chunk_order(seed: int, epoch: int, n_chunks: int, shuffle: bool) -> np.ndarray:
    """Order in which epoch ``epoch`` visits the chunks: arange, or a seeded permutation.

    The permutation comes from ``default_rng([seed, tag, epoch])`` alone, so
    every worker computes the same order.

    Examples
    --------
    >>> from streamlsq.kernels import epoch_chunk_order
    >>> order = epoch_chunk_order(seed=1, epoch=2, n_chunks=6, shuffle=True)
    >>> sorted(order.tolist()), epoch_chunk_order(1, 2, 6, shuffle=False).tolist()
    ([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5])
    """
    seed = _check_key("seed", seed)
    epoch = _check_key("epoch", epoch)
    n_chunks = _check_key("n_chunks", n_chunks)
    if not shuffle:
        return np.arange(n_chunks, dtype=np.int64)
    rng = np.random.default_rng([seed, _TAG_CHUNK_ORDER, epoch])
    return rng.permutation(n_chunks).astype(np.int64)


def chunk_row_permutation(
    seed: int, epoch: int, chunk_index: int, n_rows: int, shuffle: bool
) -> np.ndarray:
    """Order of the rows of chunk ``chunk_index`` (its storage index) in epoch ``epoch``.

    Seeded by ``default_rng([seed, tag, epoch, chunk_index])``; identity when
    ``shuffle`` is False. Together with :func:`epoch_chunk_order` this is a
    two-level shuffle (chunks, then rows within a chunk), not a uniform
    permutation of all rows — the price of reading one chunk at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import chunk_row_permutation
    >>> p = chunk_row_permutation(seed=1, epoch=0, chunk_index=3, n_rows=5, shuffle=True)
    >>> sorted(p.tolist()), bool(np.array_equal(p, chunk_row_permutation(1, 0, 3, 5, True)))
    ([0, 1, 2, 3, 4], True)
    >>> chunk_row_permutation(1, 0, 3, 5, shuffle=False).tolist()
    [0, 1, 2, 3, 4]
    """
    seed = _check_key("seed", seed)
    epoch = _check_key("epoch", epoch)
    chunk_index = _check_key("chunk_index", chunk_index)
    n_rows = _check_key("n_rows", n_rows)
    if not shuffle:
        return np.arange(n_rows, dtype=np.int64)
    rng = np.random.default_rng([seed, _TAG_ROW_ORDER, epoch, chunk_index])
    return rng.permutation(n_rows).astype(np.int64)
