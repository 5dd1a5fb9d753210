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

The ``python_block`` convention (``tools.call_format``), for models too small to write Hermes JSON: a
Markdown code block opened with ```` ```python ```` and closed with ```` ``` ```` at the end of a turn is
a call of the ``python`` tool with the block as its code; its answer comes back as an ```` ```output ````
block in a ``tool`` message. This is the code-interpreter format of ToRL (Li et al. 2025, arXiv
2503.23383), and what small instruct models write unasked: SmolLM2-135M answers the ``tools`` suite's
prompts with ```` ```python ```` blocks and never with a ``<tool_call>``. Generation stops at a closing
fence (``"\n```\n"``); a turn that ends without a closed python block is the final answer. Only the
``python`` tool can be called this way.

:func:`read_call` is the schema-free half of :func:`parse_call` (``execrl serve`` checks a call against
the client's declarations with :func:`check_call`); :func:`call_text` writes a call back as text, so a
served conversation renders as a trained Hermes episode does (:func:`python_block_text` for the other
convention: ``execrl sft`` renders demonstrations' calls with both, ``tools/render.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from execrl.tools.registry import ToolError, get_tool, schema_problems

__all__ = [
    "CALL_END",
    "CALL_START",
    "PYTHON_BLOCK_STOP",
    "CallError",
    "CallFormat",
    "ToolCall",
    "call_stop",
    "call_text",
    "check_call",
    "error_text",
    "fenced_blocks",
    "find_call",
    "json_depth",
    "load_json",
    "hermes_system_prompt",
    "parse_call",
    "parse_python_block",
    "prompt_messages",
    "python_block_system_prompt",
    "python_block_text",
    "response_content",
    "response_wrapper",
    "read_call",
    "template_renders_tools",
]

CALL_START, CALL_END = "<tool_call>", "</tool_call>"
PYTHON_BLOCK_STOP = "\n```\n"  # a closing fence; an opening one carries its language (```python)
CallFormat = Literal["hermes", "python_block"]
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


def python_block_system_prompt() -> str:
    return (
        "# Tools\n\nYou can run Python code. Write it in a ```python block and stop after the closing ```; "
        "its output (stdout, errors and the value of the last expression) comes back in the next message "
        "as an ```output block. Variables, imports and files stay between blocks. When you are done, "
        "answer without a code block."
    )


def template_renders_tools(tokenizer: Any, declarations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the tokenizer's chat template shows ``tools`` (the rendering with them differs)."""
    from execrl.rollout.prompts import render_chat

    probe = [{"role": "user", "content": "hi"}]
    plain = render_chat(tokenizer, probe, generation_prompt=True)
    return render_chat(tokenizer, probe, generation_prompt=True, tools=declarations) != plain


def prompt_messages(
    messages: Sequence[Mapping[str, str]],
    declarations: Sequence[Mapping[str, Any]],
    *,
    template_tools: bool,
    call_format: CallFormat = "hermes",
) -> list[dict[str, str]]:
    """The episode's first messages: unchanged when the template renders ``tools`` (Hermes calls), else
    with the convention's block added to the system message (a new system message when there is none)."""
    out = [dict(m) for m in messages]
    if template_tools and call_format == "hermes":
        return out
    block = hermes_system_prompt(declarations) if call_format == "hermes" else python_block_system_prompt()
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{block}"
        return out
    return [{"role": "system", "content": block}, *out]


MAX_CALL_DEPTH = 32  # JSON nesting of a call's body; deeper is a counted bad_json, never a RecursionError


def json_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` outside JSON strings (a linear scan: a model or an
    endpoint can write 100,000 brackets, and ``json.loads`` recurses once per level)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string, escaped = True, False
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def load_json(text: str) -> Any:
    """``json.loads`` for text a model or an endpoint wrote: nesting past ``MAX_CALL_DEPTH`` raises
    ``ValueError`` like any other malformed JSON (never ``RecursionError``)."""
    if json_depth(text) > MAX_CALL_DEPTH:
        raise ValueError(f"nested deeper than {MAX_CALL_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError as exc:  # pragma: no cover - json_depth bounds it first
        raise ValueError("nested too deep") from exc


def read_call(text: str) -> tuple[str, Any] | CallError | None:
    """The name and arguments of the call in a model turn, unchecked against any schema (``None``: the turn
    calls no tool). Parsed as the format says: the first ``<tool_call>`` opens the call, its JSON object is
    read whole (so a ``<tool_call>`` inside a string of the code is just text), and ``</tool_call>`` must
    follow it. Arguments sent as a JSON string (the OpenAI wire format) are decoded."""
    start = text.find(CALL_START)
    if start < 0:
        return None
    body = text[start + len(CALL_START) :]
    if CALL_END not in body:
        return CallError("bad_call", f"the call has no closing {CALL_END}")
    try:
        if json_depth(body) > MAX_CALL_DEPTH:
            raise ValueError(f"nested deeper than {MAX_CALL_DEPTH} levels")
        stripped = body.lstrip()
        data, end = json.JSONDecoder().raw_decode(stripped)
    except (ValueError, RecursionError) as exc:
        return CallError("bad_json", f"the call is not valid JSON: {str(exc)[:200]}")
    if not stripped[end:].lstrip().startswith(CALL_END):
        return CallError("bad_json", f"the call's JSON is not followed by {CALL_END}")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return CallError("bad_call", 'a call is a JSON object {"name": "<tool>", "arguments": {...}}')
    name, arguments = data["name"], data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments)
        except ValueError as exc:
            return CallError("bad_json", f"the arguments string is not valid JSON: {str(exc)[:200]}")
    return name, arguments


def check_call(name: str, arguments: Any, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall | CallError:
    """``name(arguments)`` against ``schemas`` (offered tool name -> JSON schema of its arguments)."""
    if name not in schemas:
        return CallError("unknown_tool", f"unknown tool {name!r}; available tools: {', '.join(schemas)}")
    problems = schema_problems(name, schemas[name], arguments)
    if problems:
        return CallError("bad_arguments", "; ".join(problems))
    return ToolCall(name, arguments)


def parse_call(text: str, offered: Sequence[str]) -> ToolCall | CallError | None:
    """The call at the end of a model turn (``None``: the turn calls no tool), checked against the
    registered tools ``offered``."""
    read = read_call(text)
    if read is None or isinstance(read, CallError):
        return read
    name, arguments = read
    if name not in offered:
        return CallError("unknown_tool", f"unknown tool {name!r}; available tools: {', '.join(offered)}")
    try:
        tool = get_tool(name)
    except ToolError as exc:
        return CallError("not_offered", str(exc))
    return check_call(name, arguments, {name: tool.parameters})


def call_text(name: str, arguments: Any) -> str:
    """A call as the model writes it (the Hermes prompt's layout), for re-rendering a call a client sends
    back as OpenAI ``tool_calls``."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_START}\n{body}\n{CALL_END}"


_FENCE = re.compile(r"^ {0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")


def fenced_blocks(text: str) -> list[tuple[str, int, int, bool]]:
    """CommonMark fenced code blocks of ``text`` as (info word, first body line, end line, closed): an
    opening fence is a line of 3+ backticks (up to 3 spaces of indent) with an info string; the block ends
    at the first line of at least as many backticks and nothing else, or runs to the end unclosed."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        ticks, info = len(opened.group(1)), opened.group(2).lower()
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing is not None and len(closing.group(1)) >= ticks and not lines[j].strip("` \t"):
                break
            j += 1
        blocks.append((info, i + 1, j, j < len(lines)))
        i = j + 1
    return blocks


def parse_python_block(text: str) -> ToolCall | CallError | None:
    """The ``python_block`` convention: a closed ```` ```python ```` block that ends the turn (nothing but
    whitespace after its closing fence) is a ``python`` call with the block as its code. Blocks are read
    by CommonMark's rules (:func:`fenced_blocks`), so backticks inside the code are code."""
    body = text.rstrip()
    blocks = fenced_blocks(body)
    if not blocks:
        return None
    info, first, end, closed = blocks[-1]
    if not closed or end != len(body.split("\n")) - 1 or info not in ("python", "py"):
        return None  # no block closing the turn, or a block of another language: no call
    code = "\n".join(body.split("\n")[first:end])
    if not code.strip():
        return CallError("bad_arguments", "the python block is empty")
    return ToolCall("python", {"code": code})


def find_call(text: str, offered: Sequence[str], call_format: CallFormat) -> ToolCall | CallError | None:
    """The call at the end of a model turn in the episode's convention (``None``: no call)."""
    return parse_call(text, offered) if call_format == "hermes" else parse_python_block(text)


def call_stop(call_format: CallFormat) -> str:
    """The stop string that ends a model turn at the end of a call."""
    return CALL_END if call_format == "hermes" else PYTHON_BLOCK_STOP


def response_wrapper(*, call_format: CallFormat, template_tools: bool) -> tuple[str, str] | None:
    """The text around a tool's answer in the ``tool`` message: none for a template that renders tools
    (it wraps the message itself), else the way the convention's prompt says the answer comes back."""
    if call_format == "python_block":
        return "```output\n", "\n```"
    return None if template_tools else ("<tool_response>\n", "\n</tool_response>")


def response_content(text: str, *, call_format: CallFormat, template_tools: bool) -> str:
    """A tool's answer as the ``tool`` message's content (:func:`response_wrapper` around it)."""
    wrapper = response_wrapper(call_format=call_format, template_tools=template_tools)
    return text if wrapper is None else f"{wrapper[0]}{text}{wrapper[1]}"


def error_text(error: CallError) -> str:
    """The structured tool message answering a malformed call."""
    return json.dumps({"error": {"type": error.kind, "message": error.message}}, ensure_ascii=False)


def python_block_text(code: str) -> str:
    """A ``python_block`` call as the model writes it: the block, ending with the stop string that ends
    the turn (``PYTHON_BLOCK_STOP``); :func:`parse_python_block` reads ``code`` back from it."""
    return f"```python\n{code}{PYTHON_BLOCK_STOP}"
