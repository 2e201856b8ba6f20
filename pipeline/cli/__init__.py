"""The ``streamlsq`` command line: one module per command.

- :mod:`.main`: the ``streamlsq`` group, which gathers the others
- :mod:`.simulate`: ``simulate stream|interleaved|irma|mlr``
- :mod:`.fit`: ``fit METHOD``, one subcommand per registered recursion, and
  ``fit interleaved``; :mod:`.fit_em`: ``fit em``
- :mod:`.info`: ``info``
- :mod:`.metalearn`: ``metalearn``
- :mod:`.predict`: ``predict``
- :mod:`.example`: ``example``
- :mod:`.study`: ``study NAME``
- :mod:`.demo`: ``demo``
- :mod:`.common`: error reporting, options shared by several commands, and the groups'
  commands imported when used
"""

from streamlsq.cli.main import console, main

__all__ = ["console", "main"]
