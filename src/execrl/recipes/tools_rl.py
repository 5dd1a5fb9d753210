"""Tool-integrated RL, one readable loop: the model calls the sandbox mid-answer (ReTool, arXiv 2504.11536;
ToRL, arXiv 2503.23383), one context per episode, rewarded on the hidden tests of its final answer.

    execrl train tools.enabled=true tasks.suites='{"tools"=1.0}'
    execrl train --resume runs/tools-smollm2-20261202-013000

Each step: the task scheduler draws tasks, each task opens one session template (its files and setup
cells) that its ``samples_per_prompt`` episodes fork from, each episode runs model turn -> tool call ->
tool answer -> ... -> final answer (``execrl.tools.episode``: token budgets, call cap, malformed calls
answered and counted), the final answers are judged on the hidden tests in fresh jails, advantages are
group-relative over a task's episodes, and one clipped policy-gradient update covers only the model's
tokens (tool answers masked). Metrics per step: ``tools/*`` (``execrl.tools.metrics``), ``reward/*``,
timings; the live monitor and the report read them from metrics.jsonl like every other metric.

Everything around the step is the main loop's (``recipes/loop.py``): run directory, checkpoints,
telemetry, alarms, signals, the wall-time budget and ``--resume`` (rollout seeds are a hash of (run seed,
step), sessions are opened afresh each step, so a resumed run samples what the uninterrupted one would).

Held-out evaluation (``eval.enabled``, on ``tasks.eval_suites``' test splits): before the first update and
after the last, the policy runs the same tool episodes (``eval.samples_per_task`` per task at
``eval.temperature``, paired seeds) and ``report.md`` shows base vs trained with paired intervals on the
hidden pass rate, the reward, tool calls per episode and the share of episodes that called a tool
(``recipes/episode_eval.py``; files ``eval/tools_{base,trained,comparison}.json``).

Limits: no DAPO dynamic sampling, no PPO value head, no async or streamed rollouts, no Ray executor, no
``sandbox.urls`` (the config refuses each). The reward audit (``audit.enabled``, ``recipes/audit.py``)
reads the final answers and the judge's scores as the main recipe's completions: the blind audit on tasks
with audit tests (the ``tools`` suite's value answers have none, so there it only counts suspicious
behaviour and keeps flagged answers in ``hack.jsonl``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from execrl.components import setup
from execrl.config import TrainConfig, build
from execrl.recipes.audit import audit_completions
from execrl.recipes.episode_eval import EpisodeEval, evaluate_episodes_once, finish_episode_report
from execrl.recipes.loop import (
    Run,
    TrainOutcome,
    final_eval_due,
    run_steps,
    run_telemetry,
    setup_run,
    step_timings,
    stop_on_signals,
    trained_engine,
)
from execrl.rewards import Score
from execrl.rewards.batch import SyncRunner
from execrl.rollout.types import SamplingParams
from execrl.scheduler import domain_metrics, outcomes_from_scores
from execrl.scheduler.report import write_domain_report
from execrl.seeding import stream_seed
from execrl.tools import ToolConfig, ToolEpisode, rollout_tool_episodes, tool_metrics
from execrl.trainer import compute_advantages, masked_train_batch, policy_update, prepare_batch

__all__ = ["tool_config", "tool_episode_eval", "train", "train_step"]

log = logging.getLogger("execrl.tools_rl")


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    # ---- setup: the main loop's run (model, optimizer, scheduler, engine; restored on resume) -----------
    run = setup_run(config, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)
    tools, sampling = tool_config(config), setup.sampling_params(config)
    started = time.monotonic()
    held = sessions_held(config)  # templates and their forks at once
    with setup.build_sandbox(config, sessions=held) as sandbox, telemetry, stop_on_signals(run):
        # each step: episodes, advantages, update; then log, alarms, stop reasons, checkpoint (loop.py)
        spec = tools_eval_spec(run, sandbox, tools)
        evaluate = partial(evaluate_episodes_once, run.run_dir, spec=spec, config=config, sampling=sampling)
        if config.eval.enabled:
            evaluate("base", engine=run.engine)  # skipped on resume when eval/tools_base.json exists
        step_fn = partial(train_step, run, sandbox=sandbox, tools=tools, sampling=sampling)
        last_step = run_steps(run, telemetry, step_fn, started=started, progress=progress)
        write_domain_report(run.run_dir)
        if final_eval_due(run):  # not after a signal or an alarm stop
            evaluate("trained", engine=trained_engine(run))  # with LoRA: the merged model
            finish_episode_report(run.run_dir, config, spec.prefix)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


def train_step(
    run: Run, step: int, *, sandbox: SyncRunner, tools: ToolConfig, sampling: SamplingParams
) -> dict[str, float]:
    """One step: draw tasks, roll out and judge the tool episodes, group-relative advantages, update, metrics."""
    config = run.config
    t0 = time.perf_counter()
    # ---- episodes: model turns and tool calls, the final answer judged on the hidden tests --------------
    weights = run.tasks.domain_weights()
    tasks = run.tasks.tasks_for_step(step, config.rollout.prompts_per_step)
    episodes = rollout_tool_episodes(
        run.engine, run.tokenizer, tasks, sandbox, samples_per_prompt=sampling.samples_per_prompt,
        params=replace(sampling, seed=stream_seed(config.run.seed, "rollout", step, 0)), config=tools,
    )  # fmt: skip
    outcomes = outcomes_from_scores([t.id for t in tasks], [e.reward for e in episodes],
                                    [e.passed for e in episodes], [e.task_index for e in episodes])  # fmt: skip
    run.tasks.observe(step, outcomes)
    t1 = time.perf_counter()
    # ---- rewards -> advantages over each task's episodes -> batch of whole contexts -> update -----------
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float64)  # [N]
    valid = torch.tensor([e.valid for e in episodes], dtype=torch.bool)  # [N]
    groups = torch.tensor([e.task_index for e in episodes], dtype=torch.long)  # [N]
    advantages = compute_advantages(
        run.tcfg.advantage_estimator, rewards, group_ids=groups, valid=valid, eps=run.tcfg.advantage_std_eps
    )  # [N]
    if step == config.run.inject_nan_loss_at_step:  # fault injection for the alarm tests
        advantages = advantages * float("nan")
    batch = masked_train_batch([e.token_ids for e in episodes], [e.model_mask for e in episodes], advantages,
                               valid=[e.valid for e in episodes], pad_token_id=run.engine.pad_token_id)  # type: ignore[attr-defined]  # fmt: skip
    batch = prepare_batch(run.model, batch, run.tcfg, ref_model=run.ref_model)
    metrics = policy_update(
        run.model, run.optimizer, run.lr_scheduler, batch, run.tcfg, ref_model=run.ref_model
    )
    t2 = time.perf_counter()
    # ---- metrics: tool use, rewards, per-domain, timings ------------------------------------------------
    metrics.update(tool_metrics(episodes, step_s=t2 - t0))
    metrics.update(domain_metrics([(run.tasks.domain_of(o.task_id), o) for o in outcomes], weights))
    metrics.update(step_timings(t0, t1, t2, model_tokens=sum(sum(e.model_mask) for e in episodes)))
    if config.audit.enabled:  # the final answers, audited and flagged as the main recipe's completions
        metrics.update(audit_completions(
            run.run_dir, step, [tasks[e.task_index] for e in episodes], [e.final_text for e in episodes],
            [_score(e) for e in episodes], sandbox=sandbox, reward=tools.reward, config=config, step_s=t2 - t0,
        ))  # fmt: skip
    return metrics


def _score(episode: ToolEpisode) -> Score:
    if episode.score is None:
        raise RuntimeError("a tool episode reached the audit without the judge's score")
    return episode.score


def tools_eval_spec(run: Run, sandbox: SyncRunner, tools: ToolConfig) -> EpisodeEval:
    """The held-out evaluation of this recipe: its own episodes, judged as in training; a rollout call
    holds as many tasks as the sessions the sandbox was sized for allow (``sessions_held``)."""
    return tool_episode_eval(run.tokenizer, run.config, sandbox, tools)


def tool_episode_eval(
    tokenizer: Any, config: TrainConfig, sandbox: SyncRunner, tools: ToolConfig
) -> EpisodeEval:
    """``tools_eval_spec`` from its parts (``execrl sft`` evaluates its model with the same episodes)."""
    return EpisodeEval(
        prefix="tools",
        rollout=partial(rollout_tool_episodes, tokenizer=tokenizer, runner=sandbox, config=tools),
        metrics={
            "hidden_pass_rate": lambda e: float(e.passed),
            "reward": lambda e: e.reward,  # the training reward: hidden-test reward minus penalties
            "tool_calls": lambda e: float(e.tool_calls),
            "called_a_tool": lambda e: float(e.tool_calls > 0),
        },
        tasks_per_call=max(1, sessions_held(config) // (config.eval.samples_per_task + 1)),
    )


def sessions_held(config: TrainConfig) -> int:
    """The most sessions the recipe holds at once: a step's templates and forks, or one eval task's."""
    step = config.rollout.prompts_per_step * (config.rollout.samples_per_prompt + 1)
    return max(step, config.eval.samples_per_task + 1) if config.eval.enabled else step


def tool_config(config: TrainConfig) -> ToolConfig:
    return build(
        ToolConfig, config.tools, reward=setup.reward_config(config), defaults=("reuse_kv_max_bytes",)
    )
