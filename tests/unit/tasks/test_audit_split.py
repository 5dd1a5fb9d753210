"""``hold_back_audit``: which hidden tests become the audit split, and when a task gets none."""

from __future__ import annotations

import pytest

from execrl.sandbox.types import IOTest
from execrl.tasks.audit_split import hold_back_audit
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata, audit_view


def _task(hidden: int, visible: int = 1, task_id: str = "t/1") -> Task:
    tests = tuple(IOTest(f"h{i}", f"{i}\n", f"{i}\n") for i in range(hidden))
    return Task(task_id, "code", "p", CodeSpec(kind="stdio"), TaskMetadata("f"), tests[:visible], tests)


def test_a_quarter_of_the_movable_tests_is_held_back_never_a_visible_one() -> None:
    task = _task(hidden=9, visible=1)  # 8 movable -> floor(0.25 * 8) = 2 audit tests, 7 reward tests
    split = hold_back_audit(task)
    assert len(split.audit_tests) == 2 and len(split.hidden_tests) == 7
    assert split.visible_tests[0] in split.hidden_tests and split.visible_tests[0] not in split.audit_tests
    assert sorted(t.name for t in (*split.hidden_tests, *split.audit_tests)) == sorted(
        t.name for t in task.hidden_tests
    )


def test_split_is_a_function_of_the_task_id() -> None:
    """Re-importing a file must give the same split (a moving audit split would leak into the reward)."""
    assert hold_back_audit(_task(12)) == hold_back_audit(_task(12))


def test_too_few_tests_keep_everything_for_the_reward() -> None:
    """4 hidden (3 movable): floor(0.75) = 0 audit tests; 5 hidden would leave 3 reward tests + 1 audit."""
    assert hold_back_audit(_task(4)) == _task(4)
    split = hold_back_audit(_task(5))
    assert (len(split.hidden_tests), len(split.audit_tests)) == (4, 1)
    assert hold_back_audit(_task(5), min_reward_tests=5) == _task(5)


def test_bad_fraction_is_refused() -> None:
    with pytest.raises(ValueError, match="audit fraction"):
        hold_back_audit(_task(9), fraction=1.0)


def test_audit_view_scores_on_the_audit_tests_only() -> None:
    split = hold_back_audit(_task(9))
    view = audit_view(split)
    assert view.hidden_tests == split.audit_tests and view.visible_tests == () and view.id == split.id
    with pytest.raises(ValueError, match="no audit_tests"):
        audit_view(_task(3))
