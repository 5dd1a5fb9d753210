"""Multi-turn RL on execution feedback, one readable loop (RLEF: Gehring et al. 2024, arXiv 2410.02089).

    execrl train --config docs/configs/refine_rl.toml   # any config with refine.max_turns > 1
    execrl train refine.max_turns=3 refine.invalid_turn_penalty=0.1
    execrl train --resume runs/refine-rl-smollm2-20261201-051500

Each step: the task scheduler draws tasks (static mixture or adaptive, ``scheduler.mode``), each task gets
``samples_per_prompt`` episodes (model turn -> visible tests in the sandbox -> feedback in the same
context -> next turn, up to ``refine.max_turns``), each episode is rewarded on the hidden tests of its
final program, advantages are group-relative over a task's episodes, and one clipped policy-gradient
update covers only the model's tokens (``refine/multiturn.py``). The scheduler learns from every group.

Everything around the step is the main loop's (``recipes/loop.py``): run directory, policy, reference,
optimizer, scheduler, checkpoints with the scheduler state, ``RunTelemetry`` (metrics.jsonl, TensorBoard,
alarms that may stop the run, ``execrl monitor``), SIGINT/SIGTERM handling, the wall-time budget, and
``--resume`` from the newest checkpoint (rollout seeds are a hash of (run seed, step), so a resumed run
samples exactly what the uninterrupted one would have). The held-out evaluation of the base and trained
models and the report are in ``recipes/episode_eval.py``.

Limits: no DAPO dynamic sampling, no PPO value head, no async or streamed rollouts (the config refuses
them with ``refine.max_turns > 1``); no reward audit (``recipes/audit.py`` re-runs single-turn
completions; a warning says so). Turns reuse the keys/values of the turns before
(``MultiTurnConfig.reuse_kv_max_bytes``, ``rollout/prefix_cache.py``): each turn prefills only its new tokens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from execrl.components import setup
from execrl.config import TrainConfig, build
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
from execrl.refine.multiturn import Episode, MultiTurnConfig, episodes_to_train_batch, rollout_episodes
from execrl.rewards.batch import SyncRunner
from execrl.rollout.types import SamplingParams
from execrl.scheduler import GroupOutcome, domain_metrics, outcomes_from_scores
from execrl.scheduler.report import write_domain_report
from execrl.seeding import stream_seed
from execrl.tasks.schema import Task
from execrl.trainer import compute_advantages, policy_update, prepare_batch

__all__ = ["episode_metrics", "multi_turn_config", "train", "train_step"]

log = logging.getLogger("execrl.refine_rl")


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    # ---- setup: the main loop's run (model, optimizer, scheduler, engine; restored on resume) -----------
    if config.audit.enabled:  # the audit re-runs single-turn completions (recipes/audit.py); not ported
        log.warning("audit.enabled: the multi-turn recipe runs no reward audit (no audit/* metrics)")
    run = setup_run(config, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)
    multi, sampling = multi_turn_config(config), setup.sampling_params(config)
    started = time.monotonic()
    with setup.build_sandbox(config) as sandbox, telemetry, stop_on_signals(run):
        spec = refine_eval_spec(run, sandbox, multi)
        evaluate = partial(evaluate_episodes_once, run.run_dir, spec=spec, config=config, sampling=sampling)
        if config.eval.enabled:
            evaluate("base", engine=run.engine)  # skipped on resume when eval/refine_base.json exists
        # each step: episodes, advantages, update; then log, alarms, stop reasons, checkpoint (loop.py)
        step_fn = partial(train_step, run, sandbox=sandbox, multi=multi, sampling=sampling)
        last_step = run_steps(run, telemetry, step_fn, started=started, progress=progress)
        write_domain_report(run.run_dir)  # domains.md + plots/domain_weights.png
        if final_eval_due(run):  # not after a signal or an alarm stop
            evaluate("trained", engine=trained_engine(run))  # with LoRA: the merged model
            finish_episode_report(run.run_dir, config, spec.prefix)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


def train_step(
    run: Run, step: int, *, sandbox: SyncRunner, multi: MultiTurnConfig, sampling: SamplingParams
) -> dict[str, float]:
    """One step: draw tasks, roll out and score the episodes, group-relative advantages, update, metrics."""
    config = run.config
    t0 = time.perf_counter()
    # ---- rollout: multi-turn episodes, reward from the hidden tests of the final program -----------------
    weights = run.tasks.domain_weights()  # the shares this step's draw uses (logged)
    tasks = run.tasks.tasks_for_step(step, config.rollout.prompts_per_step)
    episodes = rollout_episodes(
        run.engine, run.tokenizer, tasks, sandbox,
        samples_per_prompt=sampling.samples_per_prompt,
        params=replace(sampling, seed=stream_seed(config.run.seed, "rollout", step, 0)),
        config=multi,
    )  # fmt: skip
    outcomes = episode_outcomes(tasks, episodes)
    run.tasks.observe(step, outcomes)  # the adaptive scheduler learns from every group
    t1 = time.perf_counter()
    # ---- advantages over each task's episodes, then the update on the model's tokens only ----------------
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float64)  # [N]
    valid = torch.tensor([e.valid for e in episodes], dtype=torch.bool)  # [N]
    groups = torch.tensor([e.task_index for e in episodes], dtype=torch.long)  # [N]
    advantages = compute_advantages(
        run.tcfg.advantage_estimator, rewards, group_ids=groups, valid=valid, eps=run.tcfg.advantage_std_eps
    )  # [N]
    if step == config.run.inject_nan_loss_at_step:  # fault injection for the alarm tests
        advantages = advantages * float("nan")
    batch = episodes_to_train_batch(episodes, advantages, run.engine.pad_token_id)  # type: ignore[attr-defined]
    batch = prepare_batch(run.model, batch, run.tcfg, ref_model=run.ref_model)
    metrics = policy_update(
        run.model, run.optimizer, run.lr_scheduler, batch, run.tcfg, ref_model=run.ref_model
    )
    t2 = time.perf_counter()
    # ---- metrics: rewards, multi-turn behaviour, per-domain, timings ------------------------------------
    metrics.update(episode_metrics(episodes))
    metrics.update(domain_metrics([(run.tasks.domain_of(o.task_id), o) for o in outcomes], weights))
    metrics.update(step_timings(t0, t1, t2, model_tokens=sum(sum(e.model_mask) for e in episodes)))
    return metrics


def refine_eval_spec(run: Run, sandbox: SyncRunner, multi: MultiTurnConfig) -> EpisodeEval:
    """The held-out evaluation of this recipe: its own episodes, scored as in training."""
    return EpisodeEval(
        prefix="refine",
        rollout=partial(rollout_episodes, tokenizer=run.tokenizer, runner=sandbox, config=multi),
        metrics={
            "hidden_pass_rate": lambda e: float(e.passed),
            "reward": lambda e: e.reward,  # the training reward: hidden-test reward minus penalties
            "turns_mean": lambda e: float(e.turns),
        },
    )


def multi_turn_config(config: TrainConfig) -> MultiTurnConfig:
    return build(
        MultiTurnConfig, config.refine, reward=setup.reward_config(config), defaults=("reuse_kv_max_bytes",)
    )


def episode_outcomes(tasks: Sequence[Task], episodes: Sequence[Episode]) -> list[GroupOutcome]:
    """One outcome per task (its episodes' training rewards and hidden-test passes) for the scheduler."""
    return outcomes_from_scores(
        [t.id for t in tasks],
        [e.reward for e in episodes],
        [e.passed for e in episodes],
        [e.task_index for e in episodes],
    )


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """The step's episode metrics (N episodes, T model turns in all).

    ``reward/mean`` is the training reward (hidden-test reward minus the invalid-turn penalties);
    ``refine/hidden_pass_rate`` the share of final programs passing the hidden tests; ``refine/turns_mean``
    T / N; ``refine/invalid_turn_rate`` the share of the T turns without valid code; ``refine/feedback_rate``
    the share of episodes whose first turn failed the visible tests (they got feedback); ``refine/fix_rate``
    the share of those whose last turn passes the visible tests (absent when no episode got feedback: a 0
    would read as "never fixed"). ``rollout/response_length_mean``: model tokens per episode, all turns.
    """
    n = len(episodes)
    turns = sum(e.turns for e in episodes)
    mean = sum(e.reward for e in episodes) / n
    with_feedback = [e for e in episodes if e.turns > 1]
    out = {
        "reward/mean": mean,
        "reward/std": (sum((e.reward - mean) ** 2 for e in episodes) / n) ** 0.5,
        "reward/pass_rate": sum(e.passed for e in episodes) / n,
        "reward/invalid_rate": sum(not e.valid for e in episodes) / n,
        "refine/hidden_pass_rate": sum(e.passed for e in episodes) / n,
        "refine/turns_mean": turns / n,
        "refine/invalid_turn_rate": sum(e.invalid_turns for e in episodes) / turns,
        "refine/feedback_rate": len(with_feedback) / n,
        "refine/context_tokens_mean": sum(len(e.token_ids) for e in episodes) / n,
        "rollout/response_length_mean": sum(sum(e.model_mask) for e in episodes) / n,
        "sandbox/error_rate": sum(e.hidden_reason == "sandbox_error" for e in episodes) / n,
    }
    if with_feedback:
        out["refine/fix_rate"] = sum(e.visible_passed for e in with_feedback) / len(with_feedback)
    return out
