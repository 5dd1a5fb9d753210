"""Architecture numbers of an execrl tree: how far a reader travels from ``execrl train`` to the loss, and
where the code is large, tangled or copied (issue 22's measures, re-measured before and after a change).

    python scripts/arch_metrics.py                       # this checkout, with the traced step
    python scripts/arch_metrics.py --root /tmp/old-tree  # another checkout of execrl
    python scripts/arch_metrics.py --no-trace --json out.json

What is measured, and how:

* **hops from ``execrl train`` to the loss** (traced, not guessed): one real GRPO step runs in a
  subprocess, ``execrl train`` on a tiny random Llama (``rollout.models.tiny_model``, SmolLM2's
  tokenizer) for one step with the default recipe (evaluation off, small groups), under
  ``sys.setprofile``. When the policy loss registered under the run's ``algorithm.policy_loss``
  (``POLICY_LOSSES["ppo"]``) is first called, the execrl frames on the stack are read from
  ``execrl.cli.main`` down to the loss. Comprehension, generator-expression and lambda frames are
  skipped (they are syntax, not a function a reader opens). Hops = frames - 1. The chain is printed.
* **files touched by one step**: the execrl source files in which any function was called (on any
  thread of the trainer process) between entering and leaving the recipe's step, the first function
  named ``train_step`` in ``execrl.recipes`` (the sandbox's jailed children are other processes and do
  not count). Reported in all and for ``recipes/`` alone.
* **lines in each recipe's step**: ``def`` line to last line of every ``train_step`` in ``recipes/``,
  and of ``OneStepOff.__call__`` (the async step before issue 22), with the calls the step makes itself.
* **package cycles**: the import graph of every ``import``/``from`` statement in ``src/execrl``
  (module level, inside functions and under ``TYPE_CHECKING`` alike, as import-linter counts them),
  folded to packages (``execrl.<first part>``; a package's ``cli.py`` counts with ``execrl.cli``, the
  CLI layer that registers it); strongly connected components of more than one package, each with the
  module imports that close it.
* **files over 500 lines** (physical lines; sandbox files listed apart), **functions over 60 lines**
  (every ``def``, methods and nested ones included, ``def`` line to last line), and the median.
* **hand-written config mappers**: calls that pass at least three config knobs read one by one
  (``learning_rate=opt.learning_rate``, ``config.run.seed``: an attribute read that ends in a field of an
  ``execrl train`` config section and goes through a section, ``config.<section>.<field>``, or starts
  at a local holding one, ``alg = config.algorithm``): each such knob is written out a second time. ``dataclasses.replace`` and
  ``model_copy`` are not counted (they copy within one type). The functions holding them are listed.

Stdlib only (``ast``, ``subprocess``); the traced step needs the tree's own dependencies (torch,
transformers) and the sandbox, like ``execrl train``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

FILE_LIMIT = 500
FUNCTION_LIMIT = 60


@dataclass(frozen=True)
class Module:
    name: str  # execrl.recipes.grpo
    path: Path
    tree: ast.Module
    lines: int

    @property
    def package(self) -> str:
        return package_of(self.name)


def load_modules(src: Path) -> list[Module]:
    out = []
    for path in sorted((src / "execrl").rglob("*.py")):
        rel = path.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(not p.isidentifier() for p in parts):  # task-suite project files, not execrl modules
            continue
        text = path.read_text(encoding="utf-8")
        out.append(Module(".".join(parts), path, ast.parse(text), text.count("\n") + 1))
    return out


# -- import graph -----------------------------------------------------------------------------------------
def imported_modules(module: Module, known: set[str]) -> set[str]:
    """Every execrl module ``module`` imports (``from a import b`` counts a.b when that is a module)."""
    is_package = module.path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
    return {name for name in found if name.split(".")[0] == "execrl" and name != "execrl"}


def package_of(name: str) -> str:
    """``execrl.<first part>``; a package's command module (``execrl.<pkg>.cli``, which ``execrl.cli``
    loads by name to register its subcommands) counts with the CLI, ``execrl.cli``."""
    parts = name.split(".")
    if len(parts) == 3 and parts[2] == "cli":
        return "execrl.cli"
    return ".".join(parts[:2])


def package_graph(modules: list[Module]) -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> {"importer -> imported" module edges}."""
    known = {m.name for m in modules}
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module in modules:
        if module.name == "execrl":
            continue
        for target in imported_modules(module, known):
            if package_of(target) != module.package:
                graph[module.package][package_of(target)].add(f"{module.name} -> {target}")
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, {}):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


# -- sizes ----------------------------------------------------------------------------------------------
def functions(module: Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every def in the module, nested ones included."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                out.append((name, child))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(module.tree, "")
    return out


def span(node: ast.AST) -> int:
    return int(getattr(node, "end_lineno", 0)) - int(getattr(node, "lineno", 0)) + 1


def call_name(node: ast.Call) -> str:
    func = node.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def step_functions(modules: list[Module]) -> list[dict[str, object]]:
    out = []
    for module in modules:
        if not module.name.startswith("execrl.recipes."):
            continue
        for name, node in functions(module):
            if name.split(".")[-1] == "train_step" or name == "OneStepOff.__call__":
                calls = []
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call):
                        text = call_name(sub)
                        if text and text not in calls:
                            calls.append(text)
                out.append({"step": f"{module.name}.{name}", "lines": span(node), "calls": calls})
    return out


# -- hand-written mappers -------------------------------------------------------------------------------
def config_names(modules: list[Module]) -> tuple[set[str], set[str], set[str]]:
    """(section attribute names of ``TrainConfig``, section class names, their field names) from the
    pydantic classes of ``execrl.config``."""
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


def _section_aliases(func: ast.AST, sections: set[str], classes: set[str]) -> set[str]:
    """Local names holding a config section: ``alg = config.algorithm``, ``a, o = c.algorithm, c.optim``,
    or a parameter annotated with a section class."""
    aliases: set[str] = set()
    args = getattr(func, "args", None)
    for arg in [*(args.args if args else []), *(args.kwonlyargs if args else [])]:
        if isinstance(arg.annotation, ast.Name) and arg.annotation.id in classes:
            aliases.add(arg.arg)
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


def _knob(value: ast.expr, aliases: set[str], sections: set[str], fields: set[str]) -> bool:
    chain = _chain(value)
    if chain is None or chain[-1] not in fields or chain[0] in ("self", "args"):
        return False
    return chain[0] in aliases or any(part in sections for part in chain[1:-1])


def mappers(modules: list[Module]) -> list[dict[str, object]]:
    sections, classes, fields = config_names(modules)
    out = []
    for module in modules:
        for name, node in functions(module):
            aliases = _section_aliases(node, sections, classes)
            for sub in ast.walk(node):
                callee = call_name(sub).split(".")[-1] if isinstance(sub, ast.Call) else ""
                if not callee[:1].isupper():  # a constructor: a config object built field by field
                    continue
                values = [*sub.args, *(k.value for k in sub.keywords)]
                copied = sum(_knob(v, aliases, sections, fields) for v in values)
                if copied >= 3:
                    out.append(
                        {
                            "function": f"{module.name}.{name}",
                            "builds": call_name(sub),
                            "copied_fields": copied,
                            "lines": span(sub),
                        }
                    )
    return out


# -- the traced step ------------------------------------------------------------------------------------
_TRACE = r"""
import json, os, sys, threading
from pathlib import Path

src = Path(sys.argv[1]).resolve()
out_dir = Path(sys.argv[2])
from execrl.rollout.models import default_tokenizer, tiny_model

model_dir = out_dir / "tiny"
tiny_model(seed=0).save_pretrained(model_dir)
default_tokenizer().save_pretrained(model_dir)
from execrl.trainer.losses import POLICY_LOSSES

loss_code = POLICY_LOSSES.get("ppo").__code__
SKIP = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>"}
state = {"chain": None, "step_code": None, "files": set(), "recipe_files": set()}

def ours(code):
    try:
        return Path(code.co_filename).resolve().is_relative_to(src)
    except (OSError, ValueError):
        return False

def label(frame):
    name = frame.f_globals.get("__name__", "?")
    return f"{name}.{frame.f_code.co_qualname}"

def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if state["step_code"] is None and code.co_name == "train_step" and \
            frame.f_globals.get("__name__", "").startswith("execrl.recipes."):
        state["step_code"] = code
        state["in_step"] = frame
    if state.get("in_step") is not None and ours(code):
        state["files"].add(str(Path(code.co_filename).resolve().relative_to(src)))
    if code is loss_code and state["chain"] is None:
        chain, f = [], frame
        while f is not None:
            if ours(f.f_code) and f.f_code.co_name not in SKIP:
                chain.append(label(f))
            if f.f_code.co_name == "main" and f.f_globals.get("__name__") == "execrl.cli":
                break
            f = f.f_back
        state["chain"] = list(reversed(chain))

def profile_main(frame, event, arg):
    profile(frame, event, arg)
    if event == "return" and frame is state.get("in_step"):
        state["in_step_done"] = True
        state["in_step"] = None
        sys.setprofile(None)
        threading.setprofile(None)

from execrl.cli import main
threading.setprofile(profile)
sys.setprofile(profile_main)
rc = main([
    "train", "--no-progress",
    f"model.path={json.dumps(str(model_dir))}", f"run.output_dir={json.dumps(str(out_dir / 'runs'))}",
    "run.total_steps=1", "eval.enabled=false", "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=4", "rollout.max_new_tokens=16", "telemetry.tensorboard=false",
])
sys.setprofile(None)
threading.setprofile(None)
print("ARCH-TRACE " + json.dumps({
    "rc": rc, "chain": state["chain"], "step": state["step_code"] and state["step_code"].co_qualname,
    "files": sorted(state["files"]),
}))
"""


def traced_step(root: Path) -> dict[str, object]:
    src = root / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory(prefix="execrl-arch-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", _TRACE, str(src / "execrl"), tmp],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ARCH-TRACE ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"traced step failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    data: dict[str, object] = json.loads(lines[-1].removeprefix("ARCH-TRACE "))
    chain = data["chain"] or []
    files = data["files"]
    assert isinstance(chain, list) and isinstance(files, list)
    data["hops"] = len(chain) - 1
    data["files_touched"] = len(files)
    data["recipe_files_touched"] = sorted(f for f in files if f.startswith("recipes/"))
    return data


# -- report ---------------------------------------------------------------------------------------------
def measure(root: Path, *, trace: bool) -> dict[str, object]:
    modules = load_modules(root / "src")
    graph = package_graph(modules)
    found_cycles = cycles(graph)
    cycle_edges = {
        " <-> ".join(c): sorted(e for a in c for b in c if a != b for e in graph[a].get(b, ()))
        for c in found_cycles
    }
    big_files = sorted(
        ((str(m.path.relative_to(root)), m.lines) for m in modules if m.lines > FILE_LIMIT),
        key=lambda x: -x[1],
    )
    sizes = [(f"{m.name}.{n}", span(node)) for m in modules for n, node in functions(m)]
    long_functions = sorted(((n, s) for n, s in sizes if s > FUNCTION_LIMIT), key=lambda x: -x[1])
    report: dict[str, object] = {
        "root": str(root),
        "source_files": len(modules),
        "source_lines": sum(m.lines for m in modules),
        "package_cycles": len(found_cycles),
        "cycles": cycle_edges,
        "files_over_500": [f for f in big_files if "/sandbox/" not in f[0]],
        "sandbox_files_over_500": [f for f in big_files if "/sandbox/" in f[0]],
        "functions": len(sizes),
        "function_lines_median": statistics.median(s for _, s in sizes),
        "functions_over_60": long_functions,
        "recipe_steps": step_functions(modules),
        "hand_mappers": mappers(modules),
    }
    if trace:
        report["trace"] = traced_step(root)
    return report


def print_report(report: dict[str, object]) -> None:
    print(f"tree: {report['root']} ({report['source_files']} files, {report['source_lines']} lines)")
    trace = report.get("trace")
    if isinstance(trace, dict):
        print(f"hops from `execrl train` to the loss: {trace['hops']}")
        for i, frame in enumerate(trace["chain"]):
            print(f"  {i:2d} {frame}")
        print(f"files touched by one step ({trace['step']}): {trace['files_touched']}")
        print(
            f"  recipes/ files among them: {len(trace['recipe_files_touched'])} {trace['recipe_files_touched']}"
        )
    print("lines in each recipe's step:")
    for step in report["recipe_steps"]:  # type: ignore[attr-defined]
        print(f"  {step['lines']:4d} {step['step']}: calls {', '.join(step['calls'])}")
    print(f"package cycles: {report['package_cycles']}")
    for cycle, edges in report["cycles"].items():  # type: ignore[attr-defined]
        print(f"  {cycle}")
        for edge in edges:
            print(f"      {edge}")
    for key, title in (
        ("files_over_500", "files over 500 lines (outside the sandbox)"),
        ("sandbox_files_over_500", "sandbox files over 500 lines"),
    ):
        items = report[key]
        print(f"{title}: {len(items)}")  # type: ignore[arg-type]
        for path, lines in items:  # type: ignore[attr-defined]
            print(f"  {lines:5d} {path}")
    long = report["functions_over_60"]
    print(
        f"functions over 60 lines: {len(long)} of {report['functions']} "  # type: ignore[arg-type]
        f"(median {report['function_lines_median']} lines)"
    )
    for name, lines in long:  # type: ignore[attr-defined]
        print(f"  {lines:4d} {name}")
    maps = report["hand_mappers"]
    holders = {m["function"] for m in maps}  # type: ignore[attr-defined]
    print(f"hand-written config mappers: {len(holders)} functions, {len(maps)} calls")  # type: ignore[arg-type]
    for m in maps:  # type: ignore[attr-defined]
        print(
            f"  {m['function']} builds {m['builds']} ({m['copied_fields']} fields copied, {m['lines']} lines)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--no-trace", action="store_true", help="skip the traced training step")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    report = measure(args.root.resolve(), trace=not args.no_trace)
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
