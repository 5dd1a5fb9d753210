"""Reward metrics for ``metrics.jsonl`` under the ``reward/`` namespace (pure function over scores).

Means and pass rates are over *valid* scores only, the ones the trainer uses for the advantage; invalid
scores are counted in ``reward/invalid_rate`` and in ``reward/reason/<code>`` so a broken sandbox shows up
as a rising invalid rate, not as a falling reward.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from execrl.rewards.types import Score


def _summary(scores: Sequence[Score], prefix: str) -> dict[str, float]:
    valid = [s for s in scores if s.valid]
    out = {
        f"{prefix}/count": float(len(scores)),
        f"{prefix}/invalid_rate": (len(scores) - len(valid)) / len(scores),
    }
    if valid:
        rewards = [s.reward for s in valid]
        mean = sum(rewards) / len(rewards)
        out[f"{prefix}/mean"] = mean
        out[f"{prefix}/std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))  # population
        out[f"{prefix}/pass_rate"] = sum(s.passed for s in valid) / len(valid)
        out[f"{prefix}/pass_fraction_mean"] = sum(s.pass_fraction for s in valid) / len(valid)
    return out


def reward_metrics(scores: Sequence[Score], *, domains: Sequence[str] | None = None) -> dict[str, float]:
    """``reward/{count,invalid_rate,mean,std,pass_rate,pass_fraction_mean}``, ``reward/reason/<code>``
    counts and, when ``domains`` (one per score) is given, the same summary per ``reward/<domain>/``.

    ``mean``/``std``/``pass_rate`` are absent when no score is valid (there is nothing to average; a 0
    would read as "the policy got worse"). An empty batch gives only ``reward/count`` = 0.
    """
    if not scores:
        return {"reward/count": 0.0}
    out = _summary(scores, "reward")
    for code, count in sorted(Counter(s.reason_code for s in scores).items()):
        out[f"reward/reason/{code}"] = float(count)
    if domains is not None:
        if len(domains) != len(scores):
            raise ValueError(
                f"got {len(domains)} domains for {len(scores)} scores; pass one domain per score"
            )
        for domain in sorted(set(domains)):
            subset = [s for s, d in zip(scores, domains, strict=True) if d == domain]
            out.update(_summary(subset, f"reward/{domain}"))
    return out
