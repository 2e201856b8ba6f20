"""The options of the multi-task jobs, declared once: :func:`streamlsq.metalearn`
(:data:`METALEARN`), :func:`streamlsq.fit_pooled` (:data:`POOLED`), :func:`streamlsq.fit_em`
(:data:`EM`) and the multi-task :func:`streamlsq.predict` (:data:`PREDICT`), and the light
constants their choices and defaults come from.

What depends on the data (k larger than the features or the heavy tasks, a task too short
for the rows held out) is checked when the store is opened; everything here is checked
before any input is opened or any client started.
"""

from __future__ import annotations

import os

from streamlsq.options import Options, Param, Rule
from streamlsq.options.common import SEED

__all__ = ["CHUNK_TASKS", "DEFAULT_CHUNK_TASKS", "DEFAULT_LINKAGE", "DEFAULT_SPLITS", "EM",
           "ESTIMATORS", "GROUP", "HOLDOUT", "INITS", "K_MAX", "LINKAGES", "MAX_FULL_HEAVY",
           "METALEARN", "POOLED", "PREDICT", "ROLES", "TILE"]

#: largest number of heavy tasks for average linkage (the full distance matrix on the client)
MAX_FULL_HEAVY = 5_000
#: heavy tasks per side of a distance tile
TILE = 1024
#: the clusterings of the heavy tasks
LINKAGES = ("auto", "single", "average")
#: defaults chosen by measurement (tests/benchmarks/bench_mlr_defaults.py, the README)
DEFAULT_LINKAGE = "auto"
DEFAULT_SPLITS = 1
#: largest k that k="auto" tries by default (also at most d and the number of heavy tasks)
K_MAX = 8
#: how the task sets are assigned: from the store's ``role``, by rows per task, or either
ROLES = ("auto", "store", "rows")
#: the starts of EM
INITS = ("truth", "perturbed", "random")
#: the estimators of a new task's regression vector
ESTIMATORS = ("bayes", "map", "lstsq")
#: tasks per chunk of work, the unit a kernel call processes (~10⁴ tasks amortise its Python
#: overhead; a Dask task takes one or more: docs/architecture.md)
DEFAULT_CHUNK_TASKS = 10_000

#: leave out the last rows of every task (for evaluation: ``predict(..., holdout=N)``)
HOLDOUT = Param("holdout", 0, "Leave out the last N rows of every task (evaluate them with "
                "predict).", type=int, ge=0, metavar="N")
#: tasks per chunk of work, for the jobs that map a kernel over the chunks of a task store
CHUNK_TASKS = Param("chunk_tasks", DEFAULT_CHUNK_TASKS, "Tasks per chunk of work (a Dask "
                    "task takes one or more, sized from the data and the workers).", type=int,
                    gt=0)
#: the group of the store that holds the tasks (``PATH#GROUP`` names it on the command line)
GROUP = Param("group", None, "Group of the store that holds the tasks (default: its root).",
              type=str, optional=True, command_line=False)

class _Auto:
    """The condition of a :class:`Rule` that k is chosen from the data: 'auto', or not
    given (None)."""

    def __eq__(self, other):
        return other is None or other == "auto"

    __hash__ = None

    def __repr__(self):
        return "auto"


_AUTO = _Auto()


#: :func:`streamlsq.metalearn` (Algorithm 1)
METALEARN = Options(
    Param("k", None, "Number of components (the subspace's rank and the clusters), or 'auto' "
          "(the default, also when not given): chosen by held-out likelihood (writes "
          "OUT.k-curve.csv and .png beside the model, OUT without .zarr).",
          type=int, gt=0, choices=("auto",), optional=True),
    Param("k_max", None, "With --k auto (the default): the largest k tried (default min(d, 8, "
          "heavy tasks)).", type=int, gt=0, optional=True),
    Param("linkage", DEFAULT_LINKAGE, "Clustering of the heavy tasks (auto: average up to "
          f"{MAX_FULL_HEAVY:,} heavy tasks, else single).", type=str, choices=LINKAGES),
    Param("threshold", None, "With --rank R: cut the linkage at this distance (Δ²/2 for a "
          "known separation Δ) instead of at K clusters; the clusters are those the cut "
          "finds.", type=float, ge=0, optional=True),
    Param("rank", None, "With --threshold: the subspace's rank (without --threshold, --k K "
          "is both the rank and the clusters).", type=int, gt=0, optional=True),
    Param("splits", DEFAULT_SPLITS, "L: split pairs per heavy task (distances are medians "
          "over L).", type=int, gt=0),
    Param("whiten", False, "Whiten the features first (coefficients are mapped back to the "
          "raw features).", type=bool),
    Param("roles", "auto", "Task sets from the store's role variable or by rows per task.",
          type=str, choices=ROLES),
    Param("heavy_rows", None, "By rows: tasks with at least this many rows are also heavy "
          "(default: a rule on the task sizes, reported in the summary).", type=int, ge=2,
          optional=True),
    HOLDOUT,
    CHUNK_TASKS,
    Param("tile", TILE, "Heavy tasks per side of a distance tile.", type=int, ge=2),
    GROUP,
    Param("k_curve", False, "With k='auto' and an output: also write the curve k was chosen "
          "from beside the model store (OUT.k-curve.csv and .png).", type=bool,
          command_line=False),
    # the rules' lines name each option as the command line and Python both spell it (as
    # DROP_REMEDY does): metalearn refuses them from either, before any input is opened
    rules=[# one word, one thing: --k is the components (rank and clusters); with a cut at
           # a distance the clusters are the cut's, and --rank gives the subspace's rank
           Rule("threshold", excludes=("k",),
                message="--k (k=) does not go with --threshold (threshold=): the cut finds "
                        "the clusters; give the subspace's rank as --rank R (rank=R)"),
           Rule("threshold", needs={"rank": Rule.GIVEN},
                message="--threshold (threshold=) goes with --rank R (rank=R), the "
                        "subspace's rank (the cut then finds the clusters); without "
                        "--threshold, --k K is both the rank and the clusters"),
           Rule("rank", needs={"threshold": Rule.GIVEN},
                message="--rank (rank=) goes with --threshold T (threshold=T), a cut of the "
                        "linkage at a distance; without it, --k K is both the subspace's "
                        "rank and the clusters"),
           Rule("k_max", needs={"k": _AUTO},
                message="--k-max (k_max=) goes with --k auto (k='auto', the default), the "
                        "largest k it tries"),
           Rule("k_max", excludes=("threshold",),
                message="--k-max (k_max=) goes with --k auto (k='auto', the default), the "
                        "largest k it tries; --threshold (threshold=) cuts at a distance"),
           # the store's roles leave nothing for it to choose (re-test round 9)
           Rule("roles", "store", excludes=("heavy_rows",),
                message="--heavy-rows N (heavy_rows=N) goes with --roles rows "
                        "(roles='rows'), or auto on a store without 'role'; --roles store "
                        "takes the heavy tasks from the store's variable 'role'")],
)

#: :func:`streamlsq.fit_pooled` (one regression on the rows of all tasks)
POOLED = Options(HOLDOUT, CHUNK_TASKS, GROUP)

#: the relative size of --init perturbed's perturbation when none is given (paper E.5)
EM_DEFAULT_SCALE = 0.5

#: :func:`streamlsq.fit_em` (task-level EM); ``k`` has no default: it must be given
EM = Options(
    Param("k", None, "Number of components.", type=int, gt=0),
    Param("init", "perturbed", "Start at the store's truth, the truth perturbed (paper E.5), "
          "or at random.", type=str, choices=INITS),
    Param("scale", None, f"Relative size of the perturbation of --init perturbed (default "
          f"{EM_DEFAULT_SCALE}).", ge=0, optional=True),
    Param("iterations", 100, "Most EM iterations.", type=int, gt=0),
    Param("tol", 1e-8, "Stop when the log-likelihood changes by at most "
          "tol*|log-likelihood|.", ge=0),
    SEED.replace(default=None, optional=True, help="Seed of --init perturbed or random "
                 "(default 0)."),
    CHUNK_TASKS,
    Param("cache_bytes", None, "Keep the per-task statistics on the workers up to this size "
          "(default: a quarter of the workers' memory limits), else recompute them.",
          type=int, ge=0, optional=True, command_line=False),
    GROUP,
    rules=[Rule("scale", needs={"init": "perturbed"},
                message="--scale goes with --init perturbed (the size of its perturbation)"),
           Rule("init", "truth", excludes=("seed",),
                message="--seed goes with --init perturbed or random (--init truth starts "
                        "at the store's truth: no randomness)")],
)

#: the multi-task :func:`streamlsq.predict` (new tasks under a meta-learned model)
PREDICT = Options(
    Param("estimator", "bayes", "Posterior mean, most probable cluster, or per-task least "
          "squares.", type=str, choices=ESTIMATORS),
    HOLDOUT.replace(help="Hold out the last N rows of every task and report their squared "
                    "error."),
    Param("yhat", False, "Also write yhat (row,): the predicted target of every row of TASKS "
          "(the held-out rows are each task's last N).", type=bool),
    Param("new_rows", None, "A store of new covariates (X, task_ptr over the same tasks): "
          "write new_yhat (new_row,) for its rows.", type=str | os.PathLike, optional=True,
          metavar="PATH", requirement="a store's path or None"),
    CHUNK_TASKS,
    GROUP,
)
