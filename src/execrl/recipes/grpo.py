"""GRPO from execution feedback, one readable loop: sample, execute, score, advantages, update, log, save.

    execrl train                      # the README's main job: SmolLM2-135M-Instruct, built-in suites
    execrl train rollout.samples_per_prompt=8 algorithm.kl_coef=0.001
    execrl train --resume runs/grpo-smollm2-20261130-101500

Algorithm: GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300) with the variants the trainer
registers (Dr.GRPO, RLOO, REINFORCE++; DAPO clip-higher and dynamic sampling, Yu et al. 2025, arXiv
2503.14476). The rewards come from running the sampled programs in the sandbox.

By default everything runs in this one process (a debugger works); the sandbox workers are the only
children. ``--executor ray`` moves generate-and-score to Ray actors (``execrl.distributed``); the loop
below is the same for both.
Ctrl-C (SIGINT) or SIGTERM finishes the current step, writes a checkpoint and stops; ``--resume`` continues
from the newest checkpoint with the same data, RNG and metrics file (no step logged twice).
"""

from __future__ import annotations

import functools
import logging
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from execrl.config import TrainConfig
from execrl.distributed import Executor, build_executor
from execrl.recipes import setup
from execrl.recipes.audit import audit_step
from execrl.recipes.batch import ppo_targets, rollout_metrics, to_train_batch, trainer_logprob_gap
from execrl.recipes.evaluate import evaluate_checkpoint_once, finish_report
from execrl.recipes.sampling import GroupSampler, sample_groups
from execrl.rewards import Score, reward_metrics
from execrl.rollout.engine import Engine, create_engine
from execrl.rollout.types import RolloutBatch, SamplingParams
from execrl.scheduler import MixtureSampler
from execrl.tasks.schema import Task
from execrl.telemetry import RunTelemetry, alarm_rules_from_config
from execrl.telemetry.webhook import WebhookConfig
from execrl.trainer import (
    TrainerConfig,
    ValueHead,
    build_optimizer,
    build_scheduler,
    compute_advantages,
    latest_checkpoint,
    load_checkpoint,
    needs_reference,
    policy_update,
    prepare_batch,
    save_checkpoint,
)

log = logging.getLogger("execrl.train")


@dataclass(frozen=True)
class TrainOutcome:
    run_dir: Path
    last_step: int  # the last step completed (-1 if none)
    stopped_early: str | None  # why training ended before total_steps, if it did


@dataclass
class _Run:
    """Everything the loop holds, built once by ``_setup`` (a resumed run restores it in place)."""

    config: TrainConfig
    run_dir: Path
    model: Any
    tokenizer: Any
    tcfg: TrainerConfig
    ref_model: Any
    value_head: ValueHead | None
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampler: MixtureSampler
    extra_sampler: MixtureSampler
    engine: Engine
    start_step: int

    @property
    def old_logprobs_from_rollout(self) -> bool:
        """With one pass over each rollout the behaviour policy is the current one: reuse the rollout's
        log-probs instead of a second forward pass. They equal the trainer's only without top-k/top-p."""
        rollout = self.config.rollout
        return self.tcfg.ppo_epochs == 1 and rollout.top_k == 0 and rollout.top_p == 1.0

    @property
    def extra_modules(self) -> dict[str, torch.nn.Module] | None:
        return {"value_head": self.value_head} if self.value_head is not None else None

    def extra_tasks(self, step: int, round_: int) -> list[Task]:
        """DAPO resampling draws from a second stream, so the main data position never moves."""
        index = step * (self.config.algorithm.max_resample_rounds + 1) + round_
        return self.extra_sampler.tasks_for_step(index, self.config.rollout.prompts_per_step)


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    run = _setup(config, resume_dir)
    telemetry = _telemetry(run, resuming=resume_dir is not None)
    stop = setup.StopFlag()
    started = time.monotonic()
    last_step = run.start_step - 1
    with setup.build_sandbox(config) as sandbox, telemetry, _stop_on_signals(stop), ExitStack() as stack:
        sampling = SamplingParams(
            samples_per_prompt=config.rollout.samples_per_prompt,
            max_new_tokens=config.rollout.max_new_tokens,
            temperature=config.rollout.temperature,
            top_p=config.rollout.top_p,
            top_k=config.rollout.top_k,
        )
        rewards = setup.reward_config(config)
        group_sampler = GroupSampler(
            run.engine, run.tokenizer, sandbox, rewards, sampling, seed=config.run.seed
        )
        # Where generate-and-score runs: this process (default) or Ray actors (executor.kind="ray").
        executor = stack.enter_context(closing(build_executor(config, group_sampler)))
        executor.publish_weights(run.model, version=run.start_step)
        if config.eval.enabled:
            evaluate_checkpoint_once(run.run_dir, "base", run.engine, config, sandbox)
        bar = _Progress(config.run.total_steps, run.start_step, enabled=progress)
        for step in range(run.start_step, config.run.total_steps):
            metrics = _train_step(run, step, executor)  # sample, execute, score, advantages, update
            decision = telemetry.log(step, metrics)
            last_step = step
            if decision.stop_requested:
                stop.request(f"alarm: {', '.join(e.rule for e in decision.fired)}")
            if time.monotonic() - started > config.run.max_wall_time_s and step + 1 < config.run.total_steps:
                stop.request(f"run.max_wall_time_s={config.run.max_wall_time_s:.0f} reached")
            last = step + 1 == config.run.total_steps
            if last or stop.requested or (step + 1) % config.checkpoint.every_steps == 0:
                save_checkpoint(
                    run.run_dir,
                    step=step,
                    model=run.model,
                    optimizer=run.optimizer,
                    scheduler=run.scheduler,
                    data_state={"next_step": step + 1},
                    metrics={k: v for k, v in metrics.items() if isinstance(v, float)},
                    keep_last=config.checkpoint.keep_last,
                    extra_modules=run.extra_modules,
                )
            bar.update(metrics)
            if stop.requested:
                log.warning("stopping after step %d: %s", step, stop.reason)
                break
        bar.close()
        # A wall-time stop still evaluates (the budget was spent training); a signal or an alarm does not.
        if config.eval.enabled and (not stop.requested or stop.reason.startswith("run.max_wall_time_s")):
            evaluate_checkpoint_once(run.run_dir, "trained", run.engine, config, sandbox)
            finish_report(run.run_dir, config)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=stop.reason or None)


def _train_step(run: _Run, step: int, executor: Executor) -> dict[str, float]:
    config, tcfg = run.config, run.tcfg
    # ---- rollout + score: a group of completions per prompt, run in the sandbox ----------------
    t0 = time.perf_counter()
    groups = sample_groups(
        run.sampler.tasks_for_step(step, config.rollout.prompts_per_step),
        functools.partial(run.extra_tasks, step),
        functools.partial(executor, step),
        dynamic=config.algorithm.dynamic_sampling,
        max_resample_rounds=config.algorithm.max_resample_rounds,
    )
    rollout, scores = groups.rollout, groups.scores
    t1 = time.perf_counter()

    # ---- advantages, then the clipped policy-gradient update, micro-batched by tokens -----------
    metrics = update_from_rollout(
        run.model,
        run.optimizer,
        run.scheduler,
        tcfg,
        rollout,
        scores,
        old_logprobs_from_rollout=run.old_logprobs_from_rollout,
        value_head=run.value_head,
        ref_model=run.ref_model,
        poison_advantages=step == config.run.inject_nan_loss_at_step,
    )
    executor.publish_weights(run.model, version=step + 1)  # rollout workers pick it up by version
    t2 = time.perf_counter()

    # ---- metrics ----------------------------------------------------------------------------------
    metrics.update(reward_metrics(scores))
    metrics.update(rollout_metrics(rollout, scores, config.rollout.max_new_tokens))
    metrics["rollout/sampling_rounds"] = float(groups.rounds)
    metrics["rollout/dropped_zero_variance_groups"] = float(groups.dropped_groups)
    metrics.update(executor.step_metrics())  # weight versions used, retries, replaced workers
    metrics["perf/rollout_and_reward_s"] = t1 - t0
    metrics["perf/update_s"] = t2 - t1
    metrics["perf/step_s"] = t2 - t0
    metrics["perf/step_tokens_per_s"] = rollout.stats.generated_tokens / (t2 - t0)
    metrics.update(audit_step(run.run_dir, step, groups, executor.sampler, config, step_s=t2 - t0))  # hacking
    return metrics


def update_from_rollout(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    tcfg: TrainerConfig,
    rollout: RolloutBatch,
    scores: Sequence[Score],
    *,
    old_logprobs_from_rollout: bool,
    value_head: ValueHead | None = None,
    ref_model: torch.nn.Module | None = None,
    poison_advantages: bool = False,
) -> dict[str, float]:
    """Scored rollout -> advantages -> ``TrainBatch`` -> one ``policy_update``; returns its metrics.

    Also reports the generation/training log-prob gap (``rollout/logprob_max_abs_diff``, NeMo-RL's
    ``gen_kl_error`` idea): with old log-probs taken from the rollout it is the update's own first forward
    against them, over every valid row of the first mini-batch (no extra pass); otherwise one extra no-grad
    pass over the first group. ``poison_advantages`` multiplies the advantages by NaN (fault
    injection for the alarm tests). ``execrl bench train`` times exactly this function.
    """
    rewards = torch.tensor([s.reward for s in scores], dtype=torch.float64)  # [N]
    valid = torch.tensor([s.valid for s in scores], dtype=torch.bool)  # [N]
    if value_head is None:  # group-relative; PPO's per-token GAE replaces it in ppo_targets below
        advantages = compute_advantages(
            tcfg.advantage_estimator,
            rewards,
            group_ids=rollout.group_index,
            valid=valid,
            eps=tcfg.advantage_std_eps,
        )
    else:
        advantages = torch.zeros_like(rewards)
    if poison_advantages:
        advantages = advantages * float("nan")
    batch = to_train_batch(rollout, advantages, valid, old_logprobs_from_rollout=old_logprobs_from_rollout)
    mismatch = None
    if not old_logprobs_from_rollout:  # otherwise the update measures it on its first forward, for free
        mismatch = trainer_logprob_gap(
            model, batch, rollout, rows=rollout.samples_per_prompt, temperature=tcfg.logprob_temperature
        )
    if value_head is not None:
        batch = ppo_targets(model, value_head, batch, rewards, gamma=tcfg.gamma, lam=tcfg.gae_lambda)
    batch = prepare_batch(model, batch, tcfg, ref_model=ref_model, value_model=value_head)
    metrics = policy_update(
        model, optimizer, scheduler, batch, tcfg, ref_model=ref_model, value_model=value_head
    )
    if mismatch is None:  # absent only when no valid row had a response token to compare
        mismatch = metrics.get("train/old_logprob_max_abs_diff")
    if mismatch is not None:
        metrics["rollout/logprob_max_abs_diff"] = mismatch
    return metrics


def _setup(config: TrainConfig, resume_dir: Path | None) -> _Run:
    run_dir = resume_dir if resume_dir is not None else setup.new_run_dir(config)
    if resume_dir is None:
        setup.write_run_files(run_dir, config)
    setup.seed_everything(config.run.seed)
    setup.register_extra_verifiers(config)
    model, tokenizer, model_path = setup.load_policy(config)
    tcfg = setup.trainer_config(config)
    ref_model = setup.load_reference(model_path, model.dtype) if needs_reference(tcfg) else None
    # PPO ("gae") learns a value head on the policy's hidden states; the GRPO family needs none.
    value_head = ValueHead(model.config.hidden_size) if tcfg.advantage_estimator == "gae" else None
    optimizer = build_optimizer(model, tcfg, extra_modules=(value_head,) if value_head is not None else ())
    train_suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
    run = _Run(
        config=config,
        run_dir=run_dir,
        model=model,
        tokenizer=tokenizer,
        tcfg=tcfg,
        ref_model=ref_model,
        value_head=value_head,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, tcfg),
        sampler=MixtureSampler(train_suites, config.tasks.suites, seed=config.run.seed),
        extra_sampler=MixtureSampler(train_suites, config.tasks.suites, seed=config.run.seed + 7919),
        engine=create_engine(config.rollout.engine, model=model, tokenizer=tokenizer),
        start_step=0,
    )
    checkpoint = latest_checkpoint(run_dir) if resume_dir is not None else None
    if checkpoint is not None:
        state = load_checkpoint(
            checkpoint, model, run.optimizer, run.scheduler, extra_modules=run.extra_modules
        )
        run.start_step = int(state.data_state["next_step"])
        log.info("resumed from %s at step %d", checkpoint, run.start_step)
    return run


def _telemetry(run: _Run, *, resuming: bool) -> RunTelemetry:
    tel = run.config.telemetry
    rules = alarm_rules_from_config([a.model_dump() for a in tel.alarms], include_defaults=tel.default_alarms)
    return RunTelemetry(
        run.run_dir,
        rules=rules,
        webhook=WebhookConfig(url=tel.webhook_url) if tel.webhook_url else None,
        resume_from_step=run.start_step - 1 if resuming else None,
        tensorboard=tel.tensorboard,
        mlflow=tel.mlflow,
        run_name=run.config.run.name,
    )


@contextmanager
def _stop_on_signals(stop: setup.StopFlag) -> Iterator[None]:
    """SIGINT/SIGTERM ask the loop to checkpoint and stop after the current step; a second one aborts."""

    def handler(signum: int, _frame: object) -> None:
        if stop.requested and stop.reason.startswith("signal"):
            raise KeyboardInterrupt
        stop.request(f"signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Progress:
    """The progress bar: step, reward, pass rate, KL, tokens/s and ETA (tqdm computes the ETA)."""

    def __init__(self, total: int, start: int, *, enabled: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=start, disable=not enabled, unit="step", dynamic_ncols=True)

    def update(self, metrics: dict[str, float]) -> None:
        self.bar.update(1)
        self.bar.set_postfix(
            reward=f"{metrics.get('reward/mean', float('nan')):.3f}",
            pass_rate=f"{metrics.get('reward/pass_rate', float('nan')):.2f}",
            kl=f"{metrics.get('kl/ref_mean', 0.0):.4f}",
            tok_s=f"{metrics.get('perf/step_tokens_per_s', 0.0):.0f}",
        )

    def close(self) -> None:
        self.bar.close()
