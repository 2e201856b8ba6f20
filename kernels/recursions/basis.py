"""Basis functions on bounded domains and their Gramians (``docs/algorithms.md#irma``).

A linear-in-parameters model is f(x) = φ(x)ᵀθ with p basis functions φ on a
bounded input domain Ω. IRMA (Buschermöhle et al., 2013, eq. 8) needs the
Gramian of the basis in L²(Ω),

    A_ij = ∫_Ω φ_i(x) φ_j(x) dx ,

which is symmetric positive definite exactly when the basis functions are
linearly independent on Ω. Every basis here offers

    expand(x)  -> Φ (n, p)        rows φ(x_r)ᵀ; x is (n, dim) (or (n,) when dim = 1)
    gramian()  -> A (p, p)
    n_basis, dim, domain, bounds, names, orthonormal

and refuses inputs outside its domain (ValueError naming the first bad row).

* :class:`LegendreBasis` — Legendre polynomials scaled to be orthonormal on
  [a, b] (A = I exactly), evaluated by the three-term recurrence. The basis
  to use for polynomials: the monomial Gramian on [0, 3] has condition number
  1.5e6 at degree 4, 5.4e9 at degree 6 and 1.1e17 at degree 10 (singular to
  double precision).
* :class:`MonomialBasis` — 1, x, …, x^order with the closed-form Gramian.
* :class:`QuadratureBasis` — any callable x -> Φ; Gramian by Gauss–Legendre
  quadrature (:func:`quadrature_gramian`).
* :class:`TensorBasis` — products of 1-D bases on a box; Gramian = Kronecker
  product of the factors' Gramians.

:func:`gramian_cholesky` factors a Gramian once and refuses one that is
singular on the domain. Bases compute in the floating dtype of their input
(float32 stays float32, integers become float64); Gramians are float64.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from streamlsq.kernels.recursions.contract import BadRowError, Param

# SciPy (and the shared solves, which import it) are imported where a Gramian is computed
# by quadrature or factored: the declarations of the recursions on a basis
# (:mod:`.declarations`: the basis' type, ``--domain``) import this module without them.

__all__ = [
    "Basis",
    "LegendreBasis",
    "MonomialBasis",
    "ORDER",
    "QuadratureBasis",
    "TensorBasis",
    "basis_from_options",
    "bounding_domain",
    "cholesky_gramian",
    "domain_from_intervals",
    "gramian_cholesky",
    "make_basis",
    "quadrature_gramian",
]


def _float_array(x) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return x


def _check_interval(domain, name: str = "domain") -> tuple[float, float]:
    try:
        a, b = (float(v) for v in domain)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a pair (a, b) of numbers, got {domain!r}") from err
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ValueError(f"{name} must be a finite interval (a, b) with a < b, got {domain!r}")
    return a, b


#: the degree of a polynomial basis (per input dimension)
ORDER = Param("order", 6, "Polynomial degree of the basis (per input dimension).", type=int,
              ge=0)
#: the quadrature of a Gramian: nodes per dimension, or the tolerance that chooses them
_N_NODES = Param("n_nodes", None, "Gauss-Legendre nodes per dimension.", type=int, gt=0,
                 optional=True)
_RTOL = Param("rtol", 1e-10, "Relative change of the Gramian that stops refining.", gt=0)


class Basis:
    """Base class: input validation shared by every basis.

    Subclasses set ``n_basis``, ``dim``, ``bounds`` (dim, 2), ``names`` and
    ``orthonormal`` and implement ``_expand`` (on validated (n, dim) inputs)
    and ``gramian``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import Basis, LegendreBasis
    >>> basis = LegendreBasis(2, (0.0, 1.0))
    >>> isinstance(basis, Basis), basis.n_basis, basis.dim
    (True, 3, 1)
    >>> basis.expand(np.array([[0.0], [1.0]])).shape
    (2, 3)
    """

    n_basis: int
    dim: int
    bounds: np.ndarray
    names: list[str]
    orthonormal: bool = False

    @property
    def domain(self):
        """(a, b) for a 1-D basis, ((a0, b0), (a1, b1), …) for a box."""
        if self.dim == 1:
            return (float(self.bounds[0, 0]), float(self.bounds[0, 1]))
        return tuple((float(a), float(b)) for a, b in self.bounds)

    def check_inputs(self, x, name: str = "x", row_offset: int = 0) -> np.ndarray:
        """Validate raw inputs and return them as an (n, dim) floating array.

        Raises ValueError naming ``name`` for wrong shapes and
        :class:`~streamlsq.kernels.recursion.BadRowError` (a ValueError) naming the
        first bad row (numbered from ``row_offset``) for NaN/Inf or a point outside
        the domain.
        """
        x = _float_array(x)
        if x.ndim == 1 and self.dim == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(
                f"{name} must have shape (n, {self.dim}) for this basis "
                f"(inputs of dimension {self.dim}), got shape {x.shape}"
            )
        finite = np.isfinite(x).all(axis=1)
        if not finite.all():
            r = int(np.argmin(finite))
            raise BadRowError(
                f"{name} has a non-finite value in row {r + row_offset}: {x[r]}",
                variable=name, row=r + row_offset, reason=f"has a non-finite value: {x[r]}",
            )
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        inside = ((x >= lo) & (x <= hi)).all(axis=1)
        if not inside.all():
            r = int(np.argmin(inside))
            reason = f"({x[r].tolist()}) is outside the basis domain {self.domain}"
            raise BadRowError(f"{name} row {r + row_offset} {reason}", variable=name,
                              row=r + row_offset, reason=reason)
        return x

    def expand(self, x, name: str = "x", row_offset: int = 0) -> np.ndarray:
        """Φ (n, n_basis) with rows φ(x_r)ᵀ, after validating ``x`` (see :meth:`check_inputs`)."""
        return self._expand(self.check_inputs(x, name, row_offset))

    def evaluate(self, x, coef) -> np.ndarray:
        """f(x) = Φ(x)·coef for coefficients (n_basis,) or (n_basis, K)."""
        coef = np.asarray(coef)
        if coef.shape[0] != self.n_basis:
            raise ValueError(
                f"coef must have {self.n_basis} rows (one per basis function), "
                f"got shape {coef.shape}"
            )
        return self.expand(x) @ coef

    def _expand(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gramian(self) -> np.ndarray:
        raise NotImplementedError

    def get_params(self) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if k != "kind")
        return f"{type(self).__name__}({args})"


class _PolynomialBasis(Basis):
    """Polynomials of degree 0..order on one interval [a, b] (``kind`` names the family)."""

    kind: str

    def __init__(self, order: int, domain=(-1.0, 1.0)):
        self.order = ORDER.check(order)
        a, b = _check_interval(domain)
        self.n_basis = self.order + 1
        self.dim = 1
        self.bounds = np.array([[a, b]])
        self.names = self._names()

    def _names(self) -> list[str]:
        raise NotImplementedError

    def get_params(self) -> dict:
        return {"kind": self.kind, "order": self.order, "domain": list(self.domain)}


class LegendreBasis(_PolynomialBasis):
    """Legendre polynomials of degree 0..order, orthonormal on [a, b].

    φ_k(x) = √((2k+1)/(b−a)) · P_k(u),  u = (2x − a − b)/(b − a) ∈ [−1, 1],

    with P_k the Legendre polynomials, computed by Bonnet's recurrence
    (k+1)P_{k+1} = (2k+1)uP_k − kP_{k−1}, which is stable on [−1, 1]
    (|P_k(u)| ≤ 1). Because ∫_{−1}^{1} P_j P_k du = 2δ_jk/(2k+1), the Gramian on
    [a, b] is exactly the identity.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import LegendreBasis
    >>> basis = LegendreBasis(3, (0.0, 3.0))  # orthonormal on [0, 3]: its Gramian is I
    >>> bool(np.allclose(basis.gramian(), np.eye(4)))
    True
    """

    orthonormal = True
    kind = "legendre"

    def _names(self) -> list[str]:
        return [f"P{k}" for k in range(self.n_basis)]

    def _expand(self, x: np.ndarray) -> np.ndarray:
        a, b = self.bounds[0]
        u = (2.0 * x[:, 0] - (a + b)) / (b - a)
        # rounding can put u a hair outside [-1, 1] at the end points; the
        # recurrence is harmless there, but keep |P_k| <= 1 exact at the ends
        u = np.clip(u, -1.0, 1.0)
        P = np.empty((x.shape[0], self.n_basis), dtype=x.dtype)
        P[:, 0] = 1.0
        if self.order >= 1:
            P[:, 1] = u
        for k in range(1, self.order):
            P[:, k + 1] = ((2 * k + 1) * u * P[:, k] - k * P[:, k - 1]) / (k + 1)
        k = np.arange(self.n_basis).astype(x.dtype)
        scale = np.sqrt((2 * k + 1) / x.dtype.type(b - a))
        return P * scale

    def gramian(self) -> np.ndarray:
        return np.eye(self.n_basis)

    def to_monomial(self, theta) -> np.ndarray:
        """Monomial coefficients c with Σ_k θ_k φ_k(x) = Σ_i c_i x^i (same shape as θ).

        For reporting only: the change of basis is itself ill-conditioned
        (its matrix has entries growing like ((b+|a|)·2/(b−a))^order·binomials, and
        the monomial coefficients of a well-behaved function cancel heavily), so
        the monomial form loses digits as the order grows — evaluate, fit and
        update in the Legendre basis, and convert only to print or compare.
        """
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape[0] != self.n_basis:
            raise ValueError(
                f"theta must have {self.n_basis} rows (order {self.order}), got shape {theta.shape}"
            )
        a, b = self.bounds[0]
        scale = np.sqrt((2.0 * np.arange(self.n_basis) + 1.0) / (b - a))
        cols = theta.reshape(self.n_basis, -1)
        out = np.zeros_like(cols)
        for j in range(cols.shape[1]):
            series = np.polynomial.Legendre(cols[:, j] * scale, domain=[a, b])
            c = series.convert(kind=np.polynomial.Polynomial).coef
            out[: c.size, j] = c
        return out.reshape(theta.shape)



class MonomialBasis(_PolynomialBasis):
    """Monomials 1, x, …, x^order on [a, b], Gramian A_ij = (b^{i+j+1} − a^{i+j+1})/(i+j+1).

    The Gramian is a scaled Hilbert matrix and its condition number grows
    exponentially with the order (on [0, 3]: 8.7e7 at degree 5, 1.1e17 at
    degree 10); :func:`gramian_cholesky` refuses it once it is singular to
    working precision. Prefer :class:`LegendreBasis` for IRMA.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import MonomialBasis
    >>> MonomialBasis(2, (0.0, 1.0)).expand(np.array([[2.0]]).clip(0, 1))
    array([[1., 1., 1.]])
    """

    kind = "monomial"

    def _names(self) -> list[str]:
        return (["1", "x"] + [f"x^{i}" for i in range(2, self.n_basis)])[: self.n_basis]

    def _expand(self, x: np.ndarray) -> np.ndarray:
        return np.vander(x[:, 0], self.n_basis, increasing=True)

    def gramian(self) -> np.ndarray:
        a, b = self.bounds[0]
        i = np.arange(self.n_basis)
        s = (i[:, None] + i[None, :] + 1).astype(np.float64)
        return (b**s - a**s) / s



def _gauss_legendre_grid(bounds: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor Gauss–Legendre nodes (n^dim, dim) and weights on a box."""
    import scipy.special as sps

    u, w = sps.roots_legendre(n)
    nodes_1d, weights_1d = [], []
    for a, b in bounds:
        nodes_1d.append(0.5 * (b - a) * u + 0.5 * (a + b))
        weights_1d.append(0.5 * (b - a) * w)
    mesh = np.meshgrid(*nodes_1d, indexing="ij")
    nodes = np.stack([m.ravel() for m in mesh], axis=1)
    weights = weights_1d[0]
    for wk in weights_1d[1:]:
        weights = np.multiply.outer(weights, wk).ravel()
    return nodes, weights


def quadrature_gramian(
    func: Callable[[np.ndarray], np.ndarray],
    domain,
    n_nodes: int | None = None,
    rtol: float = 1e-10,
    max_nodes: int = 2048,
) -> tuple[np.ndarray, int]:
    """Gramian A = ∫_Ω φφᵀ dx of a callable basis by Gauss–Legendre quadrature.

    ``func`` maps inputs (n, dim) (a 1-D domain passes (n,)) to Φ (n, p).
    ``domain`` is (a, b) or a sequence of (a_i, b_i) (a box; tensor-product rule).
    Returns (A, nodes per dimension used).

    How many nodes: an n-point Gauss–Legendre rule is exact for polynomials of
    degree ≤ 2n − 1, so for polynomial basis functions of degree ≤ d (products
    of degree ≤ 2d) n = d + 1 nodes give the Gramian exactly. For a general
    basis the degree is unknown, so unless ``n_nodes`` is given the rule starts
    at n = p + 1 (exact for any polynomial basis of p functions of degree ≤ p),
    and doubles n until two successive Gramians agree to ``rtol`` (relative, max
    norm) — one doubling for polynomials; geometric convergence for analytic
    functions. A basis with kinks or singularities converges slowly: past
    ``max_nodes`` per dimension a ValueError says so (pass ``n_nodes`` or split
    the domain).
    """
    from streamlsq.kernels.linalg import symmetrize

    bounds = _box_bounds(domain)
    dim = bounds.shape[0]

    def call(nodes):
        Phi = np.asarray(func(nodes[:, 0] if dim == 1 else nodes), dtype=np.float64)
        if Phi.ndim == 1:
            Phi = Phi[:, None]
        if Phi.ndim != 2 or Phi.shape[0] != nodes.shape[0]:
            raise ValueError(
                f"basis function must return an array (n, p) for n inputs, got shape {Phi.shape}"
            )
        check = np.isfinite(Phi).all(axis=1)
        if not check.all():
            r = int(np.argmin(check))
            raise ValueError(f"basis function returned a non-finite value at x = {nodes[r]}")
        return Phi

    def gram(n):
        nodes, weights = _gauss_legendre_grid(bounds, n)
        Phi = call(nodes)
        return symmetrize((Phi * weights[:, None]).T @ Phi)

    if n_nodes is not None:
        n_nodes = _N_NODES.check(n_nodes)
        return gram(n_nodes), n_nodes
    rtol = _RTOL.check(rtol)
    mid = bounds.mean(axis=1)[None, :]
    p = call(mid).shape[1]
    n = p + 1
    A = gram(n)
    while 2 * n <= max_nodes:
        n *= 2
        A_next = gram(n)
        scale = max(np.abs(A_next).max(), np.finfo(np.float64).tiny)
        if np.abs(A_next - A).max() <= rtol * scale:
            return A_next, n
        A = A_next
    raise ValueError(
        f"Gauss–Legendre Gramian did not converge to rtol={rtol} with {n} nodes per "
        "dimension (basis functions with kinks or singularities?); pass n_nodes "
        "explicitly or split the domain"
    )


def _box_bounds(domain) -> np.ndarray:
    """(a, b) or ((a0, b0), ...) -> validated (dim, 2) array."""
    arr = np.asarray(domain, dtype=object)
    if arr.ndim == 1:
        return np.array([_check_interval(domain)])
    if arr.ndim == 2 and arr.shape[1] == 2:
        return np.array([_check_interval(d, f"domain[{i}]") for i, d in enumerate(domain)])
    raise ValueError(f"domain must be (a, b) or a sequence of (a_i, b_i), got {domain!r}")


class QuadratureBasis(Basis):
    """Any user basis: a callable x -> Φ (n, p), Gramian by Gauss–Legendre quadrature.

    ``domain`` is (a, b) (the callable receives x as (n,)) or a box
    ((a0, b0), (a1, b1), …) (the callable receives (n, dim)). The Gramian is
    computed once, lazily, by :func:`quadrature_gramian` (see there for the
    number of nodes); ``n_nodes_used`` tells how many nodes per dimension it took.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq.kernels import QuadratureBasis
    >>> def one_and_sine(x):  # points x (n,) of a 1-D domain -> basis values (n, 2)
    ...     return np.c_[np.ones(len(x)), np.sin(x)]
    >>> basis = QuadratureBasis(one_and_sine, (0.0, np.pi), names=["1", "sin"])
    >>> basis.n_basis, basis.names
    (2, ['1', 'sin'])
    """

    def __init__(
        self,
        func: Callable[[np.ndarray], np.ndarray],
        domain,
        names: Sequence[str] | None = None,
        n_nodes: int | None = None,
        rtol: float = 1e-10,
    ):
        if not callable(func):
            raise ValueError(f"func must be callable (x -> Phi), got {func!r}")
        self.func = func
        self.bounds = _box_bounds(domain)
        self.dim = self.bounds.shape[0]
        self.n_nodes = n_nodes
        self.rtol = rtol
        mid = self.bounds.mean(axis=1)
        probe = np.asarray(func(mid[None, :] if self.dim > 1 else mid[:1]))
        if probe.ndim != 2 or probe.shape[0] != 1:
            raise ValueError(
                f"func must return an array (n, p) for n inputs, got shape {probe.shape} for n = 1"
            )
        self.n_basis = int(probe.shape[1])
        if names is None:
            names = [f"phi{k}" for k in range(self.n_basis)]
        names = list(names)
        if len(names) != self.n_basis:
            raise ValueError(f"names must have {self.n_basis} entries, got {len(names)}")
        self.names = names
        self._gramian = None
        self.n_nodes_used: int | None = None

    def _expand(self, x: np.ndarray) -> np.ndarray:
        Phi = np.asarray(self.func(x[:, 0] if self.dim == 1 else x))
        if Phi.shape != (x.shape[0], self.n_basis):
            raise ValueError(
                f"func returned shape {Phi.shape}, expected ({x.shape[0]}, {self.n_basis})"
            )
        return Phi.astype(x.dtype, copy=False)

    def gramian(self) -> np.ndarray:
        if self._gramian is None:
            self._gramian, self.n_nodes_used = quadrature_gramian(
                self.func, self.domain, self.n_nodes, self.rtol
            )
            if self._gramian.shape != (self.n_basis, self.n_basis):
                raise ValueError(
                    f"func returned {self._gramian.shape[0]} basis functions at the quadrature "
                    f"nodes but {self.n_basis} at the domain's centre"
                )
        return self._gramian.copy()

    def get_params(self) -> dict:
        return {
            "kind": "quadrature",
            "function": getattr(self.func, "__qualname__", repr(self.func)),
            "domain": [list(r) for r in self.bounds.tolist()],
            "n_basis": self.n_basis,
            "n_nodes": self.n_nodes,
        }


class TensorBasis(Basis):
    """Tensor-product basis on a box from 1-D factor bases, one per input dimension.

    φ_{(i1,…,id)}(x) = φ¹_{i1}(x₁)···φᵈ_{id}(x_d), ordered with the last factor's
    index fastest (the row-wise Kronecker product), so the Gramian on the box
    (Fubini) is A = A¹ ⊗ … ⊗ Aᵈ. Orthonormal when every factor is.

    Examples
    --------
    >>> from streamlsq.kernels import LegendreBasis, TensorBasis
    >>> box = TensorBasis([LegendreBasis(2, (0.0, 1.0)), LegendreBasis(1, (-1.0, 1.0))])
    >>> box.dim, box.n_basis  # two inputs, 3 x 2 products
    (2, 6)
    """

    def __init__(self, bases: Sequence[Basis]):
        bases = list(bases)
        if not bases:
            raise ValueError("bases must hold at least one 1-D basis")
        for i, bs in enumerate(bases):
            if not isinstance(bs, Basis) or bs.dim != 1:
                raise ValueError(f"bases[{i}] must be a 1-D Basis, got {bs!r}")
        self.bases = bases
        self.dim = len(bases)
        self.bounds = np.concatenate([bs.bounds for bs in bases], axis=0)
        self.n_basis = int(np.prod([bs.n_basis for bs in bases]))
        self.orthonormal = all(bs.orthonormal for bs in bases)
        # product order matches the row-wise Kronecker product: last factor fastest
        labelled = [[f"{m}(x{i})" for m in bs.names] for i, bs in enumerate(bases)]
        self.names = ["*".join(parts) for parts in itertools.product(*labelled)]

    def _expand(self, x: np.ndarray) -> np.ndarray:
        out = self.bases[0]._expand(x[:, :1])
        for i, bs in enumerate(self.bases[1:], start=1):
            Phi = bs._expand(x[:, i : i + 1])
            out = (out[:, :, None] * Phi[:, None, :]).reshape(x.shape[0], -1)
        return out

    def gramian(self) -> np.ndarray:
        A = self.bases[0].gramian()
        for bs in self.bases[1:]:
            A = np.kron(A, bs.gramian())
        return A

    def get_params(self) -> dict:
        return {"kind": "tensor", "factors": [bs.get_params() for bs in self.bases]}


def make_basis(params: dict) -> Basis:
    """Rebuild a basis from its ``get_params()`` dict (legendre, monomial, tensor).

    A :class:`QuadratureBasis` wraps user code and cannot be rebuilt from
    parameters: ValueError.

    Examples
    --------
    >>> from streamlsq.kernels import LegendreBasis, make_basis
    >>> basis = make_basis(LegendreBasis(4, (0.0, 3.0)).get_params())
    >>> type(basis).__name__, basis.n_basis
    ('LegendreBasis', 5)
    """
    if not isinstance(params, dict) or "kind" not in params:
        raise ValueError(f"basis parameters must be a dict with a 'kind', got {params!r}")
    kind = params["kind"]
    if kind in ("legendre", "monomial"):
        cls = LegendreBasis if kind == "legendre" else MonomialBasis
        return cls(int(params["order"]), tuple(params["domain"]))
    if kind == "tensor":
        return TensorBasis([make_basis(f) for f in params["factors"]])
    raise ValueError(
        f"cannot rebuild a basis of kind {kind!r} from parameters "
        "(known: legendre, monomial, tensor; a quadrature basis wraps user code)"
    )


def basis_from_options(order: int = 6, domain=None, basis="legendre") -> Basis:
    """The basis of kind ``basis`` ("legendre" or "monomial") of degree ``order`` on ``domain``.

    ``domain`` is (a, b) for one input, or ((a0, b0), (a1, b1), …) for a box: the
    tensor product of one 1-D basis of degree ``order`` per input dimension (a box of
    one interval is that interval). A :class:`Basis` object is returned as is.
    ``ValueError`` names what is missing or wrong.
    """
    if isinstance(basis, Basis):
        return basis
    if domain is None:
        raise ValueError("give the input domain: (a, b), one interval per input dimension "
                         "(--domain A B)")
    if basis not in ("legendre", "monomial"):
        raise ValueError(
            f"basis must be 'legendre', 'monomial' or a streamlsq.kernels Basis, got {basis!r}")
    box = np.ndim(domain) == 2
    domain = [list(d) for d in domain] if box else list(domain)
    if box and len(domain) == 1:
        domain, box = domain[0], False
    order = ORDER.check(order)
    if box:
        return make_basis({"kind": "tensor", "factors": [
            {"kind": basis, "order": order, "domain": d} for d in domain]})
    return make_basis({"kind": basis, "order": order, "domain": domain})


def bounding_domain(X, margin: float = 0.05) -> tuple:
    """The box of the rows of X, widened by ``margin`` of its width on each side.

    One column gives (a, b), several give one interval per column; a column whose
    values are all equal gets the interval value ± max(0.5, |value|·margin). A default
    domain for data whose range is not known in advance (the estimators' default).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] == 0:
        raise ValueError("no rows to take a domain from")
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = np.where(hi > lo, margin * (hi - lo), np.maximum(0.5, margin * np.abs(lo)))
    box = tuple((float(a), float(b)) for a, b in zip(lo - pad, hi + pad, strict=True))
    return box[0] if len(box) == 1 else box


def domain_from_intervals(intervals) -> tuple | None:
    """``--domain A B`` given 0, 1 or d times: None, (a, b), or a box of d intervals."""
    if not intervals:
        return None
    if len(intervals) == 1:
        return tuple(intervals[0])
    return tuple(tuple(d) for d in intervals)


def gramian_cholesky(basis: Basis) -> np.ndarray | None:
    """Lower Cholesky factor L (A = LLᵀ) of the basis' Gramian; None when A = I.

    Factor once, then use triangular solves (A⁻¹v = L⁻ᵀL⁻¹v); never invert.
    Raises ValueError when A is singular on the domain to working precision
    (duplicated or linearly dependent basis functions, or a basis as
    ill-conditioned as the degree-9 and higher monomials on [0, 3]): Cholesky fails or
    the reciprocal condition number (LAPACK ``pocon``) is below p·eps.
    """
    if basis.orthonormal:
        return None
    return cholesky_gramian(
        basis.gramian(), f"the Gramian of {basis!r} (domain {basis.domain})"
    )


def cholesky_gramian(A: np.ndarray, what: str = "the Gramian") -> np.ndarray:
    """Lower Cholesky factor of a Gramian; refuses a singular one (see gramian_cholesky)."""
    import scipy.linalg as sla

    from streamlsq.kernels.linalg import symmetrize

    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError(f"{what} has non-finite entries")
    p = A.shape[0]
    hint = (
        f"{what} is singular: the basis functions are linearly dependent on the "
        "domain (duplicated functions?) or too ill-conditioned for double precision; "
        "use an orthonormal basis (LegendreBasis)"
    )
    try:
        L = sla.cholesky(symmetrize(A), lower=True, check_finite=False)
    except np.linalg.LinAlgError as err:
        raise ValueError(hint + " (Cholesky factorisation failed)") from err
    pocon = sla.get_lapack_funcs("pocon", (L,))
    rcond, info = pocon(L, np.abs(A).sum(axis=0).max(), uplo="L")
    if info != 0 or rcond < p * np.finfo(np.float64).eps:
        raise ValueError(hint + f" (reciprocal condition number {rcond:.1e})")
    return L
