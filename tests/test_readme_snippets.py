"""The README's Python snippets run as written, each saved as a plain script.

Every ```python block of README.md, in order, is written to a file of its own and run
as ``python FILE`` runs it (a fresh namespace as ``__main__``, ``runpy.run_path``), all
in one new interpreter, in one temporary folder (so a snippet may read the files an
earlier one wrote, as a reader following the README would). None of them has an
``if __name__ == "__main__":`` guard, as a user's first script would not: this is the
case where worker processes would re-run the script, and the embedded cluster must
start its workers as threads instead (``streamlsq.runtime.client.embedded_workers``).
The snippets are small enough to run as written in seconds: nothing here shrinks them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    """The contents of the fenced ```python blocks of a Markdown text, in order."""
    return [m.group(1) for m in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text,
                                            re.S | re.M)]


def test_python_blocks_are_found():
    blocks = python_blocks("x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\n```\n")
    assert blocks == ["a = 1\n", "b = 2\n"]


#: Runs each snippet file named on its command line, in order, as ``python FILE`` would: a
#: fresh namespace run as ``__main__`` with that file as ``__main__.__file__`` (so the
#: embedded cluster sees a script without a guard), in one interpreter rather than one
#: each (every ``python FILE`` paid the imports of numpy, xarray, dask and streamlsq again).
#: A snippet that fails ends the run with its number and traceback on stderr, exit 3.
DRIVER = """\
import runpy, sys, traceback
for i, name in enumerate(sys.argv[1:], 1):
    try:
        runpy.run_path(name, run_name="__main__")
    except BaseException:
        traceback.print_exc()
        print(f"README python block {i} failed", file=sys.stderr)
        sys.exit(3)
"""


@pytest.mark.timeout(300)
def test_readme_python_snippets_run_as_scripts(tmp_path):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no python block"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    names = []
    for i, code in enumerate(blocks, 1):
        script = tmp_path / f"readme_snippet_{i}.py"
        script.write_text(code, encoding="utf-8")
        names.append(script.name)
    (tmp_path / "run_snippets.py").write_text(DRIVER, encoding="utf-8")
    run = subprocess.run([sys.executable, "run_snippets.py", *names], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=290)
    assert run.returncode == 0, (
        f"README python blocks failed (exit {run.returncode}):\n"
        f"--- stderr ---\n{run.stderr[-4000:]}")
