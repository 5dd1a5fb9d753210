"""The static mixture as a scheduler (fixed weights, optionally tempered by domain size), and the factory.

Temperature sampling by size (Arivazhagan et al. 2019, "Massively Multilingual Neural Machine Translation in
the Wild", arXiv 1907.05019): a domain's share is proportional to ``weight * n_tasks ** (1 / T)``; T = 1 is
proportional to size, a large T tends to the plain weights, so big domains do not drown small ones.

The static scheduler keeps ``MixtureSampler``'s draws (seeded epochs within each suite) and has no state:
``observe`` does nothing and the checkpoint carries only its kind. DAPO resampling rounds draw from a
second stream seeded apart, so the main stream's data position never depends on how many rounds ran.

With a prompt-length cap in stages (``prompt_cap.py``) the run's scheduler is a ``StagedScheduler``: one
static scheduler per stage over that stage's filtered suites, all with the same prior (tempered by the
unfiltered suites' sizes, so shares do not jump at a stage); step t asks the scheduler of its stage. Each
stage's draws are its own ``MixtureSampler`` stream counted from step 0, so a stage starts mid-epoch of
its suites' order (still without replacement within each epoch) and the draws stay a pure function of
(seed, suites, weights, step, stages).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal

from execrl.scheduler.adaptive import AdaptiveScheduler, AdaptiveSettings, T, _check_mixture, suite_of_task
from execrl.scheduler.mixture import MixtureSampler
from execrl.scheduler.outcomes import GroupOutcome
from execrl.scheduler.prompt_cap import PromptStage, stage_at

_EXTRA_STREAM = 7919  # seed offset of the resampling stream (a prime, far from small user seeds)


def tempered_weights(
    suites: Mapping[str, Sequence[Any]], weights: Mapping[str, float], temperature: float
) -> dict[str, float]:
    """``weights`` scaled by ``n_tasks ** (1 / temperature)``; ``temperature == 0`` leaves them as they are."""
    if temperature < 0:
        raise ValueError(f"size temperature must be >= 0 (0 = off), got {temperature}")
    _check_mixture(suites, weights)
    if temperature == 0:
        return dict(weights)
    return {name: w * len(suites[name]) ** (1.0 / temperature) for name, w in weights.items()}


@dataclass(frozen=True)
class StaticScheduler(Generic[T]):
    suites: Mapping[str, Sequence[T]]
    weights: Mapping[str, float]
    seed: int = 0
    rounds_per_step: int = 1  # 1 + the most resampling rounds a step may take

    def __post_init__(self) -> None:
        _check_mixture(self.suites, self.weights)
        object.__setattr__(self, "_suite_of", suite_of_task(self.suites, self.weights))

    def domain_of(self, task_id: str) -> str:
        suite: str = self._suite_of[task_id]  # type: ignore[attr-defined]
        return suite

    def domain_weights(self) -> dict[str, float]:
        total = sum(self.weights.values())
        return {name: self.weights[name] / total for name in sorted(self.weights)}

    def tasks_for_step(self, step: int, prompts_per_step: int, round_: int = 0) -> list[T]:
        if round_ == 0:
            main = MixtureSampler(self.suites, self.weights, seed=self.seed)
            return main.tasks_for_step(step, prompts_per_step)
        if round_ >= self.rounds_per_step:
            raise ValueError(f"round {round_} past the bound of {self.rounds_per_step - 1} resampling rounds")
        extra = MixtureSampler(self.suites, self.weights, seed=self.seed + _EXTRA_STREAM)
        index = step * self.rounds_per_step + round_ - 1
        return extra.tasks_for_step(index, prompts_per_step)

    def observe(self, step: int, outcomes: Iterable[GroupOutcome]) -> None:
        """Static weights learn nothing."""

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "static"}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != "static":
            raise ValueError(
                f"checkpoint holds scheduler state of kind {state.get('kind')!r}, this run uses 'static'; "
                "resume with the scheduler.mode the run was started with"
            )


@dataclass(frozen=True)
class StagedScheduler(Generic[T]):
    """One static scheduler per prompt-cap stage (see the module docstring); stateless like them."""

    stages: tuple[tuple[int, StaticScheduler[T]], ...]  # (from_step, scheduler), from step 0, increasing

    def __post_init__(self) -> None:
        steps = [s for s, _ in self.stages]
        if not steps or steps[0] != 0 or steps != sorted(set(steps)):
            raise ValueError(f"stages must start at step 0 and strictly increase; got {steps}")
        merged: dict[str, str] = {}
        for _, sched in self.stages:
            merged.update(sched._suite_of)  # type: ignore[attr-defined]
        object.__setattr__(self, "_suite_of", merged)

    def at(self, step: int) -> StaticScheduler[T]:
        return [sched for from_step, sched in self.stages if from_step <= step][-1]

    def domain_of(self, task_id: str) -> str:
        suite: str = self._suite_of[task_id]  # type: ignore[attr-defined]
        return suite

    def domain_weights(self) -> dict[str, float]:
        return self.stages[0][1].domain_weights()  # the same prior in every stage

    def tasks_for_step(self, step: int, prompts_per_step: int, round_: int = 0) -> list[T]:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return self.at(step).tasks_for_step(step, prompts_per_step, round_)

    def observe(self, step: int, outcomes: Iterable[GroupOutcome]) -> None:
        """Static weights learn nothing."""

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "static"}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stages[0][1].load_state_dict(state)


Scheduler = StaticScheduler[Any] | AdaptiveScheduler[Any] | StagedScheduler[Any]


def build_scheduler(
    mode: Literal["static", "adaptive"],
    suites: Mapping[str, Sequence[T]],
    weights: Mapping[str, float],
    *,
    seed: int,
    size_temperature: float = 0.0,
    settings: AdaptiveSettings | None = None,
    rounds_per_step: int = 1,
    prompt_stages: Sequence[PromptStage[T]] = (),
) -> StaticScheduler[T] | AdaptiveScheduler[T] | StagedScheduler[T]:
    """The run's task scheduler; ``weights`` (tempered by size when asked) are the static prior. With
    ``prompt_stages`` each stage draws from its filtered suites (one stage: a plain scheduler over them)."""
    if mode not in ("static", "adaptive"):
        raise ValueError(f"unknown scheduler mode {mode!r}; choose 'static' or 'adaptive'")
    prior = tempered_weights(suites, weights, size_temperature)
    if prompt_stages:
        stage_at(prompt_stages, 0)  # the stages start at step 0
    if mode == "adaptive":
        stages = tuple((s.from_step, s.suites) for s in prompt_stages)
        return AdaptiveScheduler(
            suites, prior, seed=seed, settings=settings or AdaptiveSettings(), stages=stages
        )
    if not prompt_stages:
        return StaticScheduler(suites, prior, seed=seed, rounds_per_step=rounds_per_step)
    if len(prompt_stages) == 1:
        return StaticScheduler(prompt_stages[0].suites, prior, seed=seed, rounds_per_step=rounds_per_step)
    return StagedScheduler(
        tuple(
            (s.from_step, StaticScheduler(s.suites, prior, seed=seed, rounds_per_step=rounds_per_step))
            for s in prompt_stages
        )
    )
