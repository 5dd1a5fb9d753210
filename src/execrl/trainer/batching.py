"""Splitting a rollout batch into optimizer-step mini-batches and token-budget micro-batches.

Micro-batches are sized by padded tokens (rows x width after trimming all-padding columns), not by a row
count: rollouts vary in length by 10x, and a fixed row count either wastes memory on short batches or runs out
of it on long ones. Rows are packed in order of their length (stable sort, so deterministic), which keeps
similar lengths together and padding low. Sequences are never split across micro-batches.

With ``groups`` (rows sharing a prompt, see :func:`execrl.trainer.prefix.find_shared_prefix`), rows are packed
group by group instead (groups in order of their longest row, rows by length inside a group), so a group
lands in as few micro-batches as possible and its prompt is computed once per micro-batch, not once per row.
With ``shared_width`` (the first scored column, where the shared context ends), the budget counts what the
shared pass computes: each distinct context once plus every row's columns after it. Counting rows x width
instead would split a long prompt's group into one row per micro-batch (4 x 8,256 padded tokens for a
8,192-token prompt and 4 samples against the default budget of 4,096), and each row would then recompute
the whole prompt: exactly the work the shared pass exists to save.

Also here: ``split_groups`` (a mini-batch's rows divided between trainer ranks, groups kept whole;
``sharded_step.py``) and ``masked_batch`` (the loss mask and token advantages ``prepare_batch`` starts from).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import Tensor

if TYPE_CHECKING:
    from execrl.trainer.step import TrainBatch

B = TypeVar("B", bound="TrainBatch")


def minibatch_rows(num_sequences: int, parts: int) -> list[Tensor]:
    """``parts`` contiguous, nearly equal row ranges (empty ones dropped), one per optimizer step."""
    return [rows for rows in torch.arange(num_sequences).tensor_split(parts) if rows.numel()]


def microbatch_rows(
    attention_mask: Tensor,
    tokens_per_microbatch: int,
    *,
    groups: Tensor | None = None,
    shared_width: int | None = None,
) -> list[tuple[Tensor, slice]]:
    """Group rows of ``attention_mask`` [N, S] into micro-batches of at most ``tokens_per_microbatch`` padded
    tokens; returns ``(row indices, column slice)`` pairs. A single row longer than the budget forms its own
    micro-batch (it cannot be split). ``groups`` [N] (optional): a group that fits in the budget is never
    split across micro-batches; a larger one is split by rows. ``shared_width`` (with ``groups``): columns
    before it are computed once per group in a micro-batch (see the module docstring).
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
    first_list, last_list = first.tolist(), last.tolist()
    group_of = groups.tolist() if groups is not None else list(range(attention_mask.shape[0]))
    width = shared_width if groups is not None else None

    def cost(rows: list[int], lo: int, hi: int) -> int:
        return padded_cost(len(rows), len({group_of[r] for r in rows}), lo, hi, width)

    units: list[tuple[list[int], int, int]] = []  # (rows, first column, last column)
    for unit in _packing_units(last - first, groups):
        unit_lo, unit_hi = min(first_list[r] for r in unit), max(last_list[r] for r in unit)
        if len(unit) == 1 or cost(unit, unit_lo, unit_hi) <= tokens_per_microbatch:
            units.append((unit, unit_lo, unit_hi))
        else:  # a group larger than the budget: its rows, in order
            units.extend(([row], first_list[row], last_list[row]) for row in unit)
    parts: list[tuple[Tensor, slice]] = []
    current: list[int] = []
    lo = hi = 0
    for unit, unit_lo, unit_hi in units:
        new_lo, new_hi = (min(lo, unit_lo), max(hi, unit_hi)) if current else (unit_lo, unit_hi)
        if current and cost(current + unit, new_lo, new_hi) > tokens_per_microbatch:
            parts.append((torch.tensor(current, dtype=torch.long), slice(lo, hi + 1)))
            current, new_lo, new_hi = [], unit_lo, unit_hi
        current.extend(unit)
        lo, hi = new_lo, new_hi
    if current:
        parts.append((torch.tensor(current, dtype=torch.long), slice(lo, hi + 1)))
    return parts


def padded_cost(rows: int, groups: int, lo: int, hi: int, shared_width: int | None) -> int:
    """Positions the trunk computes for ``rows`` rows (of ``groups`` distinct contexts) over columns
    ``[lo, hi]``: ``rows x width``, or with a shared context ending at column ``shared_width``, the context
    once per group plus every row's columns from ``shared_width`` on."""
    if shared_width is None or shared_width <= lo:
        return rows * (hi - lo + 1)
    return groups * (shared_width - lo) + rows * max(hi - shared_width + 1, 0)


def _packing_units(span: Tensor, groups: Tensor | None) -> list[list[int]]:
    """Rows in packing order, as units that go into one micro-batch together.

    Without groups every row is its own unit, by span (stable sort: deterministic). With groups a unit is a
    whole group (groups by their longest row, rows by span inside); ``microbatch_rows`` breaks a group that
    alone exceeds the budget back into rows (still consecutive, so it spans as few micro-batches as it can).
    """
    if groups is None:
        return [[row] for row in torch.argsort(span, stable=True).tolist()]
    members: dict[int, list[int]] = {}
    for row in torch.argsort(span, stable=True).tolist():
        members.setdefault(int(groups[row]), []).append(row)
    return sorted(members.values(), key=lambda rows: (int(span[rows[-1]]), rows[0]))


def split_groups(groups: Tensor, cost: Tensor, parts: int) -> list[Tensor]:
    """Row indices of ``parts`` shares (e.g. trainer ranks) of a batch: whole groups (rows with the same id in
    ``groups`` [N], e.g. rows sharing a prompt), the costliest first, each to the share with the least
    ``cost`` [N] so far (ties: the lower share); rows in order within a share. With fewer groups than
    shares the rows are dealt out one by one instead, so no share idles while another has a whole group.
    Deterministic: it depends on the inputs only."""
    ids, costs = groups.tolist(), cost.tolist()
    members: dict[int, list[int]] = {}
    for row, group in enumerate(ids):
        members.setdefault(int(group), []).append(row)
    units = list(members.values()) if len(members) >= parts else [[row] for row in range(len(ids))]
    units.sort(key=lambda rows: (-sum(costs[r] for r in rows), rows[0]))
    loads = [0.0] * parts
    shares: list[list[int]] = [[] for _ in range(parts)]
    for rows in units:
        target = min(range(parts), key=lambda p: (loads[p], p))
        shares[target].extend(rows)
        loads[target] += sum(costs[r] for r in rows)
    return [torch.tensor(sorted(rows), dtype=torch.long) for rows in shares]


def masked_batch(batch: B) -> B:
    """``response_mask`` as bool with invalid rows and padding removed, ``advantages`` [N, S] zero off it."""
    mask = (batch.response_mask > 0) & (batch.attention_mask > 0)  # [N, S]
    if batch.valid is not None:
        mask &= batch.valid[:, None]
    advantages = batch.advantages
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(mask)
    advantages = torch.where(mask, advantages, torch.zeros_like(advantages))  # [N, S]
    return dataclasses.replace(batch, response_mask=mask, advantages=advantages)
