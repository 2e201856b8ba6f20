"""What every run takes around its job (:class:`streamlsq.jobs.Run`): the output, the
checkpoint, the Dask cluster, progress bars and the storage options of URLs.

:data:`RUN` holds the options of a run from Python; :data:`CLUSTER` those of the command
line's cluster (the embedded LocalCluster's workers and memory, or a scheduler's address).
"""

from __future__ import annotations

import os

from streamlsq.options import Options, Param, Rule

__all__ = ["CLUSTER", "OUTPUT", "RUN"]

#: the output of a run and whether it may replace an earlier result
OUTPUT = Options(
    Param("out", None, "Result store to create.", type=object, optional=True,
          metavar="PATH"),
    Param("overwrite", False, "Replace an existing result store (only one streamlsq wrote).",
          type=bool),
)

#: committing progress and continuing a killed run
CHECKPOINT = Options(
    Param("checkpoint", None, "Commit progress to DIR (a new or empty folder, or a streamlsq "
          "checkpoint); removed once the result is written.", type=str | os.PathLike,
          optional=True, metavar="DIR", requirement="a folder's path or None"),
    Param("resume", False, "Continue from --checkpoint (exits 0 at once if the result is "
          "already published).", type=bool),
    rules=[Rule("resume", True, needs={"checkpoint": Rule.GIVEN},
                message="--resume needs --checkpoint DIR")],
)

#: the Dask cluster a command starts or joins
CLUSTER = Options(
    Param("scheduler", None, "Address of a running Dask scheduler (or "
          "DASK_SCHEDULER_ADDRESS); default: an embedded LocalCluster.", type=str,
          optional=True, metavar="ADDRESS"),
    Param("n_workers", None, "Workers of the embedded LocalCluster (default: dask's choice "
          "for this machine).", type=int, gt=0, optional=True, flag="--workers",
          label="--workers"),
    Param("memory_limit", None, "Memory limit per worker of the embedded LocalCluster "
          "(e.g. 1GB).", type=str, optional=True),
)

#: the options of a run from Python, besides ``out`` (:class:`streamlsq.jobs.RunOptions`)
RUN = Options(
    OUTPUT.without("out"),
    CHECKPOINT,
    Param("client", None, "The Dask client to run on (default: the current client).",
          type=object, optional=True, command_line=False),
    CLUSTER.without("memory_limit"),
    Param("progress", None, "Show progress bars (default: when standard error is a "
          "terminal).", type=bool, optional=True, command_line=False),
    Param("storage_options", None, "Options of the fsspec filesystem of URLs given as "
          "inputs or output (credentials, endpoint_url, …).", type=dict, optional=True,
          command_line=False),
)
