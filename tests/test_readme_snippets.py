"""The README's Python snippets run as written, each saved as a plain script.

Every ```python block of README.md, in order, is written to a file of its own and run
with ``python FILE`` in one temporary folder (so a snippet may read the files an earlier
one wrote, as a reader following the README would). None of them has an
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


@pytest.mark.timeout(300)
def test_readme_python_snippets_run_as_scripts(tmp_path):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no python block"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    for i, code in enumerate(blocks, 1):
        script = tmp_path / f"readme_snippet_{i}.py"
        script.write_text(code, encoding="utf-8")
        run = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=240)
        assert run.returncode == 0, (
            f"README python block {i} failed (exit {run.returncode}):\n{code}\n"
            f"--- stderr ---\n{run.stderr[-4000:]}")
