"""``--resume`` of a fit of a table whose file was replaced by one of the same size and
modification time (``rsync -t``, ``cp`` then ``touch -r``) is refused naming the file: a
table's parts are stamped by their content, not by size and time alone (docs/tables.md,
docs/faults.md "Runs and checkpoints")."""

from __future__ import annotations

import os

import numpy as np
import pytest

from streamlsq import fit_stream

from faultkit import invoke, refusal, snapshot

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _write(path, seed: int) -> None:
    """4,000 rows in row groups of 500, stored plain (no compression, dictionary or
    statistics): other numbers give a file of exactly the same size."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4_000, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(4_000)
    table = pa.table({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})
    pq.write_table(table, path, row_group_size=500, compression="none", use_dictionary=False,
                   write_statistics=False)


def test_a_table_replaced_with_the_same_size_and_time_is_refused_on_resume(
        tmp_path, client, stop_after_commits):
    table = tmp_path / "t.parquet"
    _write(table, 1)
    ckpt, out = tmp_path / "ckpt", tmp_path / "fit.zarr"
    options = dict(x=["a", "b", "c"], y="y", block_size=250, segment_bytes=500 * 32,
                   client=client, progress=False)
    with stop_after_commits(3):  # three segments committed: rows of the first row groups read
        fit_stream(table, "kf4lls", checkpoint=ckpt, **options)
    before = os.stat(table)
    _write(tmp_path / "other.parquet", 2)
    os.replace(tmp_path / "other.parquet", table)
    os.utime(table, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(table)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    files = snapshot(tmp_path)
    line = refusal(invoke("fit", "kf4lls", table, "--x", "a,b,c", "--y", "y", "--out", out,
                          "--checkpoint", ckpt, "--resume", "--block-size", 250,
                          "--segment-size", f"{500 * 32 / 2**20}",
                          scheduler=client.scheduler.address))
    assert f"{table}: " in line and "changed since the checkpoint" in line, line
    assert "resuming would mix two datasets: rerun without --resume" in line
    files.pop("ckpt/lock")  # the lock's description names the last run that took it
    after = snapshot(tmp_path)
    assert after.pop("ckpt/lock")[0] == "file"
    assert after == files and not out.exists()
    # unchanged content resumes to the uninterrupted fit's coefficients
    _write(table, 1)
    os.utime(table, ns=(before.st_atime_ns, before.st_mtime_ns))
    with stop_after_commits(3):
        fit_stream(table, "kf4lls", checkpoint=tmp_path / "again", **options)
    resumed = fit_stream(table, "kf4lls", checkpoint=tmp_path / "again", resume=True, **options)
    np.testing.assert_array_equal(resumed.coef, fit_stream(table, "kf4lls", **options).coef)
