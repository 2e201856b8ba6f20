"""``streamlsq convert``: a table (Parquet, CSV) written as a stream store."""

from __future__ import annotations

import click

from streamlsq.cli.common import CONTEXT, _client, _friendly_errors, _scheduler_options

__all__ = ["convert"]


@click.command(context_settings=CONTEXT)
@click.argument("table", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Stream store to create.")
@click.option("--columns", default=None, metavar="NAMES",
              help="The columns to write, comma-separated (default: all).")
@click.option("--chunk-rows", type=int, default=None,
              help="Rows of a chunk of the store (default: those of the table's blocks, a "
                   "Parquet row group).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_scheduler_options
@_friendly_errors
def convert(table, out, columns, chunk_rows, overwrite, scheduler, n_workers, memory_limit):
    """Write the table TABLE (a Parquet file or folder of files, CSV files by a glob) as the
    stream store OUT: one variable per column along row, numbers as float64 (NaN where
    missing), strings as strings with their levels (attribute categories).

    \b
    Examples:
      streamlsq convert flights.parquet --out flights.zarr
      streamlsq convert 'flights-*.csv' --out flights.zarr --chunk-rows 100000
      streamlsq fit kf4lls flights.zarr --out fit.zarr --formula 'arr_delay ~ C(carrier)'
    """
    from streamlsq.stream.convert import convert as run

    names = None if columns is None else [c.strip() for c in columns.split(",") if c.strip()]
    with _client(scheduler, n_workers, memory_limit) as client:
        ds = run(table, out, columns=names, chunk_rows=chunk_rows, overwrite=overwrite,
                 client=client)
    strings = [name for name in ds.data_vars if ds[name].dtype.kind in "OUT"]
    click.echo(f"wrote {out}: {ds.attrs['n_rows']} rows of {len(ds.data_vars)} column(s) in "
               f"chunks of {ds.attrs['chunk_rows']} rows"
               + (f"; categories: {', '.join(strings)}" if strings else ""))
