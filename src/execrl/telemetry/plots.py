"""Static PNG plots for reports: training curves, pass@k before/after with intervals, run overlays.

matplotlib with the Agg backend (no display needed), imported inside the functions so that importing
the telemetry package stays cheap. The palette matches the monitor page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.telemetry.records import MetricRow

__all__ = [
    "PANELS",
    "Panel",
    "panel_metrics",
    "plot_overlay",
    "plot_passk",
    "plot_training_curves",
    "rolling_mean",
]

PALETTE = ("#3b6fd8", "#e07b24", "#2f9e6e", "#8a5cd1", "#0f9bb4", "#c2417a", "#7a8a16", "#6b7280")
ALARM_COLOR = "#e5484d"


@dataclass(frozen=True)
class Panel:
    """A chart: its title, which metrics it shows (regex), and whether it is drawn when empty."""

    title: str
    pattern: str
    optional: bool = False
    unit_range: bool = False


PANELS: tuple[Panel, ...] = (
    Panel("Reward", r"^reward/(.+/)?mean$"),
    Panel("Pass rate", r"^(reward|rollout|eval)/.*(pass_rate|pass@\d+|solved)", unit_range=True),
    Panel(
        "Reward vs audit",
        r"^audit/(reward_pass_rate|confirmed_pass_rate|gap)$",
        optional=True,
        unit_range=True,
    ),
    Panel("Suspicious behaviour", r"^hack/.*_rate$", optional=True, unit_range=True),
    Panel("Loss", r"^loss/"),
    Panel("KL divergence", r"^kl/"),
    Panel("Entropy", r"^entropy/"),
    Panel("Throughput", r"^perf/.*per_s$"),
    Panel("Response length", r"^rollout/.*length", optional=True),
    Panel("Sandbox", r"^sandbox/", optional=True),
    Panel("Multi-turn: rates", r"^refine/.*_rate$", optional=True, unit_range=True),
    Panel("Multi-turn: turns per episode", r"^refine/turns_mean$", optional=True),
    Panel(
        "Tools: rates",
        r"^tools/(parse_error_rate|time_share|episodes_with_calls|stop_answer)$",
        optional=True,
        unit_range=True,
    ),
    Panel("Tools: calls per episode", r"^tools/calls_per_episode$", optional=True),
    Panel("Tools: session memory (MB)", r"^tools/session_memory_mb_max$", optional=True),
)


def _rank(name: str) -> tuple[int, str]:
    parts = name.split("/")
    headline = len(parts) == 2 and parts[1] in ("mean", "ref_mean", "total", "pass_rate", "step_tokens_per_s")
    return (0 if headline else 1 if len(parts) == 2 else 2, name)


def panel_metrics(names: Sequence[str]) -> list[tuple[Panel, list[str]]]:
    """Assign each metric to the first panel whose pattern matches; headline series first."""
    groups: list[tuple[Panel, list[str]]] = [(p, []) for p in PANELS]
    for name in sorted(names):
        for panel, members in groups:
            if re.search(panel.pattern, name):
                members.append(name)
                break
    return [(p, sorted(m, key=_rank)) for p, m in groups if m or not p.optional]


def rolling_mean(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` finite values (NaN where none). values: [T] -> [T]."""
    out: list[float] = []
    recent: list[float] = []
    for v in values:
        if math.isfinite(v):
            recent.append(v)
            if len(recent) > window:
                recent.pop(0)
        out.append(sum(recent) / len(recent) if recent else math.nan)
    return out


def _series(rows: Sequence[MetricRow], name: str) -> tuple[list[int], list[float]]:
    steps = [r.step for r in rows if name in r.metrics]
    values = [r.metrics[name] for r in rows if name in r.metrics]
    return steps, values


def _style(ax: Any, title: str) -> None:
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.spines[["top", "right"]].set_visible(False)
    ax.spines[["left", "bottom"]].set_color("#c7ccd4")
    ax.tick_params(colors="#6b7280", labelsize=8)
    ax.grid(axis="y", color="#eef0f3", linewidth=0.8)
    ax.set_axisbelow(True)


def _figure(n_panels: int, columns: int) -> tuple[Any, list[Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(1, math.ceil(n_panels / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.1 * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120, facecolor="white")
    plt.close(fig)
    return path


def plot_training_curves(
    rows: Sequence[MetricRow], alarm_steps: Sequence[int], path: Path, *, columns: int = 2
) -> Path:
    """One panel per metric group: raw values faint, trailing mean bold, alarms as dashed red lines."""
    names = sorted({n for r in rows for n in r.metrics if not n.startswith("alarm/")})
    panels = panel_metrics(names)
    window = max(1, len(rows) // 20)
    fig, axes = _figure(len(panels), columns)
    for ax, (panel, members) in zip(axes, panels, strict=True):
        _style(ax, panel.title)
        for step in sorted(set(alarm_steps)):
            ax.axvline(step, color=ALARM_COLOR, linestyle="--", linewidth=0.9, alpha=0.6)
        for i, name in enumerate(members[: len(PALETTE)]):
            steps, values = _series(rows, name)
            color = PALETTE[i]
            ax.plot(steps, values, color=color, linewidth=0.8, alpha=0.3)
            label = name if len(members) == 1 else name.split("/", 1)[1]
            ax.plot(steps, rolling_mean(values, window), color=color, linewidth=1.8, label=label)
            bad = [s for s, v in zip(steps, values, strict=True) if not math.isfinite(v)]
            if bad:  # NaN/Inf: a red cross along the top edge, where the line has a gap
                ax.plot(bad, [0.96] * len(bad), "x", color=ALARM_COLOR, transform=ax.get_xaxis_transform())
        if panel.unit_range:
            ax.set_ylim(0, 1)
        if members:
            ax.legend(fontsize=7, frameon=False, loc="best")
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", color="#9aa3af", transform=ax.transAxes)
        ax.set_xlabel("step", fontsize=8, color="#6b7280")
    return _save(fig, path)


def plot_passk(
    models: Mapping[str, Mapping[str, Mapping[str, float]]],
    path: Path,
    *,
    delta: Mapping[str, Mapping[str, float]] | None = None,
    title: str = "",
) -> Path:
    """Grouped bars of pass@k per model (only ``pass@*`` entries) with percentile-bootstrap error bars.

    With ``delta`` (the paired trained - base intervals) each group's label also shows the improvement.
    """
    metrics = sorted(
        {m for s in models.values() for m in s if m.startswith("pass@")}, key=lambda m: (len(m), m)
    )
    fig, (ax,) = _figure(1, 1)
    fig.set_size_inches(max(5.2, 1.6 * len(metrics) * len(models)), 3.6)
    width = 0.8 / max(1, len(models))
    for i, (model, scores) in enumerate(models.items()):
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(metrics))]
        vals = [100 * scores[m]["value"] if m in scores else math.nan for m in metrics]
        lows = [100 * (scores[m]["value"] - scores[m]["ci_low"]) if m in scores else 0 for m in metrics]
        highs = [100 * (scores[m]["ci_high"] - scores[m]["value"]) if m in scores else 0 for m in metrics]
        ax.bar(xs, vals, width * 0.92, color=PALETTE[i % len(PALETTE)], label=model, zorder=2)
        ax.errorbar(
            xs, vals, yerr=[lows, highs], fmt="none", ecolor="#1d2330", elinewidth=1, capsize=4, zorder=3
        )
        for x, v, h in zip(xs, vals, highs, strict=True):
            if math.isfinite(v):
                ax.text(x, v + h + 2.5, f"{v:.1f}", ha="center", fontsize=8, color="#1d2330")
    _style(ax, title or "pass@k (%) with bootstrap intervals over tasks")
    labels = []
    for m in metrics:
        d = (delta or {}).get(m)
        extra = (
            f"\nΔ {100 * d['value']:+.1f} pp [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
            if d
            else ""
        )
        labels.append(m + extra)
    ax.set_xticks(range(len(metrics)), labels)
    ax.set_ylim(0, min(110, max(10.0, ax.get_ylim()[1] + 8)))
    ax.legend(fontsize=8, frameon=False)
    return _save(fig, path)


def plot_overlay(runs: Mapping[str, Sequence[MetricRow]], path: Path, *, columns: int = 2) -> Path:
    """Headline metric of each panel, one line per run (trailing mean), for ``execrl compare``."""
    names = sorted(
        {n for rows in runs.values() for r in rows for n in r.metrics if not n.startswith("alarm/")}
    )
    panels = [(p, members[0]) for p, members in panel_metrics(names) if members]
    fig, axes = _figure(max(1, len(panels)), columns)
    for ax, (panel, name) in zip(axes, panels, strict=False):
        _style(ax, f"{panel.title}  ({name})")
        for i, (label, rows) in enumerate(runs.items()):
            steps, values = _series(rows, name)
            window = max(1, len(rows) // 20)
            ax.plot(steps, values, color=PALETTE[i % len(PALETTE)], linewidth=0.8, alpha=0.25)
            ax.plot(
                steps,
                rolling_mean(values, window),
                color=PALETTE[i % len(PALETTE)],
                linewidth=1.8,
                label=label,
            )
        ax.legend(fontsize=7, frameon=False)
        ax.set_xlabel("step", fontsize=8, color="#6b7280")
    return _save(fig, path)
