"""``SftConfig``: what ``execrl sft`` reads (supervised fine-tuning on chat rows, issue 39).

    execrl sft 'data.train_files=["rows.jsonl"]' optim.learning_rate=1e-5
    execrl sft --print-config

Its own sections are ``[data]`` (the rows and the held-out rows) and ``[optim]`` (AdamW, the schedule and
the packed rows of a step). The rest are ``execrl train``'s sections, reused as they are: the run, the
model, LoRA, checkpoints, telemetry, and the held-out suite evaluation before and after training
(``[eval]``, ``[tasks]`` eval suites, ``[rollout]`` eval decoding, ``[reward]``, ``[sandbox]``,
``[audit]``, ``[tools]``), which runs through the same code as ``execrl train``'s: ``eval_view`` hands it a
``TrainConfig`` made of these very sections. ``[tools]``: ``call_format`` is how rows' tool calls are
written (``tools/render.py``); ``enabled = true`` evaluates with tool episodes (the ``tools`` suite).

Knobs of those sections that SFT does not use (the training mixture ``tasks.suites``, the rollout's group
sizes and length curriculum) are refused when set, not silently ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from execrl.config.algorithm import RolloutSection
from execrl.config.base import Section
from execrl.config.infra import TelemetrySection
from execrl.config.lora import LoraSection
from execrl.config.run import CheckpointSection, ModelSection, RunSection
from execrl.config.scoring import AuditSection, EvalSection, RewardSection, SandboxSection
from execrl.config.tasks import TaskSection
from execrl.config.tools import ToolsSection
from execrl.config.train import TrainConfig

__all__ = ["SftConfig", "SftDataSection", "SftOptimSection", "SftRunSection"]

# The [rollout] fields the held-out evaluation reads (suite eval: eval_max_new_tokens; tool episodes: the
# engine, top_p, top_k); the others are training knobs of execrl train.
_ROLLOUT_USED = frozenset({"engine", "eval_max_new_tokens", "top_p", "top_k"})


class SftRunSection(RunSection):
    """The run: name, directory, seed, length, wall-time budget."""

    name: str = Field("sft-smollm2", min_length=1, description="also the run directory's name prefix")
    total_steps: int | None = Field(  # type: ignore[assignment]
        None, ge=1, description="optimizer steps; unset: optim.epochs passes over the training rows"
    )
    max_wall_time_s: float = Field(
        3600.0, gt=0, description="stop training past this budget (checkpoint; the final eval still runs)"
    )


class SftDataSection(Section):
    """The chat rows: JSONL, one conversation per line (``messages``, optionally ``tools``)."""

    train_files: list[str] = Field(
        default_factory=list,
        description="JSONL files of training rows (execrl tasks transcripts writes them)",
    )
    heldout_files: list[str] = Field(
        default_factory=list, description="JSONL files of held-out rows (loss before and after training)"
    )
    heldout_share: float = Field(
        0.05, ge=0, lt=1,
        description="without heldout_files: this share of the training rows (at least one, seeded) is held "
        "out instead; 0 = no held-out loss",
    )  # fmt: skip
    max_bad_share: float = Field(
        0.0, ge=0, le=1,
        description="share of bad rows (no assistant turn, unknown role, over-long, malformed tool_calls) "
        "tolerated: each is reported with file:line and counted; above it nothing is trained",
    )  # fmt: skip

    @field_validator("train_files", "heldout_files")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        if any(not path.strip() for path in value) or len(set(value)) != len(value):
            raise ValueError(f"an empty or repeated path in {value}")
        return value

    @model_validator(mode="after")
    def _one_heldout_source(self) -> SftDataSection:
        if self.heldout_files and "heldout_share" in self.model_fields_set and self.heldout_share > 0:
            raise ValueError("data.heldout_files and data.heldout_share > 0 both name held-out rows; set one")
        return self


class SftOptimSection(Section):
    """AdamW, its learning-rate schedule, and the packed rows of one optimizer step."""

    learning_rate: float = Field(2e-5, gt=0, description="AdamW learning rate after warm-up")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (every parameter)")
    warmup_steps: int = Field(0, ge=0, description="steps of linear learning-rate warm-up")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "cosine", description="after warm-up: constant, or a linear/cosine decay to 0 at the last step"
    )
    max_grad_norm: float = Field(1.0, gt=0, description="clip the gradient's norm to this")
    epochs: int = Field(1, ge=1, description="passes over the training rows (when run.total_steps is unset)")
    tokens_per_row: int = Field(
        2048, ge=16,
        description="capacity of one packed row (one forward/backward, no padding); a longer conversation "
        "is a bad row",
    )  # fmt: skip
    share_prefix_tokens: int = Field(
        32, ge=0,
        description="a prefix of at least this many tokens that several conversations of a row begin with "
        "(a system prompt, tool declarations) is computed once, exactly (trainer/packing.py); 0 = off",
    )  # fmt: skip
    rows_per_step: int = Field(
        4,
        ge=1,
        description="packed rows per optimizer step; the loss is the mean over all their target tokens",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute each decoder layer in backward (long rows; execrl.trainer.checkpointing)",
    )


class SftConfig(Section):
    """Everything ``execrl sft`` reads."""

    run: SftRunSection = Field(default_factory=SftRunSection, description="name, directory, seed, budget")
    model: ModelSection = Field(default_factory=ModelSection, description="the starting model")
    data: SftDataSection = Field(default_factory=SftDataSection, description="training and held-out rows")
    optim: SftOptimSection = Field(
        default_factory=SftOptimSection, description="AdamW, schedule, packed rows"
    )
    lora: LoraSection = Field(
        default_factory=LoraSection, description="LoRA adapters instead of every weight"
    )
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection, description="checkpoints")
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection, description="metric sinks, alarms")
    eval: EvalSection = Field(default_factory=EvalSection, description="suite evaluation before and after")
    tasks: TaskSection = Field(
        default_factory=TaskSection, description="the suites evaluated (eval_suites); suites is not used"
    )
    rollout: RolloutSection = Field(
        default_factory=RolloutSection, description="the evaluation's decoding (engine, eval_max_new_tokens)"
    )
    reward: RewardSection = Field(default_factory=RewardSection, description="how the evaluation scores")
    sandbox: SandboxSection = Field(
        default_factory=SandboxSection, description="where evaluated programs run"
    )
    audit: AuditSection = Field(default_factory=AuditSection, description="the blind audit of the evaluation")
    tools: ToolsSection = Field(
        default_factory=ToolsSection,
        description="call_format of the rows' tool calls; enabled = evaluate with tool episodes",
    )

    @model_validator(mode="after")
    def _unused_knobs_unset(self) -> SftConfig:
        default = RolloutSection()
        unused = [
            f"rollout.{key}"
            for key in RolloutSection.model_fields
            if key not in _ROLLOUT_USED and getattr(self.rollout, key) != getattr(default, key)
        ]
        if self.tasks.suites != TaskSection().suites:
            unused.append("tasks.suites (SFT trains on data.train_files)")
        if unused:
            raise ValueError(f"{', '.join(unused)}: not used by execrl sft; remove them")
        self.eval_view()  # the evaluation's own checks (e.g. tools.enabled with sandbox.urls)
        return self

    def eval_view(self) -> TrainConfig:
        """The ``TrainConfig`` the held-out evaluation reads, made of this config's own sections."""
        run = RunSection(name=self.run.name, output_dir=self.run.output_dir, seed=self.run.seed)
        tools = self.tools if self.tools.enabled else ToolsSection()
        return TrainConfig(
            run=run, model=self.model, tasks=self.tasks, rollout=self.rollout, lora=self.lora,
            reward=self.reward, sandbox=self.sandbox, eval=self.eval, audit=self.audit, tools=tools,
        )  # fmt: skip
