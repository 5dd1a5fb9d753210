"""Evaluation recipes: base vs trained on the held-out split inside a run, and ``execrl eval`` on a suite.

A run's environment decides what is evaluated (``Evaluation``): the one-turn environment through the pass@k
harness (``eval/base.json``, ``eval/trained.json``), a multi-turn environment (refine feedback, tool calls,
yours) through its own episodes in the one rollout loop (``eval/<environment>_base.json``, ...: per task the
mean of each metric over ``eval.samples_per_task`` episodes, compared with paired bootstrap intervals; with
few samples the interval also carries sampling noise: it is still valid, only wider).

Inside a run, the base model is evaluated before the first update (``eval/base.json``) and the trained
model after the last (``eval/trained.json``), on the same held-out tasks with the same decoding, so the
report can pair them task by task: the interval on the improvement comes from a paired bootstrap over
tasks, which is much tighter than comparing two independent intervals.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components import setup
from execrl.config import TrainConfig, build
from execrl.episodes import Episode, LocalBackend, run_episodes
from execrl.eval.harness import EvalConfig, EvalResult, evaluate
from execrl.eval.passk import TaskCounts
from execrl.eval.stats import bootstrap_ci, paired_bootstrap_diff, passk_comparison
from execrl.recipes.audit import eval_audit

if TYPE_CHECKING:
    from execrl.episodes import Environment
    from execrl.rollout.engine import Engine
    from execrl.sandbox import Sandbox

log = logging.getLogger("execrl.eval")


@dataclass(frozen=True)
class Evaluation:
    """A run's held-out evaluation, by its environment: the one-turn environment's pass@k harness
    (``eval/base.json``, ``eval/trained.json``), or a multi-turn environment's own episodes
    (``eval/<environment>_base.json``, ...). Both pair base and trained by task."""

    config: TrainConfig
    sandbox: Any
    environment: Any
    tokenizer: Any

    @property
    def single_turn(self) -> bool:
        return bool(self.environment.name == "single")

    def run(self, run_dir: Path, label: str, engine: Engine) -> None:
        """Evaluate the engine's model as ``label`` (``base``/``trained``) unless its file exists."""
        if self.single_turn:
            evaluate_checkpoint_once(run_dir, label, engine, self.config, self.sandbox)
            return
        spec = episode_eval(self.config, self.environment, self.tokenizer)
        evaluate_episodes_once(run_dir, label, spec, engine=engine, config=self.config)

    def finish(self, run_dir: Path) -> Path:
        """Compare base with trained and write the run's report."""
        if self.single_turn:
            return finish_report(run_dir, self.config)
        return finish_episode_report(run_dir, self.config, self.environment.name)


def run_eval_config(config: TrainConfig) -> EvalConfig:
    """The run's evaluation decoding: ``[eval]`` by name, the eval token budget from ``[rollout]``."""
    return build(
        EvalConfig, config.eval, config.run, max_new_tokens=config.rollout.eval_max_new_tokens,
        defaults=("top_p", "prompts_per_batch", "ks"),
    )  # fmt: skip


def evaluate_checkpoint_once(
    run_dir: Path, label: str, engine: Engine, config: TrainConfig, sandbox: Sandbox
) -> dict[str, Any]:
    """Evaluate the engine's current model on every eval suite unless ``eval/<label>.json`` exists."""
    path = run_dir / "eval" / f"{label}.json"
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    path.parent.mkdir(parents=True, exist_ok=True)
    out = evaluate_suites(engine, config, sandbox, label=label, model_name=f"{config.model.path} ({label})")
    write_json_atomic(path, out)
    return out


def evaluate_suites(
    engine: Engine, config: TrainConfig, sandbox: Sandbox, *, label: str, model_name: str
) -> dict[str, Any]:
    """The run's held-out evaluation of the engine's model: every eval suite's tasks with the run's
    decoding and reward, and with ``audit.enabled`` the blind audit of the passing completions."""
    out: dict[str, Any] = {"label": label, "suites": {}}
    reward = setup.reward_config(config)
    for suite, tasks in setup.eval_tasks(config).items():
        result = evaluate(
            engine,  # type: ignore[arg-type]
            tasks,
            suite=suite,
            model_name=model_name,
            config=run_eval_config(config),
            sandbox=sandbox,
            reward=reward,
        )
        out["suites"][suite] = result.to_dict()
        if config.audit.enabled:  # every reward-passing completion, on its task's audit tests (blind)
            out["suites"][suite]["audit"] = eval_audit(
                tasks, result.tasks, sandbox=sandbox, reward=reward, scores=result.scores
            )
        log.info(
            "%s %s: mean reward %.3f, pass@1 %s",
            label,
            suite,
            result.mean_reward.value,
            result.pass_at_k.get("pass@1"),
        )
    return out


def write_json_atomic(path: Path, value: Any) -> None:
    """Write through a temporary file and rename: a crash never leaves a half-written eval that a
    resumed run would take as done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(value, indent=1), encoding="utf-8")
    tmp.replace(path)


def compare_evals(
    base: dict[str, Any], trained: dict[str, Any], *, resamples: int, seed: int
) -> dict[str, Any]:
    """Per suite: pass@k of both with intervals and the paired difference, and the same for mean reward."""
    out: dict[str, Any] = {}
    for suite, b in base["suites"].items():
        t = trained["suites"][suite]
        b_tasks, t_tasks = b["tasks"], t["tasks"]
        if [x["task_id"] for x in b_tasks] != [x["task_id"] for x in t_tasks]:
            raise ValueError(f"base and trained evals of {suite!r} scored different tasks; re-run the eval")
        counts_b = [TaskCounts(len(x["passed"]), sum(x["passed"])) for x in b_tasks]
        counts_t = [TaskCounts(len(x["passed"]), sum(x["passed"])) for x in t_tasks]
        ks = [int(k.split("@")[1]) for k in b["pass_at_k"]]
        comparison = passk_comparison(
            suite=suite, base=counts_b, trained=counts_t, ks=ks, resamples=resamples, seed=seed
        )
        reward_b = [sum(x["rewards"]) / len(x["rewards"]) for x in b_tasks]
        reward_t = [sum(x["rewards"]) / len(x["rewards"]) for x in t_tasks]
        opts = {"resamples": resamples, "seed": seed}
        comparison["models"]["base"]["reward"] = bootstrap_ci(reward_b, **opts).as_dict()
        comparison["models"]["trained"]["reward"] = bootstrap_ci(reward_t, **opts).as_dict()
        comparison["delta"]["reward"] = paired_bootstrap_diff(reward_b, reward_t, **opts).as_dict()
        out[suite] = comparison
    return out


def finish_report(run_dir: Path, config: TrainConfig) -> Path:
    """Compare ``eval/base.json`` with ``eval/trained.json`` and write the run's report with plots."""
    from execrl.telemetry.report import write_report

    base = json.loads((run_dir / "eval" / "base.json").read_text(encoding="utf-8"))
    trained = json.loads((run_dir / "eval" / "trained.json").read_text(encoding="utf-8"))
    comparison = compare_evals(base, trained, resamples=config.eval.bootstrap_resamples, seed=config.run.seed)
    (run_dir / "eval" / "comparison.json").write_text(json.dumps(comparison, indent=1), encoding="utf-8")
    return write_report(run_dir, comparison)


def eval_command(
    *,
    model: str,
    suite: str,
    split: str,
    eval_config: EvalConfig,
    limit: int | None,
    json_path: Path | None,
    sandbox_workers: int,
) -> EvalResult:
    """``execrl eval``: one model on one suite, per-task results saved, summary printed by the caller."""
    from execrl.rollout.engine import create_engine
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.serve.export import load_any_model
    from execrl.tasks import load_suite

    # A HF directory, the embedded model, an execrl run directory (newest checkpoint) or a checkpoint.
    model_obj, tokenizer, source = load_any_model(model)
    tasks = load_suite(suite, split=split)
    if limit is not None:
        tasks = tasks[:limit]
    engine = create_engine("hf", model=model_obj, tokenizer=tokenizer)
    with Sandbox(SandboxConfig(workers=sandbox_workers)) as sandbox:
        result = evaluate(
            engine, tasks, suite=suite, model_name=source.description, config=eval_config, sandbox=sandbox
        )  # type: ignore[arg-type]
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    return result


def eval_as_run(
    *, model: str, run_dir: Path, json_path: Path | None, sandbox_workers: int
) -> tuple[dict[str, Any], list[str]]:
    """``execrl eval --as-run RUN_DIR``: the model on the run's own held-out evaluation (its config's eval
    suites, tasks, decoding, seed and reward) and the comparison with the run's ``eval/trained.json``, task
    by task. Returns the evaluation (``evaluate_checkpoint_once``'s shape) and the differences (empty: the
    same completions' verdicts and rewards on every task). Why: a run's held-out score is measured inside
    the run; an exported model (``execrl export``, LoRA folded) must reproduce it exactly, or it is not
    the model the run measured."""
    from execrl.config import load_config
    from execrl.rollout.engine import create_engine
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.serve.export import load_any_model

    config = load_config(run_dir / "config.toml", [])
    trained_path = run_dir / "eval" / "trained.json"
    if not trained_path.exists():
        raise FileNotFoundError(f"{trained_path}: the run has no held-out evaluation of its trained model")
    model_obj, tokenizer, source = load_any_model(model)
    engine = create_engine("hf", model=model_obj, tokenizer=tokenizer)
    with Sandbox(SandboxConfig(workers=sandbox_workers)) as sandbox:
        evaluated = evaluate_suites(
            engine, config, sandbox, label=f"{source.description} as {run_dir}", model_name=source.description
        )
    out: dict[str, Any] = json.loads(json.dumps(evaluated))  # as written: lists, not tuples
    if json_path is not None:
        write_json_atomic(json_path, out)
    trained = json.loads(trained_path.read_text(encoding="utf-8"))
    return out, eval_differences(trained, out)


def eval_differences(reference: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Where two evaluations of the same tasks disagree: a suite, a task, its verdicts or its rewards."""
    problems: list[str] = []
    for suite, ref in reference["suites"].items():
        got = other["suites"].get(suite)
        if got is None:
            problems.append(f"{suite}: not evaluated")
            continue
        for a, b in zip(ref["tasks"], got["tasks"], strict=False):
            if a["task_id"] != b["task_id"]:
                problems.append(f"{suite}: task {b['task_id']} where the run has {a['task_id']}")
            elif a["passed"] != b["passed"] or a["rewards"] != b["rewards"]:
                problems.append(f"{suite}/{a['task_id']}: passed {b['passed']} rewards {b['rewards']}; "
                                f"the run: passed {a['passed']} rewards {a['rewards']}")  # fmt: skip
        if len(ref["tasks"]) != len(got["tasks"]):
            problems.append(f"{suite}: {len(got['tasks'])} tasks, the run {len(ref['tasks'])}")
    return problems


# ---- multi-turn environments: their own episodes, paired by task ----------------------------------------

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
