"""Built-in suites' audit split: present where tests are generated, held back, and the reward unchanged."""

from __future__ import annotations

import hashlib
import json

import pytest

from execrl.tasks import load_suite
from execrl.tasks.serialize import task_to_dict


def _reward_fingerprint(suite: str) -> str:
    rows = []
    tasks = load_suite(suite, "test", seed=0)
    assert tasks
    for task in tasks:
        data = task_to_dict(task)
        data.pop("audit_tests", None)
        rows.append(json.dumps(data, sort_keys=True))
    return hashlib.sha256("".join(rows).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    ("suite", "before"), [("functions", "00ff1d1d97c70729"), ("stdio", "e12019b82776f882")]
)
def test_audit_split_leaves_the_reward_tests_as_they_were(suite: str, before: str) -> None:
    """Regression guard: adding audit tests must not move or redraw a single visible or hidden test.
    ``before`` is the fingerprint of the test split (seed 0) built before the audit split existed; change
    it only with a deliberate change of the suite's reward tests."""
    assert _reward_fingerprint(suite) == before


@pytest.mark.parametrize("suite", ["functions", "stdio"])
def test_every_generated_task_has_held_back_audit_tests(suite: str) -> None:
    for task in load_suite(suite, "test", seed=0):
        assert len(task.audit_tests) >= 3, task.id
        shown_or_scored = [*task.visible_tests, *task.hidden_tests]
        inputs = [getattr(t, "args", getattr(t, "stdin", None)) for t in shown_or_scored]
        for test in task.audit_tests:
            assert getattr(test, "args", getattr(test, "stdin", None)) not in inputs, (task.id, test.name)


@pytest.mark.parametrize("suite", ["math", "structured", "repository"])
def test_single_answer_suites_have_no_audit_split(suite: str) -> None:
    """One answer per task: nothing to hold back (``execrl tasks check`` lists these tasks)."""
    assert not any(task.audit_tests for task in load_suite(suite, "test", seed=0))
