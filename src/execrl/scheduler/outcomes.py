"""What the scheduler learns from one scored group, and the per-domain metrics of a step.

A group is the ``samples_per_prompt`` completions of one task. Its *learnability* is the quantity the
adaptive scheduler steers by: for pass/fail rewards it is p(1-p) with p the group's pass rate (the variance
of a Bernoulli success, which is what a GRPO group's advantages are made of; Foster & Foerster 2025,
"Learning to Reason at the Frontier of Learnability", arXiv 2502.12272). A zero-variance group (all rewards
equal) scores 0 whatever its pass rate: its GRPO advantages are all zero. A group whose rewards differ
while its pass flags do not (partial credit) still teaches something; it gets the smallest non-zero
p(1-p) a group of its size can show, (G-1)/G^2, so it ranks below every group with mixed pass flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class GroupOutcome:
    """One task's group of samples after scoring: which task, its rewards and pass flags."""

    task_id: str
    rewards: tuple[float, ...]
    passed: tuple[bool, ...]

    def __post_init__(self) -> None:
        if not self.rewards or len(self.rewards) != len(self.passed):
            raise ValueError(
                f"group of task {self.task_id!r}: {len(self.rewards)} rewards and {len(self.passed)} pass "
                "flags; need the same non-zero number"
            )

    @property
    def pass_rate(self) -> float:
        return sum(self.passed) / len(self.passed)

    @property
    def zero_variance(self) -> bool:
        return max(self.rewards) == min(self.rewards)

    @property
    def learnability(self) -> float:
        if self.zero_variance:
            return 0.0
        size = len(self.rewards)
        p = self.pass_rate
        return max(p * (1.0 - p), (size - 1) / size**2)


def metric_labels(names: Iterable[str]) -> dict[str, str]:
    """Suite name -> a metric-safe label: a task file's stem (``/data/math.jsonl`` -> ``math``), other
    characters than letters, digits and ``_ . @ -`` replaced by ``_``, repeats suffixed ``-2``, ``-3``."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in sorted(names):
        base = re.sub(r"[^A-Za-z0-9_.@\-]", "_", PurePosixPath(name).stem if "/" in name else name) or "_"
        label, n = base, 1
        while label in used:
            n += 1
            label = f"{base}-{n}"
        used.add(label)
        out[name] = label
    return out


def domain_metrics(
    outcomes: Iterable[tuple[str, GroupOutcome]], weights: Mapping[str, float]
) -> dict[str, float]:
    """``domain/<label>/{pass_rate,zero_variance_share,samples,weight}`` plus the step's overall
    ``rollout/zero_variance_share``. Only domains drawn this step get the first three; every domain gets
    its sampling weight, so a plot of weight over time has no gaps. ``weights`` names every domain."""
    labels = metric_labels(weights)
    by_domain: dict[str, list[GroupOutcome]] = {}
    for domain, outcome in outcomes:
        by_domain.setdefault(labels[domain], []).append(outcome)
    out: dict[str, float] = {}
    groups = 0
    zero = 0
    for domain, items in sorted(by_domain.items()):
        samples = sum(len(o.passed) for o in items)
        zero_here = sum(o.zero_variance for o in items)
        out[f"domain/{domain}/pass_rate"] = sum(sum(o.passed) for o in items) / samples
        out[f"domain/{domain}/zero_variance_share"] = zero_here / len(items)
        out[f"domain/{domain}/samples"] = float(samples)
        groups += len(items)
        zero += zero_here
    for domain, weight in sorted(weights.items()):
        out[f"domain/{labels[domain]}/weight"] = weight
    if groups:
        out["rollout/zero_variance_share"] = zero / groups
    return out


def outcomes_from_scores(
    task_ids: Sequence[str], rewards: Sequence[float], passed: Sequence[bool], group_index: Sequence[int]
) -> list[GroupOutcome]:
    """Rows (one per completion, ``group_index[row]`` = its task's position) -> one outcome per task."""
    rows: dict[int, list[int]] = {}
    for row, group in enumerate(group_index):
        rows.setdefault(group, []).append(row)
    return [
        GroupOutcome(
            task_id=task_ids[g],
            rewards=tuple(float(rewards[r]) for r in rows[g]),
            passed=tuple(bool(passed[r]) for r in rows[g]),
        )
        for g in sorted(rows)
    ]
