"""Pieces shared by every ``streamlsq`` subcommand module: error handling and cluster options."""

from __future__ import annotations

import functools
import sys

import click

from streamlsq.errors import InputError, WorkersPausedError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _friendly_errors(fn):
    """Turn InputError (and unusable paths) into one line on stderr and exit code 2; a run
    the cluster could not carry (WorkersPausedError) into one line and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            click.echo(f"streamlsq: error: {exc}", err=True)
            sys.exit(2)
        except WorkersPausedError as exc:
            click.echo(f"streamlsq: error: {exc}", err=True)
            sys.exit(1)

    return wrapper


def _scheduler_options(fn):
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
    from streamlsq.runtime.client import dask_client

    return dask_client(None, scheduler, n_workers=n_workers, memory_limit=memory_limit)
