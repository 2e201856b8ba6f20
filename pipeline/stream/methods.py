"""The recursions the pipeline can run, by name (the CLI's METHOD argument).

Most methods are built by calling their kernel class with the parameters. The IRMA
family (``irma``, ``irma-gd``, ``irma-rls``) is built on a basis of the raw inputs,
described by options (``order``, ``domain``, ``basis``) that :func:`basis_from_options`
turns into a :mod:`streamlsq.kernels.basis` object; IRMA's stiffness schedule comes
from ``stiffness``, ``stiffness_initial`` and ``stiffness_rate``.
"""

from __future__ import annotations

import json

import numpy as np

from streamlsq.errors import InputError
from streamlsq.kernels import (
    IRMA,
    IRMARLS,
    KF4LLS,
    LMS,
    RLS,
    Basis,
    IncrementalBFGS,
    InterleavedKF4LLS,
    IRMAGradientDescent,
    Recursion,
    StiffnessSchedule,
    make_basis,
)

__all__ = ["BASIS_METHODS", "METHODS", "basis_from_options", "make_method", "result_attrs"]

#: name -> kernel class; each class validates its own parameters
METHODS: dict[str, type[Recursion]] = {
    "kf4lls": KF4LLS,
    "rls": RLS,
    "lms": LMS,
    "bfgs": IncrementalBFGS,
    "irma": IRMA,
    "irma-gd": IRMAGradientDescent,
    "irma-rls": IRMARLS,
}

#: methods on a basis expansion of raw inputs x: the store's X holds x, y is scalar
BASIS_METHODS: dict[str, type[Recursion]] = {
    "irma": IRMA,
    "irma-gd": IRMAGradientDescent,
    "irma-rls": IRMARLS,
}

#: recursions that need more than one store (run by their own fit function)
MULTI_STORE: dict[type[Recursion], str] = {
    InterleavedKF4LLS: "fit_interleaved (streamlsq fit interleaved A B)",
}

#: default polynomial degree of the IRMA family (the paper's Figure 1)
DEFAULT_ORDER = 6


def basis_from_options(order=DEFAULT_ORDER, domain=None, basis="legendre") -> Basis:
    """The basis of ``basis`` ("legendre" or "monomial") of degree ``order`` on ``domain``.

    ``domain`` is (a, b) for one input, or ((a0, b0), (a1, b1), …) for a box: the
    tensor product of one 1-D basis of degree ``order`` per input dimension. A
    :class:`~streamlsq.kernels.basis.Basis` object is returned as is.
    """
    if isinstance(basis, Basis):
        return basis
    if domain is None:
        raise InputError("give the input domain: --domain A B (one per input dimension)")
    if basis not in ("legendre", "monomial"):
        raise InputError(f"--basis must be 'legendre' or 'monomial', got {basis!r}")
    domain = [list(d) for d in domain] if np.ndim(domain) == 2 else list(domain)
    if np.ndim(domain) == 2 and len(domain) == 1:
        domain = domain[0]  # one interval given as a box of one dimension
    try:
        order = int(order)
        if np.ndim(domain) == 2:
            factors = [{"kind": basis, "order": order, "domain": d} for d in domain]
            return make_basis({"kind": "tensor", "factors": factors})
        return make_basis({"kind": basis, "order": order, "domain": domain})
    except (TypeError, ValueError) as exc:
        raise InputError(f"basis: {exc}") from None


def _build(cls: type[Recursion], params: dict) -> Recursion:
    if cls not in BASIS_METHODS.values():
        return cls(**params)
    params = dict(params)
    basis = basis_from_options(params.pop("order", DEFAULT_ORDER), params.pop("domain", None),
                               params.pop("basis", "legendre"))
    if cls is IRMA:
        stiffness = params.pop("stiffness", "multiplicative")
        initial = params.pop("stiffness_initial", 0.1)
        rate = params.pop("stiffness_rate", 1.05)
        if isinstance(stiffness, str):
            stiffness = StiffnessSchedule(stiffness, initial, rate)
        params["stiffness"] = stiffness
    return cls(basis, **params)


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
        return _build(cls, params)
    except InputError:
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(f"{method}: {exc}") from None


def result_attrs(rec: Recursion, state: dict) -> dict:
    """Method-specific attrs of a result store, from the final state.

    BFGS: ``n_skipped`` (B updates skipped by the curvature safeguard) and
    ``ridge_used``; the IRMA family: ``basis`` (JSON of the basis' parameters, for
    :func:`streamlsq.kernels.make_basis`) and the final ``cumulative_loss``.
    """
    if isinstance(rec, IncrementalBFGS):
        return {"n_skipped": rec.n_skipped(state), "ridge_used": rec.ridge_used(state)}
    if isinstance(rec, tuple(BASIS_METHODS.values())):
        return {"basis": json.dumps(rec.basis.get_params()),
                "cumulative_loss": float(state["cumulative_loss"])}
    return {}
