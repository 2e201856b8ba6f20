"""``streamlsq convert``: a table (Parquet, CSV) written as a stream store."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors
from streamlsq.cli.options import click_options, values
from streamlsq.options import Options
from streamlsq.options.fit import CONVERT
from streamlsq.options.run import CLUSTER, OUTPUT

#: the options of ``convert`` besides ``--out``
OPTIONS = Options(CONVERT, OUTPUT.without("out"), CLUSTER)

__all__ = ["convert"]


@click.command(context_settings=CONTEXT)
@click.argument("table", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Stream store to create.")
@click_options(OPTIONS)
@_friendly_errors
def convert(table, out, **given):
    """Write the table TABLE (a Parquet file or folder of files, CSV files by a glob) as the
    stream store OUT: one variable per column along row, numbers as float64 (NaN where
    missing), strings as strings with their levels (attribute categories).

    \b
    Examples:
      streamlsq convert flights.parquet --out flights.zarr
      streamlsq convert 'flights-*.csv' --out flights.zarr --chunk-rows 100000
      streamlsq fit kf4lls flights.zarr --out fit.zarr --formula 'arr_delay ~ C(carrier)'
    """
    from streamlsq.conversion import convert as run

    options = values(OPTIONS, given)  # refused before a cluster starts
    cluster = {key: options.pop(key, None) for key in CLUSTER.names}
    with _client(**cluster) as client:
        ds = run(table, out, client=client, **options)
    strings = [name for name in ds.data_vars if ds[name].dtype.kind in "OUT"]
    click.echo(f"wrote {out}: {ds.attrs['n_rows']} rows of {len(ds.data_vars)} column(s) in "
               f"chunks of {ds.attrs['chunk_rows']} rows"
               + (f"; categories: {', '.join(strings)}" if strings else ""))
