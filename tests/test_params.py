"""Param: a declaration that checks a value, converts it, and words every refusal alike."""

from __future__ import annotations

import numpy as np
import pytest

from streamlsq.kernels.recursions.basis import Basis, LegendreBasis
from streamlsq.kernels.recursions.params import Param, must_be


def _refusal(param: Param, value) -> str:
    with pytest.raises(ValueError) as info:
        param.check(value)
    return str(info.value)


@pytest.mark.parametrize(("param", "requirement"), [
    (Param("g", 1.0, "h", gt=0, le=1), "in (0, 1]"),
    (Param("a", 0.5, "h", ge=0, le=1), "in [0, 1]"),
    (Param("r", 0.0, "h", ge=0), "a finite number >= 0"),
    (Param("r", 1.0, "h", gt=0), "a finite number > 0"),
    (Param("r", 1.0, "h", gt=0.5), "a finite number > 0.5"),
    (Param("r", 1.0, "h", le=2), "a finite number <= 2"),
    (Param("r", 1.0, "h"), "a finite number"),
    (Param("n", 1, "h", type=int, gt=0), "a positive integer"),
    (Param("n", 1, "h", type=int, ge=1), "an integer >= 1"),
    (Param("n", 0, "h", type=int, ge=0), "an integer >= 0"),
    (Param("n", 2, "h", type=int, ge=1, le=9), "an integer in [1, 9]"),
    (Param("n", None, "h", type=int, gt=0, optional=True), "a positive integer or None"),
    (Param("p", None, "h", gt=0.5, le=1, optional=True), "in (0.5, 1] or None"),
    (Param("b", False, "h", type=bool), "True or False"),
    (Param("s", "a", "h", type=str, choices=("a", "b")), "'a' or 'b'"),
    (Param("s", "a", "h", type=str, choices=("a", "b", "c")), "one of 'a', 'b', 'c'"),
    (Param("s", "x", "h", type=str), "a string"),
    (Param("rate", "exact", "h", choices=("exact",), gt=0), "'exact' or a finite number > 0"),
    (Param("basis", "legendre", "h", type=Basis, choices=("legendre", "monomial")),
     "'legendre', 'monomial' or a Basis"),
    (Param("domain", None, "h", nargs=2, multiple=True, optional=True),
     "a pair of finite numbers, one pair per input dimension or None"),
    (Param("mu", 0.05, "h", ge=0, requirement=">= 0"), ">= 0"),
])
def test_the_requirement_is_phrased_from_the_declaration(param, requirement):
    assert param.requirement_text == requirement
    bad = object()
    assert _refusal(param, bad) == f"{param.name} must be {requirement}, got {bad!r}"


def test_a_label_names_the_parameter_in_the_refusal():
    forgetting = Param("forgetting", 1.0, "h", gt=0, le=1, label="forgetting factor")
    assert _refusal(forgetting, 0.0) == "forgetting factor must be in (0, 1], got 0.0"
    assert str(forgetting.error(2.0, "1 here")) == "forgetting factor must be 1 here, got 2.0"
    assert str(must_be("x", "y", "z")) == "x must be y, got 'z'"


def test_numbers_are_converted_and_bounds_are_open_or_closed():
    count = Param("n", 1, "h", type=int, gt=0)
    for value in (3, 3.0, np.int64(3), np.float32(3.0), np.array(3)):
        assert count.check(value) == 3 and type(count.check(value)) is int
    for value in (0, -1, 2.5, "3", True, np.bool_(True), None, [3], np.array([3]), np.nan):
        assert _refusal(count, value).startswith("n must be a positive integer, got ")
    unit = Param("g", 1.0, "h", gt=0, le=1)
    assert unit.check(1) == 1.0 and type(unit.check(1)) is float
    assert unit.check(np.float32(0.5)) == 0.5
    for value in (0.0, 1.0000001, np.inf, -np.inf, np.nan, False, "0.5"):
        _refusal(unit, value)
    low = Param("r", 0.0, "h", ge=0)
    assert low.check(0) == 0.0
    for value in (np.inf, np.nan, -1e-300):  # a finite number is asked for
        _refusal(low, value)


def test_choices_strings_and_instances():
    rate = Param("rate", "exact", "h", choices=("exact",), gt=0)
    assert rate.check("exact") == "exact" and rate.check(2) == 2.0
    for value in ("fast", -1.0, 0.0, True):
        assert _refusal(rate, value).startswith("rate must be 'exact' or a finite number > 0")
    kind = Param("basis", "legendre", "h", type=Basis, choices=("legendre", "monomial"))
    basis = LegendreBasis(2, (0.0, 1.0))
    assert kind.check(basis) is basis and kind.check("monomial") == "monomial"
    _refusal(kind, "fourier")
    flag = Param("b", False, "h", type=bool)
    assert flag.check(np.bool_(True)) is True
    for value in (1, 0, "True", None):
        _refusal(flag, value)
    anything = Param("random_state", None, "h", type=object, optional=True)
    state = np.random.RandomState(0)
    assert anything.check(state) is state and anything.check(None) is None


def test_a_value_of_several_numbers():
    domain = Param("domain", None, "h", nargs=2, multiple=True, optional=True)
    assert domain.check((0, 3)) == (0.0, 3.0)
    assert domain.check([[0, 1], [-1, 2]]) == ((0.0, 1.0), (-1.0, 2.0))
    assert domain.check(np.array([[0.5, 1.5]])) == ((0.5, 1.5),)
    assert domain.check(None) is None
    for value in ("ab", (0, 1, 2), (0, np.inf), [[0, 1], [2]], (True, 1.0), ()):
        _refusal(domain, value)
    single = Param("span", (0.0, 1.0), "h", nargs=2)
    _refusal(single, [[0, 1]])  # one pair only


def test_command_line_text_is_converted_by_the_declaration():
    rate = Param("rate", "exact", "h", choices=("exact",), gt=0)
    assert rate.from_command_line("exact") == "exact"
    assert rate.from_command_line("0.25") == 0.25
    with pytest.raises(ValueError, match=r"^rate must be 'exact' or a finite number > 0, got"):
        rate.from_command_line("fast")
    count = Param("n", 1, "h", type=int, gt=0)
    assert count.from_command_line("7") == 7
    repeated = Param("xs", None, "h", nargs=2, multiple=True, optional=True)
    assert repeated.from_command_line(()) is None
    assert repeated.from_command_line(((0.0, 1.0),)) == ((0.0, 1.0),)
    parsed = repeated.replace(parse=lambda v: ("parsed", v))
    assert parsed.from_command_line(((0.0, 1.0),)) == ("parsed", ((0.0, 1.0),))
    assert parsed.name == "xs" and repeated.parse is None
