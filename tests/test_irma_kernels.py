"""IRMA, its GD/RLS baselines and the bases (kernels/irma.py, kernels/basis.py).

Buschermöhle et al. (2013); docs/algorithms.md#irma. References used here are
independent of the code under test: scipy.special Legendre polynomials, closed
Gramians, a direct solve of the normal equations (8), the same recursion in
extended precision, a different (non-orthonormal, quadrature-Gramian) basis of
the same function space, KF4LLS's RLS, batch minimisers, numpy's polyfit, and
the paper's Table I.
"""

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlsq.kernels.recursions.basis import (
    LegendreBasis,
    MonomialBasis,
    QuadratureBasis,
    TensorBasis,
    gramian_cholesky,
    make_basis,
    quadrature_gramian,
)
from streamlsq.kernels.recursions.irma import (
    IRMA,
    IRMARLS,
    IRMAGradientDescent,
    StiffnessSchedule,
    irma_step,
)
from streamlsq.kernels.recursions.kf4lls import RLS
from streamlsq.kernels.studies.irma import (
    batch_polynomial_fit,
    gd_sequences,
    irma_sequences,
    rls_sequences,
)


def target(x):
    """The paper's target f(x) = x·exp(−x²) on [0, 3] (eq. 15)."""
    return x * np.exp(-(x**2))


def paper_data(rng, n_seq, T):
    """Inputs uniform on [0, 3], targets plus uniform noise in ±0.05 (§IV)."""
    x = rng.uniform(0.0, 3.0, size=(n_seq, T))
    return x, target(x) + rng.uniform(-0.05, 0.05, size=(n_seq, T))


def run_blocks(model, x, y, block=1):
    """Fold a 1-D sequence through a recursion with equal blocks; return the FoldResult."""
    n = x.shape[0]
    edges = np.r_[np.arange(0, n, block), n]
    return model.fold(model.init(1, 1), x[:, None], y[:, None], edges, 1, 1)


GRID = np.linspace(0.0, 3.0, 1000)  # the paper's 1000 test points


# --------------------------------------------------------------------------
# bases
# --------------------------------------------------------------------------
@pytest.mark.parametrize("domain", [(0.0, 3.0), (-2.0, 5.0)])
def test_legendre_basis_is_orthonormal_by_quadrature(domain):
    for order in (0, 1, 6, 12):
        basis = LegendreBasis(order, domain)
        A, n = quadrature_gramian(basis.expand, domain)
        np.testing.assert_allclose(A, np.eye(order + 1), atol=1e-13)
        np.testing.assert_array_equal(basis.gramian(), np.eye(order + 1))
        assert n == 2 * (order + 2)  # exact at p + 1 nodes, confirmed by one doubling


def test_legendre_recurrence_matches_scipy():
    a, b = 0.0, 3.0
    basis = LegendreBasis(10, (a, b))
    x = np.linspace(a, b, 101)
    u = (2 * x - a - b) / (b - a)
    ref = np.stack(
        [np.sqrt((2 * k + 1) / (b - a)) * sp.eval_legendre(k, u) for k in range(11)], axis=1
    )
    np.testing.assert_allclose(basis.expand(x), ref, rtol=1e-13, atol=1e-13)


def test_monomial_gramian_closed_form_matches_quadrature():
    for domain in [(0.0, 3.0), (-1.0, 2.0)]:
        basis = MonomialBasis(5, domain)
        A, _ = quadrature_gramian(basis.expand, domain)
        np.testing.assert_allclose(basis.gramian(), A, rtol=1e-13)
    assert MonomialBasis(5, (0, 3)).gramian()[0, 0] == 3.0
    # the conditioning that motivates the orthonormal basis (docs/algorithms.md#irma)
    assert np.linalg.cond(MonomialBasis(5, (0, 3)).gramian()) == pytest.approx(8.7e7, rel=0.01)


def test_to_monomial_evaluates_to_the_same_polynomial():
    rng = np.random.default_rng(0)
    basis = LegendreBasis(4, (0.0, 3.0))
    theta = rng.normal(size=(5, 2))
    c = basis.to_monomial(theta)
    assert c.shape == (5, 2)
    x = np.linspace(0, 3, 50)
    np.testing.assert_allclose(
        np.polynomial.polynomial.polyval(x, c).T, basis.expand(x) @ theta, rtol=1e-11, atol=1e-11
    )
    np.testing.assert_allclose(basis.to_monomial(theta[:, 0]), c[:, 0])


def test_quadrature_gramian_of_a_non_polynomial_basis():
    # {1, sin x, cos x} on [0, π]: ∫1 = π, ∫sin = 2, ∫cos = 0, ∫sin² = ∫cos² = π/2, ∫sin·cos = 0
    basis = QuadratureBasis(
        lambda x: np.stack([np.ones_like(x), np.sin(x), np.cos(x)], axis=1),
        (0.0, np.pi),
        names=["1", "sin", "cos"],
    )
    ref = np.array([[np.pi, 2.0, 0.0], [2.0, np.pi / 2, 0.0], [0.0, 0.0, np.pi / 2]])
    np.testing.assert_allclose(basis.gramian(), ref, atol=1e-13)
    assert basis.n_nodes_used is not None
    # a basis with a kink does not converge geometrically: refused unless n_nodes is given
    kink = QuadratureBasis(lambda x: np.stack([np.ones_like(x), np.abs(x - 1.0)], 1), (0.0, 3.0))
    with pytest.raises(ValueError, match="did not converge"):
        kink.gramian()
    fixed = QuadratureBasis(
        lambda x: np.stack([np.ones_like(x), np.abs(x - 1.0)], 1), (0.0, 3.0), n_nodes=400
    )
    # ∫|x−1| over [0,3] = 1/2 + 2 = 2.5; the rule's error is O(n⁻²) at the kink
    assert fixed.gramian()[0, 1] == pytest.approx(2.5, rel=1e-4)


def test_tensor_basis_gramian_is_the_kronecker_product():
    b0, b1 = LegendreBasis(2, (0.0, 1.0)), MonomialBasis(1, (-1.0, 2.0))
    basis = TensorBasis([b0, b1])
    assert basis.n_basis == 6 and basis.dim == 2 and not basis.orthonormal
    A_box, _ = quadrature_gramian(basis.expand, basis.domain)  # tensor Gauss–Legendre
    np.testing.assert_allclose(basis.gramian(), A_box, atol=1e-13)
    np.testing.assert_allclose(basis.gramian(), np.kron(b0.gramian(), b1.gramian()))
    x = np.array([[0.3, -0.5], [1.0, 2.0]])
    Phi = basis.expand(x)
    P0, P1 = b0.expand(x[:, 0]), b1.expand(x[:, 1])
    assert basis.names[3] == "P1(x0)*x(x1)"
    np.testing.assert_allclose(Phi[:, 3], P0[:, 1] * P1[:, 1])
    assert TensorBasis([b0, LegendreBasis(3, (0, 2))]).orthonormal


def test_bases_rebuild_from_their_parameters():
    for basis in (
        LegendreBasis(6, (0.0, 3.0)),
        MonomialBasis(2, (-1.0, 1.0)),
        TensorBasis([LegendreBasis(2, (0, 1)), MonomialBasis(1, (0, 2))]),
    ):
        rebuilt = make_basis(basis.get_params())
        x = np.linspace(basis.bounds[:, 0], basis.bounds[:, 1], 7)
        np.testing.assert_array_equal(rebuilt.expand(x), basis.expand(x))
        assert rebuilt.names == basis.names
    quad = QuadratureBasis(lambda x: np.stack([np.ones_like(x), x], 1), (0.0, 1.0))
    with pytest.raises(ValueError, match="quadrature"):
        make_basis(quad.get_params())


def test_bases_refuse_bad_input():
    basis = LegendreBasis(3, (0.0, 3.0))
    with pytest.raises(ValueError, match=r"x row 2 \(\[3.5\]\) is outside the basis domain"):
        basis.expand(np.array([0.0, 1.0, 3.5, -1.0]))
    with pytest.raises(ValueError, match="non-finite value in row 1"):
        basis.expand(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match=r"shape \(n, 1\)"):
        basis.expand(np.ones((3, 2)))
    with pytest.raises(ValueError, match="domain"):
        LegendreBasis(3, (2.0, 1.0))
    with pytest.raises(ValueError, match="order"):
        MonomialBasis(-1, (0, 1))
    tensor = TensorBasis([LegendreBasis(1, (0, 1)), LegendreBasis(1, (0, 2))])
    with pytest.raises(ValueError, match="row 1"):
        tensor.expand(np.array([[0.5, 0.5], [0.5, 2.5]]))


def test_singular_gramian_is_refused():
    dup = QuadratureBasis(lambda x: np.stack([np.ones_like(x), x, x], axis=1), (0.0, 3.0))
    with pytest.raises(ValueError, match="singular"):
        gramian_cholesky(dup)
    with pytest.raises(ValueError, match="singular"):
        IRMA(dup)
    # the degree-10 monomial Gramian on [0, 3] (cond 1.1e17) is singular in double precision
    with pytest.raises(ValueError, match="LegendreBasis"):
        IRMA(MonomialBasis(10, (0.0, 3.0)))


# --------------------------------------------------------------------------
# the IRMA update
# --------------------------------------------------------------------------
@pytest.mark.parametrize("basis", [LegendreBasis(5, (0, 3)), MonomialBasis(3, (0, 3))])
def test_post_update_residual_closed_form(basis):
    # y_t − φᵀθ_{t+1} = e_t·λ_t/(λ_t + φᵀA⁻¹φ)
    rng = np.random.default_rng(1)
    x, y = paper_data(rng, 1, 40)
    x, y = x[0], y[0]
    model = IRMA(basis)
    state = model.init(1, 1)
    A = basis.gramian()
    lam = StiffnessSchedule.paper().values(0, 40)
    for t in range(40):
        phi = basis.expand(x[t : t + 1])[0]
        e = y[t] - phi @ state["theta"][:, 0]
        state = model.update(state, x[t : t + 1, None], y[t : t + 1, None])
        after = y[t] - phi @ state["theta"][:, 0]
        q = phi @ np.linalg.solve(A, phi)
        assert after == pytest.approx(e * lam[t] / (lam[t] + q), rel=1e-9, abs=1e-13)
        assert abs(after) < abs(e) or e == 0  # local contraction (eq. 12)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    order=st.integers(0, 4),
    kind=st.sampled_from(["multiplicative", "additive", "constant"]),
    block=st.integers(1, 7),
)
def test_update_solves_the_normal_equations_8(seed, order, kind, block):
    # (A + φφᵀ/λ) θ_{t+1} = A θ_t + φ y/λ, solved directly, sample by sample
    rng = np.random.default_rng(seed)
    basis = MonomialBasis(order, (-1.0, 2.0))
    schedule = StiffnessSchedule(kind, initial=rng.uniform(0.01, 1.0), rate=rng.uniform(1.0, 1.2))
    x = rng.uniform(-1.0, 2.0, 15)
    y = rng.normal(size=15)
    res = run_blocks(IRMA(basis, schedule), x, y, block)
    A = basis.gramian()
    lam = schedule.values(0, 15)
    theta = np.zeros(order + 1)
    thetas = []
    for t in range(15):
        phi = basis.expand(x[t : t + 1])[0]
        theta = np.linalg.solve(A + np.outer(phi, phi) / lam[t], A @ theta + phi * y[t] / lam[t])
        thetas.append(theta)
    rows = res.rows_seen
    ref = np.array(thetas)[rows - 1]
    # cond(A) ≤ 1e3 for degree ≤ 4 on [−1, 2]: a few hundred eps per step
    np.testing.assert_allclose(res.coefs[:, :, 0], ref, rtol=1e-9, atol=1e-10)


def test_irma_step_reference_matches_the_recursion():
    rng = np.random.default_rng(2)
    basis = MonomialBasis(3, (0.0, 3.0))
    x, y = paper_data(rng, 1, 30)
    res = run_blocks(IRMA(basis), x[0], y[0], block=4)
    theta = np.zeros(4)
    lam = StiffnessSchedule.paper().values(0, 30)
    loss = 0.0
    for t in range(30):
        phi = basis.expand(x[0, t : t + 1])[0]
        theta, e = irma_step(theta, phi, y[0, t], lam[t], basis.gramian())
        loss += e**2
    np.testing.assert_allclose(res.state["theta"][:, 0], theta, rtol=1e-9)
    assert float(res.state["cumulative_loss"]) == pytest.approx(loss, rel=1e-12)
    assert res.diagnostics["cumulative_loss"][-1] == pytest.approx(loss, rel=1e-12)


@pytest.mark.parametrize("order", [3, 4])
def test_orthonormal_and_monomial_irma_give_the_same_function(order):
    # the update depends on the function space only; monomial cond(A) ≤ 1.5e6 here
    rng = np.random.default_rng(3)
    x, y = paper_data(rng, 1, 150)
    leg, mono = LegendreBasis(order, (0, 3)), MonomialBasis(order, (0, 3))
    f_leg = IRMA(leg).predict(run_blocks(IRMA(leg), x[0], y[0]).state, GRID)
    f_mono = IRMA(mono).predict(run_blocks(IRMA(mono), x[0], y[0], block=10).state, GRID)
    # rounding bound ≈ cond(A)·eps·max|f| ≈ 1.5e6 · 2.2e-16 · 0.5 ≈ 2e-10 (measured 1e-13)
    np.testing.assert_allclose(f_leg, f_mono, rtol=0, atol=1e-9)


def test_order_10_runs_150_samples_without_loss_of_accuracy():
    """Order 10 on [0, 3] (monomial Gramian singular in double precision).

    Measured three ways on 150 samples: (a) against the same recursion in
    x87 extended precision (eps 1.1e-19): IRMA is a contraction in the A-norm, so
    rounding does not grow and the difference stays at T·p·eps·max|f| ≈ 150·11·2.2e-16
    ≈ 4e-13 or below; (b) against IRMA in a different, non-orthonormal basis of
    the same space (shifted Chebyshev polynomials, Gramian by quadrature,
    Cholesky path), agreement to cond(A_cheb)·eps-level; (c) against the truth:
    MSE on the paper's 1000 test points within a factor 3 of the published
    1.2e-4 (Table I), averaged over 100 sequences.
    """
    rng = np.random.default_rng(4)
    basis = LegendreBasis(10, (0.0, 3.0))
    x, y = paper_data(rng, 1, 150)
    res = run_blocks(IRMA(basis), x[0], y[0], block=16)
    f64 = basis.expand(GRID) @ res.state["theta"][:, 0]

    # (a) extended precision, plain per-sample loop (A = I)
    ld = np.longdouble
    Phi = basis.expand(x[0].astype(ld))
    lam = (ld("0.1") * ld("1.05") ** np.arange(150).astype(ld)).astype(ld)
    theta = np.zeros(11, dtype=ld)
    for t in range(150):
        phi = Phi[t]
        theta = theta + phi * ((y[0, t] - phi @ theta) / (lam[t] + phi @ phi))
    f_ext = basis.expand(GRID.astype(ld)) @ theta
    assert np.abs(f64 - f_ext).max() < 1e-12

    # (b) shifted Chebyshev basis T_k(2x/3 − 1), Gramian by Gauss–Legendre quadrature
    cheb = QuadratureBasis(
        lambda v: np.polynomial.chebyshev.chebvander(2 * v / 3 - 1, 10), (0.0, 3.0)
    )
    res_c = run_blocks(IRMA(cheb), x[0], y[0], block=7)
    f_cheb = IRMA(cheb).predict(res_c.state, GRID)[:, 0]
    assert np.abs(f64 - f_cheb).max() < 1e-10

    # (c) accuracy against the ground truth
    xs, ys = paper_data(rng, 100, 150)
    seq = irma_sequences(basis.expand(xs.ravel()).reshape(100, 150, 11), ys)
    mse = ((seq.theta @ basis.expand(GRID).T - target(GRID)) ** 2).mean(axis=1)
    assert 1.2e-4 / 3 < mse.mean() < 3 * 1.2e-4


def test_table_I_order_6_after_150_examples_matches_the_paper():
    # Published means (Table I): 9.4e-5 incremental, 5.0e-5 batch. 300 sequences:
    # the spread of the MSE is ~6e-5, so the mean is known to ~4e-6 (5 %).
    rng = np.random.default_rng(5)
    x, y = paper_data(rng, 300, 150)
    basis = LegendreBasis(6, (0.0, 3.0))
    seq = irma_sequences(basis.expand(x.ravel()).reshape(300, 150, 7), y, record_at=[150])
    mse_incr = ((seq.theta_at[:, 0] @ basis.expand(GRID).T - target(GRID)) ** 2).mean(axis=1)
    fits = [batch_polynomial_fit(xs, ys, 6) for xs, ys in zip(x, y, strict=True)]
    mse_batch = np.array(
        [((np.polynomial.polynomial.polyval(GRID, c) - target(GRID)) ** 2).mean() for c in fits]
    )
    assert 9.4e-5 / 3 < mse_incr.mean() < 3 * 9.4e-5
    assert 5.0e-5 / 3 < mse_batch.mean() < 3 * 5.0e-5


def test_figure_1_ordering_of_cumulative_losses():
    # Published: IRMA has the lowest cumulative loss with almost no spread; GD is unstable.
    rng = np.random.default_rng(6)
    x, y = paper_data(rng, 100, 150)
    mono = MonomialBasis(6, (0.0, 3.0))
    Phi_m = mono.expand(x.ravel()).reshape(100, 150, 7)
    Phi_l = LegendreBasis(6, (0.0, 3.0)).expand(x.ravel()).reshape(100, 150, 7)
    final = {
        "irma": irma_sequences(Phi_l, y).cumulative_loss[:, -1],
        "gd": gd_sequences(Phi_m, y).cumulative_loss[:, -1],
        "rls": rls_sequences(Phi_m, y).cumulative_loss[:, -1],
    }
    assert final["irma"].mean() < final["rls"].mean()
    assert final["irma"].mean() < final["gd"].mean()
    assert final["irma"].std() < min(final["rls"].std(), final["gd"].std())


# --------------------------------------------------------------------------
# recursions: fold, sequences, baselines
# --------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), b1=st.integers(1, 30), b2=st.integers(1, 30))
def test_block_partition_does_not_change_a_per_sample_recursion(seed, b1, b2):
    rng = np.random.default_rng(seed)
    x, y = paper_data(rng, 1, 60)
    for model in (
        IRMA(LegendreBasis(4, (0, 3))),
        IRMA(MonomialBasis(2, (0, 3))),
        IRMAGradientDescent(MonomialBasis(3, (0, 3))),
        IRMARLS(MonomialBasis(3, (0, 3))),
    ):
        r1, r2 = run_blocks(model, x[0], y[0], b1), run_blocks(model, x[0], y[0], b2)
        np.testing.assert_allclose(r1.state["theta"], r2.state["theta"], rtol=1e-10, atol=1e-13)
        assert float(r1.state["cumulative_loss"]) == pytest.approx(
            float(r2.state["cumulative_loss"]), rel=1e-10
        )
        assert int(r1.state["rows"]) == 60


def _per_sequence(model, x, y):
    out = [run_blocks(model, xs, ys) for xs, ys in zip(x, y, strict=True)]
    return np.stack([r.coefs[:, :, 0] for r in out]), np.stack(
        [r.diagnostics["cumulative_loss"] for r in out]
    )


@pytest.mark.parametrize(
    "name",
    ["irma-legendre", "irma-monomial", "gd", "rls"],
)
def test_vectorised_sequences_equal_the_per_sequence_recursion(name):
    rng = np.random.default_rng(7)
    x, y = paper_data(rng, 3, 40)
    steps = np.arange(1, 41)
    if name == "irma-legendre":
        basis = LegendreBasis(6, (0, 3))
        model, run = IRMA(basis), lambda P: irma_sequences(P, y, record_at=steps)
    elif name == "irma-monomial":
        basis = MonomialBasis(4, (0, 3))
        model = IRMA(basis, StiffnessSchedule("additive", 0.2, 0.1))
        run = lambda P: irma_sequences(  # noqa: E731
            P, y, {"kind": "additive", "initial": 0.2, "rate": 0.1}, basis.gramian(), steps
        )
    elif name == "gd":
        basis = MonomialBasis(6, (0, 3))
        model, run = IRMAGradientDescent(basis), lambda P: gd_sequences(P, y, record_at=steps)
    else:
        basis = MonomialBasis(6, (0, 3))
        model, run = IRMARLS(basis), lambda P: rls_sequences(P, y, record_at=steps)
    seq = run(basis.expand(x.ravel()).reshape(3, 40, -1))
    coefs, cum = _per_sequence(model, x, y)
    scale = np.abs(coefs).max()
    np.testing.assert_allclose(seq.theta_at, coefs, rtol=1e-9, atol=1e-11 * scale)
    np.testing.assert_allclose(seq.cumulative_loss, cum, rtol=1e-9)
    np.testing.assert_allclose(seq.theta, coefs[:, -1], rtol=1e-9, atol=1e-11 * scale)
    # predictions are made before the update: the first one is φ(x₀)ᵀ0 = 0
    np.testing.assert_array_equal(seq.predictions[:, 0], 0.0)


def test_cumulative_loss_diagnostic_is_recorded_per_step_and_resumes():
    rng = np.random.default_rng(8)
    x, y = paper_data(rng, 1, 50)
    model = IRMA(LegendreBasis(6, (0, 3)))
    X, Y = x[0][:, None], y[0][:, None]
    edges = np.r_[0:50:5, 50]
    whole = model.fold(model.init(1, 1), X, Y, edges, 1, 2)
    np.testing.assert_array_equal(whole.steps, [2, 4, 6, 8, 10])
    np.testing.assert_array_equal(whole.rows_seen, [10, 20, 30, 40, 50])
    # two segments, the second resuming from the first's state
    first = model.fold(model.init(1, 1), X[:25], Y[:25], edges[:6], 1, 2)
    second = model.fold(first.state, X[25:], Y[25:], edges[5:] - 25, 6, 2, rows_before=25)
    joined = np.r_[first.diagnostics["cumulative_loss"], second.diagnostics["cumulative_loss"]]
    np.testing.assert_allclose(joined, whole.diagnostics["cumulative_loss"], rtol=1e-13)
    seq = irma_sequences(LegendreBasis(6, (0, 3)).expand(x[0])[None], y)
    ref = seq.cumulative_loss[0, whole.rows_seen - 1]
    np.testing.assert_allclose(whole.diagnostics["cumulative_loss"], ref, rtol=1e-12)


def test_gd_baseline_is_an_exact_line_search_on_the_regularised_loss():
    rng = np.random.default_rng(9)
    basis = MonomialBasis(4, (0, 3))
    x, y = paper_data(rng, 1, 30)
    for mu in (0.0, 0.05):
        model = IRMAGradientDescent(basis, mu=mu)
        state = model.init(1, 1)
        for t in range(30):
            phi = basis.expand(x[0, t : t + 1])[0]
            theta = state["theta"][:, 0]
            g = -phi * (y[0, t] - phi @ theta) + mu * theta
            state = model.update(state, x[0, t : t + 1, None], y[0, t : t + 1, None])
            new = state["theta"][:, 0]
            grad_new = -phi * (y[0, t] - phi @ new) + mu * new
            # new θ lies on the line θ − ηg and the loss is stationary along g there
            np.testing.assert_allclose(
                np.linalg.matrix_rank(np.stack([new - theta, g]), tol=1e-9 * np.abs(g).max()), 1
            )
            assert abs(g @ grad_new) <= 1e-9 * (g @ g)
            if mu == 0.0:  # normalised LMS: the example is interpolated
                assert y[0, t] - phi @ new == pytest.approx(0.0, abs=1e-10)


def test_rls_baseline_without_tikhonov_equals_kf4lls_rls():
    rng = np.random.default_rng(10)
    basis = MonomialBasis(3, (0, 3))
    x, y = paper_data(rng, 1, 60)
    ours = run_blocks(IRMARLS(basis, forgetting=0.9, mu=0.0, p0=2.0), x[0], y[0], block=9)
    Phi = basis.expand(x[0])
    kf = RLS(forgetting=0.9, ridge=1 / 2.0, solver="normal")  # H: the normal form's state
    state = kf.init(4, 1)
    for t in range(60):
        state = kf.update(state, Phi[t : t + 1], y[0, t : t + 1, None])
    np.testing.assert_allclose(ours.state["theta"], kf.coef(state), rtol=1e-8)
    np.testing.assert_allclose(ours.state["H"], state["H"], rtol=1e-12)


def test_rls_baseline_is_the_batch_minimiser_of_its_cost():
    # θ_t = argmin Σ g^{t−i}(y_i − φ_iᵀθ)² + g^t θᵀθ/p0 + μθᵀθ, by lstsq on weighted rows
    rng = np.random.default_rng(11)
    basis = MonomialBasis(4, (0, 3))
    g, mu, p0 = 0.9, 0.05, 1.0
    x, y = paper_data(rng, 1, 50)
    res = run_blocks(IRMARLS(basis, forgetting=g, mu=mu, p0=p0), x[0], y[0])
    Phi = basis.expand(x[0])
    for t in (1, 5, 20, 50):
        w = np.sqrt(g ** np.arange(t - 1, -1, -1.0))
        reg = np.sqrt(g**t / p0 + mu) * np.eye(5)
        M = np.vstack([Phi[:t] * w[:, None], reg])
        rhs = np.r_[y[0, :t] * w, np.zeros(5)]
        ref = np.linalg.lstsq(M, rhs, rcond=None)[0]
        np.testing.assert_allclose(res.coefs[t - 1, :, 0], ref, rtol=1e-7, atol=1e-9)


def test_stiffness_schedules():
    lam = StiffnessSchedule.paper().values(0, 4)
    np.testing.assert_allclose(lam, [0.1, 0.105, 0.11025, 0.1157625])
    np.testing.assert_allclose(StiffnessSchedule("additive", 0.5, 0.25).values(2, 2), [1.0, 1.25])
    np.testing.assert_allclose(StiffnessSchedule("constant", 2.0).values(5, 3), [2.0, 2.0, 2.0])
    for kw in (
        {"kind": "multiplicative", "initial": 0.0},
        {"kind": "multiplicative", "initial": -1.0},
        {"kind": "multiplicative", "initial": 0.1, "rate": 0.0},
        {"kind": "additive", "initial": 0.1, "rate": -0.1},
        {"kind": "constant", "initial": np.inf},
        {"kind": "geometric"},
    ):
        with pytest.raises(ValueError, match="stiffness"):
            StiffnessSchedule(**kw)
    with pytest.raises(ValueError, match="stiffness"):
        IRMA(LegendreBasis(2, (0, 1)), stiffness={"kind": "constant", "initial": -2.0})
    with pytest.raises(ValueError, match="lam"):
        irma_step(np.zeros(2), np.ones(2), 1.0, 0.0)


def test_recursion_contract_and_bad_input():
    basis = LegendreBasis(3, (0.0, 3.0))
    model = IRMA(basis)
    state = model.init(1, 1)
    assert set(model.state_dims()) == set(state)
    assert set(IRMARLS(basis).state_dims()) == set(IRMARLS(basis).init(1, 1))
    assert model.coef_names(1) == ["P0", "P1", "P2", "P3"]
    paper = {"kind": "multiplicative", "initial": 0.1, "rate": 1.05}
    assert model.get_params()["stiffness"] == paper
    with pytest.raises(ValueError, match="n_targets must be 1"):
        model.init(1, 2)
    with pytest.raises(ValueError, match="input dimension 1"):
        model.init(3, 1)
    X = np.array([[0.5], [1.0], [4.0]])
    Y = np.ones((3, 1))
    with pytest.raises(ValueError, match="X row 12 .* outside"):
        model.fold(state, X, Y, np.array([0, 3]), 1, 1, rows_before=10)
    with pytest.raises(ValueError, match="Y has a non-finite value in row 1"):
        model.update(state, X[:2], np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match="one target column"):
        model.update(state, X[:2], np.ones((2, 2)))
    with pytest.raises(ValueError, match="same rows"):
        model.update(state, X[:2], np.ones((3, 1)))
    with pytest.raises(ValueError, match="mu"):
        IRMAGradientDescent(basis, mu=-1.0)
    with pytest.raises(ValueError, match="forgetting"):
        IRMARLS(basis, forgetting=1.5)
    with pytest.raises(ValueError, match="p0"):
        IRMARLS(basis, p0=0.0)
    with pytest.raises(ValueError, match="Basis"):
        IRMA("legendre")
    with pytest.raises(ValueError, match=r"y must have shape \(2, 5\)"):
        irma_sequences(np.zeros((2, 5, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="record_at"):
        irma_sequences(np.zeros((2, 5, 3)), np.zeros((2, 5)), record_at=[6])


def test_float32_state_runs_in_float32():
    rng = np.random.default_rng(12)
    x, y = paper_data(rng, 1, 80)
    model = IRMA(LegendreBasis(6, (0, 3)))
    edges = np.r_[0:80:10, 80]
    s32 = model.fold(
        model.init(1, 1, np.float32), x[0][:, None].astype(np.float32), y[0][:, None], edges, 1, 1
    )
    s64 = model.fold(model.init(1, 1), x[0][:, None], y[0][:, None], edges, 1, 1)
    assert s32.state["theta"].dtype == np.float32 and s32.coefs.dtype == np.float32
    np.testing.assert_allclose(s32.state["theta"], s64.state["theta"], rtol=1e-4, atol=1e-5)


def test_batch_polynomial_fit():
    rng = np.random.default_rng(13)
    x, y = paper_data(rng, 1, 40)
    c = batch_polynomial_fit(x[0], y[0], 4)
    np.testing.assert_allclose(c, np.polynomial.polynomial.polyfit(x[0], y[0], 4), rtol=1e-8)
    # under-determined (5 points, 7 coefficients): interpolates with the minimum-norm solution
    c_under = batch_polynomial_fit(x[0, :5], y[0, :5], 6)
    V = np.vander(x[0, :5], 7, increasing=True)
    np.testing.assert_allclose(V @ c_under, y[0, :5], atol=1e-10)
    np.testing.assert_allclose(c_under, np.linalg.pinv(V) @ y[0, :5], rtol=1e-6)
    with pytest.raises(ValueError, match="x has a non-finite"):
        batch_polynomial_fit(np.array([0.0, np.nan]), np.zeros(2), 1)
    with pytest.raises(ValueError, match="order"):
        batch_polynomial_fit(x[0], y[0], -1)
