"""Episodes -> the trainer's ``TrainBatch``: the one batch builder of every recipe.

Layout: each episode's first prompt (``token_ids[:prompt_tokens]``) is left-padded to the longest prompt
of the batch and the rest (model turns and environment messages) follows it, right-padded. So every
row's first sampled token sits in the same column, the rows of a group carry their shared prompt in
identical columns, and the shared-prompt forward (``execrl.trainer.prefix``) computes each group's prompt
once, for single-turn completions and multi-turn episodes alike. ``response_mask`` is the episode's loss
mask: 1 only on the model's own sampled tokens (what the environment wrote is context, as verl, TRL and
verifiers mask it). Position ids follow the attention mask, so padding never shifts a position.

Old log-probs: with ``old_logprobs_from_rollout`` the behaviour log-probs the engine recorded
(``sampling_logprobs``, at the sampling temperature: exactly what the trainer computes with
``logprob_temperature`` when no top-k/top-p truncation applied) save the update a forward pass;
otherwise the trainer recomputes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from execrl.episodes.types import Episode
from execrl.trainer import TrainBatch

__all__ = ["aligned_logprobs", "episodes_to_batch", "group_index", "reward_tensors"]


def reward_tensors(episodes: Sequence[Episode]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each episode's reward ``[N]`` float64 and whether it is valid ``[N]`` bool (an invalid reward is kept
    out of the advantages and the loss, never counted as a 0)."""
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float64)  # [N]
    valid = torch.tensor([e.valid for e in episodes], dtype=torch.bool)  # [N]
    return rewards, valid


def group_index(episodes: Sequence[Episode]) -> torch.Tensor:
    """Each episode's group (its task's position) ``[N]`` int64, for group-relative advantages."""
    return torch.tensor([e.task_index for e in episodes], dtype=torch.long)


def episodes_to_batch(
    episodes: Sequence[Episode],
    advantages: torch.Tensor,  # [N] per episode, or [N, S] per token of this layout
    loss_rows: torch.Tensor,  # [N] bool: the episodes the loss trains on
    *,
    pad_token_id: int,
    old_logprobs_from_rollout: bool,
) -> TrainBatch:
    """``input_ids`` [N, P_max + T_max] in the layout of the module docstring."""
    if not episodes or any(not e.token_ids for e in episodes):
        raise ValueError("every episode needs token ids (a message backend's episodes cannot be trained on)")
    n = len(episodes)
    p_max = max(e.prompt_tokens for e in episodes)
    t_max = max(len(e.token_ids) - e.prompt_tokens for e in episodes)
    input_ids = torch.full((n, p_max + t_max), pad_token_id, dtype=torch.long)  # [N, S]
    attention = torch.zeros((n, p_max + t_max), dtype=torch.long)  # [N, S]
    response = torch.zeros((n, p_max + t_max), dtype=torch.long)  # [N, S]
    old = torch.zeros((n, p_max + t_max), dtype=torch.float32) if old_logprobs_from_rollout else None
    for row, e in enumerate(episodes):
        p, end = e.prompt_tokens, p_max + len(e.token_ids) - e.prompt_tokens
        input_ids[row, p_max - p : end] = torch.tensor(e.token_ids, dtype=torch.long)
        attention[row, p_max - p : end] = 1
        response[row, p_max:end] = torch.tensor(e.loss_mask[p:], dtype=torch.long)
        if old is not None:
            old[row, p_max:end] = torch.tensor(e.sampling_logprobs[p:], dtype=torch.float32)
    if old is not None:
        old = old * response
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response,
        old_logprobs=old,
        advantages=advantages.to(torch.float32),
        valid=loss_rows,
    )


def aligned_logprobs(episodes: Sequence[Episode], *, sampling: bool) -> torch.Tensor:
    """The episodes' behaviour log-probs ``[N, P_max + T_max]`` in ``episodes_to_batch``'s columns (0 off
    the sampled tokens): ``sampling_logprobs`` (the distribution each token was drawn from) or, with
    ``sampling=False``, ``logprobs`` (the model's at temperature 1)."""
    p_max = max(e.prompt_tokens for e in episodes)
    t_max = max(len(e.token_ids) - e.prompt_tokens for e in episodes)
    out = torch.zeros((len(episodes), p_max + t_max), dtype=torch.float32)  # [N, S]
    for row, e in enumerate(episodes):
        values = e.sampling_logprobs if sampling else e.logprobs
        rest = values[e.prompt_tokens :]
        out[row, p_max : p_max + len(rest)] = torch.tensor(rest, dtype=torch.float32)
    return out
