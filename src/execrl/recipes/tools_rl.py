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

Limits: no DAPO dynamic sampling, no PPO value head, no async or streamed rollouts, no Ray executor, no
``sandbox.urls`` (the config refuses each); no reward audit and no held-out base/trained evaluation in
this recipe yet (a warning says so).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from execrl.components import setup
from execrl.config import TrainConfig, build
from execrl.recipes.loop import Run, TrainOutcome, run_steps, run_telemetry, setup_run, stop_on_signals
from execrl.rewards.batch import SyncRunner
from execrl.rollout.types import SamplingParams
from execrl.scheduler import domain_metrics, outcomes_from_scores
from execrl.scheduler.report import write_domain_report
from execrl.seeding import stream_seed
from execrl.tools import ToolConfig, rollout_tool_episodes, tool_metrics
from execrl.trainer import compute_advantages, masked_train_batch, policy_update, prepare_batch

__all__ = ["tool_config", "train", "train_step"]

log = logging.getLogger("execrl.tools_rl")


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    # ---- setup: the main loop's run (model, optimizer, scheduler, engine; restored on resume) -----------
    for on, what in ((config.audit.enabled, "audit.enabled: no reward audit"),
                     (config.eval.enabled, "eval.enabled: no held-out base/trained evaluation")):  # fmt: skip
        if on:
            log.warning("%s in the tool recipe yet (metrics.jsonl has the per-step tool metrics)", what)
    run = setup_run(config, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)
    tools, sampling = tool_config(config), setup.sampling_params(config)
    started = time.monotonic()
    held = config.rollout.prompts_per_step * (sampling.samples_per_prompt + 1)  # forks and templates
    with setup.build_sandbox(config, sessions=held) as sandbox, telemetry, stop_on_signals(run):
        # each step: episodes, advantages, update; then log, alarms, stop reasons, checkpoint (loop.py)
        step_fn = partial(train_step, run, sandbox=sandbox, tools=tools, sampling=sampling)
        last_step = run_steps(run, telemetry, step_fn, started=started, progress=progress)
        write_domain_report(run.run_dir)
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
    metrics["perf/rollout_and_reward_s"] = t1 - t0
    metrics["perf/update_s"] = t2 - t1
    metrics["perf/step_s"] = t2 - t0
    metrics["perf/step_tokens_per_s"] = sum(sum(e.model_mask) for e in episodes) / (t2 - t0)
    return metrics


def tool_config(config: TrainConfig) -> ToolConfig:
    return build(
        ToolConfig, config.tools, reward=setup.reward_config(config), defaults=("reuse_kv_max_bytes",)
    )
