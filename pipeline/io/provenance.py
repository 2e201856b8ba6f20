"""What every result store says about itself: the method, its parameters, its inputs,
the run's time, the package version and the moment it was written.

One function, :func:`provenance`, builds these attributes for every result streamlsq
writes (stream fits, interleaved fits, meta-learned models, the pooled baseline, EM
and predictions), so they carry the same names everywhere; each caller adds the
attributes particular to its result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

__all__ = ["provenance"]


def _version() -> str:
    """The package version, as result stores record it: here, in the mark of who wrote a
    store (:mod:`streamlsq.io.results`) and in a checkpoint's marker. Read from the installed
    metadata, as ``streamlsq.__version__`` is, without importing the package's top (which
    imports every layer: the io layer stays below them)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamlsq")
    except PackageNotFoundError:  # a source tree without installation
        return "0.0.0+unknown"


def provenance(method: str, parameters: dict, inputs: Sequence = (), *,
               roles: Sequence[str] | None = None, seconds: float | None = None) -> dict:
    """The common attributes of a result store.

    ``method`` names what made the result, ``parameters`` its settings (written as
    sorted JSON), ``inputs`` the sources it read (objects with ``path`` and
    ``group``; the first one is also ``input``/``input_group``), ``roles`` their
    roles when there are several (``inputs`` is then JSON of role, path and group),
    ``seconds`` the run's wall time.
    """
    attrs = {"method": method,
             "parameters": json.dumps(parameters, sort_keys=True, default=str)}
    if inputs:
        attrs["input"] = str(inputs[0].path)
        attrs["input_group"] = inputs[0].group or ""
    if roles is not None:
        attrs["inputs"] = json.dumps([{"role": role, "path": str(s.path), "group": s.group or ""}
                                      for role, s in zip(roles, inputs, strict=True)])
    if seconds is not None:
        attrs["seconds"] = round(float(seconds), 3)
    attrs["streamlsq_version"] = _version()
    attrs["created"] = datetime.now(UTC).isoformat(timespec="seconds")
    return attrs
