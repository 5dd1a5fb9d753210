"""``tools``: the tool-calling environment (ReTool, arXiv 2504.11536; ToRL, arXiv 2503.23383): the model
calls tools mid-answer, each episode in its own forked sandbox session, judged by a judge it cannot touch.

An episode is one context: the task prompt (tools declared: ``calls.py``), a model turn that ends at the end
of a call (a stop string), the tool's answer as a ``tool`` message, the next model turn, ... until a turn
calls no tool (its text is the final answer), the cap of ``max_tool_calls`` is reached, or the episode's
token budget is spent (the loop's ``max_episode_tokens``: model turns, tool answers, the template's turn
tokens and cut markers, never passed). A tool answer longer than ``max_tool_output_tokens`` keeps its head
and ends with a marker saying how much was cut and how much budget is left (verl cuts at 256 characters
without saying so). Tool output is data: it is tokenised so that special-token text in it never becomes a
control token (``execrl.episodes.render``).

A malformed call (bad JSON, no name, unknown tool, arguments that do not fit the schema, JSON nested past
``calls.MAX_CALL_DEPTH``) is answered with a structured error as the tool message, counted in
``parse_errors`` and in the call cap, and the episode goes on. ``parse_error_penalty`` per error comes off
the reward.

Sessions: each task's ``SessionSpec`` (files, trusted setup cells, runtime) opens one ``SessionTemplate``;
its samples fork from it copy-on-write, each fork as isolated from its siblings as two sandboxes. A task
without a spec gets a bare template.

**The judge**: the final answer is scored by the reward path on the **hidden** tests, in fresh jails that
share nothing writable with any session, so nothing a ``python`` cell writes reaches the verdict
(``tests/security/test_tool_judge_hazards.py``).

Both model backends run it: the local engine (calls parsed from the turn's text in ``call_format``) and an
OpenAI-compatible endpoint (``execrl tools run``: the answer's ``tool_calls``, each answered with a ``tool``
message carrying its ``tool_call_id``; a ``<tool_call>`` left in the content is parsed as training parses a
turn). Limits: the calls of one answer run one after the other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from execrl.episodes.environment import Final
from execrl.episodes.single import first_messages, verdict_of
from execrl.episodes.types import Episode, Prompt, RawCall, Response, TurnView, Verdict
from execrl.rewards import RewardConfig, score_batch
from execrl.tasks.schema import SessionSpec, Task
from execrl.tools.calls import (
    CALL_END,
    CALL_START,
    CallError,
    CallFormat,
    ToolCall,
    call_stop,
    error_text,
    find_call,
    parse_call,
    prompt_messages,
    response_wrapper,
)
from execrl.tools.registry import ToolContext, get_tool

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.episodes.backend import Backend
    from execrl.rewards.batch import SyncRunner
    from execrl.sandbox.sessions.api import Session

__all__ = [
    "ToolConfig",
    "ToolEnvironment",
    "answer_text",
    "judge_answers",
    "offered_tools",
    "open_session_template",
]


@dataclass(frozen=True)
class ToolConfig:
    max_tool_calls: int = 4  # calls per episode, malformed ones included
    max_turn_tokens: int = 256  # sampled tokens per model turn
    max_episode_tokens: int = 1024  # tokens after the prompt: model turns and tool answers
    max_tool_output_tokens: int = 256  # tokens of one tool answer before the cut marker
    parse_error_penalty: float = 0.0  # subtracted from the reward per malformed call
    default_tools: tuple[str, ...] = ("python",)  # offered by tasks without a SessionSpec
    cell_timeout_s: float = 10.0  # wall clock of one python cell
    session_memory_mb: int = 512  # cgroup memory of one episode's session
    reward: RewardConfig = field(default_factory=RewardConfig)
    reuse_kv_max_bytes: int = 2 << 30
    call_format: CallFormat = "hermes"  # "python_block": ```python blocks call the python tool (calls.py)

    def __post_init__(self) -> None:
        positive = ("max_tool_calls", "max_turn_tokens", "max_episode_tokens", "max_tool_output_tokens")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"tools.{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.parse_error_penalty <= 1:
            raise ValueError(f"tools.parse_error_penalty must lie in [0, 1], got {self.parse_error_penalty}")
        for name in self.default_tools:
            get_tool(name)  # an unknown name lists the registered tools
        if self.call_format not in ("hermes", "python_block"):
            raise ValueError(
                f"tools.call_format must be 'hermes' or 'python_block', got {self.call_format!r}"
            )


def offered_tools(task: Task, config: ToolConfig) -> tuple[str, ...]:
    return task.session.tools if task.session is not None else config.default_tools


def answer_text(call: ToolCall | CallError, context: ToolContext) -> str:
    """What answers a call: the tool's output, or the structured error of a malformed call."""
    if isinstance(call, CallError):
        return error_text(call)
    return get_tool(call.name).run(call.arguments, context).text


def judge_answers(
    tasks: Sequence[Task], answers: Sequence[str], parse_errors: Sequence[float], *, runner: SyncRunner,
    config: ToolConfig,
) -> list[Verdict]:  # fmt: skip
    """Final answers (one per task, in order) on the hidden tests, in fresh jails (nothing of the sessions
    reaches them); the reward minus ``parse_error_penalty`` per malformed call."""
    hidden = score_batch(
        list(tasks), list(answers), sandbox=runner, config=replace(config.reward, use_hidden_tests=True)
    )
    return [
        verdict_of(score, penalty=config.parse_error_penalty * errors)
        for score, errors in zip(hidden, parse_errors, strict=True)
    ]


def open_session_template(runner: SyncRunner, task: Task, config: ToolConfig) -> Any:
    """The task's session template (its files and setup cells) under an episode's limits; its forks
    inherit them. ``execrl tasks transcripts`` runs a reference's cells in a fork of the same template."""
    from execrl.sandbox.sessions.types import SessionLimits

    open_template = getattr(runner, "open_template", None)
    if open_template is None:
        raise TypeError("tool episodes need a sandbox with sessions (open_template)")
    # An episode's CPU, every process of its session between cells included, is what its calls may
    # use (issue 35, class 6), not the session's 600 s default; the forks inherit the template's limits
    # (in process and on sandbox.urls replicas alike).
    limits = SessionLimits(
        cell_timeout_s=config.cell_timeout_s, cell_cpu_time_s=config.cell_timeout_s,
        memory_mb=config.session_memory_mb, max_cells=config.max_tool_calls + 64,
        cpu_time_s=config.cell_timeout_s * max(1, config.max_tool_calls),
    )  # fmt: skip
    spec = task.session or SessionSpec()
    return open_template(setup=list(spec.setup), runtime=spec.runtime, limits=limits, files=dict(spec.files))


@dataclass(frozen=True)
class ToolEnvironment:
    """Tool-calling episodes on ``runner``'s sessions (module docstring)."""

    runner: SyncRunner
    config: ToolConfig
    name: str = "tools"

    @classmethod
    def from_config(cls, config: TrainConfig, *, runner: SyncRunner, reward: RewardConfig) -> ToolEnvironment:
        """Tool RL's environment: ``[tools]`` by name."""
        from execrl.config import build

        return cls(runner, build(ToolConfig, config.tools, reward=reward, defaults=("reuse_kv_max_bytes",)))

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Backend) -> _Live:
        live = _Live(self, list(tasks), samples_per_task, backend)
        live.open()
        return live

    def metrics(self, episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
        from execrl.tools.metrics import tool_metrics

        return tool_metrics(episodes, step_s=step_s)


@dataclass
class _Live:
    env: ToolEnvironment
    tasks: list[Task]
    samples: int
    backend: Backend
    templates: list[Any] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    template_tools: list[bool] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # episode -> names called ("!kind": malformed)
    memory_mb: dict[int, float] = field(default_factory=dict)  # episode -> its session's peak memory

    @property
    def max_turns(self) -> int:
        return self.env.config.max_tool_calls + 1

    def open(self) -> None:
        """One template per task (its files and setup cells), forked into one session per episode."""
        try:
            for task in self.tasks:
                template = open_session_template(self.env.runner, task, self.env.config)
                self.templates.append(template)
                self.sessions.extend(template.fork(self.samples))
        except BaseException:
            self.close()
            raise

    def prompt(self, task_index: int) -> Prompt:
        config, task = self.env.config, self.tasks[task_index]
        offered = offered_tools(task, config)
        if config.call_format == "python_block" and "python" not in offered:
            raise ValueError(
                f"task {task.id!r} offers the tools {list(offered)}; tools.call_format='python_block' can "
                "call only the python tool (use call_format='hermes')"
            )
        declarations = [get_tool(name).declaration() for name in offered]
        renders = config.call_format == "hermes" and self.backend.renders_tools(declarations)
        self.template_tools.append(renders)
        messages = prompt_messages(
            first_messages(task), declarations, template_tools=renders, call_format=config.call_format
        )
        tools = tuple(declarations) if renders else None
        return Prompt(tuple(messages), tools, (call_stop(config.call_format),))

    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        return [self._respond(view) for view in turns]

    def _calls(self, view: TurnView) -> list[tuple[str, ToolCall | CallError]]:
        offered = offered_tools(self.tasks[view.task_index], self.env.config)
        if view.tool_calls:
            return [(c.id or f"call_{k}", _raw_call(c, offered)) for k, c in enumerate(view.tool_calls)]
        found = find_call(view.text, offered, self.env.config.call_format)
        malformed = sum(name.startswith("!") for name in self.calls.get(view.episode, ()))
        return [] if found is None else [(f"call_malformed_{malformed}", found)]

    def _respond(self, view: TurnView) -> Response:
        config = self.env.config
        calls = self._calls(view)
        made = self.calls.setdefault(view.episode, [])
        if not calls:
            return Response(done=True, stop="answer")
        if len(made) + len(calls) > config.max_tool_calls:
            return Response(done=True, stop="max_tool_calls")  # not run: this turn is the final answer
        if view.tokens_left is not None and view.tokens_left <= 0:
            return Response(done=True, stop="episode_tokens")
        context = ToolContext(
            self.tasks[view.task_index], self.sessions[view.episode], self.env.runner, config.reward
        )
        messages, started = [], time.perf_counter()
        for call_id, call in calls:
            made.append(f"!{call.kind}" if isinstance(call, CallError) else call.name)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": answer_text(call, context)})
        renders = self.template_tools[view.task_index]
        wrapper = response_wrapper(call_format=config.call_format, template_tools=renders)
        info = {
            "tool_calls": float(len(calls)), "tool_time_s": time.perf_counter() - started,
            "parse_errors": float(sum(isinstance(c, CallError) for _, c in calls)),
        }  # fmt: skip
        caps = (config.max_tool_output_tokens,) * len(messages)
        return Response(done=False, messages=tuple(messages), content_token_caps=caps,
                        content_wrappers=(wrapper,) * len(messages), info=info)  # fmt: skip

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        tasks = [self.tasks[f.task_index] for f in finals]
        errors = [f.info.get("parse_errors", 0.0) for f in finals]
        return judge_answers(
            tasks, [f.text for f in finals], errors, runner=self.env.runner, config=self.env.config
        )

    def close(self) -> None:
        """Close the forks (their peak memory kept for ``report``), then their templates."""
        for e, session in enumerate(self.sessions):
            try:
                self.memory_mb[e] = float(session.stats().peak_memory_mb)
            finally:
                session.close()
        for template in self.templates:
            template.close()
        self.sessions, self.templates = [], []

    def report(self) -> dict[int, dict[str, Any]]:
        episodes = len(self.tasks) * self.samples
        return {
            e: {"session_memory_mb": self.memory_mb.get(e, 0.0), "calls": tuple(self.calls.get(e, ()))}
            for e in range(episodes)
        }


def _raw_call(call: RawCall, offered: Sequence[str]) -> ToolCall | CallError:
    """An endpoint's ``tool_calls`` entry checked as a written call is (its arguments may be a string)."""
    try:
        written = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return CallError("bad_call", f"the call cannot be read: {str(exc)[:200]}")
    return parse_call(f"{CALL_START}{written}{CALL_END}", offered) or CallError("bad_call", "empty call")
