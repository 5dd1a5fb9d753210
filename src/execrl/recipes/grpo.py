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

import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path

from execrl.components import setup
from execrl.components.sampling import GroupSampler
from execrl.config import ConfigError, TrainConfig
from execrl.distributed import build_executor
from execrl.recipes.audit import audit_step
from execrl.recipes.evaluate import evaluate_checkpoint_once, finish_report
from execrl.recipes.loop import (
    Run,
    TrainOutcome,
    final_eval_due,
    run_steps,
    run_telemetry,
    sample_and_score,
    setup_run,
    stop_on_signals,
)
from execrl.recipes.pipeline import OneStepOff, StreamingGroupSampler
from execrl.recipes.update import step_metrics, update_from_rollout
from execrl.rollout.types import SamplingParams
from execrl.scheduler.report import write_domain_report

__all__ = ["TrainOutcome", "train", "train_step", "update_from_rollout"]

StepFn = Callable[[Run, int, GroupSampler], dict[str, float]]


def train(
    config: TrainConfig,
    *,
    resume_dir: Path | None = None,
    progress: bool = True,
    step_fn: StepFn | None = None,
) -> TrainOutcome:
    """The training loop; ``step_fn`` is this recipe's ``train_step`` unless a sibling recipe (PPO) passes
    its own."""
    if step_fn is None and config.algorithm.advantage_estimator == "gae":
        raise ConfigError("algorithm.advantage_estimator=gae is PPO: run it with execrl.recipes.ppo.train")
    step_fn = step_fn or train_step
    run = setup_run(config, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)
    started = time.monotonic()
    with setup.build_sandbox(config) as sandbox, telemetry, stop_on_signals(run), ExitStack() as stack:
        sampler = (StreamingGroupSampler if config.rollout.stream_scoring else GroupSampler)(
            run.engine, run.tokenizer, sandbox, setup.reward_config(config), sampling_params(config),
            seed=config.run.seed,
        )  # fmt: skip
        # Where generate-and-score runs: this process (default) or Ray actors (executor.kind="ray").
        executor = stack.enter_context(closing(build_executor(config, sampler)))
        executor.publish_weights(run.model, version=run.start_step)
        if config.algorithm.async_steps:  # rollout of step t+1 overlaps the update of step t
            step_fn = stack.enter_context(OneStepOff(run, executor))  # exits (joins) before the executor
        if config.eval.enabled:
            evaluate_checkpoint_once(run.run_dir, "base", run.engine, config, sandbox)

        def one_step(step: int) -> dict[str, float]:
            metrics = step_fn(run, step, executor.sampler)  # sample, score, advantages, update
            executor.publish_weights(run.model, version=step + 1)  # rollout workers load it by version
            metrics.update(executor.step_metrics(step))  # weight versions used, retries, replaced workers
            return metrics

        # each step, then log, alarms, stop reasons, checkpoint (loop.py)
        last_step = run_steps(run, telemetry, one_step, started=started, progress=progress)
        stack.close()  # async mode: a rollout still in flight finishes before the final eval uses the sandbox
        write_domain_report(run.run_dir)  # domains.md + plots/domain_weights.png
        if final_eval_due(run):  # not after a signal or an alarm stop
            evaluate_checkpoint_once(run.run_dir, "trained", run.engine, config, sandbox)
            finish_report(run.run_dir, config)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


def train_step(run: Run, step: int, sampler: GroupSampler) -> dict[str, float]:
    """One GRPO step: draw tasks, sample and score groups, group-relative advantages, update, metrics."""
    config = run.config
    t0 = time.perf_counter()
    weights, groups = sample_and_score(run, step, sampler)  # draw tasks, generate, score; scheduler learns
    t1 = time.perf_counter()
    metrics = update_from_rollout(  # group-relative advantages, then the clipped policy-gradient update
        run.model, run.optimizer, run.lr_scheduler, run.tcfg, groups.rollout, groups.scores,
        old_logprobs_from_rollout=run.old_logprobs_from_rollout, ref_model=run.ref_model,
        poison_advantages=step == config.run.inject_nan_loss_at_step,
    )  # fmt: skip
    t2 = time.perf_counter()
    metrics.update(step_metrics(run, groups, weights, sample_s=t1 - t0, update_s=t2 - t1))
    metrics.update(audit_step(run.run_dir, step, groups, sampler, config, step_s=t2 - t0))  # reward hacking
    return metrics


def sampling_params(config: TrainConfig) -> SamplingParams:
    return SamplingParams(
        samples_per_prompt=config.rollout.samples_per_prompt,
        max_new_tokens=config.rollout.max_new_tokens,
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )
