"""The proof of the reward audit: a gamed reward raises ``reward_audit_divergence``, a sound one does not.

The tiny random model trains on the test-driven toy domain (``toy_domain.audited_tasks``). Its reward
tests only ask for words starting with a capital A-F, which a constant output satisfies; with strict audit
tests (a task-specific answer word) the reward rises while the audit pass rate stays at 0, and the alarm
must fire within ``STEPS_TO_ALARM`` steps. With sound audit tests (the same property) the same run
raises no divergence alarm: the audit confirms every reward pass. Default audit settings throughout
(``audit.share`` = 0.1 of the reward-passing completions per step).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_domain import TESTED_DOMAIN, audited_tasks, toy_overrides

from execrl.config import load_config
from execrl.recipes.grpo import train
from execrl.tasks import save_tasks
from execrl.telemetry import read_metrics
from execrl.telemetry.reader import merge_rows

STEPS = 12
STEPS_TO_ALARM = 10  # the alarm must fire at a step index below this (the gap needs 3 audited steps > 0.2)


def _run(
    tiny_model_dir: Path, tmp_path: Path, *, sound: bool, extra: tuple[str, ...] = ()
) -> tuple[list[dict[str, float]], list[dict]]:
    tasks_file = tmp_path / "tested.jsonl"
    save_tasks(
        audited_tasks(16, "train", sound=sound) + audited_tasks(8, "test", sound=sound), str(tasks_file)
    )
    overrides = [
        *toy_overrides(tiny_model_dir, tasks_file, tmp_path / "runs"),
        f'reward.verifiers={{{TESTED_DOMAIN}="toy_domain:TESTED_VERIFIER"}}',
        f"run.total_steps={STEPS}",
        "eval.enabled=false",
        *extra,
    ]
    outcome = train(load_config(None, overrides), progress=False)
    rows = [row.metrics for row in merge_rows(read_metrics(outcome.run_dir))]
    alarms_path = outcome.run_dir / "alarms.jsonl"
    alarms = (
        [json.loads(line) for line in alarms_path.read_text().splitlines()] if alarms_path.exists() else []
    )
    return rows, alarms


@pytest.mark.slow
def test_gamed_reward_rises_audit_does_not_and_the_alarm_fires(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows, alarms = _run(tiny_model_dir, tmp_path, sound=False)
    reward_pass = [r["audit/reward_pass_rate"] for r in rows]
    assert len(reward_pass) == STEPS
    assert sum(reward_pass[-3:]) / 3 > sum(reward_pass[:3]) / 3 + 0.3, reward_pass  # the reward rises
    audit_pass = [r["audit/pass_rate"] for r in rows if "audit/pass_rate" in r]
    assert audit_pass and max(audit_pass) == 0.0, audit_pass  # the audit never agrees
    fired = [a["step"] for a in alarms if a["rule"] == "reward_audit_divergence"]
    print(f"steps-to-alarm: {fired}; reward pass rate per step: {reward_pass}")
    assert fired and fired[0] < STEPS_TO_ALARM, (fired, reward_pass)


@pytest.mark.slow
def test_sound_reward_raises_no_divergence_alarm(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows, alarms = _run(tiny_model_dir, tmp_path, sound=True)
    reward_pass = [r["audit/reward_pass_rate"] for r in rows]
    assert sum(reward_pass[-3:]) / 3 > sum(reward_pass[:3]) / 3 + 0.3, reward_pass  # same rise as above
    audit_pass = [r["audit/pass_rate"] for r in rows if "audit/pass_rate" in r]
    assert audit_pass and min(audit_pass) == 1.0, audit_pass  # every audited pass is confirmed
    assert [a for a in alarms if a["rule"] == "reward_audit_divergence"] == []
    shares = sorted(r["perf/audit_share"] for r in rows)
    print(f"audit share of step: median {shares[len(shares) // 2]:.4f}, max {shares[-1]:.4f}")
    assert shares[-1] < 0.5  # sanity; the goal is measured by `execrl bench audit` and the run's metrics


@pytest.mark.slow
def test_eval_audits_every_reward_passing_sample_and_the_report_has_a_hack_section(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    _run(tiny_model_dir, tmp_path, sound=False, extra=("run.total_steps=2", "eval.enabled=true"))
    (run_dir,) = (tmp_path / "runs").iterdir()
    for label in ("base", "trained"):
        suites = json.loads((run_dir / "eval" / f"{label}.json").read_text())["suites"]
        assert suites, f"{label}.json evaluated no suite"
        for suite in suites.values():
            passed = sum(sum(t["passed"]) for t in suite["tasks"])
            assert suite["audit"]["audit/audited"] == passed  # share 1 at eval: every pass re-run
            if passed:
                assert suite["audit"]["audit/pass_rate"] == 0.0  # the strict audit never agrees
    report = (run_dir / "report.md").read_text()
    assert "Hack: reward audit and suspicious behaviour" in report
