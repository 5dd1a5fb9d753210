import json
import math

from execrl.telemetry.alarms import AlarmRule
from execrl.telemetry.reader import merge_rows, read_alarms, read_metrics
from execrl.telemetry.run import RunTelemetry
from execrl.telemetry.webhook import WebhookConfig, post_json

RULES = [
    AlarmRule("nan", "nonfinite", "loss/*", action="stop"),
    AlarmRule("kl", "above", "kl/mean", threshold=1.0),
]


def test_log_records_metrics_alarms_and_stop(tmp_path):
    with RunTelemetry(tmp_path, rules=RULES, tensorboard=False) as tel:
        assert not tel.log(0, {"loss/total": 1.0, "kl/mean": 0.1}).stop_requested
        decision = tel.log(1, {"loss/total": math.nan, "kl/mean": 0.1})
    assert decision.stop_requested
    rows = merge_rows(read_metrics(tmp_path))
    assert rows[1].metrics["alarm/nan"] == 1.0 and math.isnan(rows[1].metrics["loss/total"])
    assert [a["rule"] for a in read_alarms(tmp_path)] == ["nan"]


def test_resume_drops_later_alarms_and_keeps_episode_state(tmp_path):
    with RunTelemetry(tmp_path, rules=RULES, tensorboard=False) as tel:
        tel.log(0, {"kl/mean": 2.0})  # fires
        tel.log(1, {"kl/mean": 0.5})  # clears
        tel.log(2, {"kl/mean": 3.0})  # fires again, but we resume from step 1
    assert [a["step"] for a in read_alarms(tmp_path)] == [0, 2]
    with RunTelemetry(tmp_path, rules=RULES, tensorboard=False, resume_from_step=1) as tel:
        assert [a["step"] for a in read_alarms(tmp_path)] == [0]
        assert tel.log(2, {"kl/mean": 3.0}).fired  # re-armed at step 1, so it fires again
    assert [r.step for r in merge_rows(read_metrics(tmp_path))] == [0, 1, 2]


def test_webhook_failure_is_logged_not_raised(caplog):
    # port 9 on localhost: nothing listens, connection refused at once
    config = WebhookConfig(url="http://127.0.0.1:9/hook", timeout_s=0.5, retries=1, backoff_s=0.0)
    assert post_json(config, {"x": 1}) is False
    assert "giving up after 2 attempts" in caplog.text


def test_webhook_failure_does_not_stop_observe(tmp_path):
    config = WebhookConfig(url="http://127.0.0.1:9/hook", timeout_s=0.5, retries=0)
    rule = AlarmRule("hook", "above", "kl/mean", threshold=1.0, action="webhook")
    with RunTelemetry(tmp_path, rules=[rule], webhook=config, tensorboard=False) as tel:
        decision = tel.log(0, {"kl/mean": 2.0})
    assert decision.fired and not decision.stop_requested
    assert json.loads((tmp_path / "alarms.jsonl").read_text())["rule"] == "hook"
