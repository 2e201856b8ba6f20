"""The recursions the pipeline can run, by name (the CLI's METHOD argument)."""

from __future__ import annotations

from streamlsq.kernels import KF4LLS, RLS, Recursion

from .errors import InputError

__all__ = ["METHODS", "make_method"]

#: name -> kernel class; each class validates its own parameters
METHODS: dict[str, type[Recursion]] = {
    "kf4lls": KF4LLS,
    "rls": RLS,
}


def make_method(method: str | Recursion, **params) -> Recursion:
    """A configured recursion from a name and parameters (or an instance, unchanged)."""
    if isinstance(method, Recursion):
        if params:
            raise InputError("pass parameters to the method's constructor, not to fit_stream")
        return method
    try:
        cls = METHODS[method]
    except KeyError:
        raise InputError(
            f"unknown method '{method}'; available: {', '.join(sorted(METHODS))}"
        ) from None
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{method}: {exc}") from None
