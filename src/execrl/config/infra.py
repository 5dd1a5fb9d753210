"""``[executor]`` and ``[telemetry]``: where generate-and-score runs, and the run's metrics and alarms."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from execrl.config.base import Section


class ExecutorSection(Section):
    """Where generate-and-score runs (``execrl.distributed``). Resources are per role so a user can place
    them on a Ray cluster; the trainer driver is the ``execrl train`` process itself."""

    kind: Literal["inprocess", "ray"] = Field(
        "inprocess", description="inprocess: this process (default); ray: rollout and sandbox actors"
    )
    ray_address: str | None = Field(
        None, description="ray: an existing cluster (e.g. 10.0.0.1:6379); unset = local"
    )
    rollout_workers: int = Field(
        1, ge=1, description="ray: rollout actors, each with an engine and a model replica"
    )
    rollout_num_cpus: float = Field(1.0, ge=0, description="ray: CPUs reserved per rollout actor")
    rollout_num_gpus: float = Field(0.0, ge=0, description="ray: GPUs reserved per rollout actor")
    sandbox_workers: int = Field(1, ge=1, description="ray: sandbox actors, each scoring next to its sandbox")
    sandbox_num_cpus: float = Field(1.0, ge=0, description="ray: CPUs reserved per sandbox actor")
    max_weight_staleness: int = Field(
        0,
        ge=0,
        description="ray: no sample of step s comes from weights older than version s - this "
        "(updates behind the trainer when consumed); algorithm.async_steps=1 needs >= 1",
    )
    max_attempts: int = Field(3, ge=1, description="ray: attempts per task (a dead worker is replaced first)")
    retry_backoff_s: float = Field(0.2, ge=0, description="ray: first backoff, doubled per attempt")
    task_timeout_s: float = Field(
        600.0, gt=0, description="ray: a task running longer counts as a hung worker"
    )


class AlarmSection(Section):
    """One alarm rule. Naming a default rule (see ``execrl.telemetry.default_alarm_rules``) overrides only
    the fields given here (``enabled=false`` removes it); any other name adds a rule."""

    name: str = Field(description="a default rule's name (override it) or a new one (add a rule)")
    kind: str | None = Field(
        None, description="nonfinite | above | below | collapse | relative_drop | blowup"
    )
    metric: str | None = Field(None, description="metric name or glob, e.g. kl/ref_mean or loss/*")
    threshold: float | None = Field(None, description="the bound (a factor for relative_drop and blowup)")
    window_steps: int | None = Field(
        None, description="steps the condition must hold (or the median's window)"
    )
    action: Literal["log", "webhook", "stop"] | None = Field(
        None, description="log | webhook (also POSTs telemetry.webhook_url) | stop (checkpoint and stop)"
    )
    enabled: bool | None = Field(None, description="false removes a default rule")


class TelemetrySection(Section):
    """Metric sinks (metrics.jsonl always), the alarm rules and their webhook."""

    tensorboard: bool = Field(True, description="also write TensorBoard event files")
    mlflow: bool = Field(False, description="also log to MLflow (extra: execrl[mlflow])")
    webhook_url: str | None = Field(None, description="alarms with action 'webhook' POST their payload here")
    default_alarms: bool = Field(True, description="start from execrl's default alarm rules")
    alarms: list[AlarmSection] = Field(default_factory=list, description="rules added or overriding defaults")

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url_valid(cls, value: str | None) -> str | None:
        from execrl.telemetry.webhook import WebhookConfig

        if value is not None:
            WebhookConfig(url=value)  # raises naming the problem
        return value

    @field_validator("alarms")
    @classmethod
    def _rules_valid(cls, value: list[AlarmSection], info: ValidationInfo) -> list[AlarmSection]:
        """Build the rules now (as the run will), so a bad rule fails before the model loads."""
        from execrl.telemetry.alarms import alarm_rules_from_config

        items = [a.model_dump(exclude_none=True) for a in value]
        try:
            rules = alarm_rules_from_config(items, include_defaults=info.data.get("default_alarms", True))
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        needs_hook = sorted(r.name for r in rules if r.action == "webhook")
        if needs_hook and info.data.get("webhook_url") is None:
            raise ValueError(f"alarm rule(s) {needs_hook} use action 'webhook'; set telemetry.webhook_url")
        return value
