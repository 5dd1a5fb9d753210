"""``RunTelemetry``: the one object a training loop holds: sinks + alarms for a run directory.

    telemetry = RunTelemetry(run_dir, rules=default_alarm_rules())
    for step in ...:
        decision = telemetry.log(step, {"reward/mean": r, "loss/total": loss, ...})
        if decision.stop_requested:
            save_checkpoint(...); break
    telemetry.close()

On resume (``resume_from_step=k``) metrics and alarms after step k are dropped from the files, and the
alarm rules replay steps <= k silently so their windows and once-per-episode state carry over.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from execrl.inputs import json_value
from execrl.telemetry.alarms import AlarmDecision, AlarmEngine, AlarmRule, default_alarm_rules
from execrl.telemetry.reader import merge_rows, read_metrics
from execrl.telemetry.sinks import MetricLogger, open_run_logger
from execrl.telemetry.webhook import WebhookConfig

__all__ = ["RunTelemetry"]


def _truncate_alarms(path: Path, resume_from_step: int) -> None:
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json_value(line)
        except ValueError:
            continue  # a torn last line from the crash we are resuming from
        step = row.get("step", 0) if isinstance(row, dict) else None
        if isinstance(step, int) and step <= resume_from_step:
            kept.append(line + "\n")
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    os.replace(tmp, path)


class RunTelemetry:
    """Metric sinks and the alarm engine of one run, behind ``log(step, metrics) -> AlarmDecision``."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        rules: Sequence[AlarmRule] | None = None,
        webhook: WebhookConfig | None = None,
        resume_from_step: int | None = None,
        tensorboard: bool = True,
        mlflow: bool = False,
        run_name: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.alarms = AlarmEngine(
            default_alarm_rules() if rules is None else rules,
            run_dir=self.run_dir,
            run_name=run_name or self.run_dir.name,
            webhook=webhook,
        )
        if resume_from_step is not None:
            _truncate_alarms(self.alarms.alarms_path or self.run_dir / "alarms.jsonl", resume_from_step)
        self.logger: MetricLogger = open_run_logger(
            self.run_dir, resume_from_step=resume_from_step, tensorboard=tensorboard, mlflow=mlflow
        )
        if resume_from_step is not None and (self.run_dir / "metrics.jsonl").exists():
            for row in merge_rows(read_metrics(self.run_dir)):
                self.alarms.replay(row.step, row.metrics)

    def log(self, step: int, metrics: Mapping[str, object]) -> AlarmDecision:
        """Validate and record ``metrics`` at ``step``, evaluate the alarms, record their ``alarm/*``."""
        clean = self.logger.log(step, metrics)
        decision = self.alarms.observe(step, clean)
        if decision.fired:
            self.logger.log(step, decision.metrics)
        return decision

    def close(self) -> None:
        try:
            self.alarms.close()
        finally:
            self.logger.close()

    def __enter__(self) -> RunTelemetry:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
