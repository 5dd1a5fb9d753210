"""``execrl bench executor``: step time of the in-process executor vs the Ray executor, same config, same run.

Both runs train ``--steps`` steps from the same seed, one after the other in this process (the Ray one
on a local Ray instance, or ``--ray-address``), with the final evaluation off (it is not part of a step).
Step time is the mean ``perf/step_s`` (plus, for Ray, the weight publication that follows the
update) of the steps after the first (the first pays actor start and model
loading on the Ray side). ``metrics_equal`` is true when every step's rewards, losses, rollout shapes and
the environment's own metrics (``reward/*``, ``loss/*``, ``rollout/*``, ``tools/*``, ``refine/*``, less the
wall-clock and memory ones) agree within ``rtol=1e-5`` (Ray's workers make the same seeded engine calls on
the same weights and answer the same turns, so they should agree to the bit). Any environment runs:
``tools.enabled=true`` or ``refine.max_turns=2`` among the overrides. Goal, reported and not asserted:
``ray_step_s`` within 1.5x of ``inprocess_step_s`` on one machine. Exit 1 when the metrics differ.

``--async`` runs both with the one-step-off loop (``algorithm.async_steps=1``, and for Ray
``executor.max_weight_staleness=1``): step t+1's rollout overlaps step t's update on either executor, and
``metrics_equal`` then compares the two async runs (the Ray rollout workers use the version the
in-process behaviour copy holds, so they agree too). ``ray_weight_version_used_each`` and
``ray_weight_staleness_each`` show the versions the Ray run sampled each step with.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

__all__ = ["add_arguments", "compare_metrics", "run"]

COMPARED_PREFIXES = ("reward/", "loss/", "rollout/", "tools/", "refine/")
NOT_COMPARED = frozenset({"tools/time_share", "tools/session_memory_mb_max"})  # wall clock, memory
RTOL = 1e-5
NO_WALL_TIME_LIMIT_S = 10**7


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    parser.add_argument("--steps", type=int, default=3, help="training steps per executor (default 3)")
    parser.add_argument("--config", type=Path, help="TOML config (default: the README's main job)")
    parser.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (default: start one)")
    parser.add_argument(
        "--async", dest="async_", action="store_true", help="both runs one-step-off (algorithm.async_steps=1)"
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides for both runs")


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r for r in rows if "reward/mean" in r]  # the step lines (alarm lines share a step)


def compare_metrics(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    """Differences between two runs' step rows in the compared metrics (empty: equal step for step)."""
    if [r["step"] for r in a] != [r["step"] for r in b]:
        return [f"steps differ: {[r['step'] for r in a]} vs {[r['step'] for r in b]}"]
    out = []
    for row_a, row_b in zip(a, b, strict=True):
        keys = {k for k in row_a.keys() | row_b.keys() if _compared(k)}
        for key in sorted(keys):
            x, y = row_a.get(key), row_b.get(key)
            same = x is not None and y is not None and math.isclose(x, y, rel_tol=RTOL, abs_tol=1e-9)
            if not same and not (x is not None and y is not None and math.isnan(x) and math.isnan(y)):
                out.append(f"step {row_a['step']} {key}: {x} vs {y}")
    return out


def _compared(key: str) -> bool:
    return key.startswith(COMPARED_PREFIXES) and key not in NOT_COMPARED


def _train(base: list[str], kind: str, args: argparse.Namespace, out_dir: Path) -> list[dict[str, Any]]:
    from execrl.config import load_config
    from execrl.recipes import train

    # No wall-time stop: both runs must train the same steps (a loaded machine would cut them apart).
    extra = [f"executor.kind={kind}", f"run.total_steps={args.steps}", "eval.enabled=false"]
    if args.async_:
        extra += ["algorithm.async_steps=1", "executor.max_weight_staleness=1"]
    extra.append(f"run.max_wall_time_s={NO_WALL_TIME_LIMIT_S}")
    extra += [f"run.output_dir={json.dumps(str(out_dir / kind))}", "telemetry.tensorboard=false"]
    if kind == "ray" and args.ray_address:
        extra.append(f"executor.ray_address={json.dumps(args.ray_address)}")
    outcome = train(load_config(args.config, [*base, *extra]), progress=False)
    return _rows(outcome.run_dir)


def _step_s(row: dict[str, Any]) -> float:
    """The step's time plus the Ray executor's weight publication, which happens after ``perf/step_s``."""
    return float(row["perf/step_s"] + row.get("executor/publish_weights_s", 0.0))


def _mean_after_first(rows: list[dict[str, Any]]) -> float:
    times = [_step_s(r) for r in rows]
    later = times[1:] or times
    return sum(later) / len(later)


def run(args: argparse.Namespace) -> int:
    if args.steps < 2:
        print("execrl bench executor: --steps must be >= 2 (the first step is not timed)")
        return 2
    with tempfile.TemporaryDirectory(prefix="execrl-bench-executor-") as tmp:
        inprocess = _train(args.overrides, "inprocess", args, Path(tmp))
        ray_rows = _train(args.overrides, "ray", args, Path(tmp))
    differences = compare_metrics(inprocess, ray_rows)
    summary = {
        "steps": args.steps,
        "mode": "async" if args.async_ else "serial",
        "inprocess_step_s": _mean_after_first(inprocess),
        "ray_step_s": _mean_after_first(ray_rows),
        "metrics_equal": not differences,
        "differences": differences[:20],
        "inprocess_step_s_each": [_step_s(r) for r in inprocess],
        "ray_step_s_each": [_step_s(r) for r in ray_rows],
        "ray_retries": sum(r.get("executor/retries", 0.0) for r in ray_rows),
        "ray_weight_staleness_max": max(r.get("executor/weight_staleness_max", 0.0) for r in ray_rows),
        "ray_weight_version_used_each": [r.get("executor/weight_version_used_min") for r in ray_rows],
        "ray_weight_staleness_each": [r.get("executor/weight_staleness_max") for r in ray_rows],
        "compared_metrics": sorted({k for r in inprocess for k in r if _compared(k)}),
        "ray_lost_episodes": sum(r.get("executor/lost_episodes", 0.0) for r in ray_rows),
        "overrides": list(args.overrides),
    }
    summary["ratio_ray_vs_inprocess"] = summary["ray_step_s"] / summary["inprocess_step_s"]
    print(f"in-process step: {summary['inprocess_step_s']:.2f} s   Ray step: {summary['ray_step_s']:.2f} s   "
          f"ratio {summary['ratio_ray_vs_inprocess']:.2f} (goal <= 1.5)   metrics_equal={summary['metrics_equal']}")  # fmt: skip
    for line in differences[:5]:
        print(f"  differs: {line}")
    if args.json:
        write_report(args.json, summary)
    return 0 if summary["metrics_equal"] else 1
