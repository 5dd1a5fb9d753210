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

__all__ = ["PackedRow", "bin_fill", "pack_bins", "packed_row", "prefix_groups"]


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
    """Conversations back to back in one row (batch size 1, no padding).

    ``segments`` are the row's spans; a segment whose ``context`` is another segment continues that
    segment's tokens (a prefix several conversations share, computed once): its positions start after
    the prefix and its tokens attend to the prefix and causally to themselves. ``owners`` names each
    segment's conversation (index in the ``packed_row`` input; -1 for a shared prefix)."""

    input_ids: Tensor  # [1, T] long
    position_ids: Tensor  # [1, T] long: 0, 1, ... within each conversation (a suffix goes on from its prefix)
    target_mask: Tensor  # [1, T] bool: token t is a training target (predicted from t - 1)
    segments: tuple[tuple[int, int], ...]  # (start, end) of each segment, end exclusive
    context: tuple[int, ...]  # per segment: the segment it continues (a shared prefix), or -1
    owners: tuple[int, ...]  # per segment: its conversation, or -1 for a shared prefix
    conversation_tokens: int  # the conversations' tokens, a shared prefix counted once per conversation

    @property
    def tokens(self) -> int:
        """Tokens computed (a shared prefix once)."""
        return int(self.input_ids.shape[1])

    @property
    def target_tokens(self) -> int:
        return int(self.target_mask.sum())

    @property
    def conversations(self) -> int:
        return len({o for o in self.owners if o >= 0})

    def attention_spans(self) -> tuple[tuple[int, int, int, int], ...]:
        """Per segment ``(start, end, context start, context end)`` (an empty context: ``(0, 0)``)."""
        return tuple(
            (s, e, *(self.segments[c] if c >= 0 else (0, 0)))
            for (s, e), c in zip(self.segments, self.context, strict=True)
        )


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_groups(
    conversations: Sequence[tuple[Sequence[int], Sequence[bool]]], min_tokens: int
) -> list[tuple[int, list[int]]]:
    """``(shared prefix length, members)`` of conversations that begin with the same ``min_tokens`` or more
    tokens, none of them a target (the prefix ends before the first target's predecessor, so every target
    is predicted inside its own suffix). Lexicographic order puts sharers side by side; a group is grown
    while the members' common prefix stays >= ``min_tokens``. A conversation sharing with none is a group
    of one (length 0). Groups come in order of their first member; members ascending."""

    def limit(i: int) -> int:
        ids, mask = conversations[i]
        first = next((t for t, m in enumerate(mask) if m), len(ids))
        return max(0, first - 1)

    order = sorted(range(len(conversations)), key=lambda i: (list(conversations[i][0]), i))
    groups: list[tuple[int, list[int]]] = []
    for i in order:
        if groups:
            shared, members = groups[-1]
            common = min(shared, _lcp(conversations[members[-1]][0], conversations[i][0]), limit(i))
            if common >= min_tokens:
                groups[-1] = (common, [*members, i])
                continue
        groups.append((limit(i), [i]))
    out = [(shared if len(members) > 1 else 0, sorted(members)) for shared, members in groups]
    return sorted(out, key=lambda g: g[1][0])


def packed_row(
    conversations: Sequence[tuple[Sequence[int], Sequence[bool]]], *, share_prefix_tokens: int = 0
) -> PackedRow:
    """One row of ``(token ids, loss mask)`` conversations. A conversation's first token is never a target
    (nothing before it in its own context), whatever its mask says. ``share_prefix_tokens > 0``: a prefix
    of at least that many tokens that several conversations begin with is computed once (``prefix_groups``);
    0 = every conversation whole."""
    if not conversations:
        raise ValueError("packed_row needs at least one conversation")
    for token_ids, mask in conversations:
        if len(token_ids) != len(mask) or not token_ids:
            raise ValueError(f"a conversation has {len(token_ids)} ids and {len(mask)} mask entries")
    groups = (prefix_groups(conversations, share_prefix_tokens) if share_prefix_tokens > 0
              else [(0, [i]) for i in range(len(conversations))])  # fmt: skip
    row = _RowBuilder()
    for shared, members in groups:
        prefix = row.add(conversations[members[0]][0][:shared], [False] * shared, 0, -1, -1) if shared else -1
        for m in members:
            ids, mask = conversations[m]
            row.add(ids[shared:], [False, *(bool(x) for x in mask[shared + 1 :])], shared, prefix, m)
    return PackedRow(
        input_ids=torch.tensor([row.ids], dtype=torch.long),
        position_ids=torch.tensor([row.positions], dtype=torch.long),
        target_mask=torch.tensor([row.targets], dtype=torch.bool),
        segments=tuple(row.segments), context=tuple(row.context), owners=tuple(row.owners),
        conversation_tokens=sum(len(ids) for ids, _ in conversations),
    )  # fmt: skip


class _RowBuilder:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self.positions: list[int] = []
        self.targets: list[bool] = []
        self.segments: list[tuple[int, int]] = []
        self.context: list[int] = []
        self.owners: list[int] = []

    def add(
        self, ids: Sequence[int], targets: Sequence[bool], first_position: int, context: int, owner: int
    ) -> int:
        """Append a segment; returns its index."""
        start = len(self.ids)
        self.ids.extend(ids)
        self.positions.extend(range(first_position, first_position + len(ids)))
        self.targets.extend(targets)
        self.segments.append((start, len(self.ids)))
        self.context.append(context)
        self.owners.append(owner)
        return len(self.segments) - 1
