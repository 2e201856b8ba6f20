"""Rolling least squares over a stream: one more pass that fits every recorded window of
``window`` rows exactly (:func:`streamlsq.kernels.inference.rolling_fit`: QR factors
merged by a two-stack queue, none downdated).

The windows are independent of each other, so the pass cuts the recorded window ends into
groups and each Dask task reads the rows of its group's windows (from the start of its
first window to the end of its last) and fits them in order; the groups run in parallel,
whichever engine fitted the rows (the windows' answers do not depend on it). A group holds
at most :data:`WINDOWS_PER_TASK` windows and about :data:`GROUP_ROWS` rows besides its first
window, so a task reads at most a window and a bounded stretch of rows after it, and every
row but those of the first window of a group is read once. Expanding windows (which all
start at row 0 until they hold ``window`` rows) are grouped apart from the rolling ones
after them, and a task of expanding windows reads only the rows its windows add: the rows
before them come as one summary (their factor and counts,
:func:`~streamlsq.kernels.inference.rolling.rows_summary`), each run of rows between two
groups summarised by a task of a first pass and the summaries merged in order on the client
(p × p factors). Each row is then read twice in all, not once per group after it.

The result gains, along the dimension ``window`` (the windows' last rows,
``window_end``), the statistics statsmodels' ``RollingOLS`` gives, named as it names them
with ``rolling_`` in front: ``rolling_params``, ``rolling_bse``, ``rolling_tvalues``
``(window, feature, target)`` and ``rolling_rsquared``, ``rolling_rsquared_adj``,
``rolling_ssr``, ``rolling_nobs``, ``rolling_llf``, ``rolling_aic``, ``rolling_bic``
``(window, target)``. With ``cov_type="HC0"`` the windows' ``rolling_bse`` and
``rolling_tvalues`` are those of ``RollingOLS(...).fit(cov_type="HCCM")``, each window's
from its own residuals (:func:`streamlsq.kernels.inference.rolling_robust.rolling_hc0`);
with ``cov_type="HAC"`` each window's Newey–West covariance of its own rows (the lags pair
rows of the window only); the attribute ``rolling_cov_type`` says which.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import xarray as xr

from streamlsq.io.sources import StreamSource
from streamlsq.jobs import Context, Pass
from streamlsq.kernels.inference import rolling as rolling_kernels
from streamlsq.kernels.inference import rolling_robust
from streamlsq.options.fit import HAC_KERNEL
from streamlsq.runtime.reduce import wait_progress

__all__ = ["GROUP_ROWS", "RollingPass", "WINDOWS_PER_TASK", "expanding_reads", "window_groups"]

#: rows a group of windows reaches beyond its first window (the rows each task reads once)
GROUP_ROWS = 200_000
#: windows a Dask task fits at most (their statistics come back to the client)
WINDOWS_PER_TASK = 2_000


def window_groups(ends: np.ndarray, window: int, expanding: bool = False
                  ) -> list[tuple[int, int]]:
    """Consecutive groups [i, j) of the window ends ``ends`` (exclusive row ends, sorted),
    each reaching at most :data:`GROUP_ROWS` rows past its first window's end and holding at
    most :data:`WINDOWS_PER_TASK` windows; ``expanding``: no group holds both windows
    starting at row 0 (ending at row ``window`` or before) and later ones."""
    groups, i = [], 0
    while i < len(ends):
        j = i + 1
        while (j < len(ends) and j - i < WINDOWS_PER_TASK
               and ends[j] - ends[i] <= GROUP_ROWS
               and not (expanding and ends[i] <= window < ends[j])):
            j += 1
        groups.append((i, j))
        i = j
    return groups


def expanding_reads(ends: np.ndarray, groups: list[tuple[int, int]], window: int
                    ) -> tuple[list[int], list[tuple[int, int]]]:
    """For the groups of expanding windows (those ending at row ``window`` or before, the
    first groups): the first row each reads (the previous group's last window end, 0 for
    the first group), and the runs of rows [a, b) between them whose summaries, merged in
    order, are the priors of the groups after the first."""
    firsts = [0]
    for i, _ in groups[1:]:
        if ends[i] > window:
            break
        firsts.append(int(ends[i - 1]))
    return firsts, list(zip(firsts[:-1], firsts[1:], strict=True))


def summarise_rows(source: StreamSource, start: int, stop: int) -> dict:
    """Dask task: the summary of the rows ``start:stop`` (their factor and counts), a part
    of the prior of the expanding windows after them."""
    X, Y, w = source.read_weighted(start, stop)
    return rolling_kernels.rows_summary(X, Y, w)


def rolling_group(source: StreamSource, ends: np.ndarray, window: int, min_nobs: int,
                  constant, prior: dict | None = None, cov_type: str = "nonrobust",
                  hac: dict | None = None) -> dict:
    """Dask task: the windows ending at ``ends`` fitted from the rows they cover (after
    ``prior``'s rows, the summary of the rows before them, when given; their covariance
    ``cov_type``: nonrobust, or HC0 or HAC (with ``hac``: ``maxlags``, ``kernel``,
    ``use_correction``), which need every row of each window, so no prior)."""
    first = prior["rows"] if prior is not None else max(0, int(ends[0]) - window)
    X, Y, w = source.read_weighted(first, int(ends[-1]))
    # the group's window ends counted from the first row read
    fit = rolling_kernels.rolling_fit(X, Y, window, min_nobs=min_nobs, weights=w,
                                      constant=constant, ends=np.asarray(ends) - first,
                                      prior=prior)
    if cov_type != "nonrobust":  # each window's own residuals, from the rows read
        robust = rolling_robust.rolling_robust(X, Y, fit["params"], fit["ends"], window, w,
                                               cov_type=cov_type, **(hac or {}))
        fit["bse"], fit["tvalues"] = robust["bse"], robust["tvalues"]
    fit["ends"] = np.asarray(ends)
    return fit


@dataclass(eq=False)
class RollingPass(Pass):
    """The pass over the rows of ``source`` that fits each window of ``window`` rows ending
    every ``window_step`` rows (the first ending at row ``window``; with ``expanding`` at
    row ``min_nobs``, the windows starting at row 0 until they hold ``window`` rows, as
    ``RollingOLS(expanding=True)``; ``min_nobs`` rows of positive weight at least, default
    the number of coefficients), and adds the windows' statistics to the ``fit`` (the
    module's docstring). ``constant``: the intercept's column, if the fit has one (else a
    column constant on all the rows, as statsmodels' ``k_constant``); ``cov_type``: the
    windows' covariance, ``"nonrobust"`` or ``"HC0"`` (``RollingOLS``' names) or ``"HAC"``
    (with ``maxlags``, ``kernel`` and ``use_correction``)."""

    fit: xr.Dataset
    source: StreamSource
    window: int
    window_step: int = 1
    min_nobs: int | None = None
    constant: int | None = None
    expanding: bool = False
    cov_type: str = "nonrobust"
    maxlags: int | None = None
    kernel: str | None = None
    use_correction: bool | None = None

    name = "rolling"

    def compute(self, ctx: Context) -> dict:
        source = self.source
        k = source.n_features
        min_nobs = k if self.min_nobs is None else int(self.min_nobs)
        ends = rolling_kernels.window_ends(source.n_rows, self.window, min_nobs,
                                           self.window_step, self.expanding)
        if len(ends) == 0:
            return {"ends": ends}
        tag = uuid.uuid4().hex[:8]
        groups = window_groups(ends, self.window, self.expanding)
        priors = [None] * len(groups)
        # the rows before each group of expanding windows, summarised (not for a robust
        # covariance, whose windows' residuals need every row of the window)
        if self.expanding and self.cov_type == "nonrobust":
            firsts, runs = expanding_reads(ends, groups, self.window)
            parts = ctx.client.gather([
                ctx.client.submit(summarise_rows, source, a, b, key=f"rolling-rows-{tag}-{n}",
                                  pure=False) for n, (a, b) in enumerate(runs)])
            for n, part in enumerate(parts, start=1):
                priors[n] = part if n == 1 else rolling_kernels.merge_summaries(
                    priors[n - 1], part)
        hac = (dict(maxlags=self.maxlags, kernel=self.kernel or HAC_KERNEL,
                    use_correction=self.use_correction) if self.cov_type == "HAC" else None)
        futures = [ctx.client.submit(rolling_group, source, ends[i:j], self.window, min_nobs,
                                     self.constant, priors[n], self.cov_type, hac,
                                     key=f"rolling-{tag}-{n}",
                                     pure=False)
                   for n, (i, j) in enumerate(groups)]
        wait_progress(ctx.client, futures, [j - i for i, j in groups], "rolling windows",
                      unit="windows", enabled=ctx.progress)
        parts = ctx.client.gather(futures)
        return {name: np.concatenate([p[name] for p in parts])
                for name in ("ends", *rolling_kernels.ROLLING_STATISTICS)}

    def value(self, state) -> xr.Dataset:
        ds = self.fit
        # a window whose rows do not identify the coefficients is not recorded (as a step
        # of the trajectory is not): a result holds no NaN
        params = np.asarray(state.get("params", np.zeros((0, 1, 1))))
        keep = np.isfinite(params).all(axis=(1, 2))
        if "bse" in state:  # and one whose covariance is undefined (no residual df) neither
            keep &= np.isfinite(np.asarray(state["bse"])).all(axis=(1, 2))
        ends = np.asarray(state["ends"])[keep]
        if len(ends) == 0:
            ds = ds.copy()
            ds.attrs.update(rolling_window=int(self.window), rolling_cov_type=self.cov_type)
            return ds
        variables = {"window_end": ("window", ends - 1)}
        for name in rolling_kernels.ROLLING_STATISTICS:
            values = np.asarray(state[name])[keep]
            if name == "nobs":
                values = values.astype(np.int64)
            dims = ("window", "feature", "target") if values.ndim == 3 else ("window", "target")
            variables[f"rolling_{name}"] = (dims, values)
        ds = ds.assign(variables)
        ds.attrs.update(rolling_window=int(self.window), rolling_step=int(self.window_step),
                        rolling_min_nobs=int(self.min_nobs or self.source.n_features),
                        rolling_expanding=bool(self.expanding), rolling_cov_type=self.cov_type)
        return ds
