"""Staged runs (issue 39): one config whose ``[[stages]]`` run in order, each stage's model the next one's.

    [run]
    name = "tools-staged"
    output_dir = "runs"

    [[stages]]
    name = "sft"
    kind = "sft"                      # execrl sft: its config is an SftConfig
    [stages.config]
    data.train_files = ["tools-train.jsonl"]

    [[stages]]
    name = "rft-rows"
    kind = "sample"                   # execrl sample: a TrainConfig (environment, sampling, reward)
    [stages.config]
    rollout.samples_per_prompt = 8

    [[stages]]
    name = "rl"
    kind = "train"                    # execrl train: a TrainConfig
    [stages.config]
    tools.enabled = true

A stage's ``config`` holds the tables of the command's own config (``execrl sft --print-config`` /
``execrl train --print-config``), except ``run.output_dir`` and ``run.name`` (the staged run sets them) and,
after the first model-producing stage, ``model.path`` (the previous stage's model). ``rows_from`` (an ``sft``
stage) adds earlier ``sample`` stages' rows to ``data.train_files``. Every stage's config is validated
before the first stage starts: a bad key is one error naming ``stages[i].config.<key>``.

No torch: the runner is ``recipes/stages.py``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from execrl.config.base import ConfigError, Section

__all__ = [
    "STAGE_KINDS",
    "StageSection",
    "StagedConfig",
    "StagedRunSection",
    "check_stages",
    "is_staged",
    "stage_config",
    "stage_schema",
]

STAGE_KINDS = ("sft", "sample", "train")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SET_BY_STAGES = ("output_dir", "name")  # run.* keys the staged run sets for each stage


class StagedRunSection(Section):
    name: str = Field("staged", description="the staged run's directory is output_dir/<name>-<UTC time>")
    output_dir: str = Field("runs", description="local directory for the staged run (stages inside it)")


class StageSection(Section):
    name: str = Field(
        description="the stage's name (its directory stages/<i>-<name>; rows_from refers to it)"
    )
    kind: Literal["sft", "sample", "train"] = Field(description="sft | sample | train: the command it runs")
    config: dict[str, Any] = Field(
        default_factory=dict, description="the command's own config tables (execrl sft/train --print-config)"
    )
    rows_from: list[str] = Field(
        default_factory=list,
        description="sft: earlier sample stages whose rows are added to data.train_files",
    )
    min_reward: float | None = Field(
        None, ge=-10, le=10, description="sample: keep episodes whose reward reaches this (default: passed)"
    )
    limit: int | None = Field(None, ge=1, description="sample: the first N train tasks of each suite")

    @model_validator(mode="after")
    def _fields_fit_the_kind(self) -> StageSection:
        if not _NAME.match(self.name):
            raise ValueError(f"stage name {self.name!r}: letters, digits, '_', '.', '-' (at most 64)")
        if self.rows_from and self.kind != "sft":
            raise ValueError(f"stage {self.name!r}: rows_from is for sft stages (this one is {self.kind})")
        if self.kind != "sample" and (self.min_reward is not None or self.limit is not None):
            raise ValueError(f"stage {self.name!r}: min_reward and limit are for sample stages")
        run = self.config.get("run", {})
        taken = [k for k in SET_BY_STAGES if isinstance(run, dict) and k in run]
        if taken:
            raise ValueError(
                f"stage {self.name!r}: config.run.{taken[0]} is set by the staged run; remove it"
            )
        return self


class StagedConfig(Section):
    """Everything a staged ``execrl train --config`` reads (module docstring)."""

    run: StagedRunSection = Field(default_factory=StagedRunSection, description="name and directory")
    stages: list[StageSection] = Field(min_length=1, description="run in order, each feeding the next")

    @model_validator(mode="after")
    def _names_and_references(self) -> StagedConfig:
        seen: dict[str, str] = {}
        for stage in self.stages:
            if stage.name in seen:
                raise ValueError(f"stages: two stages are named {stage.name!r}")
            for source in stage.rows_from:
                if seen.get(source) != "sample":
                    raise ValueError(
                        f"stage {stage.name!r}: rows_from {source!r} is not an earlier sample stage"
                    )
            seen[stage.name] = stage.kind
        return self


def is_staged(data: dict[str, Any]) -> bool:
    """Whether a config file's tables are a staged run's (it has ``stages``)."""
    return "stages" in data


def stage_schema(kind: str) -> type[Section]:
    """The config class a stage's ``config`` is validated as."""
    if kind == "sft":
        from execrl.config.sft import SftConfig

        return SftConfig
    if kind in ("sample", "train"):
        from execrl.config.train import TrainConfig

        return TrainConfig
    raise ConfigError(f"stage kind {kind!r}: expected one of {', '.join(STAGE_KINDS)}")


def _merged(config: dict[str, Any], run: dict[str, Any], model_path: str | None) -> dict[str, Any]:
    data = {key: dict(value) if isinstance(value, dict) else value for key, value in config.items()}
    data["run"] = {**data.get("run", {}), **run}
    if model_path is not None:
        data["model"] = {**data.get("model", {}), "path": model_path}
    return data


def stage_config(
    staged: StagedConfig,
    index: int,
    *,
    output_dir: str,
    model_path: str | None = None,
    rows: dict[str, str] | None = None,
    source: str = "config",
) -> Section:
    """Stage ``index``'s own config: its ``config`` tables with ``run.output_dir``/``run.name`` set, the
    previous stage's model (``model_path``) and, for ``rows_from``, the sample stages' ``rows`` files added
    to ``data.train_files``. Raises ``ConfigError`` naming ``stages[index].config`` and the key."""
    from execrl.config.load import validate_typed

    stage = staged.stages[index]
    data = _merged(stage.config, {"output_dir": output_dir, "name": stage.name}, model_path)
    if stage.rows_from:
        known = rows or {}
        data["data"] = dict(data.get("data", {}))
        data["data"]["train_files"] = [
            *data["data"].get("train_files", []), *(known.get(name, f"<rows of {name}>") for name in stage.rows_from)
        ]  # fmt: skip
    return validate_typed(
        stage_schema(stage.kind), data, source=f"{source}: stages[{index}] ({stage.name}).config"
    )


def check_stages(staged: StagedConfig, *, source: str = "config") -> None:
    """Every stage's config validated before the first stage runs (placeholders for what earlier stages
    produce), so a typo in the last stage stops the run before hours of the first."""
    for index in range(len(staged.stages)):
        stage_config(staged, index, output_dir="<staged run>", source=source)
