"""Adaptive task scheduler: move samples toward domains and tasks whose groups are informative.

Why learnability: a GRPO group teaches only if its rewards differ; for pass/fail rewards the expected
informativeness of a task is p(1-p), p its pass rate. Foster & Foerster 2025 ("Learning to Reason at the
Frontier of Learnability", arXiv 2502.12272) sample prompts in proportion to exactly this and report fewer
wasted (zero-advantage) groups and faster learning than uniform sampling. It needs no extra rollouts (the
scores of the groups already trained on are the measurements) and no per-task difficulty labels, unlike
AdaRFT or a value-model predictor (PCL), which is why it was chosen over them.

Two levels, so hundreds of domains with thousands of tasks stay cheap and a domain's skill, which moves
for all its tasks at once, is tracked even when each task is seen rarely:

* **Domain**: score s_d = exponential moving average of the learnability of its groups (a non-stationary
  bandit value estimate with a constant step, the TD(0) update of SEC, arXiv 2505.14970). Unseen domains
  start at 0.25, the maximum, so every domain is tried (optimism). The sampling weight mixes a floor with
  the learnability share: ``w_d = floor * pi_d + (1 - floor) * pi_d s_d / sum_e pi_e s_e``, where ``pi`` is
  the static mixture (``tasks.suites`` weights). So no domain ever gets less than ``floor * pi_d`` of the
  samples: a domain at 0 now is still revisited, and is picked up again once the model can touch it.
* **Task** (within a domain): each task keeps the moving average of its own groups' learnability, like
  Prioritized Level Replay's per-level score (Jiang et al. 2021, arXiv 2010.03934); a task whose groups
  were all-equal (solved, or hopeless) weighs ``revisit_weight`` plus a staleness term that grows with the steps since it was last drawn (PLR's staleness, so a solved task is revisited
  rarely, not never). An unseen task is expected to be like its domain so far (the domain's score). Within
  one step a task is drawn at most once while the domain has enough tasks.

Determinism: the draws of (step, round) come from a NumPy generator seeded by
``execrl.seeding.stream_rng(seed, "scheduler", step, round)`` and the state, and the state changes only through ``observe``. The
state is plain numbers (``state_dict``), saved in the checkpoint, so a resumed run draws bit-exactly what
the uninterrupted run would have.

With prompt-cap stages (``prompt_cap.py``, ``stages``) step t draws from its stage's filtered suites; the
scores and the per-task memory span the stages (a task over a stage's cap keeps its memory until a later
stage draws it again), and the draws stay a function of (seed, step, round, state, stages).

Limits: learnability uses pass flags; partial-credit rewards count as informative at the lowest level (see
``outcomes.GroupOutcome.learnability``). In async mode the scores arrive one step late; the scheduler then
steers by slightly older information (it never blocks on them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from execrl.scheduler.outcomes import GroupOutcome
from execrl.seeding import stream_rng

OPTIMISTIC = 0.25  # the largest p(1-p): what an unseen domain or task is assumed to offer


class HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=HasId)


@dataclass(frozen=True)
class AdaptiveSettings:
    floor: float = 0.2  # share of samples spread by the static mixture, whatever the scores
    domain_ema: float = 0.3  # weight of the newest group in a domain's score
    task_ema: float = 0.5  # weight of the newest group in a task's score
    revisit_weight: float = 0.01  # a task whose groups were all-equal, relative to an unseen one (0.25)
    staleness_steps: float = 200.0  # steps after which a solved task's weight has grown by revisit_weight

    def __post_init__(self) -> None:
        checks = {
            "floor": 0.0 < self.floor <= 1.0,
            "domain_ema": 0.0 < self.domain_ema <= 1.0,
            "task_ema": 0.0 < self.task_ema <= 1.0,
            "revisit_weight": 0.0 < self.revisit_weight <= OPTIMISTIC,
            "staleness_steps": self.staleness_steps > 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"scheduler settings out of range: {bad} (floor, domain_ema, task_ema in (0, 1]; "
                f"revisit_weight in (0, {OPTIMISTIC}]; staleness_steps > 0)"
            )


@dataclass
class _TaskMemory:
    score: float  # moving average of its groups' learnability
    last_step: int  # the last step it was drawn and observed


@dataclass
class AdaptiveScheduler(Generic[T]):
    """Draws each step's tasks by learnability; ``observe`` feeds back the scored groups."""

    suites: Mapping[str, Sequence[T]]
    weights: Mapping[str, float]  # the static mixture pi (normalised here)
    seed: int = 0
    settings: AdaptiveSettings = AdaptiveSettings()
    domain_score: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, dict[str, _TaskMemory]] = field(default_factory=dict)

    # prompt-cap stages (``prompt_cap.py``): (from_step, the suites filtered by that stage's cap); () = the
    # suites throughout. The scores span stages (a task keeps its memory while a stage leaves it out).
    stages: Sequence[tuple[int, Mapping[str, Sequence[T]]]] = ()

    def __post_init__(self) -> None:
        _check_mixture(self.suites, self.weights)
        self._suite_of = suite_of_task(self.suites, self.weights)
        self._stages = list(self.stages) or [(0, self.suites)]
        if self._stages[0][0] != 0:
            raise ValueError(f"scheduler stages must start at step 0; got {[s for s, _ in self._stages]}")
        for _, stage_suites in self._stages:
            _check_mixture(stage_suites, self.weights)
        self._by_id = [
            {name: {task.id: i for i, task in enumerate(suites[name])} for name in sorted(self.weights)}
            for _, suites in self._stages
        ]
        total = sum(self.weights.values())
        self._prior = {name: self.weights[name] / total for name in sorted(self.weights)}

    def domain_of(self, task_id: str) -> str:
        return self._suite_of[task_id]

    def domain_weights(self) -> dict[str, float]:
        """The current sampling share of each domain (sums to 1)."""
        names = sorted(self._prior)
        scores = [self._prior[n] * self.domain_score.get(n, OPTIMISTIC) for n in names]
        total = sum(scores)
        floor = self.settings.floor if total > 0 else 1.0
        return {
            n: floor * self._prior[n] + (1.0 - floor) * (s / total if total > 0 else 0.0)
            for n, s in zip(names, scores, strict=True)
        }

    def tasks_for_step(self, step: int, prompts_per_step: int, round_: int = 0) -> list[T]:
        """The tasks of (step, round): domains by ``domain_weights``, tasks by their own weights."""
        if step < 0 or prompts_per_step < 1 or round_ < 0:
            raise ValueError(f"need step >= 0, prompts_per_step >= 1, round >= 0; got {step}, "
                             f"{prompts_per_step}, {round_}")  # fmt: skip
        rng = stream_rng(self.seed, "scheduler", step, round_)
        weights = self.domain_weights()
        names = sorted(weights)
        probs = np.array([weights[n] for n in names], dtype=np.float64)
        slots = rng.choice(len(names), size=prompts_per_step, p=probs / probs.sum())
        counts = np.bincount(slots, minlength=len(names))
        drawn = {i: iter(self._draw_tasks(names[i], int(c), step, rng)) for i, c in enumerate(counts) if c}
        return [next(drawn[int(i)]) for i in slots]

    def _stage(self, step: int) -> int:
        return max(i for i, (from_step, _) in enumerate(self._stages) if from_step <= step)

    def _draw_tasks(self, name: str, count: int, step: int, rng: np.random.Generator) -> list[T]:
        tasks = self._stages[self._stage(step)][1][name]
        w = self._task_weights(name, step)
        picked: list[int] = []
        while len(picked) < count:  # without replacement, refilled when the domain runs out
            take = min(count - len(picked), len(tasks))
            picked.extend(int(i) for i in rng.choice(len(tasks), size=take, replace=False, p=w / w.sum()))
        return [tasks[i] for i in picked]

    def _task_weights(self, name: str, step: int) -> np.ndarray:
        s = self.settings
        unseen = max(self.domain_score.get(name, OPTIMISTIC), s.revisit_weight)  # like its domain so far
        index = self._by_id[self._stage(step)][name]
        w = np.full(len(index), unseen, dtype=np.float64)
        for task_id, memory in self.tasks.get(name, {}).items():
            if task_id not in index:  # left out by this step's prompt-cap stage
                continue
            stale = s.revisit_weight * max(step - memory.last_step, 0) / s.staleness_steps
            w[index[task_id]] = min(max(memory.score, s.revisit_weight + stale), OPTIMISTIC)
        return w

    def observe(self, step: int, outcomes: Iterable[GroupOutcome]) -> None:
        """Fold the scored groups of ``step`` into the domain and task scores (in the given order)."""
        s = self.settings
        for outcome in outcomes:
            name = self._suite_of.get(outcome.task_id)
            if name is None:
                raise ValueError(f"observed task {outcome.task_id!r} is in none of the scheduler's suites")
            value = outcome.learnability
            old = self.domain_score.get(name)
            self.domain_score[name] = (
                value if old is None else (1 - s.domain_ema) * old + s.domain_ema * value
            )
            memory = self.tasks.setdefault(name, {}).get(outcome.task_id)
            if memory is None:
                self.tasks[name][outcome.task_id] = _TaskMemory(score=value, last_step=step)
            else:
                memory.score = (1 - s.task_ema) * memory.score + s.task_ema * value
                memory.last_step = step

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers only (what a checkpoint's ``data_state`` may hold); floats round-trip exactly."""
        return {
            "kind": "adaptive",
            "domain_score": dict(self.domain_score),
            "tasks": {
                name: {tid: [m.score, m.last_step] for tid, m in memory.items()}
                for name, memory in self.tasks.items()
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != "adaptive":
            raise ValueError(
                f"checkpoint holds scheduler state of kind {state.get('kind')!r}, this run uses 'adaptive'; "
                "resume with the scheduler.mode the run was started with"
            )
        unknown = [n for n in state["domain_score"] if n not in self._prior]
        if unknown:
            raise ValueError(f"checkpoint scheduler state names domains this run does not load: {unknown}")
        self.domain_score = {n: float(v) for n, v in state["domain_score"].items()}
        self.tasks = {
            name: {tid: _TaskMemory(score=float(v[0]), last_step=int(v[1])) for tid, v in memory.items()}
            for name, memory in state["tasks"].items()
        }


def _check_mixture(suites: Mapping[str, Sequence[Any]], weights: Mapping[str, float]) -> None:
    missing = set(weights) - set(suites)
    if missing:
        raise ValueError(f"mixture weights name suites with no tasks loaded: {sorted(missing)}")
    empty = [name for name in weights if not suites[name]]
    if empty:
        raise ValueError(f"suites {empty} have no tasks after filtering; lower the difficulty filter")
    bad = {k: v for k, v in weights.items() if not (v > 0 and math.isfinite(v))}
    if bad:
        raise ValueError(f"mixture weights must be finite and > 0, got {bad}")


def suite_of_task(suites: Mapping[str, Sequence[HasId]], weights: Mapping[str, float]) -> dict[str, str]:
    """Task id -> the suite it was loaded from; ids must be unique across the mixture's suites."""
    out: dict[str, str] = {}
    for name in sorted(weights):
        for task in suites[name]:
            if task.id in out and out[task.id] != name:
                raise ValueError(
                    f"task id {task.id!r} appears in suite {name!r} and {out[task.id]!r}; the scheduler keys "
                    "its per-task memory and metrics by task id, so ids must be unique across suites"
                )
            out[task.id] = name
    return out
