"""``streamlsq simulate``: synthetic stores written chunk by chunk in parallel."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _codec_option,
    _friendly_errors,
    _scheduler_options,
)

__all__ = [
    "simulate",
    "simulate_interleaved_command",
    "simulate_irma_command",
    "simulate_mlr_command",
    "simulate_stream_command",
]


_seed_option = click.option("--seed", default=0, show_default=True, help="Random seed.")
_dtype_option = click.option("--dtype", type=click.Choice(["float64", "float32"]),
                             default="float64", show_default=True)


def _store_options(fn):
    """The options every simulate command ends with: --overwrite, --codec and the Dask
    cluster's; and its failures as one line."""
    for decorate in reversed([
        click.option("--overwrite", is_flag=True, help="Replace an existing store."),
        _codec_option, _scheduler_options, _friendly_errors,
    ]):
        fn = decorate(fn)
    return fn


@click.group(context_settings=CONTEXT)
def simulate():
    """Write a synthetic dataset for a study, chunk by chunk in parallel.

    \b
    Examples:
      streamlsq simulate stream --out data.zarr --rows 1000000 --features 50 --seed 1
      streamlsq simulate interleaved --out pop.zarr --alpha 0.25 --n 100 --q 6 --steps 6
      streamlsq simulate irma --out irma.zarr --rows 150 --seed 3
    """


@simulate.command("stream", context_settings=CONTEXT)
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--rows", default=200_000, show_default=True, help="Rows (samples).")
@click.option("--features", default=20, show_default=True, help="Features (columns of X).")
@click.option("--targets", default=1, show_default=True, help="Targets (columns of y).")
@click.option("--noise", default=1.0, show_default=True, help="Noise standard deviation.")
@click.option("--condition", default=10.0, show_default=True,
              help="Condition number of the feature covariance's square root.")
@click.option("--chunk-size", type=int, default=None,
              help="Rows per Zarr chunk (default: about 25 MB of X).")
@click.option("--block-size", type=int, default=None,
              help="Rows per recursion block, stored as the block_size attribute.")
@_seed_option
@_dtype_option
@_store_options
def simulate_stream_command(out, rows, features, targets, noise, condition, chunk_size,
                            block_size, seed, dtype, overwrite, codec, scheduler, n_workers,
                            memory_limit):
    """A regression stream: correlated Gaussian features, y = X·coef_true + noise.

    \b
    Examples:
      streamlsq simulate stream --out data.zarr --rows 1000000 --features 50 --seed 1
      streamlsq simulate stream --out big.zarr --rows 50000000 --features 20 --chunk-size 200000
    """
    from streamlsq.simulate.streams import simulate_stream

    size = rows * (features + targets) * (4 if dtype == "float32" else 8)
    with _client(scheduler, n_workers, memory_limit, data=max(0, size)) as client:
        path = simulate_stream(
            out, rows, features, targets, noise=noise, condition=condition,
            chunk_rows=chunk_size, block_size=block_size, seed=seed, dtype=dtype,
            overwrite=overwrite, client=client, codec=codec,
        )
    click.echo(f"wrote {path} ({rows} rows x {features} features, {targets} target(s))")


@simulate.command("interleaved", context_settings=CONTEXT)
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--alpha", default=0.25, show_default=True,
              help="Mixing weight: penguins Z = alpha*U + (1-alpha)*V (0 < alpha < 1).")
@click.option("--n", "n", default=100, show_default=True, help="Rows per block (paper: n).")
@click.option("--q", "q", default=6, show_default=True, help="Features (paper: q).")
@click.option("--steps", default=6, show_default=True, help="Blocks per population.")
@_seed_option
@click.option("--chunk-blocks", type=int, default=None,
              help="Whole blocks per Zarr chunk (default: about 25 MB of X).")
@_store_options
def simulate_interleaved_command(out, alpha, n, q, steps, seed, chunk_blocks, overwrite, codec,
                                 scheduler, n_workers, memory_limit):
    """The three populations of the interleaved KF4LLS study (Figure 1 process).

    Groups a (birds: X = U ~ N(mu1, I)), b (fish: V ~ N(mu2, I)) and c (penguins:
    Z = alpha*U + (1-alpha)*V on the same rows) of one store, each with STEPS blocks of
    N rows, one target y = X r + N(0, 1) and coef_true = r_b, r_f, r_p; r_b, r_f ~
    U(-5, 5)^q and mu1, mu2 ~ U(-10, 10) are drawn once from the seed.

    \b
    Examples:
      streamlsq simulate interleaved --out pop.zarr
      streamlsq simulate interleaved --out big.zarr --n 1000 --steps 2000 --seed 3
      streamlsq fit interleaved pop.zarr#a pop.zarr#b --alpha 0.25 --out fit.zarr
    """
    from streamlsq.simulate.streams import simulate_interleaved

    size = max(0, 3 * n * steps * (q + 1) * 8)
    with _client(scheduler, n_workers, memory_limit, data=size) as client:
        path = simulate_interleaved(out, alpha=alpha, n=n, q=q, steps=steps, seed=seed,
                                    chunk_blocks=chunk_blocks, overwrite=overwrite,
                                    client=client, codec=codec)
    click.echo(f"wrote {path}: groups a, b, c, each {steps} blocks of {n} rows x {q} features")


@simulate.command("irma", context_settings=CONTEXT)
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--rows", default=150, show_default=True,
              help="Examples (the paper's sequences have 150).")
@click.option("--noise", default=0.05, show_default=True,
              help="Half-width of the uniform noise on y (the paper's +-0.05).")
@click.option("--domain", type=float, nargs=2, default=(0.0, 3.0), show_default=True,
              metavar="A B", help="Interval of the inputs x (the paper's [0, 3]).")
@click.option("--chunk-size", type=int, default=None,
              help="Rows per Zarr chunk (default: about 25 MB).")
@click.option("--block-size", type=int, default=1, show_default=True,
              help="Rows per recursion step, stored as the block_size attribute.")
@_seed_option
@_dtype_option
@_store_options
def simulate_irma_command(out, rows, noise, domain, chunk_size, block_size, seed, dtype,
                          overwrite, codec, scheduler, n_workers, memory_limit):
    """The IRMA study's data: y = x*exp(-x^2) + uniform noise, x uniform on the domain.

    X (sample, feature) holds the raw inputs x (one column), y one target; the store's
    domain attribute is the default --domain of streamlsq fit irma. The numbers depend
    on the seed and the row index only (any chunking gives the same rows).

    \b
    Examples:
      streamlsq simulate irma --out irma.zarr
      streamlsq simulate irma --out big.zarr --rows 10000000 --seed 2
      streamlsq fit irma irma.zarr --out fit.zarr --order 10
    """
    from streamlsq.simulate.streams import simulate_irma

    with _client(scheduler, n_workers, memory_limit, data=max(0, rows * 16)) as client:
        path = simulate_irma(out, rows, noise=noise, domain=domain, chunk_rows=chunk_size,
                             block_size=block_size, seed=seed, dtype=dtype, overwrite=overwrite,
                             client=client, codec=codec)
    click.echo(f"wrote {path} ({rows} examples x in [{domain[0]:g}, {domain[1]:g}], "
               f"y = x*exp(-x^2) + U(-{noise:g}, {noise:g}))")


@simulate.command("mlr", context_settings=CONTEXT)
@click.option("--out", required=True, type=click.Path(), help="Store to create.")
@click.option("--k", "k", default=4, show_default=True, help="Components.")
@click.option("--d", "d", default=8, show_default=True, help="Features.")
@click.option("--weights", default=None, help="Comma-separated weights p (default uniform).")
@click.option("--noise", default="1.0", show_default=True,
              help="Noise standard deviation s, one number or K comma-separated.")
@click.option("--separation", type=float, default=None,
              help="Rescale the components to this minimum distance.")
@click.option("--kind", type=click.Choice(["orthonormal", "gaussian"]), default="orthonormal",
              show_default=True, help="Orthonormal components or N(0, I/d).")
@click.option("--features", type=click.Choice(["gaussian", "polynomial", "chebyshev"]),
              default="gaussian", show_default=True,
              help="Rows x ~ N(0, I), or monomials / Chebyshev polynomials of u ~ U(-1, 1) "
              "(non-isotropic).")
@click.option("--n-light", default=10_000, show_default=True, help="Tasks in D_L1.")
@click.option("--t-light", default=4, show_default=True, help="Rows per D_L1 task.")
@click.option("--n-heavy", default=200, show_default=True, help="Tasks in D_H.")
@click.option("--t-heavy", default=100, show_default=True, help="Rows per D_H task.")
@click.option("--n-light2", default=10_000, show_default=True, help="Tasks in D_L2.")
@click.option("--t-light2", default=8, show_default=True, help="Rows per D_L2 task.")
@click.option("--seed", default=0, show_default=True, help="Seed of the mixture.")
@click.option("--task-seed", type=int, default=None,
              help="Seed of the tasks (default --seed): another value draws new tasks from "
              "the same mixture, e.g. a test set.")
@click.option("--chunk-size", type=int, default=None, help="Rows per Zarr chunk.")
@_store_options
def simulate_mlr_command(out, k, d, weights, noise, separation, kind, features, n_light,
                         t_light, n_heavy, t_heavy, n_light2, t_light2, seed, task_seed,
                         chunk_size, overwrite, codec, scheduler, n_workers, memory_limit):
    """Write a multi-task store of the mixed-linear-regression model, in parallel.

    \b
    Examples:
      streamlsq simulate mlr --out tasks.zarr --k 4 --d 8 --n-light 100000 --t-light 4
      streamlsq simulate mlr --out test.zarr --n-light 0 --n-heavy 0 --t-light2 30 --task-seed 1
    """
    from streamlsq.errors import InputError
    from streamlsq.simulate.tasks import simulate_mlr as run

    def numbers(text, name):
        try:
            return [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(f"--{name} must be comma-separated numbers, got {text!r}") from None

    noise_values = numbers(noise, "noise")
    rows = max(0, n_light * t_light + n_heavy * t_heavy + n_light2 * t_light2)
    with _client(scheduler, n_workers, memory_limit, data=rows * (d + 1) * 8) as client:
        path = run(out, k=k, d=d, weights=None if weights is None else numbers(weights, "weights"),
                   noise=noise_values[0] if len(noise_values) == 1 else noise_values,
                   separation=separation, kind=kind, features=features, n_light=n_light,
                   t_light=t_light,
                   n_heavy=n_heavy, t_heavy=t_heavy, n_light2=n_light2, t_light2=t_light2,
                   seed=seed, task_seed=task_seed, chunk_rows=chunk_size, overwrite=overwrite,
                   client=client, codec=codec)
    click.echo(f"wrote {path}: {n_light} light, {n_heavy} heavy, {n_light2} light2 tasks "
               f"(k = {k}, d = {d})")
