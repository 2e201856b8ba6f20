"""Recursive residuals of a fit and its parameter-stability tests, and a figure of a fit.

A KF4LLS or RLS fit run with ``diagnostics=True`` (``streamlsq fit kf4lls --diagnostics``)
records at every recorded step, per target, the standardised recursive residual and the
one-step-ahead prediction error of the step's last row and the running count, sum and
sum of squares of the recursive residuals (``recursive_*``). :func:`stability` turns
those into the CUSUM and CUSUM-of-squares statistics with their 5% bounds (Brown,
Durbin & Evans 1975; the math is :mod:`streamlsq.kernels.recursions.stability`);
``fit_stream`` adds them to the result. :func:`plot_fit` draws a result's coefficients
and, when present, both tests (``streamlsq info RESULT --plot PNG``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from streamlsq.errors import InputError
from streamlsq.kernels.recursions.stability import (
    cusum,
    cusum_bound,
    cusum_squares,
    cusum_squares_bounds,
)

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = ["plot_fit", "stability"]

#: the per-step variables a fit with diagnostics records
RECURSIVE_VARIABLES = ("recursive_count", "recursive_sum", "recursive_sumsq")


def stability(ds: xr.Dataset, alpha: float = 0.05) -> xr.Dataset:
    """CUSUM and CUSUM of squares at the recorded steps of a result with diagnostics.

    Returns a Dataset with ``cusum (step, target)``, ``cusum_bound (step)`` (upper
    bound; the lower is its negative), ``cusum_squares (step, target)``,
    ``cusum_squares_lower/upper (step)`` and the attrs ``stability_alpha``,
    ``recursive_residuals`` (N) and ``cusum_outside``/``cusum_squares_outside`` (per
    target, the number of recorded steps outside the bounds). The totals are read at the
    last step, which every result records. Raises ``ValueError`` when the result has no
    diagnostics or fewer than 3 recursive residuals.

    Examples
    --------
    >>> import tempfile, numpy as np, streamlsq
    >>> from streamlsq.stream.stability import stability
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/d.zarr", n_rows=2_000, n_features=3,
    ...                                  seed=1)
    >>> ds = streamlsq.fit_stream(path, "kf4lls", block_size=100, diagnostics=True)
    >>> st = stability(ds)
    >>> st.attrs["recursive_residuals"], st.cusum.dims
    (1997, ('step', 'target'))
    >>> tmp.cleanup()
    """
    import xarray as xr
    missing = [v for v in RECURSIVE_VARIABLES if v not in ds]
    if missing:
        raise ValueError("the result has no recursive residuals: fit with diagnostics=True "
                         "(--diagnostics)")
    counts = ds.recursive_count.values
    total = int(counts[-1])
    if total < 3:
        raise ValueError(f"the stability tests need at least 3 recursive residuals, got {total}")
    sums, sumsqs = ds.recursive_sum.values, ds.recursive_sumsq.values
    w = cusum(sums, total, sums[-1], sumsqs[-1])
    bound = cusum_bound(counts, total, alpha)
    s = cusum_squares(sumsqs, sumsqs[-1])
    lower, upper = cusum_squares_bounds(counts, total, alpha)
    out = xr.Dataset(
        {
            "cusum": (("step", "target"), w),
            "cusum_bound": (("step",), bound),
            "cusum_squares": (("step", "target"), s),
            "cusum_squares_lower": (("step",), lower),
            "cusum_squares_upper": (("step",), upper),
        },
        coords={"step": ds.step.values, "target": ds.target.values},
    )
    out.attrs.update({
        "stability_alpha": float(alpha),
        "recursive_residuals": total,
        "cusum_outside": [int(v) for v in (np.abs(w) > bound[:, None]).sum(axis=0)],
        "cusum_squares_outside": [int(v) for v in ((s < lower[:, None]) | (s > upper[:, None]))
                                  .sum(axis=0)],
    })
    return out


def add_stability(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the variables and attrs of :func:`stability` (when it has diagnostics
    and enough residuals for the tests; otherwise unchanged)."""
    if any(v not in ds for v in RECURSIVE_VARIABLES) or int(ds.recursive_count[-1]) < 3:
        return ds
    st = stability(ds)
    ds = ds.merge(st, combine_attrs="override")
    ds.attrs.update(st.attrs)
    return ds


def _stream_fit(result) -> xr.Dataset:
    """A stream fit's result, opened when a store is given, refused in one line when it is
    another kind of result (a bare ``AttributeError`` on ``rows_seen`` before)."""
    import xarray as xr
    shown = "the result"
    if not isinstance(result, xr.Dataset):
        from streamlsq.jobs import Run

        shown, result = str(result), Run().open_input("result", result, lazy=False)
    coef = result.coef.dims if "coef" in result else ()
    if "rows_seen" not in result or set(coef) != {"step", "feature", "target"}:
        raise InputError(f"{shown}: the result of {result.attrs.get('method')!r}, not a stream "
                         "fit's: plot_fit draws a stream fit's coefficients against the rows "
                         "seen (rows_seen, coef (step, feature, target))")
    return result


def plot_fit(ds: xr.Dataset, path: str | os.PathLike | None = None, target: int = 0):
    """A figure of a stream fit: coefficients against rows seen (with their recursive
    confidence bands when the fit has statistics), for a result with recursive
    residuals the CUSUM and CUSUM-of-squares tests with their bounds, and for a rolling fit
    (``--window``) the coefficients of the windows against their last row, with their
    normal bands ψ ± z·bse.

    ``ds``: the fit's Dataset, or its result store (opened). Returns the
    :class:`matplotlib.figure.Figure`; with ``path``, also writes it (PNG).

    Examples
    --------
    >>> import tempfile, streamlsq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = streamlsq.simulate_stream(f"{tmp.name}/d.zarr", n_rows=500, n_features=2, seed=1)
    >>> ds = streamlsq.fit_stream(path, "rls", block_size=1, ridge=1e-3, diagnostics=True)
    >>> fig = streamlsq.plot_fit(ds, f"{tmp.name}/fit.png")
    >>> [ax.get_title() for ax in fig.axes][1:]
    ['CUSUM of recursive residuals', 'CUSUM of squares']
    >>> tmp.cleanup()
    """
    from matplotlib.figure import Figure

    ds = _stream_fit(ds)
    tests = "cusum" in ds
    rolling = "rolling_params" in ds
    panels = 1 + 2 * tests + rolling
    fig = Figure(figsize=(7, 0.8 + 2.4 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    rows = ds.rows_seen.values
    coef = ds.coef.isel(target=target).values
    bands = "recursive_conf_int_lower" in ds
    for j in range(coef.shape[1]):
        line, = axes[0].plot(rows, coef[:, j], lw=1, label=str(ds.feature.values[j]))
        if bands:  # statsmodels' RecursiveLS bands: the final scale, normal quantiles
            axes[0].fill_between(
                rows, ds.recursive_conf_int_lower.isel(target=target, feature=j),
                ds.recursive_conf_int_upper.isel(target=target, feature=j),
                color=line.get_color(), alpha=0.2, lw=0)
    level = f", {100 * (1 - ds.attrs.get('conf_int_alpha', 0.05)):g}% bands" if bands else ""
    axes[0].set(xlabel="rows seen", ylabel="coefficient",
                title=f"{ds.attrs.get('method', 'fit')}: coefficients (target {target}{level})")
    if coef.shape[1] <= 10:
        axes[0].legend(fontsize="small", ncol=2)
    if tests:
        alpha = ds.attrs.get("stability_alpha", 0.05)
        pct = f"{100 * alpha:g}%"
        axes[1].plot(rows, ds.cusum.isel(target=target), lw=1, label="CUSUM")
        axes[1].plot(rows, ds.cusum_bound, "k--", lw=0.8, label=f"{pct} bounds")
        axes[1].plot(rows, -ds.cusum_bound, "k--", lw=0.8)
        axes[1].axhline(0, color="k", alpha=0.3, lw=0.8)
        axes[1].set(xlabel="rows seen", ylabel="W", title="CUSUM of recursive residuals")
        axes[1].legend(fontsize="small")
        axes[2].plot(rows, ds.cusum_squares.isel(target=target), lw=1, label="CUSUM of squares")
        axes[2].plot(rows, ds.cusum_squares_lower, "k--", lw=0.8, label=f"{pct} bounds")
        axes[2].plot(rows, ds.cusum_squares_upper, "k--", lw=0.8)
        axes[2].set(xlabel="rows seen", ylabel="s", title="CUSUM of squares")
        axes[2].legend(fontsize="small")
    if rolling:
        _plot_windows(axes[-1], ds, target)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _plot_windows(ax, ds: xr.Dataset, target: int) -> None:
    """The rolling windows' coefficients against the windows' last rows, with the bands
    ψ ± z_{1−α/2}·bse of each window."""
    from streamlsq.kernels.inference.classical import critical_value

    alpha = ds.attrs.get("conf_int_alpha", 0.05)
    z = critical_value(alpha, None, False)
    ends = ds.window_end.values + 1
    params = ds.rolling_params.isel(target=target).values
    bse = ds.rolling_bse.isel(target=target).values
    for j in range(params.shape[1]):
        line, = ax.plot(ends, params[:, j], lw=1, label=str(ds.feature.values[j]))
        ax.fill_between(ends, params[:, j] - z * bse[:, j], params[:, j] + z * bse[:, j],
                        color=line.get_color(), alpha=0.2, lw=0)
    ax.set(xlabel="last row of the window", ylabel="coefficient",
           title=f"windows of {ds.attrs.get('rolling_window')} rows (target {target}, "
                 f"{100 * (1 - alpha):g}% bands)")
    if params.shape[1] <= 10:
        ax.legend(fontsize="small", ncol=2)
