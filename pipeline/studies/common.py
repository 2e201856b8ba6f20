"""What every study shares: the result object, the output folder, batches on the cluster.

A study's Monte-Carlo work is cut into batches of a FIXED size (a constant of
the study, never derived from the number of workers); batch ``i`` draws its
numbers from ``numpy.random.default_rng([seed, tag, i])``; batches are mapped
over the Dask cluster and their results combined in batch order. So the tables
depend on the seed and the sizes only — the same on one worker or twenty.

The output folder is built under a temporary name and renamed into place when
every table, figure and ``summary.md`` is written; rerunning a study into its
own folder replaces it, any other existing content is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from streamlsq import __version__
from streamlsq.errors import InputError, check_int
from streamlsq.runtime.progress import track_futures

__all__ = [
    "StudyFolder",
    "StudyOutput",
    "StudyResult",
    "batch_sizes",
    "check_count",
    "check_seed",
    "map_batches",
    "run_study_into",
    "summary_frame",
]

MARKER = "study.json"


@dataclass
class StudyResult:
    """What a study run produced.

    ``tables``: name → tidy DataFrame (also written as ``<name>.csv``);
    ``figures``: name → path of the PNG; ``summary``: the markdown of
    ``summary.md``; ``params``: the settings used (sizes, seed, options);
    ``seconds``: wall time; ``n_workers``: workers of the cluster it ran on.
    """

    name: str
    out: Path
    tables: dict[str, pd.DataFrame]
    figures: dict[str, Path]
    summary: str
    params: dict
    seconds: float
    n_workers: int
    extra: dict = field(default_factory=dict)

    def _repr_markdown_(self) -> str:  # a notebook shows the summary
        return self.summary


def check_seed(seed) -> int:
    """The seed as a non-negative int (InputError otherwise)."""
    return check_int("--seed", seed, 0)


def check_count(option: str, value, minimum: int = 1) -> int:
    """An integer option ≥ ``minimum`` (InputError naming ``option`` otherwise)."""
    return check_int(option, value, minimum)


def batch_sizes(total: int, batch_size: int) -> list[int]:
    """``total`` items cut into batches of ``batch_size`` (the last one may be smaller)."""
    full, rest = divmod(int(total), int(batch_size))
    return [int(batch_size)] * full + ([rest] if rest else [])


def map_batches(
    client,
    fn: Callable,
    batches: Sequence[tuple],
    sizes: Sequence[int],
    desc: str,
    unit: str,
    progress: bool | None = None,
) -> list:
    """Run ``fn(*batches[i])`` on the cluster for every batch; results in batch order.

    ``fn`` returns ``(n_items, value)``; ``sizes`` are the items per batch (for
    the progress bar, shown on a terminal only). The first failure cancels the
    rest and is raised.
    """
    token = uuid.uuid4().hex[:8]
    futures = [
        client.submit(fn, *args, key=f"study-{desc}-{token}-{i}", pure=False)
        for i, args in enumerate(batches)
    ]
    results = track_futures(client, futures, total=int(sum(sizes)), desc=desc, unit=unit,
                            enabled=progress)
    return [value for _, value in results]


def summary_frame(
    arrays: dict[str, np.ndarray],
    labels: Sequence[str],
    steps: Sequence[int],
    label_name: str = "method",
    step_name: str = "block",
    extra: dict[str, Sequence] | None = None,
) -> pd.DataFrame:
    """Long table of run statistics: one row per (label, step, metric).

    ``arrays`` maps a metric to values (runs, len(labels), len(steps)); the
    statistics over runs come from the kernel's
    :func:`~streamlsq.kernels.study_common.distribution_summary` (columns
    ``mean, std, median, p05, p95``). ``extra`` adds per-step columns (e.g.
    rows seen).
    """
    from streamlsq.kernels.studies.common import distribution_summary

    frames = []
    for metric, values in arrays.items():
        s = distribution_summary(values, axis=0)
        for i, label in enumerate(labels):
            part = {label_name: label, step_name: list(steps), "metric": metric}
            part.update({k: list(v) for k, v in (extra or {}).items()})
            part.update({k: s[k][i] for k in ("mean", "std", "median", "p05", "p95")})
            frames.append(pd.DataFrame(part))
    return pd.concat(frames, ignore_index=True)


class StudyFolder:
    """The output folder of one study run, written under a temporary name.

    ``table(name, df)`` writes ``name.csv``, ``figure(name, fig)`` writes
    ``name.png`` (a :class:`matplotlib.figure.Figure`, rendered by Agg),
    ``finish(...)`` writes ``summary.md`` and ``study.json`` and renames the
    folder into place. Refuses (InputError, before any work) an ``out`` that
    exists and is neither empty nor an earlier run of the same study.
    """

    def __init__(self, out: str | os.PathLike, name: str):
        self.out = Path(out)
        self.name = name
        if self.out.exists():
            if not self.out.is_dir():
                raise InputError(f"{self.out}: exists and is not a folder; choose another --out")
            marker = self.out / MARKER
            if any(self.out.iterdir()):
                previous = None
                if marker.exists():
                    try:
                        previous = json.loads(marker.read_text()).get("study")
                    except (OSError, ValueError):
                        previous = None
                if previous != name:
                    raise InputError(
                        f"{self.out}: exists and is not an earlier output of study {name!r}; "
                        "choose another --out"
                    )
        self.tables: dict[str, pd.DataFrame] = {}
        self.figures: dict[str, Path] = {}
        self.tmp: Path | None = None

    def __enter__(self) -> StudyFolder:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.with_name(f".{self.out.name}.partial-{uuid.uuid4().hex[:8]}")
        self.tmp.mkdir()
        return self

    def __exit__(self, *exc) -> None:
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)

    def table(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        df.to_csv(self.tmp / f"{name}.csv", index=False)
        self.tables[name] = df
        return df

    def figure(self, name: str, fig) -> Path:
        fig.savefig(self.tmp / f"{name}.png", dpi=120)
        self.figures[name] = self.out / f"{name}.png"
        return self.figures[name]

    def finish(self, summary: str, params: dict, started: float, n_workers: int) -> StudyResult:
        seconds = time.perf_counter() - started
        (self.tmp / "summary.md").write_text(summary)
        meta = {
            "study": self.name,
            "params": params,
            "seconds": round(seconds, 3),
            "n_workers": n_workers,
            "tables": sorted(f"{k}.csv" for k in self.tables),
            "figures": sorted(f"{k}.png" for k in self.figures),
            "streamlsq_version": __version__,
        }
        (self.tmp / MARKER).write_text(json.dumps(meta, indent=2, default=_jsonable) + "\n")
        if self.out.exists():
            trash = self.out.with_name(f".{self.out.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(self.out, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(self.tmp, self.out)
        self.tmp = None
        return StudyResult(self.name, self.out, dict(self.tables), dict(self.figures), summary,
                           params, seconds, n_workers)


@dataclass
class StudyOutput:
    """What a study computed, before it is written: tables (name → tidy DataFrame),
    figures (name → matplotlib Figure), the markdown summary and the settings used."""

    tables: dict[str, pd.DataFrame]
    figures: dict
    summary: str
    params: dict


def run_study_into(name: str, out: str | os.PathLike, compute: Callable, *, client=None,
                   scheduler: str | None = None, n_workers: int | None = None,
                   progress: bool | None = None) -> StudyResult:
    """Run one study: check ``out`` first, then ``compute(client, progress)`` on a Dask
    client, then publish the :class:`StudyOutput` it returns into ``out`` (tables as
    CSV, figures as PNG, ``summary.md`` and ``study.json``), atomically.

    ``client``, ``scheduler``: a Dask client or a scheduler address (default: the
    ``DASK_SCHEDULER_ADDRESS`` variable, the current client, or an embedded
    LocalCluster of ``n_workers`` workers); ``progress``: show progress bars (default:
    when attached to a terminal). Every ``run_<study>`` function passes its
    ``**runtime`` keywords here.
    """
    from streamlsq.runtime.client import dask_client

    started = time.perf_counter()
    folder = StudyFolder(out, name)
    with dask_client(client, scheduler, n_workers=n_workers) as cl:
        output = compute(cl, progress)
        workers = n_workers_of(cl)
    with folder:
        for key, table in output.tables.items():
            folder.table(key, table)
        for key, figure in output.figures.items():
            folder.figure(key, figure)
        return folder.finish(output.summary, output.params, started, workers)


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def n_workers_of(client) -> int:
    return len(client.scheduler_info()["workers"])


def fmt(x: float, digits: int = 3) -> str:
    """A number for the summaries: fixed for moderate magnitudes, scientific otherwise."""
    x = float(x)
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{max(digits - 1, 1)}e}"
