"""KL divergence to a frozen reference policy, per token, and the two places it can enter training.

Estimators (Schulman 2020, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html), with
``d = ref - logp`` per sampled token:

* ``k1 = logp - ref = -d``                unbiased, high variance, can be negative;
* ``k2 = 0.5 * d**2``                     biased, low variance, gradient equals that of the true KL at d -> 0;
* ``k3 = exp(d) - d - 1``                 unbiased, always >= 0 (verl "low_var_kl", GRPO paper eq. 4).

For k3 we follow verl's clamps: ``d`` to [-20, 20] (so ``exp`` cannot overflow) and the result to [-10, 10]
(one token with a huge ratio cannot dominate the step). The clamps cut the gradient on those tokens; that is
the intent. OpenRLHF clamps only the result to [-10, 10]; TRL does not clamp.

Where the KL goes: in the loss (``kl_in_reward=False``: ``loss += kl_coef * aggregate(kl)`` with the policy
loss's aggregation, as verl and TRL do), or in the reward (``kl_in_reward=True``: a penalty computed once from
the rollout's old log-probs, subtracted from the sequence reward or from per-token rewards before GAE).
"""

from __future__ import annotations

import torch
from torch import Tensor


def kl_per_token(logp: Tensor, ref_logp: Tensor, estimator: str) -> Tensor:
    """Per-token KL estimate to the reference; ``logp``, ``ref_logp`` [B, T] -> [B, T]. Unmasked."""
    diff = ref_logp - logp  # [B, T]
    if estimator == "k1":
        return -diff
    if estimator == "k2":
        return 0.5 * diff**2
    if estimator == "k3":
        diff = diff.clamp(-20.0, 20.0)
        return (torch.exp(diff) - diff - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown kl_estimator {estimator!r}; known: k1, k2, k3")


def kl_penalised_rewards(
    rewards: Tensor,
    old_logp: Tensor,
    ref_logp: Tensor,
    response_mask: Tensor,
    *,
    kl_coef: float,
    estimator: str,
) -> Tensor:
    """Sequence rewards minus the summed KL penalty: ``r_i - kl_coef * sum_t kl_{i,t} * M_{i,t}`` -> [N].

    For outcome estimators (GRPO, RLOO, ...) with ``kl_in_reward``. Uses the behaviour (old) log-probs, so the
    penalty is a constant of the rollout and carries no gradient.
    """
    kl = kl_per_token(old_logp, ref_logp, estimator) * response_mask  # [N, S]
    return rewards - kl_coef * kl.sum(dim=-1)


def token_level_rewards(
    rewards: Tensor, response_mask: Tensor, *, kl_penalty: Tensor | None = None, kl_coef: float = 0.0
) -> Tensor:
    """Outcome rewards [N] -> per-token rewards [N, S] for GAE: the reward sits on the last response token.

    ``kl_penalty`` [N, S] (from ``kl_per_token`` on the old log-probs) is subtracted on every response token
    with weight ``kl_coef`` (InstructGPT / OpenRLHF style). Rows without response tokens get all zeros.
    """
    mask = response_mask.to(rewards.dtype if rewards.is_floating_point() else torch.float32)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)  # [N, S]
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).amax(dim=-1)  # [N]
    token_rewards = torch.zeros_like(mask)  # [N, S]
    has_tokens = last >= 0
    rows = torch.arange(mask.shape[0], device=mask.device)[has_tokens]
    token_rewards[rows, last[has_tokens]] = rewards[has_tokens].to(mask.dtype)
    if kl_penalty is not None:
        token_rewards = token_rewards - kl_coef * kl_penalty.to(mask.dtype) * mask
    return token_rewards
