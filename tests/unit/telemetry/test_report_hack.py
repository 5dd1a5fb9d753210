"""The report's ``hack`` section and the reward-vs-audit panel, from a run directory written by hand."""

from __future__ import annotations

import json
from pathlib import Path

from execrl.telemetry import default_alarm_rules
from execrl.telemetry.hacking import read_flagged, top_flagged
from execrl.telemetry.plots import panel_metrics
from execrl.telemetry.report import write_report
from execrl.telemetry.run import RunTelemetry


def _record(step: int, row: int, flags: list[str], completion: str = "print(42)") -> str:
    record = {
        "step": step,
        "row": row,
        "task_id": f"t/{row}",
        "domain": "code",
        "flags": flags,
        "reward": 1.0,
        "reward_reason": "passed",
        "audit_reason": "wrong_answer: audit_1: expected 3, got 42" if "audit_failed" in flags else None,
        "completion": completion,
    }
    return json.dumps(record)


def _gamed_run(run_dir: Path) -> None:
    """Reward pass rate rising 0.2 -> 0.9, audit pass rate 0: the divergence rule fires at step 3."""
    with RunTelemetry(run_dir, rules=default_alarm_rules(), tensorboard=False) as tel:
        for step, rate in enumerate((0.2, 0.3, 0.5, 0.7, 0.9)):
            tel.log(
                step,
                {
                    "audit/reward_pass_rate": rate,
                    "audit/pass_rate": 0.0,
                    "audit/gap": rate,
                    "audit/confirmed_pass_rate": 0.0,
                    "hack/flagged_rate": 0.1,
                    "reward/mean": rate,
                },
            )
    (run_dir / "hack.jsonl").write_text(
        "\n".join([_record(1, 0, ["early_exit"]), _record(2, 3, ["audit_failed", "expected_output_literal"],
                   "print('hard | coded')"), _record(1, 0, ["early_exit", "harness_access"])]) + "\n{torn"
    )  # fmt: skip


def test_hack_section_lists_the_divergence_and_the_top_flagged_completions(tmp_path: Path) -> None:
    _gamed_run(tmp_path)
    md = write_report(tmp_path).read_text()
    section = md.split("Hack: reward audit and suspicious behaviour", 1)[1]
    assert "reward_audit_divergence fired at steps [3]" in section  # gaps 0.5, 0.7, 0.9 > 0.2 from step 2
    assert "gap 90.0%" in section and "audit pass rate of reward-passing samples 0.0%" in section
    lines = [line for line in section.splitlines() if line.startswith("| ") and "t/" in line]
    assert "t/3" in lines[0] and "audit_failed" in lines[0] and "hard \\| coded" in lines[0]  # worst first
    assert "t/0" in lines[1] and "early_exit, harness_access" in lines[1]  # the resumed duplicate: last kept
    assert len(lines) == 2


def test_read_flagged_raises_on_a_bad_line_that_is_not_the_last(tmp_path: Path) -> None:
    (tmp_path / "hack.jsonl").write_text("nope\n" + _record(0, 0, []) + "\n")
    try:
        read_flagged(tmp_path)
    except ValueError as exc:
        assert "hack.jsonl:1" in str(exc)
    else:
        raise AssertionError("a corrupt middle line must raise")
    assert top_flagged([], 3) == []


def test_reward_and_audit_curves_share_one_panel() -> None:
    groups = dict((p.title, m) for p, m in panel_metrics(
        ["audit/reward_pass_rate", "audit/confirmed_pass_rate", "audit/gap", "audit/code/gap", "hack/early_exit_rate"]
    ))  # fmt: skip
    assert groups["Reward vs audit"] == ["audit/confirmed_pass_rate", "audit/gap", "audit/reward_pass_rate"]
    assert groups["Suspicious behaviour"] == ["hack/early_exit_rate"]
