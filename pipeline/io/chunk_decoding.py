"""Rows of a local store's array decoded from its chunk files straight into one array.

zarr-python reads ``arr[start:stop]`` through its asynchronous codec pipeline: each chunk
file is read into a fresh buffer, decoded into a second fresh buffer in a thread of
zarr's event loop, and copied into the result. For the row blocks a fit streams (whole
chunks of a local folder, compressed with Blosc or not at all) the same bytes can be read
into one buffer and decoded directly into the rows' array, on the calling thread:
measured on one core on the 8,000,000 × 20 store of ``streamlsq simulate stream``
(Blosc-LZ4, 25.6 MB chunks), 11–13 ms a chunk against zarr's 20 ms
(``docs/performance.md#direct-decoding``).

Only layouts whose bytes are certain take this path: a regular grid chunked along the
first dimension alone; Zarr v3 with the ``bytes`` codec (native byte order) followed by
nothing or by ``blosc``, or Zarr v2 in C order with no filters and no compressor or
Blosc; a numeric dtype. Any other layout, or a store that is not a local folder, returns
None and the caller reads through zarr. The result is bit for bit zarr's
(``tests/test_chunk_decoding.py``).

A chunk file is checked against what its metadata says before it is decoded: its size
(uncompressed) or its Blosc frame's sizes. One that does not match is refused
(:class:`DamagedChunk`, worded by :func:`streamlsq.io.stores.read_checked`), where zarr
decodes a truncated Blosc frame without an error into whatever memory follows the
buffer: another array at every read.
"""

from __future__ import annotations

import math
import os
import struct
import sys
from dataclasses import dataclass

import numpy as np

__all__ = ["DamagedChunk", "direct_rows"]

#: the header of a Blosc (version 1) frame: version, format version, flags, type size,
#: then the decoded size, the block size and the frame's size (little-endian 32-bit)
_BLOSC_HEADER = struct.Struct("<BBBBIII")


@dataclass(frozen=True)
class _Layout:
    rows: int  # rows of one stored chunk
    row_shape: tuple[int, ...]
    dtype: np.dtype
    blosc: bool  # Blosc frames; otherwise the chunk's bytes as they are

    @property
    def chunk_bytes(self) -> int:
        return self.rows * math.prod(self.row_shape) * self.dtype.itemsize


def _layout(arr) -> _Layout | None:
    """The layout of ``arr``'s chunks when this module can decode them, else None."""
    meta = getattr(arr, "metadata", None)
    dtype = np.dtype(arr.dtype) if getattr(arr, "ndim", 0) else None
    if meta is None or dtype is None or dtype.kind not in "biuf" or not dtype.isnative:
        return None
    if meta.zarr_format == 3:
        from zarr.codecs import BloscCodec, BytesCodec

        grid = meta.chunk_grid
        if type(grid).__name__ != "RegularChunkGrid" or meta.storage_transformers:
            return None
        chunks = tuple(grid.chunk_shape)
        codecs = tuple(meta.codecs)
        if not codecs or type(codecs[0]) is not BytesCodec:
            return None
        endian = getattr(codecs[0].endian, "value", codecs[0].endian)
        if dtype.itemsize > 1 and endian != sys.byteorder:
            return None
        if len(codecs) == 1:
            blosc = False
        elif len(codecs) == 2 and type(codecs[1]) is BloscCodec:
            blosc = True
        else:
            return None
    elif meta.zarr_format == 2:
        import numcodecs

        if meta.order != "C" or meta.filters:
            return None
        chunks = tuple(meta.chunks)
        if meta.compressor is None:
            blosc = False
        elif type(meta.compressor) is numcodecs.Blosc:
            blosc = True
        else:
            return None
    else:
        return None
    if len(chunks) != arr.ndim or chunks[1:] != tuple(arr.shape[1:]) or chunks[0] < 1:
        return None
    return _Layout(int(chunks[0]), tuple(int(n) for n in arr.shape[1:]), dtype, blosc)


def _read_file(file) -> np.ndarray:
    with open(file, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        data = np.empty(size, dtype=np.uint8)
        if f.readinto(data) != size:
            raise OSError(f"{file}: short read")
    return data


class DamagedChunk(ValueError):
    """A chunk file that is not what its array's metadata says: ``coords`` and ``rows``
    (first row, end row) name the chunk, ``reason`` says what is wrong with its file."""

    def __init__(self, coords, rows: tuple[int, int], reason: str):
        super().__init__(reason)
        self.coords, self.rows, self.reason = coords, rows, reason


class _ReadThroughZarr(Exception):
    """A chunk file this module does not decode, although zarr does."""


def _decode_into(data: np.ndarray, dest: np.ndarray, layout: _Layout) -> None:
    """Decode one chunk file's bytes ``data`` into ``dest`` (C-contiguous, one chunk)."""
    view = dest.reshape(-1).view(np.uint8)
    want = layout.chunk_bytes
    if not layout.blosc:
        if data.size != want:
            raise ValueError(f"its file holds {data.size} bytes where a chunk has {want}")
        view[:] = data
        return
    if data.size < _BLOSC_HEADER.size:
        raise ValueError(f"its file holds {data.size} bytes, less than a Blosc header")
    _, _, _, _, nbytes, _, cbytes = _BLOSC_HEADER.unpack_from(data)
    if cbytes > data.size:
        # Blosc would read past the end of the buffer (zarr returns whatever memory lies
        # there, a different array at every read): truncated, and refused as such
        raise ValueError(f"its file holds {data.size} bytes where its Blosc frame has "
                         f"{cbytes}")
    if nbytes != want:
        raise ValueError(f"its Blosc frame decodes to {nbytes} bytes where a chunk has {want}")
    if cbytes < data.size:  # bytes after a whole frame: zarr ignores them, so do we not
        raise _ReadThroughZarr
    from numcodecs import blosc

    try:
        blosc.decompress(data, view)
    except RuntimeError as exc:
        raise ValueError(f"its Blosc frame does not decode ({exc})") from None


def direct_rows(arr, files, start: int, stop: int) -> np.ndarray | None:
    """Rows ``start:stop`` of ``arr`` decoded from its chunk files, or None when they must
    be read through zarr (see the module's docstring).

    ``files``: (chunk coordinates, (first row, end row), file path) of every chunk holding
    the rows, in order (:func:`streamlsq.io.stores.chunk_files`). A chunk file that is not
    what the metadata says (shorter than its Blosc frame, a frame of another size, one that
    does not decode, an uncompressed chunk of another size) raises :class:`DamagedChunk`.
    """
    layout = _layout(arr)
    if layout is None or stop <= start or any(file is None for *_, file in files):
        return None
    out = np.empty((stop - start, *layout.row_shape), dtype=layout.dtype)
    for coords, (a, b), file in files:
        lo, hi = max(a, start), min(b, stop)
        try:
            data = _read_file(file)
            if lo == a and hi == a + layout.rows:  # a whole stored chunk: decoded in place
                _decode_into(data, out[lo - start:hi - start], layout)
            else:  # part of a chunk, or the array's last (stored at a whole chunk's size)
                chunk = np.empty((layout.rows, *layout.row_shape), dtype=layout.dtype)
                _decode_into(data, chunk, layout)
                out[lo - start:hi - start] = chunk[lo - a:hi - a]
        except (OSError, _ReadThroughZarr):
            return None  # zarr reads it, or names what it cannot read
        except ValueError as exc:
            raise DamagedChunk(coords, (a, b), str(exc)) from None
    return out
