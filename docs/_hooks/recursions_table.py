"""mkdocs hook: the table of recursions, made from the registry when the site is built.

A page that holds the line ``<!-- recursions-table -->`` gets in its place one row per
registered recursion (:data:`streamlsq.RECURSIONS`, from its declaration): its name (the command
``streamlsq fit NAME``), what it is, the stores it reads, its engines, how it fits an
intercept and its parameters with their defaults. A new recursion appears here without
an edit of the docs.
"""

from __future__ import annotations

MARKER = "<!-- recursions-table -->"

_INTERCEPT = {
    "column": "a constant column (`--intercept`)",
    "kernel": "its own constant term (`--intercept`)",
    "basis": "in its basis",
    "centred": "none: blocks are centred",
}


def recursions_table() -> str:
    """The Markdown table of every registered recursion."""
    from streamlsq.kernels.recursions.registry import RECURSIONS

    rows = ["| method | what it is | reads | engines | intercept | parameters (default) |",
            "|---|---|---|---|---|---|"]
    for name in RECURSIONS:
        declared = RECURSIONS.declaration(name)
        params = ", ".join(f"`{p.name}` ({p.default!r})" for p in declared.params) or "none"
        default = " (on by default)" if declared.default_intercept else ""
        rows.append(" | ".join([
            f"| `{name}`", declared.summary, ", ".join(declared.inputs),
            ", ".join(declared.engines),
            _INTERCEPT.get(declared.intercept_kind, declared.intercept_kind) + default,
            params + " |"]))
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, recursions_table())
