"""Corrupt, partial and odd stores (docs/faults.md, "Stores" and "Values"): each is refused
in one line naming the store, variable and chunk or row, with exit code 2 and nothing left
behind, also when the fault is met mid-run by a worker; NaN is never published as a result."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from streamlsq import fit_stream, open_result, simulate_mlr
from streamlsq.errors import InputError
from streamlsq.io.stores import consolidate

from conftest import write_stream
from faultkit import invoke, leftovers, refusal, snapshot


@pytest.fixture
def run(client):
    def _run(*args):
        return invoke(*args, scheduler=client.scheduler.address)
    return _run


def _good(n=2_000, q=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q))
    return X, X @ np.arange(1.0, q + 1)[:, None] + rng.standard_normal((n, 1))


def _chunk_file(store, name, coords):
    g = zarr.open_group(str(store), mode="r")
    return store / name / g[name].metadata.encode_chunk_key(coords)


def _refused_leaving_nothing(result, store, out, *phrases):
    line = refusal(result)
    for phrase in phrases:
        assert phrase in line, line
    assert not out.exists() and leftovers(out) == []
    return line


# -- stores damaged on disk -----------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_a_damaged_chunk_is_named(tmp_path, run, engine, damage):
    X, y = _good()
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=250)
    chunk = _chunk_file(data, "X", (3, 0))
    raw = chunk.read_bytes()
    chunk.write_bytes({"truncated": raw[: len(raw) // 3], "garbage": bytes(range(256)) * 4,
                       "empty": b""}[damage])
    before = snapshot(tmp_path)
    out = tmp_path / "out.zarr"
    _refused_leaving_nothing(run("fit", "kf4lls", data, "--out", out, "--engine", engine),
                             data, out, str(data), "variable 'X' chunk 3 (rows 750-999)",
                             "cannot be read", "truncated or corrupt")
    assert snapshot(tmp_path) == before


def test_info_check_and_metalearn_name_a_damaged_chunk(tmp_path, run, client):
    X, y = _good()
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=250)
    chunk = _chunk_file(data, "y", (5, 0))
    chunk.write_bytes(chunk.read_bytes()[:20])
    line = refusal(run("info", data, "--check"))
    assert "variable 'y' chunk 5 (rows 1250-1499) cannot be read" in line
    tasks = simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=2_000, t_light=4, n_heavy=40,
                         t_heavy=30, n_light2=200, t_light2=6, chunk_rows=1_000, client=client)
    chunk = _chunk_file(tasks, "X", (4, 0))
    chunk.write_bytes(chunk.read_bytes()[:30])
    out = tmp_path / "m.zarr"
    _refused_leaving_nothing(run("metalearn", tasks, "--out", out, "--k", 2), tasks, out,
                             "variable 'X' chunk 4 (rows 4000-4999) cannot be read")
    _refused_leaving_nothing(run("fit", "em", tasks, "--out", out, "--k", 2), tasks, out,
                             "variable 'X' chunk 4 (rows 4000-4999) cannot be read")


def test_a_missing_chunk_file_is_refused_before_and_during_a_run(tmp_path, run, client):
    X, y = _good()
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=250)
    _chunk_file(data, "X", (6, 0)).unlink()
    _refused_leaving_nothing(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr"), data,
                             tmp_path / "o.zarr", "variable 'X' chunk (6, 0) was never written")
    # the same chunk vanishing after the store was opened: a worker meets it mid-run
    from streamlsq import open_stream

    data2 = write_stream(tmp_path / "e.zarr", X, y, chunk_rows=250)
    source = open_stream(data2)
    _chunk_file(data2, "X", (6, 0)).unlink()
    with pytest.raises(InputError, match=r"variable 'X' chunk \(6, 0\) \(rows 1500-1749\) is "
                                         r"missing: its file .* was removed"):
        source.read(1_400, 1_600)


def test_a_chunk_broken_mid_run_leaves_a_checkpoint_that_resumes_after_repair(
        tmp_path, client, monkeypatch):
    """A chunk truncated while a checkpointed fit runs: the fit stops in one line with no
    result; once the chunk is restored, --resume continues and ends with the result of an
    uninterrupted run."""
    import streamlsq.stream.fit as fit_module
    from streamlsq.io.checkpoint import Checkpoint

    X, y = _good(n=6_000)
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=500)
    chunk = _chunk_file(data, "X", (9, 0))
    original = chunk.read_bytes()
    out, ckpt = tmp_path / "fit.zarr", tmp_path / "ckpt"
    kw = dict(block_size=250, record_every=1, client=client, progress=False,
              segment_bytes=500 * 4 * 8)

    class BreakAfterTwo(Checkpoint):
        def save(self, i, part):
            super().save(i, part)
            if i == 1:
                chunk.write_bytes(original[:40])  # damaged while the run goes on

    with monkeypatch.context() as m:
        m.setattr(fit_module, "Checkpoint", BreakAfterTwo)
        with pytest.raises(InputError, match=r"variable 'X' chunk 9 \(rows 4500-4999\) cannot "
                                             r"be read"):
            fit_stream(data, "kf4lls", out=out, checkpoint=ckpt, **kw)
    assert not out.exists() and leftovers(out) == []
    assert json.loads((ckpt / "progress.json").read_text())["next"] >= 2
    chunk.write_bytes(original)  # repaired: a chunk no committed segment read
    resumed = fit_stream(data, "kf4lls", out=out, checkpoint=ckpt, resume=True, **kw)
    fresh = fit_stream(data, "kf4lls", **kw)
    np.testing.assert_array_equal(resumed.coef, fresh.coef)
    assert not ckpt.exists()  # removed once the result was published


@pytest.mark.parametrize("where", ["root", "X"])
def test_invalid_metadata_is_named(tmp_path, run, where):
    X, y = _good()
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=250)
    meta = data / "zarr.json" if where == "root" else data / "X" / "zarr.json"
    meta.write_text('{"zarr_format": 3, "node_type": ')
    line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr"))
    assert str(data) in line
    assert ("not a readable Zarr group" in line if where == "root"
            else "variable 'X': metadata" in line and "cannot be read" in line)
    line = refusal(run("info", data))
    assert str(data) in line


# -- layouts --------------------------------------------------------------------------


def test_lengths_of_X_and_y_must_agree(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "d.zarr", X, y[:-7], chunk_rows=250)
    line = refusal(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr"))
    assert "variable 'y' has 1993 samples but 'X' has 2000" in line


def test_different_chunkings_of_X_and_y_fit_the_same_and_are_named_by_their_own(tmp_path,
                                                                                client, run):
    """Accepted, not refused: xarray's to_zarr chunks X and y independently; every read
    is by rows, and an error names the chunk of the variable at fault."""
    X, y = _good()
    same = write_stream(tmp_path / "same.zarr", X, y, chunk_rows=250)
    g = zarr.open_group(str(tmp_path / "mixed.zarr"), mode="w", zarr_format=3)
    g.create_array("X", shape=X.shape, chunks=(250, 4), dtype="f8",
                   dimension_names=["sample", "feature"])[...] = X
    g.create_array("y", shape=y.shape, chunks=(333, 1), dtype="f8",
                   dimension_names=["sample", "target"])[...] = y
    for engine in ("sequential", "scan"):
        a = fit_stream(same, "kf4lls", engine=engine, block_size=250, client=client)
        b = fit_stream(tmp_path / "mixed.zarr", "kf4lls", engine=engine, block_size=250,
                       client=client)
        np.testing.assert_allclose(a.coef, b.coef, rtol=1e-12, atol=1e-14)
    g["y"][700, 0] = np.nan
    line = refusal(run("fit", "kf4lls", tmp_path / "mixed.zarr", "--out", tmp_path / "o.zarr"))
    assert "variable 'y' chunk 2 has NaN at row 700" in line


def test_empty_stores(tmp_path, run):
    g = zarr.open_group(str(tmp_path / "nothing.zarr"), mode="w", zarr_format=3)
    line = refusal(run("fit", "kf4lls", tmp_path / "nothing.zarr", "--out", tmp_path / "o.zarr"))
    assert "variable 'X' is missing (found: none)" in line
    g.create_array("X", shape=(0, 3), dtype="f8", dimension_names=["sample", "feature"])
    g.create_array("y", shape=(0, 1), dtype="f8", dimension_names=["sample", "target"])
    line = refusal(run("fit", "kf4lls", tmp_path / "nothing.zarr", "--out", tmp_path / "o.zarr"))
    assert "variable 'X' is empty (shape (0, 3))" in line
    (tmp_path / "plain").mkdir()
    line = refusal(run("info", tmp_path / "plain"))
    assert "plain: an empty folder, not a Zarr store" in line


def test_a_one_row_store(tmp_path, run):
    data = write_stream(tmp_path / "one.zarr", np.array([[1.0, 2.0]]), np.array([[3.0]]), 1)
    out = tmp_path / "o.zarr"
    _refused_leaving_nothing(run("fit", "kf4lls", data, "--out", out), data, out,
                             "the first block (rows 0-0) leaves the normal matrix singular",
                             "--ridge")
    ok = run("fit", "kf4lls", data, "--out", out, "--ridge", "1")
    assert ok.exit_code == 0, ok.output
    assert open_result(out).sizes["step"] == 1


@pytest.mark.parametrize("dtype", ["complex128", "float16", "bool", "str"])
def test_unsupported_dtypes(tmp_path, run, dtype):
    X, y = _good(n=100)
    Xd = X.astype(dtype) if dtype != "str" else X.astype(str)
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w", zarr_format=3)
    g.create_array("X", shape=Xd.shape, dtype=Xd.dtype if dtype != "str" else str,
                   chunks=(50, 4), dimension_names=["sample", "feature"])[...] = Xd
    g.create_array("y", shape=y.shape, dtype="f8", chunks=(50, 1),
                   dimension_names=["sample", "target"])[...] = y
    line = refusal(run("fit", "kf4lls", tmp_path / "d.zarr", "--out", tmp_path / "o.zarr"))
    assert "variable 'X' has dtype" in line and "expected a real numeric dtype" in line


def test_rows_appended_without_reconsolidating_are_fitted(tmp_path, client):
    X, y = _good(n=4_000)
    data = write_stream(tmp_path / "d.zarr", X[:3_000], y[:3_000], chunk_rows=500)
    consolidate(data)
    g = zarr.open_group(str(data), mode="r+", use_consolidated=False)
    g["X"].resize((4_000, 4))
    g["y"].resize((4_000, 1))
    g["X"][3_000:] = X[3_000:]
    g["y"][3_000:] = y[3_000:]
    assert zarr.open_group(str(data), mode="r")["X"].shape[0] == 3_000  # the stale copy
    ds = fit_stream(data, "kf4lls", client=client)
    assert ds.attrs["n_rows"] == 4_000
    np.testing.assert_allclose(ds.coef[-1], np.linalg.lstsq(X, y, rcond=None)[0], rtol=1e-9)


# -- values ---------------------------------------------------------------------------


def _huge(tmp_path, magnitude, name="huge.zarr"):
    """Finite values of ``magnitude`` scattered over rows 500-599 (as bit flips make)."""
    rng = np.random.default_rng(0)
    X, y = _good(n=20_000)
    rows, cols = rng.integers(500, 600, 20), rng.integers(0, 4, 20)
    X[rows, cols] = magnitude * rng.uniform(1, 9, 20)
    return write_stream(tmp_path / name, X, y, chunk_rows=100)


def _largest(store):
    """(|value|, row) of the largest value of X, and the first row above 1e150, as the
    messages print them."""
    X = zarr.open_group(str(store), mode="r")["X"][:]
    big = np.abs(X).max(axis=1)
    first = int(np.flatnonzero(big > 1e150)[0]) if (big > 1e150).any() else None
    return f"{big.max():.3g} at row {int(big.argmax())}", first


def test_bfgs_never_publishes_nan_coefficients(tmp_path, run):
    """A store that broke BFGS before: BFGS's state goes NaN on finite values near 1e120; the
    result used to be published complete with 195 of 200 NaN steps."""
    data = _huge(tmp_path, 1e120)
    out = tmp_path / "o.zarr"
    _refused_leaving_nothing(run("fit", "bfgs", data, "--out", out), data, out,
                             "variable 'X' chunk 5: block 6 (rows 500-599) makes the bfgs "
                             "state non-finite", f"largest |value| is {_largest(data)[0]}",
                             "rescale the data")


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_values_that_overflow_the_sums_are_named_on_both_engines(tmp_path, run, engine):
    data = _huge(tmp_path, 1e200)
    out = tmp_path / "o.zarr"
    _refused_leaving_nothing(run("fit", "kf4lls", data, "--out", out, "--engine", engine),
                             data, out, "variable 'X' chunk 5", _largest(data)[0],
                             "above 9.48e+151, where the sums over the store's rows overflow "
                             "float64")


def test_info_check_refuses_the_magnitudes_the_solvers_overflow_on(tmp_path, run):
    data = _huge(tmp_path, 1e200)
    line = refusal(run("info", data, "--check"))
    assert "variable 'X' chunk 5 has |value| " in line and f"at row {_largest(data)[1]}, above " \
        "9.48e+151, where the least-squares sums over the store's 20000 rows overflow" in line
    ok = run("info", _huge(tmp_path, 1e120, "fine.zarr"), "--check")
    assert ok.exit_code == 0 and "every value finite in 20000 rows" in ok.output


def test_the_last_guard_refuses_a_non_finite_trajectory():
    from streamlsq.stream.engines import Trajectory
    from streamlsq.stream.fit import check_trajectory

    class Plan:
        label = "s.zarr"

    traj = Trajectory(steps=np.array([1, 2]), coefs=np.array([[[1.0]], [[np.nan]]]),
                      rows_seen=np.array([10, 20]), state={}, diagnostics={})
    with pytest.raises(InputError, match=r"s.zarr: the coefficients at step 2 \(after 20 "
                                         r"rows\) are not finite"):
        check_trajectory(traj, Plan())


def test_a_stopped_run_leaves_no_result(tmp_path, client, stop_after_commits):
    X, y = _good(n=6_000)
    data = write_stream(tmp_path / "d.zarr", X, y, chunk_rows=500)
    out = tmp_path / "o.zarr"
    with stop_after_commits(2):
        fit_stream(data, "kf4lls", out=out, checkpoint=tmp_path / "ck", block_size=500,
                   segment_bytes=500 * 4 * 8, client=client, progress=False)
    assert not out.exists() and leftovers(out) == []


# -- sharded stores ---------------------------------------------------------------------


def _sharded(path, X, y, shard_rows=1_000, chunk_rows=250, skip=None):
    """A stream store in shards of ``shard_rows`` rows of inner chunks of ``chunk_rows``;
    ``skip`` = (variable, first row, end row): rows never written (their inner chunks stay
    empty entries of the shard's index, the shard's file exists)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, A, dims in (("X", X, ["sample", "feature"]), ("y", y, ["sample", "target"])):
        a = g.create_array(name, shape=A.shape, dtype=A.dtype, dimension_names=dims,
                           chunks=(chunk_rows, A.shape[1]), shards=(shard_rows, A.shape[1]))
        if skip is not None and skip[0] == name:
            a[: skip[1]] = A[: skip[1]]
            a[skip[2]:] = A[skip[2]:]
        else:
            a[...] = A
    return path


def test_a_complete_sharded_store_fits_as_least_squares(tmp_path, run, client):
    X, y = _good()
    data = _sharded(tmp_path / "s.zarr", X, y)
    for engine in ("sequential", "scan"):
        ds = fit_stream(data, "kf4lls", engine=engine, block_size=250, client=client)
        np.testing.assert_allclose(ds.coef[-1], np.linalg.lstsq(X, y, rcond=None)[0],
                                   rtol=1e-10)
    assert run("info", data, "--check").exit_code == 0


def _sharded_copy(source, path, skip):
    """The task store ``source`` copied with X and y in shards of 1,000 rows (inner chunks of
    250), the rows ``skip`` = (variable, first, end) of one never written."""
    g = zarr.open_group(str(source), mode="r")
    out = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name in g.array_keys():
        a = g[name]
        sharded = name in ("X", "y")
        b = out.create_array(name, shape=a.shape, dtype=a.dtype,
                             chunks=(250, *a.shape[1:]) if sharded else a.chunks,
                             shards=(1_000, *a.shape[1:]) if sharded else None,
                             dimension_names=list(a.metadata.dimension_names),
                             attributes=dict(a.attrs))
        values = a[...]
        if name == skip[0]:
            b[: skip[1]], b[skip[2]:] = values[: skip[1]], values[skip[2]:]
        else:
            b[...] = values
    return path


@pytest.mark.parametrize("command", ["fit-sequential", "fit-scan", "info", "metalearn"])
def test_an_inner_chunk_of_a_shard_never_written_is_refused(tmp_path, run, client, command):
    """The shard's file exists (a listing of the store finds every shard), its index marks
    the inner chunk empty: it used to read as zeros, be fitted and be called finite."""
    out = tmp_path / "o.zarr"
    if command == "metalearn":
        tasks = simulate_mlr(tmp_path / "t.zarr", k=2, d=3, n_light=500, t_light=4, n_heavy=40,
                             t_heavy=30, n_light2=200, t_light2=6, client=client)
        data = _sharded_copy(tasks, tmp_path / "st.zarr", ("y", 1_250, 1_500))
        where = "variable 'y' chunk (5,) was never written (rows 1250-1499"
        args = ("metalearn", data, "--out", out, "--k", 2)
    else:
        X, y = _good()
        data = _sharded(tmp_path / "s.zarr", X, y, skip=("X", 750, 1_000))
        where = "variable 'X' chunk (3, 0) was never written (rows 750-999"
        args = ("info", data, "--check") if command == "info" else \
            ("fit", "kf4lls", data, "--out", out, "--engine", command.split("-")[1])
    before = snapshot(tmp_path)
    line = refusal(run(*args))
    assert str(data) in line and where in line and "1 of " in line, line
    assert snapshot(tmp_path) == before
    assert not out.exists() and leftovers(out) == []


def test_an_inner_chunk_emptied_after_the_store_was_opened_is_refused_by_the_reader(tmp_path):
    """A shard rewritten during a run with one inner chunk dropped (zarr does not store a
    chunk equal to the fill value): the Dask task that reads it names it."""
    from streamlsq import open_stream

    X, y = _good()
    data = _sharded(tmp_path / "s.zarr", X, y)
    source = open_stream(data)
    zarr.open_group(str(data), mode="r+")["X"][1_250:1_500] = 0.0  # the fill value
    np.testing.assert_array_equal(source.read(0, 1_000)[0], X[:1_000])  # other shard: fine
    with pytest.raises(InputError, match=r"s.zarr: variable 'X' chunk \(5, 0\) \(rows "
                                         r"1250-1499\) was never written: its shard's index "
                                         r"has no entry for it"):
        source.read(1_200, 1_300)


# -- per-row recursions on data of extreme scale -------------------------------------------


def _scaled(tmp_path, scale, name):
    X, y = _good(n=4_000, q=3, seed=4)
    return write_stream(tmp_path / name, X * scale, y * scale, chunk_rows=1_000)


@pytest.mark.parametrize("scale, dtype", [(1e155, "float64"), (1e200, "float64"),
                                          (1e20, "float32"), (1e30, "float32")])
def test_normalized_lms_is_invariant_to_the_datas_scale(tmp_path, run, scale, dtype):
    """Normalised LMS (no intercept, eps 0) takes the same steps on X·s, y·s as on X, y. Its
    ‖x‖² used to overflow (float64 above 1e154; float32 above 1e19, summed in float32) and its
    step to become 0: coefficients of zero were published as complete."""
    one, big = _scaled(tmp_path, 1.0, "one.zarr"), _scaled(tmp_path, scale, "big.zarr")
    opts = ("--normalized", "--rate", "1", "--schedule", "inverse", "--tau", "200", "--eps",
            "0", "--no-intercept", "--block-size", "500")
    for data, out in ((one, "one-fit.zarr"), (big, "big-fit.zarr")):
        ok = run("fit", "lms", data, "--out", tmp_path / out, *opts, "--dtype", dtype)
        assert ok.exit_code == 0, ok.output
    reference = open_result(tmp_path / "one-fit.zarr").coef.values
    scaled = open_result(tmp_path / "big-fit.zarr").coef.values
    np.testing.assert_allclose(scaled, reference, rtol=1e-10 if dtype == "float64" else 1e-4)
    X, y = _good(n=4_000, q=3, seed=4)
    np.testing.assert_allclose(scaled[-1], np.linalg.lstsq(X, y, rcond=None)[0], atol=0.2)
    out = tmp_path / "plain.zarr"  # plain LMS diverges there, and says so
    _refused_leaving_nothing(run("fit", "lms", big, "--out", out, "--rate", "0.5", "--dtype",
                                 dtype), big, out, "variable '", "rescale the data")


@pytest.mark.parametrize("scale, dtype", [(1e155, "float64"), (1e200, "float64"),
                                          (1e20, "float32")])
@pytest.mark.parametrize("method", ["bfgs", "irma", "irma-gd", "irma-rls"])
def test_per_row_recursions_refuse_what_they_cannot_carry(tmp_path, run, method, scale, dtype):
    """BFGS and the IRMA family on targets (and, for BFGS, features) of extreme scale: a line
    naming the variable, chunk, value and remedy (BFGS in float32 used to say "Eigenvalues
    did not converge"), or, where the recursion is linear in y (IRMA in float32), the
    unscaled fit times the scale."""
    rng = np.random.default_rng(5)
    if method == "bfgs":
        data = _scaled(tmp_path, scale, "big.zarr")
        opts = ()
    else:
        x = rng.uniform(0, 3, (2_000, 1))
        y = np.sin(x) + 0.1 * rng.standard_normal((2_000, 1))
        write_stream(tmp_path / "one.zarr", x, y, chunk_rows=500)
        data = write_stream(tmp_path / "big.zarr", x, y * scale, chunk_rows=500)
        opts = ("--domain", "0", "3", "--order", "4")
    out = tmp_path / "o.zarr"
    result = run("fit", method, data, "--out", out, "--dtype", dtype, *opts)
    if method != "bfgs" and dtype == "float32":  # linear in y: no overflow in float32
        assert result.exit_code == 0, result.output
        assert run("fit", method, tmp_path / "one.zarr", "--out", tmp_path / "ref.zarr",
                   "--dtype", dtype, *opts).exit_code == 0
        # the final step: mid-stream, IRMA-GD's interpolating steps amplify float32 rounding
        np.testing.assert_allclose(open_result(out).coef[-1].values / scale,
                                   open_result(tmp_path / "ref.zarr").coef[-1].values,
                                   rtol=1e-4, atol=1e-6)
        return
    line = _refused_leaving_nothing(result, data, out, str(data), "chunk", "|value|",
                                    "rescale the data")
    assert ("compute in float64" in line) == (dtype == "float32"), line


@pytest.mark.parametrize("method", ["kf4lls", "rls", "bfgs", "lms"])
def test_estimators_name_values_too_large_for_the_sums(method):
    """RLSRegressor and IncrementalBFGSRegressor near 1e160 used to raise a raw LinAlgError
    ("SVD did not converge", "Eigenvalues did not converge")."""
    from streamlsq import regressor_for

    X, y = _good(n=1_000, q=3, seed=6)
    X[417, 2] = 3e160
    with pytest.raises(ValueError, match=r"Regressor: X\[417, 2\] = 3e\+160 is above 4.24e\+152, "
                                         r"where the least-squares sums over 1000 rows overflow "
                                         r"float64; rescale X and y") as info:
        regressor_for(method)().fit(X, y[:, 0])
    assert type(info.value) is ValueError  # a scikit-learn estimator's error, not LinAlgError


@pytest.mark.parametrize("chunks", [(250, 0), (250, 1)])
def test_a_store_without_targets_is_refused(tmp_path, run, chunks):
    """y of shape (n, 0): info --check used to call it valid, and a fit to end in
    ZeroDivisionError (exit 1) or to publish a result of no target."""
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w", zarr_format=3)
    g.create_array("X", shape=(1_000, 3), chunks=(250, 3), dtype="f8",
                   dimension_names=["sample", "feature"])[...] = _good(n=1_000, q=3)[0]
    g.create_array("y", shape=(1_000, 0), chunks=chunks, dtype="f8",
                   dimension_names=["sample", "target"])
    data, out = tmp_path / "d.zarr", tmp_path / "o.zarr"
    phrase = "variable 'y' has no target column (shape (1000, 0)); a stream store needs at " \
             "least one target"
    assert phrase in refusal(run("info", data, "--check"))
    for method in ("kf4lls", "lms"):
        _refused_leaving_nothing(run("fit", method, data, "--out", out), data, out, phrase)
