"""One run path: every job opens its client, resumes and publishes through ``streamlsq.jobs``.

The source is walked (AST) for calls that open a Dask client (``dask_client``), publish a
store (``atomic_store``) or implement a resume (a branch on ``resume``, the look-up of a
run already published) outside the run path; and a pass of a run is a step of its
checkpoint: a resumed run does not repeat it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from streamlsq.jobs import Context, Job, Pass, Run

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"

#: module (relative to pipeline/) -> why it may open a client, publish or resume itself
EXCEPTIONS = {
    "jobs.py": "the run path itself",
    "runtime": "the Dask client's own package (dask_client is defined there)",
    "io/results.py": "defines atomic_store, and write_result, the run's publication",
    "io/checkpoint.py": "the checkpoint folder: what a resumed run continues from",
    # the command line starts the cluster in a thread while the command's heavy modules are
    # imported (cli.common._client_while): the cluster must exist before the job does, so
    # its start-up cannot wait for Run.execute; it hands the client to the run (client=)
    "cli/common.py": "the command line's cluster start-up, overlapping its imports",
}
#: calls only the run path makes
OPENS_CLIENT = {"dask_client"}
PUBLISHES = {"atomic_store"}
RESUMES = {"finished_result", "remove_finished"}


def _exempt(relative: str) -> bool:
    return any(relative == name or relative.startswith(name + "/") for name in EXCEPTIONS)


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _mentions_resume(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "resume"
               or isinstance(n, ast.Attribute) and n.attr == "resume" for n in ast.walk(test))


def offences(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every call that opens a client, publishes a store or looks up a
    finished run, and every branch on ``resume``, in the module ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called(node)
            for names, what in ((OPENS_CLIENT, "opens a Dask client"),
                                (PUBLISHES, "publishes a store"),
                                (RESUMES, "implements a resume")):
                if name in names:
                    found.append((node.lineno, f"{name}(): {what}"))
        if isinstance(node, ast.If | ast.IfExp | ast.While) and _mentions_resume(node.test):
            found.append((node.lineno, "a branch on resume: implements a resume"))
    return found


def test_only_the_run_path_opens_clients_publishes_and_resumes():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if _exempt(relative):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        bad += [f"pipeline/{relative}:{line}: {what}" for line, what in offences(tree)]
    assert not bad, "outside the run path (streamlsq.jobs):\n" + "\n".join(bad)


def test_the_walk_finds_what_it_looks_for():
    """The checker itself: each kind of offence in a snippet is found, the harmless forms
    (passing ``resume=`` on, importing ``dask_client``) are not."""
    source = (
        "from streamlsq.runtime.client import dask_client\n"
        "def f(client, resume, out):\n"
        "    with dask_client(client) as c:\n"
        "        pass\n"
        "    with results.atomic_store(out) as tmp:\n"
        "        pass\n"
        "    if self.resume:\n"
        "        done = finished_result(out, {})\n"
        "    return g(resume=resume)\n")
    found = offences(ast.parse(source))
    assert sorted(line for line, _ in found) == [3, 5, 7, 8]
    assert offences(ast.parse("def f(resume):\n    return g(resume=resume)\n")) == []
    assert all(not _exempt(m) for m in ("studies/common.py", "simulate/streams.py",
                                        "cli/study.py", "stream/robust.py"))


# -- passes: steps of a run ------------------------------------------------------------------

def _sum_of_squares(values: np.ndarray) -> np.ndarray:
    return np.array([float(np.sum(values ** 2))])


class SquaresPass(Pass):
    """Σx² of ``values`` on the cluster; counts how often it really ran."""

    name = "squares"
    runs = 0

    def __init__(self, values):
        self.values = values

    def compute(self, ctx: Context) -> dict:
        type(self).runs += 1
        return {"total": ctx.client.submit(_sum_of_squares, self.values).result()}

    def value(self, state) -> float:
        return float(state["total"][0])


class Interrupted(RuntimeError):
    pass


class TwoPassJob(Job):
    """Σx² then Σ(x − mean)² through two passes; ``fail_second`` stops the run between
    them (as a kill would)."""

    name = "two-passes"
    checkpoint_kind = "two-passes"
    checkpoint_variables = ()

    def __init__(self, values, fail_second=False):
        self.values, self.fail_second = values, fail_second

    def open(self, run):
        return []

    def fingerprint(self):
        return {"job": "two-passes", "n": int(self.values.size)}

    def compute(self, ctx):
        squares = ctx.run_pass(SquaresPass(self.values))
        if self.fail_second:
            raise Interrupted
        centred = ctx.run_pass(SquaresPass(self.values - self.values.mean()))
        return xr.Dataset({"squares": squares, "centred": centred})


def test_a_committed_pass_is_not_run_again_on_resume(tmp_path, client):
    values = np.random.default_rng(4).standard_normal(1_000)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.zarr"
    SquaresPass.runs = 0
    with pytest.raises(Interrupted):
        Run(out, checkpoint=ckpt, client=client).execute(TwoPassJob(values, fail_second=True))
    assert SquaresPass.runs == 1 and sorted(p.name for p in ckpt.glob("step-*.npz")) == \
        ["step-000-squares.npz"]
    run = Run(out, checkpoint=ckpt, resume=True, client=client)
    ds = run.execute(TwoPassJob(values))
    assert SquaresPass.runs == 2  # the second pass only: the first came from the checkpoint
    assert run.passes == 2 and ds.attrs["passes"] == 2
    np.testing.assert_allclose(float(ds.squares), np.dot(values, values), rtol=1e-12)
    np.testing.assert_allclose(float(ds.centred), values.size * values.var(), rtol=1e-12)
    assert not ckpt.exists()  # removed once published


def test_a_pass_state_must_be_numbers(tmp_path, client):
    class Words(Pass):
        name = "words"

        def compute(self, ctx):
            return {"text": np.array(["a", "b"])}

    class WordsJob(TwoPassJob):
        def compute(self, ctx):
            return xr.Dataset({"n": len(ctx.run_pass(Words())["text"])})

    with pytest.raises(TypeError, match="only numbers"):
        Run(tmp_path / "o.zarr", checkpoint=tmp_path / "c", client=client).execute(
            WordsJob(np.zeros(3)))
    # without a checkpoint nothing is committed: any value will do
    assert Run(client=client).run_pass(Words())["text"].tolist() == ["a", "b"]


def test_a_robust_fit_resumed_after_its_pass_does_not_repeat_it(tmp_path, client, monkeypatch):
    """A fit with a robust covariance killed after its pass was committed: the resumed run
    takes the meat from the checkpoint and ends with the uninterrupted run's result."""
    from streamlsq import fit_stream, simulate_stream
    from streamlsq.stream import robust

    data = simulate_stream(tmp_path / "data.zarr", 4_000, 4, seed=2, chunk_rows=500,
                           client=client)
    fresh = fit_stream(data, "kf4lls", block_size=500, cov_type="HC3", client=client)
    computed, failing = [], [True]
    compute, value = robust.RobustPass.compute, robust.RobustPass.value

    def counting(self, ctx):
        computed.append(self.cov_type)
        return compute(self, ctx)

    def killed_once(self, state):
        if failing.pop() if failing else False:
            raise Interrupted  # after the step was committed, before the result exists
        return value(self, state)

    monkeypatch.setattr(robust.RobustPass, "compute", counting)
    monkeypatch.setattr(robust.RobustPass, "value", killed_once)
    ckpt, out = tmp_path / "ckpt", tmp_path / "fit.zarr"
    kw = dict(block_size=500, cov_type="HC3", client=client, checkpoint=ckpt, out=out)
    with pytest.raises(Interrupted):
        fit_stream(data, "kf4lls", **kw)
    assert computed == ["HC3"] and list(ckpt.glob("step-*robust-HC3.npz"))
    resumed = fit_stream(data, "kf4lls", resume=True, **kw)
    assert computed == ["HC3"]  # the pass was not run again
    assert resumed.attrs["passes"] == 1 and resumed.attrs["cov_type"] == "HC3"
    for name in ("coef", "bse", "cov_params", "pvalues"):
        np.testing.assert_allclose(resumed[name].values, fresh[name].values, rtol=1e-12)
