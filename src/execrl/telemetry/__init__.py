"""execrl.telemetry: metric sinks, alarms, the live monitor and run reports.

The training loop holds one ``RunTelemetry`` (sinks + alarms for a run directory); ``execrl monitor``
serves the live page; ``write_report`` / ``compare_runs`` (in ``execrl.telemetry.report``, imported
lazily because of matplotlib) write the static reports.
"""

from execrl.telemetry.alarms import (
    AlarmDecision,
    AlarmEngine,
    AlarmEvent,
    AlarmRule,
    alarm_rules_from_config,
    default_alarm_rules,
)
from execrl.telemetry.reader import read_alarms, read_metrics
from execrl.telemetry.records import METRIC_NAMESPACES, MetricRow
from execrl.telemetry.run import RunTelemetry
from execrl.telemetry.sinks import (
    JsonlSink,
    MetricLogger,
    MetricSink,
    MlflowSink,
    TensorBoardSink,
    open_run_logger,
)
from execrl.telemetry.webhook import WebhookConfig

__all__ = [
    "METRIC_NAMESPACES",
    "AlarmDecision",
    "AlarmEngine",
    "AlarmEvent",
    "AlarmRule",
    "JsonlSink",
    "MetricLogger",
    "MetricRow",
    "MetricSink",
    "MlflowSink",
    "RunTelemetry",
    "TensorBoardSink",
    "WebhookConfig",
    "alarm_rules_from_config",
    "default_alarm_rules",
    "open_run_logger",
    "read_alarms",
    "read_metrics",
]
