"""Options that several families of commands share, declared once: the seed, the codec of
the stores written, the float type of simulated data, and the light constants their
choices come from (the codecs' names: :mod:`streamlsq.io.codecs` writes them).

A command whose help says more than the shared text declares the same parameter with
its own help (``SEED.replace(help=...)``); its name, type and range stay the ones here.
"""

from __future__ import annotations

from streamlsq.options import Options, Param
from streamlsq.options.run import OUTPUT

__all__ = ["CODEC", "CODECS", "DEFAULT_CODEC", "DTYPE", "FLOAT_DTYPES", "SEED", "STORE",
           "comma_numbers"]

#: the codecs streamlsq can write, by name (docs/performance.md#codecs)
CODECS = ("blosc-lz4", "lz4", "blosc-zstd", "zstd", "none")
#: what streamlsq writes unless told otherwise (tests/benchmarks/bench_codecs.py)
DEFAULT_CODEC = "blosc-lz4"
#: the float types a simulated store may hold
FLOAT_DTYPES = ("float64", "float32")

#: the seed of a random draw (numpy's generators take integers >= 0)
SEED = Param("seed", 0, "Random seed.", type=int, ge=0)

#: the compression of the arrays of a store written (None: the default)
CODEC = Param("codec", DEFAULT_CODEC, "Compression of the store's arrays "
              "(docs/performance.md#codecs: blosc-lz4 decodes fastest for its size; any "
              "codec zarr reads can be read).", type=str, choices=CODECS, optional=True)

#: the float type of the arrays of a simulated store
def dtype_name(value):
    """A NumPy dtype's name (``np.float32``, ``"f4"`` → ``"float32"``); other values as
    they are, for the declaration to refuse."""
    import numpy as np  # here: the command line's help is shown without numpy

    try:
        return np.dtype(value).name
    except TypeError:
        return value


DTYPE = Param("dtype", "float64", "Float type of X and y.", type=str, choices=FLOAT_DTYPES,
              canonical=dtype_name)

#: what every command that writes a data store takes about the store itself
STORE = Options(
    OUTPUT.param("overwrite").replace(help="Replace an existing store (only one streamlsq "
                                           "wrote)."),
    CODEC,
)


def comma_numbers(option: str, one: bool = False):
    """The ``parse`` of an option given as numbers separated by commas (``0.2,0.3,0.5``):
    a tuple of floats (with ``one``, a single number as a float), or ``ValueError`` naming
    ``option`` and the text."""

    def parse(text):
        if not isinstance(text, str):
            return text
        try:
            numbers = tuple(float(v) for v in text.split(",") if v.strip())
        except ValueError:
            numbers = ()
        if not numbers:
            raise ValueError(f"{option} must be numbers separated by commas, got {text!r}")
        return numbers[0] if one and len(numbers) == 1 else numbers

    return parse
