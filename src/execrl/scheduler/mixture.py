"""Task mixture: which tasks each training step samples, across several domains trained jointly.

Determinism is the point: the tasks of step ``s`` are a pure function of (seed, suites, weights, s), so a
resumed run draws exactly what an uninterrupted run would have drawn, with no sampler state to
checkpoint (the resume bugs of OpenRLHF #1103 and verl PR #5725 were lost or replayed data positions).

Within each suite, tasks are drawn without replacement in seeded epochs (every task once before any
repeats); the suite of each slot is drawn by weight. Weights are static here; ``adaptive.py`` re-weights
online from the groups' pass rates.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

TaskT = TypeVar("TaskT")


@dataclass(frozen=True)
class MixtureSampler(Generic[TaskT]):
    suites: Mapping[str, Sequence[TaskT]]
    weights: Mapping[str, float]
    seed: int = 0

    def __post_init__(self) -> None:
        missing = set(self.weights) - set(self.suites)
        if missing:
            raise ValueError(f"mixture weights name suites with no tasks loaded: {sorted(missing)}")
        empty = [name for name in self.weights if not self.suites[name]]
        if empty:
            raise ValueError(f"suites {empty} have no tasks after filtering; lower the difficulty filter")

    def tasks_for_step(self, step: int, prompts_per_step: int) -> list[TaskT]:
        """The ``prompts_per_step`` tasks of training step ``step`` (0-based)."""
        if step < 0 or prompts_per_step < 1:
            raise ValueError(f"step must be >= 0 and prompts_per_step >= 1, got {step}, {prompts_per_step}")
        names = sorted(self.weights)
        counts = dict.fromkeys(names, 0)  # tasks drawn from each suite before the current step
        for current in range(step + 1):
            rng = random.Random(f"{self.seed}:slots:{current}")
            slots = rng.choices(names, weights=[self.weights[n] for n in names], k=prompts_per_step)
            if current == step:
                return [self._task_at(name, self._next(counts, name)) for name in slots]
            for name in slots:
                counts[name] += 1
        raise AssertionError("unreachable: the loop returns at current == step")

    @staticmethod
    def _next(counts: dict[str, int], name: str) -> int:
        index = counts[name]
        counts[name] += 1
        return index

    def _task_at(self, name: str, draw_index: int) -> TaskT:
        tasks = self.suites[name]
        epoch, offset = divmod(draw_index, len(tasks))
        order = list(range(len(tasks)))
        random.Random(f"{self.seed}:order:{name}:{epoch}").shuffle(order)
        return tasks[order[offset]]
