"""The default truncation alarms (``execrl.telemetry.alarms.truncation_rules``): the trl #5697 failure, a cap
so small that nearly every completion is cut and every reward is 0, must not stay silent."""

from __future__ import annotations

import json
from pathlib import Path

from execrl.telemetry.alarms import AlarmEngine, default_alarm_rules

MAIN_JOB = Path(__file__).parents[3] / "docs" / "runs" / "main-job-2026-12-01" / "metrics.jsonl"


def _fired(rows: list[dict[str, float]]) -> list[tuple[int, str]]:
    engine = AlarmEngine(default_alarm_rules())
    out = []
    for step, metrics in enumerate(rows):
        out += [(step, e.rule) for e in engine.observe(step, metrics).fired]
    return out


def test_fires_on_a_cap_far_too_small() -> None:
    """Every completion cut and every group's rewards equal: both rules fire on the third step, once."""
    rows = [{"rollout/truncation_rate": 1.0, "rollout/zero_variance_share": 1.0}] * 6
    assert _fired(rows) == [(2, "truncation_high"), (2, "zero_variance_groups")]


def test_exactly_the_threshold_counts_and_a_dip_resets_the_streak() -> None:
    rows = [{"rollout/truncation_rate": r} for r in (0.9, 0.9, 0.5, 0.9, 0.9, 0.9)]
    assert _fired(rows) == [(5, "truncation_high")]


def test_quiet_on_the_default_main_job() -> None:
    """The logged metrics of the README's main job (truncation 0.16-0.56) fire neither rule."""
    rows = [json.loads(line) for line in MAIN_JOB.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "rollout/truncation_rate" in r]
    assert len(rows) >= 10
    fired = {rule for _, rule in _fired(rows)}
    assert not fired & {"truncation_high", "zero_variance_groups"}
