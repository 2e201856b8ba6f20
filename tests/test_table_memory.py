"""A Parquet input larger than the workers' memory is fitted in bounded memory, with the
answer of the rows' normal equations, on both engines.

The workers have 600 MB each (distributed pauses a worker at 80 % of its limit and restarts
it at 95 %): a fit that held the table, or a large part of it, would stall or fail. The
measured peak of a worker comes from tests/benchmarks/bench_tables.py.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributed import Client, LocalCluster

from streamlsq import fit_stream


def _write_parquet(path, rows: int, features: int, group_rows: int, seed: int):
    """A Parquet file of ``features`` columns x0.. and a target y, written row group by row
    group; returns X'X and X'y of its rows (with the constant column), summed on the way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(features + 1)
    gram = np.zeros((features + 1, features + 1))
    moment = np.zeros(features + 1)
    names = [f"x{j}" for j in range(features)]
    schema = pa.schema([(n, pa.float64()) for n in [*names, "y"]])
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        for a in range(0, rows, group_rows):
            n = min(group_rows, rows - a)
            X = np.column_stack([np.ones(n), rng.standard_normal((n, features))])
            y = X @ beta + rng.standard_normal(n)
            gram += X.T @ X
            moment += X.T @ y
            columns = {name: X[:, j + 1] for j, name in enumerate(names)} | {"y": y}
            writer.write_table(pa.table(columns, schema=schema), row_group_size=group_rows)
    return names, np.linalg.solve(gram, moment)


@pytest.mark.slow
def test_parquet_larger_than_worker_memory(tmp_path):
    rows, features = 3_200_000, 24  # 640 MB of float64: more than a worker's 600 MB
    path = tmp_path / "big.parquet"
    names, reference = _write_parquet(path, rows, features, 100_000, seed=5)
    assert rows * (features + 1) * 8 > 600e6
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="600MB",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        for engine in ("sequential", "scan"):
            ds = fit_stream(str(path), engine=engine, x=names, y="y", fit_intercept=True,
                            client=client, progress=False)
            coef = ds.coef.isel(step=-1).values[:, 0]
            assert np.abs(coef - reference).max() / np.abs(reference).max() < 1e-10
        # no worker was restarted for going over its limit
        assert len(client.scheduler_info()["workers"]) == 2
