"""streamlsq: incremental least squares and meta-learning of linear regressions
over chunked Zarr stores, orchestrated with Dask."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("streamlsq")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
