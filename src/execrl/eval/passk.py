"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1).

Sampling k completions out of n and asking "did any pass?" is the quantity we want; drawing exactly k samples
per task gives a high-variance estimate of it. The unbiased estimator uses all n samples, of which c passed:

    pass@k = 1 - C(n - c, k) / C(n, k)

The binomials overflow float64 for n in the hundreds, so we use the product form from the paper,
``1 - prod_{i = n-c+1}^{n} (1 - k / i)``, which only multiplies numbers in [0, 1].

Limits: the estimate is only defined for k <= n; asking for a larger k raises instead of silently
returning an optimistic number (the Codex harness likewise reports only k where every task has n >= k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TaskCounts", "mean_pass_at_k", "pass_at_k", "pass_at_k_per_task"]


@dataclass(frozen=True)
class TaskCounts:
    """Per-task sampling outcome: ``samples`` completions drawn, ``correct`` of them passed."""

    samples: int
    correct: int


def _check(samples: int, correct: int, k: int) -> None:
    if samples < 1:
        raise ValueError(f"pass@k needs at least one sample per task, got samples={samples}")
    if not 0 <= correct <= samples:
        raise ValueError(f"correct must lie in [0, samples={samples}], got correct={correct}")
    if not 1 <= k <= samples:
        raise ValueError(
            f"pass@{k} needs at least k={k} samples per task, got samples={samples}; "
            "draw more samples or report a smaller k"
        )


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k for one task from ``samples`` draws with ``correct`` passes (product form)."""
    _check(samples, correct, k)
    if samples - correct < k:  # every size-k subset contains a correct sample
        return 1.0
    fail_all = math.prod(1.0 - k / i for i in range(samples - correct + 1, samples + 1))
    return 1.0 - fail_all


def _as_counts(counts: Sequence[TaskCounts | tuple[int, int]]) -> list[TaskCounts]:
    return [c if isinstance(c, TaskCounts) else TaskCounts(samples=c[0], correct=c[1]) for c in counts]


def pass_at_k_per_task(counts: Sequence[TaskCounts | tuple[int, int]], k: int) -> list[float]:
    """pass@k for each task, in input order; ``counts`` holds ``TaskCounts`` or ``(samples, correct)``."""
    return [pass_at_k(c.samples, c.correct, k) for c in _as_counts(counts)]


def mean_pass_at_k(counts: Sequence[TaskCounts | tuple[int, int]], k: int) -> float:
    """Mean pass@k over tasks (the number papers report). Raises on an empty task list."""
    if not counts:
        raise ValueError("mean pass@k over zero tasks is undefined; the task list is empty")
    per_task = pass_at_k_per_task(counts, k)
    return sum(per_task) / len(per_task)
