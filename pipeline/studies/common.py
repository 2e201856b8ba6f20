"""What every study shares: the result object, the output folder, batches on the Dask cluster.

A study's Monte-Carlo work is cut into batches of a FIXED size (a constant of
the study, never derived from the number of workers); batch ``i`` draws its
numbers from ``numpy.random.default_rng([seed, tag, i])``; batches are mapped
over the Dask cluster and their results combined in batch order. So the tables
depend on the seed and the sizes only — the same on one worker or twenty.

The output folder is built under a temporary name and renamed into place when
every table, figure and ``summary.md`` is written; rerunning a study into its
own folder replaces it while it holds only files of the names the study declares
(:func:`~streamlsq.options.study.study_files`) that its ``study.json`` lists with their
digests; any other existing content, an empty folder of the user's too, is refused.

A study is a job of the run path (:class:`StudyJob` on :meth:`streamlsq.jobs.Run.execute`):
the run checks the options and the output folder, returns the study a resumed run had
already published, opens the checkpoint and the Dask client, times the work and
publishes the folder. A study's Monte-Carlo tables are passes of a run
(:func:`run_batches`).

With a checkpoint (``run_study_into(..., checkpoint=DIR, resume=...)``, ``streamlsq
study NAME --checkpoint DIR``) every finished batch is committed as it arrives, under
a name that includes a digest of its arguments, so a resumed run computes only the
batches still missing and ends with the same tables; the folder is removed once
the study is published.
"""

from __future__ import annotations

import contextvars
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from streamlsq import __version__
from streamlsq.errors import InputError, checked
from streamlsq.io.checkpoint import EntryCheckpoint, data_digest, fingerprint_digest
from streamlsq.io.location import is_url, not_a_url
from streamlsq.io.outputs import (
    OwnedTemporary,
    check_outside_stores,
    file_digest,
    folder_above,
    make_parents,
    publish,
    reclaim_leftovers,
    remove_made,
)
from streamlsq.jobs import Context, Job, Pass, Run
from streamlsq.kernels.recursions.params import Param
from streamlsq.options.study import EVERY_STUDY, STUDY, STUDY_OPTIONS, study_files
from streamlsq.runtime.progress import track_futures

__all__ = [
    "Batches",
    "StudyFolder",
    "StudyJob",
    "StudyOutput",
    "StudyResult",
    "batch_sizes",
    "check_count",
    "check_option",
    "check_options",
    "check_seed",
    "map_batches",
    "markdown",
    "run_batches",
    "run_study_into",
    "summary_frame",
]

MARKER = "study.json"
#: the checkpoint of the study being run in this context (None: no checkpoint)
_CHECKPOINT: contextvars.ContextVar[EntryCheckpoint | None] = contextvars.ContextVar(
    "streamlsq_study_checkpoint", default=None)


@dataclass
class StudyResult:
    """What a study run produced.

    ``tables``: name → tidy DataFrame (also written as ``<name>.csv``);
    ``figures``: name → path of the PNG; ``summary``: the markdown of
    ``summary.md``; ``params``: the settings used (sizes, seed, options);
    ``seconds``: wall time; ``n_workers``: workers of the Dask cluster it ran on.
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
    return checked(STUDY.param("seed"), seed)


def check_options(name: str, given: Mapping) -> dict:
    """The options of the study ``name`` (:data:`streamlsq.options.study.STUDY` and its
    own, :data:`~streamlsq.options.study.STUDY_OPTIONS`) from the keywords ``given`` of its
    ``run_<name>`` (its ``locals()``), checked and converted before any work: one line
    naming the first bad one."""
    options = STUDY + STUDY_OPTIONS[name]
    return options.check({key: given[key] for key in options.names})


def check_option(study: str, name: str, value):
    """``value`` of the option ``name`` of ``study`` checked by its declaration
    (:data:`~streamlsq.options.study.STUDY_OPTIONS`), a value being required (the study's
    default already chosen): InputError naming the option as the command line spells it."""
    return checked(STUDY_OPTIONS[study].param(name).replace(optional=False), value)


def check_count(option: str, value, minimum: int = 1) -> int:
    """An integer ≥ ``minimum`` that is not an option of a study (a study's own sizes, such
    as ``blocks``; an option is checked by its declaration, :func:`check_option`)."""
    return checked(Param(option, minimum, "A count of the study.", type=int, ge=minimum), value)


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
    """Run ``fn(*batches[i])`` on the Dask cluster for every batch; results in batch order.

    ``fn`` returns ``(n_items, value)``; ``sizes`` are the items per batch (for
    the progress bar, shown on a terminal only). The first failure cancels the
    rest and is raised.
    """
    token = uuid.uuid4().hex[:8]
    ckpt = _CHECKPOINT.get()
    names = [_batch_name(desc, i, fn, args) for i, args in enumerate(batches)]
    done = {i: ckpt.load(n) for i, n in enumerate(names) if ckpt is not None and n in ckpt}
    todo = [i for i in range(len(batches)) if i not in done]
    futures = [
        client.submit(fn, *batches[i], key=f"study-{desc}-{token}-{i}", pure=False)
        for i in todo
    ]
    commit = None if ckpt is None else (lambda j, res: ckpt.save(names[todo[j]], res))
    fresh = track_futures(client, futures, total=int(sum(sizes[i] for i in todo)), desc=desc,
                          unit=unit, enabled=progress, on_result=commit)
    done.update(zip(todo, fresh, strict=True))
    return [done[i][1] for i in range(len(batches))]


@dataclass(eq=False)
class Batches(Pass):
    """A study's Monte-Carlo table as a pass of a run: ``fn(*batches[i])`` for every batch
    (:func:`map_batches`); its value is the batches' values in batch order. Each batch is
    committed to the study's checkpoint as it arrives, so the pass is no step of its own."""

    fn: Callable
    batches: Sequence[tuple]
    sizes: Sequence[int]
    desc: str
    unit: str

    step = False

    @property
    def name(self) -> str:
        return "batches-" + "".join(ch if ch.isalnum() or ch in "-_." else "_"
                                    for ch in self.desc)

    def compute(self, ctx: Context) -> list:
        return map_batches(ctx.client, self.fn, self.batches, self.sizes, self.desc,
                           self.unit, ctx.progress)


def run_batches(fn: Callable, batches: Sequence[tuple], sizes: Sequence[int], desc: str,
                unit: str, *, client=None, scheduler: str | None = None,
                progress: bool | None = None) -> list:
    """:class:`Batches` run on the Dask ``client`` (or ``scheduler``; default the current
    client or an embedded cluster): the batches' values in batch order."""
    return Run(client=client, scheduler=scheduler, progress=progress).run_pass(
        Batches(fn, batches, sizes, desc, unit))


def _batch_name(desc: str, i: int, fn, args) -> str:
    """A checkpoint entry name for batch ``i``: a resumed run reuses it only for the very
    same function and arguments."""
    digest = data_digest((getattr(fn, "__qualname__", str(fn)), args))[:16]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in desc)
    return f"batch-{safe}-{i:05d}-{digest}"


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
    :func:`~streamlsq.kernels.studies.common.distribution_summary` (columns
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

    def __init__(self, out: str | os.PathLike, name: str, run_fingerprint: str | None = None):
        self.out = Path(out)
        self.name = name
        self.run_fingerprint = run_fingerprint
        typo = not_a_url(os.fspath(out), output=True)  # too few slashes: not a local folder
        if typo:
            raise InputError(typo)
        if is_url(os.fspath(out)):  # Path() would read s3://b/st as the local s3:/b/st
            raise InputError(f"{os.fspath(out)}: a study writes a local folder "
                             "(tables, figures, summary.md); an object store URL is not one: "
                             "name a local folder, and copy it to the store afterwards")
        check_outside_stores(self.out, "a study's folder", "--out")
        folder_above(self.out)  # a file where a folder is made: refused now, not when made
        reclaim_leftovers(self.out)  # a killed run's, also when this one is refused below
        self._check_existing()
        self.tables: dict[str, pd.DataFrame] = {}
        self.figures: dict[str, Path] = {}
        self.tmp: Path | None = None
        self._owned: OwnedTemporary | None = None

    def _check_existing(self) -> None:
        """Refuse, in one line, what is at ``out`` unless it is nothing or an earlier output of
        this study holding nothing but what that run wrote. A folder of the user's, even an
        empty one, is never replaced (its mode, group and ACLs would go with it)."""
        out = self.out
        if out.name in ("", ".", "..") or (out.is_dir() and not out.is_symlink()
                                           and not any(out.iterdir())):
            raise InputError(f"{out}: exists and was not written by streamlsq study; the study "
                             "writes a new folder of its own: name one inside it "
                             f"({os.path.join(out, 'st')}), or choose another --out")
        if out.is_symlink():  # publishing swaps the folder in where the link was
            raise InputError(f"{out}: is a symbolic link; streamlsq never writes through "
                             "or over a link: give the path it points to, or choose another "
                             "--out")
        if not out.exists():
            return
        if not out.is_dir():
            raise InputError(f"{out}: exists and is not a folder; choose another --out")
        if _study_of(out) != self.name:
            raise InputError(f"{out}: exists and is not an earlier output of study "
                             f"{self.name!r}; choose another --out")
        foreign, recorded, changed = _not_written(out, self.name)
        if foreign:  # replacing the folder would remove them
            more = len(foreign) - 1
            what = foreign[0] if not more else f"{foreign[0]} and {more} more"
            them = "them" if more else "it"
            if recorded and foreign[0] in changed:
                raise InputError(f"{out}: holds {what}, changed since streamlsq wrote "
                                 f"{'them' if len(changed) > 1 else 'it'}; move {them} or "
                                 "choose another --out")
            if recorded:
                raise InputError(f"{out}: holds {what}, which streamlsq did not write; move "
                                 f"{them} or choose another --out")
            raise InputError(f"{out}: holds {what}, which its {MARKER} (of an earlier "
                             f"streamlsq) records without a digest, so it cannot be told from "
                             f"a file of yours; move {them} (or remove the folder yourself) "
                             "or choose another --out")

    def __enter__(self) -> StudyFolder:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        reclaim_leftovers(self.out)
        self._owned = OwnedTemporary(self.out, "partial")
        self.tmp = self._owned.create()
        return self

    def __exit__(self, *exc) -> None:
        if self._owned is not None:
            self._owned.close()

    def _same_study(self, path: Path) -> bool:
        """What publication may replace at ``path``: checked again as when the run began
        (a user's file put there since is refused in the same line)."""
        self._check_existing()
        return True

    def _declared(self, file: str) -> None:
        if file not in study_files(self.name):  # a rerun would refuse it as the user's
            raise RuntimeError(f"study {self.name} writes {file}, which its declared outputs "
                               "(streamlsq.options.study.STUDY_OUTPUTS) do not name")

    def table(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        self._declared(f"{name}.csv")
        df.to_csv(self.tmp / f"{name}.csv", index=False)
        self.tables[name] = df
        return df

    def figure(self, name: str, fig) -> Path:
        self._declared(f"{name}.png")
        fig.savefig(self.tmp / f"{name}.png", dpi=120)
        self.figures[name] = self.out / f"{name}.png"
        return self.figures[name]

    def finish(self, summary: str, params: dict, seconds: float, n_workers: int,
               created: str | None = None) -> StudyResult:
        (self.tmp / "summary.md").write_text(summary)
        written = sorted(p.name for p in self.tmp.iterdir())
        meta = {
            "study": self.name,
            "params": params,
            "seconds": round(seconds, 3),
            "n_workers": n_workers,
            "tables": sorted(f"{k}.csv" for k in self.tables),
            "figures": sorted(f"{k}.png" for k in self.figures),
            # each file as written: a rerun replaces the folder only while each is unchanged
            "digests": {name: file_digest(self.tmp / name) for name in written},
            "streamlsq_version": __version__,
        }
        if self.run_fingerprint is not None:
            meta["run_fingerprint"] = self.run_fingerprint
        if created is not None:
            meta["created"] = created
        (self.tmp / MARKER).write_text(json.dumps(meta, indent=2, default=_jsonable) + "\n")
        # replaces only an earlier output of this study (checked when the folder was made)
        publish(self._owned, self.out, overwrite=True, ours=self._same_study)
        self.tmp = None
        return StudyResult(self.name, self.out, dict(self.tables), dict(self.figures), summary,
                           params, seconds, n_workers)


@dataclass
class StudyOutput:
    """What a study computed, before it is written: tables (name → tidy DataFrame),
    figures (name → matplotlib Figure), the markdown summary and the settings used; the
    workers it ran on and the run's attributes (``attrs``: the provenance, the
    ``run_fingerprint``), which the run adds."""

    tables: dict[str, pd.DataFrame]
    figures: dict
    summary: str
    params: dict
    n_workers: int = 0
    attrs: dict = field(default_factory=dict)


def _not_written(out: Path, study: str) -> tuple[list[str], bool, set[str]]:
    """The entries of an earlier output of ``study`` that it cannot be shown to have written,
    which replacing the folder would remove, whether its ``study.json`` records digests, and
    which of them the record lists with another digest (a file the user changed since).
    An entry is the study's when it is a file of a name this study writes (its declared outputs,
    :func:`~streamlsq.options.study.study_files`) that the record lists with the digest of its
    present bytes: a user's file put there since, or named in an edited record with its true
    digest, is not. A record of an earlier version (no digests) proves nothing: every entry
    but the record is named."""
    try:
        meta = json.loads((out / MARKER).read_text())
        digests = meta.get("digests") if isinstance(meta, dict) else None
    except (OSError, ValueError):
        digests = None
    recorded = isinstance(digests, dict)
    names = study_files(study)
    changed: set[str] = set()

    def ours(path: Path) -> bool:
        if path.name == MARKER:
            return path.is_file() and not path.is_symlink()
        if not recorded or path.name not in names or path.is_symlink() or \
                not path.is_file():
            return False
        try:
            same = digests.get(path.name) == file_digest(path)
        except OSError:
            return False
        if not same and isinstance(digests.get(path.name), str):
            changed.add(path.name)
        return same

    return sorted(p.name for p in out.iterdir() if not ours(p)), recorded, changed


def _study_of(path: Path) -> str | None:
    try:
        return json.loads((Path(path) / MARKER).read_text()).get("study")
    except (OSError, ValueError, AttributeError):
        return None


def published_study(out, name: str, run_fingerprint: str) -> StudyResult | None:
    """The study ``name`` already published in ``out`` by the run ``run_fingerprint``, read
    back from its folder (a resumed run that had finished), else None."""
    out = Path(out)
    try:
        meta = json.loads((out / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("study") != name or meta.get("run_fingerprint") != run_fingerprint:
        return None
    tables = {f[: -len(".csv")]: pd.read_csv(out / f) for f in meta.get("tables", [])}
    figures = {f[: -len(".png")]: out / f for f in meta.get("figures", [])}
    summary = (out / "summary.md").read_text() if (out / "summary.md").exists() else ""
    result = StudyResult(name, out, tables, figures, summary, meta.get("params", {}),
                         float(meta.get("seconds", 0.0)), int(meta.get("n_workers", 0)))
    result.extra["already_complete"] = True
    return result


@dataclass(eq=False)
class StudyJob(Job):
    """One study as a job of the run path: ``make(client, progress)`` computes its
    :class:`StudyOutput` on the run's client, which the run publishes as the study's
    folder (:class:`StudyFolder`). ``identity``: what identifies the run when it is resumed
    (its name, its options); batches are also matched by their arguments."""

    study: str
    make: Callable
    identity: dict
    made: list = field(default_factory=list)  # the folders above the output this run made

    checkpoint_variables = ()

    @property
    def name(self) -> str:
        return f"study {self.study}"

    @property
    def checkpoint_kind(self) -> str:
        return f"study-{self.study}"

    def open(self, run: Run) -> list:
        return []  # a study draws its data

    def fingerprint(self) -> dict:
        return dict(self.identity)

    def fingerprint_options(self, fingerprint: dict) -> dict[str, dict]:
        """What every study takes (``--quick``, ``--seed``) and the study's own options
        (the entry ``options``, their JSON text: ``--replicates``), as the command line
        spells them."""
        shaped = {key: {STUDY.param(key).option: value} for key, value in fingerprint.items()
                  if key in STUDY}
        try:
            own = json.loads(fingerprint.get("options") or "{}")
        except (TypeError, ValueError):
            own = None
        if isinstance(own, dict) and all(key in EVERY_STUDY for key in own):
            shaped["options"] = {EVERY_STUDY.param(key).option: value
                                 for key, value in own.items()}
        return shaped

    def finished(self, run: Run, fingerprint: dict) -> StudyResult | None:
        return published_study(run.out, self.study, fingerprint_digest(fingerprint))

    def prepare(self, run: Run, inputs: list) -> None:
        StudyFolder(run.out, self.study)  # refuses a folder that is not an earlier run's
        # the folders above it, made once it is known to be writable there; a failed run
        # takes them back (run_study_into)
        self.made = make_parents(run.out)

    def compute(self, ctx: Context) -> StudyOutput:
        token = _CHECKPOINT.set(ctx.checkpoint)  # map_batches commits every batch to it
        try:
            output = self.make(ctx.client, ctx.progress)
        finally:
            _CHECKPOINT.reset(token)
        output.n_workers = n_workers_of(ctx.client)
        return output

    def publish(self, run: Run, result: StudyOutput, inputs: list) -> StudyResult:
        folder = StudyFolder(run.out, self.study, result.attrs.get("run_fingerprint"))
        with folder:
            for key, table in result.tables.items():
                folder.table(key, table)
            for key, figure in result.figures.items():
                folder.figure(key, figure)
            return folder.finish(result.summary, result.params, run.seconds, result.n_workers,
                                 created=result.attrs.get("created"))


def run_study_into(name: str, out: str | os.PathLike, compute: Callable, *, client=None,
                   scheduler: str | None = None, n_workers: int | None = None,
                   progress: bool | None = None, checkpoint=None, resume: bool = False,
                   fingerprint: dict | None = None) -> StudyResult:
    """Run one study, a :class:`StudyJob` on the run path: check ``out`` first, then
    ``compute(client, progress)`` on a Dask client, then publish the :class:`StudyOutput`
    it returns into ``out`` (tables as CSV, figures as PNG, ``summary.md`` and
    ``study.json``), atomically.

    ``client``, ``scheduler``: a Dask client or a scheduler address (default: the
    ``DASK_SCHEDULER_ADDRESS`` variable, the current client, or an embedded
    LocalCluster of ``n_workers`` workers); ``progress``: show progress bars (default:
    when attached to a terminal); ``checkpoint``, ``resume``: commit every batch to this
    folder and continue a killed run from it (``fingerprint``: what identifies the run,
    by default the study's name; batches are also matched by their arguments). Every
    ``run_<study>`` function passes its ``**runtime`` keywords here.
    """
    job = StudyJob(name, compute, dict(fingerprint or {"study": name}))
    run = Run(out, client=client, scheduler=scheduler, n_workers=n_workers, progress=progress,
              checkpoint=checkpoint, resume=resume)
    try:
        return run.execute(job)
    except BaseException:  # the folders made above ``out`` go with the failed run
        remove_made(job.made)
        raise


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def n_workers_of(client) -> int:
    return len(client.scheduler_info()["workers"])


def markdown(*sections: Sequence[str]) -> str:
    """The text of a ``summary.md``: its sections (each a list of lines) one after the other,
    a blank line between two."""
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def fmt(x: float, digits: int = 3) -> str:
    """A number for the summaries: fixed for moderate magnitudes, scientific otherwise."""
    x = float(x)
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{max(digits - 1, 1)}e}"
