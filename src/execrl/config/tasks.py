"""``[tasks]`` and ``[scheduler]``: what the run trains and evaluates on, and how each step draws it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from execrl.config.base import Section


class TaskSection(Section):
    """The training mixture (many domains trained jointly) and the held-out evaluation suites."""

    suites: dict[str, float] = Field(
        default_factory=lambda: {"functions": 0.8, "structured": 0.2},
        description="training mixture: registered suite or task JSONL path/URL -> weight (> 0)",
    )
    max_difficulty: int = Field(1, ge=1, le=5, description="train only on tasks up to this difficulty")
    eval_suites: list[str] = Field(
        default_factory=lambda: ["functions", "structured"],
        description="suites (or task files) whose test split is evaluated before and after training",
    )
    eval_tasks_per_suite: int = Field(24, ge=1, description="spread evenly over the held-out split")

    @model_validator(mode="after")
    def _weights_positive(self) -> TaskSection:
        if not self.suites:
            raise ValueError("tasks.suites is empty; set e.g. tasks.suites={functions=1.0}")
        bad = {k: v for k, v in self.suites.items() if not v > 0}
        if bad:
            raise ValueError(f"tasks.suites weights must be > 0, got {bad}")
        return self

    @field_validator("suites")
    @classmethod
    def _train_suites_exist(cls, value: dict[str, float]) -> dict[str, float]:
        _check_suites(list(value), "train")
        return value

    @field_validator("eval_suites")
    @classmethod
    def _eval_suites_exist(cls, value: list[str]) -> list[str]:
        _check_suites(value, "test")
        return value


def _check_suites(names: list[str], split: str) -> None:
    """Each name is a task file path/URL, or a registered suite that has ``split`` (checked at load, so a
    typo fails before the model loads rather than after)."""
    from execrl.tasks.errors import SuiteError
    from execrl.tasks.registry import is_task_source, suite_splits

    for name in names:
        if is_task_source(name):
            continue
        try:
            splits = suite_splits(name)
        except SuiteError as exc:
            raise ValueError(str(exc)) from None
        if split not in splits:
            raise ValueError(f"suite {name!r} has no {split!r} split (it has {list(splits)})")


class SchedulerSection(Section):
    """Which tasks each step draws (``execrl.scheduler``): the static ``tasks.suites`` mixture, or the
    adaptive one that moves samples toward domains and tasks whose groups are informative."""

    mode: Literal["static", "adaptive"] = Field(
        "adaptive",
        description="static: the tasks.suites mixture as given; adaptive: by learnability p(1-p)",
    )
    size_temperature: float = Field(
        0.0, ge=0, description="> 0: scale tasks.suites weights by n_tasks ** (1/T); 0 = off"
    )
    floor: float = Field(
        0.2, gt=0, le=1, description="adaptive: share of samples always spread by the static mixture"
    )
    domain_ema: float = Field(0.3, gt=0, le=1, description="adaptive: weight of a domain's newest group")
    task_ema: float = Field(0.5, gt=0, le=1, description="adaptive: weight of a task's newest group")
    revisit_weight: float = Field(
        0.01, gt=0, le=0.25, description="adaptive: weight of a solved/hopeless task (an unseen one is 0.25)"
    )
    staleness_steps: float = Field(200.0, gt=0, description="adaptive: steps for a solved task to double")
