import json
import math

import pytest

from execrl.telemetry.alarms import (
    ALARM_KINDS,
    AlarmEngine,
    AlarmRule,
    alarm_rules_from_config,
    default_alarm_rules,
)
from execrl.telemetry.webhook import WebhookConfig


def fire_steps(rule, values, metric=None):
    """Feed values at steps 0.. and return the steps where the rule fired."""
    engine = AlarmEngine([rule])
    steps = []
    for step, value in enumerate(values):
        if engine.observe(step, {metric or rule.metric: value}).fired:
            steps.append(step)
    return steps


def test_nonfinite_fires_once_per_episode_and_rearms():
    rule = AlarmRule("nan", "nonfinite", "loss/*", action="stop")
    assert fire_steps(rule, [1.0, math.nan, math.nan, 0.5, math.inf], metric="loss/total") == [1, 4]


def test_nonfinite_requests_stop_and_reports_alarm_metric():
    engine = AlarmEngine([AlarmRule("nan", "nonfinite", "loss/*", action="stop")])
    assert not engine.observe(0, {"loss/total": 1.0}).stop_requested
    decision = engine.observe(1, {"loss/total": math.nan, "reward/mean": 0.1})
    assert decision.stop_requested
    assert decision.metrics == {"alarm/nan": 1.0}
    assert decision.fired[0].metric == "loss/total"


def test_above_needs_consecutive_steps():
    rule = AlarmRule("kl", "above", "kl/mean", threshold=1.0, window_steps=2)
    # 2.0 once (streak 1), back to 0.5, then 2.0, 3.0 -> fires at the second consecutive step (4)
    assert fire_steps(rule, [0.1, 2.0, 0.5, 2.0, 3.0, 4.0]) == [4]


def test_below_and_nan_is_not_below():
    rule = AlarmRule("ent", "below", "entropy/mean", threshold=0.1)
    assert fire_steps(rule, [1.0, math.nan, 0.05, 0.01, 0.5, 0.05]) == [2, 5]


def test_collapse_only_after_having_been_above():
    rule = AlarmRule("rc", "collapse", "reward/mean", threshold=0.5, window_steps=2)
    # starts low (never above yet: no alarm), rises, then falls for 2 steps -> fires at step 5
    assert fire_steps(rule, [0.0, 0.0, 0.0, 0.8, 0.1, 0.1, 0.1]) == [5]


def test_relative_drop_against_rolling_median():
    rule = AlarmRule("tp", "relative_drop", "perf/tokens_per_s", threshold=0.5, window_steps=3)
    # window [100, 110, 90] median 100: 40 < 50 fires at step 3; at step 4 the window is
    # [110, 90, 40] median 90: 44 < 45 is still bad (same episode, no new firing)
    assert fire_steps(rule, [100, 110, 90, 40, 44, 200]) == [3]


def test_blowup_against_early_median():
    rule = AlarmRule("len", "blowup", "rollout/response_length_mean", threshold=3.0, window_steps=3)
    # early median of [10, 30, 20] is 20; 61 > 60 fires; 59 clears; 70 fires again
    assert fire_steps(rule, [10, 30, 20, 60, 61, 59, 70]) == [4, 6]


def test_alarms_jsonl_and_message(tmp_path):
    engine = AlarmEngine([AlarmRule("kl", "above", "kl/mean", threshold=1.0)], run_dir=tmp_path)
    engine.observe(7, {"kl/mean": 2.5})
    (line,) = (tmp_path / "alarms.jsonl").read_text().splitlines()
    payload = json.loads(line)
    assert payload["run"] == tmp_path.name and payload["step"] == 7 and payload["rule"] == "kl"
    assert payload["value"] == 2.5 and payload["threshold"] == 1.0
    assert payload["message"] == "kl: kl/mean = 2.5 above 1 (step 7)"


def test_nonfinite_payload_is_strict_json(tmp_path):
    engine = AlarmEngine([AlarmRule("nan", "nonfinite", "loss/total")], run_dir=tmp_path)
    engine.observe(0, {"loss/total": math.inf})
    payload = json.loads((tmp_path / "alarms.jsonl").read_text())
    assert payload["value"] is None and payload["value_text"] == "inf"


def test_glob_tracks_each_metric_separately():
    engine = AlarmEngine([AlarmRule("nan", "nonfinite", "loss/*")])
    d = engine.observe(0, {"loss/policy": math.nan, "loss/value": math.nan, "reward/mean": math.nan})
    assert sorted(e.metric for e in d.fired) == ["loss/policy", "loss/value"]


def test_replay_carries_state_without_acting(tmp_path):
    rule = AlarmRule("kl", "above", "kl/mean", threshold=1.0)
    engine = AlarmEngine([rule], run_dir=tmp_path)
    engine.replay(0, {"kl/mean": 5.0})  # fired before the crash; still in the same episode
    assert not engine.observe(1, {"kl/mean": 5.0}).fired
    assert not (tmp_path / "alarms.jsonl").exists()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "sideways"}, "kind"),
        ({"action": "email"}, "action"),
        ({"metric": "loss"}, "metric"),
        ({"window_steps": 0}, "window_steps"),
        ({"kind": "relative_drop", "threshold": 2.0}, "threshold"),
        ({"kind": "blowup", "threshold": 0.5}, "threshold"),
        ({"threshold": math.nan}, "threshold"),
    ],
)
def test_rule_validation_names_rule_and_field(kwargs, field):
    args = {"name": "r1", "kind": "above", "metric": "kl/mean", **kwargs}
    with pytest.raises(ValueError, match=rf"alarm rule 'r1': field '{field}'"):
        AlarmRule(**args)


def test_engine_rejects_duplicates_and_webhook_without_url():
    rule = AlarmRule("a", "above", "kl/mean")
    with pytest.raises(ValueError, match="duplicated"):
        AlarmEngine([rule, rule])
    with pytest.raises(ValueError, match="no webhook url"):
        AlarmEngine([AlarmRule("h", "above", "kl/mean", action="webhook")])
    with pytest.raises(ValueError, match="http"):
        WebhookConfig(url="ftp://example")


def test_defaults_are_valid_and_unique():
    rules = default_alarm_rules()
    assert len({r.name for r in rules}) == len(rules)
    assert {r.kind for r in rules} == set(ALARM_KINDS)
    AlarmEngine(rules)


def test_config_overrides_adds_and_disables():
    rules = alarm_rules_from_config(
        [
            {"name": "kl_high", "threshold": 0.5},
            {"name": "throughput_drop", "enabled": False},
            {"name": "len_cap", "kind": "above", "metric": "rollout/response_length_max", "threshold": 512},
        ]
    )
    by_name = {r.name: r for r in rules}
    assert by_name["kl_high"].threshold == 0.5 and by_name["kl_high"].window_steps == 2
    assert "throughput_drop" not in by_name
    assert by_name["len_cap"].threshold == 512


def test_rules_from_the_config_model_survive_its_unset_enabled_field():
    """Regression: the recipe passes ``AlarmConfig.model_dump()``, whose unset ``enabled`` is None; that
    was read as "disabled", so every user-added rule in a config file was silently dropped."""
    from execrl.config import TrainConfig

    config = TrainConfig.model_validate(
        {
            "telemetry": {
                "alarms": [{"name": "len_cap", "kind": "above", "metric": "rollout/x", "threshold": 3}]
            }
        }
    )
    dumped = [a.model_dump() for a in config.telemetry.alarms]
    assert dumped[0]["enabled"] is None
    names = {r.name for r in alarm_rules_from_config(dumped)}
    assert "len_cap" in names


def test_config_errors_name_the_rule_and_field():
    with pytest.raises(ValueError, match=r"alarm rule #0 \('kl_high'\): unknown field\(s\) \['treshold'\]"):
        alarm_rules_from_config([{"name": "kl_high", "treshold": 0.5}])
    with pytest.raises(ValueError, match=r"alarm rule #0 \('new'\): field\(s\) \['kind'\] are required"):
        alarm_rules_from_config([{"name": "new", "metric": "kl/mean"}])


def test_config_none_means_unset_and_threshold_is_required_for_new_threshold_rules():
    """Regression: pydantic model_dump() writes threshold=None for unset fields; that must not crash."""
    (rule,) = alarm_rules_from_config(
        [{"name": "nan", "kind": "nonfinite", "metric": "loss/*", "threshold": None}], include_defaults=False
    )
    assert rule.threshold == 0.0
    with pytest.raises(ValueError, match=r"\['threshold'\] are required"):
        alarm_rules_from_config([{"name": "hi", "kind": "above", "metric": "kl/mean", "threshold": None}])
    with pytest.raises(ValueError, match="field 'threshold' must be a finite number"):
        AlarmRule("r", "above", "kl/mean", threshold="high")
