"""Names a user typed against the names an input holds: a column or variable refused as
missing is also said to differ from an existing one only by look-alike characters (a
Cyrillic ``\\u0445`` for a Latin ``x``, a full-width ``\\uff58``, a trailing space, a
zero-width space, a byte-order mark) or only in case, naming both and the characters that
differ, so that two names that print alike are told apart (``docs/faults.md``).

Two names look alike when their *skeletons* are equal: each NFKC-normalised (Unicode's
compatibility forms: full-width letters, ligatures, non-breaking spaces; Unicode Standard
Annex 15), stripped of invisible characters, its Cyrillic and Greek letters that print as
Latin ones mapped to them (after Unicode's confusables, Unicode Technical Standard 39), its
dashes to ``-`` and its white space collapsed and trimmed. The rule is small on purpose: it
tells what a user most often pastes by mistake, not every confusable Unicode lists.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

__all__ = ["look_alike", "skeleton"]

#: Cyrillic and Greek letters that print as Latin ones, and dashes, by code point (written
#: as escapes: in this file too they would look like the Latin letters)
_CONFUSABLES = str.maketrans({
    # Cyrillic small a, ve, ie, o, er, es, u, ha, dze, i, je, shha, komi de, qa, we, palochka
    "\u0430": "a", "\u0432": "b", "\u0435": "e", "\u043e": "o", "\u0440": "p",
    "\u0441": "c", "\u0443": "y", "\u0445": "x", "\u0455": "s", "\u0456": "i",
    "\u0458": "j", "\u04bb": "h", "\u0501": "d", "\u051b": "q", "\u051d": "w",
    "\u04cf": "l",
    # Cyrillic capital A, VE, IE, KA, EM, EN, O, ER, ES, TE, HA, U, DZE, I, JE, QA, WE
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M",
    "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C", "\u0422": "T",
    "\u0425": "X", "\u0423": "Y", "\u0405": "S", "\u0406": "I", "\u0408": "J",
    "\u051a": "Q", "\u051c": "W",
    # Greek small omicron, nu, rho, iota; capital ALPHA ... CHI that print as Latin
    "\u03bf": "o", "\u03bd": "v", "\u03c1": "p", "\u03b9": "i",
    "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H",
    "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O",
    "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X",
    # hyphen, non-breaking hyphen, figure dash, en and em dashes, minus sign
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
    "\u2212": "-",
})
#: characters that print as nothing: zero-width space, non-joiner and joiner, word joiner,
#: the byte-order mark (which starts a CSV file's first column name), the soft hyphen
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))


def skeleton(name: str) -> str:
    """``name`` as it prints: NFKC-normalised, invisible characters removed, look-alike
    letters and dashes mapped to ASCII, white space collapsed and trimmed."""
    text = unicodedata.normalize("NFKC", name).translate(_INVISIBLE).translate(_CONFUSABLES)
    return " ".join(text.split())


def _unusual(name: str) -> list[str]:
    """The characters of ``name`` a reader cannot tell by eye: white space at its ends, and
    every character outside printable ASCII, each with its code point and Unicode name."""
    said = []
    if name != name.lstrip():
        said.append("a leading space")
    if name != name.rstrip():
        said.append("a trailing space")
    for char in dict.fromkeys(name):
        if not " " <= char <= "~":
            said.append(f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')}")
    return said


def look_alike(name: str, found: Iterable, kind: str = "column") -> str:
    """What to add to the refusal of ``name`` as missing from an input holding ``found``:
    ``"; 'x1 ' differs from the column 'x1' only by look-alike characters (the name given
    has a trailing space): ..."``, or ``"; ... only in case ..."``, else ``""``. ``kind``
    names what ``found`` holds (columns, variables)."""
    name = str(name)
    others = [str(v) for v in found if str(v) != name]
    key = skeleton(name)
    for other in others:
        if skeleton(other) == key:
            chars = [f"{who} has {', '.join(said)}" for who, said in
                     (("the name given", _unusual(name)), (f"the {kind}", _unusual(other)))
                     if said]
            remedy = "write the name as the input spells it"
            if unicodedata.normalize("NFKC", other) == name:
                # Python's parser NFKC-normalises the names of an expression (backticks
                # too, as formulaic leaves a valid identifier as it is): a formula's
                # np.log(ｘ1) asks for x1 whatever the user typed
                remedy += (f"; inside a formula's expressions Python reads every name "
                           f"NFKC-normalised, so no expression can name this column: "
                           f"rename it {name!r} in the input")
            return (f"; {ascii(name)} differs from the {kind} {ascii(other)} only by "
                    f"look-alike characters ({'; '.join(chars) or 'white space'}): {remedy}")
    for other in others:
        if skeleton(other).casefold() == key.casefold():
            return (f"; {name!r} differs from the {kind} {other!r} only in case (names are "
                    "case-sensitive)")
    return ""
