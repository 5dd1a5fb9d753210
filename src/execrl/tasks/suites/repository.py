"""The ``repository`` suite: change one function of a small multi-module project without breaking callers.

Eight projects (a shop, text statistics, a task tracker, a grade book, a warehouse, a config reader, a
ledger and a library desk), each with 2-3 modules and a test package. Every target function yields an
``implement`` task and a ``fix`` task, and some a ``change`` task (add a parameter, make a limit
configurable): 69 tasks. Hidden tests run all of the project's test functions; the visible tests are the
function's own. Each wrong answer passes the function's own tests but breaks a caller (a float where an int
was expected, a renamed or now-required parameter, a mutated argument, a swallowed exception), which is
exactly the failure that per-function unit tests cannot see.

The seed only decides which tasks are held out for ``test`` (the projects are hand-written). The projects
are real files in the package (``repository-projects/<name>/project/`` and ``.../variants/``), so ruff and
the tests read them; their targets are listed in ``_repo_targets``.
"""

from __future__ import annotations

import functools

from execrl.tasks.schema import Task
from execrl.tasks.suites._common import check_split, split_pool
from execrl.tasks.suites._repo_core import Project, Target, build_repo_task, load_project
from execrl.tasks.suites._repo_targets import TARGETS


@functools.cache
def projects() -> tuple[Project, ...]:
    """The eight projects, read from the package's files on first use (not at import)."""
    return tuple(load_project(name, targets) for name, targets in TARGETS.items())


def _pool() -> list[tuple[Project, Target, str, int]]:
    """(project, target, kind, index within the project) for every task, in a fixed order."""
    pool = []
    for project in projects():
        index = 0
        for target in project.targets:
            for kind in ("implement", "fix", "change"):
                if kind == "change" and not target.old:
                    continue
                pool.append((project, target, kind, index))
                index += 1
    return pool


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """Change one function of a small multi-module project without breaking its callers.

    Deterministic for ``seed``; ids like ``repository/shop/0003``.
    """
    chosen = check_split(split)
    return [
        build_repo_task(project, target, kind, index, split=chosen)
        for _, (project, target, kind, index) in split_pool(_pool(), seed, chosen, "repository")
    ]
