"""Carve a held-back audit split out of a task's hidden tests (for importers and users' own files).

Why: a reward computed on the same tests for a whole run is a fixed target that RL will eventually game
(special-casing inputs, printing what the checker wants). Tests the reward never sees, re-run on a sample
of the completions the reward passed, tell whether the reward still measures what it says
(``execrl.rewards.audit``). Moving tests out of the reward weakens the reward a little, so a task keeps at
least ``min_reward_tests`` reward tests and gets no audit split when it has too few; a visible test is never
moved (an audit test the model saw in its prompt audits nothing). The choice is seeded by the task id, so
re-importing a file gives the same split. Built-in suites do not use this: they generate extra audit
tests instead, so their reward tests stay what they were.
"""

from __future__ import annotations

import dataclasses
import math
import random

from execrl.tasks.schema import Task

__all__ = ["AUDIT_FRACTION", "MIN_REWARD_TESTS", "hold_back_audit"]

AUDIT_FRACTION = 0.25  # share of the movable hidden tests that becomes the audit split
MIN_REWARD_TESTS = 3  # hidden tests a task keeps for its reward at the least


def hold_back_audit(
    task: Task, *, fraction: float = AUDIT_FRACTION, min_reward_tests: int = MIN_REWARD_TESTS
) -> Task:
    """``task`` with ``floor(fraction x movable hidden tests)`` of them moved to ``audit_tests``.

    Movable = hidden and not visible. A task that already has audit tests, or that would keep fewer than
    ``min_reward_tests`` reward tests, or would get no audit test at all, is returned unchanged.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"audit fraction must lie in (0, 1); got {fraction!r}")
    if task.audit_tests:
        return task
    movable = [i for i, test in enumerate(task.hidden_tests) if test not in task.visible_tests]
    count = min(math.floor(fraction * len(movable)), len(task.hidden_tests) - min_reward_tests)
    if count < 1:
        return task
    chosen = set(random.Random(f"audit:{task.id}").sample(movable, count))
    keep = tuple(t for i, t in enumerate(task.hidden_tests) if i not in chosen)
    audit = tuple(t for i, t in enumerate(task.hidden_tests) if i in chosen)
    return dataclasses.replace(task, hidden_tests=keep, audit_tests=audit)
