"""Prompt encoding with the tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["Message", "encode_prompts"]

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
