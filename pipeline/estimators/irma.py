"""IRMA and its baselines as scikit-learn estimators: function approximators on a basis.
"""

from __future__ import annotations

import numpy as np

from streamlsq.estimators.base import RecursionRegressor, check_block_size
from streamlsq.kernels import (
    IRMA,
    IRMARLS,
    Basis,
    IRMAGradientDescent,
    LegendreBasis,
    MonomialBasis,
    StiffnessSchedule,
    TensorBasis,
)

__all__ = [
    "IRMAGradientDescentRegressor",
    "IRMARLSRegressor",
    "IRMARegressor",
]


# ---------------------------------------------------------------------------
# IRMA and its baselines
# ---------------------------------------------------------------------------
class _BasisRegressor(RecursionRegressor):
    """Shared part of the IRMA estimators: the basis from parameters, scalar target.

    X holds the raw inputs x, one column per input dimension of the basis; the
    kernel expands them (and refuses points outside the domain). The model is
    f(x) = φ(x)ᵀθ: ``coef_`` is θ (n_basis,), the basis is ``basis_`` (its
    ``names`` label the coefficients) and there is no separate ``intercept_``
    (the constant function is in the basis).
    """

    _multi_output = False
    _reports_intercept = False

    def _check_params(self):
        check_block_size(self.block_size, "block_size")

    def _make_basis(self) -> Basis:
        """The basis from ``basis``, ``order`` and ``domain`` (a Basis object is used as is).

        ``domain`` (a, b): one input; ((a0, b0), (a1, b1), …): the tensor product
        of one 1-D basis of degree ``order`` per input dimension.
        """
        if isinstance(self.basis, Basis):
            return self.basis
        kinds = {"legendre": LegendreBasis, "monomial": MonomialBasis}
        if not isinstance(self.basis, str) or self.basis not in kinds:
            raise ValueError(
                f"basis must be 'legendre', 'monomial' or a streamlsq.kernels Basis, "
                f"got {self.basis!r}"
            )
        cls = kinds[self.basis]
        if np.ndim(self.domain) == 2:
            return TensorBasis([cls(self.order, interval) for interval in self.domain])
        return cls(self.order, self.domain)

    def _predict_kernel(self, X):
        return self.basis_.evaluate(X, self._coef_matrix)

    def _set_extra_fitted(self, kernel, state):
        self.basis_ = kernel.basis


class IRMARegressor(_BasisRegressor):
    """Incremental risk minimisation (IRMA), one example at a time (ALGORITHMS.md §5).

    θ_{t+1} = θ_t + A⁻¹φ(x_t)e_t/(λ_t + φ(x_t)ᵀA⁻¹φ(x_t)), e_t = y_t − φ(x_t)ᵀθ_t,
    θ₀ = 0, A the Gramian of the basis on the domain (kernel
    :class:`streamlsq.kernels.IRMA`). The blocks do not change the numbers
    (the update is per sample); they only count ``n_steps_``.

    Parameters
    ----------
    order : int, default 4
        Polynomial degree of the basis (per input dimension).
    domain : (a, b) or sequence of (a_i, b_i), default (-1.0, 1.0)
        The bounded input domain Ω; X has one column per interval, and inputs
        outside Ω are refused (in ``fit`` and ``predict``).
    basis : "legendre", "monomial" or a streamlsq.kernels Basis, default "legendre"
        Legendre polynomials orthonormal on Ω (A = I; accurate at high orders)
        or monomials (Gramian factored once; refused when singular). A Basis
        object (e.g. :class:`~streamlsq.kernels.QuadratureBasis` for any user
        functions) is used as is, and then ``order`` and ``domain`` are ignored.
    stiffness : {"multiplicative", "additive", "constant"}, default "multiplicative"
        Schedule of λ_t: λ₀·r^t, λ₀ + r·t or λ₀ (t: examples seen before).
    stiffness_initial : float > 0, default 0.1
        λ₀ (the paper's 0.1).
    stiffness_rate : float, default 1.05
        r (the paper's 1.05; ignored by "constant").
    block_size : int or None, default None
        Rows per step (None: one block per call).

    Attributes
    ----------
    coef_ : (n_basis,) θ;  basis_ : the basis;  n_features_in_, feature_names_in_,
    state_ (theta, rows, blocks, cumulative_loss: Σ of squared pre-update errors),
    n_steps_, rows_seen_.
    """

    def __init__(
        self,
        order=4,
        domain=(-1.0, 1.0),
        basis="legendre",
        stiffness="multiplicative",
        stiffness_initial=0.1,
        stiffness_rate=1.05,
        block_size=None,
    ):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.stiffness = stiffness
        self.stiffness_initial = stiffness_initial
        self.stiffness_rate = stiffness_rate
        self.block_size = block_size

    def _make_kernel(self):
        schedule = StiffnessSchedule(self.stiffness, self.stiffness_initial, self.stiffness_rate)
        return IRMA(self._make_basis(), schedule)


class IRMAGradientDescentRegressor(_BasisRegressor):
    """The IRMA study's GD baseline: normalised gradient descent with Tikhonov μθᵀθ.

    Per example, one gradient step on (y_t − φᵀθ)² + μθᵀθ with the exactly
    minimising rate (kernel :class:`streamlsq.kernels.IRMAGradientDescent`).
    The paper runs its baselines on monomials (``basis="monomial"``).

    Parameters
    ----------
    order, domain, basis, block_size
        As for :class:`IRMARegressor`.
    mu : float >= 0, default 0.05
        Tikhonov weight (the paper's 0.05).
    """

    def __init__(self, order=4, domain=(-1.0, 1.0), basis="legendre", mu=0.05, block_size=None):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.mu = mu
        self.block_size = block_size

    def _make_kernel(self):
        return IRMAGradientDescent(self._make_basis(), mu=self.mu)


class IRMARLSRegressor(_BasisRegressor):
    """The IRMA study's RLS baseline: forgetting factor and a Tikhonov term that is not forgotten.

    θ_t minimises Σ g^{t−i}(y_i − φ_iᵀθ)² + g^tθᵀP₀⁻¹θ + μθᵀθ (kernel
    :class:`streamlsq.kernels.IRMARLS`, information form, one solve per example).

    Parameters
    ----------
    order, domain, basis, block_size
        As for :class:`IRMARegressor`.
    forgetting : float in (0, 1], default 0.9
        g (the paper's 0.9).
    mu : float >= 0, default 0.05
        Tikhonov weight (the paper's 0.05).
    p0 : float > 0, default 1
        P₀ = p0·I (the paper: the identity).
    """

    def __init__(
        self,
        order=4,
        domain=(-1.0, 1.0),
        basis="legendre",
        forgetting=0.9,
        mu=0.05,
        p0=1.0,
        block_size=None,
    ):
        self.order = order
        self.domain = domain
        self.basis = basis
        self.forgetting = forgetting
        self.mu = mu
        self.p0 = p0
        self.block_size = block_size

    def _make_kernel(self):
        return IRMARLS(self._make_basis(), forgetting=self.forgetting, mu=self.mu, p0=self.p0)
