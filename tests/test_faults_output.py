"""A full disk or a read-only output (docs/faults.md, "Output"): writability is checked
before any computation; a write that fails mid-way is one line, and neither a partial
store nor a temporary folder survives.

The full disk is made with RLIMIT_FSIZE in the command's process (and the workers of its
embedded cluster, which inherit it): a write past the limit fails with EFBIG, as a full
filesystem fails with ENOSPC, for any user. Where this machine lets the tests mount a
small tmpfs (root), a real ENOSPC is tried too.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time

import pytest

from streamlsq import simulate_stream

from faultkit import cli, invoke, leftovers, refusal


def _file_size_limit(nbytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return limit


@pytest.fixture(scope="module")
def data(tmp_path_factory, client):
    path = tmp_path_factory.mktemp("out") / "d.zarr"
    return simulate_stream(path, 20_000, 4, 1, chunk_rows=2_000, seed=5, client=client)


@pytest.mark.parametrize("command", ["fit", "simulate"])
def test_a_write_past_the_space_left_is_one_line_and_leaves_nothing(data, tmp_path, command):
    out = tmp_path / "out.zarr"
    args = (["fit", "kf4lls", data, "--out", out, "--block-size", 10, "--record-every", 1]
            if command == "fit" else
            ["simulate", "stream", "--out", out, "--rows", 200_000, "--features", 10])
    result = subprocess.run(cli(*args, "--workers", 1), capture_output=True, text=True,
                            preexec_fn=_file_size_limit(20_000))
    line = refusal(result)
    assert f"{out}: writing the result failed (File too large); nothing was written" in line
    assert not out.exists() and leftovers(out) == []


@pytest.fixture
def readonly_folder(tmp_path):
    """A folder this process cannot write into: chmod for a normal user; root ignores
    permissions, so for root a read-only tmpfs (skipped where mounting is not allowed)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mount = shutil.which("mount")
    ok = mount and subprocess.run([mount, "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs",
                                   str(folder)], capture_output=True).returncode == 0
    if not ok:
        pytest.skip("running as root, where permissions do not stop writes, and mounting a "
                    "read-only tmpfs is not allowed here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_read_only_output_folder_is_refused_before_any_work(data, readonly_folder, client):
    out = readonly_folder / "fit.zarr"
    started = time.monotonic()
    line = refusal(invoke("fit", "kf4lls", data, "--out", out,
                          scheduler=client.scheduler.address))
    assert f"{readonly_folder}: cannot write here (" in line and "choose another" in line
    assert time.monotonic() - started < 10
    line = refusal(invoke("study", "lms", "--quick", "--out", readonly_folder / "s",
                          scheduler=client.scheduler.address))
    assert "cannot write here" in line or "Read-only file system" in line
    assert not os.listdir(readonly_folder)


@pytest.fixture
def small_filesystem(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    mount = shutil.which("mount")
    if os.geteuid() != 0 or not mount or subprocess.run(
            [mount, "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(folder)],
            capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root (the RLIMIT_FSIZE test above covers "
                    "the same path for every user)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_full_filesystem_is_one_line_and_leaves_nothing(small_filesystem, client):
    out = small_filesystem / "sim.zarr"
    result = invoke("simulate", "stream", "--out", out, "--rows", 100_000, "--features", 5,
                    scheduler=client.scheduler.address)
    line = refusal(result)
    assert f"{out}: writing the result failed (No space left on device)" in line
    assert os.listdir(small_filesystem) == []
