"""One step's groups of episodes: what the scheduler learns from, and DAPO's dynamic sampling.

DAPO (Yu et al. 2025, arXiv 2503.14476, section 3.2): a group whose rewards are all equal has zero
advantage and teaches nothing, so such groups are dropped and more tasks are sampled until the step has
``prompts_per_step`` informative groups, or ``max_resample_rounds`` extra rounds have been spent (then the
step trains on what it has; a step with no informative group at all trains on the first round, whose
advantages are all zero, which the metrics show). The same for every environment: a group is a task's
episodes, single-turn or multi-turn.

Extra tasks come from a second mixture stream (seeded apart from the main one) so the main stream's data
position, and with it exact resume, is unchanged by how many resamples a step needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from execrl.episodes.loop import RolloutResult
from execrl.episodes.types import Episode
from execrl.scheduler import GroupOutcome, outcomes_from_scores
from execrl.tasks.schema import Task

__all__ = ["StepEpisodes", "informative_groups", "outcomes_of", "sample_groups", "select_groups"]

SampleFn = Callable[[list[Task], int], RolloutResult]  # (tasks, round) -> the round's episodes


@dataclass(frozen=True)
class StepEpisodes:
    """A step's episodes (task-major, ``task_index`` into ``tasks``) and how they were sampled."""

    episodes: tuple[Episode, ...]
    tasks: tuple[Task, ...]  # one per group
    rounds: int = 1  # sampling rounds spent (1 = no resampling)
    dropped_groups: int = 0  # zero-variance groups filtered out
    outcomes: tuple[GroupOutcome, ...] = ()  # every group sampled, dropped ones included (the scheduler)
    rollout_s: float = 0.0  # wall time of the rounds' rollouts (generation, environment, judge)
    generate_s: float = 0.0  # of which the backend's sampling


def outcomes_of(tasks: Sequence[Task], episodes: Sequence[Episode]) -> list[GroupOutcome]:
    """One outcome per task: its episodes' rewards and passes (what the scheduler learns from)."""
    return outcomes_from_scores(
        [t.id for t in tasks], [e.reward for e in episodes], [e.passed for e in episodes],
        [e.task_index for e in episodes],
    )  # fmt: skip


def informative_groups(episodes: Sequence[Episode]) -> list[int]:
    """Groups whose valid rewards are not all equal (the only ones with a non-zero GRPO advantage)."""
    rewards: dict[int, set[float]] = {}
    for e in episodes:
        if e.valid:
            rewards.setdefault(e.task_index, set()).add(e.reward)
    return sorted(g for g, values in rewards.items() if len(values) > 1)


def select_groups(step: StepEpisodes, groups: Sequence[int]) -> StepEpisodes:
    """Keep only ``groups`` (renumbered 0..len-1 in the given order), with their tasks."""
    new = {g: i for i, g in enumerate(groups)}
    kept = [dataclasses.replace(e, task_index=new[e.task_index]) for g in groups for e in step.episodes
            if e.task_index == g]  # fmt: skip
    return dataclasses.replace(step, episodes=tuple(kept), tasks=tuple(step.tasks[g] for g in groups))


def _concat(parts: Sequence[StepEpisodes]) -> StepEpisodes:
    episodes: list[Episode] = []
    offset = 0
    for part in parts:
        episodes += [dataclasses.replace(e, task_index=e.task_index + offset) for e in part.episodes]
        offset += len(part.tasks)
    return StepEpisodes(tuple(episodes), tuple(t for p in parts for t in p.tasks))


def sample_groups(
    first_tasks: list[Task],
    extra_tasks: Callable[[int], list[Task]],
    sample: SampleFn,
    *,
    dynamic: bool,
    max_resample_rounds: int,
) -> StepEpisodes:
    """Sample and judge the step's groups; with ``dynamic``, refill zero-variance groups (module docstring)."""
    result = sample(first_tasks, 0)
    outcomes = outcomes_of(first_tasks, result.episodes)
    rollout_s, generate_s = result.rollout_s, result.generate_s
    first = round_ = StepEpisodes(tuple(result.episodes), tuple(first_tasks))
    if not dynamic:
        return dataclasses.replace(
            first, outcomes=tuple(outcomes), rollout_s=rollout_s, generate_s=generate_s
        )
    target = len(first_tasks)
    kept: list[StepEpisodes] = []
    have = rounds = dropped = 0
    while True:
        groups = informative_groups(round_.episodes)
        dropped += len(round_.tasks) - len(groups)
        groups = groups[: target - have]
        if groups:
            kept.append(select_groups(round_, groups))
            have += len(groups)
        rounds += 1
        if have >= target or rounds > max_resample_rounds:
            break
        tasks = extra_tasks(rounds - 1)
        result = sample(tasks, rounds)
        rollout_s, generate_s = rollout_s + result.rollout_s, generate_s + result.generate_s
        outcomes.extend(outcomes_of(tasks, result.episodes))
        round_ = StepEpisodes(tuple(result.episodes), tuple(tasks))
    merged = _concat(kept or [first])  # nothing informative in any round: the first (all advantages 0)
    return dataclasses.replace(
        merged, rounds=rounds, dropped_groups=dropped, outcomes=tuple(outcomes), rollout_s=rollout_s,
        generate_s=generate_s,
    )  # fmt: skip
