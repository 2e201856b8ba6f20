"""A store larger than the workers' memory is fitted with the same answer, with the
default task sizes, and the workers give the memory back afterwards.

distributed pauses a worker at 80% of its memory limit and restarts it at 95%:
with 600 MB per worker (about 250 MB of which is the imported libraries), a run
that held a large part of the store at once would stall or fail, and so would
one whose workers kept the pages of their reads (as they did before the
allocator settings of streamlsq.runtime.memory: about 180 MB a worker, which left one
paused for ever). The robust covariance of such a store is one more pass of the same
kind. The measured peak for an 8 GB store with 1 GB workers comes
from tests/benchmarks/bench_memory.py.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributed import Client, LocalCluster

from streamlsq import fit_stream, simulate_stream

from conftest import read_all


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def _load_the_fit_path(client, tmp_path):
    """Fit a small store on both engines, so that the workers have imported what a fit
    imports (the kernels, their compiled code, the statistics) before their memory is
    taken as the baseline: what the tests measure is the pages of reads, not libraries."""
    small = simulate_stream(tmp_path / "small.zarr", 2_000, 24, 1, chunk_rows=500, seed=1,
                            client=client)
    for engine in ("sequential", "scan"):
        # with HC1 too: the robust pass imports its compiled kernels (and Numba) on first use
        fit_stream(small, engine=engine, cov_type="HC1", client=client, progress=False)


# first: the cluster and the store of the tests below do not exist yet while it runs
def test_roomy_workers_give_the_pages_back_when_the_run_ends(tmp_path):
    """With room to spare, reads keep their pages from task to task (faster), and the
    workers return them when the call ends (streamlsq.runtime.client.release_worker_pages)."""
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="4GB",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        path = simulate_stream(tmp_path / "s.zarr", 2_000_000, 24, 1, chunk_rows=50_000,
                               seed=4, client=client)
        _load_the_fit_path(client, tmp_path)
        before = client.run(_rss)
        for engine in ("sequential", "scan"):
            fit_stream(path, engine=engine, client=client, progress=False)
        after = client.run(_rss)
        assert max(after[w] - before[w] for w in after) < 50e6, (before, after)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A client of 2 workers of 600 MB and a store of 7,000,000 × 24 (X alone: 1.34 GB of
    float64, more than both workers' memory together) written by them; the rows are read in
    this process (which has no memory limit) for the references, then dropped: ``(client,
    path, reference coefficients, HC1 standard errors by the textbook formula)``."""
    tmp_path = tmp_path_factory.mktemp("big")
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="600MB",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        path = simulate_stream(tmp_path / "big.zarr", 7_000_000, 24, 1, chunk_rows=50_000,
                               seed=9, client=client)
        X, y = read_all(path)
        assert X.nbytes > 2 * 600e6
        reference = np.linalg.lstsq(X, y, rcond=None)[0]
        hc1 = _hc1_in_memory(X, y, reference[:, 0])
        del X, y
        yield client, path, reference, hc1


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
    cov = np.linalg.solve(gram, np.linalg.solve(gram, meat).T)  # G⁻¹ M G⁻¹, both symmetric
    return np.sqrt(np.diag(cov) * n / (n - k))


@pytest.mark.slow
def test_store_larger_than_worker_memory(big_store, tmp_path):
    """Both engines fit it with its HC1 standard errors: the robust pass reads such a store
    piece by piece too (pieces bounded by the workers' memory, as the scan engine's; only k×k
    sums travel); no worker restarts, and the pages of the reads go back to the system."""
    client, path, reference, expected = big_store
    _load_the_fit_path(client, tmp_path)
    before = client.run(_rss)
    for engine in ("sequential", "scan"):
        ds = fit_stream(path, engine=engine, cov_type="HC1", client=client, progress=False)
        coef = ds.coef.isel(step=-1).values
        assert np.abs(coef - reference).max() / np.abs(reference).max() < 1e-10
        np.testing.assert_allclose(ds.bse.values[:, 0], expected, rtol=1e-9)
        assert ds.attrs["cov_type"] == "HC1" and int(ds.nobs.values[0]) == 7_000_000
    after = client.run(_rss)
    # no worker was restarted for going over its limit
    assert len(client.scheduler_info()["workers"]) == 2
    assert after.keys() == before.keys()
    # the pages of the reads (1.4 GB a pass) went back to the system (was +180 MB per worker)
    assert max(after[w] - before[w] for w in after) < 50e6, (before, after)
