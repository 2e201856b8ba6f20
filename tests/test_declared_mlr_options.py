"""The multi-task, simulation and study options declared once (streamlsq.options.mlr,
.simulate, .study): the public functions' keywords are the declarations, every declared
option of their commands refuses a bad value in one line with exit code 2 before any Dask
client exists, and the Python functions refuse a bad option before opening their input."""

from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner

import streamlsq
import streamlsq.mlr.predict
from streamlsq.cli.main import main
from streamlsq.cli.options import DeclaredOption
from streamlsq.errors import InputError
from streamlsq.options.common import STORE
from streamlsq.options.fit import PREDICT_STREAM
from streamlsq.options.mlr import EM, METALEARN, POOLED, PREDICT
from streamlsq.options.run import RUN
from streamlsq.options.simulate import INTERLEAVED, IRMA, MLR, STREAM
from streamlsq.options.study import DEMO, EXAMPLE, STUDY, STUDY_OPTIONS

# the inputs and the run's own keywords: not options of the job
_INPUTS = {"data", "model", "model_or_fit", "tasks", "out", "name"}
_RUN = set(RUN.without("overwrite").names) | {"echo"}


def _functions():
    from streamlsq.mlr.examples import example_tasks
    from streamlsq.studies import STUDIES
    from streamlsq.studies.demo import run_demo

    yield "metalearn", streamlsq.metalearn, METALEARN
    yield "fit_pooled", streamlsq.fit_pooled, POOLED
    yield "fit_em", streamlsq.fit_em, EM
    yield "predict", streamlsq.mlr.predict.predict, PREDICT
    yield "predict (any result)", streamlsq.predict, PREDICT + PREDICT_STREAM
    yield "simulate_stream", streamlsq.simulate_stream, STREAM + STORE
    yield "simulate_interleaved", streamlsq.simulate_interleaved, INTERLEAVED + STORE
    yield "simulate_irma", streamlsq.simulate_irma, IRMA + STORE
    yield "simulate_mlr", streamlsq.simulate_mlr, MLR + STORE
    yield "run_demo", run_demo, DEMO.without("out")
    yield "example_tasks", example_tasks, EXAMPLE
    for name, spec in STUDIES.items():
        yield f"run_{name}", spec.load(), STUDY + STUDY_OPTIONS[name]


@pytest.mark.parametrize(("fn", "declared"), [(f, d) for _, f, d in _functions()],
                         ids=[name for name, _, _ in _functions()])
def test_the_keywords_of_a_public_function_are_its_declaration(fn, declared):
    others = (_INPUTS | _RUN) - set(declared.names)  # the demo's "tasks" is an option
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind is not p.VAR_KEYWORD and p.name not in others]
    assert [p.name for p in params] == list(declared.names)
    for p in params:
        default = declared.param(p.name).default
        if p.default is p.empty:  # a keyword the caller must give (fit_em's k)
            assert default is None and not declared.param(p.name).optional, p.name
        else:
            assert p.default == default and type(p.default) is type(default), p.name


def test_the_demo_declares_its_folder_with_the_function_default():
    from streamlsq.studies.demo import run_demo

    assert inspect.signature(run_demo).parameters["out"].default == DEMO.param("out").default


def test_choices_declared_light_are_the_ones_of_the_heavy_modules():
    from streamlsq.io import codecs
    from streamlsq.kernels.synthetic.mlr import FEATURES
    from streamlsq.mlr.examples import EXAMPLES
    from streamlsq.options.simulate import FEATURE_KINDS
    from streamlsq.options.study import EXAMPLE_NAMES
    from streamlsq.studies import STUDIES

    assert FEATURE_KINDS == FEATURES
    assert EXAMPLE_NAMES == tuple(EXAMPLES)
    assert set(STUDY_OPTIONS) == set(STUDIES)
    for name in codecs.CODECS:  # every declared codec is one the writer knows
        codecs.compressors(name)


# -- the commands -------------------------------------------------------------------
def _command(path):
    command = main
    for name in path:
        command = command.commands[name] if name in command.commands else \
            command.get_command(click.Context(command), name)
    return command


#: each command, the arguments it needs besides the option under test
_COMMANDS = {
    ("metalearn",): ["tasks.zarr", "--out", "model.zarr"],
    ("fit", "em"): ["tasks.zarr", "--out", "em.zarr"],
    ("predict",): ["model.zarr", "tasks.zarr", "--out", "pred.zarr"],
    ("simulate", "stream"): ["--out", "s.zarr"],
    ("simulate", "interleaved"): ["--out", "s.zarr"],
    ("simulate", "irma"): ["--out", "s.zarr"],
    ("simulate", "mlr"): ["--out", "s.zarr"],
    ("study",): None,  # the study that takes the option
    ("demo",): [],
    ("example",): ["exam", "--out", "exam.zarr"],
}
#: the multi-task predict's options (the stream fit's are another engineer's declarations)
_PREDICT = set(PREDICT.names)


def _bad_value(p) -> str | None:
    """A value the declaration refuses, as text; None when no text is refused (a switch,
    a free string)."""
    if p.type is bool or p.nargs > 1:
        return None
    if p.parse is not None:
        return "x;y"
    if p.choices is not None and p.type is str:
        return "bogus-choice"
    if p.type is int:
        return "-7.5"
    if p.type is float:
        return "-inf"
    return None


def _cases():
    for path, args in _COMMANDS.items():
        for param in _command(path).params:
            if not isinstance(param, DeclaredOption):
                continue
            p = param.declaration
            if path == ("predict",) and p.name not in _PREDICT:
                continue
            bad = _bad_value(p)
            if bad is None:
                continue
            if args is None:
                from streamlsq.studies import STUDIES

                takes = [n for n, spec in STUDIES.items() if p.name in spec.options]
                given = [takes[0] if takes else "lms", "--out", "study-out"]
            else:
                given = list(args)
            yield pytest.param(path, given, p.option, bad, id=f"{' '.join(path)} {p.option}")


@pytest.fixture
def no_client(monkeypatch):
    """Any attempt to start or join a Dask cluster fails the test."""
    import distributed

    import streamlsq.runtime.client as runtime_client

    def refuse(*args, **kwargs):
        raise AssertionError("a Dask client was started before the options were checked")

    monkeypatch.setattr(runtime_client, "dask_client", refuse)
    monkeypatch.setattr(distributed.Client, "__init__", refuse)


@pytest.mark.parametrize(("path", "args", "option", "bad"), list(_cases()))
def test_a_bad_value_is_refused_in_one_line_before_any_client(path, args, option, bad,
                                                              tmp_path, monkeypatch,
                                                              no_client):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*path, *args, option, bad])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.stderr
    assert option in lines[0] and bad in lines[0], lines[0]
    assert "a Dask client was started" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_every_command_of_this_family_generates_its_options():
    for path in _COMMANDS:
        declared = [p for p in _command(path).params if isinstance(p, DeclaredOption)]
        names = {p.declaration.name for p in declared}
        if path != ("example",):  # the conversion runs in this process: no cluster
            assert {"scheduler", "n_workers"} <= names, path
        assert len(declared) == len({p.opts[0] for p in declared}), path


# -- the Python functions -------------------------------------------------------------
@pytest.mark.parametrize(("call", "message"), [
    (lambda: streamlsq.metalearn("missing.zarr", 2, linkage="ward"),
     "linkage must be one of 'auto', 'single', 'average', got 'ward'"),
    (lambda: streamlsq.metalearn("missing.zarr", rank=2, threshold=float("nan")),
     "threshold must be a finite number >= 0 or None, got nan"),
    (lambda: streamlsq.metalearn("missing.zarr", "auto", threshold=1.0),
     "--k (k=) does not go with --threshold (threshold=): the cut finds the clusters; give "
     "the subspace's rank as --rank R (rank=R)"),
    (lambda: streamlsq.metalearn("missing.zarr", 3, k_max=5),
     "--k-max (k_max=) goes with --k auto"),
    (lambda: streamlsq.metalearn("missing.zarr", 2, tile=1), "tile must be an integer >= 2"),
    (lambda: streamlsq.fit_pooled("missing.zarr", holdout=-1),
     "holdout must be an integer >= 0, got -1"),
    (lambda: streamlsq.fit_em("missing.zarr", 2, init="kmeans"),
     "init must be one of 'truth', 'perturbed', 'random', got 'kmeans'"),
    (lambda: streamlsq.fit_em("missing.zarr", 2, tol=-1.0), "tol must be a finite number >= 0"),
    (lambda: streamlsq.predict("model.zarr", "missing.zarr", estimator="mean"),
     "estimator must be one of 'bayes', 'map', 'lstsq', got 'mean'"),
])
def test_python_refuses_a_bad_option_before_opening_any_input(call, message, tmp_path,
                                                              monkeypatch, no_client):
    monkeypatch.chdir(tmp_path)  # the inputs do not exist: opening them would say so
    with pytest.raises(InputError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("call", "message"), [
    (lambda out: streamlsq.simulate_stream(out, n_rows=0), "n_rows must be a positive integer"),
    (lambda out: streamlsq.simulate_stream(out, dtype="int8"),
     "dtype must be 'float64' or 'float32', got 'int8'"),
    (lambda out: streamlsq.simulate_irma(out, block_size=0), "block_size must be a positive"),
    (lambda out: streamlsq.simulate_interleaved(out, alpha=1.0), "alpha must be in (0, 1)"),
    (lambda out: streamlsq.simulate_mlr(out, n_heavy=-1), "n_heavy must be an integer >= 0"),
    (lambda out: streamlsq.simulate_mlr(out, features="fourier"),
     "features must be one of 'gaussian', 'polynomial', 'chebyshev', got 'fourier'"),
])
def test_simulators_refuse_a_bad_option_before_writing_or_starting_a_client(
        call, message, tmp_path, no_client):
    with pytest.raises(InputError) as info:
        call(tmp_path / "s.zarr")
    assert message in str(info.value)
    assert list(tmp_path.iterdir()) == []
