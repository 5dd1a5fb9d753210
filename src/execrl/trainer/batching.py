"""Splitting a rollout batch into optimizer-step mini-batches and token-budget micro-batches.

Micro-batches are sized by padded tokens (rows x width after trimming all-padding columns), not by a row
count: rollouts vary in length by 10x, and a fixed row count either wastes memory on short batches or runs out
of it on long ones. Rows are packed in order of their length (stable sort, so deterministic), which keeps
similar lengths together and padding low. Sequences are never split across micro-batches.
"""

from __future__ import annotations

import torch
from torch import Tensor


def minibatch_rows(num_sequences: int, parts: int) -> list[Tensor]:
    """``parts`` contiguous, nearly equal row ranges (empty ones dropped), one per optimizer step."""
    return [rows for rows in torch.arange(num_sequences).tensor_split(parts) if rows.numel()]


def microbatch_rows(attention_mask: Tensor, tokens_per_microbatch: int) -> list[tuple[Tensor, slice]]:
    """Group rows of ``attention_mask`` [N, S] into micro-batches of at most ``tokens_per_microbatch`` padded
    tokens; returns ``(row indices, column slice)`` pairs. A single row longer than the budget forms its own
    micro-batch (it cannot be split).
    """
    present = attention_mask > 0  # [N, S]
    columns = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    first = (
        torch.where(present, columns, attention_mask.shape[1])
        .amin(dim=-1)
        .clamp(max=attention_mask.shape[1] - 1)
    )
    last = torch.where(present, columns, -1).amax(dim=-1).clamp(min=0)
    last = torch.maximum(last, first)  # all-padding rows: a one-column span
    order = torch.argsort(last - first, stable=True).tolist()
    first_list, last_list = first.tolist(), last.tolist()
    groups: list[tuple[Tensor, slice]] = []
    current: list[int] = []
    lo = hi = 0
    for row in order:
        new_lo = min(lo, first_list[row]) if current else first_list[row]
        new_hi = max(hi, last_list[row]) if current else last_list[row]
        if current and (len(current) + 1) * (new_hi - new_lo + 1) > tokens_per_microbatch:
            groups.append((torch.tensor(current, dtype=torch.long), slice(lo, hi + 1)))
            current, new_lo, new_hi = [], first_list[row], last_list[row]
        current.append(row)
        lo, hi = new_lo, new_hi
    if current:
        groups.append((torch.tensor(current, dtype=torch.long), slice(lo, hi + 1)))
    return groups
