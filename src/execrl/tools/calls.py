"""Tool calls in text: declaring tools to the model, finding its call, answering it.

Declaring: a chat template that renders ``tools`` (Qwen2.5, Llama 3.1, Hermes models) gets them through
``apply_chat_template(tools=...)`` (:func:`template_renders_tools` tells by rendering both ways). Others
(SmolLM2's template ignores ``tools``) get the Hermes convention in the system prompt: the declarations
inside ``<tools></tools>`` and the instruction to answer a call as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the format verl's Hermes parser, vLLM's
``hermes`` tool parser and Qwen's templates use.

Finding: generation stops at ``</tool_call>`` (a stop string), so a model turn holds at most one call, at
its end. :func:`parse_call` returns the call, ``None`` (no call: the turn is the final answer), or a
``CallError`` (bad JSON, no name, unknown tool, arguments that do not fit the schema). An error is
answered as the tool message (:func:`error_text`) and counted; verl's parser drops such a call and ends
the episode (verl #3070, #7177).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from execrl.tools.registry import ToolError, argument_problems, get_tool

__all__ = [
    "CALL_END",
    "CALL_START",
    "CallError",
    "ToolCall",
    "error_text",
    "hermes_system_prompt",
    "parse_call",
    "prompt_messages",
    "template_renders_tools",
]

CALL_START, CALL_END = "<tool_call>", "</tool_call>"
ErrorKind = Literal["bad_json", "bad_call", "unknown_tool", "bad_arguments", "not_offered"]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    kind: ErrorKind
    message: str


def hermes_system_prompt(declarations: Sequence[Mapping[str, Any]]) -> str:
    listed = "\n".join(json.dumps(d, ensure_ascii=False) for d in declarations)
    return (
        "# Tools\n\nYou may call a function to help you answer. The functions, as JSON schemas:\n"
        f"<tools>\n{listed}\n</tools>\n\n"
        "To call one, write a JSON object with the function's name and arguments inside <tool_call></tool_call> "
        'tags, and stop:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
        "The result comes back in the next message. When you are done, answer without a tool call."
    )


def template_renders_tools(tokenizer: Any, declarations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the tokenizer's chat template shows ``tools`` (the rendering with them differs)."""
    from execrl.rollout.prompts import render_chat

    probe = [{"role": "user", "content": "hi"}]
    plain = render_chat(tokenizer, probe, generation_prompt=True)
    return render_chat(tokenizer, probe, generation_prompt=True, tools=declarations) != plain


def prompt_messages(
    messages: Sequence[Mapping[str, str]], declarations: Sequence[Mapping[str, Any]], *, template_tools: bool
) -> list[dict[str, str]]:
    """The episode's first messages: unchanged when the template renders ``tools``, else with the Hermes
    block added to the system message (a new system message when there is none)."""
    out = [dict(m) for m in messages]
    if template_tools:
        return out
    block = hermes_system_prompt(declarations)
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{block}"
        return out
    return [{"role": "system", "content": block}, *out]


def parse_call(text: str, offered: Sequence[str]) -> ToolCall | CallError | None:
    """The call at the end of a model turn (``None``: the turn calls no tool)."""
    start = text.rfind(CALL_START)
    if start < 0:
        return None
    body = text[start + len(CALL_START) :]
    end = body.find(CALL_END)
    if end < 0:
        return CallError("bad_call", f"the call has no closing {CALL_END}")
    try:
        data = json.loads(body[:end])
    except ValueError as exc:
        return CallError("bad_json", f"the call is not valid JSON: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return CallError("bad_call", 'a call is a JSON object {"name": "<tool>", "arguments": {...}}')
    name, arguments = data["name"], data.get("arguments", {})
    if isinstance(arguments, str):  # the OpenAI wire format sends arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            return CallError("bad_json", f"the arguments string is not valid JSON: {exc}")
    if name not in offered:
        return CallError("unknown_tool", f"unknown tool {name!r}; available tools: {', '.join(offered)}")
    try:
        tool = get_tool(name)
    except ToolError as exc:
        return CallError("not_offered", str(exc))
    problems = argument_problems(tool, arguments)
    if problems:
        return CallError("bad_arguments", "; ".join(problems))
    return ToolCall(name, arguments)


def error_text(error: CallError) -> str:
    """The structured tool message answering a malformed call."""
    return json.dumps({"error": {"type": error.kind, "message": error.message}}, ensure_ascii=False)
