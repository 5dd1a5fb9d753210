"""The serve batcher with a fake engine: grouping by sampling parameters, seeded requests alone, stop
strings cut, and a broken engine failing every waiting request instead of hanging them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import torch

from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams
from execrl.serve.batcher import Batcher, EngineFailed, trim_at_stop


class FakeEngine:
    """Echoes each prompt's first id as a one-token completion 'tok<id>'; records every call."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, SamplingParams]] = []
        self.fail = fail

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        if self.fail:
            raise RuntimeError("device lost")
        self.calls.append((len(prompt_token_ids), params))
        n = len(prompt_token_ids) * params.samples_per_prompt
        ids = torch.tensor([[p[0]] for p in prompt_token_ids for _ in range(params.samples_per_prompt)])
        return RolloutBatch(
            prompt_token_ids=tuple(tuple(p) for p in prompt_token_ids),
            completion_ids=ids,
            logprobs=torch.zeros(n, 1),
            sampling_logprobs=torch.zeros(n, 1),
            response_mask=torch.ones(n, 1, dtype=torch.bool),
            group_index=torch.arange(len(prompt_token_ids)).repeat_interleave(params.samples_per_prompt),
            finish_reasons=("length",) * n,
            texts=tuple(f"tok{int(i)} STOP tail" for i in ids[:, 0]),
            samples_per_prompt=params.samples_per_prompt,
            pad_token_id=0,
            stats=RolloutStats(0.0, 0.0, 0.0, 0, n, 1),
        )


async def _submit_all(batcher: Batcher, jobs: list[tuple[list[int], SamplingParams, bool]]) -> list[object]:
    await batcher.start()
    try:
        return await asyncio.gather(
            *(batcher.submit(p, s, seeded=x) for p, s, x in jobs), return_exceptions=True
        )
    finally:
        await batcher.stop()


def test_groups_by_params_and_runs_seeded_requests_alone() -> None:
    engine = FakeEngine()
    plain = SamplingParams(samples_per_prompt=1, max_new_tokens=4, stop_strings=(" STOP",))
    other = SamplingParams(samples_per_prompt=2, max_new_tokens=4)
    jobs = [
        ([1], plain, False),
        ([2], plain, False),
        ([3], other, False),
        ([4], plain, True),
        ([5], plain, False),
    ]
    results = asyncio.run(_submit_all(Batcher(engine), jobs))  # type: ignore[arg-type]
    # All five are queued before the batcher wakes: the three unseeded "plain" requests share one call,
    # the one with other parameters and the seeded one run alone.
    assert sorted(n for n, _ in engine.calls) == [1, 1, 3]
    assert [p.samples_per_prompt for n, p in engine.calls if n == 3] == [1]
    first = results[0]
    assert first.choices[0].text == "tok1" and first.choices[0].finish_reason == "stop"  # type: ignore[attr-defined]
    assert [c.text for c in results[2].choices] == ["tok3 STOP tail"] * 2  # type: ignore[attr-defined]


def test_a_failed_call_fails_its_requests_and_the_next_call_runs() -> None:
    """Regression (issue 24): one refused allocation (torch raises RuntimeError) put the server into a
    permanent 503 state while /health said ok. Now that call's requests fail, the next request runs, and
    the failure is counted for /health."""
    engine = FakeEngine(fail=True)
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=4)

    async def scenario() -> tuple[list[object], object, Batcher]:
        batcher = Batcher(engine)
        await batcher.start()
        first = await asyncio.gather(batcher.submit([1], params, seeded=False), return_exceptions=True)
        assert batcher.consecutive_failures == 1 and "device lost" in (batcher.last_failure or "")
        engine.fail = False
        later = await batcher.submit([2], params, seeded=False)
        await batcher.stop()
        return first, later, batcher

    first, later, batcher = asyncio.run(scenario())
    assert isinstance(first[0], EngineFailed) and "device lost" in str(first[0])
    assert later.choices[0].text == "tok2 STOP tail"  # type: ignore[attr-defined]
    assert batcher.failures == 1 and batcher.consecutive_failures == 0 and batcher.failure is None


def test_a_bug_in_the_engine_fails_waiting_and_later_requests() -> None:
    """Not a runtime error of the device but a bug (an AssertionError): nothing runs any more, and
    later requests are told to restart the server."""
    engine = FakeEngine()
    engine.generate = _raise_assertion  # type: ignore[method-assign]
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=4)

    async def scenario() -> tuple[list[object], BaseException | None]:
        batcher = Batcher(engine)
        await batcher.start()
        first = await asyncio.gather(batcher.submit([1], params, seeded=False), return_exceptions=True)
        later: BaseException | None = None
        try:
            await batcher.submit([2], params, seeded=False)
        except EngineFailed as exc:
            later = exc
        await batcher.stop()
        return first, later

    first, later = asyncio.run(scenario())
    assert isinstance(first[0], EngineFailed) and "bug" in str(first[0])
    assert isinstance(later, EngineFailed) and "restart the server" in str(later)


def _raise_assertion(prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
    raise AssertionError("a bug")


def test_trim_at_stop_takes_the_earliest() -> None:
    assert trim_at_stop("abc<x>def<y>", ["<y>", "<x>"]) == ("abc", True)
    assert trim_at_stop("abc", ["<y>"]) == ("abc", False)
    with pytest.raises(ValueError):
        Batcher(FakeEngine(), max_prompts_per_batch=0)  # type: ignore[arg-type]
