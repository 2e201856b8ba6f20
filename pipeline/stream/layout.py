"""The result layout of a stream fit (``docs/stores.md#stream-fit-result``): the recorded
trajectory as an xarray Dataset, its labels, and the last guard before it is published."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from streamlsq.errors import InputError
from streamlsq.io.formulas import intercept_label
from streamlsq.io.sources import StreamSource
from streamlsq.kernels.limits import state_is_finite
from streamlsq.kernels.recursions.contract import Recursion
from streamlsq.stream.engines import Trajectory
from streamlsq.stream.fit_inputs import FitInputs
from streamlsq.stream.plans import StreamPlan

if TYPE_CHECKING:  # imported where a Dataset is made: the fit starts before xarray
    import xarray as xr

__all__ = ["check_trajectory", "coef_labels", "step_sections", "trajectory_dataset"]


def check_trajectory(traj: Trajectory, plan: StreamPlan) -> None:
    """Refuse a trajectory with a non-finite coefficient or final state (the engines name
    the block that broke it; this is the last guard before anything is written)."""
    bad = ~np.isfinite(traj.coefs).reshape(len(traj.coefs), -1).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{plan.label}: the coefficients at step {int(traj.steps[i])} (after "
                         f"{int(traj.rows_seen[i])} rows) are not finite: the data's magnitudes "
                         "overflow float64; rescale the data")
    if not state_is_finite(traj.state):
        raise InputError(f"{plan.label}: the final state is not finite: the data's magnitudes "
                         "overflow float64; rescale the data")


def step_sections(plan: StreamPlan, steps, attribute: str) -> np.ndarray:
    """The ``attribute`` of the section each step belongs to (e.g. its epoch or source)."""
    return np.array([getattr(plan.sections[i], attribute)
                     for i in plan.section_of_steps(steps)], dtype=np.int64)


def trajectory_dataset(traj: Trajectory, rec: Recursion, plan: StreamPlan, record_every: int,
                       engine: str, dtype: str, seconds: float) -> xr.Dataset:
    """``coef (step, feature, target)``, ``rows_seen (step)``, ``epoch (step)``, the per-step
    diagnostics, the final state as ``state_*`` variables and the run's attributes."""
    import xarray as xr
    n_coef = traj.coefs.shape[1]
    source = plan.sources[0]
    targets = source.targets
    target = (np.asarray(targets) if len(targets) == traj.coefs.shape[2]
              else np.arange(traj.coefs.shape[2]))
    ds = xr.Dataset(
        {"coef": (("step", "feature", "target"), traj.coefs),
         "rows_seen": (("step",), traj.rows_seen)},
        coords={"step": traj.steps, "feature": coef_labels(rec, source, n_coef),
                "target": target},
    )
    declared = rec.diagnostic_dims()
    for name, values in traj.diagnostics.items():
        values = np.asarray(values)  # one value per step, or one per step and target
        ds[name] = (declared.get(name) or ("step", "target")[: values.ndim], values)
    for name, dims in rec.state_dims().items():
        value = np.asarray(traj.state[name])
        # a state axis whose length differs from the result's axis of that name gets its own
        dims = tuple(d if d not in ds.sizes or ds.sizes[d] == n else f"state_{d}"
                     for d, n in zip(dims, value.shape, strict=True))
        ds[f"state_{name}"] = (dims, value)
    ds["epoch"] = (("step",), step_sections(plan, traj.steps, "epoch"))
    first = plan.sections[0].grid
    ds.attrs.update({
        "engine": engine,
        "n_rows": plan.n_rows,
        "block_size": first.block_size,
        "first_block_size": first.first,
        "n_blocks": plan.n_blocks,
        "record_every": record_every,
        "dtype": str(np.dtype(dtype)),
        # the rows read in this run: a resumed run took the others from its checkpoint
        "rows_per_second": (round((plan.n_new_rows - traj.rows_restored) / seconds, 1)
                            if seconds > 0 else None),
        **plan.attrs,
    })
    if traj.rows_restored:
        ds.attrs["rows_resumed"] = int(traj.rows_restored)
    ds.attrs.update(FitInputs.of(source, fits_intercept(rec, source)).to_attrs())
    ds.attrs.update(rec.result_attrs(traj.state))
    return ds


def fits_intercept(rec: Recursion, source: StreamSource) -> bool:
    """Whether the coefficients include an intercept: the constant column the reading
    path prepends, or the recursion's own constant term (``intercept_kind="kernel"``)."""
    if rec.intercept_kind == "kernel":
        return bool(rec.intercept)
    return bool(source.intercept)


def coef_labels(rec: Recursion, source: StreamSource, n_coef: int) -> np.ndarray:
    """Labels of the rows of ``coef``: the recursion's own (the basis functions of the IRMA
    family); else the intercept first when one is fitted
    (:func:`~streamlsq.io.formulas.intercept_label`), then the data's feature labels (their
    variable names or the coordinate of X's feature dimension), or ``x0, x1, …`` beside an
    intercept, or the numbers 0..q−1 when the data name none."""
    if rec.intercept_kind not in ("column", "kernel"):
        names = rec.coef_names(n_coef)
        if names is not None:
            return np.asarray(names)
    has_constant = fits_intercept(rec, source)
    n_data = n_coef - int(has_constant)
    data = list(source.features)
    if len(data) != n_data:
        data = []
    if not has_constant:
        if data and all(isinstance(v, int) for v in data):
            return np.asarray(data)
        return np.asarray([str(v) for v in data]) if data else np.arange(n_coef)
    data = [str(v) for v in data] or [f"x{j}" for j in range(n_data)]
    return np.asarray([intercept_label(source.variables.formula), *data])
