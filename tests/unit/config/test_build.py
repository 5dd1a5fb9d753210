"""One source per knob: internal configs are built from the config sections by field name.

Guards against the three-places problem (issue 22): a knob in a pydantic section, again in an internal
dataclass, and copied between them by a hand-written mapper that could forget a field (which then
silently kept its default) or copy the wrong one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from execrl.components import setup
from execrl.config import TrainConfig, build, load_config, sources
from execrl.config.scoring import RewardSection


@dataclass(frozen=True)
class _Target:
    mode: str
    no_code_penalty: float
    extra: int = 3
    names: tuple[str, ...] = ()


def test_build_fills_by_name_and_takes_derived_values() -> None:
    section = RewardSection(mode="binary", no_code_penalty=0.5)
    built = build(_Target, section, names=("a", "b"), defaults=("extra",))
    assert built == _Target(mode="binary", no_code_penalty=0.5, extra=3, names=("a", "b"))
    assert sources(_Target, section, names=[], defaults=("extra",)) == {
        "mode": "RewardSection.mode",
        "no_code_penalty": "RewardSection.no_code_penalty",
        "extra": "default",
        "names": "derived",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"names": ()}, r"_Target.extra has no source"),  # forgotten: never a silent default
        ({"names": (), "extra": 1, "defaults": ("extra",)}, r"_Target.extra has 2 sources"),
        ({"names": (), "mode": "x", "defaults": ("extra",)}, r"_Target.mode has 2 sources"),
        ({"names": (), "defaults": ("extra", "nope")}, r"_Target has no parameter 'nope'"),
        ({"names": (), "typo": 1, "defaults": ("extra",)}, r"_Target has no parameter 'typo'"),
    ],
)
def test_build_refuses_a_parameter_without_exactly_one_source(kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        build(_Target, RewardSection(), **kwargs)


def test_a_default_is_kept_only_where_there_is_one() -> None:
    with pytest.raises(TypeError, match="_Target.mode has no default to keep"):
        build(_Target, defaults=("mode", "no_code_penalty", "extra", "names"))


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ['sandbox.urls=["http://127.0.0.1:9"]', "algorithm.advantage_estimator=gae", "refine.max_turns=1"],
        ["refine.max_turns=3", "refine.feedback=names", "scheduler.mode=static"],
        ["tools.enabled=true", "tools.max_tool_calls=3", 'tools.default_tools=["python", "run_tests"]'],
    ],
)
def test_every_internal_config_of_a_run_has_a_source_for_every_field(overrides: list[str]) -> None:
    """Each builder the recipes and workers use succeeds (``build`` raises on a field with no source) and
    copies the knobs it names."""
    from execrl.distributed.faults import RetryPolicy
    from execrl.recipes.evaluate import run_eval_config
    from execrl.refine.env import RefineEnvironment

    config = load_config(None, overrides)
    trainer = setup.trainer_config(config)
    assert (trainer.learning_rate, trainer.advantage_std_eps) == (
        config.optim.learning_rate,
        config.algorithm.std_eps,
    )
    assert trainer.logprob_temperature == config.rollout.temperature
    assert (trainer.total_steps, trainer.seed) == (config.run.total_steps, config.run.seed)
    reward = setup.reward_config(config)
    assert reward.limits.cpu_time_s == reward.limits.timeout_s == config.sandbox.timeout_s
    assert setup.sampling_params(config).top_k == config.rollout.top_k
    assert run_eval_config(config).max_new_tokens == config.rollout.eval_max_new_tokens
    if config.refine.multi_turn:
        refine = RefineEnvironment.from_config(config, runner=None, reward=reward)  # type: ignore[arg-type]
        assert (refine.config.feedback, refine.config.max_turns) == (
            config.refine.feedback,
            config.refine.max_turns,
        )
    if config.tools.enabled:
        from execrl.recipes.tools_rl import tool_config

        tools = tool_config(config)
        assert (tools.max_tool_calls, tools.default_tools) == (3, ("python", "run_tests"))
    section = config.executor
    policy = build(RetryPolicy, section, backoff_s=section.retry_backoff_s, backoff_max_s=5.0)
    assert policy.max_attempts == section.max_attempts


def test_the_sandbox_client_and_scheduler_are_built_by_name() -> None:
    from execrl.recipes.loop import task_scheduler
    from execrl.sandbox.service.client import ClientConfig

    config = load_config(None, ['sandbox.urls=["http://127.0.0.1:9"]', "sandbox.max_attempts=7"])
    client = build(
        ClientConfig, config.sandbox, backoff_s=0.0, backoff_max_s=0.0, defaults=("request_timeout_s",)
    )
    assert client.urls == ("http://127.0.0.1:9",) and client.max_attempts == 7
    scheduler = task_scheduler(load_config(None, ["scheduler.mode=static"]))
    assert type(scheduler).__name__ == "StaticScheduler"


def test_every_config_field_has_a_description() -> None:
    """``--print-config`` prints each field's description; an undocumented knob has none to print."""
    missing, seen = [], 0
    stack = [TrainConfig]
    while stack:
        model = stack.pop()
        for name, info in model.model_fields.items():
            seen += 1
            if not (info.description or "").strip():
                missing.append(f"{model.__name__}.{name}")
            annotation = info.annotation
            inner = getattr(annotation, "__args__", (annotation,))
            stack.extend(t for t in inner if isinstance(t, type) and hasattr(t, "model_fields"))
    assert seen > 100
    assert missing == []


def test_internal_dataclass_fields_are_listed_by_the_builders_they_feed() -> None:
    """A ``defaults=`` name that is no longer a field is refused (the lists cannot go stale)."""
    from execrl.sandbox import Limits
    from execrl.trainer import TrainerConfig

    trainer_fields = {f.name for f in fields(TrainerConfig)}
    assert set(setup.TRAINER_DEFAULTS) <= trainer_fields
    assert set(setup.LIMITS_DEFAULTS) <= {f.name for f in fields(Limits)}
