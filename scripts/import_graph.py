"""The file-level import graph of ``src/execrl`` and its circles (issue 36, item 5), stdlib only.

    python scripts/import_graph.py                  # circles of this checkout; exit 1 if there is one
    python scripts/import_graph.py --root /tmp/old  # another checkout

Why a file-level graph: the import-linter contracts (pyproject.toml) order *packages* and *layers*, so two
files of one layer that import each other pass them (issue 36 found 7 such circles, most in the sandbox).
``tests/unit/test_import_graph.py`` fails on any circle this module finds.

The rules, stated so a reader can check a count:

* a node is a module of ``src/execrl`` (``pkg/__init__.py`` is the node ``pkg``); directories whose names
  are not identifiers (task-suite project files) are not modules and are skipped;
* an edge is an ``import``/``from ... import`` statement anywhere in the file (module level, inside a
  function or a class), except inside the body of ``if TYPE_CHECKING:`` (annotations never run);
  ``from a import b`` is an edge to ``a.b`` when that is a module, else to ``a``; ``import a.b.c`` to the
  longest of ``a.b.c``, ``a.b``, ``a`` that is a module; relative imports are resolved;
* the parent packages Python runs on the way to a module (``import a.b`` runs ``a/__init__.py``) are not
  edges, nor are ``importlib.import_module`` calls (the CLI's command list, lazy ``__getattr__`` exports):
  a circle through those is not seen;
* a *circle* is counted two ways: strongly connected components of more than one module (each file in
  at most one), and elementary cycles (each closed path visiting no module twice; one component may hold
  several). A module importing itself is ignored.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

MAX_CYCLES = 10_000  # elementary cycles can grow exponentially with a component's size; stop counting there


@dataclass(frozen=True)
class SourceModule:
    name: str  # execrl.sandbox.langs.registry
    path: Path
    tree: ast.Module
    lines: int


def load_modules(src: Path, top: str = "execrl") -> list[SourceModule]:
    """Every module under ``src/<top>``, parsed."""
    out = []
    for path in sorted((src / top).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(not p.isidentifier() for p in parts):
            continue
        text = path.read_text(encoding="utf-8")
        out.append(SourceModule(".".join(parts), path, ast.parse(text), len(text.splitlines())))
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs (bodies of ``if TYPE_CHECKING:`` left out, their ``else`` kept)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.orelse:
                    visit_one(stmt)
            else:
                visit(child)

    def visit_one(stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            found.append(stmt)
        else:
            visit(stmt)

    visit(tree)
    return found


def imported_modules(module: SourceModule, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports, by the rules of the module docstring."""
    is_package = module.path.name == "__init__.py"
    out: set[str] = set()
    for node in import_nodes(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    out.add(name)
            continue
        base = node.module or ""
        if node.level:
            anchor = module.name.split(".")
            anchor = anchor if is_package else anchor[:-1]
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            if f"{base}.{alias.name}" in known:
                out.add(f"{base}.{alias.name}")
            elif base in known:
                out.add(base)
    out.discard(module.name)
    return out


def file_graph(modules: list[SourceModule]) -> dict[str, set[str]]:
    """module -> the modules it imports (every module is a key)."""
    known = {m.name for m in modules}
    return {m.name: imported_modules(m, known) for m in modules}


def package_of(name: str) -> str:
    """``execrl.<first part>``, the unit the top-level layers contract orders."""
    return ".".join(name.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> {"importer -> imported"} module edges (other packages only)."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for source, targets in graph.items():
        for target in targets:
            if package_of(source) != package_of(target):
                out[package_of(source)][package_of(target)].add(f"{source} -> {target}")
    return out


def components(graph: dict[str, set[str]] | dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one node, sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return sorted(out)


def elementary_cycles(graph: dict[str, set[str]], limit: int = MAX_CYCLES) -> list[list[str]]:
    """Every elementary cycle, each listed from its smallest module name (at most ``limit`` of them).

    Per component, a depth-first search from each node that visits only larger nodes finds each cycle
    exactly once (from its smallest node); fine for the small components an import graph has."""
    out: list[list[str]] = []
    for component in components(graph):
        members = set(component)
        for start in component:
            path = [start]
            todo = [iter(sorted(s for s in graph[start] if s in members and s >= start))]
            while todo and len(out) < limit:
                succ = next(todo[-1], None)
                if succ is None:
                    todo.pop()
                    path.pop()
                elif succ == start:
                    out.append(list(path))
                elif succ not in path:
                    path.append(succ)
                    todo.append(iter(sorted(s for s in graph[succ] if s in members and s >= start)))
    return out


def circles(src: Path) -> tuple[list[list[str]], list[list[str]]]:
    """(strongly connected components, elementary cycles) of the file-level graph of ``src/execrl``."""
    graph = file_graph(load_modules(src))
    return components(graph), elementary_cycles(graph)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    sccs, cycles = circles(args.root.resolve() / "src")
    print(f"file-level import circles: {len(sccs)} components, {len(cycles)} elementary cycles")
    for component in sccs:
        print(f"  component: {', '.join(component)}")
    for cycle in cycles:
        print(f"  cycle: {' -> '.join([*cycle, cycle[0]])}")
    return 1 if sccs else 0


if __name__ == "__main__":
    sys.exit(main())
