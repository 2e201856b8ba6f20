"""The two parts every stream input is made of, as protocols: where its rows come from
(:class:`RowsReader`) and the input opened to be read as a stream (:class:`OpenedInput`).

:func:`~streamlsq.io.sources.open_stream` opens any input as an :class:`OpenedInput` — a Zarr
store (:class:`~streamlsq.io.sources.StoreInput`), an xarray Dataset
(:class:`~streamlsq.io.sources.DatasetInput`), a table (:class:`~streamlsq.io.tables.TableInput`)
or any of them read through a formula (:class:`~streamlsq.io.formulas.DesignInput`) — runs the
same checks on the :class:`Column` of each selected variable, and keeps the
:class:`RowsReader` the input gives (:class:`~streamlsq.io.stores.StoreRows`,
:class:`~streamlsq.io.sources.DatasetRows`, :class:`~streamlsq.io.tables.TableRows`,
:class:`~streamlsq.io.formulas.DesignRows`) in the source every worker reads from. Every
implementation provides every member, each member of the same kind everywhere (a property
is a property in every implementation), so that callers read them directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["TARGET_CHUNK_ELEMENTS", "Column", "OpenedInput", "RowsReader"]

#: rows of an input without chunks of its own (an in-memory Dataset, a pandas frame) read at
#: once by default: about 25 MB of float64 features
TARGET_CHUNK_ELEMENTS = 3_200_000


@dataclass(frozen=True)
class Column:
    """A selected variable as found when the input is opened: its dims and shape (a
    Dataset's with the sample dimension moved first, as it is read) and the dtype its values
    are read in (a store's: as xarray decodes them)."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: object

    @property
    def n_rows(self) -> int:
        return int(self.shape[0])

    @property
    def width(self) -> int:
        """Columns it contributes: 1 for a 1-D variable, its second axis for a 2-D one."""
        return 1 if len(self.shape) == 1 else int(self.shape[1])


class RowsReader(Protocol):
    """Where the rows of a validated input come from: small and picklable (it travels with
    every Dask task), it reads any row range of one variable on any worker."""

    @property
    def path(self) -> str:
        """The input's absolute path or URL (a Dataset's or DataFrame's description)."""

    @property
    def shown(self) -> str:
        """The input as the user gave it, for messages."""

    @property
    def label(self) -> str:
        """The input (and group) as messages name it."""

    @property
    def token(self) -> str:
        """The input's version: what changes when its rows change."""

    @property
    def group(self) -> str | None:
        """The group inside a Zarr store (None: its root, or not a store)."""

    @property
    def in_memory(self) -> bool:
        """Whether the rows have no files behind them (an xarray Dataset, a DataFrame):
        nothing to stamp, nothing an output must keep apart from."""

    @property
    def from_table(self) -> bool:
        """Whether the rows are a table's (Parquet, CSV, a DataFrame), whose parts are cut
        anew whenever it grows: a fit on them is not continued (``--continue-from``)."""

    def array(self, name: str):
        """The stored Zarr array of variable ``name`` (refused for rows of no store)."""

    def rows_per_chunk(self, name: str) -> int:
        """Rows of one chunk of variable ``name`` (chunks are named in messages)."""

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of variable ``name``, values as decoded (unchecked)."""

    def reading(self, names: Iterable[str], start: int, stop: int
                ) -> AbstractContextManager:
        """A block within which this thread's reads of rows ``start:stop`` of the variables
        ``names`` share their work: a table's part is decoded once for all of them, not once
        per column (:meth:`~streamlsq.io.tables.TableRows.reading`); nothing is kept after
        it but a part whose other rows are still to be read. Readers whose variables are
        stored apart (a store's arrays, a Dataset's) share nothing."""

    def chunk_stamps(self, names: Iterable[str], contents: bool = False) -> dict:
        """{variable: [(first row, end row, stamp), ...]} identifying the rows stored (empty
        when nothing can be stamped); ``contents``: with a hash of the bytes of the files
        where the cheap stamps (size and time) are not enough (a checkpoint of a table)."""

    def read_variable(self, name: str) -> np.ndarray | None:
        """A small whole variable (e.g. ``coef_true``), or None if absent."""


class OpenedInput(Protocol):
    """An input opened to be read as a stream: its variables (``members``), their
    :class:`Column` along the sample dimension, and the :class:`RowsReader` of the rows
    (:meth:`rows`). ``open_stream`` calls :meth:`columns`, :meth:`as_read`,
    :meth:`check_complete`, :meth:`chunk_rows` and :meth:`rows` in that order."""

    #: whether the variables' sample dimension must be their first (a store's: the one they
    #: are chunked along) and a store's default layout (X, y) applies
    sample_first: bool
    #: the input as messages name it
    label: str
    #: the names of its variables, and the same sorted for messages
    members: set[str]
    found: list[str]
    #: its attributes (a store's ``block_size``)
    attrs: dict

    def default_sample_dim(self, names) -> str:
        """The sample dimension of the variables ``names`` when the user names none."""

    def columns(self, names, dim: str | None) -> dict[str, Column]:
        """The variables ``names`` as found, the sample dimension ``dim`` first where they
        have it."""

    def as_read(self, columns: dict[str, Column], labels: tuple = (),
                options: dict | None = None) -> dict[str, Column]:
        """The columns with the dtypes their values are read in, refused unless numbers
        (``labels``: variables that may hold strings; ``options``: variables an option other
        than --x reads as numbers -> that option, for the refusal to name)."""

    def check_complete(self) -> None:
        """Refuse a selected variable with a chunk not written."""

    def coordinate(self, dim: str, size: int) -> tuple | None:
        """The labels of dimension ``dim`` of length ``size``, else None."""

    def chunk_rows(self, first: str, n: int, width: int) -> int:
        """Rows of the chunks the plans see (``first``: the first feature variable, ``n``
        rows of ``width`` feature columns)."""

    def rows(self, chunk_rows: int) -> RowsReader:
        """Where the rows of the selected variables come from."""

    def categories(self, name: str) -> tuple | None:
        """The levels a column of categories declares itself, else None."""
