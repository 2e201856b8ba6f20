"""Bad input is refused with exit code 2 and one line naming the store, variable and chunk,
and no result store that looks complete is left behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from streamlsq.cli.main import main

from conftest import write_stream


@pytest.fixture
def run(client):
    address = client.scheduler.address

    def _run(*args):
        result = CliRunner().invoke(main, [*map(str, args), "--scheduler", address])
        return result

    return _run


def _good(n=1_000, q=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, q))
    return X, X @ np.arange(1.0, q + 1)[:, None] + rng.standard_normal((n, 1))


def _one_error_line(result):
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _no_complete_result(out: Path):
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.partial-*"))


@pytest.mark.parametrize("engine", ["sequential", "scan"])
@pytest.mark.parametrize("var,value,kind", [("X", np.nan, "NaN"), ("y", np.inf, "Inf")])
def test_non_finite_values_name_store_variable_and_chunk(tmp_path, run, engine, var, value,
                                                          kind):
    X, y = _good()
    (X if var == "X" else y)[650, 0] = value
    data = write_stream(tmp_path / "bad.zarr", X, y, chunk_rows=200)
    out = tmp_path / "out.zarr"
    line = _one_error_line(run("fit", "kf4lls", data, "--out", out, "--engine", engine))
    assert str(data) in line and f"variable '{var}'" in line and "chunk 3" in line
    assert kind in line and "row 650" in line
    _no_complete_result(out)


def test_wrong_dimension_names(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "dims.zarr", X, y, 250,
                        dims=(("row", "column"), ("sample", "target")))
    out = tmp_path / "out.zarr"
    line = _one_error_line(run("fit", "kf4lls", data, "--out", out))
    assert str(data) in line and "variable 'X'" in line and "('sample', 'feature')" in line
    _no_complete_result(out)


def test_non_numeric_dtype(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "bool.zarr", X > 0, y, 250)
    out = tmp_path / "out.zarr"
    line = _one_error_line(run("fit", "kf4lls", data, "--out", out))
    assert "variable 'X'" in line and "dtype bool" in line
    _no_complete_result(out)


@pytest.mark.parametrize("engine", ["sequential", "scan"])
def test_rank_deficient_first_block_names_the_remedy(tmp_path, run, engine):
    X, y = _good(n=2_000)
    X[:500, 3] = X[:500, 0] - 2 * X[:500, 1]  # collinear in the first block only
    data = write_stream(tmp_path / "rank.zarr", X, y, chunk_rows=500)
    out = tmp_path / "out.zarr"
    # the rows identify the coefficients from the second block on: the fit starts there
    ok = run("fit", "kf4lls", data, "--out", out, "--engine", engine, "--block-size", "500")
    assert ok.exit_code == 0, ok.output
    fit = zarr.open_group(str(out))
    assert fit.attrs["identified_from_row"] == 1_000 and fit["step"][0] == 2
    np.testing.assert_allclose(fit["coef"][-1], np.linalg.lstsq(X, y, rcond=None)[0],
                               rtol=1e-12)
    # rows that are collinear throughout never identify them: refused with rank and remedy
    X[:, 3] = X[:, 0] - 2 * X[:, 1]
    data = write_stream(tmp_path / "collinear.zarr", X, y, chunk_rows=500)
    out = tmp_path / "out2.zarr"
    line = _one_error_line(run("fit", "kf4lls", data, "--out", out, "--engine", engine,
                               "--block-size", "500"))
    assert str(data) in line and "variable 'X'" in line and "never identify" in line
    assert "--ridge" in line and "rank 3 of 4" in line
    _no_complete_result(out)
    ok = run("fit", "kf4lls", data, "--out", out, "--engine", engine, "--block-size", "500",
             "--ridge", "1e-8")
    assert ok.exit_code == 0, ok.output
    assert zarr.open_group(str(out)).attrs["complete"] is True


def test_missing_chunk_is_refused(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "gap.zarr", X, y, chunk_rows=200)
    for p in (data / "X" / "c").rglob("*"):
        if p.is_file() and p.relative_to(data / "X" / "c").parts[0] == "2":
            p.unlink()
    line = _one_error_line(run("fit", "kf4lls", data, "--out", tmp_path / "o.zarr"))
    assert "variable 'X' chunk (2, 0) was never written" in line


def test_missing_variable_and_missing_store(tmp_path, run):
    line = _one_error_line(run("fit", "kf4lls", tmp_path / "nope.zarr", "--out",
                               tmp_path / "o.zarr"))
    assert "nope.zarr: no such store" in line
    g = zarr.open_group(str(tmp_path / "empty.zarr"), mode="w", zarr_format=3)
    g.create_array("X", shape=(10, 2), dtype="f8", dimension_names=["sample", "feature"])
    line = _one_error_line(run("fit", "kf4lls", tmp_path / "empty.zarr", "--out",
                               tmp_path / "o.zarr"))
    assert "variable 'y' is missing" in line


def test_existing_output_is_not_overwritten_silently(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "ok.zarr", X, y, chunk_rows=300)
    out = tmp_path / "out.zarr"
    assert run("fit", "kf4lls", data, "--out", out).exit_code == 0
    line = _one_error_line(run("fit", "kf4lls", data, "--out", out))
    assert "already exists" in line and "--overwrite" in line
    assert run("fit", "kf4lls", data, "--out", out, "--overwrite").exit_code == 0


def test_bad_options(tmp_path, run):
    X, y = _good()
    data = write_stream(tmp_path / "ok.zarr", X, y, chunk_rows=300)
    out = tmp_path / "o.zarr"
    assert "forgetting factor" in _one_error_line(
        run("fit", "rls", data, "--out", out, "--forgetting", "1.5"))
    assert "--block-size must be a positive integer" in _one_error_line(
        run("fit", "kf4lls", data, "--out", out, "--block-size", "0"))
    assert "--checkpoint" in _one_error_line(
        run("fit", "kf4lls", data, "--out", out, "--resume"))
    _no_complete_result(out)


@pytest.mark.parametrize("value", [True, 2.5, "3", None, -1])
def test_integer_options_refuse_what_is_not_a_count(value):
    from streamlsq.errors import InputError, checked
    from streamlsq.io.tasks import HOLDOUT

    with pytest.raises(InputError, match=r"^holdout must be an integer >= 0, got "):
        checked(HOLDOUT, value)


@pytest.mark.parametrize("value", [0, 3, np.int64(3), 3.0])
def test_integer_options_accept_integral_values(value):
    from streamlsq.errors import checked
    from streamlsq.io.tasks import HOLDOUT

    got = checked(HOLDOUT, value)
    assert got == value and type(got) is int
