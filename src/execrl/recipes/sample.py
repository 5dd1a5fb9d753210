"""Rejection sampling (``execrl sample``; issue 39): the model's own episodes that pass become SFT rows.

STaR (arXiv 2203.14465), expert iteration and RFT (arXiv 2308.01825) keep a model's samples that a checker
accepts and fine-tune on them; ReTool and DeepSeek-R1 cold-start RL the same way. Here the sampler and the
checker are what RL uses, so a kept row is an episode RL could have produced and rewarded:

    execrl sample --model M --suite tools --samples-per-task 8 --out rows.jsonl

1. the run's environment (``single``, ``refine``, ``tools``, yours: ``setup.environment_name``) and a model
   backend (``LocalBackend`` over the model's engine, or ``ChatBackend`` over any OpenAI-compatible endpoint)
   go through the one rollout loop, ``run_episodes``, ``rollout.samples_per_prompt`` episodes per task on
   the suites' **train** split, judged on the **hidden** tests (the reward config with
   ``use_hidden_tests``; the tools environment always judges there);
2. :func:`select_rows` keeps an episode when its verdict is valid and passes (with ``min_reward``: its
   reward, which a registered judge verifier such as ``rewards/judge.py`` contributes to by weight, is at
   least that), it ended with an answer (not an error, a budget or the turn cap), no model turn was cut by
   a token cap, and it made no malformed tool call; kept episodes with the same assistant turns for the
   same task are written once;
3. each kept episode becomes a row of the format ``execrl sft`` reads (:func:`episode_row`): the task's own
   first messages, the model's turns as written (a call stays the text the model sampled, so the row
   renders with the ``tools.call_format`` it was sampled in; an endpoint's structured ``tool_calls`` stay
   ``tool_calls``), tool answers without the wrapper the environment put around them, the declarations the
   episode offered under ``tools``, and ``metadata`` (task, suite, sample, reward).

The counts per task (samples, passed, kept after deduplication) are returned with the rows and written next
to them by the CLI. Limits: a tool answer the environment cut keeps its cut marker (the model saw it); the
row's assistant turns are text, so ``execrl sft`` trains on the tokenizer's split of that text, which may
differ from the sampled ids (``tools/render.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.components import setup
from execrl.config import ConfigError, TrainConfig
from execrl.episodes.single import first_messages
from execrl.episodes.types import Episode, Message
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    from execrl.episodes.backend import Backend
    from execrl.episodes.chat import Endpoint

__all__ = ["SampleResult", "episode_row", "kept", "sample", "select_rows", "tool_row_parts", "write_rows"]

log = logging.getLogger("execrl.sample")
ANSWERED = ("answer",)  # an episode's stop reasons that end with a final answer of the model's own


@dataclass(frozen=True)
class SampleResult:
    rows: tuple[dict[str, Any], ...]  # task order, then sample order
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # task id -> samples, passed, kept

    @property
    def samples(self) -> int:
        return sum(c["samples"] for c in self.counts.values())

    @property
    def passed(self) -> int:
        return sum(c["passed"] for c in self.counts.values())


def kept(episode: Episode, min_reward: float | None = None) -> bool:
    """Whether an episode becomes a row: a valid verdict that passes (or reaches ``min_reward``), a final
    answer of its own, no turn cut by a token cap, no malformed tool call."""
    verdict = episode.verdict
    good = verdict.passed if min_reward is None else verdict.reward >= min_reward
    return (
        verdict.valid
        and good
        and episode.stop in ANSWERED
        and not episode.error
        and not episode.truncated
        and not episode.info.get("parse_errors", 0.0)
    )


def _assistant(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {"type": "function", "function": {"name": c["function"]["name"],
                                              "arguments": c["function"].get("arguments", {})}}
            for c in calls
        ]  # fmt: skip
    return out


def _unwrapped(content: str, wrapper: tuple[str, str] | None) -> str:
    if wrapper is None or not (content.startswith(wrapper[0]) and content.endswith(wrapper[1])):
        return content
    return content[len(wrapper[0]) : len(content) - len(wrapper[1])]


def episode_row(
    episode: Episode,
    task: Task,
    *,
    suite: str,
    tools: Sequence[dict[str, Any]] = (),
    wrapper: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """``episode`` as an SFT row (module docstring, 3). ``tools``: the declarations the episode offered;
    ``wrapper``: what the environment wrapped a tool answer in (``calls.response_wrapper``)."""
    first = next((k for k, m in enumerate(episode.messages) if m.get("role") == "assistant"), None)
    if first is None:
        raise ValueError(f"episode of {task.id!r} has no assistant turn")
    messages: list[dict[str, Any]] = [dict(m) for m in first_messages(task)]
    for message in episode.messages[first:]:
        role = message.get("role")
        if role == "assistant":
            messages.append(_assistant(message))
        elif role == "tool":
            messages.append({"role": "tool", "content": _unwrapped(str(message.get("content")), wrapper)})
        else:
            messages.append({"role": str(role), "content": str(message.get("content") or "")})
    row: dict[str, Any] = {"messages": messages}
    if tools:
        row["tools"] = [dict(t) for t in tools]
    row["metadata"] = {"task_id": task.id, "suite": suite, "source": "rejection_sampling",
                       "sample": episode.sample, "reward": episode.reward}  # fmt: skip
    return row


def _turns_key(row: dict[str, Any]) -> str:
    turns = [m for m in row["messages"] if m["role"] in ("assistant", "tool")]
    return json.dumps([row["metadata"]["task_id"], turns], sort_keys=True, ensure_ascii=False)


def select_rows(
    episodes: Sequence[Episode],
    tasks: Sequence[Task],
    *,
    suite: str,
    min_reward: float | None = None,
    tools_of: Any = None,
    wrapper: tuple[str, str] | None = None,
) -> SampleResult:
    """The kept episodes (:func:`kept`) as rows, deduplicated per task, with counts per task. Pure.
    ``tools_of(task) -> declarations`` (None: no tools)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    counts = {t.id: {"samples": 0, "passed": 0, "kept": 0} for t in tasks}
    for episode in episodes:
        task = tasks[episode.task_index]
        count = counts[task.id]
        count["samples"] += 1
        if not kept(episode, min_reward):
            continue
        count["passed"] += 1
        row = episode_row(episode, task, suite=suite, tools=tools_of(task) if tools_of else (),
                          wrapper=wrapper)  # fmt: skip
        key = _turns_key(row)
        if key not in seen:
            seen.add(key)
            count["kept"] += 1
            rows.append(row)
    return SampleResult(tuple(rows), counts)


def tool_row_parts(environment: Any, backend: Backend, tasks: Sequence[Task]) -> dict[str, Any]:
    """``select_rows``' tool arguments for the ``tools`` environment (none for the others)."""
    if environment.name != "tools" or not tasks:
        return {}
    from execrl.tools import get_tool
    from execrl.tools.calls import response_wrapper
    from execrl.tools.env import offered_tools

    def tools_of(task: Task) -> list[dict[str, Any]]:
        return [get_tool(name).declaration() for name in offered_tools(task, environment.config)]

    call_format = environment.config.call_format
    renders = call_format == "hermes" and backend.renders_tools(tools_of(tasks[0]))
    return {
        "tools_of": tools_of,
        "wrapper": response_wrapper(call_format=call_format, template_tools=renders),
    }


def _backend(config: TrainConfig, endpoint: Endpoint | None) -> Backend:
    if endpoint is not None:
        from execrl.episodes.chat import ChatBackend

        return ChatBackend(endpoint)
    model, tokenizer, _ = setup.load_policy(config)
    return setup.local_backend(setup.rollout_engine(config, model, tokenizer), tokenizer)


def sample(
    config: TrainConfig, *, min_reward: float | None = None, endpoint: Endpoint | None = None,
    limit: int | None = None,
) -> SampleResult:  # fmt: skip
    """Rejection sampling on every suite of ``config.tasks.suites`` (train split; ``limit`` tasks of each)
    with the run's environment and the model at ``model.path`` (or ``endpoint``): module docstring."""
    from execrl.episodes import run_episodes

    setup.register_extra_verifiers(config)  # reward.verifiers: a user's (or the judge's) verifier by domain
    suites = setup.load_suites(list(config.tasks.suites), "train", config.tasks.max_difficulty)
    suites = {
        name: [t for t in tasks if t.metadata.split == "train"][:limit] for name, tasks in suites.items()
    }
    if not any(suites.values()):
        raise ConfigError(f"tasks.suites={list(config.tasks.suites)}: no train tasks to sample")
    params = replace(setup.sampling_params(config), seed=config.run.seed)
    if config.tools.enabled:
        params = replace(params, max_new_tokens=config.tools.max_turn_tokens)
    per_call = config.rollout.prompts_per_step
    rows: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    backend = _backend(config, endpoint)
    try:
        with setup.build_sandbox(config, sessions=setup.sessions_held(config)) as sandbox:
            reward = replace(setup.reward_config(config), use_hidden_tests=True)
            environment = setup.build_environment(config, sandbox, reward=reward)
            for suite, tasks in suites.items():
                episodes: list[Episode] = []
                for start in range(0, len(tasks), per_call):
                    chunk = tasks[start : start + per_call]
                    result = run_episodes(environment, backend, chunk, params=params,
                                          max_episode_tokens=setup.max_episode_tokens(config))  # fmt: skip
                    episodes += [replace(e, task_index=e.task_index + start) for e in result.episodes]
                    log.info("%s: %d/%d tasks sampled", suite, min(start + per_call, len(tasks)), len(tasks))
                parts = tool_row_parts(environment, backend, tasks)
                done = select_rows(episodes, tasks, suite=suite, min_reward=min_reward, **parts)
                rows += done.rows
                counts.update(done.counts)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    return SampleResult(tuple(rows), counts)


def write_rows(path: Path, result: SampleResult) -> Path:
    """The rows (JSONL) at ``path`` and the counts per task at ``<stem>.counts.json``, each written whole
    (a temporary file renamed) so a reader never sees half of one. Returns the counts' path."""
    counts_path = path.with_name(f"{path.stem}.counts.json")
    for target, text in (
        (path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rows)),
        (counts_path, json.dumps({"samples": result.samples, "passed": result.passed,
                                  "rows": len(result.rows), "tasks": result.counts}, indent=1)),
    ):  # fmt: skip
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    return counts_path
