"""The audit's sampling and metrics (``execrl.rewards.audit``), with hand-computed values."""

from __future__ import annotations

import math

import pytest

from execrl.rewards import Score
from execrl.rewards.audit import AuditOutcome, audit_metrics, pick_for_audit
from execrl.sandbox.types import IOTest
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

AUDITED = Task(
    "t/a", "code", "p", CodeSpec(kind="stdio"), TaskMetadata("f"), (), (IOTest("h", "1", "1"),),
    audit_tests=(IOTest("a", "2", "2"),),
)  # fmt: skip
NO_AUDIT = Task("t/n", "code", "p", CodeSpec(kind="stdio"), TaskMetadata("f"), (), (IOTest("h", "1", "1"),))
PASS, FAIL = Score.success(), Score.failure("wrong_answer")


def test_only_passing_rows_with_an_audit_split_are_picked() -> None:
    tasks = [AUDITED, AUDITED, NO_AUDIT, AUDITED]
    scores = [PASS, FAIL, PASS, PASS]
    assert pick_for_audit(tasks, scores, share=1.0, seed="s") == [0, 3]
    assert pick_for_audit(tasks, scores, share=0.0, seed="s") == []


def test_share_is_exact_in_expectation_and_seeded() -> None:
    """0.1 x 5 eligible rows = 0.5: half the seeds audit one row, half none (stochastic rounding)."""
    tasks, scores = [AUDITED] * 5, [PASS] * 5
    counts = [len(pick_for_audit(tasks, scores, share=0.1, seed=str(s))) for s in range(2000)]
    assert set(counts) == {0, 1}
    assert abs(sum(counts) / len(counts) - 0.5) < 0.05
    assert pick_for_audit(tasks, scores, share=0.5, seed="x") == pick_for_audit(
        tasks, scores, share=0.5, seed="x"
    )
    with pytest.raises(ValueError, match="audit share"):
        pick_for_audit(tasks, scores, share=1.5, seed="x")


def test_metrics_by_hand() -> None:
    """10 auditable code rows, 6 reward-passing, 2 audited (1 passes): R = 0.6, A = 0.5, gap = 0.3.
    Two math rows without audit tests count for nothing but their domain's audited = 0."""
    outcome = AuditOutcome(
        domains=("code",) * 10 + ("math",) * 2,
        auditable=(True,) * 10 + (False,) * 2,
        reward_passed=(True,) * 6 + (False,) * 4 + (True, True),
        audit={0: PASS, 3: FAIL},
    )
    m = audit_metrics(outcome)
    assert m["audit/reward_pass_rate"] == pytest.approx(0.6)
    assert m["audit/pass_rate"] == 0.5 and m["audit/audited"] == 2.0
    assert m["audit/confirmed_pass_rate"] == pytest.approx(0.3) and m["audit/gap"] == pytest.approx(0.3)
    assert m["audit/code/gap"] == pytest.approx(0.3)
    assert m["audit/math/audited"] == 0.0 and "audit/math/reward_pass_rate" not in m


def test_nothing_audited_logs_no_audit_rate_and_no_gap() -> None:
    """A step that audited nothing must not log a gap of 0 (it would read as 'all is well')."""
    m = audit_metrics(AuditOutcome(("code",), (True,), (True,), {}))
    assert m["audit/reward_pass_rate"] == 1.0 and "audit/gap" not in m and "audit/pass_rate" not in m


def test_invalid_audit_scores_are_counted_not_averaged() -> None:
    m = audit_metrics(
        AuditOutcome(("c", "c"), (True, True), (True, True), {0: Score.invalid("sandbox_error"), 1: PASS})
    )
    assert m["audit/invalid"] == 1.0 and m["audit/pass_rate"] == 1.0 and math.isclose(m["audit/gap"], 0.0)
