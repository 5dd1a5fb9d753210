"""Architecture numbers of an execrl tree (issues 22 and 36), re-measured before and after a change.

    python scripts/arch_metrics.py                        # this checkout, with the traced steps
    python scripts/arch_metrics.py --root /tmp/old-tree   # another checkout of execrl (any commit)
    python scripts/arch_metrics.py --no-trace --json out.json

Counted from the code (``ast``; each count prints the definitions it counted, so a reader can check it):

* **conversation loops**: functions with a loop over turns (a ``for`` whose target or iterable names
  something with ``turn`` in it, or a ``while`` whose body does or asks an environment to ``respond``)
  that calls a sampler inside it (a call whose name has a ``_``-separated part ``generate``, ``complete``
  or ``chat``: ``engine.generate``, ``_generate_and_score``, ``endpoint.chat``; or waits on a model
  backend: ``backend.wait``). Nested functions count on their own.
* **episode types**: dataclasses whose class name ends in ``Episode``.
* **train-batch builders**: functions that call the ``TrainBatch(...)`` constructor themselves (its own
  methods and ``execrl.bench``, where a peer's side builds one to compare, left out).
* **run builders**: functions that call the constructor of a class whose fields include ``model`` and
  ``optimizer`` (``Run``).
* **evaluation modules**: modules with ``eval`` in their file name, outside the ``execrl.eval`` harness
  package, that a training recipe (``execrl.recipes.*``) imports.
* **file-level import circles** (``import_graph.py``: imports at any level but under ``TYPE_CHECKING``):
  strongly connected components and elementary cycles; **package cycles**: components of the graph
  folded to ``execrl.<first part>`` (a package's ``cli.py`` counts with its package, as import-linter
  counts it), each with the module imports that close it.
* **lines** of ``recipes/refine_rl.py`` and ``recipes/tools_rl.py``, and every file over 500 lines.
* issue 22's: lines of each recipe's ``train_step``, functions over 60 lines and the median, and
  hand-written config mappers (calls passing at least three config knobs read one by one,
  ``learning_rate=opt.learning_rate``; ``dataclasses.replace`` and ``model_copy`` are not counted).

Traced (``arch_trace.py``): **hops from ``execrl train`` to the loss** for GRPO and for tools: one real
step each on a tiny random model, under ``sys.setprofile``; distinct execrl files run before the policy
loss is first called, file-to-file switches (all, and distinct pairs), and the stack from
``execrl.cli.main`` to the loss. ``--no-trace`` skips them (they need torch and a sandbox; ~30 s each).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arch_trace import RECIPES, traced_step  # noqa: E402
from import_graph import (  # noqa: E402
    SourceModule,
    components,
    elementary_cycles,
    file_graph,
    load_modules,
    package_graph,
)

FILE_LIMIT = 500
FUNCTION_LIMIT = 60
RECIPE_FILES = ("recipes/refine_rl.py", "recipes/tools_rl.py")
SAMPLER_PARTS = {"generate", "complete", "chat"}
Function = ast.FunctionDef | ast.AsyncFunctionDef


# -- helpers --------------------------------------------------------------------------------------------
@functools.cache
def functions(module: SourceModule) -> list[tuple[str, Function]]:
    """(qualified name, node) of every def in the module, nested ones included (once per module)."""
    out: list[tuple[str, Function]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((f"{prefix}{child.name}", child))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(module.tree, "")
    return out


def own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``func``'s body, not those of functions, classes or lambdas defined inside it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def span(node: ast.AST) -> int:
    return int(getattr(node, "end_lineno", 0)) - int(getattr(node, "lineno", 0)) + 1


def call_name(node: ast.Call) -> str:
    func, parts = node.func, []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _names(node: ast.AST) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    }


def _where(module: SourceModule, name: str, node: ast.AST) -> str:
    return f"{module.name}.{name} (line {getattr(node, 'lineno', '?')})"


# -- the spine's counts (issue 36) ----------------------------------------------------------------------
def _about_turns(loop: ast.AST) -> bool:
    if isinstance(loop, ast.For | ast.AsyncFor):
        named = _names(loop.target) | _names(loop.iter)
    else:
        named = _names(loop)
    return any("turn" in name.lower() or name == "respond" for name in named)


def _sampler(call: ast.Call) -> str | None:
    name = call_name(call)
    last = name.split(".")[-1]
    if SAMPLER_PARTS & set(last.split("_")) or name.endswith("backend.wait"):
        return last
    return None


def conversation_loops(modules: list[SourceModule]) -> list[str]:
    out = []
    for module in modules:
        for name, func in functions(module):
            for loop in own_nodes(func):
                if not isinstance(loop, ast.For | ast.AsyncFor | ast.While) or not _about_turns(loop):
                    continue
                samplers = {
                    found for c in ast.walk(loop) if isinstance(c, ast.Call) and (found := _sampler(c))
                }
                if samplers:
                    out.append(f"{_where(module, name, func)}: samples with {', '.join(sorted(samplers))}")
                    break
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def episode_types(modules: list[SourceModule]) -> list[str]:
    return [
        _where(module, node.name, node)
        for module in modules
        for node in ast.walk(module.tree)
        if isinstance(node, ast.ClassDef) and node.name.endswith("Episode") and _is_dataclass(node)
    ]


def _constructor_callers(modules: list[SourceModule], classes: set[str], skip: str = "") -> list[str]:
    out = []
    for module in modules:
        if skip and (module.name == skip or module.name.startswith(f"{skip}.")):
            continue
        for name, func in functions(module):
            if name.split(".")[0] in classes:
                continue
            if any(
                isinstance(n, ast.Call) and call_name(n).split(".")[-1] in classes for n in own_nodes(func)
            ):
                out.append(_where(module, name, func))
    return out


def batch_builders(modules: list[SourceModule]) -> list[str]:
    return _constructor_callers(modules, {"TrainBatch"}, skip="execrl.bench")


def run_builders(modules: list[SourceModule]) -> list[str]:
    run_classes = set()
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if {"model", "optimizer"} <= fields:
                    run_classes.add(node.name)
    return _constructor_callers(modules, run_classes)


def evaluation_modules(modules: list[SourceModule], graph: dict[str, set[str]]) -> list[str]:
    imported = {
        t for source, targets in graph.items() if source.startswith("execrl.recipes.") for t in targets
    }
    return sorted(
        name
        for name in imported
        if "eval" in name.rsplit(".", 1)[-1] and name != "execrl.eval" and not name.startswith("execrl.eval.")
    )


# -- issue 22's counts ----------------------------------------------------------------------------------
def step_functions(modules: list[SourceModule]) -> list[dict[str, Any]]:
    out = []
    for module in modules:
        if not module.name.startswith("execrl.recipes."):
            continue
        for name, node in functions(module):
            if name.split(".")[-1] == "train_step" or name == "OneStepOff.__call__":
                out.append({"step": f"{module.name}.{name}", "lines": span(node)})
    return out


def config_names(modules: list[SourceModule]) -> tuple[set[str], set[str], set[str]]:
    """(section attribute names of ``TrainConfig``, section class names, their field names)."""
    sections: set[str] = set()
    classes: set[str] = set()
    fields: set[str] = set()
    for module in modules:
        if module.name != "execrl.config" and not module.name.startswith("execrl.config."):
            continue
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if not any(b.endswith("Section") or b == "BaseModel" for b in bases):
                continue
            names = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            if node.name == "TrainConfig":
                sections |= names
            else:
                classes.add(node.name)
                fields |= names
    return sections, classes, fields


def _chain(value: ast.expr) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"] (one wrapping call such as ``tuple(x.y)`` is looked through)."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    parts = []
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name) or not parts:
        return None
    return [value.id, *reversed(parts)]


def _section_aliases(func: Function, sections: set[str], classes: set[str]) -> set[str]:
    """Locals holding a config section (``alg = config.algorithm``, or a parameter of a section class)."""
    aliases = {
        arg.arg
        for arg in [*func.args.args, *func.args.kwonlyargs]
        if isinstance(arg.annotation, ast.Name) and arg.annotation.id in classes
    }
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (
                zip(target.elts, node.value.elts, strict=False)
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                else [(target, node.value)]
            )
            for name, value in pairs:
                chain = _chain(value)
                if isinstance(name, ast.Name) and chain and chain[-1] in sections:
                    aliases.add(name.id)
    return aliases


def mappers(modules: list[SourceModule]) -> list[dict[str, Any]]:
    sections, classes, fields = config_names(modules)

    def knob(value: ast.expr, aliases: set[str]) -> bool:
        chain = _chain(value)
        if chain is None or chain[-1] not in fields or chain[0] in ("self", "args"):
            return False
        return chain[0] in aliases or any(part in sections for part in chain[1:-1])

    out = []
    for module in modules:
        for name, node in functions(module):
            aliases = _section_aliases(node, sections, classes)
            for sub in ast.walk(node):
                if not isinstance(sub, ast.Call) or not call_name(sub).split(".")[-1][:1].isupper():
                    continue
                copied = sum(knob(v, aliases) for v in [*sub.args, *(k.value for k in sub.keywords)])
                if copied >= 3:
                    out.append(
                        {
                            "function": f"{module.name}.{name}",
                            "builds": call_name(sub),
                            "copied_fields": copied,
                        }
                    )
    return out


# -- report ---------------------------------------------------------------------------------------------
def measure(root: Path, *, trace: bool) -> dict[str, Any]:
    modules = load_modules(root / "src")
    graph = file_graph(modules)
    packages = package_graph(graph)
    by_path = {str(m.path.relative_to(root / "src" / "execrl")): m for m in modules}
    sizes = [(f"{m.name}.{n}", span(node)) for m in modules for n, node in functions(m)]
    report: dict[str, Any] = {
        "root": str(root),
        "source_files": len(modules),
        "source_lines": sum(m.lines for m in modules),
        "conversation_loops": conversation_loops(modules),
        "episode_types": episode_types(modules),
        "train_batch_builders": batch_builders(modules),
        "run_builders": run_builders(modules),
        "evaluation_modules": evaluation_modules(modules, graph),
        "file_circles": components(graph),
        "file_cycles": elementary_cycles(graph),
        "package_cycles": {
            " <-> ".join(c): sorted(e for a in c for b in c if a != b for e in packages[a].get(b, ()))
            for c in components(packages)
        },
        "recipe_lines": {f: (by_path[f].lines if f in by_path else None) for f in RECIPE_FILES},
        "files_over_500": sorted(
            ([str(m.path.relative_to(root)), m.lines] for m in modules if m.lines > FILE_LIMIT),
            key=lambda x: -x[1],
        ),
        "recipe_steps": step_functions(modules),
        "functions": len(sizes),
        "function_lines_median": statistics.median(s for _, s in sizes),
        "functions_over_60": sorted(([n, s] for n, s in sizes if s > FUNCTION_LIMIT), key=lambda x: -x[1]),
        "hand_mappers": mappers(modules),
    }
    if trace:
        report["trace"] = {recipe: traced_step(root, recipe) for recipe in RECIPES}
    return report


def _table(report: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        (title, str(len(report[key])))
        for key, title in (
            ("conversation_loops", "conversation loops"),
            ("episode_types", "episode types"),
            ("train_batch_builders", "train-batch builders"),
            ("run_builders", "run builders"),
            ("evaluation_modules", "evaluation modules"),
            ("file_circles", "file-level import circles (components)"),
            ("file_cycles", "file-level import circles (elementary cycles)"),
            ("package_cycles", "package cycles"),
        )
    ]
    rows += [
        (f"lines of {f}", str(n if n is not None else "absent")) for f, n in report["recipe_lines"].items()
    ]
    rows.append(("files over 500 lines", str(len(report["files_over_500"]))))
    for recipe, trace in report.get("trace", {}).items():
        rows.append((f"{recipe}: execrl files run before the loss", str(trace["distinct_files"])))
        rows.append(
            (
                f"{recipe}: file switches before the loss (distinct pairs)",
                f"{trace['switches']} ({trace['switch_pairs']})",
            )
        )
        rows.append((f"{recipe}: stack hops from execrl.cli.main to the loss", str(trace["hops"])))
    return rows


def print_report(report: dict[str, Any]) -> None:
    print(f"tree: {report['root']} ({report['source_files']} files, {report['source_lines']} lines)\n")
    rows = _table(report)
    width = max(len(title) for title, _ in rows)
    print(f"{'metric'.ljust(width)}  value\n{'-' * width}  -----")
    for title, value in rows:
        print(f"{title.ljust(width)}  {value}")
    for key in (
        "conversation_loops",
        "episode_types",
        "train_batch_builders",
        "run_builders",
        "evaluation_modules",
    ):
        print(f"\n{key.replace('_', ' ')}:")
        for item in report[key]:
            print(f"  {item}")
    print("\nfile-level import circles:")
    for cycle in report["file_cycles"]:
        print(f"  {' -> '.join([*cycle, cycle[0]])}")
    print("package cycles:")
    for cycle, edges in report["package_cycles"].items():
        print(f"  {cycle}: {'; '.join(edges)}")
    print("files over 500 lines:")
    for path, lines in report["files_over_500"]:
        print(f"  {lines:5d} {path}")
    for recipe, trace in report.get("trace", {}).items():
        print(f"\n{recipe}: stack at the first policy-loss call")
        for i, frame in enumerate(trace["chain"]):
            print(f"  {i:2d} {frame}")
        print(
            f"{recipe}: most frequent switches: "
            + "; ".join(f"{a} -> {b} x{n}" for a, b, n in trace["top_pairs"][:4])
        )
    print(
        "\nissue 22: lines in each recipe's step: "
        + ", ".join(f"{s['step']} {s['lines']}" for s in report["recipe_steps"])
    )
    print(
        f"issue 22: functions over 60 lines: {len(report['functions_over_60'])} of {report['functions']} "
        f"(median {report['function_lines_median']} lines); hand-written config mappers: "
        f"{len({m['function'] for m in report['hand_mappers']})} functions, {len(report['hand_mappers'])} calls"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--no-trace", action="store_true", help="skip the traced training steps")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    report = measure(args.root.resolve(), trace=not args.no_trace)
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
