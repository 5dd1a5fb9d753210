"""Model backends of the refine loop, behind one interface: the local engine or any OpenAI-compatible API.

``ChatBackend.complete(conversations, params)`` answers a batch of conversations at once: the local
backend runs them as one ``engine.generate`` call per ``prompts_per_batch`` chunk (the rollout engine's
batching); the OpenAI backend sends them concurrently to ``/v1/chat/completions`` (``execrl serve``, vLLM,
a hosted API), so a server that batches (``execrl serve`` does) sees them together.

KV reuse: the local backend gives the engine a prefix cache (``reuse_kv_max_bytes``, default 2 GiB) that
lives as long as the backend, so turn t prefills only what is new since turn t-1 (the feedback and the
headers), and the controls that restart from the same first attempt reuse it too
(:mod:`execrl.rollout.prefix_cache`). The conversation is re-encoded through the chat template every
turn; reuse covers the longest common token prefix, so a turn whose re-tokenised text differs from the
sampled ids still reuses everything before the first difference. LRU eviction: when the refine sweep's
conversations do not fit in ``reuse_kv_max_bytes``, the later rounds find little (raise
``reuse_kv_max_bytes``, ``execrl refine --kv-cache-mb``: a HumanEval sweep of SmolLM2-135M reused 2,271
of 13,970 prompt tokens in a repair chunk with the 2 GiB default). Measured (``execrl bench refine-kv``): see
:mod:`execrl.bench.refine_kv`.

Errors: a conversation the backend cannot answer (a 400 for a context past the model's, a connection
that failed after the client's retries, an engine that refused the prompt) gets a :class:`Reply` with
``error``; the loop records it in the trace and the summary and goes on with the other problems.

Limits: token counts of the OpenAI backend are the server's ``usage`` figures; it sends no ``seed`` (a seeded
request runs alone on ``execrl serve``, which would undo its batching), so API runs are not reproducible.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from execrl.rollout.engine import Engine

__all__ = ["ChatBackend", "GenerationParams", "LocalBackend", "OpenAIBackend", "Reply", "token_budget_chunks"]

Conversation = Sequence[dict[str, str]]
log = logging.getLogger("execrl.refine")


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 384
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    error: str | None = None  # the backend refused this conversation (e.g. past the context): no text


class ChatBackend(Protocol):
    """``complete`` answers every conversation: one it cannot answer gets a :class:`Reply` with ``error``
    (the loop records it and stops that problem) rather than an exception that would end the run.
    ``tokenizer``: the model's, when known (feedback is counted and cleaned with it), else None."""

    name: str
    tokenizer: Any

    def complete(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]: ...


class LocalBackend:
    """The rollout engine in this process; ``conversations`` go through the tokenizer's chat template."""

    def __init__(
        self,
        engine: Engine,
        tokenizer: object,
        *,
        name: str,
        prompts_per_batch: int = 16,
        reuse_kv_max_bytes: int = 2 << 30,
        max_batch_tokens: int = 32768,
    ) -> None:
        """``reuse_kv_max_bytes``: keys/values of earlier turns kept in the engine between calls (0: off;
        ignored by engines without a prefix cache). ``max_batch_tokens``: a chunk holds at most this many
        padded tokens (prompts x (longest prompt + ``max_new_tokens``)), fewer prompts than
        ``prompts_per_batch`` when the conversations are long. Why: keys/values and the attention scores
        grow with batch x length (x length), and a refine sweep's later turns are long; 64 conversations
        of ~900 prompt tokens each took the process to 14 GB and the OOM killer on this 24 GB machine."""
        from execrl.rollout.engine import PrefixReuse

        self.engine, self.tokenizer, self.name = engine, tokenizer, name
        self.prompts_per_batch = prompts_per_batch
        self.max_batch_tokens = max_batch_tokens
        if reuse_kv_max_bytes > 0 and isinstance(engine, PrefixReuse) and engine.can_reuse_prefixes:
            from execrl.rollout.prefix_cache import PrefixCache

            engine.prefix_cache = PrefixCache(max_bytes=reuse_kv_max_bytes, max_conversations=1 << 20)

    def complete(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        from execrl.rollout.prompts import encode_prompts
        from execrl.rollout.types import SamplingParams

        sampling = SamplingParams(
            samples_per_prompt=1,
            max_new_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
        )
        replies: list[Reply] = []
        encoded = encode_prompts(self.tokenizer, [list(c) for c in conversations])  # type: ignore[arg-type]
        lengths = [len(p) for p in encoded]
        for start, end in token_budget_chunks(
            lengths, self.prompts_per_batch, self.max_batch_tokens, params.max_new_tokens
        ):
            prompts = encoded[start:end]
            try:
                batch = self.engine.generate(prompts, sampling)
            except ValueError as exc:  # the engine refused these prompts (too long, bad ids)
                log.warning("the engine refused conversations %d-%d: %s", start, end, exc)
                replies.extend(Reply("", len(p), 0, "error", error=f"engine: {exc}") for p in prompts)
                continue
            log.info(
                "generated %d/%d conversations (%d tokens in %.0f s; %d of %d prompt tokens reused)",
                end,
                len(conversations),
                batch.stats.generated_tokens,
                batch.stats.total_s,
                batch.stats.reused_prompt_tokens,
                batch.stats.prompt_tokens,
            )
            completion = batch.completion_lengths.tolist()
            replies.extend(
                Reply(batch.texts[i], len(prompts[i]), int(completion[i]), batch.finish_reasons[i])
                for i in range(len(prompts))
            )
        return replies


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


class OpenAIBackend:
    """Any OpenAI-compatible endpoint, ``concurrency`` requests in flight (one per conversation)."""

    def __init__(self, base_url: str, model: str, *, api_key: str = "unused", concurrency: int = 16) -> None:
        import openai

        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=2, timeout=3600)
        self.name, self.model, self.concurrency = f"openai:{model}@{base_url}", model, concurrency
        self.tokenizer = None  # the server's is unknown: feedback is bounded in characters (feedback.py)

    def _one(self, conversation: Conversation, params: GenerationParams) -> Reply:
        import openai

        try:
            reply = self.client.chat.completions.create(
                model=self.model,
                messages=list(conversation),  # type: ignore[arg-type]
                max_tokens=params.max_new_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
            )
        except openai.APIStatusError as exc:  # e.g. 400 context_length_exceeded: this problem only
            return Reply("", 0, 0, "error", error=f"HTTP {exc.status_code}: {str(exc.message)[:500]}")
        except openai.APIConnectionError as exc:  # refused or timed out after the client's retries
            return Reply("", 0, 0, "error", error=f"{type(exc).__name__}: {str(exc)[:500]}")
        if not reply.choices:
            return Reply("", 0, 0, "error", error="the endpoint answered with no choices")
        choice = reply.choices[0]
        usage = reply.usage
        return Reply(
            choice.message.content or "",
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
            choice.finish_reason or "stop",
        )

    def complete(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._one, c, params) for c in conversations]
            return [f.result() for f in futures]
