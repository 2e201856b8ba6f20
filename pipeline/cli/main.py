"""The ``streamlsq`` command line (``streamlsq --help``).

Every command exits 0 on success and 2 on bad input, printing one line that
names the store, variable and chunk or row at fault.
"""

from __future__ import annotations

import sys

import click

from streamlsq.cli.common import CONTEXT

__all__ = [
    "main",
]


class _OneLineErrors(click.Group):
    """The ``streamlsq`` group: a mistyped command line (unknown option, invalid value) is
    one line on stderr with exit code 2, like every other failure, instead of click's
    usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
            click.echo(f"streamlsq: error: {exc.format_message().rstrip('.')}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"streamlsq: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("streamlsq: error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors, context_settings=CONTEXT)
@click.version_option(package_name="streamlsq")
@click.option("--debug", is_flag=True,
              help="Show the traceback of a failure (and warnings) instead of one line.")
def main(debug):
    """Incremental least squares and meta-learning of linear regressions over chunked
    Zarr stores, on a Dask cluster.

    \b
    A first session:
      streamlsq simulate stream --out data.zarr --rows 200000 --features 20
      streamlsq fit kf4lls data.zarr --out fit.zarr
      streamlsq info fit.zarr

    Every failure is one line on stderr naming what failed and where, with exit code 2
    (bad input, or a run that could not be carried out); see docs/faults.md.
    """



def _register() -> None:
    # every command group lives in a module of its own
    from streamlsq.cli.fit import fit
    from streamlsq.cli.info import demo, info
    from streamlsq.cli.mlr import em, example, metalearn, predict, simulate_mlr
    from streamlsq.cli.simulate import simulate
    from streamlsq.cli.study import study

    simulate.add_command(simulate_mlr, "mlr")
    fit.add_command(em, "em")
    for command in (simulate, fit, info, metalearn, predict, example, study, demo):
        main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
