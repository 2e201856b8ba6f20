"""Dask tasks sized from the data and the workers: the scan engine's tasks summarise several
pieces, meta-learning's tasks take several chunks of work, and neither changes a bit of a
result, whatever the task size and the number of workers. What a terabyte makes is counted
with the engines' own sizing (docs/performance.md#scaling)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import dask
import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster, get_task_stream

from streamlsq import (
    fit_em,
    fit_pooled,
    fit_stream,
    metalearn,
    predict,
    simulate_mlr,
    simulate_stream,
)
from streamlsq.io.tasks import CHUNK_TASKS
from streamlsq.kernels.mlr import combine_stats
from streamlsq.kernels.recursions.contract import BlockGrid
from streamlsq.runtime.reduce import (
    SPLIT_EVERY,
    TreeFold,
    task_bytes,
    tree_levels,
    tree_reduce,
    tree_units_per_task,
    units_per_task,
)
from streamlsq.stream.engines import PIECE_BYTES, scan_tasks, solve_groups
from streamlsq.stream.fit import DEFAULT_RECORDED_STEPS
from streamlsq.stream.plans import Section, StreamPlan, plan_fit, plan_segments

from faultkit import invoke, refusal, snapshot


@dataclass(frozen=True)
class LayoutOnly:
    """The layout of a stream store that need not exist (what a plan reads of a source)."""

    n_rows: int
    n_features: int
    n_targets: int
    chunk_rows: int
    block_size: int = 0
    label: str = "layout"


def _count(stream, prefix: str) -> int:
    return len({t["key"] for t in stream.data if str(t["key"]).startswith(prefix)})


# -- the plan's bookkeeping, without a cluster ---------------------------------------------


def test_a_span_within_a_span_is_the_plans_span():
    """What a Dask task of several pieces hands each piece is what the plan gives it."""
    src = LayoutOnly(10_000, 3, 1, 700, block_size=300)
    plan = plan_fit([src], None, block_size=300, first_block_size=450, epochs=3, shuffle=True,
                    seed=2)
    rng = np.random.default_rng(0)
    for _ in range(50):
        K0, K1 = sorted(rng.choice(plan.n_blocks + 1, 2, replace=False))
        span = plan.span(K0, K1)
        a, b = sorted(rng.choice(np.arange(K0, K1 + 1), 2, replace=False))
        assert span.within(a, b) == plan.span(a, b)
    with pytest.raises(ValueError, match="not within"):
        plan.span(5, 9).within(4, 9)


def test_scan_tasks_are_runs_of_consecutive_pieces():
    assert scan_tasks(range(7), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert scan_tasks([0, 1, 3, 4, 5, 9], 2) == [[0, 1], [3, 4], [5], [9]]
    assert scan_tasks([], 4) == []


def test_task_bytes_keep_every_worker_busy_and_tasks_not_tiny():
    for workers in (1, 2, 10, 100, 1000):
        size = task_bytes(10**12, workers)
        assert 64 * 2**20 <= size <= 2 * 2**30
        assert 10**12 / size >= min(16 * workers, 10**12 / (2 * 2**30)) - 1
    assert task_bytes(10**12, 100, configured=12345) == 12345
    assert units_per_task(10, 3.0, 7) == 2 and units_per_task(10, 3.0, 1) == 1
    assert units_per_task(10, 3.0, 10**9) == 10
    # a subtree of the reduction: a power of the fan-in, no deeper than the whole tree
    assert tree_units_per_task(1_000, 1.0, 60) == 64
    assert tree_units_per_task(1_000, 1.0, 20) == 8  # 20 is nearer 8 than 64 (geometrically)
    assert tree_units_per_task(9, 1.0, 10**6) == 64 and tree_units_per_task(8, 1.0, 10**6) == 8
    assert tree_units_per_task(1_000, 10.0, 5) == 1
    assert [tree_levels(n) for n in (1, 8, 64)] == [0, 1, 2]
    with pytest.raises(ValueError):
        tree_levels(5)


def _terabyte_scan(workers: int):
    """Dask tasks of a scan fit of 1 TB of X (6.25e9 rows x 20 float64, chunks of 160,000
    rows), as the engine cuts it on ``workers`` worker threads."""
    n_rows = 10**12 // (8 * 20)
    src = LayoutOnly(n_rows, 20, 1, 160_000)
    plan = StreamPlan((src,), [Section(0, 0, n_rows, BlockGrid(n_rows, 160_000))])
    pieces = plan_segments(plan, PIECE_BYTES)
    per = units_per_task(len(pieces), plan.nbytes / len(pieces),
                         task_bytes(plan.nbytes, workers))
    summarise = len(scan_tasks(range(len(pieces)), per))
    solves = solve_groups(DEFAULT_RECORDED_STEPS + 1, workers)
    return summarise, solves


def _terabyte_metalearn(workers: int):
    """Dask tasks of one pass of meta-learning over 1 TB of light tasks (4 rows x 8
    features and a target), chunks of work of 10,000 tasks."""
    unit = CHUNK_TASKS * 4 * 9 * 8
    units = -(-10**12 // unit)
    per = tree_units_per_task(units, unit, task_bytes(10**12, workers))
    level = -(-units // per)
    tasks = level
    while True:  # tree_reduce: one level of combines at least
        level = -(-level // SPLIT_EVERY)
        tasks += level
        if level == 1:
            break
    return -(-units // per), tasks


@pytest.mark.parametrize("workers", [2, 10, 100])
def test_a_terabyte_makes_at_most_4000_tasks_and_a_few_per_worker(workers):
    summarise, solves = _terabyte_scan(workers)
    assert summarise + solves <= 4_000
    assert summarise >= 4 * workers
    tasks, total = _terabyte_metalearn(workers)
    assert total <= 4_000
    assert tasks >= 4 * workers


# -- the fixed tree, folded in tasks ---------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 8, 9, 64, 77])
def test_a_tree_folded_in_tasks_is_the_same_bits_as_one_task_per_leaf(client, n):
    """TreeFold over subtrees of 8**levels leaves, then tree_reduce over the subtrees, gives
    the bits of tree_reduce over the leaves; another grouping of the same sums does not."""
    rng = np.random.default_rng(n)
    leaves = [{"s": rng.standard_normal(6) * 10.0 ** rng.integers(-8, 8, 6)} for _ in range(n)]
    expected = tree_reduce(client, client.scatter(leaves, hash=False), combine_stats).result()
    for levels in (0, 1, 2, 3):
        per = SPLIT_EVERY ** levels
        nodes = []
        for i in range(0, n, per):
            fold = TreeFold(combine_stats, levels)
            for leaf in leaves[i : i + per]:
                fold.add(leaf)
            nodes.append(fold.result())
        got = tree_reduce(client, client.scatter(nodes, hash=False), combine_stats).result()
        assert got["s"].tobytes() == expected["s"].tobytes(), levels
    if n >= 64:  # the check can fail: a left-to-right sum is other bits
        chain = combine_stats(*leaves)
        assert chain["s"].tobytes() != expected["s"].tobytes()


# -- results of real fits: every task size, every worker count --------------------------------


@pytest.fixture(scope="module")
def small_chunks(tmp_path_factory, client):
    """60,000 x 8 rows in 30 chunks of 2,000 rows."""
    path = tmp_path_factory.mktemp("sizes") / "s.zarr"
    return simulate_stream(path, 60_000, 8, 2, chunk_rows=2_000, seed=21, client=client)


#: one piece a chunk: 2,000 rows of 8 features
PIECE = 2_000 * 8 * 8
#: the plan's bytes per piece (X and y)
PIECE_XY = 2_000 * (8 + 2) * 8


@pytest.mark.parametrize("method, params", [("kf4lls", {}),
                                            ("rls", {"forgetting": 0.999, "ridge": 1.0}),
                                            ("kf4lls", {"solver": "normal"})])
def test_scan_is_the_same_bits_for_every_task_size_and_worker_count(small_chunks, client,
                                                                    tmp_path, method, params):
    kw = dict(engine="scan", block_size=700, record_every=3, segment_bytes=PIECE,
              progress=False, **params)
    with get_task_stream(client) as stream:
        reference = fit_stream(small_chunks, method, client=client, **kw)
    assert _count(stream, "summarize-") == 30  # an explicit size: one piece a Dask task
    runs = []
    for pieces in (4, 7, 30):
        with dask.config.set({"streamlsq.task-bytes": pieces * PIECE_XY}), \
                get_task_stream(client) as stream:
            runs.append(fit_stream(small_chunks, method, client=client, **kw))
        assert _count(stream, "summarize-") == -(-30 // pieces)
    with dask.config.set({"streamlsq.task-bytes": 4 * PIECE_XY}):  # committed piece by piece
        runs.append(fit_stream(small_chunks, method, client=client, out=tmp_path / "r.zarr",
                               checkpoint=tmp_path / "ckpt", **kw))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as one, dask.config.set({"streamlsq.task-bytes": 9 * PIECE_XY}):
        runs.append(fit_stream(small_chunks, method, client=one, **kw))
    for run in runs:
        assert run.coef.values.tobytes() == reference.coef.values.tobytes()
        np.testing.assert_array_equal(run.step, reference.step)
        for name in reference.data_vars:
            if name.startswith("state_"):
                np.testing.assert_array_equal(run[name].values, reference[name].values)


def test_scan_by_default_sizes_its_tasks_from_the_data_and_the_workers(small_chunks, client,
                                                                      monkeypatch):
    """Without --segment-size: pieces of PIECE_BYTES, TASKS_PER_WORKER tasks per worker
    thread (here scaled down to the store: pieces of a chunk, 4 tasks a worker, no least
    size), and the numbers of one piece a task."""
    from streamlsq.runtime import reduce
    from streamlsq.stream import engines

    kw = dict(engine="scan", block_size=700, record_every=3, progress=False)
    reference = fit_stream(small_chunks, client=client, segment_bytes=PIECE, **kw)
    monkeypatch.setattr(engines, "PIECE_BYTES", PIECE)
    monkeypatch.setattr(reduce, "TASKS_PER_WORKER", 4)
    monkeypatch.setattr(reduce, "LEAST_TASK_BYTES", 1)
    with get_task_stream(client) as stream:
        two = fit_stream(small_chunks, client=client, **kw)
    assert _count(stream, "summarize-") == 8  # 30 pieces, 4 a task: 4 tasks a worker
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as one, get_task_stream(one) as stream:
        single = fit_stream(small_chunks, client=one, **kw)
    assert _count(stream, "summarize-") == 4  # 8 pieces a task
    for run in (two, single):
        assert run.coef.values.tobytes() == reference.coef.values.tobytes()


@pytest.fixture(scope="module")
def tasks_store(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("sizes-mlr") / "tasks.zarr"
    return simulate_mlr(path, k=3, d=6, n_light=24_000, t_light=4, n_heavy=120, t_heavy=60,
                        n_light2=6_000, t_light2=8, seed=13, chunk_rows=9_000, client=client)


#: bytes of a chunk of work of 1,000 light tasks (4 rows of 6 features and a target)
LIGHT_CHUNK = 1_000 * 4 * 7 * 8
MODEL_VARIABLES = ("basis", "eigenvalues", "coef", "noise_var", "weight", "initial_coef",
                   "initial_weight", "initial_r2", "heavy_cluster", "light_cluster",
                   "whitening")


def test_metalearn_is_the_same_bits_for_every_task_size_and_worker_count(tasks_store, client):
    kw = dict(chunk_tasks=1_000, tile=64, whiten=True, progress=False)
    with dask.config.set({"streamlsq.task-bytes": 1}), get_task_stream(client) as stream:
        reference = metalearn(tasks_store, 3, client=client, **kw)
    assert _count(stream, "subspace-") - _count(stream, "subspace-sum") == 24
    pooled = fit_pooled(tasks_store, client=client, chunk_tasks=1_000, progress=False)
    runs, pools = [], []
    for per in (8, 64):
        with dask.config.set({"streamlsq.task-bytes": per * LIGHT_CHUNK}), \
                get_task_stream(client) as stream:
            runs.append(metalearn(tasks_store, 3, client=client, **kw))
            pools.append(fit_pooled(tasks_store, client=client, chunk_tasks=1_000,
                                    progress=False))
        assert _count(stream, "subspace-") - _count(stream, "subspace-sum") == -(-24 // per)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as one:
        runs.append(metalearn(tasks_store, 3, client=one, **kw))  # sized for one worker
        with dask.config.set({"streamlsq.task-bytes": 8 * LIGHT_CHUNK}):
            runs.append(metalearn(tasks_store, 3, client=one, **kw))
    for run in runs:
        for name in MODEL_VARIABLES:
            assert run[name].values.tobytes() == reference[name].values.tobytes(), name
    for p in pools:
        assert p.coef.values.tobytes() == pooled.coef.values.tobytes()
        assert p.noise_var.values.tobytes() == pooled.noise_var.values.tobytes()


def test_a_bad_task_bytes_setting_is_one_line_naming_it(small_chunks, tmp_path, client):
    before = snapshot(tmp_path)
    with dask.config.set({"streamlsq.task-bytes": "lots"}):
        line = refusal(invoke("fit", "kf4lls", small_chunks, "--engine", "scan", "--out",
                              tmp_path / "o.zarr", scheduler=client.scheduler.address))
    assert ("the dask config streamlsq.task-bytes (DASK_STREAMLSQ__TASK_BYTES) must be a "
            "finite number >= 0, got 'lots'") in line
    assert snapshot(tmp_path) == before
    with dask.config.set({"streamlsq.task-bytes": "1MiB"}):
        from streamlsq.runtime.client import setting

        assert setting("streamlsq.task-bytes") == 2**20


@pytest.mark.parametrize("cache_bytes", [None, 0])  # statistics kept on the workers, or not
def test_em_is_the_same_bits_for_every_task_size(tasks_store, client, cache_bytes):
    """EM's Dask tasks take several chunks of work (one subtree of the reduction each), with
    the statistics cached per task or read again at each iteration: every variable of
    the result is the same bits as with one chunk per task."""
    kw = dict(init="random", iterations=4, tol=0.0, chunk_tasks=1_000, seed=3,
              cache_bytes=cache_bytes, client=client, progress=False)
    with dask.config.set({"streamlsq.task-bytes": 1}), get_task_stream(client) as stream:
        reference = fit_em(tasks_store, 3, **kw)
    assert reference.attrs["statistics_cached"] is (cache_bytes is None)
    # 30,120 tasks in chunks of 1,000, four iterations
    assert _count(stream, "em-iteration-") == 4 * 31
    for per in (8, 64):
        with dask.config.set({"streamlsq.task-bytes": per * LIGHT_CHUNK}), \
                get_task_stream(client) as stream:
            run = fit_em(tasks_store, 3, **kw)
        assert _count(stream, "em-iteration-") == 4 * -(-31 // per)
        for name, var in reference.data_vars.items():
            assert run[name].values.tobytes() == var.values.tobytes(), name


def test_task_prediction_is_the_same_bits_for_every_task_size(tasks_store, client, tmp_path):
    """The multi-task prediction's Dask tasks take several chunks (their outputs in order,
    the held-out sums one subtree of the reduction): in memory and written to a store,
    every variable and the held-out MSE are the same bits as with one chunk per task."""
    model_path = tmp_path / "model.zarr"
    metalearn(tasks_store, 3, out=model_path, client=client, chunk_tasks=1_000, tile=64,
              progress=False)
    kw = dict(holdout=1, chunk_tasks=1_000, client=client, progress=False)
    runs = []
    for i, per in enumerate((None, 8, 64)):
        setting = 1 if per is None else per * LIGHT_CHUNK
        with dask.config.set({"streamlsq.task-bytes": setting}), \
                get_task_stream(client) as stream:
            in_memory = predict(model_path, tasks_store, **kw)
            stored = predict(model_path, tasks_store, out=tmp_path / f"p{i}.zarr", **kw)
        assert _count(stream, "predict-") - _count(stream, "predict-sse") == \
            2 * -(-31 // (per or 1))
        runs.append((in_memory, xr.open_zarr(tmp_path / f"p{i}.zarr")))
    (memory_ref, stored_ref), rest = runs[0], runs[1:]
    for in_memory, stored in rest:
        for ref, run in ((memory_ref, in_memory), (stored_ref, stored)):
            for name, var in ref.data_vars.items():
                assert run[name].values.tobytes() == var.values.tobytes(), name
            assert run.attrs["holdout_mse"] == ref.attrs["holdout_mse"]
