"""Synthetic stores written in parallel, one Dask task per chunk, larger than memory if asked.

The numbers come from the pure generators in :mod:`streamlsq.kernels.synthetic`
(reproducible by row index, so the data do not depend on the chunking or the
number of workers); this module only lays out the store and maps chunk writers
over the Dask cluster (:func:`~streamlsq.simulate.common.write_chunks`). Each store
is built under a temporary name and renamed into place when every chunk is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import zarr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.codecs import compressors
from streamlsq.jobs import Run
from streamlsq.options.common import DEFAULT_CODEC
from streamlsq.options.simulate import INTERLEAVED, IRMA, STREAM
from streamlsq.simulate.common import SyntheticStore, checked_options, chunk_ranges

__all__ = ["simulate_interleaved", "simulate_irma", "simulate_stream", "default_chunk_rows"]

#: about 25 MB of float64 per chunk of X: big enough to amortise a Dask task, small for memory
TARGET_CHUNK_ELEMENTS = 3_200_000


def default_chunk_rows(n_features: int, n_rows: int) -> int:
    return int(max(1, min(n_rows, TARGET_CHUNK_ELEMENTS // max(n_features, 1))))


def _write_rows(path, rows, args, start, stop) -> int:
    """Dask task: write rows ``start:stop`` from the pure generator ``rows(*args, start, stop)``."""
    X, Y = rows(*args, start, stop)
    g = zarr.open_group(path, mode="r+")
    g["X"][start:stop] = X
    g["y"][start:stop] = Y
    return stop - start


def _create_rows(g: zarr.Group, shape, chunk_rows: int, dtype, codec: str) -> None:
    """The arrays X (sample, feature) and y (sample, target) of a stream store in the group
    ``g``, ``shape`` = (rows, features, targets), not yet written."""
    n_rows, n_features, n_targets = shape
    for var, width, dims in (("X", n_features, ["sample", "feature"]),
                             ("y", n_targets, ["sample", "target"])):
        g.create_array(var, shape=(n_rows, width), chunks=(chunk_rows, width), dtype=dtype,
                       dimension_names=dims, fill_value=np.nan,
                       compressors=compressors(codec, np.dtype(dtype).itemsize))


def _write_stream_store(out, overwrite, shape, chunk_rows, dtype, attrs, rows, args, *,
                        extra=None, name, client, scheduler, progress, codec=None) -> Path:
    """Lay out a stream store (X, y and ``extra`` small arrays) and fill it chunk-parallel,
    a job of the run path.

    ``rows(*args, start, stop) -> (X, Y)`` is a pure generator from the kernels whose
    numbers depend on the row index only; one Dask task generates and writes one chunk.
    """
    n_rows, n_features, n_targets = shape

    def lay_out(g: zarr.Group) -> None:
        g.attrs.update(attrs)
        _create_rows(g, shape, chunk_rows, dtype, codec)
        for var, (values, dims) in (extra or {}).items():
            g.create_array(var, shape=values.shape, dtype=values.dtype, dimension_names=dims,
                           compressors=compressors(codec, values.dtype.itemsize))[...] = values

    job = SyntheticStore(
        lay_out, _write_rows,
        [(rows, args, a, b) for a, b in chunk_ranges(n_rows, chunk_rows)], rows=n_rows,
        nbytes=n_rows * (n_features + n_targets) * np.dtype(dtype).itemsize, name=name)
    return Run(out, overwrite, client=client, scheduler=scheduler,
               progress=progress).execute(job)


def simulate_stream(
    out: str | os.PathLike,
    n_rows: int = 200_000,
    n_features: int = 20,
    n_targets: int = 1,
    *,
    noise: float = 1.0,
    condition: float = 10.0,
    chunk_rows: int | None = None,
    block_size: int | None = None,
    seed: int = 0,
    dtype: str = "float64",
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    codec: str | None = DEFAULT_CODEC,
) -> Path:
    """Write a synthetic stream store (``docs/stores.md#stream-store``) and return its path.

    X has ``n_rows`` rows of ``n_features`` correlated Gaussian features with
    condition number about ``condition``; y = X·coef_true + noise·N(0, 1) with
    ``n_targets`` columns. Chunks of ``chunk_rows`` rows (default ≈ 25 MB of X)
    are generated and written in parallel on the Dask cluster, compressed with ``codec``
    (:data:`streamlsq.io.codecs.CODECS`; default Blosc-LZ4 with shuffle).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=10_000, n_features=5,
    ...                                  n_targets=2, seed=3)
    >>> ds = streamlsq.open_dataset(path)
    >>> ds.X.shape, ds.y.shape, ds.coef_true.shape
    ((10000, 5), (10000, 2), (5, 2))
    >>> tmp.cleanup()
    """
    from streamlsq.kernels.synthetic.streams import stream_design

    given = checked_options(STREAM, locals())
    n_rows, n_features, n_targets, seed = (given[name] for name in
                                           ("n_rows", "n_features", "n_targets", "seed"))
    try:
        design = stream_design(seed, n_features, n_targets, condition, noise)
    except ValueError as exc:
        raise InputError(f"simulate: {exc}") from None
    chunk_rows = given["chunk_rows"] or default_chunk_rows(n_features, n_rows)
    from streamlsq.kernels.synthetic.streams import stream_rows

    attrs = {
        "generator": "streamlsq.simulate_stream",
        "parameters": {"n_rows": n_rows, "n_features": n_features, "n_targets": n_targets,
                       "noise": noise, "condition": condition, "dtype": str(np.dtype(dtype))},
        "seed": seed,
        "block_size": int(block_size or chunk_rows),
    }
    return _write_stream_store(
        out, overwrite, (n_rows, n_features, n_targets), chunk_rows, dtype, attrs,
        _stream_rows, (stream_rows, seed, design, dtype),
        extra={"coef_true": (np.asarray(design["coef"], np.float64), ["feature", "target"])},
        name="stream", client=client, scheduler=scheduler, progress=progress, codec=codec,
    )


def _stream_rows(stream_rows, seed, design, dtype, start, stop):
    return stream_rows(seed, design, start, stop, dtype=dtype)


def _write_interleaved_chunk(path, seed, params, j0, j1) -> int:
    """Dask task: write blocks ``j0:j1`` of the three populations."""
    from streamlsq.kernels.synthetic.interleaved import figure1_population_blocks

    blocks = figure1_population_blocks(seed, params, j0, j1)
    g = zarr.open_group(path, mode="r+")
    r0, r1 = j0 * params.n, j1 * params.n
    for pop, (X, y) in blocks.items():
        g[f"{pop}/X"][r0:r1] = X
        g[f"{pop}/y"][r0:r1] = y
    return 3 * (r1 - r0)


#: the three populations of the interleaved study: group name, role, truth
INTERLEAVED_GROUPS = (("a", "birds (population A)", "r_b"), ("b", "fish (population B)", "r_f"),
                      ("c", "penguins (test population C)", "r_p"))


def simulate_interleaved(
    out: str | os.PathLike,
    *,
    alpha: float = 0.25,
    n: int = 100,
    q: int = 6,
    steps: int = 6,
    seed: int = 0,
    chunk_blocks: int | None = None,
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    codec: str | None = DEFAULT_CODEC,
) -> Path:
    """Write the three populations of the interleaved KF4LLS study (``docs/studies.md``).

    One store with groups ``a`` (birds: X = U ~ N(μ₁1, I), y = U r_b + ε), ``b``
    (fish: V ~ N(μ₂1, I), y = V r_f + ε) and ``c`` (penguins: Z = αU + (1−α)V on the
    same rows, y = Z r_p + ε), each with ``steps`` blocks of ``n`` rows, ``q``
    features, one target and ``coef_true`` = r_b, r_f, r_p; r_b, r_f ~ U(−5, 5)^q and
    μ₁, μ₂ ~ U(−10, 10) are drawn once from ``seed`` (the Figure 1 generating process,
    one Monte-Carlo iteration). Chunks hold ``chunk_blocks`` whole blocks (default
    ≈ 25 MB of X) and are generated and written in parallel; the numbers depend on
    the seed and the block index only.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_interleaved(f"{tmp.name}/pop.zarr", n=50, q=3, steps=4)
    >>> [streamlsq.open_stream(path, group).n_rows for group in "abc"]
    [200, 200, 200]
    >>> tmp.cleanup()
    """
    from streamlsq.kernels.synthetic.interleaved import figure1_store_parameters

    given = checked_options(INTERLEAVED, locals())
    n, q, steps, seed = (given[name] for name in ("n", "q", "steps", "seed"))
    try:
        params = figure1_store_parameters(seed, alpha, n, q, steps)
    except (TypeError, ValueError) as exc:
        raise InputError(f"simulate interleaved: {exc}") from None
    if chunk_blocks is None:
        chunk_blocks = max(1, default_chunk_rows(q, n * steps) // n)
    chunk_blocks = min(int(chunk_blocks), steps)
    n_rows = n * steps
    settings = {"alpha": params.alpha, "n": n, "q": q, "steps": steps,
                "mu1": params.mu1, "mu2": params.mu2}
    truth = {"r_b": params.r_b, "r_f": params.r_f, "r_p": params.r_p}

    def lay_out(root: zarr.Group) -> None:
        root.attrs.update({"generator": "streamlsq.simulate_interleaved",
                           "parameters": settings, "seed": seed})
        for name, role, coef in INTERLEAVED_GROUPS:
            g = root.create_group(name)
            g.attrs.update({"generator": "streamlsq.simulate_interleaved", "population": role,
                            "parameters": settings, "seed": seed, "block_size": n})
            _create_rows(g, (n_rows, q, 1), chunk_blocks * n, "float64", codec)
            c = g.create_array("coef_true", shape=(q, 1), dtype="float64",
                               dimension_names=["feature", "target"],
                               compressors=compressors(codec))
            c[...] = truth[coef][:, None]

    job = SyntheticStore(
        lay_out, _write_interleaved_chunk,
        [(seed, params, j0, j1) for j0, j1 in chunk_ranges(steps, chunk_blocks)],
        rows=3 * n_rows, nbytes=3 * n_rows * (q + 1) * 8, name="interleaved")
    return Run(out, overwrite, client=client, scheduler=scheduler,
               progress=progress).execute(job)


def _irma_rows(irma_rows, seed, domain, noise, dtype, start, stop):
    return irma_rows(seed, start, stop, domain, noise, dtype=dtype)


def simulate_irma(
    out: str | os.PathLike,
    n_rows: int = 150,
    *,
    noise: float = 0.05,
    domain=(0.0, 3.0),
    chunk_rows: int | None = None,
    block_size: int = 1,
    seed: int = 0,
    dtype: str = "float64",
    overwrite: bool = False,
    client: Client | None = None,
    scheduler: str | None = None,
    progress: bool | None = None,
    codec: str | None = DEFAULT_CODEC,
) -> Path:
    """Write the IRMA study's data (``docs/studies.md#irma``) as a stream store; return its path.

    X (sample, feature) holds the raw inputs x ~ U[a, b) on ``domain`` (one column),
    y (sample, target) = x·exp(−x²) + u with u ~ U[−noise, noise) (the paper: [0, 3],
    ±0.05), from :func:`streamlsq.kernels.synthetic.streams.irma_rows` (reproducible by row
    index). The attrs hold ``domain`` (the default domain of ``fit irma``) and
    ``block_size`` (default 1: one example per step, as the paper records it).
    Chunks of ``chunk_rows`` rows (default ≈ 25 MB) are written in parallel.

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_irma(f"{tmp.name}/irma.zarr", 150, seed=3)
    >>> source = streamlsq.open_stream(path)
    >>> source.n_rows, source.n_features, source.attrs["domain"]
    (150, 1, [0.0, 3.0])
    >>> tmp.cleanup()
    """
    from streamlsq.kernels.synthetic.streams import irma_rows

    given = checked_options(IRMA, locals())
    n_rows, seed, (a, b) = given["n_rows"], given["seed"], given["domain"]
    try:  # the order of the domain's ends
        irma_rows(seed, 0, 0, (a, b), noise)  # validates domain and noise, draws nothing
    except ValueError as exc:
        raise InputError(f"simulate irma: {exc}") from None
    chunk_rows = given["chunk_rows"] or default_chunk_rows(1, n_rows)
    attrs = {
        "generator": "streamlsq.simulate_irma",
        "parameters": {"n_rows": n_rows, "target": "x*exp(-x^2)",
                       "noise": "uniform(-noise, noise)", "noise_half_width": float(noise),
                       "dtype": str(np.dtype(dtype))},
        "seed": seed,
        "domain": [a, b],
        "block_size": int(block_size),
    }
    return _write_stream_store(
        out, overwrite, (n_rows, 1, 1), chunk_rows, dtype, attrs,
        _irma_rows, (irma_rows, seed, (a, b), noise, dtype),
        name="irma", client=client, scheduler=scheduler, progress=progress, codec=codec,
    )
