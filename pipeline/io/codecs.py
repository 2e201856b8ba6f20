"""The compression of the stores streamlsq writes (``--codec``), chosen by measurement.

Reading a store is the floor of every fit: each chunk is read and decoded before any
arithmetic, so the decoder's speed bounds the engines. ``tests/benchmarks/bench_codecs.py``
compares the codecs below on the generator's data and on a real dataset (read floor in
order and in parallel, size on disk); ``docs/performance.md#codecs`` has its table.
Stores are *read* with whatever codec zarr reads: this only concerns what is written.

- ``blosc-lz4`` (the default): Blosc with LZ4 and byte shuffle (a codec of the Zarr v3
  specification, read by every Zarr v3 implementation). Its decoder releases the GIL.
- ``lz4``: numcodecs' LZ4 (``numcodecs.lz4``, read by zarr-python with numcodecs).
- ``blosc-zstd``: Blosc with Zstd and byte shuffle: smaller, slower to decode.
- ``zstd``: zarr-python's own default (Zstd level 0), what streamlsq wrote before.
- ``none``: no compression (largest, no decoding at all).
"""

from __future__ import annotations

# the codecs streamlsq can write, by name, and the default: declared with the --codec
# option (light, for the command line's help and checks)
from streamlsq.options.common import CODECS, DEFAULT_CODEC

__all__ = ["CODECS", "DEFAULT_CODEC", "check_codec", "compressors"]


def check_codec(codec: str | None) -> str:
    """``codec`` (None: the default) as one of :data:`CODECS`; ValueError otherwise."""
    name = DEFAULT_CODEC if codec is None else str(codec).lower()
    if name not in CODECS:
        raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")
    return name


def compressors(codec: str | None = None, itemsize: int = 8):
    """The ``compressors=`` argument of :meth:`zarr.Group.create_array` for ``codec``
    (None: :data:`DEFAULT_CODEC`) on items of ``itemsize`` bytes.

    Examples
    --------
    >>> from streamlsq.io.codecs import compressors
    >>> compressors("blosc-lz4")[0].cname.value, compressors("none")
    ('lz4', ())
    """
    name = check_codec(codec)
    if name == "none":
        return ()
    if name == "zstd":
        from zarr.codecs import ZstdCodec

        return (ZstdCodec(level=0),)
    if name == "lz4":
        import warnings

        from zarr.codecs.numcodecs import LZ4

        with warnings.catch_warnings():  # "not in the Zarr v3 specification": said above
            warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr")
            return (LZ4(),)
    from zarr.codecs import BloscCodec

    cname = "lz4" if name == "blosc-lz4" else "zstd"
    return (BloscCodec(cname=cname, clevel=5, shuffle="shuffle", typesize=itemsize,
                       blocksize=0),)
