"""``ChatBackend``: the rollout loop's model behind any OpenAI-compatible endpoint (``execrl serve``, vLLM's
server, a hosted API), in message space. ``execrl tools run`` and ``execrl refine --base-url`` run the one
loop with it; training needs token ids and uses the local backend.

A request is one ``/chat/completions`` call per sample (``n`` is not sent: not every server takes it), up to
``concurrency`` in flight, so a server that batches (``execrl serve`` does) sees them together. Each goes
through ``execrl.chat_http.post_chat``: a total deadline, capped reads, no redirects, the answer's JSON
checked and its text made encodable; an endpoint that answers anything else, or not at all, gives a
``Completion`` with ``error`` set, which ends that episode with ``stop="error"`` (counted; the others go on).

A turn's ``text`` is the answer's content with its ``tool_calls`` written back as Hermes calls (the text the
judge scores, as training's model would have written it); the structured calls go to the environment as
``RawCall`` and the assistant message is kept as the endpoint returned it, so the next request replays the
conversation in the wire format (``tool`` messages carry their ``tool_call_id``).

Budgets: tokens are the server's (``usage``): a request's ``max_tokens`` is what is left of the episode's
budget, which is the growth of ``prompt_tokens`` since the first turn plus the last ``completion_tokens``,
known only when an answer arrives (an endpoint without ``usage`` is not bounded by the budget). An
environment message is cut to its cap (and to the budget left) by ``tokenizer`` when one is given, else at
4 characters per token. Stop strings of the environment are not sent: the endpoint ends a turn (a tool
call comes back structured). Seeds are sent only with ``send_seed`` (a seeded request runs alone on
``execrl serve``, which undoes its batching), so an API run is not reproducible unless asked.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, replace
from typing import Any

from execrl.chat_http import ChatAnswer, ChatError, ChatLimits, post_chat
from execrl.episodes.render import cut_marker, safe_text
from execrl.episodes.types import Completion, Context, Message, Prompt, RawCall, Turn, TurnRequest, TurnResult

__all__ = ["CHARS_PER_TOKEN", "ChatBackend", "Endpoint"]

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8000/v1``)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 600.0
    send_seed: bool = False


class ChatBackend:
    """The loop's model behind ``endpoint`` (module docstring)."""

    def __init__(self, endpoint: Endpoint, *, tokenizer: Any = None, concurrency: int = 16) -> None:
        self.endpoint, self.tokenizer = endpoint, tokenizer
        self.name = f"openai:{endpoint.model}@{endpoint.base_url}"
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="execrl-chat")
        self._pending: dict[Future[Completion], tuple[int, int, int]] = {}  # -> (key, sample, samples)
        self._done: dict[int, dict[int, Completion]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def open(self, prompt: Prompt) -> Context:
        messages = tuple({**m, "content": safe_text(str(m.get("content") or ""))} for m in prompt.messages)
        return Context(messages=messages, tools=prompt.tools)

    def renders_tools(self, declarations: Sequence[Mapping[str, Any]]) -> bool:
        return True  # the endpoint takes ``tools`` and renders them with its own template

    def _body(self, request: TurnRequest) -> dict[str, Any]:
        params = request.params
        body: dict[str, Any] = {
            "model": self.endpoint.model, "messages": [dict(m) for m in request.context.messages],
            "max_tokens": max(1, request.max_new_tokens), "temperature": params.temperature, "top_p": params.top_p,
        }  # fmt: skip
        if request.context.tools:
            body["tools"], body["tool_choice"] = [dict(t) for t in request.context.tools], "auto"
        if self.endpoint.send_seed:
            body["seed"] = params.seed
        return body

    def _ask(self, body: dict[str, Any]) -> Completion:
        limits = ChatLimits(deadline_s=self.endpoint.timeout_s)
        try:
            answer = post_chat(self.endpoint.base_url, body, api_key=self.endpoint.api_key, limits=limits)
        except ChatError as exc:
            return Completion((), (), (), "", "error", error=str(exc)[:1000])
        return _completion(answer)

    def submit(self, request: TurnRequest) -> None:
        samples = request.params.samples_per_prompt
        body = self._body(request)
        for sample in range(samples):
            self._pending[self._pool.submit(self._ask, body)] = (request.key, sample, samples)

    def wait(self) -> list[TurnResult]:
        """The requests whose every sample has come back (at least one, unless nothing is pending)."""
        out: list[TurnResult] = []
        while self._pending and not out:
            done, _ = wait_futures(list(self._pending), return_when=FIRST_COMPLETED)
            for future in done:
                key, sample, samples = self._pending.pop(future)
                got = self._done.setdefault(key, {})
                got[sample] = future.result()
                if len(got) == samples:
                    out.append(TurnResult(key, tuple(got[i] for i in range(samples))))
                    del self._done[key]
        return sorted(out, key=lambda r: r.key)

    def append_turn(self, context: Context, completion: Completion) -> Context:
        message = dict(completion.message or {"role": "assistant", "content": completion.text})
        first, used = context.usage_first_prompt_tokens, context.usage_tokens
        prompt, produced = completion.usage_prompt_tokens, completion.usage_completion_tokens
        if prompt is not None and produced is not None:
            first = prompt if first is None else first
            used = prompt - first + produced
        turn = Turn(0, 0, completion.finish_reason)  # no token spans in message space
        return replace(context, messages=(*context.messages, message), turns=(*context.turns, turn),
                       usage_first_prompt_tokens=first, usage_tokens=used)  # fmt: skip

    def append_messages(
        self,
        context: Context,
        messages: Sequence[Message],
        *,
        content_caps: Sequence[int | None],
        wrappers: Sequence[tuple[str, str] | None],
        budget_left: int | None,
    ) -> tuple[Context, int] | None:
        cut, out = 0, []
        for k, message in enumerate(messages):
            cap = content_caps[k] if k < len(content_caps) else None
            limit = min(x for x in (cap, budget_left) if x is not None) if (cap or budget_left) else None
            body, was_cut = self._cut(safe_text(str(message.get("content") or "")), limit, budget_left)
            cut += was_cut
            head, foot = wrappers[k] if k < len(wrappers) and wrappers[k] is not None else ("", "")  # type: ignore[misc]
            out.append({**message, "content": f"{head}{body}{foot}"})
        return replace(context, messages=(*context.messages, *out)), cut

    def _cut(self, text: str, tokens: int | None, budget_left: int | None) -> tuple[str, bool]:
        if tokens is None:
            return text, False
        tokens = max(tokens, 1)
        if self.tokenizer is not None:
            ids = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            if len(ids) <= tokens:
                return text, False
            kept = str(self.tokenizer.decode(ids[:tokens], skip_special_tokens=False))
            left = None if budget_left is None else max(0, budget_left - tokens)
            return kept + cut_marker(len(ids) - tokens, left), True
        chars = tokens * CHARS_PER_TOKEN
        if len(text) <= chars:
            return text, False
        return f"{text[:chars]}\n[... {len(text) - chars} characters cut]", True

    def tokens_used(self, context: Context) -> int | None:
        return context.usage_tokens or 0

    @contextlib.contextmanager
    def session(self, max_turns: int) -> Iterator[None]:
        yield


def _completion(answer: ChatAnswer) -> Completion:
    calls = tuple(RawCall(c.id or f"call_{k}", c.name, c.arguments) for k, c in enumerate(answer.tool_calls))
    text = (answer.content or "") + "".join(_call_text(c) for c in calls)
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _wire(c.arguments)}}
            for c in calls
        ]
    usage = answer.usage
    return Completion(
        (), (), (), text, "length" if answer.finish_reason == "length" else "stop", tool_calls=calls,
        message=message, usage_prompt_tokens=usage.prompt_tokens if usage else None,
        usage_completion_tokens=usage.completion_tokens if usage else None,
    )  # fmt: skip


def _wire(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _call_text(call: RawCall) -> str:
    """A call as the Hermes prompt's layout writes it (``tools.calls.call_text``, restated here: this
    package sits below ``execrl.tools``); an arguments string that is not JSON stays the string it is."""
    arguments: Any = call.arguments
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):
            from execrl.chat_http import load_arguments

            arguments = load_arguments(arguments)
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"
