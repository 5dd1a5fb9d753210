"""Policy losses (per token), the value loss, and loss aggregation with step-global normalisers.

Policy losses are pure per-token functions registered in ``POLICY_LOSSES`` (add yours with
``@POLICY_LOSSES.register("name")``); the signature is::

    fn(logp [B, T], old_logp [B, T], advantages [B, T], mask [B, T], config: TrainerConfig) -> PolicyLossOutput

They return the UNREDUCED per-token loss; ``aggregate_loss`` reduces it. Aggregation is separate because it is
where implementations disagree (rl_frameworks.md 7.4) and where gradient accumulation goes wrong: averaging
each micro-batch's own token-mean and then averaging those (or dividing by the accumulation count) weights
tokens by micro-batch, so the gradient depends on how the batch was split (TRL #3021, TRL PR #3231,
ms-swift #10117, verl #2996-era ``dp_actor``). Here every micro-batch divides by the denominators of the WHOLE
optimizer step (``LossNormaliser``: tokens, sequences, L_max, computed once before the first micro-batch), so
the micro-batch losses SUM to the full-batch loss and their gradients sum to the full-batch gradient, exactly,
for every mode. Sequences are never split across micro-batches, so per-sequence token counts stay local.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from execrl.registry import Registry
from execrl.trainer.config import LOSS_AGGREGATIONS, TrainerConfig

LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 4.9e8: keeps the ratio finite, as verl does


@dataclass(frozen=True)
class LossNormaliser:
    """Denominators of one optimizer step, shared by all its micro-batches.

    ``total_tokens``: response tokens (mask sum) in the step. ``num_sequences``: sequences with at least one
    response token. ``sum_norm_length``: the divisor of seq-mean-token-sum-norm (the longest response in the
    step, unless the config fixes it, e.g. to max_new_tokens as Dr.GRPO recommends).
    """

    total_tokens: float
    num_sequences: int
    sum_norm_length: int


def loss_normaliser(response_mask: Tensor, *, sum_norm_length: int | None = None) -> LossNormaliser:
    """The ``LossNormaliser`` of a whole optimizer-step batch; ``response_mask`` [N, S]."""
    lengths = response_mask.to(torch.float64).sum(dim=-1)  # [N]
    longest = int(lengths.max().item()) if lengths.numel() else 0
    return LossNormaliser(
        total_tokens=float(lengths.sum().item()),
        num_sequences=int((lengths > 0).sum().item()),
        sum_norm_length=sum_norm_length if sum_norm_length is not None else longest,
    )


def aggregate_loss(
    per_token: Tensor,
    mask: Tensor,
    mode: str,
    normaliser: LossNormaliser | None = None,
    *,
    sum_norm_by_sequences: bool = False,
) -> Tensor:
    """Reduce a per-token loss [B, T] under ``mask`` [B, T] to a scalar (this micro-batch's share).

    Modes (L = per-token loss, M = mask, i = sequence, N/L_max/T_total from ``normaliser``):

    * ``token-mean``               sum_{i,t} L*M / T_total           (verl default, TRL "dapo"/"bnpo", DAPO)
    * ``seq-mean-token-mean``      sum_i [sum_t L*M / sum_t M] / N   (original GRPO, TRL "grpo")
    * ``seq-mean-token-sum``       sum_{i,t} L*M / N                 (verl)
    * ``seq-mean-token-sum-norm``  sum_{i,t} L*M / L_max             (verl; with ``sum_norm_by_sequences``
                                   also / N, which is TRL "dr_grpo" / SkyRL)

    With ``normaliser=None`` the denominators come from this batch alone (the usual per-batch definition).
    Masked positions are excluded with ``where``, so NaN or inf there cannot leak into the loss.
    """
    if normaliser is None:
        normaliser = loss_normaliser(mask)
    keep = mask.bool()
    masked = torch.where(keep, per_token, torch.zeros_like(per_token))  # [B, T]
    num_sequences = max(normaliser.num_sequences, 1)
    if mode == "token-mean":
        return masked.sum() / max(normaliser.total_tokens, 1.0)
    if mode == "seq-mean-token-mean":
        per_sequence = masked.sum(dim=-1) / keep.sum(dim=-1).clamp(min=1).to(masked.dtype)  # [B]
        return per_sequence.sum() / num_sequences
    if mode == "seq-mean-token-sum":
        return masked.sum() / num_sequences
    if mode == "seq-mean-token-sum-norm":
        denominator = max(normaliser.sum_norm_length, 1) * (num_sequences if sum_norm_by_sequences else 1)
        return masked.sum() / denominator
    raise ValueError(f"unknown loss_aggregation {mode!r}; known: {', '.join(LOSS_AGGREGATIONS)}")


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over ``mask`` (any matching shape); 0 when the mask is empty."""
    keep = mask.bool()
    total = torch.where(keep, values, torch.zeros_like(values)).sum()
    return total / keep.sum().clamp(min=1).to(total.dtype)


@dataclass(frozen=True)
class PolicyLossOutput:
    """Per-token policy loss and where clipping was active (bool masks for metrics), all [B, T]."""

    loss: Tensor  # [B, T], unreduced and unmasked
    clipped_high: Tensor  # [B, T] ratio > 1 + eps_high with A > 0 (gradient cut)
    clipped_low: Tensor  # [B, T] ratio < 1 - eps_low with A < 0 (gradient cut)
    dual_clipped: Tensor  # [B, T] A < 0 and the loss capped at -A * clip_ratio_c


PolicyLoss = Callable[[Tensor, Tensor, Tensor, Tensor, TrainerConfig], PolicyLossOutput]
POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")


def clipped_surrogate(
    ratio: Tensor, advantages: Tensor, *, eps_low: float, eps_high: float, clip_ratio_c: float | None
) -> PolicyLossOutput:
    """PPO's clipped surrogate on a given ratio [B, T], with asymmetric and optional dual clipping.

    ``max(-A*r, -A*clip(r, 1-eps_low, 1+eps_high))`` (Schulman et al. 2017, arXiv:1707.06347; asymmetric
    "clip-higher" from DAPO, arXiv:2503.14476); for A < 0 additionally ``min(., -A*c)`` (dual clip, Ye et al.
    2020, arXiv:1912.09729), which bounds the loss when the ratio explodes on a negative-advantage token.
    """
    unclipped = -advantages * ratio  # [B, T]
    clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)  # [B, T]
    loss = torch.maximum(unclipped, clipped)
    clipped_high = (ratio > 1.0 + eps_high) & (advantages > 0)
    clipped_low = (ratio < 1.0 - eps_low) & (advantages < 0)
    dual_clipped = torch.zeros_like(clipped_high)
    if clip_ratio_c is not None:
        bound = -advantages * clip_ratio_c  # [B, T]
        negative = advantages < 0
        dual_clipped = negative & (loss > bound)
        loss = torch.where(negative, torch.minimum(loss, bound), loss)
    return PolicyLossOutput(
        loss=loss, clipped_high=clipped_high, clipped_low=clipped_low, dual_clipped=dual_clipped
    )


@POLICY_LOSSES.register("ppo")
def ppo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, config: TrainerConfig
) -> PolicyLossOutput:
    """Token-level PPO/GRPO surrogate (GRPO: Shao et al. 2024, arXiv:2402.03300; verl ``vanilla``).

    ``ratio = exp(clamp(logp - old, -20, 20))``. With ``old = logp.detach()`` (one epoch, on-policy) the ratio is
    1 and the gradient is ``-A * grad(logp)``. ``mask`` is unused: the loss is per token.
    """
    del mask
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))  # [B, T]
    return clipped_surrogate(
        ratio,
        advantages,
        eps_low=config.clip_eps_low,
        eps_high=config.clip_eps_high,
        clip_ratio_c=config.clip_ratio_c,
    )


@POLICY_LOSSES.register("gspo")
def gspo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, config: TrainerConfig
) -> PolicyLossOutput:
    """GSPO (Zheng et al. 2025, arXiv:2507.18071): one importance ratio per sequence.

    ``s_i = exp(mean_t (logp - old))`` over the response tokens. Each token carries the value ``s_i`` through a
    straight-through estimator, ``logp - sg(logp) + sg(log s_i)``, so with seq-mean-token-mean aggregation the
    gradient is exactly ``-A_i * grad(s_i)``: use ``loss_aggregation="seq-mean-token-mean"`` (verl forces it)
    to match the paper. No dual clip (clip_ratio_c is ignored). The paper's clip range is tiny
    (eps_low 3e-4, eps_high 4e-4); set it in the config.
    """
    weight = mask.to(logp.dtype)  # [B, T]
    seq_log_ratio = ((logp - old_logp) * weight).sum(dim=-1) / weight.sum(dim=-1).clamp(min=1)  # [B]
    token_log_ratio = logp - logp.detach() + seq_log_ratio.detach()[:, None]  # [B, T], value = log s_i
    ratio = torch.exp(token_log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    return clipped_surrogate(
        ratio, advantages, eps_low=config.clip_eps_low, eps_high=config.clip_eps_high, clip_ratio_c=None
    )


def clipped_value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, *, clip_eps: float
) -> tuple[Tensor, Tensor]:
    """PPO clipped value loss (Schulman et al. 2017; verl/OpenRLHF form), per token.

    ``0.5 * max((v - R)^2, (clip(v, v_old - eps, v_old + eps) - R)^2)`` -> ([B, T] loss, [B, T] bool where the
    clipped term was larger). All inputs [B, T]; aggregate with ``aggregate_loss`` like the policy loss.
    """
    clipped_values = old_values + (values - old_values).clamp(-clip_eps, clip_eps)  # [B, T]
    unclipped_error = (values - returns) ** 2
    clipped_error = (clipped_values - returns) ** 2
    return 0.5 * torch.maximum(unclipped_error, clipped_error), clipped_error > unclipped_error
