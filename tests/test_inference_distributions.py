"""The distribution functions of the statistics (scipy.special) equal scipy.stats' own, to
1e-14 relative, over a grid with extreme tails, small and huge degrees of freedom and the
edge cases (NaN, ±inf, the ends of the support, degrees of freedom that are not positive)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from streamlsq.kernels.inference import _distributions as dist

#: arguments of the survival functions: the centre, far tails, the ends of the support
X = np.array([-np.inf, -1e300, -1e8, -40.0, -8.5, -3.0, -1.0, -1e-300, 0.0, 5e-324, 1e-12,
              1e-3, 0.5, 1.0, 1.96, 3.0, 8.5, 40.0, 1e3, 1e8, 1e300, np.inf, np.nan])
#: probabilities of the quantile functions: 0, 1, outside [0, 1], the tails
Q = np.array([-0.5, 0.0, 5e-324, 1e-300, 1e-100, 1e-16, 1e-8, 0.025, 0.3, 0.5, 0.7, 0.975,
              1 - 1e-8, 1 - 1e-16, 1.0, 1.5, np.nan])
#: degrees of freedom: tiny, small, fractional, huge, infinite and invalid ones
DF = np.array([1e-3, 0.5, 1.0, 2.0, 3.0, 4.5, 10.0, 30.0, 1e3, 1e6, 1e12, np.inf, 0.0,
               -1.0, np.nan])


def _same(ours, theirs):
    assert np.shape(ours) == np.shape(theirs)
    assert type(ours) is type(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=0, equal_nan=True)


def test_student_t_sf():
    x, df = np.meshgrid(X, DF)
    _same(dist.student_t_sf(x, df), stats.t.sf(x, df))


def test_student_t_ppf():
    q, df = np.meshgrid(Q, DF)
    _same(dist.student_t_ppf(q, df), stats.t.ppf(q, df))


def test_normal_sf_and_ppf():
    _same(dist.normal_sf(X), stats.norm.sf(X))
    _same(dist.normal_ppf(Q), stats.norm.ppf(Q))


def test_fisher_f_sf():
    x, dfn, dfd = np.meshgrid(X, DF, DF)
    _same(dist.fisher_f_sf(x, dfn, dfd), stats.f.sf(x, dfn, dfd))


@pytest.mark.parametrize(("ours", "theirs", "args"), [
    (dist.student_t_sf, stats.t.sf, (2.5, 7)),
    (dist.student_t_sf, stats.t.sf, (np.float32(2.5), 0)),
    (dist.student_t_ppf, stats.t.ppf, (0.975, 12.0)),
    (dist.normal_sf, stats.norm.sf, (-1.5,)),
    (dist.normal_ppf, stats.norm.ppf, (0.975,)),
    (dist.fisher_f_sf, stats.f.sf, (3.2, 2, 40)),
    (dist.fisher_f_sf, stats.f.sf, (np.nan, 0.0, 40)),
    (dist.student_t_sf, stats.t.sf, ([[1.0], [2.0]], [3.0, 4.0, 5.0])),  # broadcast
])
def test_scalars_and_broadcasting_as_scipy_stats(ours, theirs, args):
    _same(ours(*args), theirs(*args))
