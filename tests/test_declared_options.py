"""Every option declared once (streamlsq.options) is refused on the command line in one line,
before anything is read, written or started; the Python functions' keywords are the
declarations."""

from __future__ import annotations

import inspect

import click
import distributed
import pytest
from click.testing import CliRunner

import streamlsq.runtime.client
from streamlsq.cli import main
from streamlsq.cli.options import DeclaredOption
from streamlsq.errors import InputError
from streamlsq.options import Param
from streamlsq.options.fit import (
    ALPHA_GIVEN_OR_ESTIMATED,
    CONVERT,
    COV_TYPES,
    FIT,
    INTERLEAVED,
    JOB_OPTIONS,
    PREDICT_STREAM,
    ROBUST,
)

#: commands whose options are still written by hand (being declared at the same time);
#: the walk below covers them as soon as they declare theirs
NOT_YET_DECLARED: set[str] = set()
#: commands without an option that takes a checked value
NOTHING_TO_DECLARE = {"demo", "example", "info"}

#: the declared options that have no bad value: switches and free text (names of
#: variables, paths, formulas, addresses)
NO_BAD_VALUE = {
    # switches
    "--intercept", "--shuffle", "--resume", "--overwrite", "--intervals", "--diagnostics",
    "--balanced", "--normalized", "--quick", "--whiten", "--yhat", "--use-correction",
    "--expanding",
    # free text
    "--group", "--x", "--y", "--sample-dim", "--continue-from", "--weights", "--groups",
    "--formula", "--checkpoint", "--scheduler", "--memory-limit", "--test", "--columns",
    "--out", "--new-rows", "--time",
    # fit glm: a switch, and per-row variables named as free text
    "--allow-nonconverged", "--offset", "--exposure", "--freq-weights", "--trials",
}


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    """(path, command) of every command under ``command``, the lazily loaded ones among
    them (``fit`` lists the recursions)."""
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from _commands(command.get_command(ctx, name), (*path, name))
    else:
        yield path, command


COMMANDS = dict((" ".join(path), command) for path, command in _commands(main))


def _declared(command: click.Command) -> list[DeclaredOption]:
    return [p for p in command.params if isinstance(p, DeclaredOption)]


def _outside(p: Param, low: bool) -> float | None:
    """A number just outside the declared interval (below it, or above it), or None."""
    if low:
        bound = p.gt if p.gt is not None else p.ge
        return None if bound is None else (bound if p.gt is not None else bound - 1)
    bound = p.lt if p.lt is not None else p.le
    return None if bound is None else (bound if p.lt is not None else bound + 1)


def bad_value(p: Param) -> list[str] | None:
    """The command line's words of a value the declaration refuses: outside its range, not
    one of its choices, not a number; None when it has none (a switch, free text)."""
    if (p.nargs > 1 or p.multiple) and p.type in (int, float):  # numbers in groups
        return ["not-a-number"] * p.nargs
    if p.parse is not None and {"number", "sizes"} & set(p.requirement_text.split()):
        return ["not-a-number"]  # numbers as text: not one
    if p.type is bool or (p.type not in (int, float) and p.choices is None):
        return None
    if p.type not in (int, float):
        return ["not-a-choice"]
    number = _outside(p, low=True)
    number = _outside(p, low=False) if number is None else number
    if number is None:
        return ["not-a-number"]
    if p.unit is not None:
        number = number / p.scale - 1
    return [f"{number:g}" if p.type is float else str(int(number))]


def _cases():
    cases, skipped = [], set()
    for name, command in COMMANDS.items():
        for option in _declared(command):
            words = bad_value(option.declaration)
            if words is None:
                skipped.add(option.opts[0])
            else:
                cases.append(pytest.param(name, option.opts[0], words,
                                          id=f"{name} {option.opts[0]}"))
    return cases, skipped


CASES, SKIPPED = _cases()


def test_every_command_declares_its_options_but_those_listed():
    undeclared = {name for name, command in COMMANDS.items() if not _declared(command)}
    assert undeclared <= NOT_YET_DECLARED | NOTHING_TO_DECLARE
    assert (NOT_YET_DECLARED | NOTHING_TO_DECLARE) <= set(COMMANDS)


@pytest.mark.parametrize("name", [n for n in COMMANDS if n.startswith("fit ")
                                  and n not in NOT_YET_DECLARED])
def test_a_fit_command_has_no_option_written_by_hand(name):
    by_hand = [p.opts[0] for p in COMMANDS[name].params if isinstance(p, click.Option)
               and not isinstance(p, DeclaredOption)]
    assert by_hand == ["--out"]


def test_the_options_without_a_bad_value_are_switches_and_free_text():
    assert SKIPPED == NO_BAD_VALUE


@pytest.fixture
def no_cluster(monkeypatch):
    """Fail the test if a Dask client is asked for or made."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append((args, kwargs))
        raise AssertionError("a Dask client was started for a bad option")

    monkeypatch.setattr(streamlsq.runtime.client, "dask_client", refuse)
    monkeypatch.setattr(distributed.Client, "__init__", refuse)
    return calls


@pytest.mark.parametrize(("name", "flag", "words"), CASES)
def test_a_bad_value_is_refused_in_one_line_before_anything_starts(
        tmp_path, no_cluster, name, flag, words):
    command = COMMANDS[name]
    argv = name.split()
    argv += [str(tmp_path / f"missing-{p.name}.zarr") for p in command.params
             if isinstance(p, click.Argument)]
    if any(p.name == "out" for p in command.params):
        argv += ["--out", str(tmp_path / "out.zarr")]
    result = CliRunner().invoke(main, [*argv, flag, *words])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (result.output, result.exception)
    assert len(lines) == 1, result.stderr
    assert flag in lines[0] and words[0] in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []
    assert no_cluster == []


def test_the_generated_bad_values_are_bad():
    # an independent look at a few: the declaration itself refuses what the walk sends
    for declaration, words in ((FIT.param("epochs"), ["0"]),
                               (FIT.param("engine"), ["not-a-choice"]),
                               (FIT.param("segment_bytes"), ["-1"]),
                               (FIT.param("alpha"), ["0"]),
                               (INTERLEAVED.param("alpha"), ["-1"])):
        assert bad_value(declaration) == words
        with pytest.raises(ValueError):
            declaration.check(declaration.from_command_line(words[0]))


def _keywords(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "out"}


def _fit_interleaved_options():
    from streamlsq.stream.interleaved import InterleavedFit

    return InterleavedFit.options


@pytest.mark.parametrize(("function", "declared"), [
    ("streamlsq.stream.fit:fit_stream", lambda: FIT),
    ("streamlsq.stream.apply:predict_stream", lambda: PREDICT_STREAM),
    ("streamlsq.stream.robust:robust_covariance", lambda: ROBUST),
    ("streamlsq.conversion:convert", lambda: CONVERT),
    ("streamlsq.stream.interleaved:fit_interleaved", _fit_interleaved_options),
], ids=lambda v: v.split(":")[-1] if isinstance(v, str) else "")
def test_the_functions_keywords_are_the_declarations(function, declared):
    import importlib

    module, name = function.split(":")
    keywords = _keywords(getattr(importlib.import_module(module), name))
    assert keywords == {p.name: p.default for p in declared()}


def test_interleaved_takes_the_recursions_parameters_and_its_own_alpha():
    from streamlsq.kernels.recursions.interleaved import InterleavedKF4LLS

    options = _fit_interleaved_options()
    for p in InterleavedKF4LLS.params:
        assert p.name in options
    assert options.param("alpha") == INTERLEAVED.param("alpha")
    assert set(JOB_OPTIONS["interleaved-kf4lls"].names) <= set(options.names)


def test_the_statistics_alpha_and_interleaveds_mixing_weight_are_told_apart():
    from streamlsq.stream.fit import StreamFit
    from streamlsq.stream.interleaved import InterleavedFit

    fit = StreamFit.build("d.zarr", "kf4lls", {"alpha": 0.1, "ridge": 1.0, "epochs": 2})
    assert (fit.alpha, fit.params, fit.epochs) == (0.1, {"ridge": 1.0}, 2)
    mixed = InterleavedFit.build(["a", "b"], "interleaved-kf4lls",
                                 {"alpha": 0.3, "test": "c", "engine": "scan"})
    assert (mixed.alpha, mixed.params, mixed.test, mixed.engine) == (
        None, {"alpha": 0.3}, "c", "scan")
    mixed.check_options()  # the mixing weight is checked as one: 0 is allowed
    InterleavedFit.build(["a", "b"], "interleaved-kf4lls", {"alpha": 0.0}).check_options()
    with pytest.raises(InputError, match=r"^alpha must be in \[0, 1\] or None, got 1.5$"):
        InterleavedFit.build(["a", "b"], "interleaved-kf4lls", {"alpha": 1.5}).check_options()
    with pytest.raises(InputError, match=r"^alpha must be in \(0, 1\) or None, got 0.0$"):
        StreamFit.build("d.zarr", "kf4lls", {"alpha": 0.0}).check_options()


@pytest.mark.parametrize(("options", "message"), [
    ({"engine": "fast"}, "engine must be 'sequential' or 'scan', got 'fast'"),
    ({"dtype": "float16"}, "dtype must be 'float64' or 'float32', got 'float16'"),
    ({"epochs": 0}, "epochs must be a positive integer, got 0"),
    ({"fit_intercept": "yes"}, "fit_intercept must be True, False or None, got 'yes'"),
    ({"formula": "y ~ a", "x": "a"}, "--formula names the features and the targets: leave "
                                     "out --x"),
    ({"solver": "svd"}, "kf4lls: solver must be 'qr' or 'normal', got 'svd'"),
    ({"forgetting": 1.5, "method": "rls"}, "rls: forgetting factor must be in (0, 1], got 1.5"),
    ({"rate": -1.0, "method": "lms"}, "lms: rate must be"),
])
def test_fit_stream_refuses_a_bad_option_before_it_opens_the_store(tmp_path, options,
                                                                   message):
    from streamlsq.stream.fit import fit_stream

    # the store does not exist: the refusal is the option's, not the store's
    options = dict(options)
    with pytest.raises(InputError) as info:
        fit_stream(tmp_path / "missing.zarr", options.pop("method", "kf4lls"), **options)
    assert message in str(info.value)


def test_the_covariance_types_are_those_of_the_statistics():
    from streamlsq.kernels import inference

    assert inference.COV_TYPES == COV_TYPES
    assert ROBUST.param("cov_type").choices == COV_TYPES[1:]


@pytest.mark.parametrize("argv", [[], ["--alpha", "0.3", "--estimate-alpha", "means"]],
                         ids=["neither", "both"])
def test_interleaved_takes_alpha_or_its_estimate_before_anything_starts(tmp_path, no_cluster,
                                                                        argv):
    stores = [str(tmp_path / f"{role}.zarr") for role in "ab"]
    result = CliRunner().invoke(main, ["fit", "interleaved", *stores, "--out",
                                       str(tmp_path / "out.zarr"), "--test", "c.zarr", *argv])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"streamlsq: error: {ALPHA_GIVEN_OR_ESTIMATED}"]
    assert list(tmp_path.iterdir()) == [] and no_cluster == []
