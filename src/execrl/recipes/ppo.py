"""PPO from execution feedback: a learned value head and per-token GAE advantages instead of groups.

    execrl train algorithm.advantage_estimator=gae optim.ppo_epochs=2

PPO (Schulman et al. 2017, arXiv 1707.06347) with GAE (Schulman et al. 2016, arXiv 1506.02438). The value
head is a linear layer on the policy's last hidden state (``execrl.trainer.ValueHead``), trained with a
clipped value loss in the same update; it is checkpointed with the model. Everything else (task
scheduler, sandbox scoring, logging, checkpoints, the final eval) is the GRPO recipe's loop, reused as is.

Limits: the value head shares the policy's trunk (no separate critic model); the sparse end-of-sequence
execution reward makes early tokens' values hard to learn, which is why GRPO is the default.
"""

from __future__ import annotations

import time
from pathlib import Path

from execrl.components.sampling import GroupSampler
from execrl.config import ConfigError, TrainConfig
from execrl.recipes import grpo
from execrl.recipes.audit import audit_step
from execrl.recipes.loop import Run, TrainOutcome, sample_and_score
from execrl.recipes.update import step_metrics, update_from_rollout

__all__ = ["train", "train_step"]


def train(config: TrainConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    if config.algorithm.advantage_estimator != "gae":
        raise ConfigError("the PPO recipe needs algorithm.advantage_estimator=gae (a learned value head)")
    return grpo.train(config, resume_dir=resume_dir, progress=progress, step_fn=train_step)


def train_step(run: Run, step: int, sampler: GroupSampler) -> dict[str, float]:
    """One PPO step: draw tasks, sample and score, GAE targets from the value head, update, metrics."""
    config = run.config
    t0 = time.perf_counter()
    weights, groups = sample_and_score(run, step, sampler)  # draw tasks, generate, score; scheduler learns
    t1 = time.perf_counter()
    metrics = update_from_rollout(  # value-head GAE advantages + clipped policy and value losses
        run.model, run.optimizer, run.lr_scheduler, run.tcfg, groups.rollout, groups.scores,
        old_logprobs_from_rollout=run.old_logprobs_from_rollout, value_head=run.value_head,
        ref_model=run.ref_model, poison_advantages=step == config.run.inject_nan_loss_at_step,
    )  # fmt: skip
    t2 = time.perf_counter()
    metrics.update(step_metrics(run, groups, weights, sample_s=t1 - t0, update_s=t2 - t1))
    metrics.update(audit_step(run.run_dir, step, groups, sampler, config, step_s=t2 - t0))  # reward hacking
    return metrics
