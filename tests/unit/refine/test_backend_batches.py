"""``token_budget_chunks`` and ``LocalBackend``'s chunked engine calls: a refine sweep's batches stay under a
padded-token budget (``execrl refine --prompts-per-batch/--max-batch-tokens``); training's stay one call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from scripted_engine import ScriptedEngine

from execrl.episodes.backend import LocalBackend, token_budget_chunks
from execrl.episodes.types import Prompt, TurnRequest
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import RolloutBatch, SamplingParams


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


class Calls(ScriptedEngine):
    """A scripted engine that records how many prompts each ``generate`` call got."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer, lambda _turn, context: f"answer to {context.count('x')} x")
        self.calls: list[int] = []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        self.calls.append(len(prompts))
        return super().generate(prompts, params)


@pytest.mark.parametrize(
    ("options", "calls"),
    [({}, [5]), ({"prompts_per_batch": 2}, [2, 2, 1]), ({"max_batch_tokens": 1}, [1, 1, 1, 1, 1])],
)
def test_local_backend_chunks_one_wait_into_engine_calls(options: dict[str, int], calls: list[int]) -> None:
    """Regression: a refine sweep's later turns in one engine call ran the machine out of memory; chunked,
    ``wait`` still returns every request, in order, as one call would (off by default: training)."""
    tokenizer = default_tokenizer()
    engine = Calls(tokenizer)
    backend = LocalBackend(engine, tokenizer, **options)  # type: ignore[arg-type]
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=8)
    for key in range(5):
        context = backend.open(Prompt(({"role": "user", "content": "x" * (key + 1)},)))
        backend.submit(TurnRequest(key, context, params, 8))
    results = backend.wait()
    assert engine.calls == calls
    assert [r.key for r in results] == list(range(5))
    assert [r.completions[0].text for r in results] == [f"answer to {k + 1} x" for k in range(5)]
    assert backend.wait() == []
