"""Property tests of the refusal contract (docs/faults.md): hypothesis writes malformed
stores (dims, dtypes, shapes, chunkings, non-finite values at random places, damaged or
missing chunk files, sharded arrays with inner chunks never written, broken task_ptr),
out-of-range options, files and links where a command writes beside its output, and damaged
results, and every one must be refused with exit code 2, one line on stderr naming the store
(or the option, the file, the result's variable), no output and the input left as it
was. Tables with category columns, chunks of missing values alone and odd column names are
converted and fitted as the table itself is, or refused so."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit import invoke, leftovers, refusal, snapshot

SETTINGS = settings(max_examples=40, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _write(path, arrays: dict, chunk_rows: int):
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, (values, dims) in arrays.items():
        chunks = (max(1, chunk_rows),) + values.shape[1:] if values.ndim else ()
        with warnings.catch_warnings():  # zarr warns that its string types are unstable
            warnings.simplefilter("ignore")
            g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=chunks,
                           dimension_names=list(dims))[...] = values
    return g


def _chunk_files(path: Path, name: str) -> list[Path]:
    return sorted(p for p in (path / name / "c").rglob("*") if p.is_file())


# -- stream stores ---------------------------------------------------------------------

DEFECTS = ["dims", "ndim", "dtype", "length", "nonfinite", "missing_variable", "empty",
           "missing_chunk", "damaged_chunk"]


@st.composite
def bad_stream(draw):
    """(defect, arrays of a stream store with exactly that defect, chunk rows, damage)."""
    n = draw(st.integers(20, 400))
    q = draw(st.integers(1, 5))
    # at most 20 chunks (one-row chunks when n is 20): a refusal after reading every chunk
    # costs some ms per chunk, and 400 of them made an example take seconds
    chunk_rows = draw(st.integers(-(-n // 20), n))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q))
    y = X @ rng.standard_normal(q)[:, None] + rng.standard_normal((n, 1))
    arrays = {"X": [X, ("sample", "feature")], "y": [y, ("sample", "target")]}
    defect = draw(st.sampled_from(DEFECTS))
    var = draw(st.sampled_from(["X", "y"]))
    damage = None
    if defect == "dims":
        wrong = draw(st.sampled_from([("row", "feature"), ("feature", "sample"),
                                      ("sample", "column"), ("time", "x")]))
        arrays[var][1] = wrong
    elif defect == "ndim":
        if var == "X":
            arrays["X"] = [X[:, 0].copy(), ("sample",)] if draw(st.booleans()) else \
                [X[:, :, None], ("sample", "feature", "extra")]
        else:
            arrays["y"] = [y[:, :, None], ("sample", "target", "extra")]
    elif defect == "dtype":
        dtype = draw(st.sampled_from(["complex64", "complex128", "float16", "bool", "U3"]))
        arrays[var][0] = arrays[var][0].astype(dtype)
    elif defect == "length":
        cut = draw(st.integers(1, n - 1))
        arrays[var][0] = arrays[var][0][:cut]
    elif defect == "nonfinite":
        A = arrays[var][0]
        k = draw(st.integers(1, 5))
        rows = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k))
        cols = draw(st.lists(st.integers(0, A.shape[1] - 1), min_size=k, max_size=k))
        A[rows, cols] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    elif defect == "missing_variable":
        del arrays[var]
    elif defect == "empty":
        arrays = {k: [v[0][:0], v[1]] for k, v in arrays.items()}
    else:
        damage = (var, draw(st.integers(0, 10**6)), draw(st.floats(0, 0.9)))
    return defect, {k: (v[0], tuple(v[1])) for k, v in arrays.items()}, chunk_rows, damage


def _apply_damage(path: Path, defect, damage):
    var, pick, keep = damage
    files = _chunk_files(path, var)
    target = files[pick % len(files)]
    if defect == "missing_chunk":
        target.unlink()
    else:
        raw = target.read_bytes()
        target.write_bytes(raw[: int(len(raw) * keep)])


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@SETTINGS
@given(case=bad_stream())
def test_every_malformed_stream_store_is_refused(client, engine, case):
    defect, arrays, chunk_rows, damage = case
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.zarr"
        _write(data, arrays, chunk_rows)
        if damage is not None:
            _apply_damage(data, defect, damage)
        before = snapshot(tmp)
        out = Path(tmp) / "out.zarr"
        line = refusal(invoke("fit", "kf4lls", data, "--out", out, "--engine", engine,
                              "--ridge", "1e-6", scheduler=client.scheduler.address))
        assert str(data) in line, (defect, line)
        assert snapshot(tmp) == before, defect
        assert not out.exists() and leftovers(out) == []
        if defect in ("nonfinite", "damaged_chunk"):
            line = refusal(invoke("info", data, "--check", scheduler=client.scheduler.address))
            assert str(data) in line and "chunk" in line, (defect, line)


# -- multi-task stores -------------------------------------------------------------------


@st.composite
def bad_tasks(draw):
    """A multi-task store with exactly one defect: in task_ptr, role, dims or values."""
    n_tasks = draw(st.integers(8, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    role = np.zeros(n_tasks, np.int8)
    role[: n_tasks // 3] = 1  # heavy
    role[n_tasks // 3: 2 * n_tasks // 3] = 2  # light2
    sizes = np.where(role == 1, 12, rng.integers(4, 12, n_tasks))
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n, d = int(ptr[-1]), 3
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) + rng.standard_normal(n)
    arrays = {"X": [X, ("row", "feature")], "y": [y, ("row",)],
              "task_ptr": [ptr, ("task_edge",)], "role": [role, ("task",)]}
    defect = draw(st.sampled_from(["ptr_start", "ptr_end", "ptr_decreasing", "ptr_dtype",
                                   "role_code", "dims", "nonfinite"]))
    p = ptr.copy()
    i = draw(st.integers(1, n_tasks - 1))
    if defect == "ptr_start":
        p[0] = draw(st.integers(1, 3))
    elif defect == "ptr_end":
        p[-1] = n + draw(st.sampled_from([-1, 1, 5]))
    elif defect == "ptr_decreasing":
        p[i] = p[i - 1] - draw(st.integers(1, 3))
    elif defect == "ptr_dtype":
        p = p.astype(draw(st.sampled_from(["float64", "float32"])))
    elif defect == "role_code":
        role = role.copy()
        role[i] = draw(st.sampled_from([-1, 3, 7]))
        arrays["role"][0] = role
    elif defect == "dims":
        name = draw(st.sampled_from(["X", "y", "task_ptr"]))
        arrays[name][1] = ("sample", "feature") if name == "X" else ("sample",)
    else:
        row = draw(st.integers(0, n - 1))
        X[row, draw(st.integers(0, d - 1))] = draw(st.sampled_from([np.nan, np.inf]))
    arrays["task_ptr"][0] = p
    return defect, {k: (v[0], tuple(v[1])) for k, v in arrays.items()}, \
        draw(st.integers(max(5, -(-n // 20)), 200))  # at most 20 chunks, as above


@SETTINGS
@given(case=bad_tasks())
def test_every_malformed_task_store_is_refused(client, case):
    defect, arrays, chunk_rows = case
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "tasks.zarr"
        _write(data, arrays, chunk_rows)
        before = snapshot(tmp)
        out = Path(tmp) / "model.zarr"
        line = refusal(invoke("metalearn", data, "--out", out, "--k", 2,
                              scheduler=client.scheduler.address))
        assert str(data) in line, (defect, line)
        assert snapshot(tmp) == before
        assert not out.exists() and leftovers(out) == []


# -- options ---------------------------------------------------------------------------

BAD_OPTIONS = [
    ("--block-size", st.integers(-5, 0).map(str)),
    ("--block-size", st.sampled_from(["abc", "1.5", ""])),
    ("--first-block-size", st.integers(-5, 0).map(str)),
    ("--record-every", st.integers(-5, 0).map(str)),
    ("--segment-size", st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e300", "x"])),
    ("--forgetting", st.sampled_from(["0", "-0.5", "1.5", "nan", "inf"])),
    ("--ridge", st.sampled_from(["-1", "nan", "inf", "-inf"])),
    ("--epochs", st.integers(-3, 0).map(str)),
    ("--workers", st.integers(-3, 0).map(str)),
    ("--memory-limit", st.sampled_from(["lots", "-1GB", "0"])),
    ("--seed", st.integers(-10, -1).map(str)),
    ("--dtype", st.sampled_from(["float16", "int8", "complex"])),
    ("--engine", st.sampled_from(["fast", "parallel"])),
]


def _names_option(line: str, option: str) -> bool:
    word = option.lstrip("-")
    return any(form in line for form in (option, word, word.replace("-", "_"),
                                         word.replace("-", " ")))


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 3))
    path = tmp_path_factory.mktemp("opts") / "ok.zarr"
    _write(path, {"X": (X, ("sample", "feature")), "y": (X @ np.ones((3, 1)),
                                                         ("sample", "target"))}, 100)
    return path


@SETTINGS
@given(which=st.integers(0, len(BAD_OPTIONS) - 1), data=st.data())
def test_every_out_of_range_option_is_refused(client, good_store, which, data):
    name, values = BAD_OPTIONS[which]
    value = data.draw(values)
    before = snapshot(good_store.parent)
    out = good_store.parent / "o.zarr"
    own_cluster = name in ("--workers", "--memory-limit")  # refused before one starts
    result = invoke("fit", "rls", good_store, "--out", out, name, value,
                    scheduler=None if own_cluster else client.scheduler.address)
    line = refusal(result)
    assert _names_option(line, name), line
    assert snapshot(good_store.parent) == before
    assert not out.exists() and leftovers(out) == []


# -- sharded stores with holes -------------------------------------------------------------


@st.composite
def holey_sharded_stream(draw):
    """(arrays, inner chunk rows, chunks per shard, variable, first row, end row): a stream
    store in shards whose variable leaves the inner chunks of rows first:end unwritten, by
    writing around them or by writing them with the fill value (zarr then stores nothing)."""
    inner = draw(st.integers(5, 60))
    per_shard = draw(st.integers(2, 4))
    n = inner * draw(st.integers(2, 8)) - draw(st.integers(0, inner - 1))
    q = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.standard_normal((n, q))
    y = X @ rng.standard_normal(q)[:, None] + rng.standard_normal((n, 1))
    n_chunks = -(-n // inner)
    first = draw(st.integers(0, n_chunks - 1))
    last = draw(st.integers(first, min(n_chunks - 1, first + 2)))
    return ({"X": X, "y": y}, inner, per_shard, draw(st.sampled_from(["X", "y"])),
            first * inner, min((last + 1) * inner, n), draw(st.booleans()))


@SETTINGS
@given(case=holey_sharded_stream())
def test_every_sharded_store_with_a_hole_is_refused(client, case):
    arrays, inner, per_shard, var, a, b, by_fill = case
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.zarr"
        g = zarr.open_group(str(data), mode="w", zarr_format=3)
        for name, values in arrays.items():
            arr = g.create_array(name, shape=values.shape, dtype="f8",
                                 chunks=(inner, values.shape[1]),
                                 shards=(inner * per_shard, values.shape[1]),
                                 dimension_names=["sample", "feature" if name == "X"
                                                  else "target"])
            if name != var:
                arr[...] = values
            elif by_fill:
                arr[...] = values
                arr[a:b] = 0.0  # the fill value: the inner chunks are dropped from the shards
            else:
                arr[:a], arr[b:] = values[:a], values[b:]
        before = snapshot(tmp)
        out = Path(tmp) / "out.zarr"
        expected = f"variable '{var}' chunk ({a // inner}, 0) was never written (rows {a}-"
        for args in (("fit", "kf4lls", data, "--out", out, "--ridge", "1e-6"),
                     ("info", data, "--check")):
            line = refusal(invoke(*args, scheduler=client.scheduler.address))
            assert str(data) in line and expected in line, line
        assert snapshot(tmp) == before
        assert not out.exists() and leftovers(out) == []


# -- files and links beside the output -------------------------------------------------------


@pytest.fixture(scope="module")
def task_store(tmp_path_factory, client):
    from streamlsq import simulate_mlr

    return simulate_mlr(tmp_path_factory.mktemp("beside") / "t.zarr", k=2, d=3, n_light=1_000,
                        t_light=4, n_heavy=30, t_heavy=30, n_light2=200, t_light2=6, seed=1,
                        client=client)


@pytest.fixture(scope="module")
def earlier_model(tmp_path_factory, client, task_store):
    """A model metalearn wrote (--k 2: nothing beside it), copied where an example needs it."""
    out = tmp_path_factory.mktemp("earlier") / "model.zarr"
    assert invoke("metalearn", task_store, "--out", out, "--k", 2,
                  scheduler=client.scheduler.address).exit_code == 0
    return out


@SETTINGS
@given(suffix=st.sampled_from([".k-curve.csv", ".k-curve.png"]),
       what=st.sampled_from(["file", "link to a file", "link to a folder", "dangling link",
                             "folder", "link to the input"]),
       overwrite=st.booleans(), model_too=st.booleans())
def test_nothing_is_written_over_or_through_what_lies_beside_the_output(
        client, task_store, earlier_model, suffix, what, overwrite, model_too):
    """Whatever is where metalearn --k auto writes OUT.k-curve.*, and whether or not OUT is
    an earlier model streamlsq wrote: refused before any work, every file as it was."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = tmp / "model.zarr"
        if model_too:  # an earlier model, which does not list the user's file as its own
            shutil.copytree(earlier_model, out)
        (tmp / "victim.txt").write_text("the user's")
        (tmp / "victim").mkdir()
        place = tmp / f"model{suffix}"
        if what == "file":
            place.write_text("the user's")
        elif what == "folder":
            place.mkdir()
        else:
            place.symlink_to({"link to a file": tmp / "victim.txt",
                              "link to a folder": tmp / "victim",
                              "dangling link": tmp / "nowhere",
                              "link to the input": task_store}[what])
        before = snapshot(tmp)
        line = refusal(invoke("metalearn", task_store, "--out", out,
                              *(["--overwrite"] if overwrite else []),
                              scheduler=client.scheduler.address))
        # the earlier model, without --overwrite, is refused first: either names what is there
        assert str(place) in line or model_too and not overwrite and \
            f"{out}: already exists" in line, line
        assert snapshot(tmp) == before
        assert leftovers(out) == [] and leftovers(place) == []


# -- damaged results ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, client):
    from streamlsq import fit_stream, simulate_stream

    root = tmp_path_factory.mktemp("fitted")
    data = simulate_stream(root / "s.zarr", 3_000, 3, 1, chunk_rows=500, seed=2, client=client)
    fit_stream(data, "kf4lls", out=root / "fit.zarr", block_size=250, record_every=1,
               client=client)
    return root


@SETTINGS
@given(pick=st.integers(0, 10**6), how=st.sampled_from(["missing", "truncated", "garbage",
                                                        "nan", "inf"]),
       where=st.floats(0, 1, exclude_max=True), keep=st.floats(0, 0.9))
def test_every_damaged_result_is_refused_when_read(client, fitted, pick, how, where, keep):
    """One array of a fit damaged (a chunk file removed, cut or replaced; a value made NaN
    or Inf): open_result and predict refuse it naming the result and the variable."""
    import shutil

    from streamlsq import open_result
    from streamlsq.errors import InputError

    with tempfile.TemporaryDirectory() as tmp:
        fit = Path(tmp) / "fit.zarr"
        shutil.copytree(fitted / "fit.zarr", fit)
        g = zarr.open_group(str(fit), mode="r+", use_consolidated=False)
        names = sorted(n for n, a in g.arrays()
                       if how in ("missing", "truncated", "garbage") or a.dtype.kind == "f")
        name = names[pick % len(names)]
        arr = g[name]
        if how in ("nan", "inf"):
            values = np.array(arr[...])  # a 0-d array is read as a NumPy scalar
            values.flat[int(where * values.size)] = np.nan if how == "nan" else -np.inf
            arr[...] = values
        else:
            files = sorted(p for p in (fit / name).rglob("*") if p.is_file()
                           and p.name != "zarr.json")
            target = files[pick % len(files)]
            if how == "missing":
                target.unlink()
            else:
                target.write_bytes(target.read_bytes()[: int(len(target.read_bytes()) * keep)]
                                   if how == "truncated" else bytes(range(256)) * 3)
        with pytest.raises(InputError, match=f"variable '{name}'") as refused:
            open_result(fit)
        assert str(fit) in str(refused.value) and "damaged" in str(refused.value)
        before = snapshot(tmp)
        out = Path(tmp) / "pred.zarr"
        line = refusal(invoke("predict", fit, fitted / "s.zarr", "--out", out,
                              scheduler=client.scheduler.address))
        assert f"{fit}: variable '{name}'" in line, line
        assert snapshot(tmp) == before


# -- tables: category columns, chunks of missing values alone, odd column names ------------

#: column names a table may have: those convert stores, and those no Zarr array can take
STORABLE_NAMES = ["extra", "a b", "é", "1x", "x.y", "Z"]
UNSTORABLE_NAMES = ["..", "", ".", "a/b", "zarr.json", "__x", "c" * 256]


@st.composite
def odd_table(draw):
    """(frame, rows of a Parquet row group, an extra column's name): a table whose ``k`` is a
    pandas category (levels in an order of their own, some never used by a row group) and
    whose ``w`` is missing nowhere, everywhere, in a whole row group or at random rows."""
    import pandas as pd

    n = draw(st.integers(24, 120))
    group = draw(st.integers(4, n))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    levels = draw(st.permutations(["p", "q", "r", "s"]))[:draw(st.integers(2, 4))]
    k = pd.Categorical(rng.choice(levels, n), categories=levels)
    x, w = rng.standard_normal(n), rng.standard_normal(n)
    missing = draw(st.sampled_from(["none", "all", "row group", "rows"]))
    if missing == "all":
        w[:] = np.nan
    elif missing == "row group":
        first = draw(st.integers(0, (n - 1) // group)) * group
        w[first:first + group] = np.nan
    elif missing == "rows":
        w[rng.random(n) < 0.2] = np.nan
    y = 1.0 + x - 0.5 * np.nan_to_num(w) + 0.1 * rng.standard_normal(n)
    name = draw(st.sampled_from(STORABLE_NAMES + UNSTORABLE_NAMES))
    frame = pd.DataFrame({"y": y, "x": x, "w": w, "k": k, name: rng.standard_normal(n)})
    return frame, group, name


@settings(max_examples=8, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=odd_table())
def test_every_table_converts_checks_and_fits_as_itself_or_is_refused(client, case):
    """convert either refuses the table in one line naming its column, leaving nothing, or
    writes a store that info --check passes and that fits (--missing drop, a formula with
    the category) to the coefficients of the table itself, or is refused as the table is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamlsq import fit_stream
    from streamlsq.errors import InputError

    frame, group, name = case
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "t.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), table,
                       row_group_size=group)
        out = Path(tmp) / "t.zarr"
        before = snapshot(tmp)
        result = invoke("convert", table, "--out", out, scheduler=client.scheduler.address)
        if name in UNSTORABLE_NAMES:
            line = refusal(result)
            assert f"{table}: column {name[:60]!r}" in line, line
            assert "cannot be a variable of a Zarr store" in line, line
            assert snapshot(tmp) == before and not out.exists() and leftovers(out) == []
            return
        assert result.exit_code == 0, result.output
        assert zarr.open_group(str(out), mode="r")["k"].attrs["categories"] == list(
            frame.k.cat.categories)
        result = invoke("info", out, "--check", scheduler=client.scheduler.address)
        assert result.exit_code == 0, result.output
        gaps = int(frame.w.isna().sum())
        assert (f"w {gaps}" in result.output) == bool(gaps), result.output
        outcomes = []
        for data in (table, out):
            try:
                ds = fit_stream(str(data), formula="y ~ x + w + C(k)", missing="drop",
                                ridge=1e-8, client=client, progress=False)
                outcomes.append((list(ds.feature.values), ds.coef.values))
            except InputError as exc:
                assert len(str(exc).splitlines()) == 1
                outcomes.append(None)
        if outcomes[0] is None or outcomes[1] is None:
            assert outcomes[0] is outcomes[1] is None, outcomes
        else:
            assert outcomes[0][0] == outcomes[1][0]
            np.testing.assert_allclose(outcomes[1][1], outcomes[0][1], rtol=1e-10, atol=1e-12)
