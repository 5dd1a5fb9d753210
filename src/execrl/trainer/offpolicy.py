"""The importance-ratio correction for samples drawn by an older policy (one-step-off async mode).

Objective: decoupled PPO (Hilton et al. 2022, "Batch size-invariance for policy optimization", arXiv
2110.00641; the form AReaL uses for asynchronous RL, Fu et al. 2025, arXiv 2505.24298). The clipped ratio is
taken against the *proximal* policy pi_prox (the current weights before this update, recomputed by one
no-grad forward), and each token is weighted by pi_prox / mu, mu being the behaviour policy that sampled it
(the rollout's own log-probs). The behaviour weight is truncated at ``cap`` (truncated importance sampling,
as IMPALA's V-trace rho-bar, Espeholt et al. 2018, and Yao et al. 2025's TIS), trading a little bias for
bounded variance. Since the clipped surrogate ``min(r A, clip(r) A)`` is linear in a positive scaling of
A, weighting the advantage by the (detached) behaviour weight is exactly that objective.

Limits: mu is the rollout's ``sampling_logprobs`` (softmax at the sampling temperature); with top-k/top-p
truncation the real sampling distribution differs from it, so the weights are then approximate.
"""

from __future__ import annotations

import torch


def truncated_is_weights(
    prox_logprobs: torch.Tensor,  # [N, S] log pi_prox of each token (0 off the mask)
    behaviour_logprobs: torch.Tensor,  # [N, S] log mu, what the rollout sampled with
    mask: torch.Tensor,  # [N, S] bool, response tokens that count
    *,
    cap: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """min(pi_prox / mu, cap) per token (1 off the mask), and its statistics over the masked tokens."""
    if cap < 1.0:
        raise ValueError(f"the importance-weight cap must be >= 1, got {cap}")
    ratio = torch.exp(prox_logprobs.double() - behaviour_logprobs.double())  # [N, S]
    weights = torch.where(mask, ratio.clamp(max=cap), torch.ones_like(ratio))  # [N, S]
    count = int(mask.sum())
    if count == 0:
        return weights.to(prox_logprobs.dtype), {}
    masked = ratio[mask]  # [M]
    stats = {
        "train/offpolicy_ratio_mean": float(masked.mean()),
        "train/offpolicy_ratio_max": float(masked.max()),
        "train/offpolicy_ratio_min": float(masked.min()),
        "train/offpolicy_clipped_frac": float((masked > cap).double().mean()),
    }
    return weights.to(prox_logprobs.dtype), stats
