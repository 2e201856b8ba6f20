"""mkdocs hook: lay the ``streamlsq`` package out on disk for mkdocstrings.

streamlsq is built from two folders (``pipeline/`` becomes ``streamlsq``,
``kernels/`` becomes ``streamlsq.kernels``; ``[tool.setuptools] package-dir`` in
pyproject.toml). Griffe, which reads the source for mkdocstrings, looks a package up
by its folder name, so it finds neither folder under the name ``streamlsq``. Before
the build this hook lays out the installed package tree in a temporary folder, made
of symbolic links to the source folders (so ``mkdocs serve`` sees edits), and
points mkdocstrings' Python handler at it; the folder is removed when mkdocs exits.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority

_ROOT = Path(__file__).resolve().parents[2]
_TREE: Path | None = None


def _package_dirs(root: Path) -> dict[str, Path]:
    with open(root / "pyproject.toml", "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {pkg: (root / folder).resolve() for pkg, folder in mapping.items()}


def lay_out(root: Path, target: Path) -> None:
    """Build the package tree of ``root``'s package-dir mapping under ``target``.

    A package with no mapped subpackage becomes one link to its folder; a package
    with mapped subpackages becomes a folder of links to its entries, beside the
    subpackages' own trees.
    """
    dirs = _package_dirs(root)
    for pkg in sorted(dirs, key=lambda p: p.count(".")):
        dest = target.joinpath(*pkg.split("."))
        nested = {p.split(".")[pkg.count(".") + 1] for p in dirs if p.startswith(pkg + ".")}
        if not nested:
            dest.symlink_to(dirs[pkg], target_is_directory=True)
            continue
        dest.mkdir(parents=True)
        for entry in dirs[pkg].iterdir():
            if entry.name not in nested and entry.name != "__pycache__":
                (dest / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


@event_priority(100)  # before mkdocstrings reads its handlers' configuration
def on_config(config):
    global _TREE
    if _TREE is None:
        _TREE = Path(tempfile.mkdtemp(prefix="streamlsq-docs-"))
        lay_out(_ROOT, _TREE)
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [str(_TREE)]
    return config


def on_shutdown():
    global _TREE
    if _TREE is not None:
        shutil.rmtree(_TREE, ignore_errors=True)
        _TREE = None
