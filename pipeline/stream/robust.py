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

import xarray as xr

from streamlsq.errors import InputError
from streamlsq.io.sources import StreamSource
from streamlsq.jobs import Context, Job, Pass, Run, RunOptions
from streamlsq.kernels import inference
from streamlsq.kernels.recursions.contract import BlockGrid, Recursion
from streamlsq.options.fit import ROBUST
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


def robust_piece(source: StreamSource, start: int, stop: int, coef, R, cov_type: str):
    """Dask task: (rows, part) of rows ``start:stop``: the meat of HC0–HC3, or the score
    sums of the groups of a cluster-robust covariance."""
    # as the scan engine's pieces: the rows are read and freed inside the block, whose heap
    # keeps their pages for the next piece and gives them back when it ends if the worker
    # is short of memory (without that, a 450 MB worker stayed paused at its limit, holding
    # a piece no other worker would take). The meat's temporaries are a slice's, a few MB
    with fast_large_allocations():
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


def _part(result):
    return result[1]


def robust_covariance(result, data, *, cov_type: str = "HC1", groups: str | None = None,
                      alpha: float | None = None, out=None, **run: Unpack[RunOptions]
                      ) -> xr.Dataset:
    """The least-squares fit ``result`` (a store or its Dataset) with the robust
    covariance ``cov_type`` (``"HC0"``–``"HC3"``, or ``"cluster"`` with the variable of
    group labels ``groups``) computed from the rows of ``data`` (the store it was fitted
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
        read = {**FitInputs.from_attrs(a).stream_options(), "groups": self.groups}
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
                                       self.alpha, self.segment_bytes))


@dataclass(eq=False)
class RobustPass(Pass):
    """The pass over the rows of ``source`` that gives the least-squares ``fit`` (fitted by
    ``recursion`` on those rows) the robust covariance ``cov_type`` (its group labels are
    the source's ``groups``) and the statistics that follow at level ``alpha``; pieces of
    about ``segment_bytes`` (default: the scan engine's). Its state is the sandwich's meat
    (and the number of groups); its value the fit with the robust statistics."""

    fit: xr.Dataset
    source: StreamSource
    recursion: Recursion
    cov_type: str
    alpha: float
    segment_bytes: int | None = None

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
                                     fac.coef, fac.R, self.cov_type, key=f"robust-{tag}-{i}",
                                     pure=False)
                   for i, (K0, K1) in enumerate(pieces)]
        wait_progress(ctx.client, futures, [plan.edge(K1) - plan.edge(K0) for K0, K1 in pieces],
                      f"covariance {self.cov_type}", unit="rows", enabled=ctx.progress)
        cluster = self.cov_type == "cluster"
        combine = inference.merge_score_sums if cluster else inference.combine_meats
        root = tree_reduce(ctx.client, futures, combine, leaf=_part,
                           name=f"robust-combine-{tag}").result()
        meat, n_groups = inference.cluster_meat(root) if cluster else (root["meat"], -1)
        return {"meat": meat, "n_groups": n_groups}

    def value(self, state) -> xr.Dataset:
        source = self.source
        cluster = self.cov_type == "cluster"
        n_groups = int(state["n_groups"]) if cluster else None
        if cluster and n_groups < 2:
            raise InputError(f"{source.label}: variable '{source.groups}' holds {n_groups} "
                             "group(s): a cluster-robust covariance needs at least 2")
        fac = result_factor(self.fit, self.recursion)
        stats = inference.robust_statistics(fac, state["meat"], self.cov_type, n_groups,
                                            self.alpha, constant_index(self.fit))
        ds = with_statistics(self.fit.copy(), stats)
        if cluster:
            ds.attrs["groups_variable"] = source.groups
        return ds
