"""The run's per-domain summary: ``domains.md`` (a table) and ``plots/domain_weights.png`` (weight over time).

Read back from ``metrics.jsonl`` (the ``domain/<label>/*`` metrics the recipe logs each step), so it also
works on a finished or resumed run. With many domains the plot shows the eight with the largest mean
weight (the table lists all of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from execrl.telemetry.plots import PALETTE, _figure, _save, _style
from execrl.telemetry.reader import merge_rows, read_metrics
from execrl.telemetry.records import MetricRow


@dataclass(frozen=True)
class DomainSummary:
    label: str
    samples: float  # completions drawn over the run
    pass_rate: float  # sample-weighted over the run
    zero_variance_share: float  # mean over the steps that drew the domain
    first_weight: float
    last_weight: float


def summarize_domains(rows: Sequence[MetricRow]) -> list[DomainSummary]:
    labels = sorted({n.split("/")[1] for r in rows for n in r.metrics if n.startswith("domain/")})
    out = []
    for label in labels:
        key = f"domain/{label}/"
        drawn = [r.metrics for r in rows if key + "samples" in r.metrics]
        samples = sum(m[key + "samples"] for m in drawn)
        passed = sum(m[key + "samples"] * m[key + "pass_rate"] for m in drawn)
        zero = [m[key + "zero_variance_share"] for m in drawn]
        weights = [r.metrics[key + "weight"] for r in rows if key + "weight" in r.metrics]
        out.append(
            DomainSummary(
                label=label,
                samples=samples,
                pass_rate=passed / samples if samples else float("nan"),
                zero_variance_share=sum(zero) / len(zero) if zero else float("nan"),
                first_weight=weights[0] if weights else float("nan"),
                last_weight=weights[-1] if weights else float("nan"),
            )
        )
    return out


def plot_domain_weights(rows: Sequence[MetricRow], path: Path, *, top: int = len(PALETTE)) -> Path:
    series: dict[str, tuple[list[int], list[float]]] = {}
    for r in rows:
        for name, value in r.metrics.items():
            if name.startswith("domain/") and name.endswith("/weight"):
                steps, values = series.setdefault(name.split("/")[1], ([], []))
                steps.append(r.step)
                values.append(value)
    ranked = sorted(series, key=lambda k: -sum(series[k][1]) / len(series[k][1]))[:top]
    fig, (ax,) = _figure(1, 1)
    _style(ax, "Sampling weight by domain")
    for color, label in zip(PALETTE, ranked, strict=False):
        ax.plot(*series[label], color=color, linewidth=1.6, label=label)
    ax.set_ylim(0, 1)
    ax.set_xlabel("step", fontsize=8, color="#6b7280")
    if ranked:
        ax.legend(fontsize=7, frameon=False, loc="best")
    return _save(fig, path)


def write_domain_report(run_dir: Path) -> Path:
    """Write ``domains.md`` and ``plots/domain_weights.png``; returns the Markdown path."""
    rows = merge_rows(read_metrics(run_dir))
    plot_domain_weights(rows, run_dir / "plots" / "domain_weights.png")
    lines = [
        "# Domains",
        "",
        "| domain | samples | pass rate | zero-variance share | weight first -> last |",
        "|---|---:|---:|---:|---|",
    ]
    for d in summarize_domains(rows):
        lines.append(
            f"| {d.label} | {d.samples:.0f} | {d.pass_rate:.3f} | {d.zero_variance_share:.3f} | "
            f"{d.first_weight:.3f} -> {d.last_weight:.3f} |"
        )
    lines += ["", "![sampling weight by domain](plots/domain_weights.png)", ""]
    path = run_dir / "domains.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
