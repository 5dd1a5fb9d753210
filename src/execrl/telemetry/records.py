"""The metrics.jsonl line format, shared by the sinks, the alarm engine, the monitor and the report.

One JSON object per line: ``{"step": int, "time_s": float, "<namespace>/<name>": float | null, ...}``.

Non-finite values: strict JSON has no NaN or Infinity (Python's ``json`` writes bare ``NaN``, which
browsers' ``JSON.parse`` and most tools reject). A non-finite value is therefore written as ``null``, and
the line gains a ``"nonfinite": {"<metric>": "NaN" | "Infinity" | "-Infinity"}`` map so that nothing is lost:
``decode_line`` restores the float, the monitor draws a marker, and alarms see the real NaN. A ``null``
without a ``nonfinite`` entry never occurs in files we write.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "METRIC_NAMESPACES",
    "MetricRow",
    "decode_line",
    "encode_line",
    "validate_metric_name",
    "to_float",
]

METRIC_NAMESPACES: tuple[str, ...] = (
    "reward",
    "loss",
    "rollout",
    "sandbox",
    "perf",
    "kl",
    "entropy",
    "train",
    "eval",
    "advantage",
    "alarm",
    "executor",  # execrl.distributed: weight versions used, retries, replaced workers, failed tasks
)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@\-]+(/[A-Za-z0-9_.@\-]+)+$")
NONFINITE_KEY = "nonfinite"
_NONFINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def validate_metric_name(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is ``<known namespace>/<name>`` with plain characters."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f"metric name {name!r} must look like '<namespace>/<name>' (letters, digits, _ . @ -), "
            f"e.g. 'reward/mean'; namespaces: {', '.join(METRIC_NAMESPACES)}"
        )
    namespace = name.split("/", 1)[0]
    if namespace not in METRIC_NAMESPACES:
        raise ValueError(
            f"metric {name!r} has unknown namespace {namespace!r}; use one of: {', '.join(METRIC_NAMESPACES)}"
        )


def to_float(name: str, value: object) -> float:
    """Convert a metric value (float, int, numpy or 0-d torch scalar) to float, or raise naming it."""
    if isinstance(value, str | bytes) or value is None:
        raise TypeError(f"metric {name!r} must be a number, got {type(value).__name__} {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metric {name!r} must be a number, got {type(value).__name__} {value!r}") from exc


def _nonfinite_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


@dataclass(frozen=True)
class MetricRow:
    """One decoded line: step, wall time since the run started, and the metric values (NaN restored)."""

    step: int
    time_s: float
    metrics: Mapping[str, float] = field(default_factory=dict)


def encode_line(step: int, time_s: float, metrics: Mapping[str, float]) -> str:
    """Serialise one row as strict JSON (no NaN literals), without the trailing newline."""
    obj: dict[str, Any] = {"step": int(step), "time_s": round(float(time_s), 6)}
    nonfinite: dict[str, str] = {}
    for name, value in metrics.items():
        if math.isfinite(value):
            obj[name] = value
        else:
            obj[name] = None
            nonfinite[name] = _nonfinite_text(value)
    if nonfinite:
        obj[NONFINITE_KEY] = nonfinite
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))


def decode_obj(obj: Mapping[str, Any]) -> MetricRow:
    """Decode a parsed line; raises ``ValueError`` when ``step`` is missing or not an integer."""
    step = obj.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"metrics line has no integer 'step': {dict(obj)!r:.200}")
    nonfinite = obj.get(NONFINITE_KEY) or {}
    metrics: dict[str, float] = {}
    for key, value in obj.items():
        if key in ("step", "time_s", NONFINITE_KEY):
            continue
        if value is None:
            metrics[key] = _NONFINITE_TEXT.get(str(nonfinite.get(key)), math.nan)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            metrics[key] = float(value)
    return MetricRow(step=step, time_s=float(obj.get("time_s") or 0.0), metrics=metrics)


def decode_line(line: str) -> MetricRow:
    """Parse one metrics.jsonl line (raises ``ValueError`` on malformed JSON or a missing step)."""
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError(f"metrics line is not a JSON object: {line[:200]!r}")
    return decode_obj(obj)
