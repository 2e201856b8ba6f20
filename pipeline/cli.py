"""The ``streamlsq`` command line (DESIGN.md §4).

Every command exits 0 on success and 2 on bad input, printing one line that
names the store, variable and chunk or row at fault.
"""

from __future__ import annotations

import functools
import sys

import click

from .errors import InputError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _friendly_errors(fn):
    """Turn InputError (and unusable paths) into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            click.echo(f"streamlsq: error: {exc}", err=True)
            sys.exit(2)

    return wrapper


def _cluster_options(fn):
    fn = click.option(
        "--memory-limit", default=None,
        help="Memory limit per worker of the embedded LocalCluster (e.g. 1GB).",
    )(fn)
    fn = click.option(
        "--workers", "n_workers", type=int, default=None,
        help="Workers of the embedded LocalCluster (default: dask's choice for this machine).",
    )(fn)
    fn = click.option(
        "--scheduler", default=None, envvar="DASK_SCHEDULER_ADDRESS", metavar="ADDRESS",
        help="Address of a running Dask scheduler (or DASK_SCHEDULER_ADDRESS); "
        "default: an embedded LocalCluster.",
    )(fn)
    return fn


def _client(scheduler, n_workers, memory_limit):
    from .cluster import dask_client

    return dask_client(None, scheduler, n_workers=n_workers, memory_limit=memory_limit)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="streamlsq")
def main():
    """Incremental least squares and meta-learning of linear regressions over chunked
    Zarr stores, on a Dask cluster.

    \b
    A first session:
      streamlsq simulate stream --out data.zarr --rows 200000 --features 20
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq info fit.zarr
    """


@main.command(context_settings=CONTEXT)
@click.argument("study", type=click.Choice(["stream"]))
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
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_cluster_options
@_friendly_errors
def simulate(study, out, rows, features, targets, noise, condition, chunk_size, block_size,
             seed, dtype, overwrite, scheduler, n_workers, memory_limit):
    """Write a synthetic dataset for STUDY, chunk by chunk in parallel.

    \b
    Examples:
      streamlsq simulate stream --out data.zarr --rows 1000000 --features 50 --seed 1
      streamlsq simulate stream --out big.zarr --rows 50000000 --features 20 --chunk-size 200000
    """
    from .simulate import simulate_stream

    with _client(scheduler, n_workers, memory_limit) as client:
        path = simulate_stream(
            out, rows, features, targets, noise=noise, condition=condition,
            chunk_rows=chunk_size, block_size=block_size, seed=seed, dtype=dtype,
            overwrite=overwrite, client=client,
        )
    click.echo(f"wrote {path} ({rows} rows x {features} features, {targets} target(s))")


@main.command(context_settings=CONTEXT)
@click.argument("method", type=click.Choice(["kf4lls", "rls"]))
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Result store to create.")
@click.option("--engine", type=click.Choice(["sequential", "scan"]), default="sequential",
              show_default=True, help="In-order fold, or parallel sums + prefix scan.")
@click.option("--block-size", type=int, default=None,
              help="Rows per step (default: the store's block_size attribute or chunk size).")
@click.option("--first-block-size", type=int, default=None,
              help="Rows of the first block (default: --block-size).")
@click.option("--record-every", type=int, default=None,
              help="Record coefficients every N steps (default: ~1000 steps in all).")
@click.option("--forgetting", type=float, default=None,
              help="Forgetting factor g in (0, 1] (kf4lls: 1, rls: 0.99).")
@click.option("--ridge", type=float, default=0.0, show_default=True,
              help="Ridge start H0 = ridge*I (Tikhonov term for rls).")
@click.option("--group", default=None, help="Group of the store holding X and y.")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True, help="Precision of the computation.")
@click.option("--checkpoint", type=click.Path(), default=None,
              help="Folder for checkpoints (sequential engine).")
@click.option("--resume", is_flag=True, help="Continue from --checkpoint.")
@click.option("--segment-size", type=float, default=None, metavar="MB",
              help="MB of X per task (sequential default 256, scan default 48).")
@click.option("--overwrite", is_flag=True, help="Replace an existing result store.")
@_cluster_options
@_friendly_errors
def fit(method, data, out, engine, block_size, first_block_size, record_every, forgetting,
        ridge, group, dtype, checkpoint, resume, segment_size, overwrite, scheduler, n_workers,
        memory_limit):
    """Fit METHOD to the stream store DATA, block after block, in order.

    \b
    Examples:
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq fit kf4lls data.zarr --out fit.zarr --engine scan --block-size 1000
      streamlsq fit rls data.zarr --out rls.zarr --forgetting 0.999 --ridge 1e-3 --block-size 1
      streamlsq fit kf4lls big.zarr --out fit.zarr --checkpoint ckpt/ --resume
    """
    from .fit import fit_stream

    params = {"ridge": ridge}
    if forgetting is not None:
        params["forgetting"] = forgetting
    with _client(scheduler, n_workers, memory_limit) as client:
        ds = fit_stream(
            data, method, out=out, group=group, engine=engine, block_size=block_size,
            first_block_size=first_block_size, record_every=record_every, dtype=dtype,
            client=client, checkpoint=checkpoint, resume=resume, overwrite=overwrite,
            segment_bytes=int(segment_size * 2**20) if segment_size else None, **params,
        )
    click.echo(
        f"wrote {out}: {method} ({engine}) over {ds.attrs['n_rows']} rows in "
        f"{ds.attrs['n_blocks']} blocks, {ds.sizes['step']} recorded steps, "
        f"{ds.attrs['rows_per_second']:.3g} rows/s"
    )


@main.command(context_settings=CONTEXT)
@click.argument("store", type=click.Path())
@click.option("--check", is_flag=True,
              help="Also read every chunk and check for NaN/Inf (a parallel pass).")
@_cluster_options
@_friendly_errors
def info(store, check, scheduler, n_workers, memory_limit):
    """Describe STORE (stream, multi-task or result store) and validate it.

    \b
    Examples:
      streamlsq info data.zarr
      streamlsq info data.zarr --check
    """
    from .describe import check_values, describe

    click.echo(describe(store))
    if check:
        with _client(scheduler, n_workers, memory_limit) as client:
            n = check_values(store, client)
        click.echo(f"checked: every value finite in {n} rows")


@main.command(context_settings=CONTEXT)
@click.option("--out", default="streamlsq-demo", show_default=True, type=click.Path(),
              help="Folder for the demo's stores.")
@click.option("--rows", default=2_000_000, show_default=True, help="Rows of the stream.")
@click.option("--features", default=20, show_default=True)
@click.option("--seed", default=0, show_default=True)
@_cluster_options
@_friendly_errors
def demo(out, rows, features, seed, scheduler, n_workers, memory_limit):
    """Simulate a stream, fit it with both engines and RLS, and report accuracy and speed.

    \b
    Examples:
      streamlsq demo
      streamlsq demo --out /tmp/demo --rows 500000
    """
    from .demo import run_demo

    with _client(scheduler, n_workers, memory_limit) as client:
        run_demo(out, rows, features, seed, client=client, echo=click.echo)


# meta-learning commands (metalearn, predict, example, simulate mlr) live in cli_mlr; under
# ``python -m streamlsq.cli`` (and in its spawned workers) they attach to the imported module
if __name__ == "streamlsq.cli":
    from .cli_mlr import register as _register_mlr

    _register_mlr(main)

if __name__ == "__main__":  # pragma: no cover
    from streamlsq.cli import main as _main

    _main()
