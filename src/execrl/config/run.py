"""``[run]``, ``[model]`` and ``[checkpoint]``: the run itself, its starting model and its checkpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from execrl.config.base import Section


class RunSection(Section):
    """The run: name, directory, seed, length, wall-time budget."""

    name: str = Field("grpo-smollm2", min_length=1, description="also the run directory's name prefix")
    output_dir: str = Field(
        "runs",
        description="where run directories are made: a local path, or an fsspec URL (s3://bucket/runs) "
        "mirrored from a local staging directory",
    )
    seed: int = Field(0, description="seeds rollouts, task draws, the audit and evaluation, and the RNGs")
    total_steps: int = Field(12, ge=1, description="training steps (one rollout batch, one update each)")
    max_wall_time_s: float = Field(
        11 * 60,
        gt=0,
        description="stop training (base eval included) past this budget; the final eval still runs",
    )
    inject_nan_loss_at_step: int | None = Field(
        None, ge=0, description="fault injection for testing alarms: that step's loss becomes NaN"
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value: str) -> str:
        if "/" in value or "\0" in value or value in (".", "..") or len(value.encode("utf-8")) > 200:
            raise ValueError("must be a file name: no '/', no NUL, not '.' or '..', at most 200 bytes")
        return value


class ModelSection(Section):
    """The policy the run starts from."""

    path: str = Field(
        "smollm2-135m-instruct",
        description="the embedded default, a local Hugging Face directory or an execrl checkpoint directory",
    )
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="the weights' dtype while training")
    torch_threads: int = Field(2, ge=1, description="PyTorch intra-op threads (torch.set_num_threads)")


class CheckpointSection(Section):
    """Atomic checkpoints of model, optimizer, LR schedule, RNG, data and scheduler state."""

    every_steps: int = Field(5, ge=1, description="checkpoint every N steps (and after the last or a stop)")
    keep_last: int = Field(2, ge=1, description="checkpoints kept; older ones are deleted")
