"""The per-step metrics of tool episodes (pure function over the step's episodes)."""

from __future__ import annotations

from collections.abc import Sequence

from execrl.episodes.types import Episode

__all__ = ["tool_metrics"]


def tool_metrics(episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
    """N episodes, C tool calls in all (``reward/*``, lengths and ``sandbox/*`` are the loop's common
    metrics, ``execrl.episodes.metrics``).

    ``tools/calls_per_episode`` C / N; ``tools/episodes_with_calls`` the share that called at least once;
    ``tools/parse_error_rate`` malformed calls / C (absent when C = 0: a 0 would read as "every call
    parsed"); ``tools/time_share`` seconds spent in tools / ``step_s`` (absent without a step time);
    ``tools/session_memory_mb_max`` the largest peak memory of an episode's session;
    ``tools/truncated_outputs`` tool answers cut to their limit, in all; ``tools/turns_mean`` model turns
    per episode; ``tools/context_tokens_mean``; ``tools/stop_*`` the share of episodes ending with a final
    answer, at the call cap, out of tokens, or in an error.
    """
    n = len(episodes)
    calls = sum(e.info.get("tool_calls", 0.0) for e in episodes)
    out = {
        "tools/calls_per_episode": calls / n,
        "tools/episodes_with_calls": sum(e.info.get("tool_calls", 0.0) > 0 for e in episodes) / n,
        "tools/session_memory_mb_max": max(float(e.info.get("session_memory_mb", 0.0)) for e in episodes),
        "tools/truncated_outputs": float(sum(e.info.get("truncated_outputs", 0.0) for e in episodes)),
        "tools/turns_mean": sum(len(e.turns) for e in episodes) / n,
        "tools/context_tokens_mean": sum(len(e.token_ids) for e in episodes) / n,
    }
    if step_s > 0:
        out["tools/time_share"] = sum(e.info.get("tool_time_s", 0.0) for e in episodes) / step_s
    for stop in ("answer", "max_tool_calls", "episode_tokens", "error"):
        out[f"tools/stop_{stop}"] = sum(e.stop == stop for e in episodes) / n
    if calls:
        out["tools/parse_error_rate"] = sum(e.info.get("parse_errors", 0.0) for e in episodes) / calls
    return out
