"""``streamlsq simulate mlr``: a synthetic multi-task store of the mixed-linear-regression model.

The numbers come from :mod:`streamlsq.kernels.synthetic.mlr`: the mixture
(W, s, p) from ``seed``, and task i of a task set from the seed words
``[task_seed, tag]`` with tag 1 for the light tasks D_L1, 2 for the heavy tasks
D_H and 3 for the second light set D_L2 — a function of (seed, task index)
only. The three sets are stored one after the other (roles in contiguous runs,
``role`` = 0, 1, 2). Storage chunks of ``X`` and ``y`` are written in parallel,
one Dask task per chunk: a chunk regenerates the (at most two) tasks it shares
with its neighbours and keeps its own rows, so no two tasks write one Zarr
chunk and the store can be far larger than memory. The client holds only
``task_ptr`` and the per-task codes (9–11 bytes per task).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import zarr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.codecs import compressors
from streamlsq.io.tasks import ROLE_ATTRS, ROLE_CODES
from streamlsq.jobs import Run
from streamlsq.options.common import DEFAULT_CODEC
from streamlsq.options.simulate import MLR
from streamlsq.simulate.common import SyntheticStore, checked_options, chunk_ranges

__all__ = ["simulate_mlr", "SET_TAGS"]

#: seed tag of each task set (role) in ``[task_seed, tag]``
SET_TAGS = {"light": 1, "heavy": 2, "light2": 3}
#: entries per chunk of the per-task arrays
TASK_CHUNK = 1 << 20


def default_task_chunk_rows(d: int) -> int:
    """Rows per storage chunk: ≤ 65,536 and ≤ 16 MB of X, so a chunk of work of 10⁴ light
    tasks reads about one storage chunk."""
    return int(max(4096, min(65536, (1 << 21) // max(d, 1))))


def _layout(sets):
    """[(role, first row, first task, n, t)] for the non-empty sets, in store order."""
    out, row, task = [], 0, 0
    for role, n, t in sets:
        if n:
            out.append((role, row, task, n, t))
        row += n * t
        task += n
    return out, row, task


def _write_rows(path, a, b, layout, task_seed, W, s, p, features="gaussian"):
    """Dask task: generate and write rows a:b; return the components of tasks starting here."""
    from streamlsq.kernels.synthetic.mlr import simulate_tasks

    d = W.shape[1]
    X = np.empty((b - a, d))
    y = np.empty(b - a)
    comps = []
    for role, off, task0, n, t in layout:
        lo, hi = max(a, off), min(b, off + n * t)
        if lo >= hi:
            continue
        fa, fb = (lo - off) // t, -(-(hi - off) // t)
        Xs, ys, _, comp = simulate_tasks([task_seed, SET_TAGS[role]], fa, fb - fa, t, W, s, p,
                                         features)
        skip = lo - off - fa * t
        X[lo - a : hi - a] = Xs[skip : skip + hi - lo]
        y[lo - a : hi - a] = ys[skip : skip + hi - lo]
        first_start = -(-(lo - off) // t)  # tasks whose first row is in [lo, hi)
        comps.append((task0 + first_start, comp[first_start - fa : fb - fa]))
    g = zarr.open_group(path, mode="r+")
    g["X"][a:b] = X
    g["y"][a:b] = y
    return b - a, comps


def simulate_mlr(
    out: str | os.PathLike,
    *,
    k: int = 4,
    d: int = 8,
    weights=None,
    noise=1.0,
    separation: float | None = None,
    kind: str = "orthonormal",
    features: str = "gaussian",
    n_light: int = 10_000,
    t_light: int = 4,
    n_heavy: int = 200,
    t_heavy: int = 100,
    n_light2: int = 10_000,
    t_light2: int = 8,
    seed: int = 0,
    task_seed: int | None = None,
    chunk_rows: int | None = None,
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    codec: str | None = DEFAULT_CODEC,
) -> Path:
    """Write a synthetic multi-task store of the paper's model; return its path.

    k components in d dimensions, wₕ ``kind`` "orthonormal" or "gaussian"
    (N(0, I/d)), optionally rescaled to the minimum distance ``separation``;
    noise standard deviations ``noise`` (one number or k), weights p
    (default uniform). ``features``: x ~ N(0, I) ("gaussian"), or monomials
    ("polynomial") or Chebyshev polynomials ("chebyshev") of u ~ U(−1, 1), the
    non-isotropic settings (``kernels.synthetic.mlr``).
    Task sets: ``n_light`` tasks of ``t_light`` rows (D_L1),
    ``n_heavy`` of ``t_heavy`` (D_H), ``n_light2`` of ``t_light2`` (D_L2).
    ``task_seed`` (default ``seed``) draws the tasks: the same ``seed`` with
    another ``task_seed`` gives new tasks from the same mixture (a test set).
    Also stores the truth: ``component``, ``w_true``, ``s_true``, ``p_true``. Every array
    (the rows, ``task_ptr``, ``role`` and the truth) is compressed with ``codec``
    (:data:`streamlsq.io.codecs.CODECS`).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_mlr(f"{tmp.name}/tasks.zarr", k=3, d=5, n_light=1_000,
    ...                               t_light=4, n_heavy=60, t_heavy=50, n_light2=100, t_light2=8)
    >>> ds = streamlsq.open_dataset(path)
    >>> ds.task_ptr.size - 1, ds.w_true.shape
    (1160, (3, 5))
    >>> tmp.cleanup()
    """
    from streamlsq.kernels.synthetic.mlr import mlr_components

    given = checked_options(MLR, locals())
    task_seed = seed if task_seed is None else task_seed
    sets = [(role, given[f"n_{role}"], given[f"t_{role}"]) for role in SET_TAGS]
    if given["kind"] == "orthonormal" and given["k"] > given["d"]:  # the kernel's words are
        raise InputError(                                          # Python's, no remedy
            f"simulate mlr: --kind orthonormal (kind='orthonormal') has at most d components: "
            f"--k {given['k']} (k={given['k']}) > --d {given['d']} (d={given['d']}); give "
            "--d >= --k, or --kind gaussian")
    try:
        W, s, p = mlr_components(seed, d, k, kind, separation, noise, weights)
    except ValueError as exc:
        raise InputError(f"simulate mlr: {exc}") from None
    layout, n_rows, n_tasks = _layout([(r, int(n), int(t)) for r, n, t in sets])
    if n_tasks == 0:
        raise InputError("simulate mlr: every task set is empty")
    chunk_rows = given["chunk_rows"] or default_task_chunk_rows(d)

    def lay_out(g: zarr.Group) -> None:
        g.attrs.update({
            "generator": "streamlsq.simulate_mlr",
            "parameters": {
                "k": k, "d": d, "kind": kind, "features": features, "separation": separation,
                "noise": np.broadcast_to(np.asarray(noise, float), (k,)).tolist(),
                "weights": p.tolist(), "n_light": n_light, "t_light": t_light,
                "n_heavy": n_heavy, "t_heavy": t_heavy, "n_light2": n_light2,
                "t_light2": t_light2, "task_seed": task_seed,
            },
            "seed": seed,
        })
        g.create_array("X", shape=(n_rows, d), chunks=(chunk_rows, d), dtype="float64",
                       dimension_names=["row", "feature"], fill_value=np.nan,
                       compressors=compressors(codec))
        g.create_array("y", shape=(n_rows,), chunks=(chunk_rows,), dtype="float64",
                       dimension_names=["row"], fill_value=np.nan,
                       compressors=compressors(codec))
        _put_task_layout(g, layout, n_tasks, codec)
        _put(g, "w_true", W, ["component", "feature"], codec)
        _put(g, "s_true", s, ["component"], codec)
        _put(g, "p_true", p, ["component"], codec)

    def finish(g: zarr.Group, results) -> None:
        _put(g, "component", _task_components(results, n_tasks), ["task"], codec)

    job = SyntheticStore(
        lay_out, _write_rows,
        [(a, b, layout, task_seed, W, s, p, features)
         for a, b in chunk_ranges(n_rows, chunk_rows)],
        rows=n_rows, nbytes=n_rows * (d + 1) * 8, name="mlr", finish=finish,
        desc="simulate mlr")
    return Run(out, overwrite, client=client, scheduler=scheduler,
               progress=progress).execute(job)


def _put_task_layout(g: zarr.Group, layout, n_tasks: int, codec: str | None) -> None:
    """``task_ptr`` and ``role`` of the store: the task sets of ``layout`` one after the
    other."""
    ptr = np.zeros(n_tasks + 1, dtype=np.int64)
    role = np.zeros(n_tasks, dtype=np.int8)
    for r, off, task0, n, t in layout:
        ptr[task0 + 1 : task0 + n + 1] = off + t * np.arange(1, n + 1, dtype=np.int64)
        role[task0 : task0 + n] = ROLE_CODES[r]
    _put(g, "task_ptr", ptr, ["task_edge"], codec)
    _put(g, "role", role, ["task"], codec).attrs.update(ROLE_ATTRS)


def _task_components(results, n_tasks: int) -> np.ndarray:
    """The true component of every task, gathered from the chunk writers' ``results``: each
    chunk returns those of the tasks whose first row it holds."""
    component = np.full(n_tasks, -1, dtype=np.int16)
    for _, comps in results:
        for first, comp in comps:
            component[first : first + comp.size] = comp
    return component


def _put(g: zarr.Group, name: str, values: np.ndarray, dims: list[str],
         codec: str | None) -> zarr.Array:
    chunks = (min(TASK_CHUNK, max(1, values.shape[0])),) if values.ndim == 1 else values.shape
    # every chunk written, even one equal to the fill value (all light tasks: role code 0),
    # or the store would read as incomplete
    a = g.create_array(name, shape=values.shape, chunks=chunks, dtype=values.dtype,
                       dimension_names=dims, compressors=compressors(codec, values.itemsize),
                       config={"write_empty_chunks": True})
    a[...] = values
    return a
