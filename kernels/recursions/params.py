"""What a user may set on a recursion: :class:`Param`, a declaration that also checks.

A :class:`Param` names a parameter, its default and its meaning, and states what a
value must be: its type, an interval (``gt``/``ge``/``lt``/``le``: a bound that is open
or closed), choices, whether ``None`` is allowed. :meth:`Param.check` refuses any
other value with one message format,

    {name} must be {requirement}, got {value!r}

the requirement phrased from the declaration ("in (0, 1]", "a finite number >= 0",
"a finite number > 0", "a positive integer", "an integer >= 1", "'qr' or 'normal'",
"True or False", …), and returns the value
converted (an ``int`` for ``type=int``, a ``float`` for ``type=float``). Booleans are
never numbers, and NaN and ±inf are refused wherever a number is asked for. A rule
between parameters words its refusal in the same format with :func:`must_be`.

The same declarations drive the command line (:meth:`Param.from_command_line`), the
scikit-learn estimators and the result attributes; see
:mod:`streamlsq.kernels.recursions.contract`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FORGETTING", "Param", "must_be"]


def must_be(name: str, requirement: str, value) -> ValueError:
    """The refusal of ``value`` for ``name``, in the one format of every parameter check.

    Examples
    --------
    >>> from streamlsq.kernels.recursions.params import must_be
    >>> str(must_be("diagnostics", "False unless solver='qr'", True))
    "diagnostics must be False unless solver='qr', got True"
    """
    return ValueError(f"{name} must be {requirement}, got {_shown(value)}")


def _shown(value) -> str:
    """``value``'s repr, or its type and shape where the repr spans lines or runs long (an
    array or a pandas Series given for a variable's name): the refusal stays one line."""
    text = repr(value)
    if "\n" not in text and len(text) <= 120:
        return text
    kind = type(value)
    shape = getattr(value, "shape", None)
    return (f"a {kind.__module__.split('.')[0]} {kind.__name__}"
            + (f" of shape {tuple(shape)}" if shape is not None else ""))


def _number(value) -> float | None:
    """``value`` as a Python float when it is one real number (not a bool), else None."""
    import numpy as np  # here: the command line's help is shown without numpy

    if isinstance(value, bool | np.bool_ | str | bytes):
        return None
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot take is not a number
        return None
    if array.ndim != 0 or array.dtype.kind not in "iuf":
        return None
    return float(array)


def _text_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _bound(value: float) -> str:
    return f"{value:g}"


def _alternatives(words: list[str]) -> str:
    """'x', 'x or y', 'x, y or z'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


@dataclass(frozen=True)
class Param:
    """One parameter a user may set on a recursion: its default, meaning and constraints.

    ``type`` is the Python type of a value (``float``, ``int``, ``str``, ``bool``, or a
    class whose instances are taken as they are); ``choices`` lists the strings a value
    may be (alone, or besides the values of ``type``: BFGS' ``rate`` is ``"exact"`` or a
    positive number); ``gt``, ``ge``, ``lt``, ``le`` bound a number (greater than, at
    least, less than, at most); ``optional`` allows ``None`` (a parameter that only some
    settings need, e.g. LMS' ``tau``). ``label`` is how a message names the parameter
    (default its name, e.g. "forgetting factor"), ``requirement`` words what a value
    must be when the phrase built from the declaration is not the one wanted.

    ``nargs`` and ``multiple`` describe a value made of several numbers (IRMA's
    ``domain``: one interval of two numbers per input dimension); ``parse`` turns the
    command line's value into the parameter's when the type cannot (IRMA's domain from
    ``--domain A B`` given once per dimension); ``metavar`` names the value in the
    command's help; ``store_attr`` names an attribute of the input store that supplies
    the default when the user gives none.

    The command line's option is ``--name`` (underscores as dashes) unless ``flag`` names
    it (``"--segment-size"``; for a boolean, ``"--intercept/--no-intercept"``: a pair of
    switches whose "not given" is None); ``unit`` and ``scale`` say that the command line
    takes the value in another unit (``--segment-size`` in ``"MB"``, ``scale=2**20`` bytes
    each); ``hidden`` keeps an option out of ``--help``; ``command_line=False`` keeps a
    parameter off the command line (a Python object, such as a client). ``canonical``
    turns the other spellings of a value into the one declared before it is checked
    (``np.float32`` and ``"f4"`` into ``"float32"``). ``sequence`` declares a value of one
    or more numbers, each of ``type`` and within the interval (a tuple; on the command line,
    separated by commas: ``--rates 0.001,0.01``).

    Examples
    --------
    >>> from streamlsq.kernels.recursions.params import Param
    >>> forgetting = Param("forgetting", 1.0, "Forgetting factor g.", gt=0, le=1,
    ...                    label="forgetting factor")
    >>> forgetting.check(1)
    1.0
    >>> forgetting.check(1.5)
    Traceback (most recent call last):
    ...
    ValueError: forgetting factor must be in (0, 1], got 1.5
    >>> Param("block_size", None, "Rows per step.", type=int, gt=0, optional=True).requirement_text
    'a positive integer or None'
    """

    name: str
    default: Any
    help: str
    type: type = float
    choices: tuple | None = None
    optional: bool = False
    nargs: int = 1
    multiple: bool = False
    parse: Callable[[Any], Any] | None = None
    metavar: str | None = None
    store_attr: str | None = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    label: str | None = None
    requirement: str | None = None
    flag: str | None = None
    unit: str | None = None
    scale: float = 1
    hidden: bool = False
    command_line: bool = True
    canonical: Callable[[Any], Any] | None = None
    sequence: bool = False

    def replace(self, **changes) -> Param:
        """A copy with other fields (e.g. another default and help for another recursion)."""
        return dataclasses.replace(self, **changes)

    # -- the requirement in words ------------------------------------------------------
    @property
    def requirement_text(self) -> str:
        """What a value must be, as the refusal says it."""
        if self.requirement is not None:
            return self.requirement
        words = [repr(c) for c in self.choices or ()]
        kinds = self._kind_words()
        if not kinds and len(words) > 2:
            words = [f"one of {', '.join(words)}"]
        words += kinds
        if self.optional:
            words.append("None")
        return _alternatives(words)

    def _kind_words(self) -> list[str]:
        """The values of ``type`` (within the interval) in words; none when only choices."""
        if self.nargs > 1:
            group = "pair" if self.nargs == 2 else f"group of {self.nargs}"
            words = [f"a {group} of {self._number_noun()}s"]
            return words + [f"one {group} per input dimension"] if self.multiple else words
        if self.type is bool:
            return ["True", "False"]
        if self.type in (int, float):
            return [self._interval_text()]
        if self.type is str:
            return [] if self.choices is not None else ["a string"]
        if self.type is object:
            return ["any value"]
        name = self.type.__name__
        return [f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"]

    def _number_noun(self) -> str:
        return "integer" if self.type is int else "finite number"

    def _interval_text(self) -> str:
        low = ("(", self.gt) if self.gt is not None else ("[", self.ge)
        high = (")", self.lt) if self.lt is not None else ("]", self.le)
        noun = self._number_noun()
        article = "an" if self.type is int else "a"
        if low[1] is not None and high[1] is not None:
            interval = f"{low[0]}{_bound(low[1])}, {_bound(high[1])}{high[0]}"
            return f"an integer in {interval}" if self.type is int else f"in {interval}"
        if self.gt == 0 and high[1] is None and self.type is int:
            return "a positive integer"
        if low[1] is not None:
            return f"{article} {noun} {'>' if self.gt is not None else '>='} {_bound(low[1])}"
        if high[1] is not None:
            return f"{article} {noun} {'<' if self.lt is not None else '<='} {_bound(high[1])}"
        return f"{article} {noun}"

    # -- the check ---------------------------------------------------------------------
    def error(self, value, requirement: str | None = None) -> ValueError:
        """The refusal of ``value`` (``requirement``: another rule than the declaration's,
        e.g. one that depends on another parameter)."""
        return must_be(self.label or self.name, requirement or self.requirement_text, value)

    def check(self, value):
        """``value`` converted to the parameter's type, or ``ValueError`` (:meth:`error`)."""
        if self.canonical is not None and value is not None:
            value = self.canonical(value)
        if value is None:
            if self.optional:
                return None
            raise self.error(value)
        if self.sequence:
            return self._check_sequence(value)
        if self.nargs > 1:
            return self._check_numbers(value)
        if self.choices is not None and isinstance(value, str):
            if value in self.choices:
                return str(value)
            raise self.error(value)
        checked = self._check_scalar(value)
        if checked is None:
            raise self.error(value)
        return checked

    def _check_scalar(self, value):
        """The value converted, or None when it is not one the declaration allows."""
        import numpy as np

        if self.type is bool:
            return bool(value) if isinstance(value, bool | np.bool_) else None
        if self.type in (int, float):
            number = _number(value)
            if number is None or not np.isfinite(number) or not self._inside(number):
                return None
            if self.type is int:
                return int(number) if number == int(number) else None
            return number
        if self.type is object or isinstance(value, self.type):
            return value
        return None

    def _check_sequence(self, value) -> tuple:
        """One or more numbers (a number alone is one) as a tuple, each checked."""
        values = (value,) if _number(value) is not None else value
        try:
            numbers = [self._check_scalar(v) for v in values]
        except TypeError:  # not a number nor a sequence of them
            raise self.error(value) from None
        if not numbers or any(v is None for v in numbers):
            raise self.error(value)
        return tuple(numbers)

    def _inside(self, x: float) -> bool:
        return ((self.gt is None or x > self.gt) and (self.ge is None or x >= self.ge)
                and (self.lt is None or x < self.lt) and (self.le is None or x <= self.le))

    def _check_numbers(self, value):
        """A value of ``nargs`` numbers (or, with ``multiple``, one or more of them) as a
        tuple (of tuples)."""
        import numpy as np

        try:
            array = np.asarray(value, dtype=object)  # each number checked as given
        except ValueError:
            raise self.error(value) from None
        one = array.shape == (self.nargs,)
        several = self.multiple and array.ndim == 2 and array.shape[1:] == (self.nargs,) \
            and array.shape[0] >= 1
        numbers = [self._check_scalar(v) for v in array.flat] if one or several else [None]
        if any(v is None for v in numbers):
            raise self.error(value)
        if one:
            return tuple(numbers)
        return tuple(tuple(numbers[i:i + self.nargs]) for i in range(0, len(numbers), self.nargs))

    # -- the command line ----------------------------------------------------------------
    @property
    def option(self) -> str:
        """The command line's name of the parameter (``--block-size``; a pair of switches'
        first, ``--intercept``)."""
        return (self.flag or "--" + self.name.replace("_", "-")).split("/")[0]

    def shown(self, value):
        """``value`` as the command line gives it: in ``unit`` (bytes as MB, to three
        significant digits), else as it is."""
        if self.unit is None or value is None:
            return value
        return float(f"{value / self.scale:.3g}")

    def from_command_line(self, value):
        """The parameter's value from its command-line option's (``None``: not given).

        ``parse`` when declared; a repeated option's values as a tuple (``None`` when
        none); a value in ``unit`` scaled to the parameter's (a number of MB to bytes); a
        choice or a number from text (``ValueError`` in the format of :meth:`check` when
        the text is neither).
        """
        if self.parse is not None:
            return self.parse(value)
        if self.multiple:
            return tuple(value) or None
        if self.sequence and isinstance(value, str):
            numbers = [_text_number(v) for v in value.split(",")]
            return tuple(numbers) if None not in numbers else value  # check() refuses text
        if self.unit is not None and value is not None:
            number = _number(value) if not isinstance(value, str) else _text_number(value)
            if number is None or not math.isfinite(number) or abs(number * self.scale) >= 2**62:
                raise must_be(self.option, f"a number of {self.unit}", value)
            scaled = number * self.scale
            return max(1, int(scaled)) if self.type is int and scaled > 0 else scaled
        if isinstance(value, str) and self.type in (int, float):
            if self.choices is not None and value in self.choices:
                return value
            try:
                return self.type(value)
            except ValueError:
                raise self.error(value) from None
        return value


#: the forgetting factor g of the recursions with exponential forgetting (KF4LLS, RLS and
#: IRMA's RLS baseline), each with its own default and help
FORGETTING = Param("forgetting", 1.0, "Forgetting factor g in (0, 1].", gt=0, le=1,
                   label="forgetting factor")
