"""The staged config (``config/stages.py``): every stage validated as its command's config before anything
runs, errors naming ``stages[i] (name).config`` and the key; what the staged run sets is refused in a stage;
a stage's config gets its directory, the previous model and the sampled rows."""

from __future__ import annotations

import pytest

from execrl.config import ConfigError, SftConfig, TrainConfig
from execrl.config.load import validate_typed
from execrl.config.stages import StagedConfig, check_stages, stage_config


def _staged(*stages: dict[str, object]) -> StagedConfig:
    return validate_typed(StagedConfig, {"run": {"name": "s"}, "stages": list(stages)}, source="staged.toml")


SFT = {"name": "sft", "kind": "sft", "config": {"data": {"train_files": ["a.jsonl"]}}}
ROWS = {"name": "rows", "kind": "sample", "limit": 4}
RFT = {"name": "rft", "kind": "sft", "rows_from": ["rows"]}
RL = {"name": "rl", "kind": "train", "config": {"optim": {"learning_rate": 1e-6}}}


def test_each_stage_config_gets_its_directory_the_previous_model_and_the_rows() -> None:
    staged = _staged(SFT, ROWS, RFT, RL)
    check_stages(staged)
    rft = stage_config(staged, 2, output_dir="d/2-rft", model_path="d/0-sft/model", rows={"rows": "r.jsonl"})
    assert isinstance(rft, SftConfig)
    assert (rft.run.output_dir, rft.run.name, rft.model.path) == ("d/2-rft", "rft", "d/0-sft/model")
    assert rft.data.train_files == ["r.jsonl"]
    rl = stage_config(staged, 3, output_dir="d/3-rl", model_path="d/2-rft/model")
    assert isinstance(rl, TrainConfig) and rl.optim.learning_rate == 1e-6 and rl.model.path == "d/2-rft/model"


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ((SFT, {**RL, "config": {"optim": {"nosuch": 1}}}), "stages[1] (rl).config: invalid configuration: optim.nosuch"),
        ((SFT, {**RL, "config": {"rollout": {"samples_per_prompt": 1}}}), "rollout.samples_per_prompt"),
        (({**SFT, "nosuch": 1},), "stages.0.nosuch: unknown key"),
        (({**SFT, "kind": "dpo"},), "stages.0.kind"),
        ((SFT, RFT), "rows_from 'rows' is not an earlier sample stage"),
        ((SFT, SFT), "two stages are named 'sft'"),
        (({**RL, "config": {"run": {"output_dir": "x"}}},), "config.run.output_dir is set by the staged run"),
        (({**RL, "limit": 3},), "min_reward and limit are for sample stages"),
        ((), "stages"),
    ],
)  # fmt: skip
def test_a_bad_stage_is_an_error_naming_the_key(stages: tuple[dict[str, object], ...], message: str) -> None:
    with pytest.raises(ConfigError, match="^staged.toml") as info:
        check_stages(_staged(*stages), source="staged.toml")
    assert message in str(info.value)
