"""Bootstrap confidence intervals over tasks, and the paired bootstrap for base-vs-trained deltas.

Why the bootstrap: pass@k is a mean over a small, fixed set of tasks (HumanEval has 164), so most of the
uncertainty comes from *which tasks* were drawn, not from sampling noise inside a task. Resampling tasks
with replacement (Efron 1979; percentile method, Efron & Tibshirani 1993, ch. 13) captures that. For two
models scored on the same tasks the *paired* bootstrap resamples task indices once and applies them to
both, so task difficulty cancels and the interval on the difference is much tighter than two separate
intervals would suggest.

Limits: the percentile interval is accurate only when the bootstrap distribution is roughly symmetric and
the task count is not tiny (with 5 tasks the interval is coarse and undercovers). Seeds make results
reproducible, not more correct.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from execrl.eval.passk import TaskCounts, pass_at_k_per_task

__all__ = ["Estimate", "bootstrap_ci", "paired_bootstrap_diff", "passk_comparison"]

_CHUNK_RESAMPLES = 1024  # bounds memory at chunk x n_tasks indices


class Estimate(NamedTuple):
    """A point estimate with its interval; unpacks as ``(value, ci_low, ci_high)``."""

    value: float
    ci_low: float
    ci_high: float

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high}


def _check_args(n_values: int, resamples: int, confidence: float) -> None:
    if n_values == 0:
        raise ValueError("bootstrap over zero tasks is undefined; the value list is empty")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` with-replacement resamples of the task axis.  values: [T] -> [R]."""
    rng = np.random.default_rng(seed)
    n_tasks = values.shape[0]
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, _CHUNK_RESAMPLES):
        stop = min(start + _CHUNK_RESAMPLES, resamples)
        idx = rng.integers(0, n_tasks, size=(stop - start, n_tasks))  # [r, T]
        means[start:stop] = values[idx].mean(axis=1)
    return means


def _percentile_interval(means: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Estimate:
    """Mean of per-task ``values`` with a percentile bootstrap interval over tasks."""
    _check_args(len(values), resamples, confidence)
    arr = np.asarray(values, dtype=np.float64)  # [T]
    low, high = _percentile_interval(_bootstrap_means(arr, resamples, seed), confidence)
    return Estimate(float(arr.mean()), low, high)


def paired_bootstrap_diff(
    before: Sequence[float],
    after: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Mean of ``after - before`` over the same tasks, with a paired percentile bootstrap interval."""
    if len(before) != len(after):
        raise ValueError(
            f"paired bootstrap needs one value per task for both models, got {len(before)} and {len(after)}"
        )
    _check_args(len(before), resamples, confidence)
    diff = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)  # [T]
    low, high = _percentile_interval(_bootstrap_means(diff, resamples, seed), confidence)
    return Estimate(float(diff.mean()), low, high)


def passk_comparison(
    *,
    suite: str,
    base: Sequence[TaskCounts | tuple[int, int]],
    trained: Sequence[TaskCounts | tuple[int, int]],
    ks: Sequence[int] = (1,),
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Build the eval-results structure that ``execrl.telemetry.report.write_report`` draws.

    ``base`` and ``trained`` hold per-task ``(samples, correct)`` for the same tasks in the same order.
    Returns plain JSON-ready data::

        {"suite": str, "n_tasks": int, "confidence": float, "resamples": int,
         "models": {"base": {"pass@1": {"value", "ci_low", "ci_high"}, ...}, "trained": {...}},
         "delta": {"pass@1": {"value", "ci_low", "ci_high"}, ...}}   # trained - base, paired
    """
    if len(base) != len(trained):
        raise ValueError(f"base has {len(base)} tasks but trained has {len(trained)}; score the same tasks")
    opts: Mapping[str, Any] = {"resamples": resamples, "confidence": confidence, "seed": seed}
    models: dict[str, dict[str, dict[str, float]]] = {"base": {}, "trained": {}}
    delta: dict[str, dict[str, float]] = {}
    for k in ks:
        per_base = pass_at_k_per_task(base, k)
        per_trained = pass_at_k_per_task(trained, k)
        models["base"][f"pass@{k}"] = bootstrap_ci(per_base, **opts).as_dict()
        models["trained"][f"pass@{k}"] = bootstrap_ci(per_trained, **opts).as_dict()
        delta[f"pass@{k}"] = paired_bootstrap_diff(per_base, per_trained, **opts).as_dict()
    return {
        "suite": suite,
        "n_tasks": len(base),
        "confidence": confidence,
        "resamples": resamples,
        "models": models,
        "delta": delta,
    }
