"""The per-step metrics of tool episodes (pure function over the step's episodes)."""

from __future__ import annotations

from collections.abc import Sequence

from execrl.tools.episode import ToolEpisode

__all__ = ["tool_metrics"]


def tool_metrics(episodes: Sequence[ToolEpisode], step_s: float) -> dict[str, float]:
    """N episodes, C tool calls in all.

    ``tools/calls_per_episode`` C / N; ``tools/parse_error_rate`` malformed calls / C (absent when C = 0:
    a 0 would read as "every call parsed"); ``tools/time_share`` seconds spent in tools / ``step_s``;
    ``tools/session_memory_mb_max`` the largest peak memory of an episode's session;
    ``tools/truncated_outputs`` tool answers cut to the token limit, in all; ``tools/stop_*`` the share
    of episodes ending with a final answer, at the call cap, or out of tokens; ``reward/*`` as the other
    recipes log them (``reward/mean`` is the training reward: hidden-test reward minus the penalties).
    """
    n = len(episodes)
    calls = sum(e.tool_calls for e in episodes)
    mean = sum(e.reward for e in episodes) / n
    out = {
        "reward/mean": mean,
        "reward/std": (sum((e.reward - mean) ** 2 for e in episodes) / n) ** 0.5,
        "reward/pass_rate": sum(e.passed for e in episodes) / n,
        "reward/invalid_rate": sum(not e.valid for e in episodes) / n,
        "tools/calls_per_episode": calls / n,
        "tools/episodes_with_calls": sum(e.tool_calls > 0 for e in episodes) / n,
        "tools/time_share": sum(e.tool_time_s for e in episodes) / step_s if step_s > 0 else 0.0,
        "tools/session_memory_mb_max": max(e.session_memory_mb for e in episodes),
        "tools/truncated_outputs": float(sum(e.truncated_outputs for e in episodes)),
        "tools/turns_mean": sum(e.turns for e in episodes) / n,
        "tools/context_tokens_mean": sum(len(e.token_ids) for e in episodes) / n,
        "rollout/response_length_mean": sum(sum(e.model_mask) for e in episodes) / n,
        "sandbox/error_rate": sum(e.reason == "sandbox_error" for e in episodes) / n,
    }
    for stop in ("answer", "max_tool_calls", "episode_tokens"):
        out[f"tools/stop_{stop}"] = sum(e.stop == stop for e in episodes) / n
    if calls:
        out["tools/parse_error_rate"] = sum(e.parse_errors for e in episodes) / calls
    return out
