"""Advantage estimators: outcome rewards per sample -> advantages, plus GAE for PPO with a learned critic.

Outcome estimators share one signature and live in ``ADVANTAGE_ESTIMATORS`` (add yours with
``@ADVANTAGE_ESTIMATORS.register("name")``)::

    fn(rewards [N] float, group_ids [N] int, valid [N] bool, *, eps: float) -> advantages [N]

Conventions shared by every built-in estimator (rl_frameworks.md section 7.1):

* ``valid=False`` marks a reward that could not be computed (sandbox error, verifier failure). Such samples are
  excluded from every group statistic and get advantage 0; the update step also masks them out of the loss
  (``TrainBatch.valid``). Their reward value is ignored, so NaN is fine there.
* A group whose valid rewards are all equal ("zero variance") carries no learning signal: advantage exactly 0.
* A group with fewer than 2 valid samples has no baseline to compare against: advantage 0. This follows TRL;
  verl instead uses mean 0 and std 1 for a group of size 1 (A = r), i.e. un-baselined REINFORCE.
* Standard deviations are unbiased (Bessel, ddof=1) like ``torch.std`` in verl and TRL's ``nanstd``.

All estimators are vectorised over groups (``index_add_``); ``tests/unit/trainer`` checks them against plain
loops. Group ids may be any integers (they need not be contiguous or sorted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from execrl.registry import Registry

AdvantageEstimator = Callable[..., Tensor]
ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")


@dataclass(frozen=True)
class GroupStats:
    """Per-group statistics over valid samples, each ``[G]``; ``index`` maps samples to groups, ``[N]``."""

    index: Tensor  # [N] int64 in [0, G)
    count: Tensor  # [G] number of valid samples
    mean: Tensor  # [G]
    std: Tensor  # [G] unbiased; 0 where count < 2
    degenerate: Tensor  # [G] bool: < 2 valid samples or all valid rewards equal


def group_ids_from_size(num_samples: int, samples_per_prompt: int) -> Tensor:
    """Group ids ``[0]*G + [1]*G + ...`` for the usual layout where each prompt's samples are contiguous."""
    if samples_per_prompt < 1 or num_samples % samples_per_prompt:
        raise ValueError(
            f"num_samples={num_samples} is not a multiple of samples_per_prompt={samples_per_prompt}; "
            "pass explicit group_ids instead"
        )
    return torch.arange(num_samples) // samples_per_prompt  # [N]


def group_stats(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> GroupStats:
    """Mean, unbiased std and degeneracy of each group, counting valid samples only."""
    _check_shapes(rewards, group_ids, valid)
    index = torch.unique(group_ids, return_inverse=True)[1]  # [N]
    num_groups = int(index.max().item()) + 1 if index.numel() else 0
    weight = valid.to(rewards.dtype)  # [N]
    clean = torch.where(valid, rewards, torch.zeros_like(rewards))  # [N] invalid (maybe NaN) -> 0
    zeros = rewards.new_zeros(num_groups)
    count = zeros.index_add(0, index, weight)  # [G]
    mean = zeros.index_add(0, index, clean) / count.clamp(min=1)  # [G]
    sq_dev = (clean - mean[index]) ** 2 * weight  # [N]
    var = zeros.index_add(0, index, sq_dev) / (count - 1).clamp(min=1)  # [G]
    std = torch.where(count >= 2, var.sqrt(), zeros)
    lowest = torch.full_like(zeros, torch.inf).scatter_reduce(0, index[valid], clean[valid], "amin")
    highest = torch.full_like(zeros, -torch.inf).scatter_reduce(0, index[valid], clean[valid], "amax")
    degenerate = (count < 2) | (lowest == highest)  # [G]
    return GroupStats(index=index, count=count, mean=mean, std=std, degenerate=degenerate)


def _finish(advantages: Tensor, stats: GroupStats, valid: Tensor) -> Tensor:
    keep = valid & ~stats.degenerate[stats.index]  # [N]
    return torch.where(keep, advantages, torch.zeros_like(advantages))


@ADVANTAGE_ESTIMATORS.register("grpo")
def grpo_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor, *, eps: float = 1e-6) -> Tensor:
    """GRPO (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300): ``A_i = (r_i - mean_g) / (std_g + eps)``.

    eps 1e-6 matches verl/slime; TRL uses 1e-4 (rewards [1,0,0,1] give +-0.866024 vs +-0.865875).
    """
    rewards = _as_float(rewards)
    stats = group_stats(rewards, group_ids, valid)
    advantages = (rewards - stats.mean[stats.index]) / (stats.std[stats.index] + eps)  # [N]
    return _finish(advantages, stats, valid)


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def dr_grpo_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor, *, eps: float = 1e-6) -> Tensor:
    """Dr.GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783): ``r_i - mean_g``.

    Dropping the std removes GRPO's question-difficulty bias. ``eps`` is unused (kept for the shared signature).
    """
    del eps
    rewards = _as_float(rewards)
    stats = group_stats(rewards, group_ids, valid)
    return _finish(rewards - stats.mean[stats.index], stats, valid)


@ADVANTAGE_ESTIMATORS.register("rloo")
def rloo_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor, *, eps: float = 1e-6) -> Tensor:
    """RLOO (Ahmadian et al. 2024, arXiv:2402.14740): ``r_i - mean_{j != i} r_j = n/(n-1) * (r_i - mean_g)``.

    ``n`` is the number of valid samples in the group. ``eps`` is unused.
    """
    del eps
    rewards = _as_float(rewards)
    stats = group_stats(rewards, group_ids, valid)
    n = stats.count[stats.index]  # [N]
    advantages = n / (n - 1).clamp(min=1) * (rewards - stats.mean[stats.index])
    return _finish(advantages, stats, valid)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp")
def reinforce_pp_advantages(
    rewards: Tensor, group_ids: Tensor, valid: Tensor, *, eps: float = 1e-6
) -> Tensor:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262): no per-prompt baseline; whiten rewards over the whole batch.

    ``A_i = (r_i - mean_batch) / (std_batch + eps)`` over valid samples (unbiased std). ``group_ids`` is unused
    except for validation; a batch with all-equal valid rewards gives 0.
    """
    rewards = _as_float(rewards)
    return grpo_advantages(rewards, torch.zeros_like(group_ids), valid, eps=eps)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline_advantages(
    rewards: Tensor, group_ids: Tensor, valid: Tensor, *, eps: float = 1e-6
) -> Tensor:
    """REINFORCE++-baseline (Hu 2025): subtract the group mean, then divide by the batch std of the result.

    Group-centred values already have batch mean 0, so only the scale is normalised; degenerate groups stay
    exactly 0.
    """
    centred = dr_grpo_advantages(rewards, group_ids, valid)  # [N]
    count = valid.sum()
    if count < 2:
        return centred
    std = (centred[valid] ** 2).sum().div(count - 1).sqrt()
    return centred / (std + eps)


def compute_advantages(
    name: str,
    rewards: Tensor,
    *,
    group_ids: Tensor | None = None,
    samples_per_prompt: int | None = None,
    valid: Tensor | None = None,
    eps: float = 1e-6,
) -> Tensor:
    """Look up estimator ``name`` and apply it. Give either ``group_ids`` [N] or ``samples_per_prompt``.

    ``valid`` [N] bool defaults to all True. Returns advantages [N] (0 for invalid samples).
    """
    if (group_ids is None) == (samples_per_prompt is None):
        raise ValueError("pass exactly one of group_ids or samples_per_prompt")
    if group_ids is None:
        assert samples_per_prompt is not None
        group_ids = group_ids_from_size(rewards.shape[0], samples_per_prompt).to(rewards.device)
    if valid is None:
        valid = torch.ones_like(rewards, dtype=torch.bool)
    return ADVANTAGE_ESTIMATORS.get(name)(rewards, group_ids, valid, eps=eps)


def filter_zero_variance_groups(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> Tensor:
    """DAPO dynamic sampling (Yu et al. 2025, arXiv:2503.14476): which samples belong to informative groups.

    Returns keep [N] bool, True for every sample (valid or not) of a group with >= 2 valid samples whose valid
    rewards are not all equal. Whole groups are kept or dropped so the caller can resample prompts until the
    batch is full; invalid samples inside a kept group still get advantage 0 and no loss.
    """
    stats = group_stats(_as_float(rewards), group_ids, valid)
    return ~stats.degenerate[stats.index]  # [N]


def broadcast_to_tokens(advantages: Tensor, response_mask: Tensor) -> Tensor:
    """Sequence advantages [N] -> token advantages [N, S], zero outside the response."""
    return advantages[:, None].to(torch.promote_types(advantages.dtype, torch.float32)) * response_mask


def masked_whiten(values: Tensor, mask: Tensor, *, eps: float = 1e-8) -> Tensor:
    """``(x - mean) / sqrt(var + eps)`` over masked entries (unbiased var, as verl's ``masked_whiten``).

    Used on GAE advantages in PPO. Entries outside the mask are returned as 0.
    """
    weight = mask.to(values.dtype)
    count = weight.sum()
    if count < 2:
        raise ValueError(f"masked_whiten needs at least 2 masked entries, got {int(count.item())}")
    mean = (values * weight).sum() / count
    var = ((values - mean) ** 2 * weight).sum() / (count - 1)
    return (values - mean) * torch.rsqrt(var + eps) * weight


def gae(rewards: Tensor, values: Tensor, mask: Tensor, *, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Generalised Advantage Estimation (Schulman et al. 2016, arXiv:1506.02438) for PPO with a critic.

    ``rewards``, ``values``, ``mask``: [B, T] (token-level; outcome rewards usually sit on the last response
    token, minus a per-token KL penalty when ``kl_in_reward``). Positions outside ``mask`` are skipped: the
    recursion carries the next valid value across them, so padding or masked tool output inside a response does
    not break the chain. Past the last valid token the value is 0 (episode end).
    Returns ``(advantages, returns)``, both [B, T] and 0 outside the mask; ``returns = advantages + values`` are
    the critic's regression targets. Advantages are not whitened here (see ``masked_whiten``).
    """
    if not (rewards.shape == values.shape == mask.shape) or rewards.dim() != 2:
        raise ValueError(
            f"gae needs rewards, values and mask of one [B, T] shape; got "
            f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}"
        )
    keep = mask.bool()
    advantages = torch.zeros_like(values)  # [B, T]
    last_gae = values.new_zeros(values.shape[0])  # [B]
    next_value = values.new_zeros(values.shape[0])  # [B]
    for t in reversed(range(values.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # [B]
        current = delta + gamma * lam * last_gae
        last_gae = torch.where(keep[:, t], current, last_gae)
        next_value = torch.where(keep[:, t], values[:, t], next_value)
        advantages[:, t] = torch.where(keep[:, t], current, torch.zeros_like(current))
    returns = (advantages + values) * keep  # [B, T]
    return advantages, returns


def _as_float(rewards: Tensor) -> Tensor:
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def _check_shapes(rewards: Tensor, group_ids: Tensor, valid: Tensor) -> None:
    if rewards.dim() != 1 or group_ids.shape != rewards.shape or valid.shape != rewards.shape:
        raise ValueError(
            f"rewards, group_ids and valid must be 1-D of one length; got {tuple(rewards.shape)}, "
            f"{tuple(group_ids.shape)}, {tuple(valid.shape)}"
        )
    if valid.dtype != torch.bool:
        raise ValueError(f"valid must be a bool tensor, got {valid.dtype}")
