"""``ds.streamlsq``: fit and apply streamlsq's recursions from an xarray Dataset, in the style
of xarray's own ``Dataset.polyfit``.

``import streamlsq.xarray`` registers the accessor (importing ``streamlsq`` alone does not,
so that the command line starts without xarray). The Dataset may be lazy (dask-backed, e.g.
``xr.open_mfdataset`` over NetCDF files or ``xr.open_zarr`` of a bucket) or in memory; the
fit runs on the current Dask client, a named scheduler, or an embedded cluster, as
:func:`streamlsq.fit_stream` does.
"""

from __future__ import annotations

import xarray as xr

__all__ = ["StreamlsqAccessor"]


@xr.register_dataset_accessor("streamlsq")
class StreamlsqAccessor:
    """The ``streamlsq`` accessor of :class:`xarray.Dataset`.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> import streamlsq.xarray  # registers ds.streamlsq
    >>> rng = np.random.default_rng(1)
    >>> ds = xr.Dataset({name: ("time", rng.standard_normal(400)) for name in ("a", "b")})
    >>> ds["d"] = 1.5 * ds.a - 2.0 * ds.b + 0.5
    >>> fit = ds.streamlsq.fit(x=["a", "b"], y="d", fit_intercept=True)
    >>> fit.coef.isel(step=-1, target=0).round(6).values.tolist()
    [0.5, 1.5, -2.0]
    >>> float(fit.rsquared[0]), fit.attrs["cov_type"]  # an exact fit: R² = 1
    (1.0, 'nonrobust')
    >>> pred = ds.streamlsq.predict(fit)
    >>> float(abs(pred.residual).max()) < 1e-9
    True
    """

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def fit(self, method: str = "kf4lls", *, x=None, y=None, sample_dim: str | None = None,
            fit_intercept: bool | None = None, **kwargs) -> xr.Dataset:
        """:func:`streamlsq.fit_stream` on this Dataset: ``x`` the feature variables (one 2-D
        variable or several 1-D ones), ``y`` the targets, along ``sample_dim`` (default: the
        one dimension they share); every other keyword as ``fit_stream`` takes it
        (``weights=``, ``missing="drop"``, ``cov_type=``, ``groups=``, ``alpha=`` among
        them). The result Dataset holds the statistics of a least-squares fit
        (``bse``, ``pvalues``, ``rsquared``, …: ``docs/inference.md``)."""
        from streamlsq.stream.fit import fit_stream

        return fit_stream(self._ds, method, x=x, y=y, sample_dim=sample_dim,
                          fit_intercept=fit_intercept, **kwargs)

    def predict(self, result, **kwargs) -> xr.Dataset:
        """:func:`streamlsq.predict_stream`: the stream fit ``result`` (a Dataset or a result
        store) applied to the rows of this Dataset."""
        from streamlsq.stream.apply import predict_stream

        return predict_stream(result, self._ds, **kwargs)
