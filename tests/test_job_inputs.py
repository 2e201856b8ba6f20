"""Every job opens its inputs through its run (``Run.open_input``), which gives every opener
the run's ``storage_options``: no module of the jobs (``pipeline/stream``, ``pipeline/mlr``,
``conversion.py``, ``prediction.py``) calls or imports an opener of the io layer itself. The
openers stay public: the API and ``streamlsq info`` open stores without a run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import streamlsq
from streamlsq.jobs import Run

ROOT = Path(__file__).resolve().parents[1]

#: the openers of the io layer, which take ``storage_options``
OPENERS = ("open_stream", "open_tasks", "open_result", "open_table")

#: where a module of the jobs may still open a store itself: (file, function) → why
ALLOWED = {
    ("stream/statistics.py", "_open"): "summary() and wald_test() read a published result "
    "for the caller, outside any job and its run",
}


def direct_openings(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, opener) of every call or import of an opener in
    ``source``: ``open_stream(...)``, ``io.sources.open_stream(...)``, ``from … import
    open_stream``."""
    found = []

    def visit(node, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            if name in OPENERS:
                found.append((node.lineno, function, name))
        if isinstance(node, ast.ImportFrom):
            found.extend((node.lineno, function, a.name) for a in node.names
                         if a.name in OPENERS)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return found


def test_the_check_finds_an_opener_called_or_imported():
    source = ("from streamlsq.io.tasks import TaskSource, open_tasks as ot\n"
              "import streamlsq.io.results as r\n"
              "class J:\n"
              "    def open(self, run):\n"
              "        return [ot(self.data), r.open_result(self.model),\n"
              "                run.open_input('stream', self.rows)]\n")
    assert direct_openings(source) == [(1, "<module>", "open_tasks"),
                                       (5, "open", "open_result")]


def job_modules() -> list[Path]:
    pipeline = ROOT / "pipeline"
    return sorted([*(p for sub in ("stream", "mlr") for p in (pipeline / sub).glob("*.py")),
                   pipeline / "conversion.py", pipeline / "prediction.py"])


def test_no_job_module_opens_an_input_without_its_run():
    assert len(job_modules()) > 10  # the source tree was found
    offences = []
    for path in job_modules():
        name = path.relative_to(ROOT / "pipeline").as_posix()
        for line, function, opener in direct_openings(path.read_text()):
            if (name, function) not in ALLOWED:
                offences.append(f"pipeline/{name}:{line} ({function}) {opener}")
    assert offences == [], "open inputs with run.open_input(kind, ...): " + "; ".join(offences)


@pytest.mark.parametrize("kind, module, opener", [
    ("stream", "streamlsq.io.sources", "open_stream"),
    ("tasks", "streamlsq.io.tasks", "open_tasks"),
    ("result", "streamlsq.jobs", "open_result"),  # jobs.py imports it for published()
    ("table", "streamlsq.io.tables", "open_table"),
])
def test_the_run_hands_its_storage_options_to_each_opener(monkeypatch, kind, module, opener):
    import importlib

    calls = []
    monkeypatch.setattr(importlib.import_module(module), opener,
                        lambda *args, **kwargs: calls.append((args, kwargs)) or "opened")
    options = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://h:1"}}
    run = Run(storage_options=options)
    assert run.open_input(kind, "s3://b/in.zarr", "g", targets=False) == "opened"
    assert calls == [(("s3://b/in.zarr", "g"), {"storage_options": options, "targets": False})]


def test_the_openers_stay_public_and_info_opens_results_itself():
    for name in ("open_stream", "open_tasks", "open_result"):
        assert callable(getattr(streamlsq, name)) and name in streamlsq.__all__
    info = (ROOT / "pipeline" / "cli" / "info.py").read_text()
    assert {name for _, _, name in direct_openings(info)} == {"open_result"}


def test_an_unknown_kind_of_input_is_refused():
    with pytest.raises(ValueError, match="no input of kind 'zarr'"):
        Run().open_input("zarr", "data.zarr")
