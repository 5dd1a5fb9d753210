"""``check_tasks``: references must pass, wrong answers must fail, tallied per family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from execrl.rewards import check_scorer
from execrl.sandbox.types import CodeTest, IOTest
from execrl.tasks import check_tasks, load_suite
from execrl.tasks.check import FamilyVerdict
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata


@dataclass(frozen=True)
class FakeScore:
    passed: bool
    valid: bool
    reason: str


def _fake_scorer(tasks: Sequence[Task], completions: Sequence[str], hidden: bool) -> list[FakeScore]:
    """A completion 'passes' if it contains GOOD; 'SANDBOX' makes an invalid score."""
    out = []
    for completion in completions:
        if "SANDBOX" in completion:
            out.append(FakeScore(False, False, "sandbox_error: pool died"))
        else:
            good = "GOOD" in completion or (not hidden and "VISIBLE_OK" in completion)
            out.append(FakeScore(good, True, "passed" if good else "wrong_answer"))
    return out


def _task(task_id: str, family: str, reference: str | None, wrong: str | None, visible: bool = False) -> Task:
    return Task(
        task_id,
        "code",
        "p",
        CodeSpec(kind="stdio"),
        TaskMetadata(family),
        visible_tests=(IOTest("v", "", ""),) if visible else (),
        hidden_tests=(IOTest("h", "", ""),),
        reference_solution=reference,
        wrong_solution=wrong,
    )


def test_all_good_family_is_ok() -> None:
    report = check_tasks(
        [_task("a", "f", "GOOD", "bad", visible=True), _task("b", "f", "GOOD", None)], scorer=_fake_scorer
    )
    assert report.ok and report.failures == ()
    assert report.families == (FamilyVerdict("f", 2, 2, 2, 1, 1, 1, 1),)


def test_failures_are_named_per_task_and_family() -> None:
    tasks = [
        _task("ref_fails", "f", "bad", "bad"),
        _task("wrong_passes", "g", "GOOD", "GOOD too"),
        _task("wrong_invalid", "g", "GOOD", "SANDBOX"),
        _task("no_solutions", "h", None, None),
    ]
    report = check_tasks(tasks, scorer=_fake_scorer)
    assert not report.ok
    by_id = {c.task_id: c for c in report.tasks}
    assert by_id["ref_fails"].reference == "failed: wrong_answer"
    assert by_id["wrong_passes"].wrong == "PASSED (the verifier accepts a wrong answer)"
    assert by_id["wrong_invalid"].wrong == "invalid: sandbox_error: pool died"
    assert (by_id["no_solutions"].reference, by_id["no_solutions"].wrong) == ("missing", "missing")
    assert [c.task_id for c in report.failures] == ["ref_fails", "wrong_passes", "wrong_invalid"]
    assert report.families == (
        FamilyVerdict("f", 1, 0, 1, 1, 1, 0, 0),
        FamilyVerdict("g", 2, 2, 2, 0, 2, 0, 0),
        FamilyVerdict("h", 1, 0, 0, 0, 0, 0, 0),
    )


def test_reference_must_also_pass_visible_tests() -> None:
    task = _task("v", "f", "GOOD but not VISIBLE", "bad", visible=True)

    def strict(tasks: Sequence[Task], completions: Sequence[str], hidden: bool) -> list[FakeScore]:
        return [
            FakeScore(hidden, True, "passed" if hidden else "wrong_answer: example_0") for _ in completions
        ]

    report = check_tasks([task], scorer=strict)
    assert report.tasks[0].visible == "failed: wrong_answer: example_0" and not report.ok


@pytest.mark.slow
def test_real_reward_path_on_a_few_humaneval_tasks() -> None:
    """End to end through execrl.rewards.score_batch and the sandbox (a handful of tasks)."""
    tasks = load_suite("humaneval", "test")[:3]
    extra = Task(
        "code/inline",
        "code",
        "Define f",
        CodeSpec(kind="function", entry_point="f"),
        TaskMetadata("inline"),
        hidden_tests=(CodeTest("t", "assert f(2) == 4"),),
        reference_solution="```python\ndef f(x):\n    return x * 2\n```",
        wrong_solution="```python\ndef f(x):\n    return x + 3\n```",
    )
    report = check_tasks([*tasks, extra], scorer=check_scorer)
    assert report.ok, report.failures
    assert {f.family: (f.reference_passed, f.wrong_failed) for f in report.families} == {
        "humaneval": (3, 3),
        "inline": (1, 1),
    }
