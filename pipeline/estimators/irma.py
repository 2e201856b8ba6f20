"""IRMA and its baselines as scikit-learn estimators: function approximators on a basis.
"""

from __future__ import annotations

from streamlsq.estimators.base import RecursionRegressor
from streamlsq.kernels.recursions.basis import Basis, bounding_domain

__all__ = [
    "IRMAGradientDescentRegressor",
    "IRMARLSRegressor",
    "IRMARegressor",
]


# ---------------------------------------------------------------------------
# IRMA and its baselines
# ---------------------------------------------------------------------------
#: the estimators' default degree (the command line's is 6)
_ESTIMATOR_DOMAIN = {"order": 4}


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

    def _kernel_values(self, X, first_call):
        values = super()._kernel_values(X, first_call)
        if values["domain"] is None and not isinstance(values["basis"], Basis):
            if not first_call:
                values["domain"] = self.domain_
            elif X.shape[1] != 1:
                # the other parameters' bad values first, as when a domain is given
                self._kernel_class.from_params(**{**values, "domain": (0.0, 1.0)})
                raise ValueError(
                    f"X has {X.shape[1]} columns, but with domain=None the basis' input "
                    "dimension is 1 (its domain is the range of the single column of X); "
                    "give domain as one interval per column for a box")
            else:  # the range of the first fit's rows, kept as domain_
                values["domain"] = bounding_domain(X)
        return values

    def _predict_kernel(self, X):
        return self.basis_.evaluate(X, self._coef_matrix)

    def _set_extra_fitted(self, kernel, state):
        self.basis_ = kernel.basis
        self.domain_ = kernel.basis.domain


class IRMARegressor(_BasisRegressor, recursion="irma", **_ESTIMATOR_DOMAIN):
    """Incremental risk minimisation (IRMA), one example at a time (``docs/algorithms.md#irma``).

    θ_{t+1} = θ_t + A⁻¹φ(x_t)e_t/(λ_t + φ(x_t)ᵀA⁻¹φ(x_t)), e_t = y_t − φ(x_t)ᵀθ_t,
    θ₀ = 0, A the Gramian of the basis on the domain (kernel
    :class:`streamlsq.kernels.IRMA`). The blocks do not change the numbers
    (the update is per sample); they only count ``n_steps_``.

    Parameters
    ----------
    order : int, default 4
        Polynomial degree of the basis (per input dimension).
    domain : (a, b), sequence of (a_i, b_i), or None, default None
        The bounded input domain Ω; X has one column per interval, and inputs
        outside Ω are refused (in ``fit`` and ``predict``). None: X has one column
        and Ω is the range of the rows of the first ``fit`` (or ``partial_fit``),
        widened by 5% on each side, kept as ``domain_``.
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
    coef_ : (n_basis,) θ;  basis_ : the basis;  domain_ : its domain;  n_features_in_,
    feature_names_in_,
    state_ (theta, rows, blocks, cumulative_loss: Σ of squared pre-update errors),
    n_steps_, rows_seen_.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import IRMARegressor
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 3, size=(150, 1))
    >>> y = x[:, 0] * np.exp(-x[:, 0] ** 2)
    >>> est = IRMARegressor(order=6, domain=(0.0, 3.0)).fit(x, y)
    >>> grid = np.linspace(0, 3, 7)[:, None]
    >>> bool(np.abs(est.predict(grid) - grid[:, 0] * np.exp(-grid[:, 0] ** 2)).max() < 0.05)
    True
    """


class IRMAGradientDescentRegressor(_BasisRegressor, recursion="irma-gd", **_ESTIMATOR_DOMAIN):
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

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import IRMAGradientDescentRegressor
    >>> x = np.linspace(0, 1, 50)[:, None]
    >>> est = IRMAGradientDescentRegressor(order=2, domain=(0.0, 1.0), mu=0.0).fit(x, 2 * x[:, 0])
    >>> est.coef_.shape, est.domain_
    ((3,), (0.0, 1.0))
    """


class IRMARLSRegressor(_BasisRegressor, recursion="irma-rls", **_ESTIMATOR_DOMAIN):
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

    Examples
    --------
    >>> import numpy as np
    >>> from streamlsq import IRMARLSRegressor
    >>> x = np.linspace(0, 1, 200)[:, None]
    >>> est = IRMARLSRegressor(order=1, basis="monomial", forgetting=1.0, mu=0.0, p0=1e6)
    >>> np.round(est.fit(x, 1 + 2 * x[:, 0]).coef_, 3)  # θ on 1, x: the line itself
    array([1., 2.])
    """

