"""KV reuse across turns (execrl.rollout.prefix_cache): a conversation continued in a later ``generate``
call prefills only its new tokens, and the result equals re-prefilling everything."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from execrl.rollout import HFEngine, SamplingParams
from execrl.rollout.prefix_cache import CachedPrefix, PrefixCache

# Conversations of different lengths (left padding) and per-turn "feedback" of different lengths.
PROMPTS = [[1, 504, 2330, 17, 905], [1, 3300], [1, 88, 7123, 4410, 61, 9, 1250, 33]]
FEEDBACK = [[[1, 77, 902], [1, 5]], [[1, 640, 12, 9, 31], [1, 8, 8]], [[1, 44], [1, 7, 7, 7, 7, 7, 7]]]
GREEDY = SamplingParams(samples_per_prompt=1, max_new_tokens=7, temperature=0.0)


def _three_turns(
    engine: HFEngine, params: SamplingParams
) -> tuple[list[list[int]], list[torch.Tensor], list[int]]:
    """Turn t's prompt = turn t-1's prompt + its completion + FEEDBACK; returns every turn's completions,
    log-probs and reused prompt tokens."""
    contexts = [list(p) for p in PROMPTS]
    completions, logprobs, reused = [], [], []
    for turn in range(3):
        batch = engine.generate(contexts, params)
        reused.append(batch.stats.reused_prompt_tokens)
        for row in range(len(contexts)):
            ids = batch.completion_token_ids(row)
            completions.append(ids)
            logprobs.append(batch.logprobs[row, : len(ids)])
            contexts[row] += ids + (FEEDBACK[row][turn] if turn < 2 else [])
    return completions, logprobs, reused


@pytest.mark.parametrize("shared", [True, False], ids=["shared-decode", "generic-decode"])
@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_three_turns_with_reuse_equal_three_turns_without(
    peaked_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, shared: bool, temperature: float
) -> None:
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=7, temperature=temperature, seed=3)
    plain = HFEngine(peaked_model, tokenizer, shared_prompt_decode=shared)
    cached = HFEngine(peaked_model, tokenizer, shared_prompt_decode=shared, prefix_cache=PrefixCache())
    ids_plain, lp_plain, reused_plain = _three_turns(plain, params)
    ids_cached, lp_cached, reused_cached = _three_turns(cached, params)
    assert ids_cached == ids_plain
    for a, b in zip(lp_cached, lp_plain, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert reused_plain == [0, 0, 0]
    # Turn 2 reuses prompt + all completion tokens but the last sampled one (never fed to the model).
    turn1 = ids_plain[:3]
    assert reused_cached[0] == 0
    assert reused_cached[1] == sum(len(p) + len(c) - 1 for p, c in zip(PROMPTS, turn1, strict=True))
    assert reused_cached[2] > reused_cached[1]


def test_a_new_conversation_in_a_batch_of_continued_ones(
    peaked_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Rows with and without a hit in one prefill (a reused part of width 0 for the new row)."""
    cached = HFEngine(peaked_model, tokenizer, prefix_cache=PrefixCache())
    plain = HFEngine(peaked_model, tokenizer)
    first = cached.generate(PROMPTS[:2], GREEDY)
    second = [
        PROMPTS[0] + first.completion_token_ids(0) + [1, 9],
        PROMPTS[2],  # never seen
        PROMPTS[1] + first.completion_token_ids(1) + [1, 33, 12],
    ]
    with_reuse, without = cached.generate(second, GREEDY), plain.generate(second, GREEDY)
    assert with_reuse.stats.reused_prompt_tokens > 0
    assert [with_reuse.completion_token_ids(r) for r in range(3)] == [
        without.completion_token_ids(r) for r in range(3)
    ]
    torch.testing.assert_close(with_reuse.logprobs, without.logprobs, atol=1e-4, rtol=1e-4)


def test_group_rows_each_continue_their_own_sample(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """G samples of one prompt store G entries; each continuation reuses its own sample's keys."""
    params = SamplingParams(samples_per_prompt=3, max_new_tokens=5, temperature=1.0, seed=11)
    cached = HFEngine(flat_model, tokenizer, prefix_cache=PrefixCache())
    plain = HFEngine(flat_model, tokenizer)
    first = cached.generate([PROMPTS[0]], params)
    assert len(cached.prefix_cache or []) == 3
    nxt = [PROMPTS[0] + first.completion_token_ids(r) + [1, 60] for r in range(3)]
    greedy = SamplingParams(samples_per_prompt=1, max_new_tokens=6, temperature=0.0)
    with_reuse, without = cached.generate(nxt, greedy), plain.generate(nxt, greedy)
    assert with_reuse.stats.reused_prompt_tokens == sum(len(p) - 3 for p in nxt)
    torch.testing.assert_close(with_reuse.logprobs, without.logprobs, atol=1e-4, rtol=1e-4)


def test_weight_change_clears_the_cache(
    peaked_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Regression guard: after an optimizer step, keys of the old policy must not be reused."""
    model = type(peaked_model)(peaked_model.config)
    model.load_state_dict(peaked_model.state_dict())
    engine = HFEngine(model, tokenizer, prefix_cache=PrefixCache())
    first = engine.generate([PROMPTS[0]], GREEDY)
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    again = engine.generate([PROMPTS[0] + first.completion_token_ids(0)], GREEDY)
    assert again.stats.reused_prompt_tokens == 0


def _entry(tokens: list[int], per_token_values: int = 4) -> CachedPrefix:
    """An entry of ``len(tokens) * per_token_values`` float32 keys and as many values."""
    shape = (1, 1, len(tokens), per_token_values)
    return CachedPrefix(np.asarray(tokens, dtype=np.int64), torch.zeros(shape), torch.zeros(shape))


def test_lookup_uses_the_longest_common_prefix_and_keeps_one_token_to_prefill() -> None:
    cache = PrefixCache()
    cache.store(_entry([1, 2, 3, 4, 5]))
    cache.store(_entry([1, 2, 9]))
    assert cache.lookup([1, 2, 3, 7, 7]).length == 3  # drifted after token 3: the first 3 still reuse
    assert cache.lookup([1, 2, 3, 4, 5]).length == 4  # the whole prompt is cached: the last is prefilled
    assert cache.lookup([8, 2, 3]).length == 0
    assert (cache.reused_tokens, cache.prefilled_tokens) == (3 + 4 + 0, 2 + 1 + 3)


def test_store_drops_superseded_entries_and_evicts_least_recently_used() -> None:
    # One token of an entry: 4 keys + 4 values of 4 B, plus 8 B of token id = 40 B.
    cache = PrefixCache(max_conversations=3, max_bytes=40 * 10)
    a, b = _entry([1, 2, 3]), _entry([5, 6])
    cache.store(a)
    cache.store(b)
    cache.store(_entry([1, 2, 3, 4]))  # extends a: a goes
    assert len(cache) == 2 and cache.nbytes == 40 * 6
    cache.lookup([5, 6, 7])  # b is now the most recently used
    cache.store(_entry([7, 7, 7, 7]))  # 40 * 10 B: at the cap exactly
    assert len(cache) == 3
    cache.store(_entry([8]))  # over both caps: the least recently used entry ([1, 2, 3, 4]) goes
    assert cache.lookup([1, 2, 3, 4, 9]).length == 0
    assert cache.lookup([5, 6, 9]).length == 2
    assert cache.evictions == 1 and cache.nbytes == 40 * 7


def test_an_entry_larger_than_the_cache_is_not_kept() -> None:
    cache = PrefixCache(max_bytes=100)
    cache.store(_entry([1, 2, 3]))  # 120 B
    assert len(cache) == 0 and cache.nbytes == 0
