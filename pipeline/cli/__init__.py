"""The ``streamlsq`` command line: one module per command group.

- :mod:`.main`: the ``streamlsq`` group, which gathers the others
- :mod:`.simulate`: ``simulate stream|interleaved|irma`` (and ``mlr`` from :mod:`.mlr`)
- :mod:`.fit`: ``fit METHOD``, one subcommand per registered recursion, and
  ``fit interleaved``
- :mod:`.mlr`: ``metalearn``, ``predict``, ``fit em``, ``simulate mlr``, ``example``
- :mod:`.study`: ``study NAME``
- :mod:`.info`: ``info`` and ``demo``
- :mod:`.common`: error reporting and cluster options shared by every command
"""

from streamlsq.cli.main import main

__all__ = ["main"]
