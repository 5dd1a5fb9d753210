"""The per-step metrics of refine episodes (pure function over the step's episodes)."""

from __future__ import annotations

from collections.abc import Sequence

from execrl.episodes.types import Episode

__all__ = ["refine_metrics"]


def refine_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """N episodes, T model turns in all (``reward/*``, lengths and ``sandbox/*`` are the loop's common
    metrics, ``execrl.episodes.metrics``).

    ``refine/hidden_pass_rate`` the share of final programs passing the hidden tests;
    ``refine/turns_mean`` T / N; ``refine/invalid_turn_rate`` the share of the T turns without valid code;
    ``refine/feedback_rate`` the share of episodes whose first turn failed the visible tests (they got
    feedback); ``refine/fix_rate`` the share of those whose last turn passes the visible tests (absent
    when no episode got feedback: a 0 would read as "never fixed"); ``refine/context_tokens_mean``.
    """
    n = len(episodes)
    turns = sum(len(e.turns) for e in episodes)
    with_feedback = [e for e in episodes if len(e.turns) > 1]
    out = {
        "refine/hidden_pass_rate": sum(e.passed for e in episodes) / n,
        "refine/turns_mean": turns / n,
        "refine/invalid_turn_rate": sum(e.info.get("invalid_turns", 0.0) for e in episodes) / max(turns, 1),
        "refine/feedback_rate": len(with_feedback) / n,
        "refine/context_tokens_mean": sum(len(e.token_ids) for e in episodes) / n,
    }
    if with_feedback:
        fixed = sum(e.info.get("visible_passed", 0.0) for e in with_feedback)
        out["refine/fix_rate"] = fixed / len(with_feedback)
    return out
