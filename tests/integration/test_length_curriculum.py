"""The length curriculum and the truncation alarm through the real CLI (issue 26).

A cap of 2 new tokens is far too small: the tiny random model is cut on nearly every completion. The
automatic rise doubles the cap after each such step (up to 16), the cap is logged as
``rollout/max_new_tokens``, and a run killed with SIGKILL and resumed with ``--resume`` equals the
uninterrupted one bit for bit (guards against a cap that is not checkpointed: the resumed run would sample
steps 2-3 with the configured 2 tokens instead of the raised cap). The default ``truncation_high`` alarm
fires on the same run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_train_cli import EXECRL, _env, _run_dir
from test_train_resume_exact import assert_same_run, sigkill_then_resume
from toy_domain import toy_overrides


@pytest.mark.slow
def test_rising_cap_survives_sigkill_resume_and_truncation_alarm_fires(
    tiny_model_dir: Path, toy_tasks_file: Path, second_domain: Path, tmp_path: Path
) -> None:
    base = toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path)
    suites = f'tasks.suites={{"{toy_tasks_file}"=0.7, "{second_domain}"=0.3}}'
    common = [*base, suites, "run.total_steps=4", "checkpoint.every_steps=1", "checkpoint.keep_last=5",
              "eval.enabled=false", "rollout.max_new_tokens=2", "rollout.length_rise_factor=2",
              "rollout.length_rise_truncation=0.5", "rollout.length_rise_window_steps=1",
              "rollout.length_rise_max_tokens=16", "algorithm.overlong_filtering=true"]  # fmt: skip
    straight_out, killed_out = tmp_path / "straight", tmp_path / "killed"
    straight = subprocess.run([*EXECRL, "train", "--no-progress", *common, f"run.output_dir={straight_out}"],
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    killed_dir = sigkill_then_resume([*common, f"run.output_dir={killed_out}"], killed_out)
    rows = assert_same_run(_run_dir(straight_out), killed_dir, total_steps=4)
    rates = [r["rollout/truncation_rate"] for r in rows]
    assert all(rate > 0.5 for rate in rates[:3]), rates
    assert [r["rollout/max_new_tokens"] for r in rows] == [2.0, 4.0, 8.0, 16.0]
    assert all(r["perf/peak_rss_mb"] > 0 for r in _metrics(killed_dir))
    assert all(0.0 <= r["train/padding_share"] < 1.0 for r in rows)
    assert min(rates[:3]) >= 0.9, rates  # the alarm's condition holds for its 3 steps
    alarms = [json.loads(x) for x in (killed_dir / "alarms.jsonl").read_text().splitlines()]
    assert [a["step"] for a in alarms if a["rule"] == "truncation_high"] == [2]


def _metrics(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if "reward/mean" in r]
