"""Held-out evaluation of the multi-turn refine recipe: base vs trained, paired by task.

Before the first update and after the last, the policy runs the same multi-turn episodes (same tasks,
same seeds, ``eval.samples_per_task`` per task) on the held-out split; ``eval/refine_base.json`` and
``eval/refine_trained.json`` keep the per-task means, ``eval/refine_comparison.json`` the intervals.

The comparison has the shape ``execrl.telemetry.report`` renders (one entry per suite with ``models`` and
``delta``), so the run's ``report.md`` shows it like the main job's pass@k table: per model a 95 %
percentile-bootstrap interval over tasks, and on the difference the paired bootstrap (the same tasks for
both models; much tighter than two independent intervals). Metrics: ``hidden_pass_rate`` (the final
program of an episode passes the hidden tests), ``reward`` (the training reward: hidden-test reward minus
the invalid-turn penalties) and ``turns_mean`` (model turns per episode).

Limit: the per-task means are over ``eval.samples_per_task`` sampled episodes, so with few samples the
interval also carries sampling noise (it is still valid, only wider).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components import setup
from execrl.config import TrainConfig
from execrl.eval.stats import bootstrap_ci, paired_bootstrap_diff
from execrl.recipes.evaluate import write_json_atomic
from execrl.refine.multiturn import Episode, MultiTurnConfig, rollout_episodes
from execrl.rollout.types import SamplingParams

if TYPE_CHECKING:
    from execrl.rewards.batch import SyncRunner
    from execrl.rollout.engine import Engine

__all__ = ["EVAL_METRICS", "compare_refine_evals", "evaluate_refine_once", "finish_refine_report"]

log = logging.getLogger("execrl.refine_rl")

EVAL_METRICS = ("hidden_pass_rate", "reward", "turns_mean")
CONFIDENCE = 0.95


def _per_task(episodes: list[Episode], n_tasks: int, samples: int) -> dict[str, list[float]]:
    """Task-major episodes -> per task the mean of each metric over its ``samples`` episodes."""
    groups = [episodes[i * samples : (i + 1) * samples] for i in range(n_tasks)]
    return {
        "hidden_pass_rate": [sum(e.passed for e in g) / samples for g in groups],
        "reward": [sum(e.reward for e in g) / samples for g in groups],
        "turns_mean": [sum(e.turns for e in g) / samples for g in groups],
    }


def evaluate_refine_once(
    run_dir: Path,
    label: str,
    *,
    engine: Engine,
    tokenizer: Any,
    sandbox: SyncRunner,
    config: TrainConfig,
    multi: MultiTurnConfig,
    sampling: SamplingParams,
) -> dict[str, Any]:
    """Multi-turn episodes of every eval suite unless ``eval/<label>.json`` exists (a resumed run keeps
    the base eval it already has). The seed is the same for both labels, so the two evals are paired."""
    path = run_dir / "eval" / f"{label}.json"
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    out: dict[str, Any] = {"label": label, "suites": {}}
    params = replace(sampling, temperature=config.eval.temperature, seed=config.run.seed + 31)
    samples = config.eval.samples_per_task
    for suite, tasks in setup.eval_tasks(config).items():
        episodes = rollout_episodes(
            engine, tokenizer, tasks, sandbox, samples_per_prompt=samples, params=params, config=multi
        )
        out["suites"][suite] = {"task_ids": [t.id for t in tasks], **_per_task(episodes, len(tasks), samples)}
        log.info(
            "%s %s: hidden pass rate %.3f", label, suite, sum(e.passed for e in episodes) / len(episodes)
        )
    write_json_atomic(path, out)
    return out


def compare_refine_evals(
    base: dict[str, Any], trained: dict[str, Any], *, resamples: int, seed: int
) -> dict[str, Any]:
    """Per suite: an interval per model and the paired interval on trained - base, for each metric."""
    opts: dict[str, Any] = {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE}
    out: dict[str, Any] = {}
    for suite, b in base["suites"].items():
        t = trained["suites"].get(suite)
        if t is None or t["task_ids"] != b["task_ids"]:
            raise ValueError(
                f"base and trained refine evals of {suite!r} scored different tasks; re-run both"
            )
        out[suite] = {
            "suite": suite,
            "n_tasks": len(b["task_ids"]),
            "confidence": CONFIDENCE,
            "resamples": resamples,
            "models": {
                "base": {m: bootstrap_ci(b[m], **opts).as_dict() for m in EVAL_METRICS},
                "trained": {m: bootstrap_ci(t[m], **opts).as_dict() for m in EVAL_METRICS},
            },
            "delta": {m: paired_bootstrap_diff(b[m], t[m], **opts).as_dict() for m in EVAL_METRICS},
        }
    return out


def finish_refine_report(run_dir: Path, config: TrainConfig) -> Path:
    """Write ``eval/refine_comparison.json`` and the run's report (``report.md``/``.html`` with plots)."""
    from execrl.telemetry.report import write_report

    base = json.loads((run_dir / "eval" / "refine_base.json").read_text(encoding="utf-8"))
    trained = json.loads((run_dir / "eval" / "refine_trained.json").read_text(encoding="utf-8"))
    comparison = compare_refine_evals(
        base, trained, resamples=config.eval.bootstrap_resamples, seed=config.run.seed
    )
    (run_dir / "eval" / "refine_comparison.json").write_text(
        json.dumps(comparison, indent=1), encoding="utf-8"
    )
    return write_report(run_dir, comparison)
