"""No module of the package runs code built from strings: no call of ``exec``, ``eval`` or
``compile`` (as a name, or through ``builtins``) anywhere in pipeline/ or kernels/, read
off the source's syntax tree."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the built-ins that run (or prepare to run) source text
DYNAMIC = frozenset({"exec", "eval", "compile"})


def dynamic_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every call of ``exec``/``eval``/``compile`` by its bare name or as
    an attribute of ``builtins``/``__builtins__``, and every reference to those built-ins
    through ``builtins`` (``getattr(builtins, "exec")`` aside, which names a string)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in DYNAMIC:
            found.append((node.lineno, node.func.id))
        elif isinstance(node, ast.Attribute) and node.attr in DYNAMIC \
                and isinstance(node.value, ast.Name) \
                and node.value.id in {"builtins", "__builtins__"}:
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "builtins":
            found += [(node.lineno, f"from builtins import {a.name}") for a in node.names
                      if a.name in DYNAMIC]
    return sorted(found)


def test_no_module_of_the_package_runs_strings_as_code():
    offences = []
    for top in ("pipeline", "kernels"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            offences += [f"{path.relative_to(ROOT)}:{line}: {what}"
                         for line, what in dynamic_calls(tree)]
    assert not offences, "code run from strings:\n" + "\n".join(offences)


def test_the_scan_finds_what_it_looks_for():
    """The scanner itself: each form is found, method calls of the same names
    (``re.compile``, a DataFrame's ``eval``) and ``ast.literal_eval`` are not."""
    source = (
        "import builtins, re, ast\n"
        "exec('x = 1')\n"
        "y = eval('1 + 1')\n"
        "c = compile('1', '<s>', 'eval')\n"
        "builtins.exec('pass')\n"
        "from builtins import eval as e\n"
        "p = re.compile('a+')\n"
        "v = ast.literal_eval('1')\n"
        "frame.eval('a + b')\n")
    assert dynamic_calls(ast.parse(source)) == [
        (2, "exec"), (3, "eval"), (4, "compile"), (5, "builtins.exec"),
        (6, "from builtins import eval")]
