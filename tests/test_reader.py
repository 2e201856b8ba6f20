"""One reader of stream stores, with values exactly as xarray decodes them.

A store streamlsq opens itself (a path, a zarr store object) is read as ``xr.open_zarr``
decodes it with its defaults: CF ``scale_factor``/``add_offset``, ``_FillValue`` and
``missing_value`` (masked to NaN, then refused as missing values), ``_Unsigned``, ``dtype:
bool``, times; zarr v2 takes the array's ``fill_value`` as its ``_FillValue``, zarr v3 only
the attribute. Every number is checked against ``xr.open_zarr`` of the same store (bit for
bit, with its dtype promotion) or ``numpy.linalg.lstsq`` of the decoded rows, and the
command line against the Python API on the same store.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamlsq import fit_stream, open_result, open_stream, open_tasks, simulate_stream
from streamlsq.errors import InputError

from conftest import lstsq
from faultkit import invoke, leftovers, refusal

#: storage of the encoded features: (dtype, encoding beyond dtype, the fill value it takes,
#: the range of the integers drawn); the ranges hold the fill value, so that a value may hit it
STORAGE = {
    "int8": ("int8", {}, np.int8(-128), (-128, 127)),
    "int16": ("int16", {}, np.int16(-32768), (-32768, 32767)),
    "int32": ("int32", {}, np.int32(-2**31), (-2**31, 10**6)),
    "uint8": ("uint8", {}, np.uint8(255), (0, 255)),
    "int8 _Unsigned": ("int8", {"_Unsigned": "true"}, np.int8(-1), (0, 255)),
}


def _quiet_to_zarr(ds, path, **kw):
    with warnings.catch_warnings():  # e.g. "floating point data as an integer dtype"
        warnings.simplefilter("ignore")
        ds.to_zarr(path, mode="w", consolidated=False, write_empty_chunks=True, **kw)


@st.composite
def cf_stores(draw):
    """A stream store written by ``xarray.Dataset.to_zarr`` whose X is packed in integers:
    its CF encoding, values (NaN where a declared fill value is hit), chunking and format."""
    kind = draw(st.sampled_from(sorted(STORAGE)))
    dtype, extra, fill, (lo, hi) = STORAGE[kind]
    floats = draw(st.sampled_from([np.float32, np.float64]))
    packing = draw(st.sampled_from(["none", "scale_factor", "add_offset", "both"]))
    scale = draw(st.sampled_from([0.01, 0.5, 3.0, 1e-3])) \
        if packing in ("scale_factor", "both") else None
    offset = draw(st.sampled_from([0.0, 5.0, -1.25, 1000.0])) \
        if packing in ("add_offset", "both") else None
    # xarray writes _Unsigned only beside a fill value
    missing = draw(st.sampled_from(["_FillValue", "missing_value", "both"] + ([] if extra
                                                                               else ["none"])))
    n, q = draw(st.integers(1, 40)), draw(st.integers(1, 3))
    chunk = draw(st.integers(1, 17))
    ints = draw(hnp.arrays(np.int64, (n, q), elements=st.integers(lo, hi)))
    X = ints.astype(np.float64) * (1.0 if scale is None else float(floats(scale))) + (
        0.0 if offset is None else float(floats(offset)))
    encoding = {"dtype": dtype, "chunks": (chunk, q), **extra}
    if scale is not None:
        encoding["scale_factor"] = floats(scale)
    if offset is not None:
        encoding["add_offset"] = floats(offset)
    if missing != "none":
        for key in (("_FillValue", "missing_value") if missing == "both" else (missing,)):
            encoding[key] = fill
        holes = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, q - 1)),
                              max_size=3))
        for i, j in holes:
            X[i, j] = np.nan
    y = np.arange(n, dtype=np.float64)[:, None] / 7
    a = draw(st.integers(0, n - 1))
    b = draw(st.integers(a + 1, n))
    return X, y, encoding, draw(st.sampled_from([2, 3])), chunk, (a, b)


def _write_cf(path, X, y, encoding, zarr_format):
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample", "target"), y)})
    _quiet_to_zarr(ds, path, zarr_format=zarr_format,
                   encoding={"X": encoding, "y": {"chunks": (encoding["chunks"][0], 1)}})


def _sources(path):
    """The same store by path, as a zarr store object, and as xarray opens it (a Dataset)."""
    return {"path": open_stream(path), "store object": open_stream(zarr.storage.LocalStore(path)),
            "Dataset": open_stream(xr.open_zarr(path, consolidated=False))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cf_stores())
def test_rows_equal_xarrays_decoding_and_fill_values_are_refused_by_row(case):
    X, y, encoding, zarr_format, chunk, (a, b) = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cf.zarr"
        _write_cf(path, X, y, encoding, zarr_format)
        expected = xr.open_zarr(path, consolidated=False).X.values
        sources = _sources(path)
        bad = np.flatnonzero(~np.isfinite(expected[a:b]).all(axis=1))
        for how, source in sources.items():
            if bad.size:  # a fill value decoded to NaN: a missing value, refused by row
                row = a + int(bad[0])
                with pytest.raises(InputError, match=(
                        rf"variable 'X' chunk {row // chunk} has NaN at row {row}; remove or "
                        "impute non-finite values")):
                    source.read(a, b)
                continue
            got, Y = source.read(a, b)
            assert got.dtype == np.float64, how
            assert got.tobytes() == expected[a:b].astype(np.float64).tobytes(), how
            np.testing.assert_array_equal(Y, y[a:b])
        if not bad.size:  # xarray's own dtype, before the reader's cast to float64
            decoded = sources["path"].rows.read("X", a, b)
            assert decoded.dtype == expected.dtype
            assert decoded.tobytes() == expected[a:b].tobytes()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_the_same_rows_from_a_path_a_store_object_and_a_dataset(tmp_path, zarr_format):
    rng = np.random.default_rng(3)
    X = np.round(rng.uniform(-3, 3, (1_000, 3)), 2)
    y = X @ [[1.0], [2.0], [-1.0]]
    path = tmp_path / "cf.zarr"
    _write_cf(path, X, y, {"dtype": "int16", "scale_factor": 0.01, "add_offset": 5.0,
                           "_FillValue": np.int16(-32768), "chunks": (300, 3)}, zarr_format)
    expected = xr.open_zarr(path, consolidated=False).X.values
    assert expected.dtype == np.float64 and np.isfinite(expected).all()
    assert not np.array_equal(zarr.open_group(str(path))["X"][:], expected)  # really packed
    for how, source in _sources(path).items():
        assert (source.n_rows, source.n_features, source.chunk_rows) == (1_000, 3, 300), how
        for a, b in ((0, 1_000), (250, 620), (999, 1_000)):
            got, _ = source.read(a, b)
            assert got.tobytes() == expected[a:b].tobytes(), (how, a, b)


def test_a_store_without_cf_encoding_is_read_as_stored(tmp_path):
    """The fast path: no decoding recorded (nothing extra to do per chunk) for a store
    streamlsq writes and for floats written by xarray (whose NaN fill value decodes to
    itself); a packed variable has its decoding."""
    sim = simulate_stream(tmp_path / "sim.zarr", n_rows=500, n_features=2, chunk_rows=200)
    assert open_stream(sim).rows.decodings == {}
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((500, 2)), rng.standard_normal((500, 1))
    plain = tmp_path / "plain.zarr"
    xr.Dataset({"X": (("sample", "feature"), X), "y": (("sample", "target"), y)}).to_zarr(
        plain, zarr_format=3)
    assert zarr.open_group(str(plain))["X"].attrs  # xarray wrote a (NaN) _FillValue
    source = open_stream(plain)
    assert source.rows.decodings == {}
    np.testing.assert_array_equal(source.read(0, 500)[0], X)
    packed = tmp_path / "packed.zarr"
    _write_cf(packed, X, y, {"dtype": "int16", "scale_factor": 1e-3, "chunks": (200, 2)}, 3)
    assert list(open_stream(packed).rows.decodings) == ["X"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_v2_takes_the_fill_value_of_the_array_and_v3_the_attribute(tmp_path,
                                                                       zarr_format):
    """As xarray reads them: a zarr v2 array's ``fill_value`` is its ``_FillValue`` (zeros of
    an array written with fill value 0 are missing values); in zarr v3 only the
    ``_FillValue`` attribute is."""
    X = np.arange(1.0, 41.0).reshape(20, 2)
    X[7, 1] = 0.0
    path = tmp_path / "fill.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    for name, values, dims in (("X", X, ["sample", "feature"]),
                               ("y", X[:, :1], ["sample", "target"])):
        kw = ({"dimension_names": dims} if zarr_format == 3
              else {"attributes": {"_ARRAY_DIMENSIONS": dims}})
        g.create_array(name, shape=values.shape, dtype="f8", chunks=(6, values.shape[1]),
                       fill_value=0.0, **kw)[...] = values
    expected = xr.open_zarr(path, consolidated=False).X.values
    source = open_stream(path)
    if zarr_format == 2:
        assert np.isnan(expected[7, 1])
        with pytest.raises(InputError, match="variable 'X' chunk 1 has NaN at row 7"):
            source.read(0, 20)
        np.testing.assert_array_equal(source.read(8, 20)[0], expected[8:])
    else:
        assert expected[7, 1] == 0.0
        np.testing.assert_array_equal(source.read(0, 20)[0], expected)


def _kf4lls_store(path, X, y, zarr_format, chunk=250):
    _write_cf(path, X, y, {"dtype": "int16", "scale_factor": 0.01, "add_offset": 5.0,
                           "_FillValue": np.int16(-32768), "chunks": (chunk, X.shape[1])},
              zarr_format)


def _rows(n=2_000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(-3, 3, (n, 3)), 2)
    return X, X @ [[1.5], [-2.0], [0.5]] + 0.1 * rng.standard_normal((n, 1))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_the_command_line_and_the_api_fit_the_same_decoded_values(tmp_path, client,
                                                                 zarr_format):
    X, y = _rows()
    store = tmp_path / "cf.zarr"
    _kf4lls_store(store, X, y, zarr_format)  # a fill value declared, not hit
    decoded = xr.open_zarr(store, consolidated=False).X.values
    out = tmp_path / "fit.zarr"
    res = invoke("fit", "kf4lls", store, "--out", out, scheduler=client.scheduler.address)
    assert res.exit_code == 0, res.output
    cli = open_result(out).coef.values
    api = fit_stream(xr.open_zarr(store, consolidated=False), "kf4lls", client=client)
    np.testing.assert_array_equal(cli, api.coef.values)
    np.testing.assert_allclose(cli[-1], lstsq(decoded, y), rtol=1e-10, atol=1e-12)
    raw = zarr.open_group(str(store))["X"][:].astype(np.float64)
    assert not np.allclose(cli[-1], lstsq(raw, y), rtol=1e-3)  # what reading raw gives


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_fill_value_hit_is_a_missing_value_refused_by_both(tmp_path, client, zarr_format):
    X, y = _rows()
    X[1_234, 2] = np.nan  # written as the fill value -32768
    store = tmp_path / "hole.zarr"
    _kf4lls_store(store, X, y, zarr_format)
    assert zarr.open_group(str(store))["X"][1_234, 2] == -32768
    out = tmp_path / "fit.zarr"
    line = refusal(invoke("fit", "kf4lls", store, "--out", out,
                          scheduler=client.scheduler.address))
    assert (f"{store}: variable 'X' chunk 4 has NaN at row 1234; remove or impute non-finite "
            "values") in line
    assert not out.exists() and leftovers(out) == []
    with pytest.raises(InputError, match="variable 'X' chunk 4 has NaN at row 1234"):
        fit_stream(xr.open_zarr(store, consolidated=False), "kf4lls", client=client)


def _stored(path, values, attrs, zarr_format=3):
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    g.create_array("X", shape=values.shape, dtype=values.dtype, chunks=(50, values.shape[1]),
                   dimension_names=["sample", "feature"], attributes=attrs)[...] = values
    g.create_array("y", shape=(len(values), 1), dtype="f8", chunks=(50, 1),
                   dimension_names=["sample", "target"])[...] = 1.0
    return path


@pytest.mark.parametrize("stored, attrs, decoded", [
    (np.int64, {"units": "days since 2000-01-01"}, "datetime64"),
    (np.int8, {"dtype": "bool"}, "bool"),
])
def test_a_variable_decoding_to_a_non_numeric_dtype_is_refused(tmp_path, client, stored, attrs,
                                                              decoded):
    path = _stored(tmp_path / "d.zarr", np.ones((100, 2), dtype=stored), attrs)
    assert str(xr.open_zarr(path, consolidated=False).X.dtype).startswith(decoded)
    line = refusal(invoke("fit", "kf4lls", path, "--out", tmp_path / "o.zarr",
                          scheduler=client.scheduler.address))
    assert f"{path}: variable 'X' has dtype {decoded}" in line
    assert f"as xarray decodes it (stored as {np.dtype(stored)} with {attrs})" in line
    assert "expected a real numeric dtype" in line


def test_the_rows_of_a_multi_task_store_are_decoded_alike(tmp_path):
    X, y = _rows(n=60)
    path = tmp_path / "tasks.zarr"
    ds = xr.Dataset({"X": (("row", "feature"), X), "y": (("row",), y[:, 0]),
                     "task_ptr": (("task_edge",), np.arange(0, 61, 10, dtype=np.int64))})
    _quiet_to_zarr(ds, path, zarr_format=3, encoding={
        "X": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 5.0, "chunks": (25, 3)}})
    Xt, yt, ptr = open_tasks(path).read_tasks(0, 6)
    np.testing.assert_array_equal(Xt, xr.open_zarr(path, consolidated=False).X.values)
    np.testing.assert_array_equal(yt, y[:, 0])
    assert ptr.tolist() == list(range(0, 61, 10))
