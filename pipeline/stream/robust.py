"""Robust covariances of a least-squares fit: one more pass over its rows.

A heteroscedasticity-robust (HC0–HC3) or cluster-robust covariance needs the final
coefficients: the residual of every row. :class:`RobustPass` is that pass, a step of the run
that asks for it (:meth:`streamlsq.jobs.Context.run_pass`): the rows are cut into pieces of
whole chunks (bounded in bytes, as the scan engine's pieces, so a store larger than the
workers' memory is read piece by piece), each Dask task reads its piece and returns its part
of the sandwich's meat (:func:`~streamlsq.kernels.inference.hc_meat`: a k×k sum per target)
or the score sums of the groups it holds
(:func:`~streamlsq.kernels.inference.cluster_score_sums`), and the parts are combined in a
fixed tree (:func:`~streamlsq.runtime.reduce.tree_reduce`: the order of the additions
depends on the pieces only, never on the workers). The meat and the fit's factor then give
the covariance (:func:`~streamlsq.kernels.inference.robust_statistics`, statsmodels'
corrections and defaults).

A fit asks for it with ``cov_type=`` (``fit_stream``, ``streamlsq fit kf4lls --cov-type``):
the fit job runs the pass on its run's cluster once the fit is done (with ``--checkpoint``
its meat is committed as a step, so ``--resume`` does not run it again).
:func:`robust_covariance` runs it on a fit already published, as a job of its own
(:class:`RobustCovariance`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.sources import StreamSource
from streamlsq.jobs import Context, Job, Pass, Run, RunOptions
from streamlsq.kernels import inference
from streamlsq.kernels.recursions.contract import BlockGrid, Recursion
from streamlsq.options.fit import HAC_KERNEL, ROBUST, label_variables
from streamlsq.runtime.memory import fast_large_allocations
from streamlsq.runtime.reduce import tree_reduce, wait_progress
from streamlsq.stream.engines import PIECE_BYTES, bytes_per_call
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.plans import StreamPlan, plan_segments
from streamlsq.stream.statistics import (
    CONF_ALPHA,
    constant_index,
    fit_recursion,
    result_factor,
    with_statistics,
)

__all__ = ["RobustCovariance", "RobustPass", "robust_covariance"]


def robust_piece(source: StreamSource, start: int, stop: int, coef, R, cov_type: str,
                 maxlags: int | None = None, kernel: str = "bartlett"):
    """Dask task: (rows, part) of rows ``start:stop``: the meat of HC0–HC3 or of HAC (whose
    lags reach back into the ``maxlags`` rows before ``start``, read as its halo; within
    panels for hac-panel, with the runs of panel labels: :func:`_panel_part`), the
    score sums of the groups of a cluster-robust covariance (one table per grouping of a
    two-way one: A, B and A∩B), or of the periods of hac-groupsum (with the number of times
    the time labels decrease, statsmodels' count of panels)."""
    # as the scan engine's pieces: the rows are read and freed inside the block, whose heap
    # keeps their pages for the next piece and gives them back when it ends if the worker
    # is short of memory (without that, a 450 MB worker stayed paused at its limit, holding
    # a piece no other worker would take). The meat's temporaries are a slice's, a few MB
    with fast_large_allocations():
        if cov_type == "HAC":
            X, Y, w, halo = _hac_rows(source, start, stop, int(maxlags))
            part = inference.hac_meat(X, Y, coef, maxlags, kernel, w, halo)
        elif cov_type == "hac-panel":
            part = _panel_part(source, start, stop, coef, int(maxlags), kernel)
        elif cov_type == "hac-groupsum" or (cov_type == "cluster" and "," in source.groups):
            part = _grouped_scores(source, start, stop, coef, cov_type)
        else:
            X, Y, w = source.read_weighted(start, stop)
            if cov_type == "cluster":
                labels = source.read_labels(start, stop)
                part = inference.cluster_score_sums(X, Y, coef, labels, w)
            else:
                try:
                    part = inference.hc_meat(X, Y, coef, R, cov_type, w)
                except inference.LeverageOneError as exc:
                    row = start + exc.row
                    raise InputError(f"{source.label}: variable 'X' chunk "
                                     f"{row // source.chunk_rows} row {row} {exc.reason}"
                                     ) from None
            del X, Y, w
    return stop - start, part


def _hac_rows(source: StreamSource, start: int, stop: int, maxlags: int):
    """(X, Y, w, halo): the rows ``start:stop`` after their halo, the rows before ``start``
    back to the ``maxlags``-th of positive weight (or to the first row): a row of weight 0
    (dropped) is not in the series, so the halo reaches past it, twice as far each time."""
    halo = min(maxlags, start)
    X, Y, w = source.read_weighted(start - halo, stop)
    while (w is not None and halo < start
           and np.count_nonzero(w[:halo] > 0) < maxlags):
        more = min(max(halo, 1), start - halo)
        Xb, Yb, wb = source.read_weighted(start - halo - more, start - halo)
        X, Y = np.concatenate([Xb, X]), np.concatenate([Yb, Y])
        w = np.concatenate([np.ones(more) if wb is None else wb, w])
        halo += more
    return X, Y, w, halo


def _label_text(value) -> str:
    """A label as a message shows it (a NumPy scalar as the Python value it holds)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _panel_part(source: StreamSource, start: int, stop: int, coef, maxlags: int,
                kernel: str) -> dict:
    """The part of the hac-panel meat of rows ``start:stop`` (their halo: the ``maxlags``
    rows of positive weight before ``start``, at least one, with their panel labels), and
    the runs of panel labels of its own rows (:func:`~streamlsq.kernels.inference.panel_runs`,
    the rows kept). With a time variable (the source's second label variable) the rows of
    each panel must be in increasing time order, from the halo's last row on: refused
    naming the row where they are not."""
    X, Y, w, halo = _hac_rows(source, start, stop, max(maxlags, 1))
    columns = source.read_label_columns(start - halo, stop)
    kept = np.ones(len(X), bool) if w is None else np.asarray(w) > 0
    rows = np.arange(start - halo, stop)[kept]
    panels = np.asarray(columns[0])
    part = inference.panel_hac_meat(X, Y, coef, maxlags, panels, kernel, w, halo)
    del X, Y
    panels = panels[kept]
    own = int(np.count_nonzero(kept[:halo]))  # the first of the piece's own rows kept
    if len(columns) > 1:
        time = np.asarray(columns[1])[kept]
        i = inference.time_order_break(inference.panel_ids(panels), time, own)
        if i is not None:
            name = source.groups.split(",")[1].strip()
            raise InputError(
                f"{source.label}: variable '{name}' row {rows[i]}: time {_label_text(time[i])} "
                f"is not after {_label_text(time[i - 1])} of the row before in panel "
                f"{_label_text(panels[i])}; hac-panel needs the rows of each panel in time "
                "order (sort the rows by panel, then time)")
    part.update(inference.panel_runs(panels[own:], rows[own:]))
    return part


def combine_panels(*parts: dict) -> dict:
    """hac-panel's parts of several pieces: their meats added (in the order of the parts)
    and their runs of panel labels joined."""
    return {**inference.combine_meats(*parts), **inference.merge_panel_runs(*parts)}


def _group_sums(scores, labels) -> dict:
    """The sums of the rows' scores (n, k, K) by label, by flox: ``labels`` (sorted) and
    ``sums`` (G, k, K)."""
    from flox import groupby_reduce

    n, k, K = scores.shape
    if n == 0:
        return {"labels": np.asarray(labels)[:0], "sums": np.zeros((0, k, K))}
    sums, groups = groupby_reduce(scores.reshape(n, k * K).T, labels, func="sum")
    return {"labels": np.asarray(groups), "sums": np.ascontiguousarray(sums.T).reshape(-1, k, K)}


def _pair_labels(a, b) -> np.ndarray:
    """One label per row for the intersection of two groupings: the two labels as text,
    the first preceded by its length (so that no two pairs give the same text)."""
    text = np.dtypes.StringDType()  # numbers, fixed-width and variable-width strings alike
    a, b = np.asarray(a).astype(text), np.asarray(b).astype(text)
    join = np.strings.add
    return join(join(join(np.strings.str_len(a).astype(text), ":"), a), b)


def _grouped_scores(source: StreamSource, start: int, stop: int, coef, cov_type: str) -> dict:
    """The score sums of a two-way cluster covariance (tables ``a``, ``b``, ``ab``) or of
    hac-groupsum's periods (table ``periods``, and ``resets``: rows whose time label is
    below the one before, counted from the row before ``start``)."""
    X, Y, w = source.read_weighted(start, stop)
    scores = inference.row_scores(X, Y, coef, w)
    del X, Y
    kept = slice(None) if w is None else np.asarray(w) > 0  # a dropped row is in no group
    columns = [np.asarray(c)[kept] for c in source.read_label_columns(start, stop)]
    scores = scores[kept]
    if cov_type == "hac-groupsum":
        (time,) = columns
        before = _kept_label_before(source, start, time[:0])
        series = np.concatenate([before, time]) if len(before) else time
        resets = int((series[1:] < series[:-1]).sum())
        return {"tables": {"periods": _group_sums(scores, time)}, "resets": resets}
    a, b = columns
    return {"tables": {"a": _group_sums(scores, a), "b": _group_sums(scores, b),
                       "ab": _group_sums(scores, _pair_labels(a, b))}, "resets": 0}


def _kept_label_before(source: StreamSource, start: int, empty: np.ndarray) -> np.ndarray:
    """The time label of the last row of positive weight before ``start`` (``empty`` when
    there is none): dropped rows are skipped, looking back twice as far each time."""
    stop, span = start, 1
    while stop > 0:
        begin = max(0, stop - span)
        labels = source.read_label_columns(begin, stop)[0]
        w = source.read_weighted(begin, stop)[2]
        kept = np.flatnonzero(np.ones(stop - begin, bool) if w is None else np.asarray(w) > 0)
        if len(kept):
            return labels[kept[-1]:kept[-1] + 1]
        stop, span = begin, 2 * span
    return empty


def _part(result):
    return result[1]


def combine_grouped(*parts: dict) -> dict:
    """Grouped score sums of several pieces, merged table by table by label (in the order
    of the parts), and their counts of resets added."""
    tables = {name: inference.merge_score_sums(*(p["tables"][name] for p in parts))
              for name in parts[0]["tables"]}
    return {"tables": tables, "resets": sum(int(p["resets"]) for p in parts)}


def robust_covariance(result, data, *, cov_type: str = "HC1", groups: str | None = None,
                      time: str | None = None, maxlags: int | None = None,
                      kernel: str | None = None, use_correction: bool | str | None = None,
                      alpha: float | None = None, out=None, **run: Unpack[RunOptions]
                      ) -> xr.Dataset:
    """The least-squares fit ``result`` (a store or its Dataset) with the robust
    covariance ``cov_type`` (``"HC0"``–``"HC3"``; ``"cluster"`` with the variable of
    group labels ``groups``, or two comma-separated for two-way clusters; ``"HAC"`` with
    ``maxlags``, ``kernel`` and ``use_correction``; ``"hac-panel"`` with the variable of
    panel labels ``groups`` as well (and ``time`` to check the order of each panel's rows;
    ``use_correction`` ``"hac"``, ``"cluster"`` or False); ``"hac-groupsum"`` with the
    variable of time labels ``time``) computed from the rows of ``data`` (the store it was fitted
    on, read as the fit read it): its statistics replaced by the robust ones, as
    statsmodels' ``fit(cov_type=...)`` gives them. One pass over all the rows.

    Examples
    --------
    >>> import numpy as np, xarray as xr, streamlsq
    >>> rng = np.random.default_rng(0)
    >>> table = xr.Dataset({"x": ("row", rng.standard_normal(400))})
    >>> table["y"] = 2.0 * table.x + (1 + abs(table.x)) * rng.standard_normal(400)
    >>> fit = streamlsq.fit_stream(table, x="x", y="y", fit_intercept=True)
    >>> robust = streamlsq.robust_covariance(fit, table, cov_type="HC3")
    >>> robust.attrs["cov_type"], bool(robust.bse[1, 0] > fit.bse[1, 0])
    ('HC3', True)
    """
    given = {name: value for name, value in locals().items() if name in ROBUST}
    return Run(out, **run).execute(RobustCovariance(result, data, **given))


@dataclass(eq=False)
class RobustCovariance(Job):
    """A least-squares fit already published, given its robust covariance and the
    statistics that follow (:func:`robust_covariance`): a job whose computation is one
    :class:`RobustPass` over the rows it was fitted on."""

    result: Any
    data: Any
    cov_type: str = "HC1"
    groups: str | None = None
    time: str | None = None
    maxlags: int | None = None
    kernel: str | None = None
    use_correction: bool | str | None = None
    alpha: float | None = None
    segment_bytes: int | None = None

    options = ROBUST

    @property
    def name(self) -> str:  # the result stays a fit of its recursion
        return self.fit.attrs["method"]

    def check(self) -> None:
        if self.alpha is None:  # checked with the options (ROBUST)
            self.alpha = CONF_ALPHA.default

    def open(self, run: Run) -> list:
        self.fit = self.result if isinstance(self.result, xr.Dataset) else run.open_input(
            "result", self.result, lazy=False).load()
        a = self.fit.attrs
        self.recursion = fit_recursion(a)
        why = self.recursion.inference_unavailable()
        if why is not None or "nobs" not in self.fit:
            reason = why or a.get("statistics_unavailable", "it holds no statistics")
            raise InputError(f"the fit has no robust covariance: {reason}")
        read = {**FitInputs.from_attrs(a).stream_options(),
                "groups": label_variables(self.cov_type, self.groups, self.time)}
        self.source = run.open_input("stream", self.data, **read)
        if (self.source.n_rows, self.source.n_features) != (int(a["n_rows"]),
                                                            self.fit.sizes["feature"]):
            raise InputError(f"{self.source.label}: has {self.source.n_rows} rows of "
                             f"{self.source.n_features} columns, the fit "
                             f"{a['n_rows']} of {self.fit.sizes['feature']}: not its data")
        return [self.source]

    def parameters(self) -> dict:
        return json.loads(self.fit.attrs.get("parameters", "{}"))

    def compute(self, ctx: Context) -> xr.Dataset:
        return ctx.run_pass(RobustPass(self.fit, self.source, self.recursion, self.cov_type,
                                       self.alpha, self.segment_bytes, self.maxlags,
                                       self.kernel, self.use_correction))


@dataclass(eq=False)
class RobustPass(Pass):
    """The pass over the rows of ``source`` that gives the least-squares ``fit`` (fitted by
    ``recursion`` on those rows) the robust covariance ``cov_type`` (its group labels are
    the source's ``groups``: two for two-way clusters, the time labels for hac-groupsum,
    the panel labels, and possibly their time labels, for hac-panel)
    and the statistics that follow at level ``alpha``; pieces of about ``segment_bytes``
    (default: the scan engine's); a HAC covariance's ``maxlags``, ``kernel`` and
    ``use_correction``. Its state is the sandwich's meat (three, of A, B and A∩B, for two-way
    clusters) and the numbers of groups; its value the fit with the robust statistics."""

    fit: xr.Dataset
    source: StreamSource
    recursion: Recursion
    cov_type: str
    alpha: float
    segment_bytes: int | None = None
    maxlags: int | None = None
    kernel: str | None = None
    use_correction: bool | str | None = None

    def __post_init__(self):
        if self.kernel is None:  # not named: the declared default
            self.kernel = HAC_KERNEL

    @property
    def name(self) -> str:
        return f"robust-{self.cov_type}"

    def compute(self, ctx: Context) -> dict:
        source = self.source
        fac = result_factor(self.fit, self.recursion)
        plan = StreamPlan.single(source, BlockGrid(source.n_rows, source.chunk_rows))
        pieces = plan_segments(plan, bytes_per_call(ctx.client,
                                                    self.segment_bytes or PIECE_BYTES))
        tag = uuid.uuid4().hex[:8]
        # the coefficients and the factor go in each task (k×k at most), not scattered:
        # a task whose worker was restarted runs again elsewhere (a scattered array lost
        # with its workers cannot be recomputed, and the pass failed)
        futures = [ctx.client.submit(robust_piece, source, plan.edge(K0), plan.edge(K1),
                                     fac.coef, fac.R, self.cov_type, self.maxlags, self.kernel,
                                     key=f"robust-{tag}-{i}", pure=False)
                   for i, (K0, K1) in enumerate(pieces)]
        wait_progress(ctx.client, futures, [plan.edge(K1) - plan.edge(K0) for K0, K1 in pieces],
                      f"covariance {self.cov_type}", unit="rows", enabled=ctx.progress)
        if self.grouped:
            root = tree_reduce(ctx.client, futures, combine_grouped, leaf=_part,
                               name=f"robust-combine-{tag}").result()
            tables = root["tables"]
            if self.cov_type == "hac-groupsum":
                sums = tables["periods"]["sums"]
                return {"meat": inference.series_hac_meat(sums, self.maxlags, self.kernel),
                        "n_groups": np.array([len(sums), root["resets"] + 1])}
            meats = [inference.cluster_meat(tables[name]) for name in ("a", "b", "ab")]
            return {"meat": np.stack([m for m, _ in meats]),
                    "n_groups": np.array([g for _, g in meats])}
        if self.cov_type == "hac-panel":
            root = tree_reduce(ctx.client, futures, combine_panels, leaf=_part,
                               name=f"robust-combine-{tag}").result()
            return {"meat": root["meat"], "n_groups": self.checked_panels(root)}
        cluster = self.cov_type == "cluster"
        combine = inference.merge_score_sums if cluster else inference.combine_meats
        root = tree_reduce(ctx.client, futures, combine, leaf=_part,
                           name=f"robust-combine-{tag}").result()
        meat, n_groups = inference.cluster_meat(root) if cluster else (root["meat"], -1)
        return {"meat": meat, "n_groups": n_groups}

    def checked_panels(self, runs: dict) -> int:
        """The number of panels of hac-panel from the runs of panel labels of all the rows,
        refused naming the variable and a row: a panel whose rows are not together (a
        label starting a second run), a panel of at most ``maxlags`` rows (its lags pair
        none of its rows), a single panel."""
        source, name = self.source, self.source.groups.split(",")[0].strip()
        labels, starts, counts = runs["labels"], runs["starts"], runs["counts"]
        j = inference.repeated_panel(runs)
        if j is not None:
            raise InputError(
                f"{source.label}: variable '{name}' row {starts[j]}: panel "
                f"{_label_text(labels[j])} starts again after rows of other panels; "
                "hac-panel needs the rows of each panel together, in time order (sort the "
                "rows by panel, then time)")
        short = np.flatnonzero(counts <= self.maxlags)
        if short.size:
            j = int(short[0])
            raise InputError(
                f"{source.label}: variable '{name}' row {starts[j]}: panel "
                f"{_label_text(labels[j])} holds {counts[j]} row(s), not more than --maxlags "
                f"{self.maxlags}; hac-panel needs panels longer than the lags (give fewer "
                "lags, or leave the short panels out)")
        if len(labels) < 2:
            raise InputError(f"{source.label}: variable '{name}' holds {len(labels)} "
                             "panel(s): hac-panel needs at least 2")
        return len(labels)

    @property
    def grouped(self) -> bool:
        """Whether the pieces return grouped score sums of :func:`combine_grouped` (two-way
        clusters, hac-groupsum)."""
        return self.cov_type == "hac-groupsum" or (self.cov_type == "cluster"
                                                   and "," in self.source.groups)

    def description(self) -> str:
        """Which covariance, in words the summary shows: the kernel and lags of a HAC
        covariance, the variables of a clustered one."""
        source = self.source
        if self.cov_type == "hac-panel":
            names = [g.strip() for g in source.groups.split(",")]
            order = f" in the order of '{names[1]}'" if len(names) > 1 else ""
            correction = {False: "without small-sample correction",
                          "cluster": "with the cluster small-sample correction"}.get(
                self.use_correction, "with the hac small-sample correction")
            return (f"hac-panel ({self.kernel} kernel, {self.maxlags} lags within the panels "
                    f"of '{names[0]}'{order}, {correction})")
        if self.cov_type in ("HAC", "hac-groupsum"):
            default = self.cov_type == "hac-groupsum"
            corrected = default if self.use_correction is None else self.use_correction
            over = f", periods of '{source.groups}'" if self.cov_type == "hac-groupsum" else ""
            return (f"{self.cov_type} ({self.kernel} kernel, {self.maxlags} lags{over}, "
                    f"{'with' if corrected else 'without'} small-sample correction)")
        names = ", ".join(f"'{g.strip()}'" for g in source.groups.split(","))
        return f"cluster ({'two-way: ' if ',' in source.groups else ''}{names})"

    def value(self, state) -> xr.Dataset:
        source = self.source
        cluster = self.cov_type == "cluster"
        n_groups = np.atleast_1d(np.asarray(state["n_groups"]))
        few = [(name, int(g)) for name, g in zip(source.groups.split(",") if cluster else (),
                                                 n_groups, strict=False) if g < 2]
        if few:
            name, count = few[0]
            raise InputError(f"{source.label}: variable '{name.strip()}' holds {count} "
                             "group(s): a cluster-robust covariance needs at least 2")
        if self.cov_type == "hac-groupsum" and n_groups[0] < 2:
            raise InputError(f"{source.label}: variable '{source.groups}' holds "
                             f"{int(n_groups[0])} period(s): hac-groupsum needs at least 2")
        fac = result_factor(self.fit, self.recursion)
        meat, two_way, panels = state["meat"], None, None
        if cluster and self.grouped:
            two_way, meat = inference.two_way_terms(meat, n_groups), None
        elif self.cov_type == "hac-groupsum":
            panels = int(n_groups[1])
        elif self.cov_type == "hac-panel":
            panels = int(n_groups[0])
        try:
            stats = inference.robust_statistics(
                fac, meat, self.cov_type, int(n_groups[0]) if cluster or panels else None,
                self.alpha, constant_index(self.fit), use_correction=self.use_correction,
                n_panels=panels, two_way=two_way)
        except inference.SingularCovarianceError as exc:
            raise InputError(f"{source.label}: --cov-type {self.cov_type}: {exc}; leave that "
                             "row (or group) out, or use --cov-type nonrobust") from None
        ds = with_statistics(self.fit.copy(), stats)
        if cluster:
            ds.attrs["groups_variable"] = source.groups
        elif self.cov_type == "hac-panel":
            ds.attrs["groups_variable"] = source.groups.split(",")[0].strip()
        if self.cov_type in ("HAC", "hac-panel", "hac-groupsum") or self.grouped:
            ds.attrs["cov_description"] = self.description()
        if self.cov_type in ("HAC", "hac-panel", "hac-groupsum"):
            ds.attrs.update(maxlags=int(self.maxlags), kernel=self.kernel)
        return ds
