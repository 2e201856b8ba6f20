"""The recursion contract as executable checks, in the style of scikit-learn's
``parametrize_with_checks``.

``recursion_checks(cls)`` yields ``(name, check)`` pairs; each ``check()`` raises
``AssertionError`` when the recursion ``cls`` breaks the contract of
:mod:`.contract`. The test suite runs them over every registered recursion, and
anyone writing a recursion of their own can run them on it::

    >>> from streamlsq.kernels.recursions import KF4LLS
    >>> from streamlsq.kernels.recursions.checks import recursion_checks
    >>> for name, check in recursion_checks(KF4LLS):
    ...     check()

Every check works on the rows of ``cls.example(rng)`` cut into blocks of
:data:`BLOCK_ROWS` rows, and compares the recursion with itself computed another
way (update by update, in two halves, after a pickle round trip, by the scan form).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator

import numpy as np
from numpy.testing import assert_allclose, assert_array_equal

from streamlsq.kernels.recursions.contract import (
    FoldResult,
    Param,
    Recursion,
    ScanRecursion,
    block_edges,
)

__all__ = ["BLOCK_ROWS", "recursion_checks"]

#: rows per block in the checks (the last block may be shorter)
BLOCK_ROWS = 8
#: agreement asked of two ways of computing the same numbers: the same operations
#: in another grouping (a fold against its updates, halves against one pass)
RTOL = 1e-10


def _setup(cls: type[Recursion], seed: int = 0):
    rng = np.random.default_rng(seed)
    rec, X, Y = cls.example(rng)
    edges = block_edges(X.shape[0], BLOCK_ROWS)
    state = rec.init(X.shape[1], Y.shape[1], np.float64)
    return rec, np.asarray(X, np.float64), np.asarray(Y, np.float64), edges, state


def _assert_states_equal(a: dict, b: dict, rtol: float = 0.0, what: str = "state"):
    assert set(a) == set(b), f"{what}: arrays {sorted(a)} != {sorted(b)}"
    for k in a:
        if rtol:
            assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=rtol, atol=1e-12,
                            err_msg=f"{what}[{k!r}]")
        else:
            assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=f"{what}[{k!r}]")


def check_declarations(cls: type[Recursion]) -> None:
    """A name, a summary, the roles of its inputs, and parameters whose defaults have their
    declared type and pass their own declaration's check unchanged."""
    assert cls.name and cls.name != Recursion.name, f"{cls.__name__} declares no name"
    assert cls.summary, f"{cls.__name__} declares no summary"
    assert cls.inputs and all(isinstance(r, str) and r for r in cls.inputs), \
        f"{cls.__name__}.inputs must name the roles of the stores it reads"
    assert cls.n_inputs == len(cls.inputs), f"{cls.__name__}: n_inputs != len(inputs)"
    assert isinstance(cls.examples, tuple), f"{cls.__name__}.examples must be a tuple"
    for p in cls.params:
        assert isinstance(p, Param), f"{cls.__name__}.params holds {p!r}"
        assert p.help, f"{cls.name}: parameter {p.name} has no help"
        if p.default is None:
            assert p.optional, f"{cls.name}: parameter {p.name} defaults to None, not optional"
        try:
            checked = p.check(p.default)
        except ValueError as exc:
            raise AssertionError(f"{cls.name}: the default of {p.name} fails its check: "
                                 f"{exc}") from None
        assert checked == p.default and type(checked) is type(p.default), \
            f"{cls.name}: the default of {p.name} is not of its declared type"


def check_fold_equals_updates(cls: type[Recursion]) -> None:
    """``fold`` records what ``update`` applied block by block gives, at every step."""
    rec, X, Y, edges, state = _setup(cls)
    res = rec.fold(state, X, Y, edges, 1, 1)
    assert_array_equal(res.steps, np.arange(1, len(edges)),
                       err_msg=f"{cls.name}: recorded steps of a fold with record_every=1")
    s = state
    for j in range(len(edges) - 1):
        s = rec.update(s, X[edges[j]:edges[j + 1]], Y[edges[j]:edges[j + 1]])
        assert_allclose(res.coefs[j], rec.coef(s), rtol=RTOL, atol=1e-12,
                        err_msg=f"{cls.name}: step {j + 1}")
    assert_array_equal(res.rows_seen, edges[1:])
    _assert_states_equal(res.state, s, RTOL, f"{cls.name}: final state")


def check_inputs_unchanged(cls: type[Recursion]) -> None:
    """``update``, ``fold`` (and the scan form) never write into their state, X or Y."""
    rec, X, Y, edges, state = _setup(cls)
    X0, Y0, state0 = X.copy(), Y.copy(), copy.deepcopy(state)
    after = rec.update(state, X[: edges[1]], Y[: edges[1]])
    after0 = copy.deepcopy(after)
    rec.fold(after, X[edges[1]:], Y[edges[1]:], edges[1:] - edges[1], 2, 1, int(edges[1]))
    if isinstance(rec, ScanRecursion):
        info = rec.to_info(after)
        info0 = copy.deepcopy(info)
        summaries = rec.summarize(X, Y, edges, np.array([len(edges) - 1]))
        rec.scan(info, summaries)
        _assert_states_equal(info, info0, what=f"{cls.name}: information state after scan")
    assert_array_equal(X, X0)
    assert_array_equal(Y, Y0)
    _assert_states_equal(state, state0, what=f"{cls.name}: initial state after update")
    _assert_states_equal(after, after0, what=f"{cls.name}: state after fold")


def check_state_pickles(cls: type[Recursion]) -> None:
    """The recursion and its state survive pickling: continuing gives the same numbers."""
    rec, X, Y, edges, state = _setup(cls)
    m = (len(edges) - 1) // 2
    first = rec.fold(state, X[: edges[m]], Y[: edges[m]], edges[: m + 1], 1, 1)
    rec2 = pickle.loads(pickle.dumps(rec))
    state2 = pickle.loads(pickle.dumps(first.state))
    rest = edges[m:] - edges[m]
    a = rec.fold(first.state, X[edges[m]:], Y[edges[m]:], rest, m + 1, 1, int(edges[m]))
    b = rec2.fold(state2, X[edges[m]:], Y[edges[m]:], rest, m + 1, 1, int(edges[m]))
    assert_array_equal(a.coefs, b.coefs)
    _assert_states_equal(a.state, b.state, what=f"{cls.name}: state after a pickle round trip")


def _fold_in_two(rec, state, X, Y, edges, m, record_every) -> FoldResult:
    first = rec.fold(state, X[: edges[m]], Y[: edges[m]], edges[: m + 1], 1, record_every)
    rest = edges[m:] - edges[m]
    second = rec.fold(first.state, X[edges[m]:], Y[edges[m]:], rest, m + 1, record_every,
                      int(edges[m]))
    return FoldResult(second.state, np.concatenate([first.steps, second.steps]),
                      np.concatenate([first.coefs, second.coefs]),
                      np.concatenate([first.rows_seen, second.rows_seen]))


def check_two_halves_equal_one_fit(cls: type[Recursion]) -> None:
    """Folding the blocks in two pieces (as two segments of an engine) equals one fold."""
    rec, X, Y, edges, state = _setup(cls)
    whole = rec.fold(state, X, Y, edges, 1, 2)
    for m in (1, (len(edges) - 1) // 2, len(edges) - 2):
        parts = _fold_in_two(rec, state, X, Y, edges, m, 2)
        assert_array_equal(parts.steps, whole.steps)
        assert_array_equal(parts.rows_seen, whole.rows_seen)
        assert_allclose(parts.coefs, whole.coefs, rtol=RTOL, atol=1e-12,
                        err_msg=f"{cls.name}: split after block {m}")
        _assert_states_equal(parts.state, whole.state, RTOL, f"{cls.name}: split after {m}")


def check_scan_equals_sequential(cls: type[Recursion]) -> None:
    """The scan form (summaries of two pieces, an in-order prefix, independent solves)
    gives the coefficients of the sequential fold at every recorded step."""
    rec, X, Y, edges, state = _setup(cls)
    if not isinstance(rec, ScanRecursion):
        return
    n_blocks = len(edges) - 1
    seq = rec.fold(state, X, Y, edges, 1, 1)
    m = n_blocks // 2
    pieces = [(0, m), (m, n_blocks)]
    summaries = []
    for k0, k1 in pieces:
        local = edges[k0:k1 + 1] - edges[k0]
        cuts = np.arange(1, k1 - k0 + 1)
        summaries += rec.summarize(X[edges[k0]:edges[k1]], Y[edges[k0]:edges[k1]], local, cuts)
    infos = rec.scan(rec.to_info(state), summaries)
    assert len(infos) == n_blocks, f"{cls.name}: scan returned {len(infos)} states"
    for j, info in enumerate(infos):
        assert_allclose(rec.coef(rec.finish(info)), seq.coefs[j], rtol=1e-9, atol=1e-10,
                        err_msg=f"{cls.name}: scan against sequential at step {j + 1}")


CHECKS = (
    check_declarations,
    check_fold_equals_updates,
    check_inputs_unchanged,
    check_state_pickles,
    check_two_halves_equal_one_fit,
    check_scan_equals_sequential,
)


def recursion_checks(cls: type[Recursion]) -> Iterator[tuple[str, callable]]:
    """``(name, check)`` for every check of the contract, bound to ``cls``."""
    for check in CHECKS:
        yield check.__name__, (lambda check=check: check(cls))
