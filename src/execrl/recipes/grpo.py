"""GRPO from execution feedback, one readable loop: sample, execute, score, advantages, update, log, save.

    execrl train                      # the README's main job: SmolLM2-135M-Instruct, built-in suites
    execrl train rollout.samples_per_prompt=8 algorithm.kl_coef=0.001
    execrl train --resume runs/grpo-smollm2-20261130-101500

Algorithm: GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300) with the variants the trainer
registers (Dr.GRPO, RLOO, REINFORCE++; DAPO clip-higher and dynamic sampling, Yu et al. 2025, arXiv
2503.14476). The rewards come from running the sampled programs in the sandbox.

Everything runs in this one process (a debugger works); the sandbox workers are the only children.
Ctrl-C (SIGINT) or SIGTERM finishes the current step, writes a checkpoint and stops; ``--resume`` continues
from the newest checkpoint with the same data, RNG and metrics file (no step logged twice).
"""

from __future__ import annotations

import functools
import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from execrl.config import TrainConfig
from execrl.recipes import setup
from execrl.recipes.batch import logprob_mismatch, ppo_targets, rollout_metrics, to_train_batch
from execrl.recipes.sampling import GroupSampler, sample_groups
from execrl.rewards import reward_metrics
from execrl.rollout.engine import create_engine
from execrl.rollout.types import SamplingParams
from execrl.scheduler import MixtureSampler
from execrl.tasks.schema import Task
from execrl.telemetry import RunTelemetry, alarm_rules_from_config
from execrl.telemetry.webhook import WebhookConfig
from execrl.trainer import (
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


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    # ---- setup -------------------------------------------------------------------------------
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
    scheduler = build_scheduler(optimizer, tcfg)
    train_suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
    sampler = MixtureSampler(train_suites, config.tasks.suites, seed=config.run.seed)
    engine = create_engine(config.rollout.engine, model=model, tokenizer=tokenizer)
    rewards_cfg = setup.reward_config(config)
    extra_sampler = MixtureSampler(train_suites, config.tasks.suites, seed=config.run.seed + 7919)

    def extra_tasks(step: int, round_: int) -> list[Task]:  # DAPO resampling draws from a separate stream
        index = step * (config.algorithm.max_resample_rounds + 1) + round_
        return extra_sampler.tasks_for_step(index, config.rollout.prompts_per_step)

    sampling = SamplingParams(
        samples_per_prompt=config.rollout.samples_per_prompt,
        max_new_tokens=config.rollout.max_new_tokens,
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )

    extras = {"value_head": value_head} if value_head is not None else None
    start_step = 0
    checkpoint = latest_checkpoint(run_dir) if resume_dir is not None else None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model, optimizer, scheduler, extra_modules=extras)
        start_step = int(state.data_state["next_step"])
        log.info("resumed from %s at step %d", checkpoint, start_step)
    webhook = WebhookConfig(url=config.telemetry.webhook_url) if config.telemetry.webhook_url else None
    rules = alarm_rules_from_config(
        [a.model_dump() for a in config.telemetry.alarms], include_defaults=config.telemetry.default_alarms
    )
    telemetry = RunTelemetry(
        run_dir,
        rules=rules,
        webhook=webhook,
        resume_from_step=start_step - 1 if resume_dir is not None else None,
        tensorboard=config.telemetry.tensorboard,
        mlflow=config.telemetry.mlflow,
        run_name=config.run.name,
    )
    stop = setup.StopFlag()
    started = time.monotonic()
    last_step = start_step - 1

    with setup.build_sandbox(config) as sandbox, telemetry, _stop_on_signals(stop):
        group_sampler = GroupSampler(engine, tokenizer, sandbox, rewards_cfg, sampling, seed=config.run.seed)
        if config.eval.enabled:
            from execrl.recipes.evaluate import evaluate_checkpoint_once

            evaluate_checkpoint_once(run_dir, "base", engine, config, sandbox)
        bar = _Progress(config.run.total_steps, start_step, enabled=progress)
        for step in range(start_step, config.run.total_steps):
            # ---- rollout + score: a group of completions per prompt, run in the sandbox ------------
            t0 = time.perf_counter()

            groups = sample_groups(
                sampler.tasks_for_step(step, config.rollout.prompts_per_step),
                functools.partial(extra_tasks, step),
                functools.partial(group_sampler, step),
                dynamic=config.algorithm.dynamic_sampling,
                max_resample_rounds=config.algorithm.max_resample_rounds,
            )
            rollout, scores = groups.rollout, groups.scores
            t2 = time.perf_counter()

            # ---- advantages: group-relative, invalid rewards excluded ------------------------------
            rewards = torch.tensor([s.reward for s in scores], dtype=torch.float64)  # [N]
            valid = torch.tensor([s.valid for s in scores], dtype=torch.bool)  # [N]
            if value_head is None:  # outcome advantages: group-relative (GRPO family)
                advantages = compute_advantages(
                    tcfg.advantage_estimator,
                    rewards,
                    group_ids=rollout.group_index,
                    valid=valid,
                    eps=tcfg.advantage_std_eps,
                )
            else:  # PPO: per-token GAE over the learned value function, filled in below
                advantages = torch.zeros_like(rewards)
            if step == config.run.inject_nan_loss_at_step:  # fault injection (tests of the alarm path)
                advantages = advantages * float("nan")

            # ---- update: clipped policy gradient, micro-batched by tokens -------------------------
            batch = to_train_batch(rollout, advantages, valid, old_logprobs_from_rollout=False)
            if value_head is not None:
                batch = ppo_targets(model, value_head, batch, rewards, gamma=tcfg.gamma, lam=tcfg.gae_lambda)
            batch = prepare_batch(model, batch, tcfg, ref_model=ref_model, value_model=value_head)
            mismatch = logprob_mismatch(rollout, batch.old_logprobs)  # type: ignore[arg-type]
            metrics = policy_update(
                model, optimizer, scheduler, batch, tcfg, ref_model=ref_model, value_model=value_head
            )
            t3 = time.perf_counter()

            # ---- log, alarms, checkpoint ------------------------------------------------------------
            metrics.update(reward_metrics(scores))
            metrics.update(rollout_metrics(rollout, scores, config.rollout.max_new_tokens))
            metrics["rollout/logprob_max_abs_diff"] = mismatch
            metrics["rollout/sampling_rounds"] = float(groups.rounds)
            metrics["rollout/dropped_zero_variance_groups"] = float(groups.dropped_groups)
            metrics.update(
                {
                    "perf/rollout_and_reward_s": t2 - t0,
                    "perf/update_s": t3 - t2,
                    "perf/step_s": t3 - t0,
                    "perf/step_tokens_per_s": rollout.stats.generated_tokens / (t3 - t0),
                }
            )
            decision = telemetry.log(step, metrics)
            last_step = step
            if decision.stop_requested:
                stop.request(f"alarm: {', '.join(e.rule for e in decision.fired)}")
            if time.monotonic() - started > config.run.max_wall_time_s and step + 1 < config.run.total_steps:
                stop.request(f"run.max_wall_time_s={config.run.max_wall_time_s:.0f} reached")
            last = step + 1 == config.run.total_steps
            if last or stop.requested or (step + 1) % config.checkpoint.every_steps == 0:
                save_checkpoint(
                    run_dir,
                    step=step,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    data_state={"next_step": step + 1},
                    metrics={k: v for k, v in metrics.items() if isinstance(v, float)},
                    keep_last=config.checkpoint.keep_last,
                    extra_modules=extras,
                )
            bar.update(metrics)
            if stop.requested:
                log.warning("stopping after step %d: %s", step, stop.reason)
                break
        bar.close()
        # A wall-time stop still evaluates (the budget was spent training); a signal or an alarm does not.
        if config.eval.enabled and (not stop.requested or stop.reason.startswith("run.max_wall_time_s")):
            from execrl.recipes.evaluate import evaluate_checkpoint_once, finish_report

            evaluate_checkpoint_once(run_dir, "trained", engine, config, sandbox)
            finish_report(run_dir, config)
    return TrainOutcome(run_dir=run_dir, last_step=last_step, stopped_early=stop.reason or None)


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
