"""The recursions the pipeline can run, by name: a configured kernel from the registry.

:data:`METHODS` is the kernels' registry (:mod:`streamlsq.kernels.recursions.registry`);
:func:`make_method` builds a recursion from a name and its declared parameters and
turns the kernel's refusals into :class:`~streamlsq.errors.InputError`.
"""

from __future__ import annotations

from streamlsq.errors import InputError
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = ["METHODS", "make_method", "params_from_store"]

#: every registered recursion, by name (read-only mapping name -> kernel class)
METHODS = RECURSIONS

#: how to run the recursions that read two stores
_OTHER_FITS = {2: "fit_interleaved (streamlsq fit interleaved A B)"}


def _refuse_multi_input(cls: type[Recursion]) -> None:
    if cls.n_inputs != 1:
        how = _OTHER_FITS.get(cls.n_inputs, "its own fit function")
        raise InputError(f"method '{cls.name}' reads {cls.n_inputs} stores: use {how}")


def make_method(method: str | Recursion, **params) -> Recursion:
    """A configured recursion from a registered name and parameters (or an instance,
    unchanged).

    Examples
    --------
    >>> from streamlsq import make_method
    >>> make_method("rls", forgetting=0.9)
    RLS(ridge=0.0, forgetting=0.9, solver='qr', diagnostics=False)
    """
    if isinstance(method, Recursion):
        if params:
            raise InputError("pass parameters to the method's constructor, not to fit_stream")
        _refuse_multi_input(type(method))
        return method
    try:
        cls = METHODS[method]
    except KeyError:
        raise InputError(f"unknown method '{method}'; available: "
                         f"{', '.join(sorted(METHODS.stream_methods()))}") from None
    _refuse_multi_input(cls)
    try:
        return cls.from_params(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{method}: {exc}") from None


def params_from_store(method: str | Recursion, params: dict, store_attrs: dict) -> dict:
    """``params`` with the defaults a store supplies (a Param's ``store_attr``) filled in
    where the user gave none."""
    if not isinstance(method, str) or method not in METHODS:
        return params
    out = dict(params)
    for p in METHODS[method].params:
        if p.store_attr and out.get(p.name) is None and p.store_attr in store_attrs:
            out[p.name] = store_attrs[p.store_attr]
    return out
