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

from execrl.inputs import json_value

__all__ = [
    "METRIC_NAMESPACES",
    "MetricRow",
    "decode_line",
    "strict_obj",
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
    "audit",
    "hack",
    "domain",  # per-domain scheduler metrics: domain/<suite>/{pass_rate,zero_variance_share,samples,weight}
    "executor",  # execrl.distributed: weight versions used, retries, replaced workers, failed tasks
    "refine",  # multi-turn refine RL (refine/env.py): turns, fix rate, invalid turns, hidden passes
    "tools",  # tool-calling episodes (tools/env.py): calls, parse errors, tool time, session memory
    "sync",  # weight sync into an engine of its own (rollout.engine=vllm): seconds, bytes, the verify probe
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


def _nonfinite_map(obj: Mapping[str, Any]) -> dict[str, str]:
    nonfinite = obj.get(NONFINITE_KEY)
    if nonfinite is None:
        return {}
    if not isinstance(nonfinite, dict) or not all(
        isinstance(v, str) and v in _NONFINITE_TEXT for v in nonfinite.values()
    ):
        raise ValueError(
            f"metrics line's {NONFINITE_KEY!r} must map metric names to one of {list(_NONFINITE_TEXT)}, "
            f"got {nonfinite!r:.200}"
        )
    return nonfinite


def strict_obj(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed line as strict JSON in our own format (what the monitor relays to a browser).

    A non-finite float (a bare ``NaN`` that Python's json accepted) becomes ``null`` plus a ``nonfinite``
    entry, as ``encode_line`` writes it. Raises ``ValueError`` for a line that is not a metrics row: no
    integer ``step``, a malformed ``nonfinite`` map, or a metric value that is not a number or null.
    """
    step = obj.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"metrics line has no integer 'step': {dict(obj)!r:.200}")
    nonfinite = dict(_nonfinite_map(obj))
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key == NONFINITE_KEY:
            continue
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise ValueError(f"metrics line's {key!r} is a {type(value).__name__}, not a number")
        if isinstance(value, float) and not math.isfinite(value):
            nonfinite[key] = _nonfinite_text(value)
            value = None
        out[key] = value
    if nonfinite:
        out[NONFINITE_KEY] = nonfinite
    return out


def decode_obj(obj: Mapping[str, Any]) -> MetricRow:
    """Decode a parsed line; raises ``ValueError`` when ``step`` is missing or not an integer, or the
    ``nonfinite`` map is malformed."""
    step = obj.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"metrics line has no integer 'step': {dict(obj)!r:.200}")
    nonfinite = _nonfinite_map(obj)
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
    obj = json_value(line)  # ValueError for invalid JSON or nesting deeper than execrl.inputs allows
    if not isinstance(obj, dict):
        raise ValueError(f"metrics line is not a JSON object: {line[:200]!r}")
    return decode_obj(obj)
