"""PPO from execution feedback: a learned value head and per-token GAE advantages instead of groups.

    execrl train algorithm.advantage_estimator=gae optim.ppo_epochs=2

PPO (Schulman et al. 2017, arXiv 1707.06347) with GAE (Schulman et al. 2016, arXiv 1506.02438). The value
head is a linear layer on the policy's last hidden state (``execrl.trainer.ValueHead``), trained with a
clipped value loss in the same update; it is checkpointed with the model. Everything around the step (task
scheduler, sandbox scoring, logging, checkpoints, the final eval) is the GRPO recipe's
(``loop.session``); the step below differs from GRPO's in its advantages only. Any environment: in a
multi-turn episode the outcome reward sits on the model's last token and GAE runs over the model's tokens
only (what the environment wrote is masked out of the advantages, values and returns).

Limits: the value head shares the policy's trunk (no separate critic model); the sparse end-of-sequence
execution reward makes early tokens' values hard to learn, which is why GRPO is the default.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from pathlib import Path

import torch

from execrl.config import ConfigError, TrainConfig
from execrl.distributed import Executor
from execrl.episodes import Environment, episodes_to_batch, reward_tensors
from execrl.recipes.audit import audit_step
from execrl.recipes.batch import (
    engine_corrected,
    logprob_gap,
    logprob_gap_metric,
    overlong_filtered,
    overlong_shaping,
    ppo_targets,
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
from execrl.trainer import ValueHead

__all__ = ["PARTS", "train", "train_step", "value_head"]


def value_head(model: torch.nn.Module) -> torch.nn.Module:
    """PPO's learned value head on the policy's hidden states (built by ``build_run``, checkpointed)."""
    return ValueHead(model.config.hidden_size)  # type: ignore[union-attr]


PARTS = {"value_head": value_head}  # the recipe's own modules, built and checkpointed by ``build_run``


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    """Set up, step and finish as ``grpo.train`` does, with a value head and this recipe's ``train_step``."""
    if not config.algorithm.learns_values:
        raise ConfigError("the PPO recipe needs algorithm.advantage_estimator=gae (a learned value head)")
    if config.algorithm.async_steps:
        raise ConfigError("algorithm.async_steps=1 is the one-step-off recipe: execrl.recipes.pipeline.train")
    with session(config, resume_dir, parts=PARTS) as s:
        step_fn = partial(train_step, s.run, executor=s.executor, environment=s.environment)
        last_step = run_steps(s.run, s.telemetry, step_fn, started=s.started, progress=progress)
        return finish_session(s, last_step)


def train_step(run: Run, step: int, *, executor: Executor, environment: Environment) -> dict[str, float]:
    """One PPO step: draw tasks, sample and judge, value targets and GAE advantages, update, metrics."""
    config, tcfg = run.config, run.tcfg
    assert run.value_head is not None  # build_run builds it from this recipe's parts
    t0 = time.perf_counter()
    weights, groups = sample_episodes(run, step, executor.sampler)  # draw, roll out, judge; scheduler learns
    t1 = time.perf_counter()
    episodes = groups.episodes
    rewards, valid = reward_tensors(episodes)  # [N] each
    rewards = rewards + overlong_shaping(run, step, episodes)  # DAPO soft overlong punishment; 0 if off
    batch = episodes_to_batch(  # [N, S]; the advantages come from GAE next
        episodes, torch.zeros_like(rewards), overlong_filtered(run, episodes, valid),
        pad_token_id=run.pad_token_id, old_logprobs_from_rollout=run.old_logprobs_from_rollout,
    )  # fmt: skip
    gap = (
        None if run.old_logprobs_from_rollout or run.engine_correction else logprob_gap(run, batch, episodes)
    )
    batch = ppo_targets(  # old values of the value head, GAE advantages (whitened), returns: [N, S] each
        run.model, run.value_head, batch, rewards, gamma=tcfg.gamma, lam=tcfg.gae_lambda
    )
    batch = dataclasses.replace(batch, advantages=inject_nan_loss(run, step, batch.advantages))
    batch, correction = engine_corrected(run, batch, episodes)  # vLLM: old log-probs recomputed, TIS
    metrics = update_policy(run, batch)  # clipped policy loss + clipped value loss (+ KL if kl_coef > 0)
    t2 = time.perf_counter()
    metrics.update(logprob_gap_metric(gap, metrics))  # generation vs training log-probs
    metrics.update(correction)  # with an engine of its own: the mismatch over all tokens, TIS statistics
    metrics.update(step_metrics(run, step, groups, weights, environment, sample_s=t1 - t0, update_s=t2 - t1))
    metrics.update(audit_step(run.run_dir, step, groups, environment, config, step_s=t2 - t0))
    metrics.update(publish_weights(run, executor, step))  # version step + 1 out; executor/* metrics
    return metrics
