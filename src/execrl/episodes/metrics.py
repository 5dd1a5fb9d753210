"""The metrics every recipe logs about its episodes, whatever the environment (pure functions).

``reward/*`` are the reward path's summary (``execrl.rewards.reward_metrics``: means over valid episodes,
invalid ones counted) on the episodes' training rewards (a multi-turn environment's penalties included);
``rollout/*`` the shape of the sampled tokens (per episode: all of the model's turns); ``sandbox/*`` the
judge's executions. The environment adds its own (``refine/*``, ``tools/*``: ``Environment.metrics``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from execrl.episodes.types import Episode
from execrl.rewards import Score, reward_metrics

__all__ = ["episode_metrics", "episode_scores", "truncation_rate"]


def episode_scores(episodes: Sequence[Episode]) -> list[Score]:
    """Each episode's judge score carrying the episode's training reward (a verdict without a score, such
    as a backend error's, becomes one with the verdict's reward, validity and reason)."""
    out = []
    for e in episodes:
        score, v = e.verdict.score, e.verdict
        if score is None:  # a verdict without the reward path's score (a backend error, a user's judge)
            out.append(Score(v.reward, v.valid, v.passed, float(v.passed), v.reason or "unscored"))
        elif not e.verdict.valid:
            out.append(score)
        else:
            out.append(dataclasses.replace(score, reward=e.verdict.reward))
    return out


def truncation_rate(episodes: Sequence[Episode]) -> float:
    """Share of episodes a token cap cut (a model turn with finish reason ``length``); 0 for none."""
    return sum(e.truncated for e in episodes) / len(episodes) if episodes else 0.0


def episode_metrics(episodes: Sequence[Episode], *, max_new_tokens: int) -> dict[str, float]:
    """``reward/*``, ``rollout/*`` (response length = the model's tokens of an episode, all turns;
    ``truncation_rate`` = episodes with a turn cut at its cap; ``max_new_tokens`` the turn cap of the
    step) and ``sandbox/*`` (the judge's executions: error rate, count, mean CPU time)."""
    scores = episode_scores(episodes)
    lengths = [float(e.model_tokens) for e in episodes]
    executed = [s.execution for s in scores if s.execution is not None]
    out = reward_metrics(scores)
    out.update({
        "rollout/response_length_mean": sum(lengths) / len(lengths),
        "rollout/response_length_max": max(lengths),
        "rollout/truncation_rate": truncation_rate(episodes),
        "rollout/max_new_tokens": float(max_new_tokens),
        "rollout/prompt_tokens_max": float(max(e.prompt_tokens for e in episodes)),
        "sandbox/error_rate": sum(s.reason_code == "sandbox_error" for s in scores) / len(scores),
        "sandbox/executions": float(len(executed)),
        "sandbox/cpu_time_s_mean": sum(x.cpu_time_s for x in executed) / len(executed) if executed else 0.0,
    })  # fmt: skip
    return out
