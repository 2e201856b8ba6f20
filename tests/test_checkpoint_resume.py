"""A killed run resumes from its checkpoint and ends with the uninterrupted run's result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from streamlsq import fit_stream, open_result, simulate_stream
from streamlsq.errors import InputError

FIT = ["rls", "--forgetting", "0.999", "--ridge", "1.0", "--block-size", "1",
       "--record-every", "250", "--segment-size", "0.1"]


def _cli(*args):
    return [sys.executable, "-m", "streamlsq.cli", *map(str, args)]


@pytest.fixture(scope="module")
def slow_stream(tmp_path_factory, client):
    # per-sample RLS over 60,000 rows takes a few seconds: time enough to kill it mid-run
    path = tmp_path_factory.mktemp("ckpt") / "s.zarr"
    return simulate_stream(path, 60_000, 8, 1, chunk_rows=1_500, seed=3, client=client)


def test_killed_run_resumes_to_the_same_result(slow_stream, tmp_path, client):
    out, ckpt = tmp_path / "r.zarr", tmp_path / "ckpt"
    cmd = _cli("fit", *FIT[:1], slow_stream, *FIT[1:], "--out", out, "--checkpoint", ckpt,
               "--workers", "1")
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    progress = ckpt / "progress.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists() and json.loads(progress.read_text())["next"] >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the client and its LocalCluster, at once
    proc.wait()
    assert not out.exists()  # nothing that looks like a result
    committed = json.loads(progress.read_text())["next"]
    assert committed >= 3

    resumed = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    got = open_result(out)

    reference = fit_stream(slow_stream, "rls", forgetting=0.999, ridge=1.0, block_size=1,
                           record_every=250, client=client)
    np.testing.assert_array_equal(got.step, reference.step)
    np.testing.assert_allclose(got.coef, reference.coef, rtol=1e-12, atol=1e-14)
    states = [name for name in reference.data_vars if name.startswith("state_")]
    assert "state_R" in states  # the default solver's factor (state_H of solver="normal")
    for name in states:
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-12, err_msg=name)


def test_resume_refuses_a_checkpoint_of_another_run(slow_stream, tmp_path, client):
    ckpt = tmp_path / "ckpt"
    fit_stream(slow_stream, "kf4lls", block_size=3_000, checkpoint=ckpt, client=client)
    with pytest.raises(InputError, match=r"different run \(differs in: parameters \(ridge "
                                         r"0\.0 then, 1\.0 now\)\)"):
        fit_stream(slow_stream, "kf4lls", ridge=1.0, block_size=3_000, checkpoint=ckpt,
                   resume=True, client=client)
    # an entry kept as a digest names the option that changed, with both values
    with pytest.raises(InputError, match=r"differs in: --block-size 3000 then, 1500 now\)"):
        fit_stream(slow_stream, "kf4lls", block_size=1_500, checkpoint=ckpt, resume=True,
                   client=client)
    again = fit_stream(slow_stream, "kf4lls", block_size=3_000, checkpoint=ckpt, resume=True,
                       client=client)  # everything committed: nothing left to fold
    fresh = fit_stream(slow_stream, "kf4lls", block_size=3_000, client=client)
    np.testing.assert_array_equal(again.coef, fresh.coef)


def test_resume_keeps_the_segments_it_was_cut_into(slow_stream, tmp_path, client,
                                                   stop_after_commits):
    """The default segment size depends on the workers' memory; a run resumed on other
    workers (here: default size instead of 0.1 MiB) continues with its own segments."""
    ckpt = tmp_path / "ckpt"
    kw = dict(block_size=500, record_every=4, client=client, progress=False)
    with stop_after_commits(3):
        fit_stream(slow_stream, "kf4lls", checkpoint=ckpt, segment_bytes=2**17, **kw)
    saved = json.loads((ckpt / "progress.json").read_text())
    assert saved["next"] == 3 and len(saved["segments"]) > 3
    resumed = fit_stream(slow_stream, "kf4lls", checkpoint=ckpt, resume=True, **kw)
    fresh = fit_stream(slow_stream, "kf4lls", **kw)
    np.testing.assert_array_equal(resumed.step, fresh.step)
    np.testing.assert_allclose(resumed.coef, fresh.coef, rtol=1e-12, atol=1e-14)
    # its speed counts the rows it read, not those it took from the checkpoint
    assert resumed.attrs["rows_resumed"] == saved["segments"][3][0] * 500
    assert "rows_resumed" not in fresh.attrs
