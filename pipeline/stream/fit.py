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
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.checkpoint import Checkpoint, EntryCheckpoint
from streamlsq.io.results import imports_ahead
from streamlsq.jobs import Context, Job, Run
from streamlsq.kernels.linalg import SingularMatrixError
from streamlsq.kernels.recursions.contract import Recursion, ScanRecursion
from streamlsq.options import Options
from streamlsq.options.fit import FIT, RECURSION_RULES, label_variables
from streamlsq.stream.engines import (
    Trajectory,
    run_scan,
    run_sequential,
    subnormal_coefficients_error,
)
from streamlsq.stream.guards import has_subnormal, rank_phrase
from streamlsq.stream.layout import check_trajectory, coef_labels, trajectory_dataset
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
    constant_index,
    statistics_note,
    unavailable,
)

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = ["StreamFit", "check_trajectory", "fit_stream", "DEFAULT_RECORDED_STEPS"]

#: with ``record_every=None`` about this many steps are recorded
DEFAULT_RECORDED_STEPS = 1000


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
    seed: int | None = None,
    dtype: str = "float64",
    segment_bytes: int | None = None,
    weights: str | None = None,
    missing: str = "raise",
    alpha: float | None = None,
    cov_type: str | None = None,
    groups: str | None = None,
    time: str | None = None,
    maxlags: int | None = None,
    kernel: str | None = None,
    use_correction: bool | str | None = None,
    window: int | None = None,
    window_step: int | None = None,
    min_nobs: int | None = None,
    expanding: bool = False,
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
    cov_type : str or None
        The covariance of the coefficients: ``"nonrobust"`` (the default, from the final
        state), ``"HC0"``–``"HC3"``, ``"cluster"``, ``"HAC"``, ``"hac-panel"`` or
        ``"hac-groupsum"``. A robust one needs the final coefficients: one more pass over all rows,
        a parallel chunked reduction (``docs/inference.md``); ``"cluster"`` needs
        ``groups``, ``"HAC"`` (Newey–West) ``maxlags``, ``"hac-panel"`` (HAC within
        each panel) ``groups`` and ``maxlags``, ``"hac-groupsum"`` (Driscoll–Kraay)
        ``time`` and ``maxlags``. With ``window``, ``"HC0"`` is also each window's
        covariance (``RollingOLS``' ``"HCCM"``), and ``"HAC"`` each window's Newey–West
        covariance from its own residuals; the windows of a fit with another covariance
        keep the nonrobust one (``rolling_cov_type`` says which).
    groups : str or None
        A variable of ``data`` holding the rows' group labels (integers or strings) for
        ``cov_type="cluster"``, or two comma-separated (``"firm,year"``: two-way); the
        rows' panel labels for ``cov_type="hac-panel"`` (each panel's rows together, in
        time order).
    time, maxlags, kernel, use_correction
        The time labels of ``cov_type="hac-groupsum"`` (a variable of ``data``; with
        ``"hac-panel"``, checked increasing within each panel); the lags of a HAC
        covariance (rows, or periods), their weights (``"bartlett"`` or ``"uniform"``) and
        its small-sample factor (default: statsmodels'; ``"hac-panel"`` takes ``"hac"``,
        ``"cluster"`` or False).
    window, window_step, min_nobs, expanding
        Also fit every window of ``window`` rows ending every ``window_step`` rows
        (default 1; with at least ``min_nobs`` rows of positive weight), exactly, and store
        statsmodels' ``RollingOLS`` statistics as ``rolling_*`` along ``window`` (least
        squares);
        ``expanding=True``: the first windows start at row 0 and grow from ``min_nobs``
        rows to ``window``, as ``RollingOLS(expanding=True)`` (``window`` at least the
        rows: the expanding fit of the rows seen so far).
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
    given = {name: value for name, value in locals().items() if name in FIT}
    run, params = Run.split(out, options)
    return run.execute(job_class(method).build(data, method, {**params, **given}))


def fit_notes(ds: xr.Dataset) -> list[str]:
    """Short phrases about a fit's result for the command line's one-line summary: the
    recursion's own (``result_notes``), then the fit's."""
    notes = list(RECURSIONS[ds.attrs["method"]].result_notes(ds.attrs))
    notes.append(statistics_note(ds))
    if int(ds.attrs.get("epochs", 1)) != 1:
        notes.append(f"{ds.attrs['epochs']} epoch(s)")
    if "rows_continued" in ds.attrs:
        unchanged = int(ds.attrs["rows_continued"]) == int(ds.attrs["n_rows"])
        notes.append(f"continued from {ds.attrs['continued_from']} after its "
                     f"{ds.attrs['rows_continued']} rows"
                     + (": no row appended since, its coefficients unchanged" if unchanged
                        else ""))
    return notes


class StreamFit(Job):
    """A recursion over the rows of stream stores, in order: reads the stores, computes the
    trajectory of the coefficients on the ``sequential`` or ``scan`` engine, writes
    ``coef (step, feature, target)`` and the final state (:func:`fit_stream` says what
    each option means).

    Its options are those declared (:data:`streamlsq.options.fit.FIT`, and a recursion's
    own job's :attr:`options`), held as attributes of the same names; ``params`` holds the
    recursion's parameters (:meth:`build` sorts them out).
    """

    options: ClassVar[Options] = FIT
    checkpoint_kind: ClassVar[str] = "fit"

    def __init__(self, data, method: str | Recursion, params: dict | None = None, **options):
        self.data, self.method, self.params = data, method, dict(params or {})
        set_options(self, Options(FIT, self.options), options)

    @classmethod
    def build(cls, data, method: str | Recursion, options: dict) -> StreamFit:
        """The job of ``method`` over ``data`` from ``options`` named as declared, the
        recursion's parameters among them (:func:`sort_options`)."""
        params, own = sort_options(cls.options, method, options)
        return cls(data, method, params, **own)

    def check_options(self) -> None:
        """The declared options checked (:func:`check_fit_options`)."""
        check_fit_options(self)

    @property
    def name(self) -> str:
        return self.recursion.name

    def open(self, run: Run) -> list:
        column, params = intercept_options(self.method, self.intercept(), self.params)
        self.sources = self.open_sources(column, run)
        params = params_from_store(self.method, params, self.sources[0].attrs)
        self.recursion = make_method(self.method, **params)
        check_recursion(self, self.recursion)
        self.recursion = self.recursion.identifying()
        if self.weights is not None or self.missing == "drop":
            self.recursion = self.recursion.counting_rows()  # to tell that no row weighed
        check_engine(self.recursion, self.engine)
        check_layout(self.sources, self.recursion, self.dtype)
        check_windows(self, self.sources[0])
        self.previous, self.plan = plan_rows(self, run)
        self.given_record_every = self.record_every  # before its default is filled in
        if self.plan is not None and self.record_every is None:
            self.record_every = max(1, -(-self.plan.n_blocks // DEFAULT_RECORDED_STEPS))
        return list(self.sources)

    def open_sources(self, fit_intercept: bool, run: Run) -> list:
        """The stores the recursion reads, opened by ``run``: ``data``, or one store per input
        role of a recursion that reads several (``data`` a sequence of them)."""
        many = isinstance(self.data, list | tuple)
        stores = list(self.data) if many else [self.data]
        return [run.open_input("stream", d, self.group, x=self.x, y=self.y,
                               sample_dim=self.sample_dim, fit_intercept=fit_intercept,
                               weights=self.weights, missing=self.missing,
                               groups=label_variables(self.cov_type, self.groups, self.time),
                               formula=self.formula)
                for d in stores]

    def fingerprint(self) -> dict:
        return run_fingerprint(self.plan, self.recursion, self.record_every, self.dtype,
                               self.engine)

    def fingerprint_options(self, fingerprint: dict) -> dict[str, dict]:
        """The options each entry of the fingerprint keeps (a digest, for the plan and the
        segments), as given (``--record-every`` not given: its default depends on the
        blocks, whose options are named)."""
        def given(*names):  # those the job declares (a fit of several stores: no epochs)
            return {FIT.param(n).option: FIT.param(n).shown(getattr(self, n)) for n in names
                    if hasattr(self, n)}

        return {"plan": given("block_size", "first_block_size", "epochs", "shuffle", "seed"),
                "segments": given("segment_bytes"),
                "record_every": {"--record-every": self.given_record_every},
                "dtype": given("dtype"), "engine": given("engine")}

    def parameters(self) -> dict:
        return self.recursion.get_params()

    def input_roles(self) -> list[str]:
        return list(self.recursion.inputs)

    def data_bytes(self) -> int | None:
        return None if self.plan is None else self.plan.nbytes

    # bench_stream.py --threads: every engine on worker threads within 1.2x of processes
    threads_keep_up = True

    def new_checkpoint(self, directory, fingerprint, resume, inputs):
        return fit_checkpoint(self, directory, fingerprint, resume, inputs)

    def compute(self, ctx: Context) -> xr.Dataset:
        if self.plan is None:  # continued, but no row was appended since: the earlier fit
            return self.statistics(unchanged_result(self.previous, self.continue_from), ctx)
        started = time.perf_counter()
        with imports_ahead():  # the result's imports, beside the fit's tasks
            traj = fit_trajectory(self, ctx)
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
        if rec.identify and ds.sizes.get("step") and ds.step.values[0] > first:
            # steps the rows did not identify were not recorded: say from which row they do
            ds.attrs["identified_from_row"] = int(ds.rows_seen.values[0])
        if self.cov_type not in (None, "nonrobust") and "statistics_unavailable" not in ds.attrs:
            from streamlsq.stream.robust import RobustPass

            ds = ctx.run_pass(RobustPass(ds, self.sources[0], rec, self.cov_type, alpha,
                                         self.segment_bytes, self.maxlags, self.kernel,
                                         self.use_correction))
        if self.window is not None and "statistics_unavailable" not in ds.attrs:
            from streamlsq.stream.rolling import RollingPass

            # the windows' own robust covariance where one is defined per window (HC0 as
            # RollingOLS', HAC); the others' windows keep the nonrobust one, and say so
            window_cov = self.cov_type if self.cov_type in ("HC0", "HAC") else "nonrobust"
            step = 1 if self.window_step is None else self.window_step
            ds = ctx.run_pass(RollingPass(ds, self.sources[0], self.window, step,
                                          self.min_nobs, constant_index(ds), self.expanding,
                                          window_cov, self.maxlags, self.kernel,
                                          self.use_correction))
        return ds

    def intercept(self) -> bool | None:
        """Whether to fit an intercept (a formula's says, when the fit has one)."""
        if self.formula is None:
            return self.fit_intercept
        from streamlsq.io.formulas import formula_intercept

        return formula_intercept(self.formula, self.fit_intercept)

    #: short phrases about a result for the command line's one-line summary
    notes = staticmethod(fit_notes)


def sort_options(options: Options, method, given: dict) -> tuple[dict, dict]:
    """(the recursion's parameters, the job's options) among ``given``: a name the
    recursion declares is its parameter (interleaved KF4LLS' ``alpha``, its mixing weight,
    not the statistics' ``alpha``; None: its default), a name of the job's ``options``
    or of :data:`~streamlsq.options.fit.FIT` the job's, any other name the recursion's."""
    owned = recursion_params(method)
    job = set(FIT.names) | set(options.names)
    params = {k: v for k, v in given.items()
              if (k in owned and v is not None) or (k not in owned and k not in job)}
    return params, {k: v for k, v in given.items() if k not in owned and k in job}


def set_options(job: Job, declared: Options, given: dict) -> None:
    """Every option of ``declared`` as an attribute of ``job``: its value in ``given``,
    else its default (checked later, by the run: :meth:`Job.check_options`)."""
    unknown = sorted(set(given) - set(declared.names))
    if unknown:
        raise TypeError(f"{type(job).__name__} takes no option {unknown[0]!r}")
    for p in declared:
        setattr(job, p.name, given.get(p.name, p.default))


def check_fit_options(job: StreamFit) -> None:
    """``job``'s declared options checked (:meth:`Options.check`), each from the
    recursion's parameters when the recursion took it (:func:`sort_options`), else from
    the attribute of its name, then the value of each parameter the recursion declares
    (the rules between them are the recursion's constructor's, once the store's attributes
    are known); the values converted kept where they were."""
    checked = job.options.check({n: job.params[n] if n in job.params else getattr(job, n)
                                 for n in job.options.names})
    for name, value in checked.items():
        if name in job.params:
            job.params[name] = value
        else:
            setattr(job, name, value)
    if job.formula is not None:  # a formula is data: checked before anything is opened
        check_formula_intercept(job.method, job.formula)
    given = getattr(job, "time", None)
    time = [] if given is None else [n for n in str(given).split(",") if n.strip()]
    if len(time) > 1:  # was read as two-way clusters: exit 1 after the fit
        raise InputError(f"--time {given}: names {len(time)} variables; the periods are "
                         "the labels of one variable")
    if isinstance(job.method, str) and job.method in RECURSIONS:  # its parameters' values
        declaration = RECURSIONS.declaration(job.method)
        for p in declaration.params:
            if job.params.get(p.name) is not None and p.name not in job.options:
                try:
                    job.params[p.name] = p.check(job.params[p.name])
                except ValueError as exc:
                    raise InputError(f"{declaration.name}: {exc}") from None
        rules = RECURSION_RULES.get(declaration.name)
        if rules:  # as the command line words them (the recursion's own check is Python's)
            own = [p for p in declaration.params if p.name not in job.options]
            Options(*own, rules=rules).check(
                {p.name: job.params[p.name] for p in own if p.name in job.params})


def check_windows(job: StreamFit, source) -> None:
    """Refuse ``--window`` options that leave no window to record, before any work (the fit
    used to be published without a window and without a word): ``--min-nobs`` below the
    coefficients or above the window (as statsmodels' ``RollingOLS`` refuses them), rolling
    windows longer than the rows, or of no more rows than coefficients (no residual degree of
    freedom: no standard errors)."""
    if getattr(job, "window", None) is None:
        return
    q, n, window = source.n_features, source.n_rows, int(job.window)
    if window <= q:
        raise InputError(f"--window {window}: a window of {window} rows for {q} coefficients "
                         "leaves no residual degree of freedom (no standard errors): choose "
                         f"--window {q + 1} or more")
    if job.min_nobs is not None and not q <= job.min_nobs <= window:
        raise InputError(f"--min-nobs {job.min_nobs}: a window needs at least the rows of its "
                         f"{q} coefficients and holds at most its {window} rows (--window): "
                         f"choose --min-nobs in {q}..{window}")
    if window > n and not job.expanding:
        raise InputError(f"--window {window}: longer than the {n} rows of {source.label}, so "
                         f"no window fits in them: choose --window {n} or less, or "
                         "--expanding (the windows grow from --min-nobs rows)")


def fit_checkpoint(job: StreamFit, directory, fingerprint, resume, inputs):
    """The checkpoint of a fit: one entry per piece of the scan engine's summaries, or the
    sequential engine's folded segments."""
    if job.engine == "scan":
        return EntryCheckpoint(directory, fingerprint, resume=resume, inputs=inputs,
                               kind="fit-scan")
    return Checkpoint(directory, dict(fingerprint), resume=resume, inputs=inputs,
                      reads=lambda a, b: segment_reads(job.plan, a, b))


def recursion_params(method: str | Recursion) -> set[str]:
    """The names of the parameters the recursion ``method`` declares (none when it is not
    a registered name or a recursion)."""
    cls = type(method) if isinstance(method, Recursion) else RECURSIONS.get(method)
    return set() if cls is None else {p.name for p in cls.params}


def check_recursion(job: StreamFit, rec: Recursion) -> None:
    """Refuse the options the recursion ``rec`` cannot honour, in one line each: as many
    stores as it reads, row weights and dropped rows (least squares only; not with
    recursive residuals), the statistics' options where no statistic applies."""
    if len(job.sources) != len(rec.inputs):
        raise InputError(f"method '{rec.name}' reads {len(rec.inputs)} store(s) "
                         f"({', '.join(rec.inputs)}), got {len(job.sources)}")
    weighting = [o for o, given in (("--weights", job.weights is not None),
                                    ("--missing drop", job.missing == "drop")) if given]
    if weighting and not rec.weighted:
        raise InputError(f"{rec.name}: {weighting[0]} does not apply: {rec.name} is not a "
                         "least-squares fit (a row is weighted, or dropped with weight 0, "
                         "in the least-squares recursions kf4lls and rls)")
    if weighting and rec.diagnostics:
        raise InputError(f"{rec.name}: --diagnostics does not go with {weighting[0]}: the "
                         "recursive residuals are those of rows of equal weight")
    why = unavailable(rec, job.epochs)
    given = [o for o, value in (("--alpha", job.alpha), ("--cov-type", job.cov_type),
                                ("--window", job.window)) if value is not None]
    if given and why is not None:
        raise InputError(f"{rec.name}: {given[0]} does not apply: no statistics, as {why}")


def plan_rows(job: StreamFit, run: Run) -> tuple[xr.Dataset | None, StreamPlan | None]:
    """(the earlier result a fit continues, opened by ``run``, or None; the plan of the
    blocks: all rows, or those appended since the earlier result, None when none was)."""
    rec, source = job.recursion, job.sources[0]
    if job.continue_from is not None:
        previous = continued_result(job.continue_from, source, rec, job.dtype, job.block_size,
                                    job.epochs, job.shuffle, run)
        plan, job.record_every = continued_plan(previous, source, job.record_every)
        return previous, plan
    try:
        return None, plan_fit(job.sources, rec.block_order, block_size=job.block_size,
                              first_block_size=job.first_block_size, epochs=job.epochs,
                              shuffle=job.shuffle,
                              seed=0 if job.seed is None else job.seed, roles=rec.inputs)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def fit_trajectory(job: StreamFit, ctx: Context) -> Trajectory:
    """The recorded steps and the final state of ``job``'s fit, from its engine (checked
    finite: never a NaN coefficient in a result)."""
    plan, rec = job.plan, job.recursion
    initial = None if job.previous is None else previous_state(job.previous, rec,
                                                                 job.continue_from)
    args = (ctx.client, plan, rec, job.record_every, job.dtype)
    if job.engine == "scan":
        pieces = None if ctx.checkpoint is None else ScanPieces(ctx.checkpoint, plan)
        traj = run_scan(*args, ctx.progress, job.segment_bytes, checkpoint=pieces,
                        initial_state=initial)
    else:
        traj = run_sequential(*args, ctx.checkpoint, ctx.progress, job.segment_bytes,
                              initial_state=initial)
    check_trajectory(traj, plan)
    check_identified(traj, plan, rec, weighted=job.weights is not None,
                     dropping=job.missing == "drop")
    check_rows_weighed(traj, plan, job.weights, dropping=job.missing == "drop")
    if has_subnormal(traj.coefs):
        raise subnormal_coefficients_error(ctx.client, plan, traj, job.dtype)
    return traj


def unchanged_result(previous: xr.Dataset, continue_from) -> xr.Dataset:
    """The earlier result of a continued fit when no row was appended since."""
    ds = previous.copy()
    # no row read: the earlier run's speed is not this one's
    ds.attrs.update({"continued_from": str(continue_from),
                     "rows_continued": int(previous.attrs["n_rows"]), "rows_per_second": 0.0})
    for key in ("complete", "written_by", "already_complete", "run_fingerprint"):
        ds.attrs.pop(key, None)
    return ds


#: why a recursion whose intercept is part of its model takes no intercept of the data's
NO_INTERCEPT = {"basis": "the constant function is one of its basis functions",
                "centred": "its blocks are centred"}


def check_formula_intercept(method, formula: str) -> None:
    """Check ``formula`` (:func:`~streamlsq.io.formulas.check_formula`: any name, call or
    attribute outside the declared transforms refused, nothing evaluated), and refuse an
    intercept in it for a recursion whose model has its own (IRMA's basis, interleaved
    KF4LLS' centred blocks), naming the formula."""
    from streamlsq.io.formulas import check_formula, formula_intercept

    check_formula(formula)
    cls = type(method) if isinstance(method, Recursion) else RECURSIONS.get(method)
    if cls is not None and cls.intercept_kind in NO_INTERCEPT and \
            formula_intercept(formula, None):
        raise InputError(f"{cls.name}: the formula {formula!r} has an intercept (formulas "
                         f"have one unless '- 1' removes it), but "
                         f"{NO_INTERCEPT[cls.intercept_kind]}: write '- 1' in the formula")


def intercept_options(method, fit_intercept, params: dict) -> tuple[bool, dict]:
    """(whether the reading path prepends a constant column, the recursion's parameters)
    for ``fit_intercept``, as the recursion declares it (``intercept_kind``): the column
    for recursions fitted on X as it is, the kernel's own switch (LMS), a refusal where the
    constant is part of the model (IRMA's basis, interleaved KF4LLS's centred blocks)."""
    cls = type(method) if isinstance(method, Recursion) else RECURSIONS.get(method)
    if cls is None:
        return bool(fit_intercept), params
    kind = cls.intercept_kind
    if kind in ("basis", "centred"):
        if fit_intercept:
            raise InputError(f"{cls.name}: --intercept does not apply: {NO_INTERCEPT[kind]}")
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


def check_identified(traj: Trajectory, plan: StreamPlan, rec: Recursion,
                     weighted: bool = False, dropping: bool = False) -> None:
    """Refuse a fit whose rows never identify the coefficients (all of them leave the
    normal matrix singular), naming the rank and the remedy; or, when row weights
    (``weighted``) or dropped rows (``dropping``: ``--missing drop``) leave fewer rows of
    positive weight than coefficients, saying so."""
    try:
        rec.check_identified(traj.state)
    except SingularMatrixError as exc:
        few = too_few_rows(traj.state, exc.size, dropping) if weighted or dropping else None
        if few is not None:
            raise InputError(f"{plan.label}: variable 'X': {few}: the rows never identify "
                             "the coefficients") from None
        if plan.n_blocks == 1:
            where = f"variable 'X' chunk 0: the first block (rows 0-{plan.n_rows - 1}) leaves"
        else:
            where = f"variable 'X': its {plan.n_rows} rows (all {plan.n_blocks} blocks) leave"
        labels = list(coef_labels(rec, plan.sources[0], exc.size)) if exc.size else None
        rank = rank_phrase(exc, rec, labels, plan.n_rows)
        raise InputError(f"{plan.label}: {where} the normal matrix singular ({rank}): the rows "
                         f"never identify the coefficients; {never_identified_remedy(rec)}"
                         ) from None


def check_rows_weighed(traj: Trajectory, plan: StreamPlan, weights: str | None,
                       dropping: bool = False) -> None:
    """Refuse a fit with row weights (``weights``, the variable) or dropped rows
    (``dropping``) that saw no row of positive weight although its coefficients are
    defined (a ridge start alone): they would be the start's, whatever the data."""
    if (weights is None and not dropping) or "nobs" not in traj.state:
        return
    if int(np.asarray(traj.state["nobs"])) > 0:
        return
    if dropping and weights is None:
        remedy = ("every row misses a value: fill them, or leave out the variables that "
                  "miss them")
    else:
        remedy = f"give some rows a positive weight in '{weights}'"
    raise InputError(f"{plan.label}: variable 'X': {too_few_rows(traj.state, 1, dropping)}: "
                     f"the fit saw no data, its coefficients would be its ridge start's; "
                     f"{remedy}")


def too_few_rows(state: dict, n_coef: int | None, dropping: bool) -> str | None:
    """"no rows with positive weight" or "only N rows left after dropping missing values
    for K coefficients" when the state's count of rows of positive weight (``nobs``, kept
    by a least-squares fit) is below the coefficients; None otherwise."""
    if "nobs" not in state or n_coef is None:
        return None
    nobs = int(np.asarray(state["nobs"]))
    if nobs >= n_coef:
        return None
    if nobs == 0:
        return "no rows with positive weight" + (" after dropping missing values"
                                                 if dropping else "")
    rows = "row" if nobs == 1 else "rows"
    if dropping:
        return (f"only {nobs} {rows} left after dropping missing values for {n_coef} "
                "coefficients")
    return f"only {nobs} {rows} with positive weight for {n_coef} coefficients"


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
