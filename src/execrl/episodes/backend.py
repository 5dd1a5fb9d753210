"""The model-backend seam of the rollout loop, and the local backend (an ``Engine`` in this process, or any
object with its interface: execrl's ``hf`` engine, a vLLM engine process, a Ray rollout worker).

A backend owns how a conversation is represented (``Context``: token ids for the local backend, messages
for an OpenAI-compatible endpoint, ``chat.py``), samples model turns, and appends what the environment
says. The loop (``loop.py``) only submits ``TurnRequest`` objects and collects ``TurnResult`` objects:

* ``submit`` queues a request; ``wait`` returns at least one finished request (``[]`` when none is queued).
* A group's first turn is one request for ``samples_per_prompt`` continuations, so the local engine
  prefills the shared prompt once.

How the local backend batches: ``wait`` runs ONE engine call over every queued request whose sampling
parameters equal the first queued one's (in submission order), so the loop's lock-step waves (every live
episode at the same turn, the same seed) become one call, exactly the calls the single-turn sampler and the
old multi-turn loops made; requests with other parameters (a streamed group's own seed) wait for a later
call. An engine that also offers ``submit(prompt_ids, params) -> Future[RolloutBatch]`` (the vLLM engine)
gets each request of a multi-turn rollout call (``session(max_turns >= 2)``) as soon as it is queued and
``wait`` returns whichever finished first: continuous batching across episodes instead of lock-step; a
one-turn call stays one ``generate`` (the engine's seeded, reproducible path: ``docs/engines.md``). With ``prompts_per_batch`` / ``max_batch_tokens`` (off by
default; ``execrl refine`` sets them) a synchronous ``wait`` splits its call into chunks
(``token_budget_chunks``) and returns all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from execrl.episodes import render
from execrl.episodes.types import Completion, Context, Message, Prompt, TurnRequest, TurnResult

if TYPE_CHECKING:
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import RolloutBatch

__all__ = ["Backend", "LocalBackend", "completions_of", "token_budget_chunks"]

log = logging.getLogger("execrl.episodes")


class Backend(Protocol):
    """What the rollout loop needs of a model (see the module docstring)."""

    def open(self, prompt: Prompt) -> Context: ...

    def renders_tools(self, declarations: Sequence[Mapping[str, Any]]) -> bool:
        """Whether tool declarations reach the model through the chat template / the API's ``tools``."""
        ...

    def submit(self, request: TurnRequest) -> None: ...

    def wait(self) -> list[TurnResult]: ...

    def append_turn(self, context: Context, completion: Completion) -> Context: ...

    def append_messages(
        self,
        context: Context,
        messages: Sequence[Message],
        *,
        content_caps: Sequence[int | None],
        wrappers: Sequence[tuple[str, str] | None],
        budget_left: int | None,
    ) -> tuple[Context, int] | None:
        """The environment's messages appended (bodies cut to fit, wrappers kept; how many were cut), or
        None when they cannot fit ``budget_left`` tokens."""
        ...

    def tokens_used(self, context: Context) -> int | None:
        """Tokens after the first prompt (model turns and environment messages); None while unknown."""
        ...

    def session(self, max_turns: int) -> Any:
        """A context manager around one rollout call (the local backend reuses keys/values between the
        turns of multi-turn episodes inside it)."""
        ...


def completions_of(batch: RolloutBatch, tokenizer: Any, caps: Sequence[int]) -> list[tuple[Completion, ...]]:
    """Each request's rows of a prompt-major ``batch`` (``batch.samples_per_prompt`` rows per prompt), each
    row cut to its request's cap ``caps[k]`` (finish reason ``length`` and the text re-decoded when cut)."""
    out = []
    samples = batch.samples_per_prompt
    for k, cap in enumerate(caps):
        rows = []
        for row in range(k * samples, (k + 1) * samples):
            n = int(batch.response_mask[row].sum())
            ids = tuple(int(t) for t in batch.completion_ids[row, :n])
            logprobs = tuple(float(x) for x in batch.logprobs[row, :n])
            sampling = tuple(float(x) for x in batch.sampling_logprobs[row, :n])
            text, finish = batch.texts[row], batch.finish_reasons[row]
            if n > cap:  # a prefix of a sample is a sample under the shorter cap
                ids, logprobs, sampling = ids[:cap], logprobs[:cap], sampling[:cap]
                text, finish = str(tokenizer.decode(list(ids), skip_special_tokens=True)), "length"
            rows.append(Completion(ids, logprobs, sampling, text, finish))
        out.append(tuple(rows))
    return out


def token_budget_chunks(
    prompt_lengths: Sequence[int], max_prompts: int, max_tokens: int, max_new_tokens: int
) -> list[tuple[int, int]]:
    """Consecutive [start, end) chunks, in order: at most ``max_prompts`` each, and at most ``max_tokens``
    padded tokens (count x (longest prompt + ``max_new_tokens``)) unless a single prompt is over it alone
    (it then gets a chunk of its own)."""
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < len(prompt_lengths):
        end, longest = start + 1, prompt_lengths[start]
        while end < len(prompt_lengths) and end - start < max_prompts:
            wider = max(longest, prompt_lengths[end])
            if (end - start + 1) * (wider + max_new_tokens) > max_tokens:
                break
            end, longest = end + 1, wider
        chunks.append((start, end))
        start = end
    return chunks


class LocalBackend:
    """The local engine, in token space (module docstring). ``reuse_kv_max_bytes``: keys/values of earlier
    turns kept inside ``session()`` (0: off; engines without a prefix cache ignore it).

    ``prompts_per_batch`` / ``max_batch_tokens`` (None: off, one engine call per ``wait``): a synchronous
    engine call holds at most that many requests / padded tokens (rows x (longest prompt +
    ``max_new_tokens``)). Why: keys/values and attention scores grow with batch x length, and the later
    turns of a refine sweep are long: one call over 64 conversations of ~900 prompt tokens took the process
    to 14 GB and the OOM killer on a 24 GB machine."""

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        *,
        reuse_kv_max_bytes: int = 2 << 30,
        prompts_per_batch: int | None = None,
        max_batch_tokens: int | None = None,
    ) -> None:
        self.engine, self.tokenizer = engine, tokenizer
        self.reuse_kv_max_bytes = reuse_kv_max_bytes
        self.prompts_per_batch, self.max_batch_tokens = prompts_per_batch, max_batch_tokens
        self._queued: list[TurnRequest] = []
        self._futures: dict[Future[RolloutBatch], TurnRequest] = {}
        self._continuous = callable(getattr(engine, "submit", None))
        self._async = self._continuous

    @property
    def pad_token_id(self) -> int:
        return int(getattr(self.engine, "pad_token_id", None) or self.tokenizer.pad_token_id or 0)

    def open(self, prompt: Prompt) -> Context:
        return render.prompt_context(self.tokenizer, prompt)

    def renders_tools(self, declarations: Sequence[Mapping[str, Any]]) -> bool:
        return render.renders_tools(self.tokenizer, declarations)

    def submit(self, request: TurnRequest) -> None:
        if self._async:
            submit = self.engine.submit  # type: ignore[attr-defined]
            try:
                future = submit([list(request.context.token_ids)], request.params)
            except ValueError as exc:  # refused before it started (too long, bad ids): ``wait`` reports it
                future = Future()
                future.set_exception(exc)
            self._futures[future] = request
        else:
            self._queued.append(request)

    def wait(self) -> list[TurnResult]:
        if self._async:
            return self._wait_async()
        if not self._queued:
            return []
        params = self._queued[0].params
        chosen = [r for r in self._queued if r.params == params]
        self._queued = [r for r in self._queued if r.params != params]
        out = []
        for start, end in self._chunks(chosen):
            part = chosen[start:end]
            try:
                batch = self.engine.generate([list(r.context.token_ids) for r in part], params)
            except ValueError as exc:  # the engine refused these prompts (too long, bad ids): those only
                log.warning("the engine refused %d requests: %s", len(part), exc)
                failed = Completion((), (), (), "", "error", error=f"engine: {exc}")
                out += [TurnResult(r.key, (failed,) * r.params.samples_per_prompt) for r in part]
                continue
            rows = completions_of(batch, self.tokenizer, [r.max_new_tokens for r in part])
            out += [TurnResult(r.key, c) for r, c in zip(part, rows, strict=True)]
            if len(part) < len(chosen):
                log.info("generated %d/%d requests (%d of %d prompt tokens reused)", end, len(chosen),
                         batch.stats.reused_prompt_tokens, batch.stats.prompt_tokens)  # fmt: skip
        return out

    def _chunks(self, chosen: Sequence[TurnRequest]) -> list[tuple[int, int]]:
        if self.prompts_per_batch is None and self.max_batch_tokens is None:
            return [(0, len(chosen))]
        params = chosen[0].params
        return token_budget_chunks(
            [len(r.context.token_ids) for r in chosen], self.prompts_per_batch or len(chosen),
            (self.max_batch_tokens or 1 << 62) // params.samples_per_prompt, params.max_new_tokens,
        )  # fmt: skip

    def _wait_async(self) -> list[TurnResult]:
        if not self._futures:
            return []
        done, _ = wait_futures(list(self._futures), return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            request = self._futures.pop(future)
            try:
                batch = future.result()
            except ValueError as exc:  # refused: these episodes only (a dead engine raises RuntimeError)
                log.warning("the engine refused a request: %s", exc)
                failed = Completion((), (), (), "", "error", error=f"engine: {exc}")
                out.append(TurnResult(request.key, (failed,) * request.params.samples_per_prompt))
                continue
            (rows,) = completions_of(batch, self.tokenizer, [request.max_new_tokens])
            out.append(TurnResult(request.key, rows))
        return sorted(out, key=lambda r: r.key)

    def append_turn(self, context: Context, completion: Completion) -> Context:
        return render.append_turn(self.tokenizer, context, completion)

    def append_messages(
        self,
        context: Context,
        messages: Sequence[Message],
        *,
        content_caps: Sequence[int | None],
        wrappers: Sequence[tuple[str, str] | None],
        budget_left: int | None,
    ) -> tuple[Context, int] | None:
        return render.append_messages(
            self.tokenizer, context, messages, content_caps=content_caps, wrappers=wrappers,
            budget_left=budget_left,
        )  # fmt: skip

    def tokens_used(self, context: Context) -> int | None:
        return len(context.token_ids) - context.prompt_tokens

    @contextmanager
    def session(self, max_turns: int) -> Iterator[None]:
        if max_turns < 2:  # one turn: nothing to reuse (the engine shares each group's prompt itself)
            self._async = False  # one seeded ``generate`` per call, also on an engine with ``submit``
            try:
                yield
            finally:
                self._async = self._continuous
            return
        from execrl.rollout.engine import reusing_prefixes

        with reusing_prefixes(self.engine, max_bytes=self.reuse_kv_max_bytes, max_conversations=1 << 20):
            yield
