"""``python -m streamlsq.cli``: the command line."""

from streamlsq.cli.main import console

console()
