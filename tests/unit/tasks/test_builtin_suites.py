"""Built-in generator suites: valid, round-trip through JSONL, and not contaminated with HumanEval."""

from __future__ import annotations

import importlib

import pytest

from execrl.tasks import load_suite, overlap_report, task_from_dict, task_to_dict


def _builtin_names() -> list[str]:
    try:
        module = importlib.import_module("execrl.tasks.suites")
    except ModuleNotFoundError:
        return []
    return sorted(getattr(module, "BUILTIN_SUITES", {}))


BUILTINS = _builtin_names()


@pytest.mark.slow
@pytest.mark.skipif(not BUILTINS, reason="execrl.tasks.suites.BUILTIN_SUITES is not available yet")
@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_suite_is_clean_against_humaneval(name: str) -> None:
    humaneval = load_suite("humaneval", "test")
    for split in ("train", "test"):
        tasks = load_suite(name, split)  # validates every task
        assert tasks, f"{name}/{split} is empty"
        assert all(task_from_dict(task_to_dict(t)) == t for t in tasks)
        report = overlap_report(tasks, humaneval, n=13)
        assert report.clean, report.flagged[:5]
