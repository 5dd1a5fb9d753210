"""Repository tasks: a small multi-module project in which one function must be written, fixed or changed.

A ``Project`` is its files in their final (correct) state, read from the package's
``repository-projects/<name>/project/`` directory; each ``Target`` names one function and gives the
variants needed to make tasks from it: ``implement`` (the body is missing), ``fix`` (a buggy body is there)
and, where ``old`` is given, ``change`` (an older behaviour must be changed as ``change_request`` says).
The hidden tests run every test function of the project, so a candidate that passes its function's own
test but breaks a caller (the ``wrong`` variant) loses reward: that is the point of these tasks.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.resources
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable

from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Split, Task, TaskMetadata
from execrl.tasks.suites._common import fence, task_id

KINDS = ("implement", "fix", "change")


PROJECTS_DIR = "repository-projects"  # package data next to this module; not importable (the hyphen)
VARIANTS = ("wrong", "buggy", "old")


@dataclass(frozen=True)
class Target:
    module: str  # path of the module holding the function, e.g. "shop/money.py"
    function: str
    description: str  # what the function must do, as a sentence
    own_tests: tuple[str, ...]  # "tests/test_money.py::test_to_cents"
    change_request: str = ""  # with an ``old`` variant: what the ``change`` task asks for
    difficulty: int = 2
    # Read by ``load_project`` from ``variants/<function>/<variant>.py``:
    wrong: str = ""  # a version that passes its own tests but breaks a caller
    buggy: str = ""  # a version that fails its own tests (the starter of a ``fix`` task)
    old: str = ""  # an older version (the starter of a ``change`` task); empty for no change task


@dataclass(frozen=True)
class Project:
    name: str
    files: Mapping[str, str]
    targets: tuple[Target, ...]


def project_files(files: Mapping[str, str]) -> dict[str, str]:
    """``files`` plus the ``__init__.py`` of every package directory (not kept on disk: an ``__init__.py``
    there would make setuptools take the data directory for a package)."""
    out = dict(files)
    for path in list(out):
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            out.setdefault("/".join(parts[:depth]) + "/__init__.py", "")
    return out


def _read_tree(root: Traversable, prefix: str = "") -> dict[str, str]:
    """Every file under ``root`` as ``{relative/path: text}`` (bytecode caches skipped)."""
    out: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            out |= _read_tree(entry, f"{path}/")
        else:
            out[path] = entry.read_text(encoding="utf-8")
    return out


def load_project(name: str, targets: tuple[Target, ...], *, root: Traversable | None = None) -> Project:
    """Project ``name`` from the package's files, each target given its variants from ``variants/``.

    ``root`` (tests) replaces the package's ``repository-projects`` directory. A target without
    ``wrong.py`` or ``buggy.py``, or with ``old.py`` but no change request (or the reverse), or a variant
    file no target claims, raises ``ValueError`` naming the file.
    """
    if root is None:
        root = importlib.resources.files("execrl.tasks.suites").joinpath(PROJECTS_DIR)
    base = root.joinpath(name)
    variants = _read_tree(base.joinpath("variants"))
    claimed = {f"{t.function}/{kind}.py" for t in targets for kind in VARIANTS}
    if stray := sorted(set(variants) - claimed):
        raise ValueError(f"{PROJECTS_DIR}/{name}/variants: {stray} belong to no target")
    loaded = []
    for target in targets:
        code = {kind: variants.get(f"{target.function}/{kind}.py", "") for kind in VARIANTS}
        where = f"{PROJECTS_DIR}/{name}/variants/{target.function}"
        if not code["wrong"] or not code["buggy"]:
            raise ValueError(f"{where}: wrong.py and buggy.py are required")
        if bool(code["old"]) != bool(target.change_request):
            raise ValueError(f"{where}: old.py and a change_request go together")
        loaded.append(dataclasses.replace(target, wrong=code["wrong"], buggy=code["buggy"], old=code["old"]))
    return Project(name, _read_tree(base.joinpath("project")), tuple(loaded))


def _function_span(source: str, name: str, where: str) -> tuple[int, int]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            assert node.end_lineno is not None
            return node.lineno - 1, node.end_lineno
    raise ValueError(f"{where}: no top-level function {name!r}")


def replace_function(source: str, name: str, new_def: str, where: str) -> str:
    """``source`` with the top-level function ``name`` replaced by ``new_def`` (a whole ``def``)."""
    start, end = _function_span(source, name, where)
    lines = source.splitlines(keepends=True)
    return "".join(lines[:start]) + textwrap.dedent(new_def).strip("\n") + "\n" + "".join(lines[end:])


def stub_function(source: str, name: str, where: str) -> str:
    """``source`` with the body of ``name`` replaced by ``raise NotImplementedError`` (docstring kept)."""
    start, end = _function_span(source, name, where)
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines(keepends=True)
    first_body = node.body[0]
    has_doc = isinstance(first_body, ast.Expr) and isinstance(first_body.value, ast.Constant)
    keep_until = (first_body.end_lineno if has_doc else node.body[0].lineno - 1) or start + 1
    head = "".join(lines[start:keep_until])
    return "".join(lines[:start]) + head + "    raise NotImplementedError\n" + "".join(lines[end:])


def test_names(files: Mapping[str, str]) -> list[str]:
    """Every ``tests/...::test_x`` function of the project, in file order."""
    names = []
    for path in sorted(p for p in files if p.startswith("tests/") and p.endswith(".py")):
        for node in ast.parse(files[path]).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.append(f"{path}::{node.name}")
    return names


def code_test(name: str, files: Mapping[str, str]) -> CodeTest:
    """One test function of the project as a self-contained ``CodeTest``: its module's imports, constants
    and helpers, the function, and one call of it.

    Inlined rather than imported from the work directory so that the sandbox's assert rewriting
    (``execrl.sandbox.judge.asserts``) sees the asserts: they are judged by the parent, and a candidate cannot
    forge them (issue 9). The module's other test functions are left out (they are tests of their own).
    """
    path, function = name.split("::")
    module = ast.parse(files[path])
    keep = [
        node
        for node in module.body
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.name != function)
    ]
    code = ast.unparse(ast.Module(body=keep, type_ignores=[]))
    return CodeTest(name=name, code=f"{code}\n{function}()\n")


def _callers(files: Mapping[str, str], target: Target) -> list[str]:
    return sorted(
        p for p, text in files.items()
        if p != target.module and not p.startswith("tests/") and p.endswith(".py") and target.function in text
    )  # fmt: skip


def _instruction(target: Target, kind: str) -> str:
    fn = f"`{target.function}` in `{target.module}`"
    if kind == "implement":
        return f"Implement {fn}: {target.description}"
    if kind == "fix":
        return f"{fn} has a bug and the project's tests fail. It should work like this: {target.description} Fix it."
    return target.change_request


def build_repo_task(project: Project, target: Target, kind: str, index: int, *, split: Split) -> Task:
    files = project_files(project.files)
    where = f"repository/{project.name}/{target.function}"
    reference = files[target.module]
    if kind == "implement":
        starter = stub_function(reference, target.function, where)
    elif kind == "fix":
        starter = replace_function(reference, target.function, target.buggy, where)
    else:
        starter = replace_function(reference, target.function, target.old, where)
    wrong = replace_function(reference, target.function, target.wrong, where)
    shown = "\n\n".join(f"### {p}\n{fence(files[p])}" for p in _callers(files, target))
    prompt = (
        f"You are working on a small Python project. The file `{target.module}` currently reads:\n\n"
        f"{fence(starter)}\n\n"
        + (f"Other modules of the project use it:\n\n{shown}\n\n" if shown else "")
        + f"Task: {_instruction(target, kind)} Other modules and the project's tests call this code, so keep "
        "every name, parameter and return type they rely on working.\n\n"
        f"Reply with the complete new content of `{target.module}` in one ```python code block."
    )
    own = set(target.own_tests)
    if not own:
        raise ValueError(f"{where}: name the function's own tests; they become the visible tests")
    names = test_names(files)
    missing = own - set(names)
    if missing:
        raise ValueError(f"{where}: own tests {sorted(missing)} are not in the project's tests")
    return Task(
        id=task_id("repository", project.name, index),
        domain="code",
        prompt=prompt,
        spec=CodeSpec(
            kind="repository",
            files={p: text for p, text in files.items() if p != target.module},
            program_path=target.module,
            starter_code=starter,
        ),
        metadata=TaskMetadata(family=f"repo_{kind}", difficulty=target.difficulty, split=split),
        visible_tests=tuple(code_test(n, files) for n in names if n in own),
        hidden_tests=tuple(code_test(n, files) for n in names),
        reference_solution=fence(reference),
        wrong_solution=fence(wrong),
    )
