"""The command line's options, generated from the declarations (:mod:`streamlsq.options`).

Each declared :class:`~streamlsq.kernels.recursions.params.Param` becomes one click option,
its help written once in the declaration: ``--name`` (or the declared ``flag``), a switch
for a boolean (a pair ``--x/--no-x`` whose "not given" is None when declared so; a boolean
that also takes named values, such as ``use_correction``, is ``--x`` with an optional value
and ``--no-x``: ``--use-correction``, ``--use-correction cluster``), repeated
or of several numbers when declared so. Every other value is taken as text and converted
and checked by the declaration itself (:func:`values`), so that a bad value is refused in
the one format of every check, in one line naming the option and the value — not by click's
usage message — and before any cluster starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import click

from streamlsq.errors import InputError
from streamlsq.options import Options, Param

__all__ = ["DeclaredOption", "SwitchOrChoice", "click_option", "click_options", "values"]


class DeclaredOption(click.Option):
    """A click option generated from a declaration, which it keeps (``declaration``): the
    tests walk every command's declared options through it."""

    def __init__(self, *args, declaration: Param, **kwargs):
        super().__init__(*args, **kwargs)
        self.declaration = declaration


class SwitchOrChoice(DeclaredOption):
    """A boolean declaration that also takes named values (``choices``): ``--x`` alone is
    True, ``--x VALUE`` one of the choices, ``--no-x`` False (not given: None). One option,
    so that the declaration stays one: click's pair of switches takes no value, and its
    option with an optional value has no negative form, which this adds to the parser."""

    def __init__(self, _param_decls=(), *, p: Param, **kwargs):
        # click passes the option's names first; here they come from the declaration
        positive, negative = p.flag.split("/")
        super().__init__([positive, p.name], is_flag=False, flag_value=True,
                         type=click.UNPROCESSED, default=None, declaration=p, **kwargs)
        self.negative = negative

    def add_to_parser(self, parser, ctx):
        super().add_to_parser(parser, ctx)
        parser.add_option(obj=self, opts=[self.negative], dest=self.name,
                          action="store_const", const=False)

    def get_help_record(self, ctx):
        names, text = super().get_help_record(ctx)
        return f"{names} / {self.negative}", text


class GivenOnce(DeclaredOption):
    """A declared option of one value that names what is read (``--group``), refused when
    given twice with different values: click's rule, the last one wins, would read
    another group than the one typed first without a word (as ``PATH#GROUP`` and
    ``--group`` naming two groups are refused)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, multiple=True, **kwargs)

    def process_value(self, ctx, value):
        given = tuple(dict.fromkeys(super().process_value(ctx, value) or ()))
        if len(given) > 1:
            shown = ", then ".join(repr(v) for v in given)
            raise click.UsageError(f"{self.opts[0]} given {len(given)} times ({shown}): name "
                                   f"the {self.name} once", ctx)
        return given[0] if given else None


#: the declarations given once (:class:`GivenOnce`)
_ONCE = {"group"}


def _help(p: Param) -> str:
    text = p.help
    if p.default is not None and p.type is not bool and not p.multiple:
        shown = p.default / p.scale if p.unit is not None else p.default
        text += f"  [default: {shown:g}]" if isinstance(shown, float) else \
            f"  [default: {shown}]"
    return text


def _metavar(p: Param) -> str | None:
    if p.metavar is not None:
        return p.metavar
    if p.unit is not None:
        return p.unit
    if p.choices is not None:
        kinds = {int: "|INTEGER", float: "|FLOAT"}.get(p.type, "")
        return f"[{'|'.join(map(str, p.choices))}{kinds}]"
    return {int: "INTEGER", float: "FLOAT"}.get(p.type, "TEXT")  # click's own words


def click_option(p: Param):
    """The click option of one declaration (its value: the text given, or None)."""
    kept = {"cls": DeclaredOption, "declaration": p, "hidden": p.hidden}
    if p.type is bool:
        if p.flag is not None and "/" in p.flag and p.choices is not None:
            return click.option(cls=SwitchOrChoice, p=p, help=p.help,
                                metavar=f"[{'|'.join(p.choices)}]", hidden=p.hidden)
        if p.flag is not None and "/" in p.flag:
            return click.option(p.flag, p.name, default=None, help=p.help, **kept)
        return click.option(p.option, p.name, is_flag=True, default=bool(p.default),
                            help=p.help, **kept)
    if p.multiple or p.nargs > 1:  # numbers in groups: click splits them, the Param checks
        return click.option(p.option, p.name, nargs=p.nargs, multiple=p.multiple,
                            type=p.type if p.type in (int, float) else str, default=None,
                            help=p.help, metavar=p.metavar, **kept)
    if p.name in _ONCE:
        kept["cls"] = GivenOnce
    return click.option(p.option, p.name, default=None, type=str, help=_help(p),
                        metavar=_metavar(p), **kept)


def click_options(options: Options | Iterable[Param], exclude: Iterable[str] = ()):
    """A decorator adding the click option of every declaration in ``options`` that is on
    the command line (less ``exclude``), in declaration order."""
    skipped = set(exclude)
    chosen = [click_option(p) for p in options if p.command_line and p.name not in skipped]

    def decorate(fn):
        for option in reversed(chosen):
            fn = option(fn)
        return fn

    return decorate


def values(options: Options, given: Mapping, *, check: bool = True) -> dict:
    """The options' values from the command line's ``given`` (name → text or None, as
    click passes them): each converted by its declaration (``--segment-size`` MB to
    bytes, a choice or a number from text), then, with ``check``, all of them checked
    together (:meth:`Options.check`: ranges, choices and rules) — before any input is
    opened or cluster started. Options not given are left out, so that the Python
    function's defaults apply (a store's attribute among them)."""
    out = {}
    for name, raw in given.items():
        if name not in options or raw is None or (raw == () and options.param(name).multiple):
            continue
        p = options.param(name).replace(optional=False)  # a value given is never None
        if p.unit is None and p.label is None:
            # named as the user typed it: "--rows must be ...", not "--rows: n_rows must be"
            p = p.replace(label=p.option)
        if p.type is bool and p.choices is not None and isinstance(raw, str) \
                and raw not in p.choices:
            # the command line's True and False are the switches, not words
            negative = p.flag.split("/")[1]
            raise InputError(f"{p.option}: alone, or with "
                             f"{' or '.join(map(repr, p.choices))} ({negative} for none), "
                             f"got {raw!r}")
        if p.type is bool and raw is False and p.default is False:
            continue
        try:
            out[name] = p.check(p.from_command_line(raw)) if check else \
                p.from_command_line(raw)
        except ValueError as exc:
            # the value as given when the message names it converted (a number of MB in bytes)
            shown = p.option if p.unit is None else f"{p.option} {raw}"
            raise InputError(str(exc) if str(exc).startswith(p.option) else
                             f"{shown}: {exc}") from None
    if check:
        options.check(out)
    return out
