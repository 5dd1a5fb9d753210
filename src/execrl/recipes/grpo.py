"""GRPO from execution feedback, one readable loop: sample, execute, score, advantages, update, log, save.

    execrl train                      # the README's main job: SmolLM2-135M-Instruct, built-in suites
    execrl train rollout.samples_per_prompt=8 algorithm.kl_coef=0.001
    execrl train --resume runs/grpo-smollm2-20261130-101500

Algorithm: GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300) with the variants the trainer
registers (Dr.GRPO, RLOO, REINFORCE++; DAPO clip-higher and dynamic sampling, Yu et al. 2025, arXiv
2503.14476). The rewards come from running the sampled programs in the sandbox.

What an episode is comes from the environment (``execrl.episodes``): one turn (the default), visible-test
feedback between turns (``refine.max_turns > 1``: RLEF, Gehring et al. 2024, arXiv 2410.02089), or tool
calls on forkable sandbox sessions (``tools.enabled``: ReTool, arXiv 2504.11536; ToRL, arXiv 2503.23383);
the step is the same for all of them: the loss covers only the model's own tokens.

By default everything runs in this one process (a debugger works); the sandbox workers are the only
children. ``--executor ray`` moves the rollout to Ray actors (``execrl.distributed``); the step below is
the same for both. Sibling recipes: ``ppo.py`` (a value head and GAE instead of groups),
``pipeline.py`` (``algorithm.async_steps=1``: the next step's rollout overlaps this step's update).
Ctrl-C (SIGINT) or SIGTERM finishes the current step, writes a checkpoint and stops; ``--resume`` continues
from the newest checkpoint with the same data, RNG and metrics file (no step logged twice).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from execrl.components.run import PartBuilder
from execrl.config import ConfigError, TrainConfig
from execrl.distributed import Executor
from execrl.episodes import Environment, episodes_to_batch, group_index, reward_tensors
from execrl.recipes.audit import audit_step
from execrl.recipes.batch import (
    engine_corrected,
    logprob_gap,
    logprob_gap_metric,
    overlong_filtered,
    overlong_shaping,
    step_metrics,
)
from execrl.recipes.loop import (
    Run,
    TrainOutcome,
    finish_session,
    inject_nan_loss,
    publish_weights,
    run_steps,
    sample_episodes,
    session,
    update_policy,
)
from execrl.trainer import compute_advantages

__all__ = ["PARTS", "TrainOutcome", "train", "train_step"]

PARTS: dict[str, PartBuilder] = {}  # no modules of its own beside the policy (``ppo.py`` has a value head)


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    """Set up the run (``loop.session``: model, sandbox, environment, executor, telemetry, base eval), run
    ``train_step`` for each step (``loop.run_steps``: log, alarms, stop reasons, checkpoints), then the
    final evaluation and report."""
    if config.algorithm.learns_values:
        raise ConfigError("algorithm.advantage_estimator=gae is PPO: run it with execrl.recipes.ppo.train")
    if config.algorithm.async_steps:
        raise ConfigError("algorithm.async_steps=1 is the one-step-off recipe: execrl.recipes.pipeline.train")
    with session(config, resume_dir, parts=PARTS) as s:
        step_fn = partial(train_step, s.run, executor=s.executor, environment=s.environment)
        last_step = run_steps(s.run, s.telemetry, step_fn, started=s.started, progress=progress)
        return finish_session(s, last_step)


def train_step(run: Run, step: int, *, executor: Executor, environment: Environment) -> dict[str, float]:
    """One GRPO step: draw tasks, sample and judge episodes, group-relative advantages, update, metrics."""
    config, tcfg = run.config, run.tcfg
    t0 = time.perf_counter()
    weights, groups = sample_episodes(run, step, executor.sampler)  # draw, roll out, judge; scheduler learns
    t1 = time.perf_counter()
    episodes = groups.episodes
    rewards, valid = reward_tensors(episodes)  # [N] each
    rewards = rewards + overlong_shaping(run, step, episodes)  # DAPO soft overlong punishment; 0 if off
    advantages = compute_advantages(  # (r - mean) / std within each task's group (or the configured variant)
        tcfg.advantage_estimator, rewards, group_ids=group_index(episodes), valid=valid,
        eps=tcfg.advantage_std_eps,
    )  # fmt: skip
    batch = episodes_to_batch(  # prompt | model turns and environment messages, [N, S]; loss on the model's
        episodes, inject_nan_loss(run, step, advantages), overlong_filtered(run, episodes, valid),
        pad_token_id=run.pad_token_id, old_logprobs_from_rollout=run.old_logprobs_from_rollout,
    )  # fmt: skip
    gap = (
        None if run.old_logprobs_from_rollout or run.engine_correction else logprob_gap(run, batch, episodes)
    )
    batch, correction = engine_corrected(run, batch, episodes)  # vLLM: old log-probs recomputed, TIS
    metrics = update_policy(run, batch)  # clipped policy-gradient loss (+ KL if kl_coef > 0), AdamW
    t2 = time.perf_counter()
    metrics.update(logprob_gap_metric(gap, metrics))  # generation vs training log-probs
    metrics.update(correction)  # with an engine of its own: the mismatch over all tokens, TIS statistics
    metrics.update(step_metrics(run, step, groups, weights, environment, sample_s=t1 - t0, update_s=t2 - t1))
    metrics.update(audit_step(run.run_dir, step, groups, environment, config, step_s=t2 - t0))
    metrics.update(publish_weights(run, executor, step))  # version step + 1 out; executor/* metrics
    return metrics
