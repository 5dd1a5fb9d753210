"""Streaming pieces: only text no later token can change is sent (incomplete characters and stop-string
prefixes are held back), and the batcher routes each streamed request's own tokens to it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import torch

from execrl.rollout.engine import StepHook
from execrl.rollout.types import RolloutBatch, RolloutStats, SamplingParams
from execrl.serve.batcher import Batcher
from execrl.serve.stream import TextStream

PIECES = {1: "He", 2: "llo", 3: " wo", 4: "rl", 5: "d!", 6: "\xe2", 7: "\x82\xac"}  # 6+7: the bytes of "€"


class ByteTokenizer:
    """Each id is a byte string (latin-1 here); decoding joins the bytes and decodes UTF-8 with U+FFFD."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        raw = "".join(PIECES[i] for i in ids).encode("latin-1")
        return raw.decode("utf-8", errors="replace")


def test_pieces_hold_back_an_incomplete_character() -> None:
    stream = TextStream(ByteTokenizer(), ())
    assert [stream.push(t) for t in (1, 2, 6, 7, 3)] == ["He", "llo", "", "€", " wo"]


def test_pieces_hold_back_a_stop_string_prefix_and_cut_at_the_stop() -> None:
    stream = TextStream(ByteTokenizer(), ("o w",))
    # "Hello" ends with "o", the start of "o w": held; " wo" completes the stop: cut before it, then stop.
    assert [stream.push(t) for t in (1, 2, 3, 4)] == ["He", "ll", "", ""]
    assert stream.stopped and stream.sent == "Hell"
    assert stream.finish("Hell") == ""


def test_finish_sends_the_rest_of_the_answer() -> None:
    stream = TextStream(ByteTokenizer(), ("xyz",))
    stream.push(1)
    assert stream.finish("Hello world!") == "llo world!"


class StreamingEngine:
    """Two-token completions: token 10 + prompt[0], then 20 + prompt[0]; reports each step via on_step."""

    def generate(
        self,
        prompt_token_ids: Sequence[Sequence[int]],
        params: SamplingParams,
        *,
        on_step: StepHook | None = None,
    ) -> RolloutBatch:
        firsts = torch.tensor([p[0] for p in prompt_token_ids])  # [P]
        ids = torch.stack([10 + firsts, 20 + firsts], dim=1)  # [P, 2], one sample per prompt
        if on_step is not None:
            for step in range(2):
                on_step(torch.arange(len(firsts)), ids[:, step])
        n = len(firsts)
        return RolloutBatch(
            prompt_token_ids=tuple(tuple(p) for p in prompt_token_ids),
            completion_ids=ids,
            logprobs=torch.zeros(n, 2),
            sampling_logprobs=torch.zeros(n, 2),
            response_mask=torch.ones(n, 2, dtype=torch.bool),
            group_index=torch.arange(n),
            finish_reasons=("length",) * n,
            texts=tuple(f"t{int(i)}" for i in firsts),
            samples_per_prompt=1,
            pad_token_id=0,
            stats=RolloutStats(0.0, 0.0, 0.0, 0, 2 * n, 2),
        )


def test_batcher_routes_each_streamed_requests_own_tokens() -> None:
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=2)

    async def scenario() -> tuple[list[object], list[object], object]:
        batcher = Batcher(StreamingEngine(), window_s=0.05)
        await batcher.start()
        try:
            first = await batcher.submit_stream([1], params, seeded=False)
            plain = asyncio.ensure_future(batcher.submit([2], params, seeded=False))
            third = await batcher.submit_stream([3], params, seeded=False)
            got = []
            for streamed in (first, third):
                deltas = []
                while (delta := await streamed.deltas.get()) is not None:
                    deltas.append(delta)
                got.append(deltas)
            return (
                got,
                [(await first.result).choices[0].text, (await plain).choices[0].text],
                batcher.batches_run,
            )
        finally:
            await batcher.stop()

    deltas, texts, batches = asyncio.run(scenario())
    assert deltas == [[(0, 11), (0, 21)], [(0, 13), (0, 23)]]
    assert texts == ["t1", "t2"] and batches == 1
