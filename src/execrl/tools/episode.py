"""Tool-calling episodes for RL: the model calls tools mid-answer, in one context, scored by a judge
the episode cannot touch.

An episode is one context: the task prompt (with the tools declared, ``calls.py``), a model turn that
ends at ``</tool_call>`` (a stop string), the tool's answer as a ``tool`` message, the next model turn,
... until a turn calls no tool (its text is the final answer), the cap of ``max_tool_calls`` is reached,
or the episode's token budget is spent. Limits, each counted in tokens of the policy's tokenizer:
``max_turn_tokens`` per model turn, ``max_episode_tokens`` for everything after the prompt (model turns
and tool answers), ``max_tool_output_tokens`` per tool answer: a longer one keeps its head and ends with
a marker saying how many tokens were cut and how much of the budget is left (verl cuts at 256
*characters* without saying so; NeMo-RL cuts to the budget by tokens).

A malformed call (bad JSON, no name, unknown tool, arguments that do not fit the schema) is answered
with a structured error as the tool message, counted in ``parse_errors`` and in the tool-call cap, and
the episode goes on: nothing is dropped. ``parse_error_penalty`` per error is subtracted from the reward.

Loss and ids: only the model's sampled tokens are trained on (``model_mask``; the prompt, the template's
turn markers and every tool answer are 0), and the model's turns stay the exact sampled ids: what is
appended after a turn is ``rollout.prompts.extension_ids`` (the template's text after "the conversation
so far", which raises for a template that rewrites earlier turns), as in ``refine/multiturn.py``. KV of
earlier turns is reused inside one call (``reusing_prefixes``).

Sessions: each task's ``SessionSpec`` (files, trusted setup cells, runtime) opens one
``SessionTemplate``; its ``samples_per_prompt`` episodes fork from it copy-on-write, each fork as
isolated from its siblings as two sandboxes (a sample cannot lower a sibling's reward). A task without a
spec gets a bare template.

**The judge**: the final answer is scored by the reward path (``score_batch`` on the **hidden** tests),
whose programs run in fresh jails of the sandbox that share nothing writable with any session: what a
``python`` cell writes (files, globals, environment) lives in the episode's session and dies with it,
so it cannot reach the verdict (``tests/security/test_tool_judge_hazards.py``). Limits: the calls of
one turn run one after the other (no parallel tool calls), one call per turn.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from execrl.rewards import RewardConfig, Score, score_batch
from execrl.rollout.prompts import extension_ids, render_chat, turn_content
from execrl.tasks.schema import SessionSpec, Task, prompt_for_chat
from execrl.tools.calls import (
    CallError,
    CallFormat,
    ToolCall,
    call_stop,
    error_text,
    find_call,
    prompt_messages,
    response_content,
    template_renders_tools,
)
from execrl.tools.registry import ToolContext, get_tool

if TYPE_CHECKING:
    from execrl.rewards.batch import SyncRunner
    from execrl.rollout.engine import Engine
    from execrl.rollout.types import SamplingParams
    from execrl.sandbox.sessions.api import Session

__all__ = [
    "ToolConfig",
    "ToolEpisode",
    "Verdict",
    "answer_text",
    "close_sessions",
    "judge_answers",
    "offered_tools",
    "open_sessions",
    "rollout_tool_episodes",
    "truncate_output",
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


@dataclass
class ToolEpisode:
    task_index: int
    messages: list[dict[str, str]]
    token_ids: list[int]  # the whole context: prompt, model turns, tool answers
    model_mask: list[bool]  # True on the model's sampled tokens
    prompt_tokens: int
    offered: tuple[str, ...]
    template_tools: bool
    turns: int = 0
    tool_calls: int = 0
    parse_errors: int = 0
    truncated_outputs: int = 0
    tool_time_s: float = 0.0
    session_memory_mb: float = 0.0  # peak memory of the episode's session
    final_text: str = ""
    done: bool = False
    stop: str = ""  # "answer", "max_tool_calls" or "episode_tokens"
    reward: float = 0.0
    valid: bool = True
    passed: bool = False
    reason: str = ""
    score: Score | None = None  # the judge's hidden-test score of the final answer (the audit reads it)

    @property
    def tokens_used(self) -> int:
        return len(self.token_ids) - self.prompt_tokens


def truncate_output(tokenizer: Any, text: str, *, max_tokens: int, budget_left: int) -> tuple[str, bool]:
    """``text`` cut to its first ``max_tokens`` tokens, with a marker saying how much was cut and how many
    tokens of the episode's budget are left after the kept part; ``(text, whether it was cut)``."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= max_tokens:
        return text, False
    kept = tokenizer.decode(ids[:max_tokens], skip_special_tokens=True)
    left = max(0, budget_left - max_tokens)
    return f"{kept}\n[... {len(ids) - max_tokens} tokens cut; {left} tokens of the episode budget left]", True


def offered_tools(task: Task, config: ToolConfig) -> tuple[str, ...]:
    return task.session.tools if task.session is not None else config.default_tools


def _start(tokenizer: Any, task: Task, index: int, config: ToolConfig) -> ToolEpisode:
    offered = offered_tools(task, config)
    if config.call_format == "python_block" and "python" not in offered:
        raise ValueError(
            f"task {task.id!r} offers the tools {list(offered)}; tools.call_format='python_block' can call "
            "only the python tool (use call_format='hermes')"
        )
    declarations = [get_tool(name).declaration() for name in offered]
    template_tools = config.call_format == "hermes" and template_renders_tools(tokenizer, declarations)
    prompt = prompt_for_chat(task.prompt)
    base = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    messages = prompt_messages(
        base, declarations, template_tools=template_tools, call_format=config.call_format
    )
    text = render_chat(
        tokenizer, messages, generation_prompt=True, tools=declarations if template_tools else None
    )
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ToolEpisode(index, messages, ids, [False] * len(ids), len(ids), offered, template_tools)


def _declarations(e: ToolEpisode) -> list[dict[str, Any]] | None:
    return [get_tool(name).declaration() for name in e.offered] if e.template_tools else None


def open_sessions(
    runner: SyncRunner, tasks: Sequence[Task], samples: int, config: ToolConfig
) -> tuple[list[Any], list[Session]]:
    """One template per task (its files and setup cells), forked into one session per episode."""
    from execrl.sandbox.sessions.types import SessionLimits

    open_template = getattr(runner, "open_template", None)
    if open_template is None:
        raise TypeError("tool episodes need an in-process Sandbox (sessions); sandbox.urls is not supported")
    limits = SessionLimits(
        cell_timeout_s=config.cell_timeout_s, cell_cpu_time_s=config.cell_timeout_s,
        memory_mb=config.session_memory_mb, max_cells=config.max_tool_calls + 64,
    )  # fmt: skip
    # An episode's CPU, every process of its session between cells included, is what its calls may use
    # (issue 35, class 6): not the session's 600 s default.
    fork_limits = replace(limits, cpu_time_s=config.cell_timeout_s * config.max_tool_calls)
    templates, sessions = [], []
    for task in tasks:
        spec = task.session or SessionSpec()
        template = open_template(
            setup=list(spec.setup), runtime=spec.runtime, limits=limits, files=dict(spec.files)
        )
        templates.append(template)
        sessions.extend(template.fork(samples, limits=fork_limits))
    return templates, sessions


def close_sessions(templates: Sequence[Any], sessions: Sequence[Session]) -> None:
    """Close what ``open_sessions`` opened: the forks first, then their templates."""
    for session in sessions:
        session.close()
    for template in templates:
        template.close()


def _generate(engine: Engine, tokenizer: Any, episodes: list[ToolEpisode], params: SamplingParams,
              samples: int, config: ToolConfig) -> list[ToolEpisode]:  # fmt: skip
    """One model turn for each episode (``samples`` copies of each, rows prompt-major), cut to what is
    left of each episode's budget."""
    params = replace(params, samples_per_prompt=samples, max_new_tokens=config.max_turn_tokens,
                     stop_strings=(*params.stop_strings, call_stop(config.call_format)))  # fmt: skip
    batch = engine.generate([e.token_ids for e in episodes], params)
    out = []
    for row in range(batch.num_rows):
        base = episodes[row // samples]
        ids = batch.completion_token_ids(row)
        left = config.max_episode_tokens - base.tokens_used
        text = batch.texts[row]
        if len(ids) > left:  # a prefix of a sample is a sample under a shorter budget
            ids, text = ids[:left], tokenizer.decode(ids[:left], skip_special_tokens=True)
        message = {"role": "assistant", "content": turn_content(tokenizer, ids)}
        out.append(replace(
            base, messages=[*base.messages, message], token_ids=[*base.token_ids, *ids],
            model_mask=[*base.model_mask, *([True] * len(ids))], turns=base.turns + 1, final_text=text,
        ))  # fmt: skip
    return out


def answer_text(call: ToolCall | CallError, context: ToolContext) -> str:
    """What answers a call: the tool's output, or the structured error of a malformed call."""
    if isinstance(call, CallError):
        return error_text(call)
    return get_tool(call.name).run(call.arguments, context).text


def _answer_call(
    tokenizer: Any, e: ToolEpisode, task: Task, context: ToolContext, config: ToolConfig
) -> None:
    """Run the call at the end of the episode's last turn (or answer its error) and append the answer."""
    call = find_call(e.final_text, e.offered, config.call_format)
    if call is None:
        e.done, e.stop = True, "answer"
        return
    if e.tool_calls >= config.max_tool_calls or e.tokens_used >= config.max_episode_tokens:
        e.done = True  # the call is not run; this turn is the final answer
        e.stop = "max_tool_calls" if e.tool_calls >= config.max_tool_calls else "episode_tokens"
        return
    e.tool_calls += 1
    e.parse_errors += isinstance(call, CallError)
    started = time.perf_counter()
    text = answer_text(call, context)
    e.tool_time_s += time.perf_counter() - started
    left = config.max_episode_tokens - e.tokens_used
    text, cut = truncate_output(
        tokenizer, text, max_tokens=min(config.max_tool_output_tokens, max(left, 1)), budget_left=left
    )
    e.truncated_outputs += cut
    content = response_content(text, call_format=config.call_format, template_tools=e.template_tools)
    tool_message = {"role": "tool", "content": content}
    extra = extension_ids(tokenizer, e.token_ids, e.messages, [tool_message], tools=_declarations(e))
    e.messages.append(tool_message)
    e.token_ids.extend(extra)
    e.model_mask.extend([False] * len(extra))
    if e.tokens_used >= config.max_episode_tokens:
        e.done, e.stop = True, "episode_tokens"


def rollout_tool_episodes(
    engine: Engine,
    tokenizer: Any,
    tasks: Sequence[Task],
    runner: SyncRunner,
    *,
    samples_per_prompt: int,
    params: SamplingParams,
    config: ToolConfig,
) -> list[ToolEpisode]:
    """``samples_per_prompt`` tool episodes per task (task-major), each ending in a final answer scored
    on the hidden tests in fresh jails."""
    from execrl.rollout.engine import reusing_prefixes

    starts = [_start(tokenizer, t, i, config) for i, t in enumerate(tasks)]
    templates, sessions = open_sessions(runner, tasks, samples_per_prompt, config)
    try:
        with reusing_prefixes(engine, max_bytes=config.reuse_kv_max_bytes, max_conversations=1 << 20):
            episodes = _generate(engine, tokenizer, starts, params, samples_per_prompt, config)
            for turn in range(1, config.max_tool_calls + 2):
                for i, e in enumerate(episodes):
                    if not e.done:
                        task = tasks[e.task_index]
                        context = ToolContext(task, sessions[i], runner, config.reward)
                        _answer_call(tokenizer, e, task, context, config)
                live = [i for i, e in enumerate(episodes) if not e.done]
                if not live:
                    break
                fresh = _generate(engine, tokenizer, [episodes[i] for i in live],
                                  replace(params, seed=params.seed + 7919 * turn), 1, config)  # fmt: skip
                for i, e in zip(live, fresh, strict=True):
                    episodes[i] = e
        for e, session in zip(episodes, sessions, strict=True):
            e.session_memory_mb = session.stats().peak_memory_mb
    finally:
        close_sessions(templates, sessions)
    _judge(tasks, episodes, runner, config)
    return episodes


@dataclass(frozen=True)
class Verdict:
    reward: float  # the hidden-test reward minus parse_error_penalty per malformed call
    valid: bool
    passed: bool
    reason: str
    score: Score | None = (
        None  # the hidden-test score itself (with its blind audit when the reward carries it)
    )


def judge_answers(
    tasks: Sequence[Task], answers: Sequence[str], parse_errors: Sequence[int], *, runner: SyncRunner,
    config: ToolConfig,
) -> list[Verdict]:  # fmt: skip
    """Final answers (one per task, in order) on the hidden tests, in fresh jails (nothing of the
    sessions reaches them); the judge of training episodes and of ``execrl tools run``."""
    hidden = score_batch(
        list(tasks), list(answers), sandbox=runner, config=replace(config.reward, use_hidden_tests=True)
    )
    return [
        Verdict(
            score.reward - config.parse_error_penalty * errors,
            score.valid,
            score.passed,
            score.reason_code,
            score,
        )
        for score, errors in zip(hidden, parse_errors, strict=True)
    ]


def _judge(
    tasks: Sequence[Task], episodes: list[ToolEpisode], runner: SyncRunner, config: ToolConfig
) -> None:
    verdicts = judge_answers(
        [tasks[e.task_index] for e in episodes], [e.final_text for e in episodes],
        [e.parse_errors for e in episodes], runner=runner, config=config,
    )  # fmt: skip
    for e, v in zip(episodes, verdicts, strict=True):
        e.reward, e.valid, e.passed, e.reason, e.score = v.reward, v.valid, v.passed, v.reason, v.score
