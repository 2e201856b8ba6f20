"""The options of the studies (``streamlsq study NAME``, the ``run_<name>`` functions of
:mod:`streamlsq.studies`), of the demo and of the example datasets, declared once.

:data:`STUDY` holds what every study takes (``quick``, ``seed``); :data:`STUDY_OPTIONS`
each study's own options besides (None: the study's default, which ``quick`` shrinks);
:data:`EVERY_STUDY` all of them, the options of ``streamlsq study``. An option a study
does not take is refused by the command with the study's name.
"""

from __future__ import annotations

import os

from streamlsq.options import Options, Param
from streamlsq.options.common import SEED
from streamlsq.options.run import OUTPUT

__all__ = ["DEMO", "EVERY_STUDY", "EXAMPLE", "EXAMPLE_NAMES", "STUDY", "STUDY_OPTIONS",
           "STUDY_OUTPUTS", "study_files"]

#: the real multilevel datasets ``streamlsq example`` converts (:mod:`streamlsq.mlr.examples`)
EXAMPLE_NAMES = ("exam", "hsb82", "radon")


def _count(name: str, minimum: int, help: str) -> Param:
    """A study's count (iterations, sequences, …): an integer >= ``minimum``, or None for
    the study's default; its refusals name the option as the command line spells it."""
    return Param(name, None, help, type=int, ge=minimum, optional=True,
                 label="--" + name.replace("_", "-"))


#: what every study takes
STUDY = Options(
    Param("quick", False, "Small sizes: seconds instead of minutes.", type=bool),
    SEED.replace(label="--seed"),
)

#: each study's outputs: the names of its tables (``NAME.csv``) and of its figures
#: (``NAME.png``). Its folder writes no other (:class:`streamlsq.studies.common.StudyFolder`
#: refuses one), and a rerun deletes no other (:func:`study_files`).
STUDY_OUTPUTS = {
    "interleaved": (("figure1",), ("figure1",)),
    "irma": (("figure1", "table1"), ("figure1", "table1")),
    "lms": (("demonstration", "fits", "convergence"), ("demonstration", "convergence")),
    "bfgs": (("regression", "binary"), ("regression", "binary")),
    "mlr": (("subspace", "clustering", "classification", "parameters", "prediction", "em"),
            ("grids", "prediction", "em")),
}


def study_files(name: str) -> frozenset[str]:
    """The names of the files the study ``name`` writes in its folder (its tables, figures,
    ``summary.md`` and ``study.json``); a rerun deletes only files of these names, and only
    while their bytes are those its ``study.json`` records."""
    tables, figures = STUDY_OUTPUTS.get(name, ((), ()))
    return frozenset({*(f"{t}.csv" for t in tables), *(f"{f}.png" for f in figures),
                      "summary.md", "study.json"})


#: each study's own options, by the study's name (streamlsq.studies.STUDIES)
STUDY_OPTIONS = {
    "interleaved": Options(
        _count("iterations", 2, "[interleaved] Monte-Carlo iterations (default 5000; quick "
               "500)."),
        Param("alpha", None, "[interleaved] mixing weight α of the test population, in "
              "(0, 1) (default 0.25).", gt=0, lt=1, optional=True),
        _count("steps", 1, "[interleaved] KF4LLS steps (blocks) per scheme (default 6)."),
    ),
    "irma": Options(
        _count("fig_sequences", 2, "[irma] sequences for Figure 1 (default 500; quick 100)."),
        _count("table_sequences", 2, "[irma] sequences for Table I (default 1000; quick "
               "200)."),
    ),
    "lms": Options(
        _count("clouds", 2, "[lms] clouds for the convergence curves (default 200; quick "
               "20)."),
        _count("epochs", 1, "[lms] epochs of the convergence runs (default 200; quick 20)."),
        Param("rates", None, "[lms] constant step sizes (default 0.001,0.005,0.01).",
              type=float, gt=0, sequence=True, optional=True, metavar="R1,R2,...",
              label="--rates", requirement="positive step sizes separated by commas"),
    ),
    "bfgs": Options(
        _count("streams", 2, "[bfgs] streams per case (default 200; quick 20)."),
        Param("rate", None, "[bfgs] reference rate α_r of the class-balanced rates (default "
              "1).", gt=0, optional=True, label="--rate"),
    ),
    "mlr": Options(
        _count("replicates", 1, "[mlr] trials per grid point (default 20; quick 3)."),
    ),
}

#: the options of ``streamlsq study``: every study's
EVERY_STUDY = Options(STUDY, *STUDY_OPTIONS.values())

#: :func:`streamlsq.studies.demo.run_demo` (``streamlsq demo``)
DEMO = Options(
    Param("out", "streamlsq-demo", "Folder the demo creates for its stores, summary and "
          "figures, with the folders above it (a folder of yours, even an empty one, is "
          "refused: name a new one inside it; an earlier demo's is replaced).",
          type=str | os.PathLike, metavar="PATH", requirement="a folder's path"),
    Param("rows", 2_000_000, "Rows of the stream.", type=int, gt=0),
    Param("features", 20, "Features of the stream.", type=int, gt=0),
    SEED,
    Param("tasks", 100_000, "Light tasks of the multi-task store (4 rows each; a quarter as "
          "many tasks of 10 rows to classify, and 200 heavy tasks).", type=int, gt=0),
)

#: :func:`streamlsq.example_tasks` (``streamlsq example NAME``)
EXAMPLE = Options(
    Param("min_rows", 1, "Leave out tasks with fewer rows than this.", type=int, ge=1),
    SEED.replace(help="Seed of the shuffle of rows within each task."),
    OUTPUT.param("overwrite").replace(help="Replace an existing store (only one streamlsq "
                                           "wrote)."),
)
