"""Padding-free packing of conversations for supervised fine-tuning (``execrl sft``).

Several conversations share one row of one forward pass, back to back with no padding at all: the row is
exactly as long as its conversations together. Each keeps its own position ids (0, 1, ... from its first
token) and its span, ``segments``, which the packed attention (``trainer/sft.py``) uses so that no token
attends across a conversation boundary. Which conversations share a row is best-fit decreasing bin packing
(TRL's ``bfd`` strategy, NeMo-RL's packers): a row holds at most ``capacity`` tokens, so memory per forward
is bounded by the capacity, and few rows are nearly empty. ``bin_fill`` measures that (tokens / (rows x
capacity)); the padding share of a packed row is 0 by construction.

Pure functions over lengths and token lists; only ``packed_row`` builds tensors.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["PackedRow", "bin_fill", "pack_bins", "packed_row"]


def pack_bins(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into bins of total length <= ``capacity``, best-fit decreasing: the
    longest item first, each into the bin it fills most tightly (a new bin when none has room). Each bin
    lists its indices in ascending order; bins come in the order they were opened (longest item first).
    Deterministic for given lengths. Raises ``ValueError`` for an item longer than ``capacity``."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, bin number), sorted
    for i in order:
        size = lengths[i]
        if size > capacity:
            raise ValueError(f"item {i} has {size} tokens, more than the capacity {capacity}")
        at = bisect.bisect_left(free, (size, -1))
        if at == len(free):
            bins.append([i])
            bisect.insort(free, (capacity - size, len(bins) - 1))
            continue
        room, b = free.pop(at)
        bins[b].append(i)
        bisect.insort(free, (room - size, b))
    return [sorted(b) for b in bins]


def bin_fill(lengths: Sequence[int], bins: Sequence[Sequence[int]], capacity: int) -> float:
    """Share of the rows' capacity holding tokens: sum of lengths / (rows x capacity)."""
    if not bins:
        return 0.0
    return sum(lengths[i] for b in bins for i in b) / (len(bins) * capacity)


@dataclass(frozen=True)
class PackedRow:
    """Conversations back to back in one row (batch size 1, no padding)."""

    input_ids: Tensor  # [1, T] long
    position_ids: Tensor  # [1, T] long: 0, 1, ... within each conversation
    target_mask: Tensor  # [1, T] bool: token t is a training target (predicted from t - 1)
    segments: tuple[tuple[int, int], ...]  # (start, end) of each conversation, end exclusive

    @property
    def tokens(self) -> int:
        return int(self.input_ids.shape[1])

    @property
    def target_tokens(self) -> int:
        return int(self.target_mask.sum())


def packed_row(conversations: Sequence[tuple[Sequence[int], Sequence[bool]]]) -> PackedRow:
    """One row of ``(token ids, loss mask)`` conversations. A conversation's first token is never a target
    (nothing before it in its own context), whatever its mask says."""
    if not conversations:
        raise ValueError("packed_row needs at least one conversation")
    ids: list[int] = []
    positions: list[int] = []
    targets: list[bool] = []
    segments = []
    for token_ids, mask in conversations:
        if len(token_ids) != len(mask) or not token_ids:
            raise ValueError(f"a conversation has {len(token_ids)} ids and {len(mask)} mask entries")
        start = len(ids)
        ids.extend(token_ids)
        positions.extend(range(len(token_ids)))
        targets.extend([False, *(bool(m) for m in mask[1:])])
        segments.append((start, len(ids)))
    return PackedRow(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([positions], dtype=torch.long),
        target_mask=torch.tensor([targets], dtype=torch.bool),
        segments=tuple(segments),
    )
