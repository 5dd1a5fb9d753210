"""Built-in generator suites: valid, round-trip through JSONL, and not contaminated with HumanEval."""

from __future__ import annotations

import pytest

from execrl.tasks import load_suite, overlap_report, task_from_dict, task_to_dict
from execrl.tasks.suites import BUILTIN_SUITES

# Imported, not looked up: a missing or renamed BUILTIN_SUITES must fail collection, never skip the suite
# checks silently (an earlier version skipped "while not available yet").
BUILTINS = sorted(BUILTIN_SUITES)


def test_builtin_suites_exist() -> None:
    """Regression: an empty registry would parametrize the test below over nothing and pass vacuously."""
    assert {"functions", "math", "repository", "stdio", "structured"} <= set(BUILTINS), BUILTINS


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_suite_is_clean_against_humaneval(name: str) -> None:
    humaneval = load_suite("humaneval", "test")
    for split in ("train", "test"):
        tasks = load_suite(name, split)  # validates every task
        assert tasks, f"{name}/{split} is empty"
        assert all(task_from_dict(task_to_dict(t)) == t for t in tasks)
        report = overlap_report(tasks, humaneval, n=13)
        assert report.clean, report.flagged[:5]
