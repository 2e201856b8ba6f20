"""Generalised linear models by exact IRLS over chunks of rows (pure NumPy/SciPy).

- :mod:`.links`: link functions as data (statsmodels' ``links``)
- :mod:`.families`: families as data: variance, deviance, log-likelihood, starting means
- :mod:`.irls`: one chunk's part of an IRLS iteration, how parts combine, the step, the
  statistics and predictions with delta-method intervals

The algorithm, the families and how it compares with ``bigglm``, Spark and statsmodels are
in ``docs/glm.md``.
"""

from streamlsq.kernels.glm.families import FAMILIES, FAMILY_NAMES, Family, family
from streamlsq.kernels.glm.irls import (
    GLMSpec,
    RowError,
    combine_robust,
    combine_sums,
    counts_response,
    final_sums,
    glm_statistics,
    irls_sums,
    mean_sums,
    predict_link,
    pseudo_rsquared_cs,
    pseudo_rsquared_mcf,
    robust_cov,
    robust_sums,
    run_irls,
    solve_step,
)
from streamlsq.kernels.glm.links import LINKS, Link

__all__ = ["FAMILIES", "FAMILY_NAMES", "Family", "GLMSpec", "LINKS", "Link", "RowError",
           "combine_sums", "counts_response", "family", "final_sums", "glm_statistics", "irls_sums",
           "mean_sums", "predict_link", "pseudo_rsquared_cs", "pseudo_rsquared_mcf",
           "robust_cov", "robust_sums",
           "run_irls",
           "solve_step", "combine_robust"]
