"""The options of the synthetic stores (``streamlsq simulate ...`` and the ``simulate_*``
functions), declared once: :data:`STREAM`, :data:`INTERLEAVED`, :data:`IRMA`, :data:`MLR`.

Each holds what the store is made of; what every simulated store takes besides (where it
goes, the codec, the cluster) is :data:`~streamlsq.options.common.STORE` and the run's
options (:mod:`streamlsq.options.run`). What the generators alone can tell (a domain
whose ends are in order, weights that sum to 1, k orthonormal components in d
dimensions) they refuse, in the same one-line format.
"""

from __future__ import annotations

from streamlsq.options import Options, Param
from streamlsq.options.common import DTYPE, SEED, comma_numbers

__all__ = ["FEATURE_KINDS", "INTERLEAVED", "IRMA", "MLR", "MLR_KINDS", "STREAM"]

#: kinds of features of a multi-task store (``streamlsq.kernels.synthetic.mlr.FEATURES``)
FEATURE_KINDS = ("gaussian", "polynomial", "chebyshev")
#: kinds of components of a multi-task store's mixture
MLR_KINDS = ("orthonormal", "gaussian")

#: rows per storage chunk (default: about 25 MB of X)
CHUNK_ROWS = Param("chunk_rows", None, "Rows per Zarr chunk (default: about 25 MB of X).",
                   type=int, gt=0, optional=True, flag="--chunk-size")
#: rows per recursion step, stored as the store's ``block_size`` attribute
BLOCK_SIZE = Param("block_size", None, "Rows per recursion block, stored as the block_size "
                   "attribute.", type=int, gt=0, optional=True)

#: :func:`streamlsq.simulate_stream`
STREAM = Options(
    Param("n_rows", 200_000, "Rows (samples).", type=int, gt=0, flag="--rows"),
    Param("n_features", 20, "Features (columns of X).", type=int, gt=0, flag="--features"),
    Param("n_targets", 1, "Targets (columns of y).", type=int, gt=0, flag="--targets"),
    Param("noise", 1.0, "Noise standard deviation.", ge=0),
    Param("condition", 10.0, "Condition number of the feature covariance's square root.",
          ge=1),
    CHUNK_ROWS,
    BLOCK_SIZE,
    SEED,
    DTYPE,
)

#: :func:`streamlsq.simulate_interleaved`
INTERLEAVED = Options(
    Param("alpha", 0.25, "Mixing weight: penguins Z = alpha*U + (1-alpha)*V (0 < alpha < 1).",
          gt=0, lt=1),
    Param("n", 100, "Rows per block (paper: n).", type=int, gt=0),
    Param("q", 6, "Features (paper: q).", type=int, gt=0),
    Param("steps", 6, "Blocks per population.", type=int, gt=0),
    SEED,
    Param("chunk_blocks", None, "Whole blocks per Zarr chunk (default: about 25 MB of X).",
          type=int, gt=0, optional=True),
)

#: :func:`streamlsq.simulate_irma`
IRMA = Options(
    Param("n_rows", 150, "Examples (the paper's sequences have 150).", type=int, gt=0,
          flag="--rows"),
    Param("noise", 0.05, "Half-width of the uniform noise on y (the paper's +-0.05).", ge=0),
    Param("domain", (0.0, 3.0), "Interval of the inputs x (the paper's [0, 3]).", nargs=2,
          metavar="A B"),
    CHUNK_ROWS.replace(help="Rows per Zarr chunk (default: about 25 MB)."),
    BLOCK_SIZE.replace(default=1, optional=False, help="Rows per recursion step, stored as "
                       "the block_size attribute."),
    SEED,
    DTYPE,
)

#: :func:`streamlsq.simulate_mlr`
MLR = Options(
    Param("k", 4, "Components.", type=int, gt=0),
    Param("d", 8, "Features.", type=int, gt=0),
    Param("weights", None, "Comma-separated weights p (default uniform).", type=object,
          optional=True, parse=comma_numbers("--weights"), metavar="P1,P2,...",
          requirement="k numbers >= 0 that sum to 1, or None"),
    Param("noise", 1.0, "Noise standard deviation s, one number or K comma-separated.",
          type=object, parse=comma_numbers("--noise", one=True), metavar="S[,S...]",
          requirement="a number > 0 or k of them"),
    Param("separation", None, "Rescale the components to this minimum distance.", gt=0,
          optional=True),
    Param("kind", "orthonormal", "Orthonormal components or N(0, I/d).", type=str,
          choices=MLR_KINDS),
    Param("features", "gaussian", "Rows x ~ N(0, I), or monomials / Chebyshev polynomials of "
          "u ~ U(-1, 1) (non-isotropic).", type=str, choices=FEATURE_KINDS),
    Param("n_light", 10_000, "Tasks in D_L1.", type=int, ge=0),
    Param("t_light", 4, "Rows per D_L1 task.", type=int, gt=0),
    Param("n_heavy", 200, "Tasks in D_H.", type=int, ge=0),
    Param("t_heavy", 100, "Rows per D_H task.", type=int, gt=0),
    Param("n_light2", 10_000, "Tasks in D_L2.", type=int, ge=0),
    Param("t_light2", 8, "Rows per D_L2 task.", type=int, gt=0),
    SEED.replace(help="Seed of the mixture."),
    Param("task_seed", None, "Seed of the tasks (default --seed): another value draws new "
          "tasks from the same mixture, e.g. a test set.", type=int, ge=0, optional=True),
    CHUNK_ROWS.replace(help="Rows per Zarr chunk."),
)
