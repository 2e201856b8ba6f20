"""The command line: help with examples, the happy path, exit codes, the installed entry point."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

from streamlsq.cli.main import main

from conftest import lstsq, read_all


@pytest.fixture
def cli(client):
    def _run(*args):
        return CliRunner().invoke(main, [*map(str, args)] + ["--scheduler",
                                                              client.scheduler.address])
    return _run


def _leaf_commands(group, path=()):
    import click

    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _leaf_commands(cmd, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.parametrize("command", list(_leaf_commands(main)), ids=" ".join)
def test_every_command_has_help_with_examples(command):
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and "--scheduler" in result.output


def test_simulate_info_fit_round_trip(tmp_path, cli):
    data, out = tmp_path / "d.zarr", tmp_path / "f.zarr"
    r = cli("simulate", "stream", "--out", data, "--rows", 30_000, "--features", 7,
            "--targets", 2, "--chunk-size", 4_000, "--seed", 4)
    assert r.exit_code == 0, r.output
    r = cli("info", data, "--check")
    assert r.exit_code == 0, r.output
    assert "valid stream: 30000 rows, 7 features, 2 target(s), 8 chunks" in r.output
    assert "every value finite in 30000 rows" in r.output
    r = cli("fit", "kf4lls", data, "--out", out, "--engine", "scan", "--block-size", 3_000)
    assert r.exit_code == 0, r.output
    ds = xr.open_zarr(out)
    X, Y = read_all(data)
    np.testing.assert_allclose(ds.coef.isel(step=-1), lstsq(X, Y), rtol=1e-10)
    assert ds.attrs["method"] == "kf4lls" and ds.attrs["complete"] is True
    r = cli("info", out)
    assert r.exit_code == 0 and "result of kf4lls: complete" in r.output


def test_info_refuses_nan_with_check(tmp_path, cli):
    from conftest import write_stream

    X = np.ones((100, 2))
    X[77, 1] = np.nan
    write_stream(tmp_path / "n.zarr", X, np.ones((100, 1)), 25)
    r = cli("info", tmp_path / "n.zarr", "--check")
    assert r.exit_code == 2 and "chunk 3 has NaN at row 77" in r.stderr


def test_installed_console_script(tmp_path):
    # the script installed next to this interpreter (a venv need not be on PATH)
    beside = Path(sys.executable).parent / "streamlsq"
    exe = str(beside) if beside.exists() else shutil.which("streamlsq")
    assert exe, "the streamlsq entry point is not installed"
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "version" in r.stdout
    r = subprocess.run([exe, "fit", "kf4lls", str(tmp_path / "none.zarr"), "--out",
                        str(tmp_path / "o.zarr")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"streamlsq: error: {tmp_path / 'none.zarr'}: no such store"]


def test_a_reader_that_stops_reading_is_not_a_failure(tmp_path):
    """``streamlsq info R | head -1`` (re-test round 8, I1) ended with exit 2 and
    ``input/output error (BrokenPipeError)``; a closed output now ends the command quietly,
    as other command-line tools do. The reading end is closed before the command writes."""
    xr.Dataset({"X": (("sample", "feature"), np.ones((4, 2))),
                "y": (("sample",), np.ones(4))}).to_zarr(tmp_path / "s.zarr", zarr_format=3)
    proc = subprocess.Popen([sys.executable, "-m", "streamlsq.cli", "info",
                             str(tmp_path / "s.zarr")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == "", err
