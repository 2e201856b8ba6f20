"""Rows decoded from a local store's chunk files (``streamlsq.io.chunk_decoding``) equal
zarr's own read bit for bit, on every layout it takes; every other layout, and every chunk
file that is not what its metadata says, is read through zarr (whose errors name the chunk).

The reference is zarr-python's ``arr[start:stop]`` of the same array."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.codecs import BloscCodec, ZstdCodec

from streamlsq.errors import InputError
from streamlsq.io import chunk_decoding
from streamlsq.io.stores import chunk_files, read_checked

N, ROWS = 103, 10  # the last chunk holds 3 rows (stored at a whole chunk's size)


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        v = rng.standard_normal(shape).astype(dtype)
        v.flat[::17] = np.nan  # stored NaN is data, read as it is
        return v
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def _array(path, *, dtype="f8", width=3, zarr_format=3, compressors="auto", **kw):
    shape = (N,) if width is None else (N, width)
    chunks = (ROWS,) if width is None else (ROWS, width)
    arr = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype,
                            zarr_format=zarr_format, compressors=compressors, **kw)
    arr[...] = _values(dtype, shape)
    return arr


DIRECT = {
    "v3 blosc-lz4 shuffle": dict(compressors=BloscCodec(cname="lz4", shuffle="shuffle")),
    "v3 blosc-zstd bitshuffle": dict(compressors=BloscCodec(cname="zstd", shuffle="bitshuffle")),
    "v3 blosc noshuffle": dict(compressors=BloscCodec(cname="blosclz", shuffle="noshuffle")),
    "v3 uncompressed": dict(compressors=()),
    "v3 float32": dict(dtype="f4", compressors=BloscCodec(cname="lz4")),
    "v3 int16 1-D": dict(dtype="i2", width=None, compressors=BloscCodec(cname="lz4")),
    "v3 uint8": dict(dtype="u1", compressors=()),
    "v3 bool": dict(dtype="bool", compressors=BloscCodec(cname="lz4")),
    "v2 blosc": dict(zarr_format=2, compressors=numcodecs.Blosc(cname="lz4")),
    "v2 uncompressed": dict(zarr_format=2, compressors=None),
}

THROUGH_ZARR = {
    "v3 zstd": dict(compressors=ZstdCodec(level=1)),
    "v3 big-endian bytes": dict(serializer=zarr.codecs.BytesCodec(endian="big"),
                                compressors=()),
    "v3 sharded": dict(shards=(20, 3), compressors=()),
    "v2 zstd": dict(zarr_format=2, compressors=numcodecs.Zstd()),
    "v2 Fortran order": dict(zarr_format=2, compressors=None, order="F"),
}


def _read(arr, path, start, stop):
    return read_checked(str(path), None, "a", arr, start, stop)


@pytest.mark.parametrize("layout", list(DIRECT))
def test_a_direct_layout_is_decoded_from_its_files_as_zarr_reads_it(tmp_path, layout):
    arr = _array(tmp_path / "a", **DIRECT[layout])
    files = list(chunk_files(str(tmp_path), None, "a", arr, 0, N))
    whole = chunk_decoding.direct_rows(arr, files, 0, N)
    assert whole is not None, "this layout is one the module decodes"
    assert whole.dtype == arr.dtype and whole.shape == arr.shape
    np.testing.assert_array_equal(whole, arr[:])
    assert whole.tobytes() == np.asarray(arr[:]).tobytes()  # NaN payloads too
    for start, stop in [(0, ROWS), (ROWS, 3 * ROWS), (7, 8), (5, 2 * ROWS + 4), (N - 3, N),
                        (N - 14, N), (0, N)]:
        assert _read(arr, tmp_path, start, stop).tobytes() == \
            np.asarray(arr[start:stop]).tobytes(), (start, stop)


@settings(max_examples=60, deadline=None)
@given(layout=st.sampled_from(sorted(DIRECT)), start=st.integers(0, N - 1),
       length=st.integers(1, N))
def test_any_row_range_equals_zarrs_read(tmp_path_factory, layout, start, length):
    path = tmp_path_factory.mktemp("direct")
    arr = _array(path / "a", **DIRECT[layout])
    stop = min(N, start + length)
    assert _read(arr, path, start, stop).tobytes() == np.asarray(arr[start:stop]).tobytes()


@pytest.mark.parametrize("layout", list(THROUGH_ZARR))
def test_other_layouts_are_read_through_zarr(tmp_path, layout):
    arr = _array(tmp_path / "a", **THROUGH_ZARR[layout])
    files = list(chunk_files(str(tmp_path), None, "a", arr, 0, N))
    assert chunk_decoding.direct_rows(arr, files, 0, N) is None
    assert _read(arr, tmp_path, 4, 57).tobytes() == np.asarray(arr[4:57]).tobytes()


def test_chunked_along_the_columns_is_read_through_zarr(tmp_path):
    arr = zarr.create_array(str(tmp_path / "a"), shape=(N, 4), chunks=(ROWS, 2), dtype="f8",
                            compressors=())
    arr[...] = _values("f8", (N, 4))
    files = list(chunk_files(str(tmp_path), None, "a", arr, 0, N))
    assert chunk_decoding.direct_rows(arr, files, 0, N) is None
    np.testing.assert_array_equal(_read(arr, tmp_path, 3, 44), arr[3:44])


def _damage(file, damage):
    data = bytearray(file.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "frame of another size":  # the Blosc header's decoded size
        data[4:8] = (int.from_bytes(data[4:8], "little") + 8).to_bytes(4, "little")
    elif damage == "grown":
        data += b"\0" * 64
    file.write_bytes(bytes(data))


CHUNK = r"variable 'a' chunk 2 \(rows 20-29\) cannot be read \(its "


@pytest.mark.parametrize("layout", ["v3 blosc-lz4 shuffle", "v3 uncompressed", "v2 blosc",
                                    "v2 uncompressed"])
@pytest.mark.parametrize("damage", ["truncated", "grown", "frame of another size"])
def test_a_chunk_file_that_is_not_one_chunk_is_refused_naming_it(tmp_path, layout, damage):
    blosc = "blosc" in layout
    if damage == "frame of another size" and not blosc:
        pytest.skip("an uncompressed chunk has no header")
    arr = _array(tmp_path / "a", **DIRECT[layout])
    (_, _, file), = chunk_files(str(tmp_path), None, "a", arr, 2 * ROWS, 3 * ROWS)
    _damage(file, damage)
    if blosc and damage == "grown":  # a whole frame, then bytes zarr ignores: zarr's read
        np.testing.assert_array_equal(_read(arr, tmp_path, 0, N), arr[:])
        return
    with pytest.raises(InputError, match=CHUNK + r".*the chunk file is truncated or corrupt"):
        _read(arr, tmp_path, 15, 45)


def test_a_truncated_compressed_chunk_is_refused_not_read_past_its_end(tmp_path):
    # zarr decodes such a frame without an error, from whatever memory follows its buffer
    arr = zarr.create_array(str(tmp_path / "a"), shape=(4000, 2), chunks=(1000, 2),
                            dtype="f8", compressors=BloscCodec(cname="lz4", shuffle="shuffle"))
    arr[...] = np.round(_values("f8", (4000, 2)), 2)  # compressible
    (_, _, file), = chunk_files(str(tmp_path), None, "a", arr, 2000, 3000)
    _damage(file, "truncated")
    with pytest.raises(InputError, match=r"variable 'a' chunk 2 \(rows 2000-2999\) cannot be "
                       r"read \(its file holds \d+ bytes where its Blosc frame has \d+\)"):
        _read(arr, tmp_path, 0, 4000)


def test_a_checksummed_store_refuses_a_flipped_byte_naming_the_chunk(tmp_path):
    """Damage that leaves a well-formed chunk (a flipped byte, another chunk's file) reads
    as zarr reads it, wrong values included: only a checksum can tell. A store written with
    zarr's crc32c codec is read through zarr, which refuses the chunk."""
    from zarr.codecs import Crc32cCodec

    arr = _array(tmp_path / "a", compressors=(BloscCodec(cname="lz4"), Crc32cCodec()))
    files = list(chunk_files(str(tmp_path), None, "a", arr, 0, N))
    assert chunk_decoding.direct_rows(arr, files, 0, N) is None
    (_, _, file), = chunk_files(str(tmp_path), None, "a", arr, 2 * ROWS, 3 * ROWS)
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"variable 'a' chunk 2 \(rows 20-29\) cannot be read"):
        _read(arr, tmp_path, 0, N)
