"""Multi-turn refine RL's pure pieces: the refine step metrics (with the metrics every recipe logs), the
scheduler outcomes, the paired comparison and the refine config checks (hand-computed values)."""

from __future__ import annotations

import pytest

from execrl.config import ConfigError, load_config
from execrl.episodes import Episode, Turn, Verdict, episode_metrics, outcomes_of
from execrl.recipes.evaluate import compare_episode_evals
from execrl.refine.env import MultiTurnConfig
from execrl.refine.metrics import refine_metrics
from execrl.rewards import Score
from execrl.tasks.schema import MathSpec, Task, TaskMetadata


def _episode(task: int, *, turns: int, invalid: int, visible: bool, passed: bool, reward: float,
             model_tokens: int, context: int, valid: bool = True, reason: str = "passed") -> Episode:  # fmt: skip
    """An episode of ``turns`` model turns sharing ``model_tokens`` at the end of a ``context``-token row."""
    prompt = context - model_tokens - 2 * (turns - 1)  # two feedback tokens between turns
    spans, at = [], prompt
    for k in range(turns):
        size = model_tokens // turns + (k < model_tokens % turns)
        spans.append(Turn(at, at + size, "stop"))
        at += size + 2
    mask = tuple(any(t.start <= i < t.end for t in spans) for i in range(context))
    score = Score(reward, valid, passed, float(passed), reason) if valid else Score.invalid(reason)
    return Episode(
        task_index=task, task_id=f"t{task}", sample=0, token_ids=tuple(range(context)), loss_mask=mask,
        logprobs=(0.0,) * context, sampling_logprobs=(0.0,) * context, prompt_tokens=prompt, turns=tuple(spans),
        messages=(), text="", stop="answer", verdict=Verdict(reward, valid, passed, reason, score),
        info={"invalid_turns": float(invalid), "visible_passed": float(visible)},
    )  # fmt: skip


EPISODES = [
    _episode(0, turns=1, invalid=0, visible=True, passed=True, reward=1.0, model_tokens=3, context=5),
    _episode(
        0,
        turns=2,
        invalid=1,
        visible=False,
        passed=False,
        reward=-0.1,
        model_tokens=4,
        context=9,
        reason="wrong_answer",
    ),  # fmt: skip
    _episode(1, turns=2, invalid=0, visible=True, passed=True, reward=1.0, model_tokens=2, context=7),
    _episode(
        1,
        turns=1,
        invalid=1,
        visible=False,
        passed=False,
        reward=-0.1,
        model_tokens=1,
        context=3,
        valid=False,
        reason="sandbox_error",
    ),  # fmt: skip
]


def test_refine_metrics_hand_computed() -> None:
    m = refine_metrics(EPISODES)
    # 6 turns, 2 of them invalid; episodes 1 and 2 got feedback (2 turns), episode 2 ended passing the
    # visible tests: fix rate 1/2; contexts 5, 9, 7, 3 tokens.
    expected = {
        "refine/hidden_pass_rate": 0.5, "refine/turns_mean": 1.5, "refine/invalid_turn_rate": 2 / 6,
        "refine/feedback_rate": 0.5, "refine/fix_rate": 0.5, "refine/context_tokens_mean": 6.0,
    }  # fmt: skip
    assert m.keys() == expected.keys()
    assert all(m[k] == pytest.approx(v) for k, v in expected.items())


def test_the_common_episode_metrics_of_refine_episodes_hand_computed() -> None:
    """The metrics every recipe logs, on refine episodes: rewards over the valid episodes (1, -0.1, 1: mean
    1.9 / 3, deviations 1.1 / 3, -2.2 / 3, 1.1 / 3), the invalid one counted; model tokens 3, 4, 2, 1."""
    m = episode_metrics(EPISODES, max_new_tokens=4)
    expected = {
        "reward/mean": 1.9 / 3, "reward/std": (((1.1**2) * 2 + 2.2**2) / 27) ** 0.5, "reward/pass_rate": 2 / 3,
        "reward/invalid_rate": 0.25, "rollout/response_length_mean": 2.5, "rollout/response_length_max": 4.0,
        "sandbox/error_rate": 0.25, "reward/reason/sandbox_error": 1.0,
    }  # fmt: skip
    assert all(m[k] == pytest.approx(v) for k, v in expected.items()), m


def test_fix_rate_absent_when_no_episode_got_feedback() -> None:
    """A 0 would read as "never fixed" when nothing was tried."""
    m = refine_metrics([EPISODES[0], EPISODES[3]])
    assert "refine/fix_rate" not in m and m["refine/feedback_rate"] == 0.0


def test_episode_outcomes_group_a_tasks_episodes_for_the_scheduler() -> None:
    tasks = [Task(id=f"t{i}", domain="math", prompt="p", spec=MathSpec("1"), metadata=TaskMetadata("s"))
             for i in range(2)]  # fmt: skip
    a, b = outcomes_of(tasks, EPISODES)
    assert (a.task_id, a.rewards, a.passed) == ("t0", (1.0, -0.1), (True, False))
    assert (b.task_id, b.rewards, b.passed) == ("t1", (1.0, -0.1), (True, False))


def test_compare_episode_evals_pairs_by_task() -> None:
    base = {"suites": {"s": {"task_ids": ["a", "b", "c", "d"], "hidden_pass_rate": [0.0, 1.0, 0.0, 1.0],
                             "reward": [0.0, 1.0, 0.5, 1.0], "turns_mean": [2.0, 1.0, 2.0, 1.0]}}}  # fmt: skip
    trained = {"suites": {"s": {"task_ids": ["a", "b", "c", "d"], "hidden_pass_rate": [1.0, 1.0, 0.0, 1.0],
                                "reward": [1.0, 1.0, 0.5, 1.0], "turns_mean": [1.0, 1.0, 2.0, 1.0]}}}  # fmt: skip
    out = compare_episode_evals(base, trained, resamples=500, seed=0)["s"]
    assert out["n_tasks"] == 4 and out["confidence"] == 0.95
    assert out["models"]["base"]["hidden_pass_rate"]["value"] == 0.5
    assert out["models"]["trained"]["hidden_pass_rate"]["value"] == 0.75
    delta = out["delta"]["hidden_pass_rate"]  # per-task differences 1, 0, 0, 0: mean 0.25, never negative
    assert delta["value"] == 0.25 and delta["ci_low"] >= 0.0 and delta["ci_high"] <= 1.0
    assert out["delta"]["turns_mean"]["value"] == -0.25
    trained["suites"]["s"]["task_ids"] = ["a", "b", "c", "x"]
    with pytest.raises(ValueError, match="different tasks"):
        compare_episode_evals(base, trained, resamples=500, seed=0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["refine.invalid_turn_penalty=0.1"], "refine.invalid_turn_penalty=0.1: used only by multi-turn"),
        (['refine.feedback="names"'], "refine.feedback='names': used only by multi-turn"),
        (
            ["refine.max_turns=2", "refine.invalid_turn_penalty=1.5"],
            "refine.invalid_turn_penalty: Input should be less",
        ),
        (["refine.max_turns=9"], "refine.max_turns: Input should be less than or equal to 8"),
        (["refine.max_turns=2", 'refine.feedback="verbose"'], "refine.feedback: Input should be 'pass_fail'"),
    ],
)
def test_refine_config_errors_name_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match="invalid configuration") as info:
        load_config(None, overrides)
    assert message in str(info.value)
    assert "(top level)" not in str(info.value)


def test_the_documented_refine_config_loads() -> None:
    config = load_config("docs/configs/refine_rl.toml")
    assert config.refine.multi_turn and config.refine.max_turns == 3


def test_multi_turn_config_errors_say_which_field() -> None:
    with pytest.raises(ValueError, match="max_turns must be >= 1, got 0"):
        MultiTurnConfig(max_turns=0)
    with pytest.raises(ValueError, match=r"invalid_turn_penalty must lie in \[0, 1\], got -0.5"):
        MultiTurnConfig(invalid_turn_penalty=-0.5)
