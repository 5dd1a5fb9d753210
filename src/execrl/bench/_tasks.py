"""The benchmarks' task choice, shared by ``train.py``, ``train_scale.py`` and ``lora.py``."""

from __future__ import annotations

from collections.abc import Sequence

from execrl.tasks.schema import Task

__all__ = ["pick_tasks"]


def pick_tasks(tasks: Sequence[Task], count: int) -> tuple[Task, ...]:
    """The ``count`` easiest tasks, one per family (deterministic: sorted by difficulty, then id)."""
    chosen: list[Task] = []
    families: set[str] = set()
    for task in sorted(tasks, key=lambda t: (t.metadata.difficulty, t.id)):
        if task.metadata.family not in families:
            chosen.append(task)
            families.add(task.metadata.family)
        if len(chosen) == count:
            return tuple(chosen)
    raise ValueError(f"--prompts={count}, but the suite has only {len(chosen)} task families")
