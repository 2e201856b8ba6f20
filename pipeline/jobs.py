"""One run path for every job: a :class:`Run` (where, with what) executes a :class:`Job`
(what to read, compute and write) in one order.

Every public function that reads data and writes a result — ``fit_stream``,
``fit_interleaved``, ``predict_stream``, ``metalearn``, ``fit_em``, ``predict`` — is a
short job definition handed to a run::

    options checked → inputs opened → fingerprint → checkpoint → compute
        → provenance and attributes → publish

:meth:`Run.execute` is that order, once. A job that needs more passes over its inputs once
its first result is known (a robust covariance needs the final coefficients; an IRLS fit
one pass per iteration) asks its run for them: :meth:`Context.run_pass` runs a
:class:`Pass` on the run's client and, when the run is checkpointed, commits its state as
a step of the checkpoint, so that ``--resume`` does not run it again.

A job says what is particular to it (the hooks of :class:`Job`); the run does everything
they share: refusing ``--resume`` without ``--checkpoint``, returning the published result
of a run resumed after it finished, checking the output and the checkpoint against the
inputs before any work, opening the checkpoint and the Dask client, timing, the provenance
attributes of every result store, and the atomic publication
(``docs/architecture.md#run-path``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import zarr
from distributed import Client

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import (
    CheckpointFolder,
    EntryCheckpoint,
    check_checkpoint_parent,
    fingerprint_digest,
    finished_result,
    remove_finished,
)
from streamlsq.io.location import check_storage_options, locate, options_for
from streamlsq.io.outputs import beside_path, check_apart, reclaim_leftovers
from streamlsq.io.provenance import provenance
from streamlsq.io.relay import Relay, in_process_memory
from streamlsq.io.results import (
    atomic_store,
    for_workers,
    open_result,
    prepare_output,
    seal,
    write_result,
)
from streamlsq.options import Options
from streamlsq.options.run import RUN
from streamlsq.runtime.client import dask_client

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = ["Context", "Job", "Pass", "Run", "RunOptions"]


class RunOptions(TypedDict, total=False):
    """The keywords every job function takes besides ``out`` (the fields of :class:`Run`):
    what a run does around the job, not what the job computes.

    Attributes
    ----------
    overwrite : bool
        Replace an existing result at ``out`` (only a store streamlsq wrote).
    checkpoint : str or os.PathLike or None
        Commit progress to this folder (a new or empty folder, or a streamlsq checkpoint);
        removed once the result is published. Jobs that cannot resume refuse it.
    resume : bool
        Continue a killed run from ``checkpoint``; after the result was published, return
        it (attribute ``already_complete``).
    client : distributed.Client or None
        The Dask client to run on (default: the current client).
    scheduler : str or None
        The address of a running Dask scheduler (or ``DASK_SCHEDULER_ADDRESS``); without a
        client or scheduler an embedded LocalCluster is started for the call.
    progress : bool or None
        Show progress bars (default: when standard error is a terminal).
    storage_options : dict or None
        Options of the fsspec filesystem of URLs given as inputs or output (credentials,
        ``endpoint_url``, …).
    n_workers : int or None
        Workers of the embedded LocalCluster started for the call (default: sized for the
        data and the machine); moot with a client or a scheduler.
    """

    overwrite: bool
    checkpoint: str | os.PathLike | None
    resume: bool
    client: Client | None
    scheduler: str | None
    progress: bool | None
    storage_options: dict | None
    n_workers: int | None


class Pass:
    """One more pass of a run over its inputs, a step of the run: :meth:`compute` gets the
    run's :class:`Context` (its client, its progress setting) and returns the pass's
    *state*, what :meth:`value` turns into what the job gets back.

    When the run is checkpointed the state is committed as a step of the checkpoint (under
    the pass's position in the run and its :attr:`name`), and a resumed run takes it from
    there instead of running the pass again. The state is data only: a mapping of names to
    NumPy arrays or numbers (stored as ``.npz``, read without pickle). Run a pass with
    :meth:`Context.run_pass` inside a job, or :meth:`Run.run_pass` on its own.
    """

    #: what the pass is (a word or two, no spaces): its step's name in a checkpoint
    name: str = "pass"
    #: whether a checkpointed run commits the pass's state as a step (False: the pass
    #: commits its own pieces of work as it goes, as a study's batches, and its state
    #: need not be arrays)
    step: bool = True

    def compute(self, ctx: Context) -> Mapping[str, Any]:
        """The pass itself, on ``ctx.client``: its state (a mapping of arrays or numbers)."""
        raise NotImplementedError

    def value(self, state: Mapping[str, Any]) -> Any:
        """What the job gets back from the state (computed now or restored); the state
        itself by default."""
        return state


@dataclass
class Context:
    """What a job's :meth:`Job.compute` works with: the Dask ``client``, the open
    ``checkpoint`` (None without ``--checkpoint``), whether to show ``progress``, and for a
    job that writes its result chunk by chunk the temporary output ``store`` its Dask tasks
    write into (None when the job returns its result in memory). ``passes`` names the
    passes the job ran (:meth:`run_pass`), in order, those restored from the checkpoint
    included."""

    client: Client
    checkpoint: CheckpointFolder | None = None
    progress: bool | None = None
    store: Any = None
    passes: list[str] = field(default_factory=list)
    relay: Relay | None = None

    def submit(self, fn, *args, key: str, **kwargs):
        """``client.submit`` of a Dask task that may be given :attr:`store`: on a store the
        workers cannot reach (``memory://``) its writes travel back and are written here
        (:class:`~streamlsq.io.relay.Relay`)."""
        if self.relay is not None:
            return self.relay.submit(self.client, fn, *args, key=key, **kwargs)
        return self.client.submit(fn, *args, key=key, **kwargs)

    def run_pass(self, step: Pass) -> Any:
        """Run the pass ``step`` on this context's client and return its value; with a
        checkpoint, its state is committed as a step (and a resumed run restores it
        instead of running it again)."""
        key = f"{len(self.passes):03d}-{step.name}"
        checkpoint = self.checkpoint if step.step else None
        if checkpoint is not None and checkpoint.has_step(key):
            state = checkpoint.load_step(key)
        else:
            state = step.compute(self)
            if checkpoint is not None:
                checkpoint.save_step(key, _pass_state(step, state))
        self.passes.append(step.name)
        return step.value(state)


def _pass_state(step: Pass, state) -> dict[str, np.ndarray]:
    """The state of ``step`` as arrays of numbers (what a checkpoint step holds)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"pass {step.name!r}: its state must be a mapping of arrays, "
                        f"got {type(state).__name__}")
    arrays = {str(k): np.asarray(v) for k, v in state.items()}
    kinds = {k: a.dtype for k, a in arrays.items() if a.dtype.kind not in "biufc"}
    if kinds:
        raise TypeError(f"pass {step.name!r}: its state holds {kinds}: only numbers")
    return arrays


class Job:
    """What one public function reads, computes and writes; :meth:`Run.execute` runs it.

    A job declares its options once, as data (:attr:`options`, the same
    :class:`~streamlsq.kernels.recursions.params.Param` kind the recursions use), holds them
    as attributes of the same names, and fills in the hooks below. The run checks every
    declared option and rule (:meth:`check_options`) before any input is opened or client
    started. The defaults suit a job that reads stores, cannot be checkpointed and returns
    a Dataset that the run publishes with :func:`~streamlsq.io.results.write_result`.
    """

    #: the options this job takes (besides the run's), declared once
    #: (:mod:`streamlsq.options`): checked by :meth:`check_options`, turned into the
    #: command's options, and equal to the keywords of the job's public function
    options: Options = Options()

    #: what made the result: its ``method`` attribute (``"metalearn"``, ``"predict"``, …; a
    #: stream fit names its recursion)
    name: str = "job"
    #: the kind of checkpoint this job commits to (None: the job takes no ``--checkpoint``)
    checkpoint_kind: str | None = None
    #: the input variables whose chunks committed work reads (checked when resuming)
    checkpoint_variables: tuple[str, ...] = ("X", "y")
    #: True: :meth:`compute` writes the result's arrays chunk by chunk into
    #: ``Context.store`` (a result larger than memory); False: it returns the Dataset
    writes_chunks: bool = False

    def check_options(self) -> None:
        """Check every declared option (and the rules between them) and keep the values
        converted (an ``int`` for an integer option); :class:`~streamlsq.errors.InputError`
        naming the first bad one."""
        checked = self.options.check({name: getattr(self, name) for name in self.options.names})
        for name, value in checked.items():
            setattr(self, name, value)

    def check(self) -> None:
        """Refuse what the declarations cannot say (a value that depends on the recursion,
        the inputs' layout), before any input is opened."""

    def open(self, run: Run) -> list:
        """Open and validate the inputs (stores, earlier results); return the sources the
        result is computed from (the output and the checkpoint must stay apart from them)."""
        raise NotImplementedError

    def fingerprint(self) -> dict | None:
        """What identifies this run when it is resumed (None: it is never resumed)."""
        return None

    def fingerprint_options(self, fingerprint: dict) -> dict[str, dict]:
        """The options that shape each entry of ``fingerprint``, with their values, in the
        command line's spelling (``{"chunk_tasks": {"--chunk-tasks": 50}}``): a refused
        resume names those that changed, with both values. By default each entry named
        as a declared option, with its value in the fingerprint."""
        return {key: {self.options.param(key).option: value}
                for key, value in fingerprint.items() if key in self.options}

    def parameters(self) -> dict:
        """The settings recorded as the result's ``parameters`` attribute."""
        return {}

    def input_roles(self) -> list[str] | None:
        """The roles of the inputs when there are several (the ``inputs`` attribute)."""
        return None

    def beside(self) -> dict:
        """Files written beside the output, which belong to it: suffix (``.k-curve.csv``) →
        ``write(result, path)``. They are checked with the output before any work and
        published with it (:func:`~streamlsq.io.results.atomic_store`); none by default."""
        return {}

    def data_bytes(self) -> int | None:
        """Bytes the job reads, when known (an embedded cluster for small inputs runs its
        workers as threads of this process)."""
        return None

    #: whether the job's tasks read and compute as fast on worker threads as on worker
    #: processes (their decoding and BLAS calls release the GIL; measured), so that on a
    #: machine of few cores its embedded cluster runs threads whatever the input's size
    #: (:func:`~streamlsq.runtime.client.embedded_workers`)
    threads_keep_up: bool = False

    def new_checkpoint(self, directory, fingerprint: dict, resume: bool, inputs: list):
        """The (unopened) checkpoint folder of this job; by default one entry per committed
        piece of work (:class:`~streamlsq.io.checkpoint.EntryCheckpoint`)."""
        return EntryCheckpoint(directory, fingerprint, resume=resume, inputs=inputs,
                               variables=self.checkpoint_variables, kind=self.checkpoint_kind)

    def finished(self, run: Run, fingerprint: dict | None):
        """What a run with this ``fingerprint`` published at ``run.out`` before a kill, with
        ``already_complete`` (None if nothing: the run continues); a resumed run returns it.
        By default a result store (:func:`~streamlsq.io.checkpoint.finished_result`)."""
        return finished_result(run.out, fingerprint)

    def prepare(self, run: Run, inputs: list) -> None:
        """Check, before any work, that the result can be published at ``run.out`` (which
        is not None); by default a store (and the files beside it), apart from the inputs
        (:func:`~streamlsq.io.results.prepare_output`)."""
        prepare_output(run.out, run.overwrite, inputs=inputs,
                       storage_options=run.storage_options, beside=self.beside())

    def annotate(self, result, provenance: dict, run: dict) -> None:
        """Put the run's attributes on the job's ``result``: by default its ``attrs`` are
        the ``provenance`` (the attributes every result has), then the job's own, then the
        ``run``'s own (``run_fingerprint``, ``passes``: of the run that made it, never of
        an earlier one whose attributes the job kept)."""
        own = dict(result.attrs)
        result.attrs.clear()
        result.attrs.update(provenance)
        result.attrs.update(own)
        result.attrs.update(run)

    def publish(self, run: Run, result, inputs: list):
        """Publish ``result`` (the computed, annotated result of a job that does not write
        its chunks) at ``run.out``, atomically; returns what :meth:`Run.execute` returns.
        By default a result store (:func:`~streamlsq.io.results.write_result`) with the
        files beside it, and the Dataset is returned."""
        beside = {suffix: functools.partial(write, result)
                  for suffix, write in self.beside().items()}
        write_result(result, run.out, run.overwrite, inputs=inputs,
                     storage_options=run.storage_options, beside=beside)
        return result

    def published(self, out, storage_options: dict | None) -> xr.Dataset:
        """The store a job that ``writes_chunks`` published, opened for its caller: a result,
        checked (:func:`~streamlsq.io.results.open_result`), unless the job writes data of
        another kind. ``storage_options`` are the run's, which may reach its remote inputs
        alone: passed on for an output that is a URL only (open_result refuses them for a
        local path)."""
        return open_result(out, storage_options=options_for(out, storage_options))

    def compute(self, ctx: Context) -> xr.Dataset:
        """The work itself, on the cluster: returns the result (without the provenance
        attributes, which the run adds); a job that ``writes_chunks`` writes its arrays
        into ``ctx.store`` and returns a Dataset holding the attributes to add (and, when
        there is no output, the arrays)."""
        raise NotImplementedError


@dataclass
class Run:
    """Where a job's result goes and what it runs with: the output ``out`` (a path, an
    fsspec URL or a zarr store object; None: in memory only) and ``overwrite``; the
    ``checkpoint`` folder and ``resume``; the Dask ``client`` or ``scheduler`` address
    (default: the current client or an embedded cluster); ``progress`` bars; the
    ``storage_options`` of the URLs named as inputs or output; the ``n_workers`` of an
    embedded cluster. After a run, ``seconds`` is the time of its computation and
    ``passes`` the number of passes its job ran (:meth:`Context.run_pass`)."""

    out: Any = None
    overwrite: bool = False
    checkpoint: str | os.PathLike | None = None
    resume: bool = False
    client: Client | None = None
    scheduler: str | None = None
    progress: bool | None = None
    storage_options: dict | None = None
    n_workers: int | None = None
    seconds: float = field(default=0.0, init=False)
    passes: int = field(default=0, init=False)
    #: the inputs opened (:meth:`open_input`), as given: what ``storage_options`` apply to
    opened: list = field(default_factory=list, init=False, repr=False)

    @classmethod
    def split(cls, out, options: dict) -> tuple[Run, dict]:
        """A run to ``out`` with the run options among ``options``, and the other options
        (a fit's recursion parameters)."""
        names = {f.name for f in fields(cls) if f.init}
        run = cls(out, **{k: v for k, v in options.items() if k in names})
        return run, {k: v for k, v in options.items() if k not in names}

    def open_input(self, kind: str, data, *args, **kwargs):
        """Open and validate one input of a job with this run's ``storage_options``: every
        job opens every input through here, so a URL is read where the options say
        (credentials, ``endpoint_url``; the environment fills in only what they leave out).
        ``kind`` names the opener, which gets ``data`` and the other arguments as they are:

        - ``"stream"``: rows of a stream store or a table
          (:func:`~streamlsq.io.sources.open_stream`);
        - ``"tasks"``: a multi-task store (:func:`~streamlsq.io.tasks.open_tasks`);
        - ``"result"``: a published result (:func:`~streamlsq.io.results.open_result`);
        - ``"table"``: a table itself, not yet read as rows
          (:func:`~streamlsq.io.tables.open_table`).

        Examples
        --------
        >>> import tempfile, streamlsq
        >>> from streamlsq.jobs import Run
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=1_000, n_features=2)
        >>> Run().open_input("stream", path).n_rows
        1000
        >>> tmp.cleanup()
        """
        if kind == "stream":
            from streamlsq.io.sources import open_stream as opener
        elif kind == "tasks":
            from streamlsq.io.tasks import open_tasks as opener
        elif kind == "result":
            opener = open_result
        elif kind == "table":
            from streamlsq.io.tables import open_table as opener
        else:
            raise ValueError(f"no input of kind {kind!r}: 'stream', 'tasks', 'result' or "
                             "'table'")
        if kind in ("stream", "tasks"):
            data, args, kwargs = _group_of_path(data, args, kwargs)
        self.opened.append(data)
        # a local input of a run that also reads or writes URLs takes none of their options
        return opener(data, *args, storage_options=options_for(data, self.storage_options),
                      **kwargs)

    def execute(self, job: Job) -> xr.Dataset:
        """Run ``job`` in the one order of every job; returns its result (the published
        store, opened, for a job that writes its chunks; else the Dataset)."""
        self._check_options(job)
        job.check()
        inputs = job.open(self)
        self._check_storage_options()
        fingerprint = job.fingerprint()
        if self.resume:  # the run being resumed may have published its result before a kill
            done = job.finished(self, fingerprint)
            if done is not None:  # killed between publication and clean-up: finish that
                reclaim_leftovers(self.out)
                remove_finished(job.new_checkpoint(self.checkpoint, fingerprint, True, inputs))
                return done
        self._prepare_output(job, inputs)
        with self._open_checkpoint(job, fingerprint, inputs) as checkpoint:
            if job.writes_chunks and self.out is not None:
                return self._compute_into_store(job, inputs, checkpoint)
            ds = self._compute(job, inputs, checkpoint, store=None)
            self._add_attrs(job, ds, inputs, fingerprint)
            if self.out is not None:
                ds = job.publish(self, ds, inputs)
                if checkpoint is not None:
                    checkpoint.remove()
        return ds

    def run_pass(self, step: Pass) -> Any:
        """The pass ``step`` on its own (no inputs opened, no output, no checkpoint): run on
        this run's client (or scheduler, or an embedded cluster) and its value returned."""
        started = time.perf_counter()
        with self._client(None) as client:
            ctx = Context(client, None, self.progress)
            value = ctx.run_pass(step)
        self.seconds = time.perf_counter() - started
        self.passes = len(ctx.passes)
        return value

    # -- the steps ---------------------------------------------------------------------
    def _check_options(self, job: Job) -> None:
        """The run's options, then the job's, before any input is opened or client started."""
        RUN.check({name: getattr(self, name) for name in RUN.names})
        for name, value in (("--out", self.out), ("--checkpoint", self.checkpoint)):
            if isinstance(value, str) and not value.strip():  # "" would be the current folder
                raise InputError(f"{name} is empty: name the path to write")
        where = locate(self.checkpoint) if self.checkpoint is not None else None
        if where is not None and where.remote:  # never a folder ./s3:/bucket/... instead
            raise InputError(f"--checkpoint {where.shown or where.url}: a checkpoint is a local "
                             "folder (it is locked with flock); name a local path")
        if self.checkpoint is not None and job.checkpoint_kind is None:
            raise InputError(f"{job.name} takes no --checkpoint: it is not resumable")
        job.check_options()

    def _check_storage_options(self) -> None:
        """Refuse ``storage_options`` when every input and the output are local paths: they
        apply to URLs only, and would be ignored without a word (as pandas refuses them)."""
        check_storage_options(self.storage_options, [*self.opened, self.out])

    def _prepare_output(self, job: Job, inputs: list) -> None:
        """The output (with the files beside it) and the checkpoint usable and apart from the
        inputs (which matter most) and from each other, before any work."""
        if self.out is None:
            return
        beside = job.beside()
        job.prepare(self, inputs)
        if self.checkpoint is not None:
            check_apart(self.checkpoint, inputs, "--checkpoint")
            check_apart(self.checkpoint, [self.out, *(beside_path(self.out, suffix)
                                                      for suffix in beside)],
                        "--checkpoint", of="output")
            check_checkpoint_parent(self.checkpoint)  # else when it is opened

    @contextlib.contextmanager
    def _open_checkpoint(self, job: Job, fingerprint, inputs):
        """The job's checkpoint, opened (checked and locked) for the block; None without
        ``--checkpoint``. Its lock is released when the block ends; it is removed once the
        result is published."""
        if self.checkpoint is None:
            yield None
            return
        checkpoint = job.new_checkpoint(self.checkpoint, fingerprint, self.resume, inputs)
        # as the marker and the progress keep them (JSON), to compare with theirs
        checkpoint.options = json.loads(json.dumps(job.fingerprint_options(fingerprint),
                                                   default=str))
        checkpoint.open()
        try:
            yield checkpoint
        except InputError:  # a refusal leaves the folder as found, unless work was committed
            checkpoint.withdraw()
            raise
        finally:
            checkpoint.close()

    def _client(self, job: Job | None):
        """The Dask client of the run: the one given, the scheduler's, or an embedded
        cluster of ``n_workers`` sized for the job's data (the one place a run opens it)."""
        return dask_client(self.client, self.scheduler, n_workers=self.n_workers,
                           data_bytes=None if job is None else job.data_bytes(),
                           threads_keep_up=job is not None and job.threads_keep_up)

    def _compute(self, job: Job, inputs, checkpoint, store) -> xr.Dataset:
        started = time.perf_counter()
        relay = Relay(store) if in_process_memory(store) else None
        with self._client(job) as client:
            ctx = Context(client, checkpoint, self.progress, store, relay=relay)
            ds = job.compute(ctx)
            if relay is not None:
                relay.land()
        self.seconds = time.perf_counter() - started
        self.passes = len(ctx.passes)
        return ds

    def _add_attrs(self, job: Job, ds: xr.Dataset, inputs, fingerprint) -> None:
        """Provenance first (the attributes every result has), then the job's own, then the
        fingerprint of a resumable run and the number of passes when the job ran any
        (:meth:`Job.annotate`)."""
        attrs = provenance(job.name, job.parameters(), inputs, roles=job.input_roles(),
                           seconds=self.seconds)
        own = {} if fingerprint is None else {"run_fingerprint": fingerprint_digest(fingerprint)}
        if self.passes:
            own["passes"] = self.passes
        job.annotate(ds, attrs, own)
        seal(ds)  # the record of a fit's model bound to its coefficients' labels

    def _compute_into_store(self, job: Job, inputs, checkpoint) -> xr.Dataset:
        """A job that writes its arrays chunk by chunk: into a temporary store next to the
        output, published once complete (``complete=True`` last)."""
        with atomic_store(self.out, self.overwrite, inputs, self.storage_options) as tmp:
            store = for_workers(tmp)
            ds = self._compute(job, inputs, checkpoint, store)
            self._add_attrs(job, ds, inputs, job.fingerprint())
            group = zarr.open_group(store, mode="r+")
            group.attrs.update(dict(ds.attrs) | {"complete": False})
            seal(group)  # of the arrays written into the store
        if checkpoint is not None:
            checkpoint.remove()
        return job.published(self.out, self.storage_options)


def _group_of_path(data, args: tuple, kwargs: dict) -> tuple:
    """An input named ``PATH#GROUP`` (docs/stores.md: a store's group on the command line,
    as ``fit interleaved`` reads its populations) as ``PATH`` and its group, the opener's
    second argument (or ``group=``); a name that is itself a local path stays whole. Given
    both ways, they must agree."""
    from streamlsq.io.stores import split_group

    group = args[0] if args else kwargs.get("group")
    path, named = split_group(data, group)
    if named is None or named == group:
        return path, args, kwargs
    if args:
        return path, (named, *args[1:]), kwargs
    return path, args, {**kwargs, "group": named}
