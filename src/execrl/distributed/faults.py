"""Retry policy and fault counters of the executors (no ray, no torch: pure bookkeeping).

Taxonomy (NeMo-RL's split, research notes A.4): a worker that died or hung (infrastructure) is replaced
and its work retried on a healthy worker; a task that raised inside a live worker is retried too (where
repeating it has no side effect: an engine call, a judgement), since a transient cause (a sandbox out of
slots) looks the same from outside. Either way attempts are bounded (``RetryPolicy.max_attempts``) with
exponential backoff; what still fails becomes an invalid verdict with its reason (judging) or
``TaskFailed`` (generation, which has no per-sample fallback), never a silent drop. Work that died with
its worker and cannot be redone (an episode whose sandbox session was on it) is ended and counted
(``lost_episodes``). Results are taken only from the attempt that succeeded, so nothing is counted twice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from execrl.retry import backoff_delay

__all__ = ["FaultCounters", "RetryPolicy", "StepLog", "TaskFailed"]


class TaskFailed(RuntimeError):
    """A task failed on every attempt; the message lists the attempts' reasons."""

    def __init__(self, what: str, reasons: list[str]) -> None:
        super().__init__(f"{what} failed after {len(reasons)} attempts: " + "; ".join(reasons[-3:]))
        self.what = what
        self.reasons = tuple(reasons)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_s: float = 0.2
    backoff_max_s: float = 5.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts={self.max_attempts}; set >= 1")
        if not 0 <= self.backoff_s <= self.backoff_max_s:
            raise ValueError("RetryPolicy: need 0 <= backoff_s <= backoff_max_s")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): backoff_s * 2**(attempt-1), capped."""
        return backoff_delay(attempt, base_s=self.backoff_s, max_s=self.backoff_max_s)


@dataclass
class FaultCounters:
    """What happened since the last ``drain``: tasks submitted, retries, workers replaced, tasks that failed
    every attempt, and episodes ended because the worker holding their environment died."""

    tasks: int = 0
    retries: int = 0
    replaced_workers: int = 0
    failed_tasks: int = 0
    lost_episodes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(
        self,
        *,
        tasks: int = 0,
        retries: int = 0,
        replaced_workers: int = 0,
        failed_tasks: int = 0,
        lost_episodes: int = 0,
    ) -> None:
        """Add to the counters (the rollout loop and its judging thread count at once)."""
        with self._lock:
            self.tasks += tasks
            self.retries += retries
            self.replaced_workers += replaced_workers
            self.failed_tasks += failed_tasks
            self.lost_episodes += lost_episodes

    def drain(self) -> dict[str, float]:
        """The step's ``executor/*`` metrics (``retry_rate`` = retries / tasks, what the alarm watches)."""
        with self._lock:
            metrics = {
                "executor/tasks": float(self.tasks),
                "executor/retries": float(self.retries),
                "executor/retry_rate": self.retries / self.tasks if self.tasks else 0.0,
                "executor/replaced_workers": float(self.replaced_workers),
                "executor/failed_tasks": float(self.failed_tasks),
                "executor/lost_episodes": float(self.lost_episodes),
            }
            self.tasks = self.retries = self.replaced_workers = self.failed_tasks = self.lost_episodes = 0
        return metrics


@dataclass
class StepLog:
    """What the rollout calls of one step did (the async loop samples step t+1 while step t is logged, so
    the executor keeps one log per step instead of one running total)."""

    counters: FaultCounters = field(default_factory=FaultCounters)
    versions_used: list[int] = field(default_factory=list)  # one per engine call
    staleness: list[int] = field(default_factory=list)  # step - version used, one per engine call
    weight_pushes: int = 0

    def metrics(self) -> dict[str, float]:
        metrics = self.counters.drain()
        if self.versions_used:
            metrics["executor/weight_version_used_min"] = float(min(self.versions_used))
            metrics["executor/weight_staleness_max"] = float(max(self.staleness))
        metrics["executor/weight_pushes"] = float(self.weight_pushes)
        return metrics
