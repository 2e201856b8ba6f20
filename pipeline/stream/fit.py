"""Fitting a recursion over stream stores: the public :func:`fit_stream` and its job.

:class:`StreamFit` is the definition :meth:`streamlsq.jobs.Run.execute` runs: it opens the
store(s) and the recursion (:meth:`StreamFit.open`), plans the blocks
(:func:`~streamlsq.stream.plans.plan_fit`; a continued fit plans only the rows appended
since: :mod:`streamlsq.stream.resume`), runs an engine (:mod:`streamlsq.stream.engines`)
and lays the trajectory out as a result (:mod:`streamlsq.stream.layout`). A recursion that
needs more than a fit of its rows has a job of its own deriving from this one (interleaved
KF4LLS and its test population: :mod:`streamlsq.stream.interleaved`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from streamlsq.errors import InputError, checked
from streamlsq.io.checkpoint import Checkpoint, EntryCheckpoint
from streamlsq.io.stream import MISSING, open_stream
from streamlsq.jobs import Context, Job, Run
from streamlsq.kernels.inference import COV_TYPES
from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.recursions.contract import Param, Recursion, ScanRecursion
from streamlsq.stream.engines import (
    Trajectory,
    run_scan,
    run_sequential,
    subnormal_coefficients_error,
)
from streamlsq.stream.guards import has_subnormal
from streamlsq.stream.layout import check_trajectory, trajectory_dataset
from streamlsq.stream.methods import RECURSIONS, job_class, make_method, params_from_store
from streamlsq.stream.plans import StreamPlan, plan_fit
from streamlsq.stream.resume import (
    ScanPieces,
    add_rows_fingerprint,
    continued_plan,
    continued_result,
    join_previous,
    previous_state,
    run_fingerprint,
    segment_reads,
)
from streamlsq.stream.stability import add_stability
from streamlsq.stream.statistics import (
    add_statistics,
    checked_alpha,
    statistics_note,
    unavailable,
)

__all__ = ["StreamFit", "check_trajectory", "fit_stream", "DEFAULT_RECORDED_STEPS"]

#: with ``record_every=None`` about this many steps are recorded
DEFAULT_RECORDED_STEPS = 1000
ENGINES = ("sequential", "scan")
EPOCHS = Param("epochs", 1, "Passes over the store (the state carries over from one to the "
               "next).", type=int, gt=0)
SEED = Param("seed", 0, "Seed of the shuffled order of epochs.", type=int, ge=0)
RECORD_EVERY = Param("record_every", None, "Record the coefficients every this many steps.",
                     type=int, gt=0, optional=True)
SEGMENT_BYTES = Param("segment size (bytes)", None, "Bytes of X per Dask task.", type=int,
                      gt=0, optional=True, requirement="a positive number of bytes")


def fit_stream(
    data,
    method: str | Recursion = "kf4lls",
    *,
    out=None,
    group: str | None = None,
    x=None,
    y=None,
    sample_dim: str | None = None,
    fit_intercept: bool | None = None,
    continue_from=None,
    engine: str = "sequential",
    block_size: int | None = None,
    first_block_size: int | None = None,
    record_every: int | None = None,
    epochs: int = 1,
    shuffle: bool = False,
    seed: int = 0,
    dtype: str = "float64",
    segment_bytes: int | None = None,
    weights: str | None = None,
    missing: str = "raise",
    alpha: float | None = None,
    cov_type: str | None = None,
    groups: str | None = None,
    formula: str | None = None,
    **options,
) -> xr.Dataset:
    """Run a recursive estimator over the stream store ``data`` in order.

    Parameters
    ----------
    data : str, os.PathLike, zarr store or xarray.Dataset
        A stream store (``X (sample, feature)``, ``y (sample, target)``; see
        ``docs/stores.md``): a path, an fsspec URL (``s3://bucket/data.zarr``,
        ``gs://…``; ``storage_options`` for its filesystem) or a zarr store object; or an
        :class:`xarray.Dataset`, lazy (dask-backed, e.g. opened from NetCDF files) or in
        memory.
    method : str or Recursion
        A name of :data:`streamlsq.RECURSIONS` (``"kf4lls"``, ``"rls"``, ``"lms"``,
        ``"bfgs"``, ``"irma"``, ``"irma-gd"``, ``"irma-rls"``) or a configured kernel
        object.
    out : str, os.PathLike, zarr store or None
        Write the result store here (a path, an fsspec URL or a zarr store object;
        atomically: ``complete=True`` last).
    group : str or None
        A group inside the store ``data``.
    x, y : str, list of str or None
        The feature and target variables: one 2-D variable each (default ``"X"`` and
        ``"y"``) or several 1-D variables along ``sample_dim`` (columns as variables,
        ``x=["a", "b", "c"], y="d"``). Feature labels (variable names, or the coordinate
        of X's feature dimension) label ``feature`` in the result.
    sample_dim : str or None
        The dimension along which rows are stored (default ``"sample"``; for a Dataset,
        the one dimension all selected variables share).
    fit_intercept : bool or None
        Fit an intercept, the coefficient labelled ``intercept`` (the first row of
        ``feature``): a constant column prepended to the features (LMS: its own constant
        term). None: the method's default, off for KF4LLS, RLS and BFGS (the store is the
        model), on for LMS; the IRMA family refuses True (the constant function is in its
        basis).
    continue_from : str, os.PathLike, zarr store or None
        A previous result of this fit on the same store, which has grown since along
        ``sample``: the recursion restarts from the final state stored in it and reads
        only the rows after its ``rows_seen``; the result holds the earlier recorded
        steps and the new ones, as one fit over all rows would. Refused when the earlier
        rows changed (chunk stamps of the rows it read) or the method or its options
        differ. The blocks of the new rows start at the earlier run's last row: the
        result equals a fit from scratch to rounding when that row was a block edge (always
        for least squares with KF4LLS and for the per-sample recursions).
    engine : {"sequential", "scan"}
        ``"sequential"`` (in-order fold, any recursion) or ``"scan"`` (parallel sums
        + prefix, for KF4LLS/RLS); both give the same numbers.
    block_size : int or None
        Rows per step of the recursion (default: the store's ``block_size``
        attribute, else its chunk size). Independent of the chunking.
    first_block_size : int or None
        Rows of the first block (default ``block_size``); a larger first block lets
        H_0 = 0 start with a full-rank block.
    record_every : int or None
        Record the coefficients every this many steps (default: about 1000 steps over
        the run); the final step is always recorded.
    epochs : int
        Passes over the store; the state carries over from one pass to the next
        (LMS: W and the sample counter k, so a decreasing schedule continues). Steps
        are numbered over all epochs (epoch e holds steps e·m+1..(e+1)·m for m blocks
        per epoch; ``first_block_size`` applies to the very first block only) and the
        result has an ``epoch(step)`` variable.
    shuffle, seed : bool, int
        Visit the chunks of epoch e in ``epoch_chunk_order(seed, e, n_chunks, True)``
        and the rows of chunk c in ``chunk_row_permutation(seed, e, c, rows_c, True)``
        (a two-level shuffle that depends only on the seed and the storage chunking,
        not on the workers).
    dtype : str
        Floating-point type of the arithmetic (``"float64"`` or ``"float32"``).
    segment_bytes : int or None
        Bytes of X one sequential task folds (default 256 MiB), or one scan task
        summarises (default 32 MiB); the defaults are cut to a sixteenth of the
        smallest worker memory limit. A resumed run keeps the segments of its
        checkpoint.
    weights : str or None
        A variable of ``data`` holding the rows' precision weights, one per row (as
        statsmodels' ``WLS`` takes them: each row scaled by √w; 0 leaves the row out and
        counts it as dropped; negative or non-finite weights are refused naming the row).
        Least-squares recursions only (KF4LLS, RLS).
    missing : {"raise", "drop"}
        A NaN (a decoded fill value among them) in a selected variable — features,
        targets, weights, groups — is refused (``"raise"``), or its row is left out of
        the fit (``"drop"``, as statsmodels' ``missing="drop"``: weight 0; the blocks stay
        those of the stored rows; least-squares recursions only). An Inf is refused
        either way.
    alpha : float or None
        The α of the confidence intervals of the statistics (default 0.05), for the
        least-squares fits (KF4LLS; RLS with ``forgetting=1`` and ``ridge=0``); for a
        recursion that declares a parameter ``alpha`` (interleaved KF4LLS's mixing
        weight), that parameter.
    cov_type : {"nonrobust", "HC0", "HC1", "HC2", "HC3", "cluster"} or None
        The covariance of the coefficients (default ``"nonrobust"``, from the final
        state). A robust one needs the final coefficients: one more pass over all rows,
        a parallel chunked reduction (``docs/inference.md``); ``"cluster"`` needs
        ``groups``.
    groups : str or None
        A variable of ``data`` holding the rows' group labels (integers or strings) for
        ``cov_type="cluster"``.
    formula : str or None
        Build the features and targets from the columns of ``data`` by a formula
        (``"arr_delay ~ dep_delay + C(carrier) + np.log(distance)"``, formulaic's syntax)
        instead of ``x`` and ``y``; the coefficients are labelled by term
        (``C(carrier)[T.UA]``), the categories' levels are found before the fit and stored
        in the result with their contrast coding, and the formula's intercept is the fit's
        (a contradicting ``fit_intercept`` is refused). ``docs/tables.md``.
    **options
        The options of the run around the fit (:class:`streamlsq.jobs.RunOptions`:
        ``overwrite``, ``checkpoint`` and ``resume`` — both engines checkpoint, the scan
        engine each piece's summaries —, ``client``, ``scheduler``, ``progress``,
        ``storage_options`` of URLs given as ``data``, ``out`` or ``continue_from``), and
        the recursion's parameters, given to its constructor (e.g. ``ridge=1e-3``,
        ``forgetting=0.99``, ``schedule="inverse", rate=0.05, tau=1e4``,
        ``rate="exact"``). The IRMA family takes ``order``, ``domain`` ((a, b), or
        one interval per column of X for a box; default: the store's ``domain``
        attribute) and ``basis`` (``"legendre"``, ``"monomial"`` or a Basis object)
        instead of a basis; its store holds the raw inputs x as X and one target.

    Returns
    -------
    xarray.Dataset
        ``coef (step, feature, target)``, ``rows_seen (step)``, ``epoch (step)``, the
        final state as ``state_*`` variables and the run's attrs; for a least-squares fit
        its statistics as statsmodels names them (``bse``, ``pvalues``, ``rsquared``, …,
        one value per target; :mod:`streamlsq.stream.statistics`), or the attribute
        ``statistics_unavailable`` saying why it has none. Diagnostics:
        ``cumulative_loss (step)`` for the IRMA family (Σ of the squared pre-update
        errors so far), ``n_skipped (step)`` for BFGS (B updates skipped by the
        curvature safeguard so far, also the attr ``n_skipped``).
        For KF4LLS and RLS with ``diagnostics=True``: the recursive residuals and
        their CUSUM tests (:func:`streamlsq.stream.stability.stability`); KF4LLS and
        RLS results carry the attrs ``condition_number`` (κ of the rows seen) and
        ``digits_trusted``.

    Examples
    --------
    >>> import tempfile, numpy as np, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/data.zarr", n_rows=20_000, n_features=3,
    ...                                  seed=1)
    >>> ds = streamlsq.fit_stream(path, "kf4lls", block_size=5_000, engine="scan")
    >>> ds.coef.dims, ds.sizes["step"]
    (('step', 'feature', 'target'), 4)
    >>> ds.rows_seen.values.tolist()
    [5000, 10000, 15000, 20000]
    >>> X, Y = streamlsq.open_stream(path).read(0, 20_000)
    >>> bool(np.allclose(ds.coef[-1], np.linalg.lstsq(X, Y, rcond=None)[0]))
    True

    Columns as variables of an in-memory Dataset, with an intercept:

    >>> import xarray as xr
    >>> rng = np.random.default_rng(0)
    >>> table = xr.Dataset({c: ("row", rng.standard_normal(500)) for c in "abc"})
    >>> table["d"] = 2 * table.a - table.c + 3
    >>> fit = streamlsq.fit_stream(table, x=["a", "b", "c"], y="d", sample_dim="row",
    ...                            fit_intercept=True)
    >>> final = fit.coef.isel(step=-1, target=0).round(6) + 0.0  # + 0.0: no -0.0
    >>> dict(zip(final.feature.values.tolist(), final.values.tolist()))
    {'intercept': 3.0, 'a': 2.0, 'b': 0.0, 'c': -1.0}
    >>> tmp.cleanup()
    """
    run, params = Run.split(out, options)
    cls = type(method) if isinstance(method, Recursion) else RECURSIONS.get(method)
    if alpha is not None and cls is not None and any(p.name == "alpha" for p in cls.params):
        params["alpha"], alpha = alpha, None  # the recursion's own parameter of that name
    job = job_class(method)(
        data, method, params, group=group, x=x, y=y, sample_dim=sample_dim,
        fit_intercept=fit_intercept, continue_from=continue_from, engine=engine,
        block_size=block_size, first_block_size=first_block_size, record_every=record_every,
        epochs=epochs, shuffle=shuffle, seed=seed, dtype=dtype, segment_bytes=segment_bytes,
        weights=weights, missing=missing, alpha=alpha, cov_type=cov_type, groups=groups,
        formula=formula)
    return run.execute(job)


@dataclass(eq=False)
class StreamFit(Job):
    """A recursion over the rows of stream stores, in order: reads the stores, computes the
    trajectory of the coefficients on the ``sequential`` or ``scan`` engine, writes
    ``coef (step, feature, target)`` and the final state (:func:`fit_stream` says what
    each option means)."""

    data: Any
    method: str | Recursion
    params: dict = field(default_factory=dict)
    group: str | None = None
    x: Any = None
    y: Any = None
    sample_dim: str | None = None
    fit_intercept: bool | None = None
    continue_from: Any = None
    engine: str = "sequential"
    block_size: int | None = None
    first_block_size: int | None = None
    record_every: int | None = None
    epochs: int = 1
    shuffle: bool = False
    seed: int = 0
    dtype: str = "float64"
    segment_bytes: int | None = None
    weights: str | None = None
    missing: str = "raise"
    alpha: float | None = None
    cov_type: str | None = None
    groups: str | None = None
    formula: str | None = None

    checkpoint_kind: ClassVar[str] = "fit"
    #: options of this job besides the recursion's parameters (the command line adds them)
    options: ClassVar[tuple[Param, ...]] = ()

    @property
    def name(self) -> str:
        return self.recursion.name

    def check(self) -> None:
        check_run_options(self.engine, self.dtype, self.record_every, self.segment_bytes)
        self.epochs = checked(EPOCHS, self.epochs)
        self.seed = checked(SEED, self.seed)
        check_inference_options(self.missing, self.cov_type, self.groups)
        if self.alpha is not None:
            self.alpha = checked_alpha(self.alpha)

    def open(self, run: Run) -> list:
        fit_intercept = self.fit_intercept
        if self.formula is not None:  # the formula's intercept is the fit's
            from streamlsq.io.formulas import formula_intercept

            fit_intercept = formula_intercept(self.formula, fit_intercept)
        column, params = intercept_options(self.method, fit_intercept, self.params)
        self.sources = self.open_sources(column, run.storage_options)
        params = params_from_store(self.method, params, self.sources[0].attrs)
        self.recursion = make_method(self.method, **params)
        if len(self.sources) != len(self.recursion.inputs):
            roles = ", ".join(self.recursion.inputs)
            raise InputError(f"method '{self.recursion.name}' reads {len(self.recursion.inputs)} "
                             f"store(s) ({roles}), got {len(self.sources)}")
        self.check_recursion_options()
        self.recursion = self.recursion.identifying()
        check_engine(self.recursion, self.engine)
        check_layout(self.sources, self.recursion, self.dtype)
        self.previous = None
        if self.continue_from is None:
            self.plan = self.plan_rows()
        else:
            self.previous = continued_result(
                self.continue_from, self.sources[0], self.recursion, self.dtype,
                self.block_size, self.epochs, self.shuffle, run.storage_options)
            self.plan, self.record_every = continued_plan(self.previous, self.sources[0],
                                                          self.record_every)
        if self.plan is not None and self.record_every is None:
            self.record_every = max(1, -(-self.plan.n_blocks // DEFAULT_RECORDED_STEPS))
        return list(self.sources)

    def open_sources(self, fit_intercept: bool, storage_options) -> list:
        """The stores the recursion reads: ``data``, or one store per input role of a
        recursion that reads several (``data`` a sequence of them)."""
        many = isinstance(self.data, list | tuple)
        stores = list(self.data) if many else [self.data]
        return [open_stream(d, self.group, x=self.x, y=self.y, sample_dim=self.sample_dim,
                            fit_intercept=fit_intercept, storage_options=storage_options,
                            weights=self.weights, groups=self.groups, missing=self.missing,
                            formula=self.formula)
                for d in stores]

    def check_recursion_options(self) -> None:
        """Refuse the options the recursion cannot honour, in one line each: row weights and
        dropped rows (least squares only; not with recursive residuals), the statistics'
        options where no statistic applies."""
        rec = self.recursion
        weighting = [o for o, given in (("--weights", self.weights is not None),
                                        ("--missing drop", self.missing == "drop")) if given]
        if weighting and not rec.weighted:
            raise InputError(f"{rec.name}: {weighting[0]} does not apply: {rec.name} is not a "
                             "least-squares fit (a row is weighted, or dropped with weight 0, "
                             "in the least-squares recursions kf4lls and rls)")
        if weighting and getattr(rec, "diagnostics", False):
            raise InputError(f"{rec.name}: --diagnostics does not go with {weighting[0]}: the "
                             "recursive residuals are those of rows of equal weight")
        why = unavailable(rec, self.epochs)
        given = [o for o, value in (("--alpha", self.alpha), ("--cov-type", self.cov_type))
                 if value is not None]
        if given and why is not None:
            raise InputError(f"{rec.name}: {given[0]} does not apply: no statistics, as {why}")

    def plan_rows(self) -> StreamPlan:
        rec = self.recursion
        try:
            return plan_fit(self.sources, rec.block_order, block_size=self.block_size,
                            first_block_size=self.first_block_size, epochs=self.epochs,
                            shuffle=self.shuffle, seed=self.seed, roles=rec.inputs)
        except ValueError as exc:
            raise InputError(str(exc)) from None

    def fingerprint(self) -> dict:
        return run_fingerprint(self.plan, self.recursion, self.record_every, self.dtype,
                               self.engine)

    def parameters(self) -> dict:
        return self.recursion.get_params()

    def input_roles(self) -> list[str]:
        return list(self.recursion.inputs)

    def data_bytes(self) -> int | None:
        return None if self.plan is None else self.plan.nbytes

    def new_checkpoint(self, directory, fingerprint, resume, inputs):
        if self.engine == "scan":
            return EntryCheckpoint(directory, fingerprint, resume=resume, inputs=inputs,
                                   kind="fit-scan")
        return Checkpoint(directory, dict(fingerprint), resume=resume, inputs=inputs,
                          reads=lambda a, b: segment_reads(self.plan, a, b))

    def compute(self, ctx: Context) -> xr.Dataset:
        if self.plan is None:  # continued, but no row was appended since: the earlier fit
            return self.statistics(self.unchanged_result(), ctx)
        started = time.perf_counter()
        traj = self.trajectory(ctx)
        ds = trajectory_dataset(traj, self.recursion, self.plan, self.record_every,
                                self.engine, self.dtype, time.perf_counter() - started)
        if self.previous is not None:
            ds = join_previous(self.previous, ds, self.continue_from)
        ds = add_stability(ds)  # CUSUM tests, when the fit recorded recursive residuals
        add_rows_fingerprint(ds, self.sources[0])
        return self.statistics(ds, ctx)

    def statistics(self, ds: xr.Dataset, ctx: Context) -> xr.Dataset:
        """The fit's statistics from its final state (classical), then, for a robust
        covariance, one more pass over all the rows, a step of the run
        (:class:`~streamlsq.stream.robust.RobustPass`)."""
        rec = self.recursion
        alpha = checked_alpha(self.alpha)
        ds = add_statistics(ds, rec, alpha, self.epochs)
        first = min(int(ds.attrs.get("record_every", 1)), int(ds.attrs.get("n_blocks", 1)))
        if getattr(rec, "identify", False) and ds.sizes.get("step") and ds.step.values[0] > first:
            # steps the rows did not identify were not recorded: say from which row they do
            ds.attrs["identified_from_row"] = int(ds.rows_seen.values[0])
        if self.cov_type not in (None, "nonrobust") and "statistics_unavailable" not in ds.attrs:
            from streamlsq.stream.robust import RobustPass

            ds = ctx.run_pass(RobustPass(ds, self.sources[0], rec, self.cov_type, alpha,
                                         self.segment_bytes))
        return ds

    def trajectory(self, ctx: Context) -> Trajectory:
        """The recorded steps and the final state, from the chosen engine (checked finite:
        never a NaN coefficient in a result)."""
        initial = None if self.previous is None else previous_state(self.previous,
                                                                    self.recursion)
        args = (ctx.client, self.plan, self.recursion, self.record_every, self.dtype)
        if self.engine == "scan":
            pieces = None if ctx.checkpoint is None else ScanPieces(ctx.checkpoint, self.plan)
            traj = run_scan(*args, ctx.progress, self.segment_bytes, checkpoint=pieces,
                            initial_state=initial)
        else:
            traj = run_sequential(*args, ctx.checkpoint, ctx.progress, self.segment_bytes,
                                  initial_state=initial)
        check_trajectory(traj, self.plan)
        check_identified(traj, self.plan, self.recursion)
        if has_subnormal(traj.coefs):
            raise subnormal_coefficients_error(ctx.client, self.plan, traj, self.dtype)
        return traj

    @classmethod
    def notes(cls, ds: xr.Dataset) -> list[str]:
        """Short phrases about a result for the command line's one-line summary: the
        recursion's own (``result_notes``), then the job's."""
        notes = list(RECURSIONS[ds.attrs["method"]].result_notes(ds.attrs))
        notes.append(statistics_note(ds))
        if int(ds.attrs.get("epochs", 1)) != 1:
            notes.append(f"{ds.attrs['epochs']} epoch(s)")
        if "rows_continued" in ds.attrs:
            notes.append(f"continued from {ds.attrs['continued_from']} after its "
                         f"{ds.attrs['rows_continued']} rows")
        return notes

    def unchanged_result(self) -> xr.Dataset:
        ds = self.previous.copy()
        ds.attrs.update({"continued_from": str(self.continue_from),
                         "rows_continued": int(self.previous.attrs["n_rows"])})
        for key in ("complete", "written_by", "already_complete", "run_fingerprint"):
            ds.attrs.pop(key, None)
        return ds


def intercept_options(method, fit_intercept, params: dict) -> tuple[bool, dict]:
    """(whether the reading path prepends a constant column, the recursion's parameters)
    for ``fit_intercept``, as the recursion declares it (``intercept_kind``): the column
    for recursions fitted on X as it is, the kernel's own switch (LMS), a refusal where the
    constant is part of the model (IRMA's basis, interleaved KF4LLS's centred blocks)."""
    cls = type(method) if isinstance(method, Recursion) else RECURSIONS.get(method)
    if cls is None:
        return bool(fit_intercept), params
    if fit_intercept is not None and not isinstance(fit_intercept, bool | np.bool_):
        raise InputError(f"fit_intercept must be True, False or None, got {fit_intercept!r}")
    kind = cls.intercept_kind
    if kind in ("basis", "centred"):
        if fit_intercept:
            why = ("the constant function is one of its basis functions" if kind == "basis"
                   else "its blocks are centred")
            raise InputError(f"{cls.name}: --intercept does not apply: {why}")
        return False, params
    flag = cls.default_intercept if fit_intercept is None else bool(fit_intercept)
    if kind == "kernel":
        if isinstance(method, Recursion):
            if fit_intercept is not None and bool(method.intercept) != flag:
                raise InputError(f"{cls.name}: fit_intercept={flag} but the kernel object has "
                                 f"intercept={method.intercept}")
            return False, params
        return False, {**params, "intercept": flag}
    return flag, params


def check_engine(rec: Recursion, engine: str) -> None:
    """Refuse the scan engine for a recursion (or a configuration of it) without a scan form."""
    if engine == "scan" and not isinstance(rec, ScanRecursion):
        raise InputError(f"method '{rec.name}' has no scan form; use --engine sequential")
    if engine == "scan" and rec.scan_unavailable():
        raise InputError(f"{rec.name}: {rec.scan_unavailable()}: use --engine sequential")


def check_layout(sources, rec: Recursion, dtype) -> None:
    """Refuse stores whose shape the recursion cannot take (before any reading); stores
    read together must share their features and targets."""
    first = sources[0]
    for other in sources[1:]:
        for what, name in (("n_features", "features"), ("n_targets", "targets")):
            if getattr(other, what) != getattr(first, what):
                variable = "X" if name == "features" else "y"
                raise InputError(
                    f"{other.label}: variable '{variable}' has {getattr(other, what)} {name} "
                    f"but {first.label} has {getattr(first, what)}; the stores read together "
                    f"must share their {name}")
    try:
        rec.check_shape(first.n_features, first.n_targets)
        rec.init(first.n_features, first.n_targets, np.dtype(dtype))
    except ValueError as exc:
        raise InputError(f"{first.label}: {exc}") from None


def check_inference_options(missing, cov_type, groups) -> None:
    """Refuse ``missing``, ``cov_type`` and ``groups`` that cannot work, before any
    reading."""
    if missing not in MISSING:
        raise InputError(f"missing must be 'raise' or 'drop', got {missing!r}")
    if cov_type is not None and cov_type not in COV_TYPES:
        raise InputError(f"cov_type must be one of {', '.join(COV_TYPES)}, got {cov_type!r}")
    if cov_type == "cluster" and groups is None:
        raise InputError("--cov-type cluster needs the rows' group labels: --groups VAR")
    if groups is not None and cov_type != "cluster":
        raise InputError("--groups VAR goes with --cov-type cluster")


def check_identified(traj: Trajectory, plan: StreamPlan, rec: Recursion) -> None:
    """Refuse a fit whose rows never identify the coefficients (all of them leave the
    normal matrix singular), naming the rank and the remedy."""
    try:
        rec.check_identified(traj.state)
    except SingularMatrixError as exc:
        if plan.n_blocks == 1:
            where = f"variable 'X' chunk 0: the first block (rows 0-{plan.n_rows - 1}) leaves"
        else:
            where = f"variable 'X': its {plan.n_rows} rows (all {plan.n_blocks} blocks) leave"
        rank = (f"numerical rank {exc.rank} of {exc.size}" if exc.rank is not None
                else str(exc))
        raise InputError(f"{plan.label}: {where} the normal matrix singular ({rank}): the rows "
                         f"never identify the coefficients; {never_identified_remedy(rec)}"
                         ) from None


def never_identified_remedy(rec: Recursion) -> str:
    """What to do when the rows never identify the coefficients, for this recursion's
    parameters."""
    params = rec.get_params()
    if params.get("forgetting", 1.0) != 1.0:
        return (f"the forgetting factor {params['forgetting']:g} keeps too few rows to "
                "identify them (and lets a ridge start decay): raise --forgetting or use "
                "larger blocks (--block-size)")
    remedy = "remove collinear or constant columns, or start from a ridge (--ridge DELTA)"
    if params.get("solver") == "normal":
        remedy += "; the normal equations square the condition number: --solver qr"
    return remedy


def check_run_options(engine, dtype, record_every, segment_bytes=None) -> None:
    """Refuse engine/dtype/recording options that cannot work (before any reading)."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'; choose one of {', '.join(ENGINES)}")
    try:
        ok = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        ok = False
    if not ok:
        raise InputError(f"dtype must be float64 or float32, got {dtype}")
    checked(RECORD_EVERY, record_every)
    checked(SEGMENT_BYTES, segment_bytes)
