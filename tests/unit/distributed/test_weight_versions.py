"""The weight-version rule of the Ray executor (``distributed/versions.py``) and the per-step log, with
hand-worked sequences: serial loop, serial with slack, and the one-step-off loop's pinned versions."""

from __future__ import annotations

import pytest

from execrl.distributed.faults import FaultCounters, StepLog
from execrl.distributed.versions import WeightChoice, WeightVersions


def test_serial_loop_sends_each_new_version_once_and_generates_with_the_newest() -> None:
    versions = WeightVersions(max_staleness=0)
    versions.publish(0, "ref0")
    assert versions.choose("w", step=0, pinned=None) == WeightChoice(0, 0, "ref0")
    assert versions.choose("w", step=0, pinned=None) == WeightChoice(0, 0, None)  # held: nothing to send
    versions.publish(1, "ref1")
    assert versions.choose("w", step=1, pinned=None) == WeightChoice(1, 1, "ref1")
    assert versions.choose("fresh replica", step=1, pinned=None) == WeightChoice(1, 1, "ref1")


def test_slack_lets_a_worker_keep_weights_inside_the_bound() -> None:
    versions = WeightVersions(max_staleness=1)
    versions.publish(0, "ref0")
    versions.choose("w", step=0, pinned=None)
    versions.publish(1, "ref1")
    assert versions.choose("w", step=1, pinned=None) == WeightChoice(0, 0, None)  # 1 - 0 <= 1: kept
    versions.publish(2, "ref2")
    assert versions.choose("w", step=2, pinned=None) == WeightChoice(2, 1, "ref2")  # 2 - 0 > 1: newest sent


def test_the_async_loop_generates_with_exactly_the_pinned_version() -> None:
    """Step t+1 is sampled with version t while t+1 is already published (the driver's update finished
    first): the worker must still use t, as the in-process behaviour copy does."""
    versions = WeightVersions(max_staleness=1)
    versions.publish(0, "ref0")
    assert versions.choose("w", step=0, pinned=0) == WeightChoice(0, -1, "ref0")
    assert versions.choose("w", step=1, pinned=0) == WeightChoice(0, 0, None)
    versions.publish(1, "ref1")
    versions.publish(2, "ref2")  # published before step 2's rollout asked for version 1
    assert versions.choose("w", step=2, pinned=1) == WeightChoice(1, 1, "ref1")
    assert versions.latest == 2


def test_a_version_older_than_the_bound_is_refused_naming_the_key() -> None:
    versions = WeightVersions(max_staleness=0)
    versions.publish(1, "ref1")
    with pytest.raises(
        ValueError,
        match=r"step 2 would generate with weights version 1, older than executor.max_weight_staleness=0",
    ):
        versions.choose("w", step=2, pinned=None)
    with pytest.raises(ValueError, match=r"weights version 0, older"):
        versions.choose("w", step=1, pinned=0)


def test_versions_no_call_can_use_are_dropped_and_asking_for_one_names_what_is_kept() -> None:
    versions = WeightVersions(max_staleness=1)
    for v in range(4):
        versions.publish(v, f"ref{v}")
    with pytest.raises(ValueError, match=r"weights version 4 was not published \(have \[2, 3\]\)"):
        versions.choose("w", step=4, pinned=4)


def test_step_log_metrics_report_the_oldest_version_and_the_worst_staleness() -> None:
    log = StepLog(FaultCounters(tasks=4, retries=1), versions_used=[3, 2], staleness=[1, 2], weight_pushes=2)
    assert log.metrics() == {
        "executor/tasks": 4.0,
        "executor/retries": 1.0,
        "executor/retry_rate": 0.25,
        "executor/replaced_workers": 0.0,
        "executor/failed_tasks": 0.0,
        "executor/lost_episodes": 0.0,
        "executor/weight_version_used_min": 2.0,
        "executor/weight_staleness_max": 2.0,
        "executor/weight_pushes": 2.0,
    }
