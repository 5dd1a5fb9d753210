"""The components a recipe's step calls after sampling: advantages + the policy update, and the step's
metrics. Shared by ``grpo.py``, ``ppo.py`` and the overlapped loop (``pipeline.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from execrl.components.sampling import ScoredGroups
from execrl.recipes.batch import ppo_targets, rollout_metrics, to_train_batch, trainer_logprob_gap
from execrl.recipes.loop import Run
from execrl.rewards import Score, reward_metrics
from execrl.rollout.types import RolloutBatch
from execrl.scheduler import domain_metrics
from execrl.trainer import TrainerConfig, ValueHead, compute_advantages, policy_update, prepare_batch
from execrl.trainer.offpolicy import behaviour_logprobs, truncated_is_weights


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
    behaviour_cap: float | None = None,
) -> dict[str, float]:
    """Scored rollout -> advantages -> ``TrainBatch`` -> one ``policy_update``; returns its metrics.

    Also reports the generation/training log-prob gap (``rollout/logprob_max_abs_diff``, NeMo-RL's
    ``gen_kl_error`` idea): with old log-probs taken from the rollout it is the update's own first forward
    against them, over every valid row of the first mini-batch (no extra pass); otherwise one extra no-grad
    pass over the first group. ``poison_advantages`` multiplies the advantages by NaN (fault
    injection for the alarm tests). ``behaviour_cap``: the rollout came from an older policy (async mode);
    the advantages get the truncated behaviour weight of ``offpolicy.truncated_is_weights`` (decoupled PPO),
    which needs the proximal log-probs recomputed (``old_logprobs_from_rollout=False``). ``execrl bench
    train`` times exactly this function.
    """
    if behaviour_cap is not None and old_logprobs_from_rollout:
        raise ValueError(
            "an off-policy rollout needs its proximal log-probs recomputed: old_logprobs_from_rollout"
        )
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
    off_metrics: dict[str, float] = {}
    if behaviour_cap is not None:
        assert batch.old_logprobs is not None  # prepare_batch recomputed them: pi_prox
        mu = behaviour_logprobs(rollout.sampling_logprobs, batch.input_ids.shape[1])  # [N, S]
        weights, off_metrics = truncated_is_weights(
            batch.old_logprobs, mu, batch.response_mask, cap=behaviour_cap
        )
        batch = dataclasses.replace(batch, advantages=batch.advantages * weights)
    metrics = policy_update(
        model, optimizer, scheduler, batch, tcfg, ref_model=ref_model, value_model=value_head
    )
    if mismatch is None:  # absent only when no valid row had a response token to compare
        mismatch = metrics.get("train/old_logprob_max_abs_diff")
    if mismatch is not None:
        metrics["rollout/logprob_max_abs_diff"] = mismatch
    metrics.update(off_metrics)
    return metrics


def step_metrics(
    run: Run, groups: ScoredGroups, weights: dict[str, float], *, sample_s: float, update_s: float
) -> dict[str, float]:
    """Rewards, rollout shape, per-domain metrics (``weights``: each domain's share when the step's tasks
    were drawn) and timings of one step's scored groups."""
    tasks, max_new_tokens = run.tasks, run.config.rollout.max_new_tokens
    rollout, scores = groups.rollout, groups.scores
    metrics = reward_metrics(scores)
    metrics.update(rollout_metrics(rollout, scores, max_new_tokens))
    metrics["rollout/sampling_rounds"] = float(groups.rounds)
    metrics["rollout/dropped_zero_variance_groups"] = float(groups.dropped_groups)
    metrics.update(domain_metrics([(tasks.domain_of(o.task_id), o) for o in groups.outcomes], weights))
    metrics["perf/rollout_and_reward_s"] = sample_s
    metrics["perf/update_s"] = update_s
    metrics["perf/step_s"] = sample_s + update_s
    metrics["perf/step_tokens_per_s"] = rollout.stats.generated_tokens / (sample_s + update_s)
    return metrics
