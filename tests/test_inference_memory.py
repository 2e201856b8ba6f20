"""A store larger than the workers' memory gets robust standard errors: the robust pass reads
it piece by piece (pieces bounded by the workers' memory, as the scan engine's), and only
k×k sums travel.

The workers have 600 MB each (about 250 MB of which is the imported libraries; distributed
pauses a worker at 80% of its limit and restarts it at 95%); X alone is 0.96 GB.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributed import Client, LocalCluster

from streamlsq import fit_stream, simulate_stream

from conftest import read_all


def _hc1_in_memory(X, y, coef):
    """HC1 by the textbook formula, in this process (no worker limit): (XᵀX)⁻¹ M (XᵀX)⁻¹
    with M = Σ eᵢ² xᵢxᵢᵀ, summed over slices of rows, times n/(n − k)."""
    n, k = X.shape
    gram, meat = np.zeros((k, k)), np.zeros((k, k))
    for a in range(0, n, 500_000):
        Xs = X[a:a + 500_000]
        e = y[a:a + 500_000, 0] - Xs @ coef
        gram += Xs.T @ Xs
        meat += (Xs * (e**2)[:, None]).T @ Xs
    bread = np.linalg.inv(gram)
    return np.sqrt(np.diag(bread @ meat @ bread) * n / (n - k))


@pytest.mark.slow
def test_a_store_larger_than_worker_memory_gets_robust_standard_errors(tmp_path):
    rows, features = 6_000_000, 20  # X alone: 0.96 GB of float64
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="600MB",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        path = simulate_stream(tmp_path / "big.zarr", rows, features, 1, chunk_rows=50_000,
                               seed=12, client=client)
        X, y = read_all(path)  # in this process, which has no memory limit
        assert X.nbytes > 600e6
        coef = np.linalg.lstsq(X, y, rcond=None)[0][:, 0]
        expected = _hc1_in_memory(X, y, coef)
        del X, y
        for engine in ("sequential", "scan"):
            ds = fit_stream(path, engine=engine, cov_type="HC1", client=client, progress=False)
            np.testing.assert_allclose(ds.bse.values[:, 0], expected, rtol=1e-9)
            assert ds.attrs["cov_type"] == "HC1" and int(ds.nobs.values[0]) == rows
        # no worker was restarted for going over its limit
        assert len(client.scheduler_info()["workers"]) == 2
