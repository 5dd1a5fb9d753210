"""GRPO from execution feedback, one readable loop: sample, execute, score, advantages, update, log, save.

    execrl train                      # the README's main job: SmolLM2-135M-Instruct, built-in suites
    execrl train rollout.samples_per_prompt=8 algorithm.kl_coef=0.001
    execrl train --resume runs/grpo-smollm2-20261130-101500

Algorithm: GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300) with the variants the trainer
registers (Dr.GRPO, RLOO, REINFORCE++; DAPO clip-higher and dynamic sampling, Yu et al. 2025, arXiv
2503.14476). The rewards come from running the sampled programs in the sandbox.

By default everything runs in this one process (a debugger works); the sandbox workers are the only
children. ``--executor ray`` moves generate-and-score to Ray actors (``execrl.distributed``); the step
below is the same for both. Sibling recipes: ``ppo.py`` (a value head and GAE instead of groups),
``pipeline.py`` (``algorithm.async_steps=1``: the next step's rollout overlaps this step's update).
Ctrl-C (SIGINT) or SIGTERM finishes the current step, writes a checkpoint and stops; ``--resume`` continues
from the newest checkpoint with the same data, RNG and metrics file (no step logged twice).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from execrl.config import ConfigError, TrainConfig
from execrl.distributed import Executor
from execrl.recipes.audit import audit_step
from execrl.recipes.batch import (
    engine_corrected,
    logprob_gap,
    logprob_gap_metric,
    overlong_filtered,
    overlong_shaping,
    reward_tensors,
    step_metrics,
    to_train_batch,
)
from execrl.recipes.loop import (
    Run,
    TrainOutcome,
    finish_session,
    inject_nan_loss,
    publish_weights,
    run_steps,
    sample_and_score,
    single_turn_session,
)
from execrl.trainer import compute_advantages, policy_update

__all__ = ["TrainOutcome", "train", "train_step"]


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    """Set up the run (``loop.single_turn_session``: model, sandbox, executor, telemetry, base eval), run
    ``train_step`` for each step (``loop.run_steps``: log, alarms, stop reasons, checkpoints), then the
    final evaluation and report."""
    if config.algorithm.learns_values:
        raise ConfigError("algorithm.advantage_estimator=gae is PPO: run it with execrl.recipes.ppo.train")
    if config.algorithm.async_steps:
        raise ConfigError("algorithm.async_steps=1 is the one-step-off recipe: execrl.recipes.pipeline.train")
    with single_turn_session(config, resume_dir) as session:
        step_fn = partial(train_step, session.run, executor=session.executor)
        last_step = run_steps(
            session.run, session.telemetry, step_fn, started=session.started, progress=progress
        )
        return finish_session(session, last_step)


def train_step(run: Run, step: int, *, executor: Executor) -> dict[str, float]:
    """One GRPO step: draw tasks, sample and score groups, group-relative advantages, update, metrics."""
    config, tcfg = run.config, run.tcfg
    t0 = time.perf_counter()
    weights, groups = sample_and_score(
        run, step, executor.sampler
    )  # draw tasks, generate, score; scheduler learns
    t1 = time.perf_counter()
    rewards, valid = reward_tensors(groups.scores)  # [N] each
    rewards = rewards + overlong_shaping(run, step, groups.rollout)  # DAPO soft overlong punishment; 0 if off
    advantages = compute_advantages(  # (r - mean) / std within each task's group (or the configured variant)
        tcfg.advantage_estimator, rewards, group_ids=groups.rollout.group_index, valid=valid,
        eps=tcfg.advantage_std_eps,
    )  # fmt: skip
    batch = to_train_batch(  # prompt + completion tokens, [N, S]; old log-probs from the rollout if exact
        groups.rollout, inject_nan_loss(run, step, advantages), overlong_filtered(run, groups.rollout, valid),
        old_logprobs_from_rollout=run.old_logprobs_from_rollout,
    )  # fmt: skip
    gap = (
        None
        if run.old_logprobs_from_rollout or run.engine_correction
        else logprob_gap(run, batch, groups.rollout)
    )
    batch, correction = engine_corrected(run, batch, groups.rollout)  # vLLM: old log-probs recomputed, TIS
    metrics = policy_update(  # clipped policy-gradient loss (+ KL to the reference if kl_coef > 0), AdamW
        run.model, run.optimizer, run.lr_scheduler, batch, tcfg, ref_model=run.ref_model
    )
    t2 = time.perf_counter()
    metrics.update(logprob_gap_metric(gap, metrics))  # generation vs training log-probs
    metrics.update(correction)  # with an engine of its own: the mismatch over all tokens, TIS statistics
    metrics.update(step_metrics(run, step, groups, weights, sample_s=t1 - t0, update_s=t2 - t1))
    metrics.update(audit_step(run.run_dir, step, groups, executor.sampler, config, step_s=t2 - t0))
    metrics.update(publish_weights(run, executor, step))  # version step + 1 out; executor/* metrics
    return metrics
