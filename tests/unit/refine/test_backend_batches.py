"""``token_budget_chunks``: the local refine backend's batches stay under a padded-token budget."""

from __future__ import annotations

from execrl.refine.backends import token_budget_chunks


def test_short_prompts_fill_up_to_the_prompt_count() -> None:
    assert token_budget_chunks([10] * 10, 4, 10_000, 100) == [(0, 4), (4, 8), (8, 10)]


def test_long_prompts_make_smaller_chunks_in_order() -> None:
    # 3 x (900 + 100) = 3000 fits a budget of 3000, a fourth does not; the short ones pack more.
    lengths = [900, 900, 900, 900, 100, 100, 100, 100, 100]
    assert token_budget_chunks(lengths, 16, 3000, 100) == [(0, 3), (3, 6), (6, 9)]


def test_the_longest_prompt_sets_the_padding() -> None:
    assert token_budget_chunks([100, 100, 1400], 16, 3000, 100) == [(0, 2), (2, 3)]


def test_a_prompt_over_the_budget_alone_still_gets_a_chunk() -> None:
    assert token_budget_chunks([5000, 10], 16, 3000, 100) == [(0, 1), (1, 2)]
    assert token_budget_chunks([], 16, 3000, 100) == []
