"""``streamlsq simulate``: synthetic stores written chunk by chunk in parallel."""

from __future__ import annotations

import click

from streamlsq.cli.common import (
    CONTEXT,
    _client,
    _command_values,
    _friendly_errors,
)
from streamlsq.cli.options import click_options
from streamlsq.options import Options
from streamlsq.options.common import STORE
from streamlsq.options.run import CLUSTER
from streamlsq.options.simulate import INTERLEAVED, IRMA, MLR, STREAM

__all__ = [
    "simulate",
    "simulate_interleaved_command",
    "simulate_irma_command",
    "simulate_mlr_command",
    "simulate_stream_command",
]


def _store_command(name: str, options: Options):
    """A ``simulate`` command: --out, the store's declared ``options``, then what every
    simulate command ends with (--overwrite, --codec and the Dask cluster's); its failures
    as one line."""

    def decorate(fn):
        for option in reversed([
            simulate.command(name, context_settings=CONTEXT),
            click.option("--out", required=True, type=click.Path(), help="Store to create."),
            click_options(options), click_options(STORE), click_options(CLUSTER),
            _friendly_errors,
        ]):
            fn = option(fn)
        return fn

    return decorate


def _checked(options: Options, given: dict) -> tuple[dict, dict]:
    """Every option of the store (the defaults filled in) and the cluster's, checked
    before any cluster starts."""
    chosen, cluster = _command_values(options + STORE, given)
    return (options + STORE).check(chosen), cluster


@click.group(context_settings=CONTEXT)
def simulate():
    """Write a synthetic dataset for a study, chunk by chunk in parallel.

    \b
    Examples:
      streamlsq simulate stream --out data.zarr --rows 1000000 --features 50 --seed 1
      streamlsq simulate interleaved --out pop.zarr --alpha 0.25 --n 100 --q 6 --steps 6
      streamlsq simulate irma --out irma.zarr --rows 150 --seed 3
    """


@_store_command("stream", STREAM)
def simulate_stream_command(out, **given):
    """A regression stream: correlated Gaussian features, y = X·coef_true + noise.

    \b
    Examples:
      streamlsq simulate stream --out data.zarr --rows 1000000 --features 50 --seed 1
      streamlsq simulate stream --out big.zarr --rows 50000000 --features 20 --chunk-size 200000
    """
    from streamlsq.simulate.streams import simulate_stream

    o, cluster = _checked(STREAM, given)
    rows, features, targets = o["n_rows"], o["n_features"], o["n_targets"]
    size = rows * (features + targets) * (4 if o["dtype"] == "float32" else 8)
    with _client(**cluster, data=size) as client:
        path = simulate_stream(out, client=client, **o)
    click.echo(f"wrote {path} ({rows} rows x {features} features, {targets} target(s))")


@_store_command("interleaved", INTERLEAVED)
def simulate_interleaved_command(out, **given):
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

    o, cluster = _checked(INTERLEAVED, given)
    n, q, steps = o["n"], o["q"], o["steps"]
    with _client(**cluster, data=3 * n * steps * (q + 1) * 8) as client:
        path = simulate_interleaved(out, client=client, **o)
    click.echo(f"wrote {path}: groups a, b, c, each {steps} blocks of {n} rows x {q} features")


@_store_command("irma", IRMA)
def simulate_irma_command(out, **given):
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

    o, cluster = _checked(IRMA, given)
    rows, noise, domain = o["n_rows"], o["noise"], o["domain"]
    with _client(**cluster, data=rows * 16) as client:
        path = simulate_irma(out, client=client, **o)
    click.echo(f"wrote {path} ({rows} examples x in [{domain[0]:g}, {domain[1]:g}], "
               f"y = x*exp(-x^2) + U(-{noise:g}, {noise:g}))")


@_store_command("mlr", MLR)
def simulate_mlr_command(out, **given):
    """Write a multi-task store of the mixed-linear-regression model, in parallel.

    \b
    Examples:
      streamlsq simulate mlr --out tasks.zarr --k 4 --d 8 --n-light 100000 --t-light 4
      streamlsq simulate mlr --out test.zarr --n-light 0 --n-heavy 0 --t-light2 30 --task-seed 1
    """
    from streamlsq.simulate.tasks import simulate_mlr as run

    o, cluster = _checked(MLR, given)
    rows = sum(o[f"n_{role}"] * o[f"t_{role}"] for role in ("light", "heavy", "light2"))
    with _client(**cluster, data=rows * (o["d"] + 1) * 8) as client:
        path = run(out, client=client, **o)
    click.echo(f"wrote {path}: {o['n_light']} light, {o['n_heavy']} heavy, {o['n_light2']} "
               f"light2 tasks (k = {o['k']}, d = {o['d']})")
