"""``execrl.retry.backoff_delay``: the one backoff rule; the executor's retry policy and the webhook use it."""

from __future__ import annotations

import pytest

from execrl.distributed.faults import RetryPolicy
from execrl.retry import backoff_delay
from execrl.telemetry import webhook


def test_doubles_from_the_base_and_stops_at_the_cap() -> None:
    assert [backoff_delay(a, base_s=0.2, max_s=1.0) for a in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]
    assert backoff_delay(11, base_s=0.25) == 256.0  # uncapped by default
    with pytest.raises(ValueError, match="attempt counts from 1"):
        backoff_delay(0, base_s=1.0)


def test_the_executor_policy_waits_by_the_rule() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_s=0.2, backoff_max_s=0.5)
    assert [policy.delay(a) for a in (1, 2, 3)] == [0.2, 0.4, 0.5]


def test_the_webhook_waits_by_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(webhook.time, "sleep", slept.append)
    monkeypatch.setattr(webhook, "_attempt", lambda config, body: "HTTP 503")
    config = webhook.WebhookConfig(url="http://127.0.0.1:9/hook", retries=3, backoff_s=0.25)
    assert webhook.post_json(config, {"alarm": "x"}) is False
    assert slept == [0.25, 0.5, 1.0]  # after attempts 1, 2 and 3; none after the last
