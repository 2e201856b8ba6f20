"""The recursions the pipeline can run, by name: a configured kernel from the registry.

:data:`RECURSIONS` is the kernels' registry (:mod:`streamlsq.kernels.recursions.registry`);
:func:`make_method` builds a recursion from a name and its declared parameters and
turns the kernel's refusals into :class:`~streamlsq.errors.InputError`. A recursion whose
fit is a job of its own (:data:`OWN_JOBS`) declares the job's options with the fit's
(:data:`streamlsq.options.fit.JOB_OPTIONS`), so that the command line builds ``fit NAME``
without importing the job (nor the kernels).
"""

from __future__ import annotations

import importlib

from streamlsq.errors import InputError
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.kernels.recursions.registry import RECURSIONS

__all__ = ["OWN_JOBS", "RECURSIONS", "job_class", "make_method", "params_from_store"]

#: recursions whose fit is more than a fit of their rows: name -> "module:job class" (the
#: job derives from :class:`streamlsq.stream.fit.StreamFit`)
OWN_JOBS = {"interleaved-kf4lls": "streamlsq.stream.interleaved:InterleavedFit"}

def job_class(method):
    """The job that fits ``method`` (a name or a recursion): the recursion's own job, or
    :class:`~streamlsq.stream.fit.StreamFit` (imported when asked for: the command line
    builds a command from the declarations alone)."""
    name = getattr(method, "name", method)
    spec = OWN_JOBS.get(name, "streamlsq.stream.fit:StreamFit") if isinstance(name, str) \
        else "streamlsq.stream.fit:StreamFit"
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)


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
        return method
    try:
        cls = RECURSIONS[method]
    except KeyError:
        raise InputError(f"unknown method '{method}'; available: "
                         f"{', '.join(sorted(RECURSIONS))}") from None
    try:
        return cls.from_params(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{method}: {exc}") from None


def params_from_store(method: str | Recursion, params: dict, store_attrs: dict) -> dict:
    """``params`` with the defaults a store supplies (a Param's ``store_attr``) filled in
    where the user gave none."""
    if not isinstance(method, str) or method not in RECURSIONS:
        return params
    out = dict(params)
    for p in RECURSIONS.declaration(method).params:
        if p.store_attr and out.get(p.name) is None and p.store_attr in store_attrs:
            out[p.name] = store_attrs[p.store_attr]
    return out
