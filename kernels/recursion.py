"""The contract every recursive estimator kernel follows (DESIGN.md §2).

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

    summarize(X, Y, block_size, cuts) -> [summary, ...]   # parallel, one list per piece
    scan(info_state, summaries)        -> [info_state, ...] # in order, cheap additions
    finish(info_state)                 -> state             # the solve, independent per step

and set ``supports_scan = True``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

State = dict[str, np.ndarray]

__all__ = ["FoldResult", "Recursion", "State", "block_edges"]


def block_edges(n_rows: int, block_size: int, first_block_size: int | None = None) -> np.ndarray:
    """Row offsets of the data blocks of a stream: [0, f, f+b, f+2b, ..., n_rows].

    ``f`` is the first block's size (defaults to ``b``); the last block may be
    shorter than ``b``. Blocks, not storage chunks, are the steps of a recursion.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size}")
    f = block_size if first_block_size is None else int(first_block_size)
    if f < 1:
        raise ValueError(f"first_block_size must be a positive integer, got {f}")
    if n_rows <= f:
        return np.array([0, n_rows], dtype=np.int64)
    rest = np.arange(f, n_rows, block_size, dtype=np.int64)
    return np.concatenate([[0], rest, [n_rows]]).astype(np.int64)


@dataclass
class FoldResult:
    """What one ``fold`` over a piece of rows returns.

    ``steps`` are global 1-based block numbers that were recorded, ``coefs`` the
    coefficients after each of them (n_recorded, n_features, n_targets),
    ``rows_seen`` the number of rows consumed up to each recorded step.
    ``diagnostics`` maps a name to one value per recorded step.
    """

    state: State
    steps: np.ndarray
    coefs: np.ndarray
    rows_seen: np.ndarray
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)


class Recursion:
    """Base class of recursive estimators; see the module docstring for the contract."""

    #: short name used by the CLI and in result attrs
    name: str = "recursion"
    #: whether summarize/scan/finish are available (the ``scan`` engine)
    supports_scan: bool = False

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
        """The recursion's parameters (for result attrs and reconstruction)."""
        raise NotImplementedError

    def coef_names(self, n_features: int) -> list[str] | None:
        """Labels of the rows of ``coef(state)`` (e.g. basis functions); None: 0..q-1."""
        return None

    # -- shared driver -------------------------------------------------------
    def fold(
        self,
        state: State,
        X: np.ndarray,
        Y: np.ndarray,
        edges: np.ndarray,
        first_step: int,
        record_every: int,
        rows_before: int = 0,
    ) -> FoldResult:
        """Apply ``update`` to the blocks ``X[edges[j]:edges[j+1]]`` in order.

        ``first_step`` is the global 1-based number of the first block here,
        ``rows_before`` the rows consumed before this piece. A step ``s`` is
        recorded when ``s % record_every == 0``; engines record the final step
        themselves from the returned state.
        """
        steps, coefs, rows = [], [], []
        for j in range(len(edges) - 1):
            a, b = int(edges[j]), int(edges[j + 1])
            state = self.update(state, X[a:b], Y[a:b])
            step = first_step + j
            if step % record_every == 0:
                steps.append(step)
                coefs.append(self.coef(state))
                rows.append(rows_before + b)
        return self.fold_result(state, steps, coefs, rows)

    def fold_result(self, state, steps, coefs, rows, diagnostics=None) -> FoldResult:
        """Pack recorded steps into a :class:`FoldResult` (shapes right even when empty)."""
        final = self.coef(state)
        return FoldResult(
            state=state,
            steps=np.asarray(steps, dtype=np.int64),
            coefs=np.asarray(coefs, dtype=final.dtype).reshape(len(steps), *final.shape),
            rows_seen=np.asarray(rows, dtype=np.int64),
            diagnostics=diagnostics or {},
        )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

