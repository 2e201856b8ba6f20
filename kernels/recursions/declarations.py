"""The declarations of the built-in recursions, importable without their kernels.

A :class:`RecursionDeclaration` holds everything a user reaches a recursion through
without running it: its ``name``, one-line ``summary``, the ``description`` and
``examples`` of ``streamlsq fit NAME --help``, its ``params`` (:class:`~.params.Param`),
the roles of the stores it reads (``inputs``), how it fits an intercept
(``intercept_kind``, ``default_intercept``), whether it takes precision weights
(``weighted``) and has the scan form (``scan``), and the class that runs it
(``class_path``, ``"module:Class"``). This module imports NumPy and the light modules
:mod:`.params`, :mod:`.contract` and :mod:`.basis` only, neither Numba nor SciPy: the
registry (:mod:`.registry`) answers ``RECURSIONS.declaration(name)`` from
:data:`DECLARATIONS`, and the command line builds ``streamlsq fit NAME`` and checks its
options from it, before the kernels are imported (when the fit runs).

Each built-in recursion class takes its declared attributes from its declaration, the one
place they are written::

    class KF4LLS(FormRecursion):
        declaration = DECLARATIONS["kf4lls"]   # name, summary, params, ... come from it

A recursion class that writes its attributes in its class body (a plugin's, one
registered by hand, a module added to the package without a declaration) works as
well: the registry derives its declaration from them (:meth:`RecursionDeclaration.of`),
after importing it. The test suite checks that every recursion class of this package has
its declaration here and every declaration names its class
(``tests/test_recursion_declarations.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from streamlsq.kernels.recursions.basis import ORDER, Basis, domain_from_intervals
from streamlsq.kernels.recursions.contract import ScanRecursion
from streamlsq.kernels.recursions.params import FORGETTING, Param

__all__ = [
    "ALPHA",
    "BASIS_PARAMS",
    "DECLARATIONS",
    "DIAGNOSTICS_PARAM",
    "POPULATIONS",
    "RIDGE_PARAM",
    "RecursionDeclaration",
    "SOLVERS",
    "SOLVER_PARAM",
    "SUPPORT_MODULES",
]


@dataclass(frozen=True)
class RecursionDeclaration:
    """What a user may set on a recursion and how a user reaches it (see the module
    docstring); the class attributes of the same names are taken from it.

    Examples
    --------
    >>> from streamlsq.kernels.recursions.declarations import DECLARATIONS
    >>> rls = DECLARATIONS["rls"]
    >>> rls.class_name, rls.engines, [p.name for p in rls.params]
    ('RLS', ('sequential', 'scan'), ['forgetting', 'ridge', 'solver', 'diagnostics'])
    """

    #: short name used by the CLI and in result attrs
    name: str
    #: one line saying what the recursion is (the CLI's list of methods)
    summary: str
    #: the class that runs it, ``"module:Class"`` (imported by :meth:`load`)
    class_path: str
    #: what a user may set, in the order the CLI and the estimators show it
    params: tuple[Param, ...] = ()
    #: the paragraphs of ``streamlsq fit NAME --help`` (empty: built from the summary and
    #: the class docstring)
    description: str = ""
    #: command lines that show the recursion's use (``streamlsq fit NAME --help``)
    examples: tuple[str, ...] = ()
    #: the roles of the stores the recursion reads
    inputs: tuple[str, ...] = ("data",)
    #: how an intercept is fitted: "column", "kernel", "basis" or "centred"
    #: (:attr:`streamlsq.kernels.recursions.contract.Recursion.intercept_kind`)
    intercept_kind: str = "column"
    #: whether the intercept is fitted when the user does not say
    default_intercept: bool = False
    #: whether the recursion takes precision weights of its rows
    weighted: bool = False
    #: whether the recursion has the scan form (derives from ``ScanRecursion``)
    scan: bool = False

    #: the declared attributes a recursion class takes from its declaration
    ATTRIBUTES = ("name", "summary", "description", "examples", "params", "inputs",
                  "intercept_kind", "default_intercept", "weighted")

    @property
    def module(self) -> str:
        """The module that defines the recursion's class."""
        return self.class_path.partition(":")[0]

    @property
    def class_name(self) -> str:
        """The name of the recursion's class (``KF4LLS``)."""
        return self.class_path.partition(":")[2].rpartition(".")[2]

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines that can run it: sequential always, scan with the scan form."""
        return ("sequential", "scan") if self.scan else ("sequential",)

    def load(self) -> type:
        """The recursion's class (its module imported now)."""
        module, _, qualname = self.class_path.partition(":")
        target = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        return target

    @classmethod
    def of(cls, recursion: type) -> RecursionDeclaration:
        """The declaration of a recursion class, read off its class attributes (a class of
        a plugin or one registered by hand; a built-in class gives its own). The
        ``description`` and ``examples`` are the class's own, not those of a class it
        derives from (whose help would not describe it)."""
        own = vars(recursion)
        return cls(
            name=recursion.name, summary=recursion.summary,
            class_path=f"{recursion.__module__}:{recursion.__qualname__}",
            params=tuple(recursion.params), description=own.get("description") or "",
            examples=tuple(own.get("examples", ())), inputs=tuple(recursion.inputs),
            intercept_kind=recursion.intercept_kind,
            default_intercept=recursion.default_intercept, weighted=recursion.weighted,
            scan=issubclass(recursion, ScanRecursion))


#: the modules of this package that define no recursion: the registry lists the
#: recursions without importing them (a module neither listed here nor the module of a
#: declaration is imported then, to find the recursions it defines)
SUPPORT_MODULES = frozenset({"basis", "checks", "contract", "declarations", "givens",
                             "moments", "params", "registry", "shuffle", "sqrtinfo",
                             "stability"})

_PACKAGE = "streamlsq.kernels.recursions"

# -- KF4LLS, RLS and interleaved KF4LLS -----------------------------------------------

#: the two forms of the least-squares recursions: the square-root information form (QR,
#: the default) and the normal equations (H and h = Hψ)
SOLVERS = ("qr", "normal")

#: the declarations KF4LLS, RLS and interleaved KF4LLS share
SOLVER_PARAM = Param(
    "solver", "qr", "qr: square-root information form (a QR of [sqrt(g) R; X] per block, "
    "error ~ eps*cond(X)); normal: the normal equations H = X'X (faster, error ~ "
    "eps*cond(X)^2).", type=str, choices=SOLVERS)
DIAGNOSTICS_PARAM = Param(
    "diagnostics", False, "Record recursive residuals, prediction errors, CUSUM and CUSUM "
    "of squares per step (sequential engine, solver qr).", type=bool)
RIDGE_PARAM = Param("ridge", 0.0, "Ridge start H0 = ridge*I (0: the paper's H0 = 0, which "
                    "needs a full-rank first block).", ge=0)

#: the two populations of interleaved KF4LLS, the roles of the stores it reads
POPULATIONS = ("a", "b")
#: the mixing weight α of eq. (1)–(2) and the population of the first block
ALPHA = Param("alpha", 0.5, "Mixing weight in [0, 1]: the target population is "
              "alpha*A + (1-alpha)*B.", ge=0, le=1)
START = Param("start", "a", "Population of the first block.", type=str, choices=POPULATIONS)

_KF4LLS = RecursionDeclaration(
    name="kf4lls",
    summary="block least squares (Kalman filter)",
    class_path=f"{_PACKAGE}.kf4lls:KF4LLS",
    description="KF4LLS (block least squares) on the stream store DATA.",
    examples=(
        "streamlsq fit kf4lls data.zarr --out fit.zarr",
        "streamlsq fit kf4lls data.zarr --out fit.zarr --engine scan --block-size 1000",
        "streamlsq fit kf4lls big.zarr --out fit.zarr --checkpoint ckpt/ --resume",
    ),
    params=(
        RIDGE_PARAM,
        FORGETTING.replace(help="Forgetting factor g in (0, 1]; 1 is least squares on all "
                           "rows seen."),
        SOLVER_PARAM,
        DIAGNOSTICS_PARAM,
    ),
    weighted=True,  # precision weights of rows (``weights=``: statsmodels' ``WLS``)
    scan=True,
)

_RLS = RecursionDeclaration(
    name="rls",
    summary="RLS with a forgetting factor (per block, or per sample with --block-size 1)",
    class_path=f"{_PACKAGE}.kf4lls:RLS",
    description="""RLS with a forgetting factor on the stream store DATA.

    With --block-size 1 this is per-sample RLS.""",
    examples=(
        "streamlsq fit rls data.zarr --out rls.zarr --forgetting 0.999 --ridge 1e-3 "
        "--block-size 1",
        "streamlsq fit rls data.zarr --out rls.zarr --engine scan --block-size 1000",
    ),
    params=(
        FORGETTING.replace(default=0.99),
        RIDGE_PARAM.replace(help="Tikhonov start H0 = ridge*I (needed with --block-size 1 "
                            "unless the first block has full rank); it decays like g^i."),
        SOLVER_PARAM,
        DIAGNOSTICS_PARAM,
    ),
    weighted=True,
    scan=True,
)

_INTERLEAVED_KF4LLS = RecursionDeclaration(
    name="interleaved-kf4lls",
    summary="interleaved KF4LLS over two populations A B",
    class_path=f"{_PACKAGE}.interleaved:InterleavedKF4LLS",
    description="""Interleaved KF4LLS: blocks of populations A and B alternately, centred and
    weighted.

    A, B (and C) are stream stores or groups of one, written PATH#GROUP. Blocks: each
    store's block_size attribute (else its chunk size), or --block-size for all. The
    stream alternates A1, B1, A2, B2, ... (--start b: B1, A1, ...) and stops when the
    population due next has no block left: the longer population's extra blocks are not
    used (the result's attrs blocks_used_a/b and rows_unused_a/b say how many). Give
    --alpha, or --estimate-alpha with --test. Also: streamlsq fit interleaved.""",
    examples=(
        "streamlsq simulate interleaved --out p.zarr",
        "streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --out fit.zarr",
        "streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --test p.zarr#c --out fit.zarr",
        "streamlsq fit interleaved p.zarr#a p.zarr#b --alpha 0.25 --start b --out fit.zarr",
        "streamlsq fit interleaved b.zarr f.zarr --test p.zarr --estimate-alpha grid --out r.zarr",
    ),
    params=(ALPHA, START, RIDGE_PARAM.replace(help="Ridge start H0 = ridge*I (0: the "
                                              "paper's H0 = 0)."), SOLVER_PARAM),
    inputs=POPULATIONS,
    intercept_kind="centred",
    scan=True,
)

# -- LMS -----------------------------------------------------------------------------

#: the declared parameters of LMS; :class:`~.lms.StepSchedule` checks its values with the
#: first four
SCHEDULE = Param("schedule", "constant", "Step size: rate; rate/(1 + k/tau); rate/k^power "
                 "(k: samples so far).", type=str, choices=("constant", "inverse", "power"))
LMS_RATE = Param("rate", 0.01, "rho_0 > 0.", gt=0)
TAU = Param("tau", None, "tau > 0 of the inverse schedule.", gt=0, optional=True)
POWER = Param("power", None, "Exponent in (0.5, 1] of the power schedule.", gt=0.5, le=1,
              optional=True)
NORMALIZED = Param("normalized", False, "Normalised LMS: step rho_k/(eps + |x~|^2); stable "
                   "for 0 < rate < 2.", type=bool)
#: the eps of normalised LMS when none is given (eps defaults to None, "not given": plain
#: LMS reads none, and one given to it is refused)
DEFAULT_EPS = 1e-6
EPS = Param("eps", None, f"With --normalized: the eps of its step rho_k/(eps + |x~|^2) "
            f"(default {DEFAULT_EPS:g}).", ge=0, optional=True)

_LMS = RecursionDeclaration(
    name="lms",
    summary="per-sample LMS (Widrow-Hoff) with an intercept, epochs and shuffles",
    class_path=f"{_PACKAGE}.lms:LMS",
    description="""LMS (Widrow-Hoff, per-sample SGD with an intercept) on the stream store
    DATA.

    Sequential engine only (LMS has no scan form). Blocks (--block-size) are the steps at
    which the coefficients may be recorded; the update is per sample. The coefficient
    rows of the result are labelled intercept, x0, x1, ...; steps count on over epochs
    and epoch(step) says which pass a step belongs to.""",
    examples=(
        "streamlsq fit lms data.zarr --out lms.zarr --rate 0.001",
        "streamlsq fit lms data.zarr --out lms.zarr --schedule inverse --rate 0.05 --tau 1e4",
        "streamlsq fit lms data.zarr --out lms.zarr --normalized --rate 0.5 --epochs 3 "
        "--shuffle",
        "streamlsq fit lms data.zarr --out lms.zarr --schedule power --rate 0.1 --power 0.75",
        "streamlsq fit lms big.zarr --out lms.zarr --epochs 5 --checkpoint ckpt/ --resume",
    ),
    params=(SCHEDULE, LMS_RATE, TAU, POWER, NORMALIZED, EPS),
    intercept_kind="kernel",
    default_intercept=True,
)

# -- incremental BFGS ------------------------------------------------------------------

#: the step: exact line search, or a fixed rate (the reference rate of balanced rates)
BFGS_RATE = Param("rate", "exact", "Step: exact line search on each block's loss, or a fixed "
                  "rate alpha_r > 0.", choices=("exact",), gt=0, metavar="exact|FLOAT",
                  requirement="'exact' or a positive number")

_BFGS = RecursionDeclaration(
    name="bfgs",
    summary="incremental BFGS (exact, fixed or class-balanced rates)",
    class_path=f"{_PACKAGE}.bfgs:IncrementalBFGS",
    description="""Incremental BFGS on the stream store DATA, block after block.

    The first block is solved by least squares (W0, B0 = H0^-1); every later block steps
    along B X'(Y - XW) and updates B by the BFGS formula, skipping the update when the
    curvature is not positive (counted: n_skipped(step) and the attr n_skipped). Several
    targets use the K x K form. Sequential engine only (BFGS has no scan form).""",
    examples=(
        "streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 1000",
        "streamlsq fit bfgs data.zarr --out bfgs.zarr --block-size 500 --rate 0.5",
        "streamlsq fit bfgs labels.zarr --out b.zarr --block-size 200 --rate 1 --balanced",
        "streamlsq fit bfgs data.zarr --out bfgs.zarr --first-block-size 5 --ridge 1e-3",
        "streamlsq fit bfgs big.zarr --out bfgs.zarr --checkpoint ckpt/ --resume",
    ),
    params=(
        BFGS_RATE,
        Param("balanced", False, "Class-balanced per-example rates from --rate (binary targets "
              "0/1 or -1/1).", type=bool),
        Param("ridge", 0.0, "Start from H0 + ridge*I when the first block is rank deficient "
              "(0: refuse such a block).", ge=0),
        Param("balance_counts", "block", "Counts of positives/negatives for --balanced: the "
              "block's, or all so far.", type=str, choices=("block", "cumulative")),
    ),
)

# -- IRMA and its baselines --------------------------------------------------------------

#: the declared parameters of IRMA's schedule; :class:`~.irma.StiffnessSchedule` checks with
#: them
STIFFNESS = Param("stiffness", "multiplicative", "lambda_t = initial*rate^t, initial + "
                  "rate*t, or initial.", type=str, choices=("multiplicative", "additive",
                                                           "constant"),
                  label="stiffness kind")
STIFFNESS_INITIAL = Param("stiffness_initial", 0.1, "lambda_0 > 0 (the paper's 0.1).", gt=0)
STIFFNESS_RATE = Param("stiffness_rate", 1.05, "rate of the schedule (the paper's 1.05; "
                       "ignored by constant).")
#: the parameters every recursion on a basis of raw inputs shares (see
#: :func:`~.basis.basis_from_options`)
BASIS_PARAMS = (
    ORDER,
    Param("domain", None, "Input interval [A, B]; repeat once per column of X for a box "
          "(default: the store's domain attribute).", optional=True, nargs=2, multiple=True,
          parse=domain_from_intervals, metavar="A B", store_attr="domain"),
    Param("basis", "legendre", "Legendre polynomials orthonormal on the domain, or monomials.",
          type=Basis, choices=("legendre", "monomial")),
)
#: the Tikhonov weight μ of the baselines, and the initial covariance scale of RLS
MU = Param("mu", 0.05, "Tikhonov weight mu >= 0 (the paper's 0.05).", ge=0,
           label="Tikhonov weight mu", requirement=">= 0")
P0 = Param("p0", 1.0, "Initial covariance P0 = p0*I, p0 > 0 (the paper's identity).", gt=0,
           label="initial covariance scale p0")

_IRMA = RecursionDeclaration(
    name="irma",
    summary="incremental risk minimisation on a basis of raw inputs x",
    class_path=f"{_PACKAGE}.irma:IRMA",
    description="""IRMA (incremental risk minimisation) on the stream store DATA, one example
    at a time.

    theta += A^-1 phi(x) e / (lambda_t + phi' A^-1 phi), e = y - phi(x)' theta, with A the
    Gramian of the basis on the domain (A = I for Legendre). X holds the raw inputs x
    (one column per input dimension), y one target; the basis expands x per block and
    x outside the domain is refused. Blocks (--block-size) are the steps at which theta
    and cumulative_loss(step) (sum of the squared errors before each update) are
    recorded. Coefficient rows are the basis functions; the attr basis rebuilds the
    basis (streamlsq.kernels.make_basis). Sequential engine only.""",
    examples=(
        "streamlsq simulate irma --out irma.zarr --rows 150",
        "streamlsq fit irma irma.zarr --out fit.zarr --order 10 --domain 0 3",
        "streamlsq fit irma irma.zarr --out fit.zarr --stiffness additive --stiffness-rate 0.1",
        "streamlsq fit irma box.zarr --out fit.zarr --order 3 --domain 0 1 --domain -1 1",
    ),
    params=(*BASIS_PARAMS, STIFFNESS, STIFFNESS_INITIAL, STIFFNESS_RATE),
    intercept_kind="basis",
)

_IRMA_GD = RecursionDeclaration(
    name="irma-gd",
    summary="IRMA study's baseline: normalised GD with Tikhonov",
    class_path=f"{_PACKAGE}.irma:IRMAGradientDescent",
    description="""The IRMA study's GD baseline on DATA: normalised gradient descent,
    Tikhonov mu.

    Per example one gradient step on (y - phi' theta)^2 + mu theta' theta with the
    exactly minimising rate. Store, blocks and results as for streamlsq fit irma (the
    paper runs its baselines on --basis monomial). Sequential engine only.""",
    examples=(
        "streamlsq fit irma-gd irma.zarr --out gd.zarr --order 6 --domain 0 3 --mu 0.05",
        "streamlsq fit irma-gd irma.zarr --out gd.zarr --basis monomial --mu 0",
    ),
    params=(*BASIS_PARAMS, MU),
    intercept_kind="basis",
)

_IRMA_RLS = RecursionDeclaration(
    name="irma-rls",
    summary="IRMA study's baseline: RLS with forgetting and Tikhonov",
    class_path=f"{_PACKAGE}.irma:IRMARLS",
    description="""The IRMA study's RLS baseline on DATA: forgetting factor, Tikhonov mu.

    theta_t minimises sum g^(t-i) (y_i - phi_i' theta)^2 + g^t theta' theta / p0
    + mu theta' theta. Store, blocks and results as for streamlsq fit irma (the paper:
    --basis monomial --forgetting 0.9 --mu 0.05 --p0 1). Sequential engine only.""",
    examples=(
        "streamlsq fit irma-rls irma.zarr --out rls.zarr --order 6 --domain 0 3",
        "streamlsq fit irma-rls irma.zarr --out rls.zarr --forgetting 0.99 --mu 0 --p0 100",
    ),
    params=(
        *BASIS_PARAMS,
        FORGETTING.replace(default=0.9, help="Forgetting factor g in (0, 1] (the paper's 0.9)."),
        MU,
        P0,
    ),
    intercept_kind="basis",
)

#: the declaration of every built-in recursion, by name
DECLARATIONS: dict[str, RecursionDeclaration] = {
    d.name: d for d in (_KF4LLS, _RLS, _INTERLEAVED_KF4LLS, _LMS, _BFGS, _IRMA, _IRMA_GD,
                         _IRMA_RLS)}
