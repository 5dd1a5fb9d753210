"""Tool episodes against any OpenAI-compatible endpoint (``execrl serve``, vLLM, a hosted API): the
training episode's loop with the model behind HTTP, for evaluating a served model on the tool suite.

One episode: the task's prompt and its tools' declarations (OpenAI ``tools``) go to
``/v1/chat/completions``; each ``tool_calls`` entry of the answer runs with execrl's tools (``python`` in
the episode's sandbox session, forked from the task's ``SessionSpec`` template as in training;
``run_tests`` on the visible tests) and comes back as a ``tool`` message; ... until an answer calls no
tool, the call cap, or the token budget; then the final answer is judged on the hidden tests by the
training episode's judge (:func:`execrl.tools.episode.judge_answers`), in fresh jails.

A malformed call counts as in training: a ``tool_calls`` entry whose arguments are not JSON, name a tool
the task does not offer, or do not fit its schema; or a ``<tool_call>`` left in the content (what
``execrl serve`` returns for a call it could not parse). Each is answered with the structured error as
a ``tool`` message (``tool_call_id``: the call's id, or ``call_malformed_N`` for one found in the
content), counted in ``parse_errors`` and in the call cap, and the episode goes on. A well-formed call
found in the content (an endpoint without a tool parser) is run like a ``tool_calls`` entry.

Limits, unlike training: tokens are the server's (``usage``): ``max_turn_tokens`` is each request's
``max_tokens``, and the episode's tokens are the growth of ``prompt_tokens`` plus the last
``completion_tokens``, known only when an answer arrives (an endpoint without ``usage`` is not bounded
by ``max_episode_tokens``). A tool answer is cut to ``max_tool_output_tokens`` tokens of ``tokenizer``
when one is given, else to 4 characters per token. Episodes run one after the other; several calls in
one answer run in order. An endpoint error (any :class:`~execrl.chat_http.ChatError`: an HTTP status, a
refused connection, the request's deadline, an answer that is not a chat completion, a redirect) ends
the episode with ``stop="error"`` and the error text, and the run goes on; the answer so far is judged
like any other. Each episode is judged as it ends. The HTTP client is :mod:`execrl.chat_http` (standard
library, a total deadline per request, capped reads, no redirects).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execrl.chat_http import (
    ChatAnswer,
    ChatError,
    ChatLimits,
    ChatToolCall,
    ChatUsage,
    clean_text,
    load_arguments,
    post_chat,
)
from execrl.tasks.schema import Task, prompt_for_chat
from execrl.tools.calls import CALL_END, CALL_START, CallError, ToolCall, call_text, parse_call
from execrl.tools.episode import (
    ToolConfig,
    answer_text,
    close_sessions,
    judge_answers,
    offered_tools,
    open_sessions,
    truncate_output,
)
from execrl.tools.registry import ToolContext, get_tool

if TYPE_CHECKING:
    from execrl.rewards.batch import SyncRunner

__all__ = ["Endpoint", "RemoteEpisode", "run_remote_episodes", "summarize"]

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8000/v1``);
    ``timeout_s`` is each request's total deadline (:mod:`execrl.chat_http`)."""

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    timeout_s: float = 600.0

    def chat(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], max_tokens: int
    ) -> ChatAnswer:
        """One ``/chat/completions`` call; its typed answer, or ``ChatError`` (an endpoint error)."""
        body: dict[str, Any] = {
            "model": self.model, "messages": list(messages), "tools": list(tools), "tool_choice": "auto",
            "max_tokens": max_tokens, "temperature": self.temperature, "top_p": self.top_p,
        }  # fmt: skip
        if self.seed is not None:
            body["seed"] = self.seed
        limits = ChatLimits(deadline_s=self.timeout_s)
        return post_chat(self.base_url, body, api_key=self.api_key or None, limits=limits)


@dataclass
class RemoteEpisode:
    task_id: str
    messages: list[dict[str, Any]]  # the conversation in the OpenAI wire format
    turns: int = 0
    tool_calls: int = 0
    parse_errors: int = 0
    truncated_outputs: int = 0
    tool_time_s: float = 0.0
    first_prompt_tokens: int | None = None
    tokens_used: int = 0  # the server's tokens after the first prompt (module doc)
    final_text: str = ""
    stop: str = ""  # "answer", "max_tool_calls", "episode_tokens" or "error"
    error: str = ""
    reward: float = 0.0
    valid: bool = True
    passed: bool = False
    reason: str = ""
    calls: list[str] = field(default_factory=list)  # the names called, "!kind" for a malformed call


def _checked(call: ChatToolCall, offered: Sequence[str]) -> ToolCall | CallError:
    """One ``tool_calls`` entry as training parses a call: its arguments decoded under the depth bound
    (``chat_http.load_arguments``), then checked against the registered tools offered. ``<`` is escaped in
    the text handed to the parser, so a ``</tool_call>`` inside the code cannot end the call early."""
    try:
        arguments = load_arguments(call.arguments)
    except ValueError as exc:
        return CallError("bad_json", f"the arguments string is not valid JSON: {exc}")
    written = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    checked = parse_call(CALL_START + written.replace("<", "\\u003c") + CALL_END, offered)
    return checked or CallError("bad_call", "empty call")


def _calls(
    answer: ChatAnswer, offered: Sequence[str], malformed_seen: int
) -> list[tuple[str, ToolCall | CallError]]:
    """The answer's calls as (id, call or error), each checked against the registered tools offered."""
    out = [(call.id or f"call_{i}", _checked(call, offered)) for i, call in enumerate(answer.tool_calls)]
    content = answer.content or ""
    if not out and CALL_START in content:
        try:
            call = parse_call(content, offered)  # as training parses a turn (no closing tag: malformed)
        except RecursionError:  # a call nested past the parser's stack: what the model wrote, counted
            call = CallError("bad_json", "the call is nested too deeply to parse")
        if call is not None:
            out.append((f"call_malformed_{malformed_seen}", call))
    return out


def _turn_text(answer: ChatAnswer) -> str:
    """The answer as the model wrote it (its calls written back as text): the text the judge scores."""
    text = answer.content or ""
    for call in answer.tool_calls:
        try:
            arguments = load_arguments(call.arguments)
        except ValueError:  # not JSON, or nested too deep: written back as the string it is
            arguments = call.arguments
        text += call_text(call.name, arguments)
    return text


def _assistant_message(answer: ChatAnswer) -> dict[str, Any]:
    """The answer as the next request sends it back (OpenAI's wire format)."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": call.id or f"call_{i}", "type": "function",
             "function": {"name": call.name, "arguments": call.arguments_text()}}
            for i, call in enumerate(answer.tool_calls)
        ]  # fmt: skip
    return message


def _cut(text: str, tokenizer: Any, config: ToolConfig, left: int) -> tuple[str, bool]:
    if tokenizer is not None:
        cap = min(config.max_tool_output_tokens, max(left, 1))
        return truncate_output(tokenizer, text, max_tokens=cap, budget_left=left)
    chars = config.max_tool_output_tokens * CHARS_PER_TOKEN
    if len(text) <= chars:
        return text, False
    return f"{text[:chars]}\n[... {len(text) - chars} characters cut]", True


def _record_usage(e: RemoteEpisode, usage: ChatUsage | None) -> None:
    prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (None, None)
    if prompt is not None and completion is not None:
        if e.first_prompt_tokens is None:
            e.first_prompt_tokens = prompt
        e.tokens_used = prompt - e.first_prompt_tokens + completion


def _answer(e: RemoteEpisode, calls: list[tuple[str, ToolCall | CallError]], context: ToolContext,
            config: ToolConfig, tokenizer: Any) -> None:  # fmt: skip
    for call_id, call in calls:
        e.tool_calls += 1
        e.parse_errors += isinstance(call, CallError)
        e.calls.append(f"!{call.kind}" if isinstance(call, CallError) else call.name)
        started = time.perf_counter()
        text = clean_text(answer_text(call, context))  # a cell's output is text the tokenizer can take
        e.tool_time_s += time.perf_counter() - started
        text, cut = _cut(text, tokenizer, config, config.max_episode_tokens - e.tokens_used)
        e.truncated_outputs += cut
        e.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _episode(
    endpoint: Endpoint, task: Task, context: ToolContext, config: ToolConfig, tokenizer: Any
) -> RemoteEpisode:
    offered = offered_tools(task, config)
    declared = [get_tool(name).declaration() for name in offered]
    prompt = prompt_for_chat(task.prompt)
    e = RemoteEpisode(
        task.id, [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    while True:
        left = config.max_episode_tokens - e.tokens_used
        try:
            answer = endpoint.chat(e.messages, declared, max_tokens=min(config.max_turn_tokens, max(left, 1)))
        except ChatError as exc:
            e.stop, e.error = "error", str(exc)
            return e
        e.turns += 1
        _record_usage(e, answer.usage)
        e.final_text = _turn_text(answer)
        calls = _calls(answer, offered, e.parse_errors)
        if not calls:
            e.stop = "answer"
            return e
        if e.tool_calls + len(calls) > config.max_tool_calls or e.tokens_used >= config.max_episode_tokens:
            e.stop = (
                "max_tool_calls" if e.tool_calls + len(calls) > config.max_tool_calls else "episode_tokens"
            )
            return e  # the calls are not run; this answer is the final one, as in training
        e.messages.append(_assistant_message(answer))
        _answer(e, calls, context, config, tokenizer)


def run_remote_episodes(
    endpoint: Endpoint,
    tasks: Sequence[Task],
    runner: SyncRunner,
    *,
    config: ToolConfig,
    tokenizer: Any = None,
    on_episode: Callable[[RemoteEpisode], None] | None = None,
) -> list[RemoteEpisode]:
    """One episode per task against ``endpoint``, each judged on the hidden tests when it ends (module
    doc). ``on_episode`` gets every judged episode at once: a caller keeps what finished if the run
    stops (``execrl tools run`` writes them as a partial report)."""
    if config.call_format != "hermes":
        raise ValueError(
            f"tools.call_format={config.call_format!r}: an OpenAI endpoint returns tool_calls (the Hermes "
            "convention); the python_block convention is not served"
        )
    templates, sessions = open_sessions(runner, tasks, 1, config)
    episodes = []
    try:
        for task, session in zip(tasks, sessions, strict=True):
            context = ToolContext(task, session, runner, config.reward)
            e = _episode(endpoint, task, context, config, tokenizer)
            [v] = judge_answers([task], [e.final_text], [e.parse_errors], runner=runner, config=config)
            e.reward, e.valid, e.passed, e.reason = v.reward, v.valid, v.passed, v.reason
            episodes.append(e)
            if on_episode is not None:
                on_episode(e)
    finally:
        close_sessions(templates, sessions)
    return episodes


def summarize(episodes: Sequence[RemoteEpisode]) -> dict[str, float]:
    """Pass rate, mean reward, calls per episode, parse errors (in all, and per call: absent without a
    call), endpoint errors, and the share of each way an episode ended."""
    n = max(len(episodes), 1)
    calls = sum(e.tool_calls for e in episodes)
    out = {
        "episodes": float(len(episodes)),
        "pass_rate": sum(e.passed for e in episodes) / n,
        "reward_mean": sum(e.reward for e in episodes) / n,
        "calls_per_episode": calls / n,
        "parse_errors": float(sum(e.parse_errors for e in episodes)),
        "endpoint_errors": float(sum(e.stop == "error" for e in episodes)),
        "truncated_outputs": float(sum(e.truncated_outputs for e in episodes)),
    }
    if calls:
        out["parse_error_rate"] = out["parse_errors"] / calls
    for stop in ("answer", "max_tool_calls", "episode_tokens", "error"):
        out[f"stop_{stop}"] = sum(e.stop == stop for e in episodes) / n
    return out
