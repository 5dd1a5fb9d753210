"""Keys/values of earlier conversations kept between ``generate`` calls, so a later turn prefills only
what is new (multi-turn refine: prompt + the model's turn + feedback; the next turn starts with all of it).

How the engine uses it (:class:`execrl.rollout.hf_engine.HFEngine` with ``prefix_cache`` set):

1. **Look up.** For each prompt, the entry with the longest common token prefix; its keys/values for that
   many tokens are reused (capped at ``len(prompt) - 1``: the last prompt token is always prefilled, it
   gives the first token's logits). A common prefix shorter than a whole entry is still exact: the key
   and value at position j depend only on tokens 0..j, so a turn whose re-tokenised text drifts from
   the sampled ids still reuses everything before the first differing token.
2. **Prefill the rest.** The batch cache is laid out ``[reused part, left-padded | new part, left-padded]``
   per row (:func:`stack_reused`), with one attention mask over both parts and position ids counting real
   tokens only, so a row sees exactly the positions it would alone; the padding holes in the middle are
   masked like left padding.
3. **Store.** When the call ends, every row's real prompt tokens plus the completion tokens the model was
   fed (all but the last sampled one) are copied out as one entry.

Exactness: the same tokens give the same keys/values up to float rounding of different matmul shapes
(tests: greedy ids identical over 3 turns, log-probs within 1e-4, on tiny random models).

Memory: an entry holds ``layers x 2 x kv_heads x head_dim`` values per token (SmolLM2-135M in float32:
30 x 2 x 3 x 64 x 4 B = 46 KB per token, 32 MB for a 700-token conversation). The cache is capped by
``max_conversations`` and ``max_bytes``; when full, least recently used entries are evicted. An entry that
is a prefix of a newly stored one is dropped at once (the conversation moved on; the longer entry serves
every lookup the shorter one did). A turn whose tokens drifted from the stored ones leaves its old entry
to the LRU. A sweep over more conversations than fit (the
refine loop's rounds visit every problem in the same order) gets no hits from LRU: size ``max_bytes`` to
the working set. The cache is cleared when the model's weights change (any parameter's in-place version
counter moved, e.g. an optimizer step), so a trainer never reuses keys of an older policy.

Measured (``execrl bench refine-kv``, details and caveats there): a 3-turn refine of 3 HumanEval problems
on a tiny model prefilled 943 prompt tokens instead of 2375 (60% reused) with identical completions; the
machine was too loaded for a trustworthy time ratio.

Limits: full-attention models only (the preallocated cache); one device; a batch mixing a long prompt
without a hit and short ones with hits pads every row to the long prompt (one prefill pass per call).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn

__all__ = ["CachedPrefix", "PrefixCache", "Reused", "RowKeeper", "stack_reused"]


@dataclass(frozen=True, eq=False)
class CachedPrefix:
    """One conversation's prefix: its tokens and every layer's keys/values for them."""

    tokens: np.ndarray  # [L] int64
    keys: torch.Tensor  # [layers, kv_heads, L, head_dim]
    values: torch.Tensor  # [layers, kv_heads, L, head_dim]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes + self.tokens.nbytes


@dataclass(frozen=True, eq=False)
class Reused:
    """The part of one prompt served from the cache: ``length`` tokens of ``entry`` (None: nothing)."""

    entry: CachedPrefix | None
    length: int


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(a.shape[0], b.shape[0])
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def weights_version(model: nn.Module) -> int:
    """Sum of the parameters' in-place version counters: changes whenever a weight is written in place."""
    return sum(p._version for p in model.parameters())


class PrefixCache:
    """Entries of earlier conversations, LRU-evicted under ``max_conversations`` and ``max_bytes``."""

    def __init__(self, *, max_conversations: int = 256, max_bytes: int = 1 << 30) -> None:
        if max_conversations < 1 or max_bytes < 1:
            raise ValueError(
                f"PrefixCache needs max_conversations >= 1 and max_bytes >= 1, got {max_conversations}, {max_bytes}"
            )
        self.max_conversations, self.max_bytes = max_conversations, max_bytes
        self._entries: OrderedDict[int, CachedPrefix] = OrderedDict()  # id(entry) -> entry, oldest first
        self._version: int | None = None
        self.nbytes = 0
        self.reused_tokens = 0  # prompt tokens served from the cache, all calls
        self.prefilled_tokens = 0  # prompt tokens computed, all calls
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def check_weights(self, model: nn.Module) -> None:
        """Forget everything if ``model``'s weights changed since the entries were computed."""
        version = weights_version(model)
        if version != self._version:
            self.clear()
            self._version = version

    def lookup(self, prompt: Sequence[int]) -> Reused:
        """The longest reusable prefix of ``prompt`` (at most ``len(prompt) - 1`` tokens)."""
        tokens = np.asarray(prompt, dtype=np.int64)
        best, best_length = None, 0
        for entry in self._entries.values():
            length = min(_common_prefix(entry.tokens, tokens), len(tokens) - 1)
            if length > best_length:
                best, best_length = entry, length
        if best is not None:
            self._entries.move_to_end(id(best))
        self.reused_tokens += best_length
        self.prefilled_tokens += len(tokens) - best_length
        return Reused(best, best_length)

    def store(self, entry: CachedPrefix) -> None:
        """Add ``entry``; entries that are a prefix of it go (every lookup finds as much in it)."""
        if entry.nbytes > self.max_bytes:
            return  # larger than the whole cache: keeping it would evict everything for one conversation
        for old in list(self._entries.values()):
            if len(old.tokens) <= len(entry.tokens) and _common_prefix(old.tokens, entry.tokens) == len(
                old.tokens
            ):
                self._drop(old)
        self._entries[id(entry)] = entry
        self.nbytes += entry.nbytes
        while len(self._entries) > self.max_conversations or self.nbytes > self.max_bytes:
            self._drop(next(iter(self._entries.values())))
            self.evictions += 1

    def _drop(self, entry: CachedPrefix) -> None:
        if self._entries.pop(id(entry), None) is not None:
            self.nbytes -= entry.nbytes


def stack_reused(
    reused: Sequence[Reused],
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor] | None:
    """Per layer the reused keys and values ``[P, kv_heads, W, d]`` right-aligned in ``W = max length``
    (zeros in front), and their mask ``[P, W]`` int64; None when no prompt reuses anything."""
    width = max(r.length for r in reused)
    if width == 0:
        return None
    sample = next(r.entry for r in reused if r.entry is not None)
    layers, heads, _, dim = sample.keys.shape
    keys = sample.keys.new_zeros((layers, len(reused), heads, width, dim))
    values = sample.values.new_zeros((layers, len(reused), heads, width, sample.values.shape[-1]))
    mask = torch.zeros((len(reused), width), dtype=torch.long)
    for row, r in enumerate(reused):
        if r.entry is None or r.length == 0:
            continue
        keys[:, row, :, width - r.length :] = r.entry.keys[:, :, : r.length]
        values[:, row, :, width - r.length :] = r.entry.values[:, :, : r.length]
        mask[row, width - r.length :] = 1
    return list(keys.unbind(0)), list(values.unbind(0)), mask


class _PrefixSource(Protocol):
    def prefix_kv(self, position: int, fed: int) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class RowKeeper:
    """Copies one ``generate`` call's finished rows into ``cache`` (a no-op without one)."""

    cache: PrefixCache | None
    prompts: list[list[int]]
    samples_per_prompt: int
    tokens: torch.Tensor  # [N, max_new_tokens] int64, sampled tokens by output row
    lengths: torch.Tensor  # [N] int64, tokens sampled so far

    def hook(self, row_ids: torch.Tensor, source: _PrefixSource) -> Callable[[torch.Tensor], None] | None:
        """``store`` bound to the current batch, for rows about to leave it; None without a cache."""
        return None if self.cache is None else lambda positions: self.store(row_ids, source, positions)

    def store(self, row_ids: torch.Tensor, source: _PrefixSource, positions: torch.Tensor) -> None:
        """Store the rows at batch ``positions`` [D] (output rows ``row_ids[positions]``): prompt + every
        completion token fed to the model (all but the last sampled one)."""
        if self.cache is None:
            return
        for position in positions.tolist():
            row = int(row_ids[position])
            fed = int(self.lengths[row]) - 1
            tokens = [*self.prompts[row // self.samples_per_prompt], *self.tokens[row, :fed].tolist()]
            keys, values = source.prefix_kv(position, fed)
            self.cache.store(CachedPrefix(np.asarray(tokens, dtype=np.int64), keys, values))
