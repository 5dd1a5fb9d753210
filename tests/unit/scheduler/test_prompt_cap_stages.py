"""The prompt-length cap (``execrl.scheduler.prompt_cap``): the cap of each step, each stage's filtered suites
and what it leaves out, the raise for a suite left empty, and the staged draws (static and adaptive):
only tasks under the step's cap, deterministic, resumable from the adaptive state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from execrl.scheduler import (
    AdaptiveScheduler,
    GroupOutcome,
    PromptCapSettings,
    StagedScheduler,
    StaticScheduler,
    build_scheduler,
)
from execrl.scheduler.prompt_cap import prompt_cap_metrics, prompt_stages, stage_at


@dataclass(frozen=True)
class T:
    id: str


# prompt tokens of each task: a0..a5 have 5, 15, 25, 5, 15, 25 tokens; b0..b3 have 8, 30, 8, 30
TOKENS = {f"a{i}": (5, 15, 25)[i % 3] for i in range(6)} | {f"b{i}": (8, 30)[i % 2] for i in range(4)}
SUITES = {"a": [T(f"a{i}") for i in range(6)], "b": [T(f"b{i}") for i in range(4)]}
WEIGHTS = {"a": 0.5, "b": 0.5}
SETTINGS = PromptCapSettings(max_prompt_tokens=10, max_prompt_tokens_stages=((3, 20), (6, 0)))


def test_the_cap_of_a_step_is_the_last_stage_at_or_before_it() -> None:
    assert [SETTINGS.cap(s) for s in range(8)] == [10, 10, 10, 20, 20, 20, 0, 0]
    assert SETTINGS.stages() == ((0, 10), (3, 20), (6, 0))
    at_zero = PromptCapSettings(max_prompt_tokens=99, max_prompt_tokens_stages=((0, 7), (2, 9)))
    assert at_zero.stages() == ((0, 7), (2, 9))  # a stage at step 0 replaces max_prompt_tokens
    assert PromptCapSettings().stages() == ((0, 0),)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_prompt_tokens_stages": ((3, 8), (3, 16))}, "strictly increase"),
        ({"max_prompt_tokens_stages": ((2, 8), (1, 16))}, "strictly increase"),
        ({"max_prompt_tokens_stages": ((0, -1),)}, "max_prompt_tokens >= 0"),
        ({"max_prompt_tokens": -5}, "max_prompt_tokens must be >= 0"),
    ],
)
def test_bad_settings_name_the_knob(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PromptCapSettings(**kwargs)


def test_each_stage_keeps_the_tasks_under_its_cap_and_counts_the_rest() -> None:
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS)
    assert [(s.from_step, s.cap) for s in stages] == [(0, 10), (3, 20), (6, 0)]
    assert [sorted(t.id for t in s.suites["a"]) for s in stages] == [
        ["a0", "a3"], ["a0", "a1", "a3", "a4"], [f"a{i}" for i in range(6)]
    ]  # fmt: skip
    assert [dict(s.excluded) for s in stages] == [{"a": 4, "b": 2}, {"a": 2, "b": 2}, {"a": 0, "b": 0}]
    assert [prompt_cap_metrics(stages, step)["rollout/tasks_over_prompt_cap"] for step in (0, 2, 3, 6, 50)] == [
        6.0, 6.0, 4.0, 0.0, 0.0
    ]  # fmt: skip
    assert prompt_cap_metrics(stages, 4)["rollout/max_prompt_tokens"] == 20.0
    assert prompt_cap_metrics((), 4) == {}


def test_the_context_bound_lowers_every_stage_including_no_cap() -> None:
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS, context_cap=25)
    assert [s.cap for s in stages] == [10, 20, 25]  # the last stage had no cap of its own
    assert dict(stages[2].excluded) == {"a": 0, "b": 2}  # b1, b3 (30 tokens) never fit


def test_a_suite_left_empty_raises_naming_the_suite_and_the_stage() -> None:
    settings = PromptCapSettings(max_prompt_tokens=0, max_prompt_tokens_stages=((4, 6),))
    with pytest.raises(
        ValueError, match=r"suite 'b' .* at most 6 tokens from step 4 .* shortest prompt has 8"
    ):
        prompt_stages(settings, SUITES, WEIGHTS, TOKENS)
    with pytest.raises(ValueError, match="model's context"):
        prompt_stages(PromptCapSettings(), SUITES, WEIGHTS, TOKENS, context_cap=7)
    with pytest.raises(ValueError, match="no prompt length for task 'a0'"):
        prompt_stages(SETTINGS, SUITES, WEIGHTS, {})


def _long(task_id: str) -> bool:
    return TOKENS[task_id] > 10


@pytest.mark.parametrize("mode", ["static", "adaptive"])
def test_staged_draws_only_take_short_prompts_before_the_stage_and_are_deterministic(mode: str) -> None:
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS)
    sched = build_scheduler(mode, SUITES, WEIGHTS, seed=3, prompt_stages=stages, rounds_per_step=2)  # type: ignore[arg-type]
    again = build_scheduler(mode, SUITES, WEIGHTS, seed=3, prompt_stages=stages, rounds_per_step=2)  # type: ignore[arg-type]
    assert isinstance(sched, StagedScheduler if mode == "static" else AdaptiveScheduler)
    draws = {step: [t.id for t in sched.tasks_for_step(step, 8)] for step in range(10)}
    assert draws == {step: [t.id for t in again.tasks_for_step(step, 8)] for step in range(10)}
    assert not any(_long(i) for step in range(3) for i in draws[step])
    assert not any(TOKENS[i] > 20 for step in range(3, 6) for i in draws[step])
    assert any(TOKENS[i] > 20 for step in range(6, 10) for i in draws[step])  # no cap from step 6
    if mode == "static":  # the DAPO resampling rounds follow the stage too
        extra = [t.id for step in range(3) for t in sched.tasks_for_step(step, 8, 1)]
        assert not any(_long(i) for i in extra)


def test_the_static_stages_draw_what_a_scheduler_over_the_stage_suites_draws() -> None:
    """A stage is a plain static scheduler over its filtered suites with the unfiltered suites' prior."""
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS)
    sched = build_scheduler("static", SUITES, WEIGHTS, seed=1, prompt_stages=stages, size_temperature=1.0)
    assert isinstance(sched, StagedScheduler)
    plain = StaticScheduler(
        stages[1].suites, {"a": 0.5 * 6, "b": 0.5 * 4}, seed=1
    )  # tempered by 6 and 4 tasks
    assert [sched.tasks_for_step(s, 4) for s in (3, 4, 5)] == [plain.tasks_for_step(s, 4) for s in (3, 4, 5)]
    assert sched.domain_weights() == pytest.approx({"a": 0.6, "b": 0.4})
    assert sched.domain_of("b1") == "b" and sched.state_dict() == {"kind": "static"}


def test_adaptive_stages_keep_memory_across_stages_and_resume_exactly() -> None:
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS)
    first = build_scheduler("adaptive", SUITES, WEIGHTS, seed=5, prompt_stages=stages)
    for step in range(8):
        tasks = first.tasks_for_step(step, 3)
        first.observe(step, [GroupOutcome(t.id, (1.0, 0.0), (True, False)) for t in tasks])
    restored = build_scheduler("adaptive", SUITES, WEIGHTS, seed=5, prompt_stages=stages)
    restored.load_state_dict(first.state_dict())
    assert [restored.tasks_for_step(s, 3) for s in range(8, 12)] == [
        first.tasks_for_step(s, 3) for s in range(8, 12)
    ]
    state = first.state_dict()["tasks"]
    assert any(_long(task_id) for memory in state.values() for task_id in memory)  # seen once the cap rose


def test_one_stage_with_the_full_suites_draws_as_no_stages() -> None:
    """Regression guard: the stage machinery does not move the adaptive draws of a run without a cap."""
    stages = prompt_stages(PromptCapSettings(), SUITES, WEIGHTS, TOKENS)
    plain = build_scheduler("adaptive", SUITES, WEIGHTS, seed=2)
    staged = build_scheduler("adaptive", SUITES, WEIGHTS, seed=2, prompt_stages=stages)
    for step in range(6):
        assert plain.tasks_for_step(step, 5) == staged.tasks_for_step(step, 5)
        outcome = [
            GroupOutcome(t.id, (1.0, 0.0, 0.0), (True, False, False)) for t in plain.tasks_for_step(step, 5)
        ]
        plain.observe(step, outcome)
        staged.observe(step, outcome)


def test_stage_at_needs_stages_from_step_zero() -> None:
    stages = prompt_stages(SETTINGS, SUITES, WEIGHTS, TOKENS)
    assert stage_at(stages, 5).from_step == 3
    with pytest.raises(ValueError, match="from step 0"):
        stage_at(stages[1:], 5)
