"""An import-linter contract of this repository's own: no import cycle among the modules of a
package, a package's ``__init__`` being one module like any other.

import-linter's ``acyclic_siblings`` contract finds cycles between the children of each
package (``streamlsq.io`` ↔ ``streamlsq.stream``, ``io.sources`` ↔ ``io.tables``), but not
a cycle through a package's own ``__init__`` (``streamlsq`` → ``streamlsq.io.sources`` →
``streamlsq``): the package is no sibling of its children. This contract takes every
module of the graph as one node and refuses any strongly connected set of two or more.
grimp's graph holds every import of a module, those inside functions included
(``exclude_type_checking_imports`` leaves out the ``if TYPE_CHECKING:`` ones only).

Registered in ``[tool.importlinter]`` (``contract_types``); ``.ci/lint-imports`` puts this
folder on the path.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def module_cycles(graph: ImportGraph, root: str) -> list[list[str]]:
    """The strongly connected sets of two or more modules of ``root`` (each sorted), by
    Tarjan's algorithm, iteratively: every module in one set imports, directly or not, every
    other."""
    modules = sorted(m for m in graph.modules if m == root or m.startswith(root + "."))
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, rest = work[-1]
            for nxt in rest:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(sorted(members))
    return sorted(found)


class AcyclicModulesContract(Contract):
    """No module of ``root`` imports, directly or not, a module that imports it."""

    type_name = "acyclic_modules"

    root = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        root = str(self.root)
        cycles = module_cycles(graph, root)
        imports = [[(a, b, [d["line_number"] for d in graph.get_import_details(
                        importer=a, imported=b)])
                    for a in cycle for b in sorted(graph.find_modules_directly_imported_by(a))
                    if b in cycle] for cycle in cycles]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles, "imports": imports})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle, imports in zip(check.metadata["cycles"], check.metadata["imports"],
                                  strict=True):
            output.print_error(f"These modules import each other: {', '.join(cycle)}")
            for a, b, lines in imports:
                output.print_error(f"- {a} -> {b} (l. {', '.join(map(str, lines))})")
            output.new_line()
