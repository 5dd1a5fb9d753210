"""Tool episodes against any OpenAI-compatible endpoint (``execrl serve``, vLLM, a hosted API): the training
environment (``tools/env.py``) driven by the one rollout loop with the HTTP backend
(``execrl.episodes.chat``), for evaluating a served model on the tool suite (``execrl tools run``).

One episode per task: the task's prompt and its tools' declarations (OpenAI ``tools``) go to
``/v1/chat/completions``; each ``tool_calls`` entry of the answer runs with execrl's tools (``python`` in
the episode's sandbox session, forked from the task's ``SessionSpec`` template as in training;
``run_tests`` on the visible tests) and comes back as a ``tool`` message with its ``tool_call_id``; ... until
an answer calls no tool, the call cap, or the token budget; then the final answer is judged on the hidden
tests by the training judge, in fresh jails. A malformed call counts as in training (a ``<tool_call>`` left
in the content, what ``execrl serve`` returns for a call it could not parse, is parsed as a training turn).
An endpoint error (an HTTP status, a refused connection, an answer that is not a chat completion) ends the
episode with ``stop="error"`` and ``error`` set; it has no final answer, so it is not judged: an invalid
verdict (reward 0, counted in the summary's ``endpoint_errors``), the other episodes go on. Limits: the backend's
(``execrl.episodes.chat``): tokens are the server's ``usage``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from execrl.episodes import Episode, run_episodes
from execrl.episodes.chat import ChatBackend, Endpoint
from execrl.rollout.types import SamplingParams
from execrl.tasks.schema import Task
from execrl.tools.env import ToolConfig, ToolEnvironment

if TYPE_CHECKING:
    from execrl.rewards.batch import SyncRunner

__all__ = ["Endpoint", "episode_record", "run_remote_episodes", "summarize"]


def run_remote_episodes(
    endpoint: Endpoint,
    tasks: Sequence[Task],
    runner: SyncRunner,
    *,
    config: ToolConfig,
    tokenizer: Any = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    concurrency: int = 1,
) -> list[Episode]:
    """One episode per task against ``endpoint``, judged on the hidden tests (module doc)."""
    if config.call_format != "hermes":
        raise ValueError(
            f"tools.call_format={config.call_format!r}: an OpenAI endpoint returns tool_calls (the Hermes "
            "convention); the python_block convention is not served"
        )
    backend = ChatBackend(endpoint, tokenizer=tokenizer, concurrency=concurrency)
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=config.max_turn_tokens, temperature=temperature,
                            top_p=top_p, seed=seed)  # fmt: skip
    try:
        result = run_episodes(ToolEnvironment(runner, config), backend, tasks, params=params,
                              max_episode_tokens=config.max_episode_tokens)  # fmt: skip
    finally:
        backend.close()
    return list(result.episodes)


def episode_record(e: Episode) -> dict[str, Any]:
    """One episode as ``execrl tools run --json`` writes it."""
    return {
        "task_id": e.task_id, "messages": [dict(m) for m in e.messages], "turns": len(e.turns),
        "tool_calls": int(e.info.get("tool_calls", 0)),
        "parse_errors": int(e.info.get("parse_errors", 0)), "truncated_outputs": int(e.info.get("truncated_outputs", 0)),
        "tool_time_s": float(e.info.get("tool_time_s", 0.0)), "tokens_used": int(e.info.get("tokens_used", 0)),
        "final_text": e.text, "stop": e.stop, "error": e.error,
        "reward": e.reward, "valid": e.valid, "passed": e.passed, "reason": e.verdict.reason,
        "calls": list(e.info.get("calls", ())),
    }  # fmt: skip


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Pass rate, mean reward, calls per episode, parse errors (in all, and per call: absent without a
    call), endpoint errors, and the share of each way an episode ended."""
    records = [episode_record(e) for e in episodes]
    n = max(len(records), 1)
    calls = sum(r["tool_calls"] for r in records)
    out = {
        "episodes": float(len(records)),
        "pass_rate": sum(r["passed"] for r in records) / n,
        "reward_mean": sum(r["reward"] for r in records) / n,
        "calls_per_episode": calls / n,
        "parse_errors": float(sum(r["parse_errors"] for r in records)),
        "endpoint_errors": float(sum(r["stop"] == "error" for r in records)),
        "truncated_outputs": float(sum(r["truncated_outputs"] for r in records)),
    }
    if calls:
        out["parse_error_rate"] = out["parse_errors"] / calls
    for stop in ("answer", "max_tool_calls", "episode_tokens", "error"):
        out[f"stop_{stop}"] = sum(r["stop"] == stop for r in records) / n
    return out
