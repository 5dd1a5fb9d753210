"""The serve batcher with fake engines: grouping by sampling parameters, seeded requests alone, stop
strings cut, recovery after a failed call, a bug failing every waiting request instead of hanging them,
short requests on their own lane, cancellation and stop ending running rows, and the queued-token cap."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import torch

from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams
from execrl.serve.batcher import (
    Batcher,
    BatcherLimits,
    EngineFailed,
    QueueFull,
    RequestTooLarge,
    ServerStopping,
    trim_at_stop,
)


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


class StepEngine:
    """Decodes ``max_new_tokens`` steps of ``step_s`` each, calling ``on_step`` after each one; rows the hook
    returns stop at once. Records the steps each call took."""

    def __init__(self, step_s: float = 0.002) -> None:
        self.step_s = step_s
        self.steps: list[int] = []

    def generate(
        self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams, *, on_step: object = None
    ) -> RolloutBatch:
        import time

        rows = len(prompt_token_ids) * params.samples_per_prompt
        alive = set(range(rows))
        step = 0
        while alive and step < params.max_new_tokens:
            time.sleep(self.step_s)
            step += 1
            ids = torch.tensor(sorted(alive))
            stop = on_step(ids, torch.zeros_like(ids)) if callable(on_step) else None
            alive -= set(stop or ())
        self.steps.append(step)
        return FakeEngine().generate(prompt_token_ids, params)


def test_a_short_request_runs_on_its_own_lane_while_a_long_one_holds_the_engine() -> None:
    """Regression: one engine thread ran requests one after another, so a short request waited behind a
    long one (minutes). Requests asking <= short_max_tokens may also use the short lane."""
    engine = StepEngine()
    long_params = SamplingParams(samples_per_prompt=1, max_new_tokens=2000)
    short_params = SamplingParams(samples_per_prompt=1, max_new_tokens=8)

    async def scenario() -> tuple[bool, list[int]]:
        batcher = Batcher(engine, limits=BatcherLimits(short_max_tokens=16), window_s=0.0)
        await batcher.start()
        long = asyncio.ensure_future(batcher.submit([1], long_params, seeded=False))
        while batcher.running == 0:
            await asyncio.sleep(0.001)
        await batcher.submit([2], short_params, seeded=False)
        long_running = not long.done()
        long.cancel()
        await asyncio.gather(long, return_exceptions=True)
        await batcher.stop()
        return long_running, engine.steps

    long_running, steps = asyncio.run(scenario())
    assert long_running and steps[0] == 8  # the short call finished first, while the long one ran
    assert steps[1] < 2000  # and the long one stopped once cancelled


def test_stop_finishes_running_rows_fails_waiting_requests_and_refuses_new_ones() -> None:
    """Regression: SIGTERM left the engine generating until SIGKILL. stop() ends the running call at its
    next step (its request gets ServerStopping), fails what waits, and returns within its bound."""
    engine = StepEngine()
    params = SamplingParams(samples_per_prompt=2, max_new_tokens=5000)

    async def scenario() -> tuple[list[object], BaseException | None, float]:
        import time

        batcher = Batcher(engine, limits=BatcherLimits(lanes=1), window_s=0.0)
        await batcher.start()
        running = asyncio.ensure_future(batcher.submit([1], params, seeded=True))
        waiting = asyncio.ensure_future(batcher.submit([2], params, seeded=True))
        while batcher.running == 0:
            await asyncio.sleep(0.001)
        start = time.perf_counter()
        await batcher.stop(timeout_s=5.0)
        took = time.perf_counter() - start
        later: BaseException | None = None
        try:
            await batcher.submit([3], params, seeded=False)
        except ServerStopping as exc:
            later = exc
        return list(await asyncio.gather(running, waiting, return_exceptions=True)), later, took

    results, later, took = asyncio.run(scenario())
    assert all(isinstance(r, ServerStopping) for r in results), results
    assert isinstance(later, ServerStopping) and took < 5.0 and engine.steps[0] < 5000


def test_queued_tokens_are_bounded() -> None:
    """n x (prompt + max_new_tokens) summed over queued and running requests stays under the cap."""
    engine = StepEngine()

    async def scenario() -> tuple[BaseException | None, BaseException | None, int]:
        batcher = Batcher(engine, limits=BatcherLimits(max_queued_tokens=1000, lanes=1), window_s=0.0)
        await batcher.start()
        too_large = full = None
        try:
            await batcher.submit(
                [1] * 10, SamplingParams(samples_per_prompt=2, max_new_tokens=600), seeded=False
            )
        except RequestTooLarge as exc:
            too_large = exc
        first = asyncio.ensure_future(
            batcher.submit([1] * 10, SamplingParams(samples_per_prompt=1, max_new_tokens=600), seeded=False)
        )
        await asyncio.sleep(0)
        try:
            await batcher.submit(
                [1] * 10, SamplingParams(samples_per_prompt=1, max_new_tokens=600), seeded=False
            )
        except QueueFull as exc:
            full = exc
        await first
        held = batcher.held_tokens
        await batcher.stop()
        return too_large, full, held

    too_large, full, held = asyncio.run(scenario())
    assert isinstance(too_large, RequestTooLarge) and too_large.param == "max_tokens"
    assert isinstance(full, QueueFull) and held == 0


def test_stop_is_bounded_for_an_engine_that_cannot_stop_early() -> None:
    """An engine without the step hook cannot be stopped mid-call: stop() still returns within its
    timeout, and ``engine_busy`` tells the CLI to exit without waiting for the thread."""
    import threading

    release = threading.Event()

    class Stubborn(FakeEngine):
        def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
            release.wait(timeout=30)
            return super().generate(prompt_token_ids, params)

    async def scenario() -> tuple[bool, bool]:
        batcher = Batcher(Stubborn(), window_s=0.0)
        await batcher.start()
        job = asyncio.ensure_future(batcher.submit([1], SamplingParams(samples_per_prompt=1), seeded=False))
        while not batcher.engine_busy:
            await asyncio.sleep(0.001)
        await asyncio.wait_for(batcher.stop(timeout_s=0.1), timeout=5)
        busy_after_stop = batcher.engine_busy
        release.set()
        await asyncio.gather(job, return_exceptions=True)
        for _ in range(1000):
            if not batcher.engine_busy:
                break
            await asyncio.sleep(0.01)
        return busy_after_stop, batcher.engine_busy

    assert asyncio.run(scenario()) == (True, False)
