"""One step's episodes: the step's tasks, sampled through the one rollout loop (``execrl.episodes``) with
the run's environment and backend, judged, and (optionally) refilled by DAPO's dynamic sampling.

The seed of each rollout call is a hash of (run seed, step, round) (``execrl.seeding``), so a resumed run
samples exactly what the uninterrupted run would have and no two (step, round) pairs share a seed. With
``stream`` (``rollout.stream_scoring``) each task's group samples with a seed of its own, (run seed, step,
round, group), so the local engine generates one group per call and the judge scores each finished group
in a background thread while the next one generates (the sandbox workers are separate processes, so the two
really overlap; one group per call loses the batching across groups, which can cost more than the overlap
saves: ``execrl bench pipeline`` measures both).

The executors run exactly these calls wherever they run them (``execrl.distributed``): a step samples the
same in-process and on Ray.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execrl.episodes import RolloutResult, StepEpisodes, run_episodes, sample_groups
from execrl.episodes.loop import TURN_SEED_STRIDE, SeedRule
from execrl.seeding import stream_seed

if TYPE_CHECKING:
    from execrl.episodes import Backend, Environment
    from execrl.rollout.types import SamplingParams
    from execrl.scheduler import Scheduler
    from execrl.tasks.schema import Task

__all__ = ["StepSampler"]


@dataclass(frozen=True)
class StepSampler:
    """Samples a step's episodes: ``environment`` x ``backend`` (module docstring)."""

    environment: Environment
    backend: Backend
    params: SamplingParams  # ``samples_per_prompt`` is the group size; ``max_new_tokens`` the turn cap
    seed: int
    length_cap: Callable[[int], int] | None = None  # step -> the turn cap (execrl.scheduler.length)
    max_episode_tokens: int | None = None  # tokens after the first prompt (multi-turn budgets)
    stream: bool = False

    def step_params(self, step: int, *seed_path: int) -> SamplingParams:
        """``params`` seeded with the hash of (run seed, step, ``seed_path``), capped at the step's length."""
        cap = self.params.max_new_tokens if self.length_cap is None else self.length_cap(step)
        seed = stream_seed(self.seed, "rollout", step, *seed_path)
        return dataclasses.replace(self.params, seed=seed, max_new_tokens=cap)

    def seed_rule(self, step: int, round_: int) -> SeedRule | None:
        """Streaming: each group's own seed (so it is its own engine call); else one seed per turn."""
        if not self.stream:
            return None
        return lambda task, turn: (
            stream_seed(self.seed, "rollout", step, round_, task) + TURN_SEED_STRIDE * turn
        )

    def __call__(self, step: int, tasks: list[Task], round_: int) -> RolloutResult:
        return run_episodes(
            self.environment, self.backend, tasks, params=self.step_params(step, round_),
            max_episode_tokens=self.max_episode_tokens, seed_for=self.seed_rule(step, round_),
            judge_early=self.stream,
        )  # fmt: skip

    def sample_step(
        self,
        step: int,
        scheduler: Scheduler,
        *,
        prompts_per_step: int,
        dynamic: bool,
        max_resample_rounds: int,
    ) -> StepEpisodes:
        """The step's groups: tasks from ``scheduler``, sampled and judged (DAPO refill if ``dynamic``)."""
        return sample_groups(
            scheduler.tasks_for_step(step, prompts_per_step),
            lambda extra_round: scheduler.tasks_for_step(step, prompts_per_step, extra_round + 1),
            lambda tasks, round_: self(step, tasks, round_),
            dynamic=dynamic,
            max_resample_rounds=max_resample_rounds,
        )
