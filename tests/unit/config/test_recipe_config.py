"""The run config: defaults, overrides, errors that name the key, TOML round trip; the task mixture."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from execrl.config import ConfigError, load_config, to_toml, validate_config
from execrl.scheduler import MixtureSampler
from execrl.tasks.schema import MathSpec, Task, TaskMetadata


def test_defaults_are_the_main_job() -> None:
    config = load_config()
    assert config.model.path == "smollm2-135m-instruct"
    assert config.rollout.samples_per_prompt >= 2
    assert config.algorithm.kl_coef == 0.0  # no reference model is loaded by default
    assert config.sequences_per_step == config.rollout.prompts_per_step * config.rollout.samples_per_prompt


def test_overrides_parse_toml_values() -> None:
    config = load_config(
        None,
        [
            "rollout.samples_per_prompt=6",
            "tasks.suites={functions=0.5, math=0.5}",
            "optim.learning_rate=3e-6",
            'run.name="x y"',
        ],
    )
    assert config.rollout.samples_per_prompt == 6
    assert config.tasks.suites == {"functions": 0.5, "math": 0.5}
    assert config.optim.learning_rate == 3e-6 and config.run.name == "x y"


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("rollout.sample_per_prompt=4", "rollout.sample_per_prompt: unknown key"),
        ("rollout.samples_per_prompt=1", "rollout.samples_per_prompt"),
        ("tasks.suites={functions=0}", "weights must be > 0"),
        ("optim.learning_rate=-1", "optim.learning_rate"),
        ("nosuchsection.x=1", "nosuchsection: unknown key"),
        ("novalue", "must look like section.key=value"),
    ],
)
def test_errors_name_the_key(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert needle in str(info.value)


def test_toml_round_trip_and_file(tmp_path: Path) -> None:
    config = load_config(None, ["rollout.top_k=16", 'telemetry.alarms=[{name="kl_high", threshold=0.5}]'])
    text = to_toml(config)
    assert validate_config(tomllib.loads(text)) == config
    path = tmp_path / "run.toml"
    path.write_text(text)
    assert load_config(path, ["rollout.top_k=8"]).rollout.top_k == 8


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nname=1")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)


def _tasks(name: str, count: int) -> list[Task]:
    return [
        Task(id=f"{name}/{i}", domain="math", prompt="p", spec=MathSpec("1"), metadata=TaskMetadata(name))
        for i in range(count)
    ]


def test_mixture_is_deterministic_per_step_and_covers_each_suite_before_repeating() -> None:
    sampler = MixtureSampler({"a": _tasks("a", 5), "b": _tasks("b", 3)}, {"a": 1.0, "b": 1.0}, seed=3)
    steps = [[t.id for t in sampler.tasks_for_step(s, 4)] for s in range(6)]
    again = MixtureSampler({"a": _tasks("a", 5), "b": _tasks("b", 3)}, {"a": 1.0, "b": 1.0}, seed=3)
    assert steps == [[t.id for t in again.tasks_for_step(s, 4)] for s in range(6)]  # resume-exact
    drawn_a = [i for step in steps for i in step if i.startswith("a/")]
    assert sorted(drawn_a[:5]) == [f"a/{i}" for i in range(5)]  # an epoch: every task once first


def test_mixture_weights_and_errors() -> None:
    sampler = MixtureSampler({"a": _tasks("a", 50), "b": _tasks("b", 50)}, {"a": 9.0, "b": 1.0})
    drawn = [t.id[0] for s in range(50) for t in sampler.tasks_for_step(s, 4)]
    assert drawn.count("a") > 3 * drawn.count("b")
    with pytest.raises(ValueError, match="no tasks loaded"):
        MixtureSampler({"a": _tasks("a", 2)}, {"a": 1.0, "c": 1.0})
    with pytest.raises(ValueError, match="no tasks after filtering"):
        MixtureSampler({"a": []}, {"a": 1.0})


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["rollout.length_rise_factor=2"], "length_rise_max_tokens"),
        (["rollout.length_rise_factor=2", "rollout.length_rise_max_tokens=512", "algorithm.async_steps=1"],
         "async_steps=0"),
        (["algorithm.overlong_buffer_tokens=64", "rollout.max_new_tokens_stages=[[0, 32], [5, 128]]"],
         "smallest length cap"),
        (["rollout.length_rise_factor=2", "rollout.length_rise_max_tokens=200", "tools.enabled=true"],
         "tools.max_turn_tokens (256)"),  # with tools the curriculum caps each turn from tools.max_turn_tokens
    ],
)  # fmt: skip
def test_length_curriculum_and_overlong_settings_are_checked_at_load(
    overrides: list[str], needle: str
) -> None:
    """The curriculum's and DAPO's knobs fail at load, naming what to set, not mid-run."""
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert needle in str(info.value)
    config = load_config(None, ["rollout.max_new_tokens_stages=[[0, 32], [5, 128]]"])
    assert config.rollout.max_new_tokens_stages == [(0, 32), (5, 128)]
    for environment in (["refine.max_turns=2"], ["tools.enabled=true"]):  # every environment runs it now
        load_config(None, ["rollout.max_new_tokens_stages=[[0, 32]]", *environment])


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (
            ["trainer.strategy=fsdp", "algorithm.async_steps=1", "executor.max_weight_staleness=1"],
            "async_steps",
        ),
        (["trainer.strategy=fsdp", "run.output_dir=s3://bucket/runs"], "URL"),
        (["trainer.precision=bf16-mixed", "model.dtype=bfloat16"], "model.dtype=float32"),
        (["trainer.strategy=zero3"], "trainer.strategy"),
        (["trainer.weight_sync_bucket_mb=0"], "weight_sync_bucket_mb"),
    ],
)
def test_trainer_section_refuses_what_it_does_not_run(overrides: list[str], needle: str) -> None:
    """``[trainer]``: the sharded trainer runs GRPO and PPO, not async; bf16-mixed needs fp32 master weights."""
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


def test_trainer_section_defaults_are_one_process_fp32() -> None:
    from execrl.components import setup, sharding

    config = load_config(None, ["trainer.precision=bf16-mixed", "trainer.async_checkpoint=true"])
    assert load_config().trainer.strategy == "single" and load_config().trainer.precision == "fp32"
    assert setup.trainer_config(config).precision == "bf16-mixed"
    settings = sharding.sharding_settings(config)
    assert (settings.precision, settings.async_checkpoint) == ("bf16-mixed", True)
