"""The recursions the pipeline can run, by name (the CLI's METHOD argument)."""

from __future__ import annotations

from streamlsq.kernels import KF4LLS, LMS, RLS, InterleavedKF4LLS, Recursion

from .errors import InputError

__all__ = ["METHODS", "make_method"]

#: name -> kernel class; each class validates its own parameters
METHODS: dict[str, type[Recursion]] = {
    "kf4lls": KF4LLS,
    "rls": RLS,
    "lms": LMS,
}

#: recursions that need more than one store (run by their own fit function)
MULTI_STORE: dict[type[Recursion], str] = {
    InterleavedKF4LLS: "fit_interleaved (streamlsq fit interleaved A B)",
}


def make_method(method: str | Recursion, **params) -> Recursion:
    """A configured recursion from a name and parameters (or an instance, unchanged)."""
    if isinstance(method, Recursion):
        if params:
            raise InputError("pass parameters to the method's constructor, not to fit_stream")
        for cls, how in MULTI_STORE.items():
            if isinstance(method, cls):
                raise InputError(f"method '{method.name}' reads two stores: use {how}")
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
