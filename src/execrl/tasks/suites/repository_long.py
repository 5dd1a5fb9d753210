"""The ``repository-long`` suite: the ``repository`` tasks at long-context prompt sizes (2k-8k tokens).

Why: RL prompts in practice carry "codebase dependencies" (issue 26), and the short suites (119-204-token
prompts) exercise none of the memory a long prompt needs. Each task here is a ``repository`` task (the same
targets, kinds, starters, reference and wrong answers) whose repository is its project plus 1-6 of the
other seven projects as further packages, and whose prompt shows every file of that repository: all
modules and all tests, then the module to change. Sizes, in SmolLM2 tokens (seed 0): 1,892-7,684 in train
(median 4,076), 2,111-7,518 in test, so the prompt plus a completion fits SmolLM2-135M's 8,192.

Reward ("compatibility with existing modules"): the hidden tests are the test functions of the whole
repository; the change must keep every one passing. Audit split (held back from the reward, re-run on
passing samples by ``execrl.rewards.audit``): a quarter of the project's test functions, seeded by the task
id, among those that call neither the target function nor any function that calls it (transitively, by
name), so the wrong answer (which breaks a caller) still fails the reward. Since the reply replaces the
whole module, these audit the module's other functions (and the rest of the project) the reward no longer
scores; a task with fewer than 4 such tests gets no audit split. Limits: the audit tests are files of the
codebase, so the prompt shows them, as a real repository would.
The split matches ``repository``'s for the same seed (a test task there is a test task here).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import random
from collections.abc import Mapping

from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Task
from execrl.tasks.suites._common import check_split, fence, split_pool, task_id
from execrl.tasks.suites._repo_core import (
    Project,
    Target,
    build_repo_task,
    code_test,
    project_files,
    test_names,
)
from execrl.tasks.suites.repository import _pool, projects

__all__ = ["AUDIT_FRACTION", "MAX_COMPANIONS", "build", "repository_files"]

MAX_COMPANIONS = 6  # other projects added to a task's repository: 1 .. 6 (about 2k .. 7k tokens)
AUDIT_FRACTION = 0.25


def _companions(project: Project, index: int) -> list[Project]:
    """1 + (index mod 6) of the other projects, in a rotation starting after ``project``."""
    others = [p for p in projects() if p.name != project.name]
    count = 1 + index % MAX_COMPANIONS
    start = sum(map(ord, project.name)) % len(others)
    return [others[(start + i) % len(others)] for i in range(count)]


def repository_files(project: Project, companions: list[Project]) -> dict[str, str]:
    """The merged repository: ``project``'s files as they are, each companion's tests under
    ``tests/<name>/`` (test files of different projects share names); raises on any other path clash."""
    files = dict(project.files)
    for other in companions:
        for path, text in other.files.items():
            moved = f"tests/{other.name}/{path[len('tests/') :]}" if path.startswith("tests/") else path
            if moved in files:
                raise ValueError(
                    f"repository-long: {other.name}'s {path} clashes with {moved} of {project.name}"
                )
            files[moved] = text
    return files


def _dependents(files: Mapping[str, str], function: str) -> set[str]:
    """``function`` and every top-level function of the repository's modules that calls it, directly or
    through another such function (by name: a same-named function elsewhere only adds to the set)."""
    uses: dict[str, set[str]] = {}
    for path, text in files.items():
        if path.startswith("tests/") or not path.endswith(".py"):
            continue
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef):
                uses.setdefault(node.name, set()).update(_names(node))
    found, grew = {function}, True
    while grew:
        more = {name for name, used in uses.items() if used & found} - found
        found, grew = found | more, bool(more)
    return found


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _audit_names(
    files: Mapping[str, str], tests: Mapping[str, CodeTest], project: Project, target: Target, tid: str
) -> set[str]:
    """A quarter of the project's test functions that touch neither the target nor anything calling it
    (so they are not what catches the wrong answer), seeded by the task id; none when too few."""
    touched = _dependents(files, target.function)
    movable = [
        name
        for name in test_names(project_files(project.files))
        if name not in target.own_tests and not _names(ast.parse(tests[name].code)) & touched
    ]
    return set(random.Random(f"audit:{tid}").sample(movable, math.floor(AUDIT_FRACTION * len(movable))))


def _long_task(project: Project, target: Target, kind: str, index: int, task: Task) -> Task:
    assert isinstance(task.spec, CodeSpec)  # build_repo_task's
    repo = repository_files(project, _companions(project, index))
    files = project_files(repo)
    shown = "\n\n".join(
        f"### {p}\n{fence(files[p])}" for p in sorted(files) if p != target.module and files[p]
    )
    short_prompt = task.prompt
    tail = short_prompt[short_prompt.index("Task: ") :]
    prompt = (
        f"You are working on a Python repository of several packages. Its files are:\n\n{shown}\n\n"
        f"The file `{target.module}` currently reads:\n\n{fence(task.spec.starter_code)}"
        f"\n\n{tail}"
    )
    names = test_names(files)
    tid = task_id("repository-long", project.name, index)
    tests = {name: code_test(name, files) for name in names}
    audit_names = _audit_names(files, tests, project, target, tid)
    return dataclasses.replace(
        task,
        id=tid,
        prompt=prompt,
        spec=dataclasses.replace(task.spec, files={p: t for p, t in files.items() if p != target.module}),
        hidden_tests=tuple(tests[n] for n in names if n not in audit_names),
        audit_tests=tuple(tests[n] for n in names if n in audit_names),
    )


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """The ``repository`` tasks of ``split`` with long, whole-repository prompts (module docstring).

    Deterministic for ``seed``; ids like ``repository-long/shop/0003``.
    """
    chosen = check_split(split)
    return [
        _long_task(project, target, kind, index, build_repo_task(project, target, kind, index, split=chosen))
        for _, (project, target, kind, index) in split_pool(_pool(), seed, chosen, "repository")
    ]
