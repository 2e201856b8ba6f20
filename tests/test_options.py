"""Options declared once (streamlsq.options): the check of values and rules, and the command
line's options generated from the same declarations."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given as hypothesis_given
from hypothesis import strategies as st

from streamlsq.cli.options import click_options, values
from streamlsq.errors import InputError
from streamlsq.options import Options, Param, Rule
from streamlsq.options.run import RUN

OPTS = Options(
    Param("engine", "sequential", "Engine.", type=str, choices=("sequential", "scan")),
    Param("block_size", None, "Rows per step.", type=int, gt=0, optional=True),
    Param("segment_bytes", None, "Bytes per task.", type=int, gt=0, optional=True,
          flag="--segment-size", unit="MB", scale=2**20),
    Param("cov_type", None, "Covariance.", type=str, optional=True,
          choices=("nonrobust", "HC1", "cluster")),
    Param("groups", None, "Group labels.", type=str, optional=True),
    Param("fit_intercept", None, "Intercept.", type=bool, optional=True,
          flag="--intercept/--no-intercept"),
    Param("shuffle", False, "Shuffle.", type=bool),
    rules=[Rule("cov_type", "cluster", needs={"groups": Rule.GIVEN}),
           Rule("groups", needs={"cov_type": "cluster"})],
)


def test_values_are_converted_and_defaults_filled():
    assert OPTS.check({"block_size": 10.0}) == {
        "engine": "sequential", "block_size": 10, "segment_bytes": None, "cov_type": None,
        "groups": None, "fit_intercept": None, "shuffle": False}


@pytest.mark.parametrize(("values_", "message"), [
    ({"engine": "fast"}, "engine must be 'sequential' or 'scan', got 'fast'"),
    ({"block_size": 0}, "block_size must be a positive integer or None, got 0"),
    ({"block_size": 1.5}, "block_size must be a positive integer or None, got 1.5"),
    ({"block_size": True}, "block_size must be a positive integer or None, got True"),
    ({"cov_type": "cluster"}, "--cov-type cluster needs --groups"),
    ({"groups": "g"}, "--groups goes with --cov-type cluster"),
    ({"groups": "g", "cov_type": "HC1"}, "--groups goes with --cov-type cluster"),
    ({"bogus": 1}, "unknown option 'bogus'"),
])
def test_bad_values_and_combinations_are_refused_in_one_line(values_, message):
    with pytest.raises(InputError) as info:
        OPTS.check(values_)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_rule_must_name_declared_options():
    with pytest.raises(ValueError, match="not declared"):
        Options(Param("a", None, "A.", optional=True), rules=[Rule("a", needs={"b": 1})])


def test_run_options_refuse_resume_without_checkpoint():
    with pytest.raises(InputError, match="--resume needs --checkpoint DIR"):
        RUN.check({"resume": True})
    assert RUN.check({"resume": True, "checkpoint": "ckpt"})["resume"] is True


def _command():
    seen = {}

    @click.command()
    @click_options(OPTS)
    def command(**given):
        seen.update(values(OPTS, given))

    return command, seen


def test_the_command_line_takes_each_declaration_once_with_its_help():
    command, _ = _command()
    text = CliRunner().invoke(command, ["--help"]).output
    for flag in ("--engine", "--block-size", "--segment-size", "--cov-type", "--groups",
                 "--intercept / --no-intercept", "--shuffle"):
        assert text.count(flag) == 1, flag
    assert "[sequential|scan]" in text and "Rows per step." in text


def test_the_command_line_converts_units_and_leaves_out_what_was_not_given():
    command, seen = _command()
    result = CliRunner().invoke(command, ["--segment-size", "0.5", "--block-size", "7",
                                          "--no-intercept"])
    assert result.exit_code == 0, result.output
    assert seen == {"segment_bytes": 2**19, "block_size": 7, "fit_intercept": False}


@pytest.mark.parametrize(("argv", "message"), [
    (["--engine", "fast"], "--engine must be 'sequential' or 'scan', got 'fast'"),
    (["--block-size", "x"], "--block-size must be a positive integer, got 'x'"),
    (["--segment-size", "nan"], "--segment-size must be a number of MB, got 'nan'"),
    (["--cov-type", "cluster"], "--cov-type cluster needs --groups"),
])
def test_the_command_line_refuses_with_the_declarations_message(argv, message):
    command, _ = _command()
    result = CliRunner().invoke(command, argv)
    assert isinstance(result.exception, InputError)
    assert message in str(result.exception)


@hypothesis_given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5),
                            st.none(), st.booleans()))
def test_an_integer_option_is_a_positive_integer_or_refused(value):
    try:
        checked = OPTS.check({"block_size": value})["block_size"]
    except InputError:
        return
    assert checked is None or (type(checked) is int and checked > 0)


RATES = Param("rates", None, "Step sizes.", type=float, gt=0, sequence=True, optional=True)


@pytest.mark.parametrize(("value", "expected"), [
    (0.5, (0.5,)), ([0.1, 2], (0.1, 2.0)), ((3,), (3.0,)), (None, None)])
def test_a_sequence_of_numbers_is_a_tuple_of_them(value, expected):
    assert RATES.check(value) == expected


@pytest.mark.parametrize("value", [[], [0.1, 0], [0.1, float("nan")], "0.1", [True], [[1]]])
def test_a_sequence_refuses_what_one_of_its_numbers_would(value):
    with pytest.raises(ValueError, match="rates must be"):
        RATES.check(value)


def test_a_sequence_on_the_command_line_is_separated_by_commas():
    assert RATES.check(RATES.from_command_line("0.001,0.01")) == (0.001, 0.01)
    with pytest.raises(ValueError, match="got 'a,b'"):
        RATES.check(RATES.from_command_line("a,b"))
