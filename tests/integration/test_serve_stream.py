"""``execrl serve`` streams tokens as the batch decodes them (official ``openai`` client, ``stream=True``):
chunks arrive before generation ends, the concatenation equals the non-streamed answer, streamed and plain
requests share one batch, and a client that leaves mid-stream neither crashes the server nor stalls others.

Ordering is checked with hooks on the engine (a decode step that waits for the client), never with timings.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import torch

from execrl.rollout import HFEngine, SamplingParams
from execrl.rollout.engine import StepHook
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.rollout.types import RolloutBatch
from execrl.serve.background import serve_in_thread
from execrl.serve.server import ServeConfig, build_app

NAME = "tiny"
WAIT_S = 300.0  # a deadlock guard only; generous for a loaded machine


class GatedEngine(HFEngine):
    """An HFEngine whose decode can pause: at step ``pause_at_step`` of a call it waits for ``resume``
    (the test sets it once the client has seen what it should see); records each call's prompt count."""

    def __init__(self) -> None:
        super().__init__(tiny_model(seed=0, init_std=0.5), default_tokenizer())
        self.pause_at_step: int | None = None
        self.resume = threading.Event()
        self.paused = threading.Event()
        self.resumed_in_time: bool | None = None
        self.steps = 0  # decode steps of the current call so far
        self.calls: list[int] = []

    def generate(
        self,
        prompt_token_ids: Sequence[Sequence[int]],
        params: SamplingParams,
        *,
        on_step: StepHook | None = None,
    ) -> RolloutBatch:
        self.calls.append(len(prompt_token_ids))
        self.steps = 0

        def hook(rows: torch.Tensor, tokens: torch.Tensor) -> None:
            self.steps += 1
            if on_step is not None:
                on_step(rows, tokens)
            if self.steps == self.pause_at_step:
                self.paused.set()
                self.resumed_in_time = self.resume.wait(timeout=WAIT_S)

        return super().generate(prompt_token_ids, params, on_step=hook)


@pytest.fixture()
def served() -> Iterator[tuple[openai.OpenAI, GatedEngine]]:
    engine = GatedEngine()
    app = build_app(engine, ServeConfig(model_name=NAME, default_max_tokens=8))
    with serve_in_thread(app) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0), engine


def _health(client: openai.OpenAI) -> dict[str, int]:
    url = str(client.base_url).removesuffix("/").removesuffix("/v1")
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _until(condition: Callable[[], bool]) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Write function number {i}."}]


def _plain(client: openai.OpenAI, i: int, **extra: object) -> str:
    reply = client.chat.completions.create(model=NAME, messages=_messages(i), temperature=0.0, **extra)  # type: ignore[call-overload]
    return reply.choices[0].message.content or ""


def test_first_chunk_arrives_before_the_last_token_is_generated(
    served: tuple[openai.OpenAI, GatedEngine],
) -> None:
    client, engine = served
    answer = _plain(client, 0, max_tokens=8)
    assert answer and engine.steps == 8  # 8 tokens, no EOS: the pause below is before the last one
    engine.pause_at_step = 7  # after the 7th token is delivered, the 8th waits for the client
    stream = client.chat.completions.create(
        model=NAME, messages=_messages(0), temperature=0.0, max_tokens=8, stream=True
    )  # type: ignore[call-overload]
    pieces, steps_at_first_content = [], None
    for chunk in stream:
        content = chunk.choices[0].delta.content if chunk.choices else None
        if content and steps_at_first_content is None:
            steps_at_first_content = engine.steps
            engine.resume.set()
        pieces.append(content or "")
    assert engine.resumed_in_time is True  # the chunk came while decoding was still paused
    assert steps_at_first_content is not None and steps_at_first_content <= 7
    assert "".join(pieces) == answer


@pytest.mark.parametrize(
    "extra", [{"n": 2, "seed": 5, "temperature": 1.0}, {"stop": ["e"]}, {"stop": [" ", "on"]}]
)
def test_stream_concatenation_equals_the_plain_answer(
    served: tuple[openai.OpenAI, GatedEngine], extra: dict[str, object]
) -> None:
    client, _ = served
    options = {"model": NAME, "messages": _messages(1), "max_tokens": 8, "temperature": 0.0, **extra}
    plain = client.chat.completions.create(**options)  # type: ignore[call-overload]
    chunks = list(
        client.chat.completions.create(**options, stream=True, stream_options={"include_usage": True})
    )  # type: ignore[call-overload]
    assert plain.choices, "the plain answer has no choice to compare"
    for choice in plain.choices:
        text = "".join(
            c.choices[0].delta.content or ""
            for c in chunks
            if c.choices and c.choices[0].index == choice.index
        )
        assert text == choice.message.content
        finish = [
            c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].index == choice.index
        ]
        assert finish[-1] == choice.finish_reason
    assert chunks[-1].usage is not None and chunks[-1].usage.model_dump() == plain.usage.model_dump()  # type: ignore[union-attr]


def test_streamed_and_plain_requests_share_a_batch(served: tuple[openai.OpenAI, GatedEngine]) -> None:
    client, engine = served
    alone = [_plain(client, i, max_tokens=6) for i in range(3)]
    engine.pause_at_step, engine.calls = 1, []  # a blocker holds the engine while the three queue up

    def streamed(i: int) -> str:
        stream = client.chat.completions.create(
            model=NAME, messages=_messages(i), temperature=0.0, max_tokens=6, stream=True
        )  # type: ignore[call-overload]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with ThreadPoolExecutor(max_workers=4) as pool:
        blocker = pool.submit(_plain, client, 9, max_tokens=2)
        assert engine.paused.wait(timeout=WAIT_S)
        engine.pause_at_step = None
        futures = [
            pool.submit(streamed, 0),
            pool.submit(_plain, client, 1, max_tokens=6),
            pool.submit(streamed, 2),
        ]
        _until(lambda: _health(client)["queued"] == 3)
        engine.resume.set()
        results = [f.result(timeout=WAIT_S) for f in futures]
        blocker.result(timeout=WAIT_S)
    assert results == alone
    assert engine.calls == [1, 3]  # the blocker alone, then one generation for all three


def test_client_leaving_mid_stream_does_not_crash_or_stall(served: tuple[openai.OpenAI, GatedEngine]) -> None:
    client, engine = served
    expected = _plain(client, 4, max_tokens=8)
    engine.pause_at_step = 3  # the batch pauses after 3 tokens until the streaming client has left

    with ThreadPoolExecutor(max_workers=2) as pool:
        stream = client.chat.completions.create(
            model=NAME, messages=_messages(3), temperature=0.0, max_tokens=8, stream=True
        )  # type: ignore[call-overload]
        other = pool.submit(_plain, client, 4, max_tokens=8)  # may share the leaving client's batch
        next(iter(stream))
        stream.close()
        engine.resume.set()
        assert other.result(timeout=WAIT_S) == expected
    engine.pause_at_step = None
    assert _plain(client, 4, max_tokens=8) == expected  # the server still answers
    again = client.chat.completions.create(
        model=NAME, messages=_messages(4), temperature=0.0, max_tokens=8, stream=True
    )  # type: ignore[call-overload]
    assert "".join(c.choices[0].delta.content or "" for c in again if c.choices) == expected
