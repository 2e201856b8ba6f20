"""The IRMA paper's study (``docs/studies.md#irma``): its data, Figure 1 and Table I, vectorised.

Buschermöhle et al. (2013), §IV. Target f(x) = x·exp(−x²) on Ω = [0, 3]
(eq. 15, outputs in [0, 0.43]); inputs uniform on Ω; targets plus noise uniform
in ±0.05.

* Figure 1: S sequences of T = 150 examples, polynomial order 6; the cumulative
  loss Σ_{i≤t}(ŷ_i − y_i)² (prediction before the update, eq. 1) of GD, RLS and
  IRMA per step; the paper plots the mean and "its upper and lower standard
  deviation" on a log scale (:func:`figure1_cumulative_losses`,
  :func:`~streamlsq.kernels.studies.common.distribution_summary`).
* Table I: MSE to the ground truth on 1000 test points after 10, 80 and 150
  examples, orders 4, 6, 10, IRMA (incremental) against batch least squares on
  the Vandermonde matrix (:func:`table1_mse`, :func:`table1_records`).

Bases: IRMA runs in the Legendre basis orthonormal on Ω (A = I; the function it
learns is the monomial IRMA's — the update depends only on the span — without
the monomial Gramian's conditioning, 1.1e17 at order 10). The GD and RLS
baselines depend on the basis and use monomials, as in the paper.

The published "±" values of Table I are far below the squared means (e.g.
3.1e-3 ± 2.9e-5, 1.8e14 ± 1.3e31) and match the *variance* of the per-sequence
MSE, not its standard deviation; :data:`TABLE1_PUBLISHED` keeps them as
printed and :func:`table1_records` sets our variance beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from streamlsq.kernels.linalg import check_finite
from streamlsq.kernels.recursions.basis import (
    ORDER,
    LegendreBasis,
    MonomialBasis,
    cholesky_gramian,
)
from streamlsq.kernels.recursions.irma import MU, P0, StiffnessSchedule, as_stiffness_schedule
from streamlsq.kernels.recursions.params import FORGETTING
from streamlsq.kernels.studies.common import distribution_summary

__all__ = [
    "FIGURE1_METHODS",
    "PAPER_DOMAIN",
    "PAPER_NOISE",
    "TABLE1_EXAMPLES",
    "TABLE1_METHODS",
    "TABLE1_ORDERS",
    "TABLE1_PUBLISHED",
    "figure1_cumulative_losses",
    "paper_sequences",
    "paper_target",
    "paper_test_points",
    "table1_mse",
    "table1_records",
]

PAPER_DOMAIN = (0.0, 3.0)
PAPER_NOISE = 0.05
TABLE1_ORDERS = (4, 6, 10)
TABLE1_EXAMPLES = (10, 80, 150)
TABLE1_METHODS = ("incremental", "batch")
FIGURE1_METHODS = ("gd", "rls", "irma")

#: Table I as printed: (order, examples, method) -> (mean MSE, the "±" value)
TABLE1_PUBLISHED: dict[tuple[int, int, str], tuple[float, float]] = {
    (4, 10, "incremental"): (3.1e-3, 2.9e-5),
    (6, 10, "incremental"): (5.5e-3, 6.0e-5),
    (10, 10, "incremental"): (1.2e-2, 1.2e-4),
    (4, 10, "batch"): (4.4e2, 1.9e8),
    (6, 10, "batch"): (7.2e7, 5.1e18),
    (10, 10, "batch"): (1.8e14, 1.3e31),
    (4, 80, "incremental"): (3.0e-4, 1.2e-8),
    (6, 80, "incremental"): (2.2e-4, 1.5e-8),
    (10, 80, "incremental"): (3.1e-4, 2.3e-8),
    (4, 80, "batch"): (2.0e-4, 5.3e-9),
    (6, 80, "batch"): (1.0e-4, 1.2e-8),
    (10, 80, "batch"): (4.0e-4, 5.3e-6),
    (4, 150, "incremental"): (2.0e-4, 2.1e-9),
    (6, 150, "incremental"): (9.4e-5, 3.0e-9),
    (10, 150, "incremental"): (1.2e-4, 3.1e-9),
    (4, 150, "batch"): (1.6e-4, 6.4e-10),
    (6, 150, "batch"): (5.0e-5, 6.7e-10),
    (10, 150, "batch"): (8.4e-5, 8.7e-9),
}


def paper_target(x) -> np.ndarray:
    """f(x) = x·exp(−x²), the paper's eq. (15)."""
    x = np.asarray(x, dtype=np.float64)
    return x * np.exp(-(x**2))


def paper_sequences(
    rng: np.random.Generator,
    n_sequences: int,
    length: int,
    domain=PAPER_DOMAIN,
    noise: float = PAPER_NOISE,
) -> tuple[np.ndarray, np.ndarray]:
    """S learning sequences: x ~ U(domain) (S, T), y = f(x) + U(−noise, noise) (S, T).

    Draws all inputs first, then all noise, each in one call, so a generator in
    a given state always yields the same sequences.
    """
    n_sequences, length = int(n_sequences), int(length)
    if n_sequences < 1 or length < 1:
        raise ValueError(
            f"n_sequences and length must be positive integers, got {n_sequences}, {length}"
        )
    a, b = (float(v) for v in domain)
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ValueError(f"domain must be a finite interval (a, b) with a < b, got {domain!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    x = rng.uniform(a, b, (n_sequences, length))
    e = rng.uniform(-noise, noise, (n_sequences, length))
    return x, paper_target(x) + e


def paper_test_points(n: int = 1000, domain=PAPER_DOMAIN) -> np.ndarray:
    """The test inputs of Table I: ``n`` equispaced points covering the domain."""
    n = int(n)
    if n < 2:
        raise ValueError(f"need at least 2 test points, got {n}")
    return np.linspace(float(domain[0]), float(domain[1]), n)


def _sequences(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(f"x and y must both be (n_sequences, length), got {x.shape}, {y.shape}")
    check_finite("x", x)
    check_finite("y", y)
    return x, y


def _expand(basis, x: np.ndarray) -> np.ndarray:
    S, T = x.shape
    return basis.expand(x.reshape(-1)).reshape(S, T, basis.n_basis)


def figure1_cumulative_losses(
    x,
    y,
    order: int = 6,
    domain=PAPER_DOMAIN,
    stiffness: StiffnessSchedule | None = None,
    mu: float = 0.05,
    forgetting: float = 0.9,
) -> dict[str, np.ndarray]:
    """Cumulative pre-update loss (S, T) of GD, RLS and IRMA on sequences ``x, y`` (S, T).

    GD: normalised GD with Tikhonov μ; RLS: P₀ = I, forgetting factor g, Tikhonov
    μ — both on monomials (the paper); IRMA: stiffness λ₀ = 0.1, ×1.05 per
    example by default, in the orthonormal Legendre basis.
    """
    x, y = _sequences(x, y)
    mono = MonomialBasis(order, domain)
    leg = LegendreBasis(order, domain)
    Phi_m = _expand(mono, x)
    return {
        "gd": gd_sequences(Phi_m, y, mu=mu).cumulative_loss,
        "rls": rls_sequences(Phi_m, y, forgetting=forgetting, mu=mu).cumulative_loss,
        "irma": irma_sequences(_expand(leg, x), y, stiffness=stiffness).cumulative_loss,
    }


def table1_mse(
    x,
    y,
    orders: Sequence[int] = TABLE1_ORDERS,
    examples: Sequence[int] = TABLE1_EXAMPLES,
    n_test: int = 1000,
    domain=PAPER_DOMAIN,
    stiffness: StiffnessSchedule | None = None,
) -> np.ndarray:
    """Per-sequence MSE to the ground truth, shape (S, len(orders), len(examples), 2).

    The last axis is :data:`TABLE1_METHODS`: IRMA after the first ``examples[j]``
    examples of each sequence (θ recorded during one pass), and batch least
    squares (:func:`batch_polynomial_fit`, the
    minimum-norm solution when there are fewer examples than coefficients) on
    the same examples. MSE = mean over ``n_test`` equispaced test points of
    (f̂ − f)².
    """
    x, y = _sequences(x, y)
    S, T = x.shape
    examples = [int(n) for n in examples]
    if not examples or min(examples) < 1 or max(examples) > T:
        raise ValueError(f"examples must be counts in [1, {T}], got {examples}")
    grid = paper_test_points(n_test, domain)
    truth = paper_target(grid)
    out = np.empty((S, len(orders), len(examples), len(TABLE1_METHODS)))
    for i, order in enumerate(orders):
        leg = LegendreBasis(order, domain)
        seq = irma_sequences(_expand(leg, x), y, stiffness=stiffness, record_at=examples)
        f_incr = seq.theta_at @ leg.expand(grid).T  # (S, R, n_test)
        out[:, i, :, 0] = np.mean((f_incr - truth) ** 2, axis=-1)
        V = np.vander(grid, order + 1, increasing=True)
        for j, n in enumerate(examples):
            coefs = np.stack(
                [batch_polynomial_fit(x[s, :n], y[s, :n], order) for s in range(S)]
            )  # (S, order+1)
            out[:, i, j, 1] = np.mean((coefs @ V.T - truth) ** 2, axis=-1)
    return out


def table1_records(
    mse, orders: Sequence[int] = TABLE1_ORDERS, examples: Sequence[int] = TABLE1_EXAMPLES
) -> list[dict]:
    """Tidy rows of Table I from :func:`table1_mse` output, beside the published numbers.

    One row per (order, examples, method) with ``mse_mean, mse_std, mse_var,
    mse_median, mse_max_share`` (see
    :func:`~streamlsq.kernels.studies.common.distribution_summary`),
    ``published_mean``, ``published_pm`` (the printed "±" value, a variance),
    ``ratio_to_published`` = mse_mean / published_mean and
    ``factor_to_published`` = max(ratio, 1/ratio), how many times apart the two
    are either way, and ``var_factor_to_published`` likewise for mse_var against
    the "±" value (NaN where the paper has no entry).
    """
    mse = np.asarray(mse, dtype=np.float64)
    if mse.ndim != 4 or mse.shape[1:] != (len(orders), len(examples), len(TABLE1_METHODS)):
        raise ValueError(
            f"mse must have shape (S, {len(orders)}, {len(examples)}, {len(TABLE1_METHODS)}), "
            f"got {mse.shape}"
        )
    s = distribution_summary(mse, axis=0)
    rows = []
    for i, order in enumerate(orders):
        for j, n in enumerate(examples):
            for k, method in enumerate(TABLE1_METHODS):
                pub_mean, pub_pm = TABLE1_PUBLISHED.get((int(order), int(n), method),
                                                        (np.nan, np.nan))
                mean = float(s["mean"][i, j, k])
                var = float(s["var"][i, j, k])
                rows.append(
                    {
                        "order": int(order),
                        "examples": int(n),
                        "method": method,
                        "mse_mean": mean,
                        "mse_std": float(s["std"][i, j, k]),
                        "mse_var": var,
                        "mse_median": float(s["median"][i, j, k]),
                        "mse_max_share": float(s["max_share"][i, j, k]),
                        "published_mean": pub_mean,
                        "published_pm": pub_pm,
                        "ratio_to_published": mean / pub_mean,
                        "factor_to_published": max(mean / pub_mean, pub_mean / mean),
                        "var_factor_to_published": max(var / pub_pm, pub_pm / var),
                    }
                )
    return rows


# ---------------------------------------------------------------------------
# vectorised: many independent sequences at once (Monte-Carlo studies)
# ---------------------------------------------------------------------------
@dataclass
class SequenceResult:
    """Per-step results of one method on S independent sequences of T examples.

    ``predictions`` (S, T): ŷ_t = φ(x_t)ᵀθ_t before the update with example t;
    ``losses`` (S, T): (ŷ_t − y_t)²; ``theta`` (S, p) after the last example;
    ``theta_at`` (S, R, p): θ after ``record_at[r]`` examples.
    """

    predictions: np.ndarray
    losses: np.ndarray
    theta: np.ndarray
    record_at: np.ndarray
    theta_at: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def cumulative_loss(self) -> np.ndarray:
        """(S, T): Σ_{i≤t} (ŷ_i − y_i)², the paper's eq. (1) after each example."""
        return np.cumsum(self.losses, axis=1)


def _check_sequences(Phi, y, record_at):
    Phi = np.asarray(Phi, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if Phi.ndim != 3:
        raise ValueError(f"Phi must have shape (n_sequences, T, p), got {Phi.shape}")
    if y.shape != Phi.shape[:2]:
        raise ValueError(f"y must have shape {Phi.shape[:2]} (n_sequences, T), got {y.shape}")
    check_finite("Phi", Phi)
    check_finite("y", y)
    T = Phi.shape[1]
    rec = np.atleast_1d(np.asarray(record_at, dtype=np.int64))
    if rec.size and (rec.min() < 0 or rec.max() > T):
        raise ValueError(f"record_at must hold example counts in [0, {T}], got {rec.tolist()}")
    return Phi, y, rec


def _snapshot(theta_at, rec, t, theta):
    hit = np.flatnonzero(rec == t)
    if hit.size:
        theta_at[:, hit, :] = theta[:, None, :]


def _sequence_pass(Phi, y, rec, update):
    """The pass every vectorised method makes over its S sequences, example by example:
    the prediction ŷ_t = φ_tᵀθ before the update, then θ ← ``update(t, φ_t, y_t − ŷ_t, θ)``
    (each (S, ·)), with θ₀ = 0 and θ kept after the example counts ``rec``. Returns
    (predictions (S, T), θ after the last example (S, p), θ at ``rec`` (S, R, p))."""
    S, T, p = Phi.shape
    theta = np.zeros((S, p))
    pred = np.empty((S, T))
    theta_at = np.empty((S, rec.size, p))
    _snapshot(theta_at, rec, 0, theta)
    for t in range(T):
        phi = Phi[:, t, :]
        pred[:, t] = np.einsum("sp,sp->s", phi, theta)
        theta = update(t, phi, y[:, t] - pred[:, t], theta)
        _snapshot(theta_at, rec, t + 1, theta)
    return pred, theta, theta_at


def irma_sequences(
    Phi, y, stiffness: StiffnessSchedule | dict | None = None, gramian=None, record_at=()
) -> SequenceResult:
    """IRMA on S independent sequences at once, vectorised over the sequence axis.

    ``Phi`` (S, T, p) are the expanded inputs, ``y`` (S, T) the targets,
    ``gramian`` the basis' Gramian A (None: orthonormal basis, A = I),
    ``record_at`` example counts after which θ is kept. θ₀ = 0 for every
    sequence; λ_t as in :class:`IRMA`. float64.
    """
    Phi, y, rec = _check_sequences(Phi, y, record_at)
    schedule = as_stiffness_schedule(stiffness)
    S, T, p = Phi.shape
    L = None
    if gramian is not None:
        L = cholesky_gramian(gramian)
        if L.shape[0] != p:
            raise ValueError(f"gramian must be ({p}, {p}) for {p} basis functions")
        Phi = sla.solve_triangular(L, Phi.reshape(-1, p).T, lower=True).T.reshape(S, T, p)
    lam = schedule.values(0, T)

    def update(t, phi, e, psi):
        gain = e / (lam[t] + np.einsum("sp,sp->s", phi, phi))
        return psi + gain[:, None] * phi

    pred, psi, theta_at = _sequence_pass(Phi, y, rec, update)
    if L is not None:
        psi = sla.solve_triangular(L.T, psi.T, lower=False).T
        if rec.size:
            flat = theta_at.reshape(-1, p).T
            theta_at = sla.solve_triangular(L.T, flat, lower=False).T.reshape(S, rec.size, p)
    return SequenceResult(
        pred, (pred - y) ** 2, psi, rec, theta_at, {"stiffness": schedule.as_dict()}
    )


def gd_sequences(Phi, y, mu: float = 0.05, record_at=()) -> SequenceResult:
    """The GD baseline (:class:`IRMAGradientDescent`) on S sequences at once."""
    Phi, y, rec = _check_sequences(Phi, y, record_at)
    mu = MU.check(mu)

    def update(t, phi, e, theta):
        g = -phi * e[:, None] + mu * theta
        gg = np.einsum("sp,sp->s", g, g)
        phig = np.einsum("sp,sp->s", phi, g)
        den = phig**2 + mu * gg
        eta = np.divide(gg, den, out=np.zeros_like(gg), where=gg > 0)
        return theta - eta[:, None] * g

    pred, theta, theta_at = _sequence_pass(Phi, y, rec, update)
    return SequenceResult(pred, (pred - y) ** 2, theta, rec, theta_at, {"mu": float(mu)})


def rls_sequences(
    Phi, y, forgetting: float = 0.9, mu: float = 0.05, p0: float = 1.0, record_at=()
) -> SequenceResult:
    """The RLS baseline (:class:`IRMARLS`) on S sequences at once (batched solves)."""
    Phi, y, rec = _check_sequences(Phi, y, record_at)
    forgetting, mu, p0 = FORGETTING.check(forgetting), MU.check(mu), P0.check(p0)
    S, T, p = Phi.shape
    leak = (1.0 - forgetting) * mu
    H = np.broadcast_to((1.0 / p0 + mu) * np.eye(p), (S, p, p)).copy()
    eye = np.eye(p)

    def update(t, phi, e, theta):
        nonlocal H
        H = forgetting * H + phi[:, :, None] * phi[:, None, :] + leak * eye
        rhs = phi * e[:, None] - leak * theta
        # H is SPD (>= (g^t/p0 + μ)I); batched LU solve, no inverse
        return theta + np.linalg.solve(H, rhs[:, :, None])[:, :, 0]

    pred, theta, theta_at = _sequence_pass(Phi, y, rec, update)
    params = {"forgetting": float(forgetting), "mu": float(mu), "p0": float(p0)}
    return SequenceResult(pred, (pred - y) ** 2, theta, rec, theta_at, params)


# ---------------------------------------------------------------------------
# batch reference (the paper's Table I)
# ---------------------------------------------------------------------------
def batch_polynomial_fit(x, y, order: int) -> np.ndarray:
    """Least-squares polynomial fit through the Vandermonde matrix (the paper's batch benchmark).

    Returns monomial coefficients c (order+1,) — or (order+1, K) for y (n, K) —
    with f(x) = Σ_i c_i x^i, from ``numpy.linalg.lstsq`` on V = [x^0 … x^order].
    With fewer examples than coefficients the problem is under-determined and
    lstsq returns the minimum-norm solution (MATLAB's ``polyfit``, the paper's
    tool, returns a basic solution with a rank warning instead; the two differ
    there). Evaluate with ``numpy.polynomial.polynomial.polyval(x, c)``.
    """
    order = ORDER.check(order)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D array of inputs, got shape {x.shape}")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have {x.shape[0]} rows like x, got shape {y.shape}")
    if x.size == 0:
        raise ValueError("x is empty: nothing to fit")
    check_finite("x", x)
    check_finite("y", y)
    V = np.vander(x, int(order) + 1, increasing=True)
    return np.linalg.lstsq(V, y, rcond=None)[0]
