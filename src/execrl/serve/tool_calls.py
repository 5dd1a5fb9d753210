"""OpenAI ``tools`` on ``execrl serve``: the prompt a request renders to, and the ``tool_calls`` of an answer.

The served conversation renders exactly as a training episode of ``execrl.tools`` does (``tools/episode.py``),
so a model trained with tool calls sees the prompt format it was trained on:

- the declarations reach the model through the chat template's ``tools`` when the template renders them,
  else as the Hermes block in the system message (:func:`execrl.tools.calls.prompt_messages`);
- an assistant message's ``tool_calls`` are written back into its content as
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` after its text
  (:func:`execrl.tools.calls.call_text`; training keeps the sampled text itself, so a call the model wrote
  with other whitespace or key order comes back normalised);
- a ``tool`` message's content is wrapped in ``<tool_response>`` tags unless the template renders tools
  (:func:`execrl.tools.calls.response_content`); ``tool_call_id`` is required but not matched against the
  calls before it (a client may answer a malformed call it found in the content, as ``execrl tools run``
  does);
- generation stops at ``</tool_call>`` (a stop string), so one answer holds at most one call.

An answer that ends in a call that parses (JSON with a ``name`` the request declared and arguments that fit
its schema at the top level, ``tools/registry.py``) comes back as ``tool_calls`` with ``finish_reason``
``"tool_calls"`` and ``content`` the text before the call (``null`` when that is blank). A malformed call
comes back as plain content, ``</tool_call>`` included, with ``finish_reason`` ``"stop"``: nothing is
dropped, and the client decides. ``tool_choice="none"`` leaves the declarations out of the prompt and the
answer unparsed (what vLLM's ``--exclude-tools-when-tool-choice-none`` does).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from execrl.serve.api import ChatMessageIn, ChatRequest
from execrl.serve.batcher import Choice
from execrl.tools.calls import (
    CALL_END,
    CALL_START,
    CallError,
    call_text,
    check_call,
    prompt_messages,
    read_call,
    response_content,
    template_renders_tools,
)

__all__ = ["answer_message", "chat_messages", "declarations", "encode_chat", "renders_tools"]

_PROBE = [{"type": "function", "function": {"name": "probe", "parameters": {"type": "object"}}}]


def renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders ``tools`` (decided once, at startup)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return False
    return template_renders_tools(tokenizer, _PROBE)


def declarations(req: ChatRequest) -> list[dict[str, Any]] | None:
    """The request's tools as OpenAI declarations; None when it offers none (or ``tool_choice="none"``)."""
    if not req.tools or req.tool_choice == "none":
        return None
    return [tool.model_dump(exclude_none=True) for tool in req.tools]


def _content(message: ChatMessageIn, *, template_tools: bool) -> str:
    text = message.content or ""
    if message.role == "tool":
        return response_content(text, call_format="hermes", template_tools=template_tools)
    for call in message.tool_calls or ():
        text += call_text(call.function.name, json.loads(call.function.arguments))
    return text


def chat_messages(req: ChatRequest, *, template_tools: bool) -> list[dict[str, str]]:
    """The request's messages as the chat template gets them, the tools declared as in training."""
    messages = [{"role": m.role, "content": _content(m, template_tools=template_tools)} for m in req.messages]
    declared = declarations(req)
    if declared is None:
        return messages
    return prompt_messages(messages, declared, template_tools=template_tools)


def encode_chat(
    tokenizer: Any, messages: list[dict[str, str]], tools: list[dict[str, Any]] | None
) -> list[int]:
    """Prompt ids: the template's text with the generation prompt, tokenised without special tokens
    added again (as ``encode_prompts`` and the tool episodes do). ``tools``: for a template that
    renders them."""
    from execrl.rollout.prompts import encode_prompts, render_chat

    if not tools:
        return encode_prompts(tokenizer, [messages])[0]
    text = render_chat(tokenizer, messages, generation_prompt=True, tools=tools)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _schemas(declared: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["function"]["name"]: d["function"].get("parameters", {"type": "object"}) for d in declared}


def answer_message(choice: Choice, declared: list[dict[str, Any]] | None) -> tuple[dict[str, Any], str]:
    """The choice's ``message`` and ``finish_reason`` (module doc: a call that parses becomes
    ``tool_calls``; a malformed one stays in the content)."""
    plain = {"role": "assistant", "content": choice.text}
    if declared is None or choice.stop_string != CALL_END:
        return plain, choice.finish_reason
    written = choice.text + CALL_END
    read = read_call(written)
    call = read if read is None or isinstance(read, CallError) else check_call(*read, _schemas(declared))
    if call is None or isinstance(call, CallError):
        return {"role": "assistant", "content": written}, "stop"
    before = choice.text[: choice.text.rfind(CALL_START)]
    function = {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}
    message = {
        "role": "assistant",
        "content": before if before.strip() else None,
        "tool_calls": [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": function}],
    }
    return message, "tool_calls"
