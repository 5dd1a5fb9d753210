"""Streamed chat completions: server-sent events in OpenAI's chunk format, sent as the batch decodes.

Each choice's tokens come from :meth:`execrl.serve.batcher.Batcher.submit_stream` while the batch runs.
:class:`TextStream` turns them into text pieces that a later token cannot change: the choice's tokens so
far are decoded whole (so multi-byte characters split over tokens come out right), and text is held back
while it ends in an incomplete character (U+FFFD) or in the beginning of a stop string (OpenAI never shows
the stop string). When the batch ends, the rest of the final answer (the same text a non-streamed
request gets) is sent, then each choice's ``finish_reason`` chunk, the usage chunk when
``stream_options.include_usage`` is set, and ``data: [DONE]``.

A client that goes away mid-stream (the write fails, or the server cancels the handler) cancels its
request: the engine finishes its rows at the next decode step and the batch carries on for the others. An engine failure after the first chunk is sent
as an ``error`` event (the status line is already gone).

Limits: the held-back text relies on decoding being prefix-stable (true for byte-level BPE tokenizers
without ``clean_up_tokenization_spaces``, such as SmolLM2's); a tokenizer that rewrites earlier text when
a later token arrives logs a warning and the stream's concatenation may then differ from the full answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from execrl.serve.api import RequestError, error_body
from execrl.serve.batcher import EngineFailed, Generated, ServerStopping, Streamed, trim_at_stop

__all__ = ["TextStream", "stream_chat"]

log = logging.getLogger("execrl.serve")


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` may still change or turn into a stop string."""
    held = len(text) - len(text.rstrip("\ufffd"))
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), held, -1):
            if text.endswith(stop[:k]):
                held = k
                break
    return held


class TextStream:
    """One choice's text as its tokens arrive; :meth:`push` returns only text that is final."""

    def __init__(self, tokenizer: Any, stops: Sequence[str]) -> None:
        self.tokenizer, self.stops = tokenizer, tuple(stops)
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def push(self, token: int) -> str:
        if self.stopped:
            return ""
        self.ids.append(token)
        text = str(self.tokenizer.decode(self.ids, skip_special_tokens=True))
        cut, self.stopped = trim_at_stop(text, self.stops)
        return self._advance(cut if self.stopped else text[: len(text) - _held_back(text, self.stops)])

    def finish(self, final_text: str) -> str:
        """The rest of ``final_text`` (the non-streamed answer) after what was sent."""
        if not final_text.startswith(self.sent):
            log.warning("streamed text %r is not a prefix of the answer %r", self.sent, final_text)
        return self._advance(final_text)

    def _advance(self, text: str) -> str:
        if len(text) <= len(self.sent) or not text.startswith(self.sent):
            return ""
        piece, self.sent = text[len(self.sent) :], text
        return piece


class _Events:
    """The response, opened at the first event, and the chunk envelope."""

    def __init__(self, request: web.Request, base: dict[str, Any], choices: int) -> None:
        self.request, self.base, self.choices = request, base, choices
        self.response: web.StreamResponse | None = None

    async def send(self, choices: list[dict[str, Any]], **extra: Any) -> None:
        if self.response is None:
            headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            self.response = web.StreamResponse(headers=headers)
            await self.response.prepare(self.request)
            for i in range(self.choices):
                await self.send(
                    [{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
                )
        await self.response.write(
            f"data: {json.dumps({**self.base, 'choices': choices, **extra})}\n\n".encode()
        )

    async def content(self, index: int, piece: str) -> None:
        if piece:
            await self.send([{"index": index, "delta": {"content": piece}, "finish_reason": None}])


async def stream_chat(
    request: web.Request,
    streamed: Streamed,
    *,
    tokenizer: Any,
    stops: Sequence[str],
    choices: int,
    base: dict[str, Any],
    include_usage: bool,
) -> web.StreamResponse:
    """Send ``streamed``'s tokens as chunks while they come, then the ending (see module docstring)."""
    texts = [TextStream(tokenizer, stops) for _ in range(choices)]
    events = _Events(request, base, choices)
    try:
        while (delta := await streamed.deltas.get()) is not None:
            index, token = delta
            await events.content(index, texts[index].push(token))
        try:
            generated = await streamed.result
        except (EngineFailed, ServerStopping, ValueError) as exc:
            status = 400 if isinstance(exc, ValueError) else 503
            code = (
                "server_stopping"
                if isinstance(exc, ServerStopping)
                else "engine_failed"
                if status == 503
                else None
            )
            error = RequestError(str(exc), status=status, code=code)
            if events.response is None:
                raise error from exc
            await events.send([], **error_body(error))
            return await _done(events)
        await _ending(events, texts, generated, include_usage)
        return await _done(events)
    except ConnectionResetError:
        log.info("a client left mid-stream; its request is dropped, the batch goes on")
        return events.response or web.Response(status=499)
    finally:
        if not streamed.result.done():
            streamed.result.cancel()


async def _ending(
    events: _Events, texts: list[TextStream], generated: Generated, include_usage: bool
) -> None:
    for i, choice in enumerate(generated.choices):
        await events.content(i, texts[i].finish(choice.text))
        await events.send([{"index": i, "delta": {}, "finish_reason": choice.finish_reason}])
    if include_usage:
        await events.send([], usage=generated.usage())


async def _done(events: _Events) -> web.StreamResponse:
    assert events.response is not None
    await events.response.write(b"data: [DONE]\n\n")
    await events.response.write_eof()
    return events.response
