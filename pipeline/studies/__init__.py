"""The papers' studies, each from one function call (and ``streamlsq study NAME``).

Every study is a module here with a function

    run_<name>(out, quick=False, seed=0, client=None, **options) -> StudyResult

that writes tidy CSV tables, PNG figures and a ``summary.md`` (the paper's
numbers beside this run's) into the folder ``out``, spreading its Monte-Carlo
work over the Dask cluster as fixed-size batches (same tables on any number of
workers), and returns a :class:`StudyResult`. ``quick=True`` shrinks every size
so the study runs in seconds. The math is in ``streamlsq.kernels`` (the study
kernels ``study_*`` and the estimators); these modules only draw batches, map
them over the Dask cluster, tabulate and plot.

:data:`STUDIES` is the registry the command line reads. To add a study, write
its module with a ``run_<name>`` and add one :class:`StudySpec` to
:data:`STUDIES`, and declare its options in
:data:`streamlsq.options.study.STUDY_OPTIONS` (they become options of ``streamlsq study``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlsq.options.study import STUDY_OPTIONS

if TYPE_CHECKING:  # imported on first use (pandas, the kernels): the command line starts fast
    from streamlsq.studies.common import StudyResult

__all__ = [
    "STUDIES",
    "StudyResult",
    "StudySpec",
    "run_bfgs",
    "run_interleaved",
    "run_irma",
    "run_lms",
    "run_mlr",
    "run_study",
]


@dataclass(frozen=True)
class StudySpec:
    """One registered study: where its runner lives and which options it takes."""

    name: str
    title: str
    runner: str  # "module:function", imported on first use
    options: tuple[str, ...] = ()

    def load(self):
        module, func = self.runner.split(":")
        return getattr(importlib.import_module(module), func)


STUDIES: dict[str, StudySpec] = {
    spec.name: spec
    for spec in (
        StudySpec(
            "interleaved",
            "Figure 1 of interleaved KF4LLS: bias and MSE per step of five training schemes",
            "streamlsq.studies.interleaved:run_interleaved",
            STUDY_OPTIONS["interleaved"].names,
        ),
        StudySpec(
            "irma",
            "IRMA: Figure 1 (cumulative loss of GD, RLS, IRMA) and Table I (MSE vs batch)",
            "streamlsq.studies.irma:run_irma",
            STUDY_OPTIONS["irma"].names,
        ),
        StudySpec(
            "lms",
            "LMS sample by sample: the paper's line fit and convergence to least squares",
            "streamlsq.studies.lms:run_lms",
            STUDY_OPTIONS["lms"].names,
        ),
        StudySpec(
            "bfgs",
            "Incremental BFGS vs exact least squares and LMS; class-balanced binary case",
            "streamlsq.studies.bfgs:run_bfgs",
            STUDY_OPTIONS["bfgs"].names,
        ),
        StudySpec(
            "mlr",
            "Meta-learning mixed linear regressions: Appendix E (subspace, clustering, "
            "prediction, EM)",
            "streamlsq.studies.mlr:run_mlr",
            STUDY_OPTIONS["mlr"].names,
        ),
    )
}


def run_study(name: str, out, quick: bool = False, seed: int = 0, client=None, *,
              checkpoint=None, resume: bool = False, **options):
    """Run the registered study ``name`` (see :data:`STUDIES`); returns its StudyResult.

    ``checkpoint``, ``resume``: commit every batch to this folder and continue a killed
    run from it; a checkpoint of the same study with other options is refused."""
    import json

    from streamlsq.errors import InputError

    if name not in STUDIES:
        raise InputError(f"unknown study {name!r}; available: {', '.join(sorted(STUDIES))}")
    runtime = {"scheduler", "n_workers", "progress"}
    fingerprint = {"study": name, "quick": bool(quick), "seed": seed, "options": json.dumps(
        {k: v for k, v in options.items() if k not in runtime}, sort_keys=True, default=str)}
    extra = {} if checkpoint is None else {"checkpoint": checkpoint, "resume": resume,
                                           "fingerprint": fingerprint}
    return STUDIES[name].load()(out, quick=quick, seed=seed, client=client, **extra, **options)


def __getattr__(attr):  # run_<name> imported lazily: a study's module loads on first use
    if attr == "StudyResult":
        from streamlsq.studies.common import StudyResult

        return StudyResult
    for spec in STUDIES.values():
        if attr == spec.runner.split(":")[1]:
            return spec.load()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
