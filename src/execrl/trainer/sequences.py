"""Multi-turn rows -> a ``TrainBatch``: whole contexts with a loss mask on the model's own tokens.

A multi-turn episode (refine's feedback turns, a tool episode's tool answers) is one context in which
only the model's sampled tokens are trained on; everything the environment wrote (prompt, feedback,
tool output) is context, masked out of the loss (``response_mask`` 0), as verl, TRL and verifiers do.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from execrl.trainer.step import TrainBatch

__all__ = ["masked_train_batch"]


def masked_train_batch(
    token_ids: Sequence[Sequence[int]],
    loss_masks: Sequence[Sequence[bool]],
    advantages: torch.Tensor,
    *,
    valid: Sequence[bool],
    pad_token_id: int,
) -> TrainBatch:
    """Left-padded ``[N, S]`` batch of ``N`` contexts; ``response_mask`` is 1 where ``loss_masks`` is
    True (the model's sampled tokens); ``advantages`` [N], one per context; old log-probs are left to
    the trainer (on-policy)."""
    if len(token_ids) != len(loss_masks) or any(
        len(ids) != len(mask) for ids, mask in zip(token_ids, loss_masks, strict=True)
    ):
        raise ValueError("every context needs a loss mask of its own length")
    width = max(len(ids) for ids in token_ids)
    n = len(token_ids)
    input_ids = torch.full((n, width), pad_token_id, dtype=torch.long)  # [N, S]
    attention = torch.zeros((n, width), dtype=torch.long)  # [N, S]
    response = torch.zeros((n, width), dtype=torch.long)  # [N, S]
    for row, (ids, mask) in enumerate(zip(token_ids, loss_masks, strict=True)):
        start = width - len(ids)
        input_ids[row, start:] = torch.tensor(list(ids), dtype=torch.long)
        attention[row, start:] = 1
        response[row, start:] = torch.tensor(list(mask), dtype=torch.long)
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response,
        old_logprobs=None,
        advantages=advantages.to(torch.float32),
        valid=torch.tensor(list(valid), dtype=torch.bool),
    )
