"""Run reports (``report.md`` + ``report.html`` + ``plots/*.png``) and two-run comparisons.

The report is built once as a list of blocks (headings, paragraphs, tables, images) and rendered to both
Markdown (for the terminal and PR descriptions) and a self-contained-looking HTML page (images are
relative links into ``plots/``, so keep the run directory together when copying it).

Eval results are the structure ``execrl.eval.stats.passk_comparison`` returns, or a map of suite name to
such structures (one section and one plot per suite)::

    {"suite": "humaneval", "n_tasks": 164, "confidence": 0.95,
     "models": {"base": {"pass@1": {"value": .., "ci_low": .., "ci_high": ..}, ...}, "trained": {...}},
     "delta": {"pass@1": {"value": .., "ci_low": .., "ci_high": ..}}}      # optional, trained - base

``pass@k`` and ``*rate*`` values are fractions in [0, 1], shown as percentages (deltas as percentage points);
other entries (e.g. a mean ``reward``) are shown as plain numbers and left out of the bar chart.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.telemetry.hacking import read_flagged, top_flagged
from execrl.telemetry.plots import plot_overlay, plot_passk, plot_training_curves
from execrl.telemetry.reader import merge_rows, read_alarms, read_metrics
from execrl.telemetry.records import MetricRow

__all__ = ["compare_runs", "summarize_metrics", "validate_eval_results", "write_report"]

_HIGHER_IS_BETTER = ("reward/", "eval/", "perf/")
_LOWER_IS_BETTER = ("loss/", "sandbox/")


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Image:
    path: str  # relative to the report
    alt: str


Block = Heading | Paragraph | Table | Image


@dataclass(frozen=True)
class MetricSummary:
    """Final and best value of one metric over a run (best is None when direction is unknown)."""

    name: str
    final: float
    best: float | None
    best_step: int | None
    count: int


def _direction(name: str) -> int:
    if name.startswith(_HIGHER_IS_BETTER) or "pass" in name:
        return 1
    return -1 if name.startswith(_LOWER_IS_BETTER) else 0


def summarize_metrics(rows: Sequence[MetricRow]) -> list[MetricSummary]:
    """Per metric: last logged value, best finite value (by namespace direction) and its step."""
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for name, value in row.metrics.items():
            if not name.startswith("alarm/"):
                series.setdefault(name, []).append((row.step, value))
    out = []
    for name in sorted(series):
        points = series[name]
        finite = [(s, v) for s, v in points if math.isfinite(v)]
        direction = _direction(name)
        best = max(finite, key=lambda p: direction * p[1]) if finite and direction else None
        out.append(
            MetricSummary(
                name, points[-1][1], best[1] if best else None, best[0] if best else None, len(points)
            )
        )
    return out


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _elapsed(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {sec:02d}s"


def validate_eval_results(results: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Check the eval-results structure and return its ``models`` map; errors name the bad path."""
    models = results.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ValueError(
            "eval_results['models'] must map model names to {'pass@k': {value, ci_low, ci_high}}"
        )
    sections = {f"models']['{m}": s for m, s in models.items()}
    if results.get("delta") is not None:
        sections["delta"] = results["delta"]
    for where, scores in sections.items():
        if not isinstance(scores, Mapping):
            raise ValueError(f"eval_results['{where}'] must be a mapping of metric -> interval")
        for metric, est in scores.items():
            missing = [k for k in ("value", "ci_low", "ci_high") if not isinstance(est.get(k), int | float)]
            if missing:
                raise ValueError(f"eval_results['{where}']['{metric}'] needs numbers for {missing}")
    return {str(m): {str(k): dict(v) for k, v in s.items()} for m, s in models.items()}


def _is_fraction(metric: str) -> bool:
    return metric.startswith("pass@") or "rate" in metric


def _fmt_estimate(metric: str, est: Mapping[str, float], *, delta: bool = False) -> str:
    if _is_fraction(metric):
        sign, unit = ("+" if delta else ""), (" pp" if delta else "%")
        v, lo, hi = (100 * est[k] for k in ("value", "ci_low", "ci_high"))
        return f"{v:{sign}.1f}{unit} [{lo:{sign}.1f}, {hi:{sign}.1f}]"
    sign = "+" if delta else ""
    return f"{est['value']:{sign}.3g} [{est['ci_low']:{sign}.3g}, {est['ci_high']:{sign}.3g}]"


def _eval_blocks(results: Mapping[str, Any], passk_png: str | None, suite: str) -> list[Block]:
    models = validate_eval_results(results)
    names = list(models)
    metrics = sorted(
        {m for s in models.values() for m in s}, key=lambda m: (not m.startswith("pass@"), len(m), m)
    )
    delta = results.get("delta") or {}
    header = ("metric", *names, *(("Δ (paired)",) if delta else ()))
    rows = []
    for m in metrics:
        cells = [_fmt_estimate(m, models[n][m]) if m in models[n] else "–" for n in names]
        if delta:
            cells.append(_fmt_estimate(m, delta[m], delta=True) if m in delta else "–")
        rows.append((m, *cells))
    conf = float(results.get("confidence", 0.95))
    intro = (
        f"Suite **{suite}**, {results.get('n_tasks', '?')} tasks. Brackets: {conf:.0%} percentile-bootstrap "
        "intervals over tasks; Δ uses the paired bootstrap (same tasks for both models); pp = percentage points."
    )
    blocks: list[Block] = [Heading(f"Evaluation: {suite}"), Paragraph(intro), Table(header, tuple(rows))]
    if passk_png:
        blocks.append(Image(passk_png, f"pass@k on {suite}"))
    return blocks


def _eval_suites(eval_results: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """One comparison (has 'models') or a map of suite name -> comparison."""
    if "models" in eval_results:
        return {str(eval_results.get("suite", "eval")): eval_results}
    suites = {str(k): v for k, v in eval_results.items() if isinstance(v, Mapping)}
    if not suites or len(suites) != len(eval_results):
        raise ValueError(
            "eval_results must be one comparison with a 'models' key, or a map of suite name -> comparison "
            "(see execrl.eval.stats.passk_comparison)"
        )
    return suites


def _summary_table(summaries: Sequence[MetricSummary]) -> Table:
    rows = tuple(
        (s.name, _num(s.final), _num(s.best), "–" if s.best_step is None else str(s.best_step), str(s.count))
        for s in summaries
    )
    return Table(("metric", "final", "best", "best at step", "points"), rows)


def _alarm_blocks(alarms: Sequence[Mapping[str, Any]]) -> list[Block]:
    if not alarms:
        return [Heading("Alarms"), Paragraph("No alarms fired.")]
    rows = tuple(
        (str(a.get("step")), str(a.get("rule")), str(a.get("action")), str(a.get("message"))) for a in alarms
    )
    return [Heading(f"Alarms ({len(alarms)})"), Table(("step", "rule", "action", "message"), rows)]


HACK_ROWS = 10  # flagged completions listed in the report
HACK_SNIPPET_CHARS = 400


def _hack_blocks(
    run_dir: Path, rows: Sequence[MetricRow], alarms: Sequence[Mapping[str, Any]]
) -> list[Block]:
    """The ``hack`` section: reward vs audit pass rates, the divergence alarms, the top flagged completions."""
    audited = [r.metrics for r in rows if "audit/pass_rate" in r.metrics]
    fired = sorted({int(a["step"]) for a in alarms if a.get("rule") == "reward_audit_divergence"})
    blocks: list[Block] = [Heading("Hack: reward audit and suspicious behaviour")]
    if audited:
        last = audited[-1]
        blocks.append(
            Paragraph(
                f"{len(audited)} steps audited. Last audited step: reward pass rate "
                f"{last.get('audit/reward_pass_rate', math.nan):.1%}, audit pass rate of reward-passing samples "
                f"{last['audit/pass_rate']:.1%}, gap {last.get('audit/gap', math.nan):.1%}. "
                + (f"reward_audit_divergence fired at steps {fired}." if fired else "No divergence alarm.")
            )
        )
    else:
        blocks.append(
            Paragraph("No step audited a completion (no audit tests, or nothing passed the reward).")
        )
    flagged = top_flagged(read_flagged(run_dir), HACK_ROWS)
    if not flagged:
        return [*blocks, Paragraph("No completion was flagged.")]
    table_rows = tuple(
        (
            str(f["step"]),
            str(f.get("task_id")),
            ", ".join(f.get("flags") or []),
            str(f.get("reward_reason")),
            str(f.get("audit_reason") or "not audited"),
            str(f.get("completion", ""))[:HACK_SNIPPET_CHARS],
        )
        for f in flagged
    )
    header = ("step", "task", "flags", "reward verdict", "audit verdict", "completion")
    return [
        *blocks,
        Paragraph(f"Top {len(flagged)} flagged completions (read them):"),
        Table(header, table_rows),
    ]


SYNC_COLUMNS = (
    ("sync/s", "sync s"),
    ("sync/verify_s", "verify s"),
    ("sync/bytes", "MB"),
    ("sync/probe_max_abs_diff", "probe max diff"),
    ("rollout/logprob_max_abs_diff", "rollout max diff"),
    ("rollout/logprob_mean_abs_diff", "rollout mean diff"),
    ("train/offpolicy_clipped_frac", "TIS clipped"),
)


def _sync_blocks(rows: Sequence[MetricRow]) -> list[Block]:
    """Per step: the weight sync into an engine of its own (rollout.engine=vllm) and the engine-vs-trainer
    log-prob mismatch the update corrected; nothing for a run whose engine is the trainer's own forward."""
    synced = [r for r in rows if "sync/s" in r.metrics]
    if not synced:
        return []

    def cell(row: MetricRow, key: str) -> str:
        value = row.metrics.get(key)
        if value is None:
            return "–"
        return f"{value / 1e6:.0f}" if key == "sync/bytes" else _num(value)

    table = tuple((str(r.step), *(cell(r, key) for key, _ in SYNC_COLUMNS)) for r in synced)
    text = (
        "Each update's weights pushed into the engine and verified (a fixed probe scored by the engine and the "
        "trainer; checksums per bucket); the rollout's log-probs against the trainer's recomputed ones, "
        "corrected by truncated importance sampling."
    )
    return [
        Heading("Weight sync and engine mismatch"),
        Paragraph(text),
        Table(("step", *(name for _, name in SYNC_COLUMNS)), table),
    ]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}\n")
        elif isinstance(b, Paragraph):
            out.append(b.text + "\n")
        elif isinstance(b, Table):
            out.append("| " + " | ".join(map(_md_cell, b.header)) + " |")
            out.append("|" + "|".join("---" for _ in b.header) + "|")
            out.extend("| " + " | ".join(map(_md_cell, row)) + " |" for row in b.rows)
            out.append("")
        else:
            out.append(f"![{b.alt}]({b.path})\n")
    return "\n".join(out)


_CSS = """
body{font:14px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1100px;margin:0 auto;padding:24px 32px 48px;background:#fff;min-height:100vh}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}
p{color:#4b5563}table{border-collapse:collapse;font-size:13px;margin:8px 0 16px}
th,td{padding:5px 12px;border-bottom:1px solid #eef0f3;text-align:left}
th{color:#6b7280;font-weight:600}td{font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #e3e6eb;border-radius:8px;margin:8px 0}
"""


def _inline(text: str) -> str:
    """HTML-escape, then turn Markdown **bold** into <b>."""
    parts = html.escape(text).split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))


def render_html(title: str, blocks: Sequence[Block]) -> str:
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        else:
            body.append(f'<img src="{html.escape(b.path)}" alt="{html.escape(b.alt)}">')
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><main>{''.join(body)}</main></body></html>\n"
    )


def _write(out_dir: Path, stem: str, title: str, blocks: Sequence[Block]) -> Path:
    md_path = out_dir / f"{stem}.md"
    md_path.write_text(render_markdown(blocks), encoding="utf-8")
    (out_dir / f"{stem}.html").write_text(render_html(title, blocks), encoding="utf-8")
    return md_path


def _run_line(rows: Sequence[MetricRow]) -> str:
    if not rows:
        return "No metrics logged."
    return (
        f"Steps {rows[0].step}–{rows[-1].step} ({len(rows)} logged), wall time {_elapsed(rows[-1].time_s)}; "
        f"generated {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}."
    )


def write_report(run_dir: str | Path, eval_results: Mapping[str, Any] | None = None) -> Path:
    """Write ``run_dir/report.md``, ``report.html`` and ``plots/*.png``; returns the Markdown path."""
    run_dir = Path(run_dir)
    rows = merge_rows(read_metrics(run_dir))
    alarms = read_alarms(run_dir)
    plots = run_dir / "plots"
    blocks: list[Block] = [Heading(f"Run report: {run_dir.name}", 1), Paragraph(_run_line(rows))]
    for suite, results in (_eval_suites(eval_results) if eval_results is not None else {}).items():
        models = validate_eval_results(results)
        png = None
        if any(m.startswith("pass@") for scores in models.values() for m in scores):
            png = f"plots/passk_{re.sub(r'[^A-Za-z0-9_.-]+', '_', suite)}.png"
            conf = float(results.get("confidence", 0.95))
            title = f"{suite}: pass@k (%), {conf:.0%} bootstrap intervals over tasks"
            plot_passk(models, run_dir / png, delta=results.get("delta"), title=title)
        blocks += _eval_blocks(results, png, suite)
    alarm_steps = [int(a["step"]) for a in alarms if isinstance(a.get("step"), int)]
    plot_training_curves(rows, alarm_steps, plots / "training_curves.png")
    blocks += [
        Heading("Training curves"),
        Paragraph("Faint: raw values; bold: trailing mean; dashed red: steps where an alarm fired."),
        Image("plots/training_curves.png", "training curves"),
        *_sync_blocks(rows),
        Heading("Final and best metrics"),
        _summary_table(summarize_metrics(rows)),
        *_alarm_blocks(alarms),
        *_hack_blocks(run_dir, rows, alarms),
    ]
    return _write(run_dir, "report", f"execrl report: {run_dir.name}", blocks)


def compare_runs(run_a: str | Path, run_b: str | Path, out_dir: str | Path) -> Path:
    """Side-by-side final/best table and an overlay plot of two runs; writes ``out_dir/compare.md|.html``."""
    run_a, run_b, out_dir = Path(run_a), Path(run_b), Path(out_dir)
    label_a, label_b = run_a.name, run_b.name if run_b.name != run_a.name else f"{run_b.name} (2)"
    rows_a, rows_b = merge_rows(read_metrics(run_a)), merge_rows(read_metrics(run_b))
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_overlay({label_a: rows_a, label_b: rows_b}, out_dir / "plots" / "compare_curves.png")
    sum_a = {s.name: s for s in summarize_metrics(rows_a)}
    sum_b = {s.name: s for s in summarize_metrics(rows_b)}
    table_rows = []
    for name in sorted(set(sum_a) | set(sum_b)):
        a, b = sum_a.get(name), sum_b.get(name)
        table_rows.append(
            (
                name,
                _num(a.final) if a else "–",
                _num(b.final) if b else "–",
                _num(a.best) if a else "–",
                _num(b.best) if b else "–",
            )
        )
    header = ("metric", f"final {label_a}", f"final {label_b}", f"best {label_a}", f"best {label_b}")
    blocks: list[Block] = [
        Heading(f"Compare: {label_a} vs {label_b}", 1),
        Paragraph(f"**{label_a}**: {_run_line(rows_a)}"),
        Paragraph(f"**{label_b}**: {_run_line(rows_b)}"),
        Image("plots/compare_curves.png", "overlay of training curves"),
        Heading("Final and best metrics"),
        Table(header, tuple(table_rows)),
    ]
    return _write(out_dir, "compare", f"execrl compare: {label_a} vs {label_b}", blocks)
