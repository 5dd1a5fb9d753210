"""Alarm rules over the metric history, evaluated once per training step.

RL runs fail in a handful of recognisable ways (see the research notes, "run failure modes"): a NaN loss,
the policy drifting away from the reference (KL blow-up), entropy collapsing to a deterministic policy or
exploding into gibberish, reward collapsing after having been learned, response length running away
(often reward hacking through verbosity), the sandbox failing instead of the candidates, and throughput
dropping. Each is one ``AlarmRule`` of a small number of kinds:

- ``nonfinite``: the value is NaN or +-Inf.
- ``above`` / ``below``: the value is above / below ``threshold``; ``at_least``: at or above it.
- ``collapse``: below ``threshold`` after having been at or above it at some earlier step.
- ``relative_drop``: below ``threshold`` x the median of the previous ``window_steps`` finite values.
- ``blowup``: above ``threshold`` x the median of the first ``window_steps`` finite values.

For the first four, ``window_steps`` is how many consecutive steps the condition must hold. ``metric`` is
a name or a glob (``loss/*``), each matching metric tracked separately. An alarm fires once per episode:
it re-arms only after its condition has cleared, so a KL above the bound for 100 steps is one alarm.

Actions: every firing is a logger warning, a line in ``run_dir/alarms.jsonl`` and an ``alarm/<name>``
metric; ``webhook`` also POSTs the payload; ``stop`` also sets ``stop_requested`` so the loop checkpoints
and stops. Limits: rules see only logged scalars, at the cadence they are logged.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from execrl.telemetry.webhook import WebhookConfig, WebhookSender

__all__ = [
    "ALARM_ACTIONS",
    "ALARM_KINDS",
    "AlarmDecision",
    "AlarmEngine",
    "AlarmEvent",
    "AlarmRule",
    "alarm_rules_from_config",
    "default_alarm_rules",
    "reward_hacking_rules",
    "truncation_rules",
]

_log = logging.getLogger(__name__)

ALARM_KINDS: tuple[str, ...] = (
    "nonfinite",
    "above",
    "at_least",
    "below",
    "collapse",
    "relative_drop",
    "blowup",
)
ALARM_ACTIONS: tuple[str, ...] = ("log", "webhook", "stop")
_STREAK_KINDS = ("nonfinite", "above", "at_least", "below", "collapse")


@dataclass(frozen=True)
class AlarmRule:
    """One rule; see the module docstring for what ``threshold`` and ``window_steps`` mean per kind."""

    name: str
    kind: str
    metric: str
    threshold: float = 0.0
    window_steps: int = 1
    action: str = "log"

    def __post_init__(self) -> None:
        def bad(field_name: str, why: str) -> ValueError:
            return ValueError(f"alarm rule {self.name!r}: field '{field_name}' {why}")

        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise bad(
                "name", "must be non-empty letters, digits, _ or - (it becomes the metric alarm/<name>)"
            )
        if self.kind not in ALARM_KINDS:
            raise bad("kind", f"must be one of {', '.join(ALARM_KINDS)}; got {self.kind!r}")
        if self.action not in ALARM_ACTIONS:
            raise bad("action", f"must be one of {', '.join(ALARM_ACTIONS)}; got {self.action!r}")
        if "/" not in self.metric:
            raise bad(
                "metric", f"must be a namespaced metric name or glob like 'loss/*'; got {self.metric!r}"
            )
        if not isinstance(self.window_steps, int) or self.window_steps < 1:
            raise bad("window_steps", f"must be an integer >= 1; got {self.window_steps!r}")
        if not isinstance(self.threshold, int | float) or not math.isfinite(self.threshold):
            raise bad("threshold", f"must be a finite number; got {self.threshold!r}")
        if self.kind == "relative_drop" and not 0.0 < self.threshold < 1.0:
            raise bad(
                "threshold", f"is a fraction of the rolling median, must lie in (0, 1); got {self.threshold}"
            )
        if self.kind == "blowup" and self.threshold <= 1.0:
            raise bad(
                "threshold", f"is a growth factor over the early median, must be > 1; got {self.threshold}"
            )


def default_alarm_rules() -> tuple[AlarmRule, ...]:
    """Defaults for the metric names the execrl recipes log. Override by name in the config.

    The gradient-norm rule only logs: the trainer skips non-finite gradient steps itself, and a NaN loss
    (which does stop the run) catches the case where the parameters are already broken.
    """
    return (
        AlarmRule("loss_nonfinite", "nonfinite", "loss/*", action="stop"),
        AlarmRule("grad_norm_nonfinite", "nonfinite", "train/grad_norm"),
        AlarmRule("kl_high", "above", "kl/ref_mean", threshold=1.0, window_steps=2),
        AlarmRule("entropy_collapse", "below", "entropy/mean", threshold=0.05, window_steps=3),
        AlarmRule("entropy_explosion", "above", "entropy/mean", threshold=6.0, window_steps=3),
        AlarmRule("reward_collapse", "collapse", "reward/mean", threshold=0.05, window_steps=5),
        AlarmRule("sandbox_errors", "above", "sandbox/error_rate", threshold=0.2, window_steps=2),
        AlarmRule("response_length_high", "above", "rollout/response_length_mean", threshold=4096.0),
        AlarmRule(
            "response_length_blowup", "blowup", "rollout/response_length_mean", threshold=3.0, window_steps=5
        ),
        *truncation_rules(),
        AlarmRule("throughput_drop", "relative_drop", "perf/*tokens_per_s", threshold=0.5, window_steps=10),
        # A Ray executor retrying more than 1 task in 10 has workers dying or hanging (execrl.distributed).
        AlarmRule("executor_retries", "above", "executor/retry_rate", threshold=0.1),
        *reward_hacking_rules(),
    )


def truncation_rules() -> tuple[AlarmRule, ...]:
    """The silent-truncation failure (trl #5697): a length cap so small that nearly every completion is cut,
    so every reward, advantage, loss and gradient is 0 and nothing else says so. Either symptom staying for
    3 steps fires: ``rollout/truncation_rate`` >= 0.9, or ``rollout/zero_variance_share`` (groups whose
    rewards are all equal, so GRPO learns nothing from them) >= 0.95. Both only log by default; the fix
    is a larger ``rollout.max_new_tokens`` or the automatic length curriculum (``rollout.length_rise_*``).
    The default main job stays well below both (truncation 0.16-0.56, zero-variance share 0-0.75 over the
    12 steps of ``docs/runs/main-job-2026-12-01``).
    """
    return (
        AlarmRule("truncation_high", "at_least", "rollout/truncation_rate", threshold=0.9, window_steps=3),
        AlarmRule(
            "zero_variance_groups", "at_least", "rollout/zero_variance_share", threshold=0.95, window_steps=3
        ),
    )


def reward_hacking_rules() -> tuple[AlarmRule, ...]:
    """The audit and suspicious-behaviour rules (metrics of ``execrl.recipes.audit``).

    ``reward_audit_divergence`` watches ``audit/gap`` (and ``audit/<domain>/gap``): the estimated share of
    completions the reward passes but the held-back audit tests fail. It is 0 under a sound reward, so
    0.2 for 3 audited steps in a row is far from noise yet caught within a few steps of a reward going
    wrong (the toy proof in ``tests/integration/test_reward_hacking.py`` fired at steps 4, 5 and 6 in
    three runs, 0-based, at the default 10 % audit share; the test allows up to step 9). Steps that
    audited nothing log no gap and neither count nor break the streak. The ``hack/*`` rates only log:
    they are heuristics to read, see ``execrl.rewards.hacking``.
    """
    return (
        AlarmRule("reward_audit_divergence", "above", "audit/*gap", threshold=0.2, window_steps=3),
        AlarmRule("hack_early_exit", "above", "hack/early_exit_rate", threshold=0.1, window_steps=3),
        AlarmRule("hack_harness_access", "above", "hack/harness_access_rate", threshold=0.05, window_steps=2),
        AlarmRule(
            "hack_expected_output",
            "above",
            "hack/expected_output_literal_rate",
            threshold=0.1,
            window_steps=3,
        ),
        AlarmRule(
            "hack_special_case",
            "above",
            "hack/visible_input_special_case_rate",
            threshold=0.1,
            window_steps=3,
        ),
        AlarmRule("hack_judge_robustness", "above", "hack/judge_robustness_rate", threshold=0.0),
    )


_RULE_FIELDS = tuple(f.name for f in fields(AlarmRule))


def _rule_from_item(index: int, item: Mapping[str, Any], base: Mapping[str, AlarmRule]) -> AlarmRule | None:
    label = f"alarm rule #{index} ({item.get('name', '?')!r})"
    unknown = sorted(set(item) - set(_RULE_FIELDS) - {"enabled"})
    if unknown:
        raise ValueError(
            f"{label}: unknown field(s) {unknown}; valid fields: {', '.join(_RULE_FIELDS)}, enabled"
        )
    if item.get("enabled") is False:  # None (a config model's unset field) keeps the rule
        return None
    values = {k: v for k, v in item.items() if k != "enabled" and v is not None}  # None = not set
    if "name" not in values:
        raise ValueError(f"{label}: field 'name' is required")
    inherited = base.get(values["name"])
    if inherited is not None:  # a partial override of a default rule
        return replace(inherited, **values)
    missing = [f for f in ("kind", "metric") if f not in values]
    if values.get("kind", "nonfinite") != "nonfinite" and "threshold" not in values:
        missing.append("threshold")
    if missing:
        raise ValueError(f"{label}: field(s) {missing} are required for a new rule")
    return AlarmRule(**values)


def alarm_rules_from_config(
    items: Sequence[Mapping[str, Any]],
    *,
    include_defaults: bool = True,
    base: Sequence[AlarmRule] | None = None,
) -> tuple[AlarmRule, ...]:
    """Rules from config tables (``[[telemetry.alarms]]``), layered over ``base`` (default: the defaults).

    An item whose name matches a base rule overrides only the fields it sets (``{"name": "kl_high",
    "threshold": 0.5}``); ``enabled = false`` removes it; any other name adds a new rule. With
    ``include_defaults=False`` there is no base: every item must be a complete rule.
    """
    if not include_defaults:
        base = ()
    base_rules = {r.name: r for r in (default_alarm_rules() if base is None else base)}
    result = dict(base_rules)
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"alarm rule #{index}: expected a table of fields, got {type(item).__name__}")
        rule = _rule_from_item(index, item, base_rules)
        if rule is None:
            result.pop(str(item["name"]), None)
        else:
            result[rule.name] = rule
    return tuple(result.values())


@dataclass(frozen=True)
class AlarmEvent:
    """One firing of one rule on one metric."""

    run: str
    step: int
    rule: str
    kind: str
    metric: str
    value: float
    threshold: float
    action: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """Strict-JSON payload (the webhook body and the alarms.jsonl line); NaN/Inf value -> null."""
        finite = math.isfinite(self.value)
        return {
            "run": self.run,
            "step": self.step,
            "rule": self.rule,
            "kind": self.kind,
            "metric": self.metric,
            "value": self.value if finite else None,
            "value_text": repr(self.value) if not finite else None,
            "threshold": self.threshold,
            "action": self.action,
            "message": self.message,
        }


@dataclass(frozen=True)
class AlarmDecision:
    """What the training loop needs after a step: the firings, and whether to checkpoint and stop."""

    step: int
    fired: tuple[AlarmEvent, ...] = ()
    stop_requested: bool = False

    @property
    def metrics(self) -> dict[str, float]:
        """``alarm/<rule>`` = 1.0 for every rule that fired this step (to log alongside the step)."""
        return {f"alarm/{event.rule}": 1.0 for event in self.fired}


@dataclass
class _Track:
    """Per (rule, metric) state."""

    streak: int = 0
    armed: bool = True
    seen_ok: bool = False
    history: deque[float] = field(default_factory=deque)


def _condition(rule: AlarmRule, track: _Track, value: float) -> tuple[bool, str]:
    """Whether ``value`` is bad under ``rule`` given the history, and a short description. Updates history."""
    finite = math.isfinite(value)
    kind, thr, window = rule.kind, rule.threshold, rule.window_steps
    if kind == "nonfinite":
        return not finite, "is not finite"
    if kind == "above":
        return finite and value > thr, f"above {thr:g}"
    if kind == "at_least":
        return finite and value >= thr, f"at or above {thr:g}"
    if kind == "below":
        return finite and value < thr, f"below {thr:g}"
    if kind == "collapse":
        if finite and value >= thr:
            track.seen_ok = True
        return track.seen_ok and finite and value < thr, f"fell below {thr:g} after having been above it"
    if not finite:
        return False, ""
    if kind == "relative_drop":
        ref = statistics.median(track.history) if len(track.history) == window else None
        track.history.append(value)
        if len(track.history) > window:
            track.history.popleft()
        return ref is not None and value < thr * ref, f"below {thr:g} x rolling median {ref or 0:.4g}"
    # blowup: early median over the first `window` finite values, frozen afterwards
    ref = statistics.median(track.history) if len(track.history) == window else None
    if ref is None:
        track.history.append(value)
    return ref is not None and value > thr * ref, f"above {thr:g} x early median {ref or 0:.4g}"


class AlarmEngine:
    """Evaluates rules on each step's metrics and carries out their actions.

    ``observe`` never raises for delivery problems (webhook failures are logged). ``replay`` rebuilds rule
    state from earlier steps without acting, so a resumed run neither re-fires old alarms nor forgets
    what it has seen.
    """

    def __init__(
        self,
        rules: Sequence[AlarmRule],
        *,
        run_dir: str | Path | None = None,
        run_name: str = "",
        webhook: WebhookConfig | None = None,
    ) -> None:
        names = [r.name for r in rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"alarm rule names must be unique; duplicated: {dupes}")
        needs_hook = [r.name for r in rules if r.action == "webhook"]
        if needs_hook and webhook is None:
            raise ValueError(
                f"alarm rule(s) {needs_hook} use action 'webhook' but no webhook url is configured"
            )
        self.rules = tuple(rules)
        self.run_name = run_name or (Path(run_dir).name if run_dir else "")
        self.webhook = webhook
        self.sender = WebhookSender(webhook) if webhook is not None else None  # delivers off this thread
        self.alarms_path = Path(run_dir) / "alarms.jsonl" if run_dir is not None else None
        self._tracks: dict[tuple[str, str], _Track] = {}

    def _evaluate(self, step: int, metrics: Mapping[str, float]) -> list[AlarmEvent]:
        events: list[AlarmEvent] = []
        for rule in self.rules:
            for name in sorted(metrics):
                if name.startswith("alarm/") or not fnmatchcase(name, rule.metric):
                    continue
                track = self._tracks.setdefault((rule.name, name), _Track())
                value = metrics[name]
                bad, description = _condition(rule, track, value)
                track.streak = track.streak + 1 if bad else 0
                if not bad:
                    track.armed = True
                    continue
                needed = rule.window_steps if rule.kind in _STREAK_KINDS else 1
                if track.armed and track.streak >= needed:
                    track.armed = False
                    steps = f" for {track.streak} steps" if needed > 1 else ""
                    message = f"{rule.name}: {name} = {value:.4g} {description}{steps} (step {step})"
                    events.append(
                        AlarmEvent(
                            self.run_name,
                            step,
                            rule.name,
                            rule.kind,
                            name,
                            value,
                            rule.threshold,
                            rule.action,
                            message,
                        )
                    )
        return events

    def replay(self, step: int, metrics: Mapping[str, float]) -> None:
        """Update state with an already-seen step (resume) without logging or acting."""
        self._evaluate(step, metrics)

    def observe(self, step: int, metrics: Mapping[str, float]) -> AlarmDecision:
        events = self._evaluate(step, metrics)
        for event in events:
            self._act(event)
        return AlarmDecision(step, tuple(events), any(e.action == "stop" for e in events))

    def _act(self, event: AlarmEvent) -> None:
        _log.warning("ALARM %s", event.message)
        payload = event.to_json()
        if self.alarms_path is not None:
            self.alarms_path.parent.mkdir(parents=True, exist_ok=True)
            with self.alarms_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(payload, allow_nan=False) + "\n")
        # A stop is at least as urgent as a webhook rule: both are delivered when a webhook is configured.
        if event.action in ("webhook", "stop") and self.sender is not None:
            self.sender.submit(payload)  # never blocks: an alarm must not slow a training step

    def close(self) -> None:
        """Flush queued webhook deliveries (bounded; see ``WebhookSender.close``)."""
        if self.sender is not None:
            self.sender.close()
