"""A chat conversation as token ids and a loss mask, built by the episodes' own renderer (issue 39).

``execrl sft`` trains on chat rows (``messages``, optionally ``tools``); RL then samples episodes from the
same model. If the two rendered a conversation differently (another template path, re-tokenised turns, the
end-of-turn token in or out of the loss, tool output parsed for special tokens), SFT would teach a format
the episodes never show. So a row is played through ``execrl.episodes.render``, the functions the rollout
loop builds every episode's context with, in the order the loop calls them, with what ``tools/env.py``
gives them (``tests/unit/tools/test_render_matches_episode.py`` runs a tool episode through
``run_episodes`` and checks the same ids and the same mask):

* the prompt: every message before the first assistant turn, tools declared as ``ToolEnvironment.prompt``
  declares them (``calls.prompt_messages``; the template's ``tools`` when it renders them in the Hermes
  format), rendered by ``render.prompt_context``;
* an assistant turn: the ids the model would have sampled, i.e. its text (content, then its call written
  by ``calls.call_text`` or ``calls.python_block_text``) tokenised on its own; a turn that calls a tool
  ends at the call's stop string with no end-of-turn token, a final turn ends with the tokenizer's EOS
  (``<|im_end|>`` for SmolLM2), which is in the loss as an episode's sampled EOS is
  (``render.append_turn``);
* what the environment appends between turns (a ``tool`` answer in ``calls.response_wrapper``, a user
  message) is ``render.append_messages``: the template's text after the conversation so far, contents
  tokenised as data, masked; ``tool_output_tokens`` cuts a tool answer as ``tools.max_tool_output_tokens``
  cuts it in an episode (None: whole).

Only assistant turns carry loss. What an episode cannot produce is refused with a ``ConversationError``
saying why (the caller adds the file and line): unknown roles, no assistant turn, more than one call in a
turn (episodes run one call per turn), a call that does not parse against the declared tools, a call with
no tool answer after it, a tool answer that answers no call, two assistant turns in a row, messages after
the last assistant turn (nothing would be trained on them).

Limits: the end-of-turn token is ``tokenizer.eos_token_id`` (what ``prompts.turn_content`` strips); a
template whose end of turn differs from its EOS token is not handled. A model's real samples may split a
text into other tokens than the tokenizer does; the SFT target is the tokenizer's split.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateError

from execrl.episodes.render import (
    TemplateDrift,
    append_messages,
    append_turn,
    prompt_context,
    renders_tools,
)
from execrl.episodes.types import Completion, Context, Prompt
from execrl.tools.calls import (
    CALL_START,
    CallError,
    CallFormat,
    call_stop,
    call_text,
    find_call,
    parse_python_block,
    prompt_messages,
    python_block_text,
    response_wrapper,
)

__all__ = ["ROLES", "ConversationError", "RenderedConversation", "render_conversation"]

ROLES = ("system", "user", "assistant", "tool")
LOCAL_CALL_ID = "call_malformed_0"  # the id ``ToolEnvironment`` gives a call read from a local turn's text


class ConversationError(ValueError):
    """A conversation no episode could produce; the message says why (the caller adds file and line)."""


@dataclass(frozen=True)
class RenderedConversation:
    token_ids: tuple[int, ...]  # the whole context: prompt, model turns, what the environment appended
    loss_mask: tuple[bool, ...]  # True exactly on the assistant turns' tokens (their EOS included)
    prompt_tokens: int  # tokens before the first assistant turn
    assistant_turns: int
    tool_calls: int

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask)


@dataclass(frozen=True)
class _Turn:
    role: str
    text: str  # the assistant's whole turn text (content, then its call); a tool answer or message as given
    calls: bool  # an assistant turn with ``tool_calls``


def render_conversation(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    call_format: CallFormat = "hermes",
    tool_output_tokens: int | None = None,
) -> RenderedConversation:
    """``messages`` (OpenAI chat format: ``role``, ``content``, an assistant's ``tool_calls``) rendered as
    a training episode renders them, with ``tools`` (OpenAI declarations) declared in the episode's way and
    calls written in ``call_format``. Pure: depends only on its arguments. Raises ``ConversationError``."""
    turns = [_turn(m, i, call_format) for i, m in enumerate(_message_list(messages))]
    declarations = _declarations(tools)
    first = next((i for i, t in enumerate(turns) if t.role == "assistant"), None)
    if first is None:
        raise ConversationError("no assistant turn (nothing to train on)")
    if first == 0:
        raise ConversationError("the first message is an assistant turn (no prompt before it)")
    if any(t.role == "tool" for t in turns[:first]):
        raise ConversationError("a tool message before the first assistant turn answers no call")
    if tokenizer.eos_token_id is None:
        raise ConversationError("the tokenizer has no EOS token to end a final assistant turn with")
    renders = bool(declarations) and call_format == "hermes" and renders_tools(tokenizer, declarations)
    prompt = [{"role": t.role, "content": t.text} for t in turns[:first]]
    if declarations:
        prompt = prompt_messages(prompt, declarations, template_tools=renders, call_format=call_format)
    shown = tuple(declarations) if renders else None
    try:
        context = prompt_context(tokenizer, Prompt(tuple(prompt), shown, (call_stop(call_format),)))
    except TemplateError as exc:  # a template's own check (e.g. "roles must alternate"): the row's fault
        raise ConversationError(f"the chat template refused the prompt: {exc}") from None
    player = _Player(tokenizer, declarations, call_format, renders, tool_output_tokens)
    calls = 0
    for start, end in _segments(turns, first):
        called = end > start + 1 and turns[start + 1].role == "tool"  # the environment ran this turn's call
        context = player.turn(context, turns[start], followed_by_tool=called)
        calls += called
        appended = [player.environment_message(t, k=k) for k, t in enumerate(turns[start + 1 : end])]
        if appended:
            context = player.append(context, appended)
    assistant_turns = sum(t.role == "assistant" for t in turns)
    return RenderedConversation(
        context.token_ids, context.loss_mask, context.prompt_tokens, assistant_turns, calls
    )


@dataclass(frozen=True)
class _Player:
    """Plays a row's turns onto a ``Context`` as the rollout loop and ``ToolEnvironment`` would."""

    tokenizer: Any
    declarations: list[dict[str, Any]]
    call_format: CallFormat
    template_tools: bool
    tool_output_tokens: int | None

    def turn(self, context: Context, turn: _Turn, *, followed_by_tool: bool) -> Context:
        """The ids the model samples for this turn: up to its call's stop string, or its text and EOS."""
        if not turn.text:
            raise ConversationError("an empty assistant turn (no content and no tool call)")
        ids = _tokens(self.tokenizer, turn.text)
        if followed_by_tool:
            self._check_call(turn.text)
        elif turn.calls or (self.declarations and _ends_in_call(turn.text, self.call_format)):
            raise ConversationError("an assistant turn ends in a tool call but no tool message answers it")
        else:
            ids.append(int(self.tokenizer.eos_token_id))
        zeros = (0.0,) * len(ids)
        return append_turn(self.tokenizer, context, Completion(tuple(ids), zeros, zeros, turn.text, "stop"))

    def _check_call(self, text: str) -> None:
        if not self.declarations:
            raise ConversationError("a tool message follows an assistant turn, but the row declares no tools")
        offered = [d["function"]["name"] for d in self.declarations]
        call = find_call(text, offered, self.call_format)
        stop = call_stop(self.call_format)
        if call is None or isinstance(call, CallError) or not text.endswith(stop):
            detail = call.message if isinstance(call, CallError) else f"no call ending with {stop!r}"
            raise ConversationError(f"malformed tool_calls: {detail} (call_format {self.call_format})")

    def environment_message(self, turn: _Turn, *, k: int) -> dict[str, str]:
        """A message between two model turns, as ``ToolEnvironment`` answers a call."""
        if turn.role == "assistant":
            raise ConversationError("two assistant turns in a row (an episode has a message between them)")
        if turn.role != "tool":
            return {"role": turn.role, "content": turn.text}
        if k != 0:
            raise ConversationError("a tool message that answers no call (one answer per call)")
        return {"role": "tool", "tool_call_id": LOCAL_CALL_ID, "content": turn.text}

    def append(self, context: Context, appended: list[dict[str, str]]) -> Context:
        wrapper = response_wrapper(call_format=self.call_format, template_tools=self.template_tools)
        wrappers = [wrapper if m["role"] == "tool" else None for m in appended]
        caps = [self.tool_output_tokens if m["role"] == "tool" else None for m in appended]
        try:
            done = append_messages(self.tokenizer, context, appended, content_caps=caps, wrappers=wrappers)
        except (TemplateDrift, TemplateError) as exc:  # a template that rewrites earlier turns, or refuses
            raise ConversationError(str(exc)) from None
        assert done is not None  # no budget: never refused
        return done[0]


def _segments(turns: list[_Turn], first: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each assistant turn and the messages after it, up to the next assistant turn."""
    starts = [i for i in range(first, len(turns)) if turns[i].role == "assistant"]
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(turns)
        if end == start + 1 and n + 1 < len(starts):
            raise ConversationError("two assistant turns in a row (an episode has a message between them)")
        out.append((start, end))
    last_start, last_end = out[-1]
    if last_end > last_start + 1:
        role = turns[last_start + 1].role
        raise ConversationError(f"a {role} message after the last assistant turn (nothing to train on it)")
    return out


def _message_list(messages: Any) -> list[Mapping[str, Any]]:
    if not isinstance(messages, list | tuple) or not messages:
        raise ConversationError("'messages' must be a non-empty list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ConversationError(f"message {i} is a {type(m).__name__}, not an object")
    return list(messages)


def _turn(message: Mapping[str, Any], index: int, call_format: CallFormat) -> _Turn:
    role = message.get("role")
    if role not in ROLES:
        raise ConversationError(f"message {index}: unknown role {role!r} (roles: {', '.join(ROLES)})")
    content = message.get("content")
    calls = message.get("tool_calls")
    if content is None and not (role == "assistant" and calls):
        raise ConversationError(f"message {index}: a {role} message needs a string 'content'")
    if content is not None and not isinstance(content, str):
        raise ConversationError(f"message {index}: 'content' must be a string, got {type(content).__name__}")
    if calls is None:
        return _Turn(role, content or "", False)
    if role != "assistant":
        raise ConversationError(f"message {index}: only assistant messages carry 'tool_calls'")
    if not isinstance(calls, list) or len(calls) != 1:
        raise ConversationError(
            f"message {index}: malformed tool_calls: one call per turn (a list of one), as episodes run them"
        )
    return _Turn(role, (content or "") + _call_text(calls[0], index, call_format), True)


def _call_text(call: Any, index: int, call_format: CallFormat) -> str:
    """A ``tool_calls`` entry written as the model writes it in ``call_format``."""
    function = call.get("function") if isinstance(call, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ConversationError(f"message {index}: malformed tool_calls: no function name")
    arguments = function.get("arguments", {}) if isinstance(function, Mapping) else {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ConversationError(f"message {index}: malformed tool_calls: arguments: {exc}") from None
    if not isinstance(arguments, dict):
        raise ConversationError(f"message {index}: malformed tool_calls: arguments must be a JSON object")
    if call_format == "hermes":
        return call_text(name, arguments)
    code = arguments.get("code")
    if name != "python" or set(arguments) != {"code"} or not isinstance(code, str) or not code.strip():
        raise ConversationError(
            f"message {index}: malformed tool_calls: call_format python_block calls only python(code=...)"
        )
    return python_block_text(code)


def _declarations(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list | tuple):
        raise ConversationError("'tools' must be a list of OpenAI tool declarations")
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConversationError(
                f"tools[{i}] is not a declaration {{'type': 'function', 'function': {{'name': ...}}}}"
            )
        out.append(dict(tool))
    return out


def _ends_in_call(text: str, call_format: CallFormat) -> bool:
    """Whether an episode would take this turn as a call (and run it instead of ending)."""
    if call_format == "python_block":
        return parse_python_block(text) is not None
    return CALL_START in text


def _tokens(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
