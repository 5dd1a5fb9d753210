"""Prompt encoding with the tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["Message", "encode_prompts", "extension_ids", "render_chat", "turn_content"]

Message = Mapping[str, str]
_ROLES = ("system", "user", "assistant", "tool")


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str | Sequence[Message]]
) -> list[list[int]]:
    """Token ids of each prompt rendered with the chat template and ``add_generation_prompt=True``.

    A plain string is one user message. A list of ``{"role", "content"}`` dicts is used as is (the template
    may add a default system message, as SmolLM2's does). The rendered text is tokenized without adding
    special tokens again, so the ids are exactly the template's tokens.
    """
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "the tokenizer has no chat template; pass token ids to the engine directly or use an instruct model"
        )
    encoded: list[list[int]] = []
    for i, prompt in enumerate(prompts):
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else _messages(prompt, i)
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        encoded.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return encoded


def _messages(prompt: Sequence[Message], index: int) -> list[dict[str, str]]:
    if not prompt:
        raise ValueError(f"prompt {index} is an empty message list")
    messages = []
    for j, message in enumerate(prompt):
        if not isinstance(message, Mapping) or set(message) != {"role", "content"}:
            raise ValueError(
                f"prompt {index}, message {j}: expected a dict with keys 'role' and 'content', got {message!r}"
            )
        if message["role"] not in _ROLES or not isinstance(message["content"], str):
            raise ValueError(
                f"prompt {index}, message {j}: role must be one of {_ROLES} and content a string, got {dict(message)!r}"
            )
        messages.append({"role": message["role"], "content": message["content"]})
    return messages


# ---- multi-turn contexts: appending messages to sampled ids without drift -------------------------------


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Mapping[str, str]],
    *,
    generation_prompt: bool,
    tools: Sequence[Mapping[str, object]] | None = None,
) -> str:
    """The chat template's text of ``messages`` (``tools``: OpenAI tool declarations, for templates that
    render them)."""
    extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
    return str(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=generation_prompt, **extra
        )
    )


def extension_ids(
    tokenizer: PreTrainedTokenizerBase,
    context_ids: Sequence[int],
    messages: Sequence[Mapping[str, str]],
    appended: Sequence[Mapping[str, str]],
    *,
    tools: Sequence[Mapping[str, object]] | None = None,
) -> list[int]:
    """Ids to append to ``context_ids`` (the rendering of ``messages``, ending with a model turn kept as
    its sampled ids) so that the result is the template's rendering of ``messages + appended`` with the
    generation prompt.

    The model's turns stay the exact sampled ids (re-tokenising their text can give other ids: verl
    #3960); only the template's text after "the conversation so far" is tokenised, on its own. Because
    chat-template special tokens split the text, that equals tokenising the whole conversation at once
    (``tests/unit/refine/test_multiturn.py``). A template that rewrites earlier turns (e.g. strips
    reasoning) does not extend the text so far, and this raises instead of silently drifting.
    """
    full = render_chat(tokenizer, [*messages, *appended], generation_prompt=True, tools=tools)
    so_far = str(tokenizer.decode(list(context_ids), skip_special_tokens=False))
    if not full.startswith(so_far):
        raise ValueError(
            "the chat template does not extend the conversation so far (it rewrites earlier turns); "
            "multi-turn token ids would drift from the template's"
        )
    return list(tokenizer(full[len(so_far) :], add_special_tokens=False)["input_ids"])


def turn_content(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int]) -> str:
    """The assistant message of a sampled turn, as the chat template must see it to extend the context.

    Decoded *with* special tokens: a model may emit one mid-turn (``<|endoftext|>``, ``<|im_start|>``),
    and the engine's text drops it, so a message built from that text renders shorter than the context
    and :func:`extension_ids` cannot extend it (a trained tiny model hit this). Only the closing
    end-of-turn token is left out: the template writes it itself.
    """
    body = list(ids[:-1]) if ids and ids[-1] == tokenizer.eos_token_id else list(ids)
    return str(tokenizer.decode(body, skip_special_tokens=False))
