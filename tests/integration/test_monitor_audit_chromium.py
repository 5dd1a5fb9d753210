"""The live monitor draws the reward pass rate and the audit-confirmed pass rate in one card."""

import re
import subprocess
from pathlib import Path

import pytest

from execrl.telemetry import default_alarm_rules
from execrl.telemetry.monitor import start_monitor_in_thread
from execrl.telemetry.run import RunTelemetry

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (scripts/setup.sh --system)"),
]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def test_reward_and_audit_curves_side_by_side(tmp_path: Path) -> None:
    run = tmp_path / "run-audit"
    with RunTelemetry(run, rules=default_alarm_rules(), tensorboard=False) as tel:
        for step in range(8):
            rate = 0.1 * step
            tel.log(step, {"reward/mean": rate, "audit/reward_pass_rate": rate, "audit/confirmed_pass_rate": 0.0,
                           "audit/gap": rate, "audit/pass_rate": 0.0, "hack/early_exit_rate": 0.0})  # fmt: skip
    handle = start_monitor_in_thread(run)
    try:
        cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
        dom = subprocess.run([*cmd, "--dump-dom", handle.url], capture_output=True, timeout=60, check=True)
    finally:
        handle.close()
    html = dom.stdout.decode()
    card = re.search(r"<h3>Reward vs audit</h3>.*?</div>", html, re.DOTALL)
    assert card is not None, "no 'Reward vs audit' card"
    assert "reward_pass_rate" in card.group(0) and "confirmed_pass_rate" in card.group(0)
    assert "<h3>Suspicious behaviour</h3>" in html
    assert "reward_audit_divergence" in html  # the alarm list shows the divergence (gap > 0.2 from step 3)
