"""SFT rows: reading chat JSONL, refusing bad rows by file and line, and the plan of packed rows per step.

A row is one JSON object per line: ``messages`` (OpenAI chat format; assistant ``tool_calls`` allowed) and
optionally ``tools`` (OpenAI declarations); other keys (``metadata``, ids) are kept out of training. Each
row is rendered by ``tools/render.py`` exactly as a training episode renders it. A row no episode could
produce (no assistant turn, an unknown role, malformed ``tool_calls``, more tokens than a packed row holds,
invalid JSON) is a ``BadRow``: reported as ``file:line: reason`` and counted, never dropped silently. A file
that cannot be read at all (missing, binary, not UTF-8, over the size caps, no rows) raises
``InputFileError`` (one line; the command exits 2 before writing anything).

The plan (``StepPlan``): the training conversations are packed once into rows of at most
``optim.tokens_per_row`` tokens (best-fit decreasing, ``trainer/packing.py``); each epoch visits every row
once in an order shuffled by (run seed, epoch); a step takes the next ``optim.rows_per_step`` rows. A
step's rows are a pure function of the step number, so ``--resume`` needs only the next step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from execrl.inputs import InputFileError, iter_lines, json_value, regular_file
from execrl.seeding import stream_seed
from execrl.tools.calls import CallFormat
from execrl.tools.render import ConversationError, RenderedConversation, render_conversation
from execrl.trainer.packing import PackedRow, bin_fill, pack_bins, packed_row

__all__ = ["BadRow", "RowSet", "StepPlan", "check_bad_share", "read_rows", "split_heldout"]


@dataclass(frozen=True)
class BadRow:
    where: str  # "file:line"
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True)
class RowSet:
    conversations: tuple[RenderedConversation, ...]
    where: tuple[str, ...]  # "file:line" of each conversation
    bad: tuple[BadRow, ...]

    @property
    def rows(self) -> int:
        return len(self.conversations) + len(self.bad)


def read_rows(paths: Sequence[str], tokenizer: Any, *, call_format: CallFormat, max_tokens: int) -> RowSet:
    """Every row of ``paths`` rendered, or a ``BadRow`` saying where and why."""
    conversations: list[RenderedConversation] = []
    where: list[str] = []
    bad: list[BadRow] = []
    for path in paths:
        file = regular_file(path, "SFT rows file")
        seen = 0
        try:
            with file.open("rb") as handle:
                for line_no, text in iter_lines(handle, str(file)):
                    seen += 1
                    try:
                        conversations.append(_render(text, tokenizer, call_format, max_tokens))
                        where.append(f"{file}:{line_no}")
                    except ConversationError as exc:
                        bad.append(BadRow(f"{file}:{line_no}", str(exc)))
        except OSError as exc:
            raise InputFileError(f"{file}: cannot read ({exc.strerror or exc})") from None
        if not seen:
            raise InputFileError(f"{file}: no rows (the file is empty)")
    return RowSet(tuple(conversations), tuple(where), tuple(bad))


def _render(text: str, tokenizer: Any, call_format: CallFormat, max_tokens: int) -> RenderedConversation:
    try:
        row = json_value(text)
    except ValueError as exc:
        raise ConversationError(str(exc)) from None
    if not isinstance(row, dict) or "messages" not in row:
        raise ConversationError("a row is a JSON object with 'messages' (and optionally 'tools')")
    rendered = render_conversation(
        tokenizer, row["messages"], tools=row.get("tools"), call_format=call_format
    )
    if len(rendered.token_ids) > max_tokens:
        raise ConversationError(
            f"{len(rendered.token_ids)} tokens, more than a packed row holds (optim.tokens_per_row={max_tokens})"
        )
    return rendered


def check_bad_share(rows: RowSet, max_share: float, what: str) -> None:
    """Refuse (``InputFileError``, one line) when more than ``max_share`` of the rows are bad, or none is
    left to train on; the first bad rows are named."""
    if rows.bad and (len(rows.bad) > max_share * rows.rows or not rows.conversations):
        shown = "; ".join(str(b) for b in rows.bad[:3])
        more = f" (and {len(rows.bad) - 3} more)" if len(rows.bad) > 3 else ""
        raise InputFileError(
            f"{len(rows.bad)} of {rows.rows} {what} rows are bad (data.max_bad_share={max_share}): {shown}{more}"
        )


def split_heldout(rows: RowSet, share: float, seed: int) -> tuple[RowSet, RowSet]:
    """``(train, held out)``: ``share`` of the conversations (at least one when ``share > 0`` and two or
    more exist), picked by ``seed``; the bad rows stay with the training set's report."""
    n = len(rows.conversations)
    count = max(1, round(share * n)) if share > 0 and n >= 2 else 0
    held = set(random.Random(stream_seed(seed, "sft-heldout")).sample(range(n), count))
    keep = [i for i in range(n) if i not in held]
    pick = sorted(held)
    train = RowSet(tuple(rows.conversations[i] for i in keep), tuple(rows.where[i] for i in keep), rows.bad)
    heldout = RowSet(tuple(rows.conversations[i] for i in pick), tuple(rows.where[i] for i in pick), ())
    return train, heldout


@dataclass(frozen=True)
class StepPlan:
    """Which packed rows each optimizer step trains on (module docstring)."""

    conversations: tuple[RenderedConversation, ...]
    bins: tuple[tuple[int, ...], ...]  # conversation indices of each packed row
    rows_per_step: int
    seed: int
    share_prefix_tokens: int = 0  # packed_row's: shared prefixes of at least this many tokens computed once

    @classmethod
    def build(
        cls, rows: RowSet, *, tokens_per_row: int, rows_per_step: int, seed: int, share_prefix_tokens: int = 0
    ) -> StepPlan:
        lengths = [len(c.token_ids) for c in rows.conversations]
        bins = tuple(tuple(b) for b in pack_bins(lengths, tokens_per_row))
        return cls(rows.conversations, bins, rows_per_step, seed, share_prefix_tokens)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.bins) / self.rows_per_step)

    def bin_fill(self, tokens_per_row: int) -> float:
        return bin_fill([len(c.token_ids) for c in self.conversations], self.bins, tokens_per_row)

    def step_bins(self, step: int) -> list[tuple[int, ...]]:
        epoch, k = divmod(step, self.steps_per_epoch)
        order = list(range(len(self.bins)))
        random.Random(stream_seed(self.seed, "sft-epoch", epoch)).shuffle(order)
        return [self.bins[i] for i in order[k * self.rows_per_step : (k + 1) * self.rows_per_step]]

    def rows(self, step: int) -> list[PackedRow]:
        """The packed rows of ``step`` (epochs repeat past the last step of one)."""
        return [self.packed(b) for b in self.step_bins(step)]

    def packed(self, bin_: Sequence[int]) -> PackedRow:
        return packed_row([(self.conversations[i].token_ids, self.conversations[i].loss_mask) for i in bin_],
                          share_prefix_tokens=self.share_prefix_tokens)  # fmt: skip
