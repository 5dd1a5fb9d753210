"""The ``stdio`` suite: competitive-style programs that read stdin and print to stdout.

About 120 Python problem instances (arrays, strings, simulations, number queries, grids, dynamic
programming, and float answers compared with tolerance) plus a dozen C++17 tasks that reuse the tests of a
Python problem, so that the C++ compile-and-run path of the sandbox is exercised by every reward check.
The split is per family over the parameter grids; the C++ tasks are split on their own.
"""

from __future__ import annotations

from execrl.tasks.schema import Task
from execrl.tasks.suites._common import check_split, split_pool
from execrl.tasks.suites._stdio_arrays import ARRAY_PROBLEMS
from execrl.tasks.suites._stdio_core import Params, StdioProblem, build_stdio_task
from execrl.tasks.suites._stdio_cpp import CPP_VARIANTS
from execrl.tasks.suites._stdio_more import MORE_PROBLEMS
from execrl.tasks.suites._stdio_text import TEXT_AND_FLOAT_PROBLEMS

PROBLEMS: tuple[StdioProblem, ...] = ARRAY_PROBLEMS + TEXT_AND_FLOAT_PROBLEMS + MORE_PROBLEMS


def _by_name() -> dict[str, StdioProblem]:
    out: dict[str, StdioProblem] = {}
    for problem in PROBLEMS:
        if problem.name in out:
            raise ValueError(f"two stdio problems are named {problem.name!r}; task ids would collide")
        out[problem.name] = problem
    return out


def _pools() -> dict[str, list[tuple[StdioProblem, int, Params]]]:
    pools: dict[str, list[tuple[StdioProblem, int, Params]]] = {}
    for problem in PROBLEMS:
        for index, params in enumerate(problem.grid):
            pools.setdefault(problem.family, []).append((problem, index, params))
    return pools


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """Stdin/stdout programs in Python and C++17, graded by output comparison.

    Deterministic for ``seed``; ids like ``stdio/aggregate/0003`` and ``stdio/knapsack_cpp/0000``.
    """
    chosen = check_split(split)
    tasks: list[Task] = []
    for family, pool in _pools().items():
        for _, (problem, index, params) in split_pool(pool, seed, chosen, "stdio", family):
            tasks.append(build_stdio_task(problem, index, params, seed=seed, split=chosen))
    problems = _by_name()
    for _, variant in split_pool(CPP_VARIANTS, seed, chosen, "stdio", "cpp"):
        problem = problems[variant.problem]
        params = problem.grid[variant.grid_index]
        tasks.append(
            build_stdio_task(problem, variant.grid_index, params, seed=seed, split=chosen, cpp=variant)
        )
    return tasks
