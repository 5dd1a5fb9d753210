"""The ``functions`` suite: implement one Python function from a description, graded by calls.

About 770 template instances over 19 families (list, string and number basics, thresholds, list transforms
and statistics, sorting with keys, two pointers, string transforms, run-length encoding, parsing, number
theory, bits, dates, intervals, matrices, grouping, dynamic programming, recursion). Roughly a quarter are
difficulty 1 so that a 135M-parameter instruct model gets some reward from the first step.

The split is made per family over its parameter grid, so every test task is a parameterisation (a threshold,
a base, a step set, or for one-off templates a whole function) never seen in training.
"""

from __future__ import annotations

from execrl.tasks.schema import Task
from execrl.tasks.suites._common import check_split, split_pool
from execrl.tasks.suites._fn_basics import BASIC_TEMPLATES
from execrl.tasks.suites._fn_core import FunctionTemplate, Params, build_function_task
from execrl.tasks.suites._fn_lists import LIST_TEMPLATES
from execrl.tasks.suites._fn_numbers import NUMBER_TEMPLATES
from execrl.tasks.suites._fn_recursive import RECURSIVE_TEMPLATES
from execrl.tasks.suites._fn_strings import STRING_TEMPLATES
from execrl.tasks.suites._fn_structures import STRUCTURE_TEMPLATES

TEMPLATES: tuple[FunctionTemplate, ...] = (
    BASIC_TEMPLATES
    + LIST_TEMPLATES
    + STRING_TEMPLATES
    + NUMBER_TEMPLATES
    + STRUCTURE_TEMPLATES
    + RECURSIVE_TEMPLATES
)


def _pools() -> dict[str, list[tuple[FunctionTemplate, int, Params]]]:
    """Every (template, grid index, params) instance, grouped by family in a fixed order."""
    names = [t.name for t in TEMPLATES]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"function templates share names {duplicates}; task ids would collide")
    pools: dict[str, list[tuple[FunctionTemplate, int, Params]]] = {}
    for template in TEMPLATES:
        for index, params in enumerate(template.grid):
            pools.setdefault(template.family, []).append((template, index, params))
    return pools


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """Write one Python function from a description (19 families, graded by calls).

    Deterministic for ``seed``; ids like ``functions/sum_list/0000``.
    """
    chosen = check_split(split)
    tasks: list[Task] = []
    for family, pool in _pools().items():
        for _, (template, index, params) in split_pool(pool, seed, chosen, "functions", family):
            tasks.append(build_function_task(template, index, params, seed=seed, split=chosen))
    return tasks
