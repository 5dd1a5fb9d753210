"""Held-out evaluation of the multi-turn environments (refine feedback, tool calling, yours): base vs
trained, paired by task.

Before the first update and after the last, the policy runs the environment's own episodes through the one
rollout loop (same tasks, same seeds, ``eval.samples_per_task`` per task, ``eval.temperature``) on the
held-out split of every eval suite; ``eval/<prefix>_base.json`` and ``eval/<prefix>_trained.json`` keep the
per-task means of each metric, ``eval/<prefix>_comparison.json`` the intervals (``prefix``: the
environment's name, ``refine`` or ``tools``).

The comparison has the shape ``execrl.telemetry.report`` renders (one entry per suite with ``models`` and
``delta``), so the run's ``report.md`` shows it like the main job's pass@k table: per model a 95 %
percentile-bootstrap interval over tasks, and on the difference the paired bootstrap (the same tasks for
both models; much tighter than two independent intervals).

Limit: the per-task means are over ``eval.samples_per_task`` sampled episodes, so with few samples the
interval also carries sampling noise (it is still valid, only wider).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components import setup
from execrl.config import TrainConfig
from execrl.episodes import Episode, LocalBackend, run_episodes
from execrl.eval.stats import bootstrap_ci, paired_bootstrap_diff

if TYPE_CHECKING:
    from execrl.episodes import Environment
    from execrl.rollout.engine import Engine

__all__ = [
    "EpisodeEval",
    "compare_episode_evals",
    "episode_eval",
    "evaluate_episodes_once",
    "finish_episode_report",
]

log = logging.getLogger("execrl.episode_eval")

CONFIDENCE = 0.95
BASE_METRICS: Mapping[str, Callable[[Episode], float]] = {
    "hidden_pass_rate": lambda e: float(e.passed),
    "reward": lambda e: e.reward,  # the training reward: hidden-test reward minus penalties
}
ENV_METRICS: Mapping[str, Mapping[str, Callable[[Episode], float]]] = {
    "tools": {
        "tool_calls": lambda e: float(e.info.get("tool_calls", 0.0)),
        "called_a_tool": lambda e: float(e.info.get("tool_calls", 0.0) > 0),
    },
}
DEFAULT_METRICS: Mapping[str, Callable[[Episode], float]] = {"turns_mean": lambda e: float(len(e.turns))}


@dataclass(frozen=True)
class EpisodeEval:
    """What one environment's held-out evaluation runs and keeps.

    ``prefix`` names the files; ``metrics`` maps a metric name to its value on one episode (averaged per
    task); ``tasks_per_call`` bounds how many tasks one rollout call holds (tool episodes' sessions are
    capped), ``None`` for all of a suite at once."""

    prefix: str
    environment: Environment
    tokenizer: Any
    metrics: Mapping[str, Callable[[Episode], float]]
    max_episode_tokens: int | None = None
    tasks_per_call: int | None = None


def episode_eval(config: TrainConfig, environment: Environment, tokenizer: Any) -> EpisodeEval:
    """The run's evaluation of ``environment``: its episodes judged as in training, the base metrics and the
    environment's own; a call holds as many tasks as the sandbox's sessions were sized for."""
    held = setup.sessions_held(config)
    per_call = max(1, held // (config.eval.samples_per_task + 1)) if held else None
    return EpisodeEval(
        prefix=environment.name, environment=environment, tokenizer=tokenizer,
        metrics={**BASE_METRICS, **ENV_METRICS.get(environment.name, DEFAULT_METRICS)},
        max_episode_tokens=setup.max_episode_tokens(config), tasks_per_call=per_call,
    )  # fmt: skip


def _per_task(
    spec: EpisodeEval, episodes: Sequence[Episode], n_tasks: int, samples: int
) -> dict[str, list[float]]:
    """Task-major episodes -> per task the mean of each metric over its ``samples`` episodes."""
    groups = [episodes[i * samples : (i + 1) * samples] for i in range(n_tasks)]
    return {
        name: [sum(value(e) for e in g) / samples for g in groups] for name, value in spec.metrics.items()
    }


def evaluate_episodes_once(
    run_dir: Path, label: str, spec: EpisodeEval, *, engine: Engine, config: TrainConfig
) -> dict[str, Any]:
    """The environment's episodes on every eval suite unless ``eval/<prefix>_<label>.json`` exists (a
    resumed run keeps the base eval it already has). The seed is the same for both labels: paired."""
    from execrl.recipes.evaluate import write_json_atomic

    path = run_dir / "eval" / f"{spec.prefix}_{label}.json"
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    out: dict[str, Any] = {"label": label, "suites": {}}
    params = replace(setup.sampling_params(config), samples_per_prompt=config.eval.samples_per_task,
                     temperature=config.eval.temperature, seed=config.run.seed + 31)  # fmt: skip
    if config.tools.enabled:
        params = replace(params, max_new_tokens=config.tools.max_turn_tokens)
    backend = LocalBackend(engine, spec.tokenizer)
    for suite, tasks in setup.eval_tasks(config).items():
        step = spec.tasks_per_call or len(tasks)
        episodes: list[Episode] = []
        for start in range(0, len(tasks), step):
            chunk = list(tasks[start : start + step])
            result = run_episodes(spec.environment, backend, chunk, params=params,
                                  max_episode_tokens=spec.max_episode_tokens)  # fmt: skip
            episodes.extend(result.episodes)
        out["suites"][suite] = {
            "task_ids": [t.id for t in tasks],
            **_per_task(spec, episodes, len(tasks), config.eval.samples_per_task),
        }
        log.info("%s %s %s: hidden pass rate %.3f", spec.prefix, label, suite,
                 sum(bool(e.passed) for e in episodes) / max(1, len(episodes)))  # fmt: skip
    write_json_atomic(path, out)
    return out


def compare_episode_evals(
    base: dict[str, Any], trained: dict[str, Any], *, resamples: int, seed: int
) -> dict[str, Any]:
    """Per suite: an interval per model and the paired interval on trained - base, for each metric (the
    per-task lists both evals hold besides ``task_ids``)."""
    opts: dict[str, Any] = {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE}
    out: dict[str, Any] = {}
    for suite, b in base["suites"].items():
        t = trained["suites"].get(suite)
        if t is None or t["task_ids"] != b["task_ids"]:
            raise ValueError(f"base and trained evals of {suite!r} scored different tasks; re-run both")
        metrics = [m for m in b if m != "task_ids"]
        missing = [m for m in metrics if m not in t]
        if missing:
            raise ValueError(f"the trained eval of {suite!r} has no {missing}; re-run both")
        out[suite] = {
            "suite": suite,
            "n_tasks": len(b["task_ids"]),
            "confidence": CONFIDENCE,
            "resamples": resamples,
            "models": {
                "base": {m: bootstrap_ci(b[m], **opts).as_dict() for m in metrics},
                "trained": {m: bootstrap_ci(t[m], **opts).as_dict() for m in metrics},
            },
            "delta": {m: paired_bootstrap_diff(b[m], t[m], **opts).as_dict() for m in metrics},
        }
    return out


def finish_episode_report(run_dir: Path, config: TrainConfig, prefix: str) -> Path:
    """Write ``eval/<prefix>_comparison.json`` and the run's report (``report.md``/``.html`` with plots)."""
    from execrl.telemetry.report import write_report

    base = json.loads((run_dir / "eval" / f"{prefix}_base.json").read_text(encoding="utf-8"))
    trained = json.loads((run_dir / "eval" / f"{prefix}_trained.json").read_text(encoding="utf-8"))
    comparison = compare_episode_evals(
        base, trained, resamples=config.eval.bootstrap_resamples, seed=config.run.seed
    )
    (run_dir / "eval" / f"{prefix}_comparison.json").write_text(
        json.dumps(comparison, indent=1), encoding="utf-8"
    )
    return write_report(run_dir, comparison)
