"""Errors the pipeline raises for bad input.

:class:`InputError` is the one exception a user sees for data or options that
cannot be used: its message is a single line naming the store, the variable and
the chunk or row at fault (or the remedy). The command line turns it into exit
code 2. It is raised before any output is written, or the partial output is
removed before it propagates.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input: one line that names the store, variable, chunk or row at fault."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))

    def __reduce__(self):  # survive the trip from a worker back to the client
        return (type(self), (str(self),))
