"""Errors the pipeline raises for bad input.

:class:`InputError` is the one exception a user sees for data or options that
cannot be used: its message is a single line naming the store, the variable and
the chunk or row at fault (or the remedy). The command line turns it into exit
code 2. It is raised before any output is written, or the partial output is
removed before it propagates.
"""

from __future__ import annotations

import threading

from streamlsq.kernels.recursions.params import Param

__all__ = ["ClusterError", "InputError", "OutputError", "RunError", "Terminated",
           "WorkersPausedError", "check_interrupted", "checked", "interrupt", "interrupt_noted",
           "note_published",
           "published_outputs"]

#: set by :func:`interrupt`, the command line's handler of SIGINT (Ctrl-C) and SIGTERM
_interrupted = threading.Event()
#: the exception the noted interrupt raises again (:func:`check_interrupted`)
_raised: list[type[BaseException]] = [KeyboardInterrupt]


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a scheduler stopping a job), raised where Ctrl-C's
    ``KeyboardInterrupt`` is, so that the run undoes what it made on the same path; the
    command line ends with exit code 143 (128 + 15), as the signal's default would."""


def interrupt(signum=None, _frame=None):
    """The command line's handler of SIGINT and SIGTERM: notes the interrupt, then raises
    ``KeyboardInterrupt`` (:class:`Terminated` for SIGTERM) as Python's own SIGINT handler
    does. Noted, an interrupt that something swallowed on its way still ends the run before
    it publishes (:func:`check_interrupted`): Python prints and drops an exception raised in
    a ``__del__`` or a weakref callback, which it runs at any moment on the main thread (a
    dask future's release among them)."""
    import signal

    _raised[0] = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
    _interrupted.set()
    raise _raised[0]


def check_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` (:class:`Terminated` after SIGTERM) if :func:`interrupt`
    was called since the command began (:func:`forget_interrupt`), whether or not its
    exception got through."""
    if _interrupted.is_set():
        raise _raised[0]


def interrupt_noted() -> bool:
    """Whether :func:`interrupt` was called since the command began."""
    return _interrupted.is_set()


def forget_interrupt() -> None:
    """A new command begins: no interrupt noted."""
    _interrupted.clear()
    _raised[0] = KeyboardInterrupt


#: what the command published so far (:func:`note_published`), as the user named it
_published: list[str] = []


def note_published(where) -> None:
    """An output is in place, complete (a store renamed or copied into place, a file
    beside it): a failure after it (the standard output full) says it was written."""
    _published.append(str(where))


def published_outputs() -> list[str]:
    """What the command published since it began (:func:`forget_published`)."""
    return list(_published)


def forget_published() -> None:
    """A new command begins: nothing published yet."""
    _published.clear()


class InputError(ValueError):
    """Bad input: one line that names the store, variable, chunk or row at fault.

    Examples
    --------
    >>> import streamlsq
    >>> try:
    ...     streamlsq.open_stream("no-such-store.zarr")
    ... except streamlsq.InputError as exc:
    ...     print(exc)
    no-such-store.zarr: no such store
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))

    def __reduce__(self):  # survive the trip from a worker back to the client
        return (type(self), (str(self),))


class RunError(RuntimeError):
    """A run that could not be carried out although its input was good: one line naming what
    failed and where. The command line turns it into exit code 2, like :class:`InputError`;
    nothing half-written is left behind (see ``docs/faults.md``)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))

    def __reduce__(self):
        return (type(self), (str(self),))


class OutputError(RunError):
    """The result could not be written (no space left, read-only or vanished folder); the
    partial output was removed before this was raised."""


class ClusterError(RunError):
    """The Dask cluster could not carry the run: the scheduler was lost or unreachable, no
    worker stayed alive, or the workers kept dying on a task. A checkpointed run continues
    with ``--resume`` once the cluster is back."""


class WorkersPausedError(RuntimeError):
    """Every worker stayed paused at its memory limit with nothing running: the run cannot
    go on, so it is stopped (see :func:`streamlsq.runtime.client.dask_client`)."""

    def __reduce__(self):
        return (type(self), (str(self),))


def checked(param: Param, value):
    """``value`` checked against its declaration (:meth:`Param.check`: one message format
    for every option of the package), converted; the refusal as an :class:`InputError`.

    Examples
    --------
    >>> from streamlsq.errors import checked
    >>> from streamlsq.kernels.recursions.params import Param
    >>> checked(Param("holdout", 0, "Rows held out of every task.", type=int, ge=0), 2)
    2
    >>> checked(Param("holdout", 0, "Rows held out of every task.", type=int, ge=0), -1)
    Traceback (most recent call last):
    ...
    streamlsq.errors.InputError: holdout must be an integer >= 0, got -1
    """
    try:
        return param.check(value)
    except ValueError as exc:
        raise InputError(str(exc)) from None
