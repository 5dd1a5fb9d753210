"""Teacher-forced log-probabilities of a rollout, and the rollout-vs-trainer mismatch metric.

The trainer's ``old_logprobs`` must equal the log-probabilities the sampler saw; when they do not (a
numerically different attention path, a stale cache, a weight-sync bug) the PPO ratio is silently biased.
NeMo-RL reports this as ``gen_kl_error`` and gates tests on it; slime gates train/rollout log-prob
differences below 1e-6. :func:`logprob_mismatch` is execrl's version: the maximum absolute difference, over
generated tokens, between ``RolloutBatch.logprobs`` and a fresh teacher-forced forward pass over
prompt + completion. The training loop reports it as ``rollout/logprob_max_abs_diff``; in float32 on CPU it
should stay below about 1e-4.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from execrl.rollout.hf_engine import left_pad
from execrl.rollout.types import RolloutBatch

__all__ = ["logprob_mismatch", "teacher_forced_inputs", "teacher_forced_logprobs"]


def teacher_forced_inputs(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """``(input_ids [N, Lp+T], attention_mask [N, Lp+T], position_ids [N, Lp+T], prompt_width Lp)``.

    Each row is its left-padded prompt followed by its completion (right-padded). The logits that score
    completion token ``t`` sit at sequence position ``prompt_width - 1 + t``.
    """
    prompt_ids, prompt_mask, _ = left_pad(list(batch.prompt_token_ids), batch.pad_token_id)
    rows = batch.group_index
    input_ids = torch.cat([prompt_ids[rows], batch.completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask[rows], batch.response_mask.long()], dim=1)
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    return input_ids, attention_mask, position_ids, int(prompt_ids.shape[1])


def teacher_forced_logprobs(
    model: PreTrainedModel, batch: RolloutBatch, *, temperature: float = 1.0, rows_per_forward: int = 8
) -> torch.Tensor:
    """Log-probabilities [N, T] of the batch's completion tokens under ``softmax(logits / temperature)``.

    ``temperature=1`` reproduces ``batch.logprobs``; the sampling temperature with no top-k / top-p
    reproduces ``batch.sampling_logprobs``. No gradient; rows are processed ``rows_per_forward`` at a time
    to bound the [rows, T, V] logits memory. Padding positions are 0.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probabilities, got {temperature}")
    input_ids, attention_mask, position_ids, prompt_width = teacher_forced_inputs(batch)
    width = batch.completion_ids.shape[1]
    chunks = []
    was_training = model.training
    model.eval()  # type: ignore[no-untyped-call]
    try:
        with torch.inference_mode():
            for start in range(0, input_ids.shape[0], rows_per_forward):
                part = slice(start, start + rows_per_forward)
                output = model(
                    input_ids=input_ids[part],
                    attention_mask=attention_mask[part],
                    position_ids=position_ids[part],
                    use_cache=False,
                )
                logits = output.logits[:, prompt_width - 1 : prompt_width - 1 + width, :].float()  # [n, T, V]
                if temperature != 1.0:
                    logits = logits / temperature
                targets = batch.completion_ids[part].unsqueeze(-1)  # [n, T, 1]
                chunks.append(logits.gather(-1, targets).squeeze(-1) - torch.logsumexp(logits, dim=-1))
    finally:
        model.train(was_training)
    return torch.cat(chunks).masked_fill(~batch.response_mask, 0.0)  # [N, T]


def logprob_mismatch(model: PreTrainedModel, batch: RolloutBatch) -> float:
    """max |rollout log-prob - teacher-forced log-prob| over generated tokens (0.0 for an empty batch)."""
    if not bool(batch.response_mask.any()):
        return 0.0
    fresh = teacher_forced_logprobs(model, batch)
    diff = (fresh - batch.logprobs).abs().masked_select(batch.response_mask)
    return float(diff.max())
