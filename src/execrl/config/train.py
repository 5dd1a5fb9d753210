"""``TrainConfig``: the whole run config, one section per ``[table]``, and the checks across sections."""

from __future__ import annotations

from pydantic import Field, model_validator

from execrl.config.algorithm import AlgorithmSection, OptimSection, RefineSection, RolloutSection
from execrl.config.base import Section
from execrl.config.build import build
from execrl.config.infra import ExecutorSection, TelemetrySection
from execrl.config.lora import LoraSection
from execrl.config.run import CheckpointSection, ModelSection, RunSection
from execrl.config.scoring import AuditSection, EvalSection, RewardSection, SandboxSection
from execrl.config.tasks import SchedulerSection, TaskSection
from execrl.config.tools import ToolsSection
from execrl.config.trainer import TrainerSection
from execrl.config.vllm import VLLMSection
from execrl.scheduler.length import LengthSettings
from execrl.scheduler.prompt_cap import PromptCapSettings


class TrainConfig(Section):
    """Everything ``execrl train`` reads; the defaults are the README's main job."""

    run: RunSection = Field(default_factory=RunSection, description="name, directory, seed, steps, budget")
    model: ModelSection = Field(default_factory=ModelSection, description="the starting policy")
    tasks: TaskSection = Field(default_factory=TaskSection, description="training mixture and eval suites")
    rollout: RolloutSection = Field(default_factory=RolloutSection, description="sampling each step's groups")
    algorithm: AlgorithmSection = Field(
        default_factory=AlgorithmSection, description="advantages, policy loss, KL, DAPO, async"
    )
    optim: OptimSection = Field(default_factory=OptimSection, description="AdamW, LR schedule, micro-batches")
    lora: LoraSection = Field(
        default_factory=LoraSection, description="LoRA adapters instead of every weight"
    )
    reward: RewardSection = Field(default_factory=RewardSection, description="outcomes -> rewards")
    sandbox: SandboxSection = Field(default_factory=SandboxSection, description="where programs run")
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection, description="metric sinks, alarms")
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection, description="checkpoints")
    eval: EvalSection = Field(default_factory=EvalSection, description="base vs trained evaluation")
    audit: AuditSection = Field(
        default_factory=AuditSection, description="held-back tests on passing samples"
    )
    scheduler: SchedulerSection = Field(default_factory=SchedulerSection, description="task draws per step")
    refine: RefineSection = Field(default_factory=RefineSection, description="multi-turn refine RL")
    executor: ExecutorSection = Field(default_factory=ExecutorSection, description="in-process or Ray")
    tools: ToolsSection = Field(default_factory=ToolsSection, description="tool-calling episodes")
    trainer: TrainerSection = Field(
        default_factory=TrainerSection, description="one process or FSDP2 over ranks; precision"
    )
    vllm: VLLMSection = Field(
        default_factory=VLLMSection, description="the vLLM engine (rollout.engine=vllm), its weight sync"
    )

    @model_validator(mode="after")
    def _vllm_settings_apply(self) -> TrainConfig:
        """``[vllm]`` only with ``rollout.engine=vllm``."""
        if self.rollout.engine != "vllm":
            unused = [
                f"vllm.{key}" for key, field in VLLMSection.model_fields.items()
                if getattr(self.vllm, key) != field.default
            ]  # fmt: skip
            if unused:
                raise ValueError(
                    f"{', '.join(unused)}: used only with rollout.engine=vllm; set it or remove them"
                )
        return self

    @model_validator(mode="after")
    def _ray_staleness_covers_the_loop(self) -> TrainConfig:
        executor = self.executor
        if executor.kind == "ray" and self.algorithm.async_steps > executor.max_weight_staleness:
            raise ValueError(
                f"algorithm.async_steps={self.algorithm.async_steps} samples each step with weights "
                f"{self.algorithm.async_steps} update(s) old, beyond executor.max_weight_staleness="
                f"{executor.max_weight_staleness}; set executor.max_weight_staleness="
                f"{self.algorithm.async_steps} (or more)"
            )
        return self

    @model_validator(mode="after")
    def _trainer_strategy_applies(self) -> TrainConfig:
        """Refuse what the sharded trainer does not run, and bf16-mixed over bf16 weights, in one line."""
        trainer = self.trainer
        if trainer.precision == "bf16-mixed" and self.model.dtype == "bfloat16":
            raise ValueError(
                "trainer.precision=bf16-mixed keeps float32 master weights; set model.dtype=float32 "
                "(or trainer.precision=fp32 to train the bfloat16 weights as they are)"
            )
        if trainer.strategy == "single":
            return self
        refused = {  # every environment's episodes become one TrainBatch (episodes_to_batch): all run
            "algorithm.async_steps > 0": self.algorithm.async_steps > 0,
            "run.output_dir on a URL (every rank writes its checkpoint shard to a local or shared path)": (
                "://" in self.run.output_dir and not self.run.output_dir.startswith("file://")
            ),
        }
        bad = [what for what, on in refused.items() if on]
        if bad:
            raise ValueError(
                f"trainer.strategy=fsdp runs the GRPO and PPO recipes (any environment); it does not run "
                f"{', '.join(bad)}"
            )
        return self

    @model_validator(mode="after")
    def _length_curriculum_applies(self) -> TrainConfig:
        rollout = self.rollout
        rising = rollout.length_rise_factor > 1
        base = self.tools.max_turn_tokens if self.tools.enabled else rollout.max_new_tokens
        where = "tools.max_turn_tokens" if self.tools.enabled else "rollout.max_new_tokens"
        if rising and self.algorithm.async_steps:
            raise ValueError(
                "rollout.length_rise_factor > 1 needs algorithm.async_steps=0: the one-step-off loop starts "
                "the next rollout before this step's truncation is known (stages work: max_new_tokens_stages)"
            )
        if rising and rollout.length_rise_max_tokens < base:
            raise ValueError(
                f"rollout.length_rise_factor={rollout.length_rise_factor} needs rollout.length_rise_max_tokens "
                f">= {where} ({base}); got {rollout.length_rise_max_tokens}"
            )
        smallest = min([base, *(cap for _, cap in rollout.max_new_tokens_stages)])
        if self.algorithm.overlong_buffer_tokens > smallest:
            raise ValueError(
                f"algorithm.overlong_buffer_tokens={self.algorithm.overlong_buffer_tokens} exceeds the smallest "
                f"length cap of the run ({smallest} new tokens: {where} and rollout.max_new_tokens_stages)"
            )
        PromptCapSettings(rollout.max_prompt_tokens, tuple(rollout.max_prompt_tokens_stages))  # stage checks
        build(LengthSettings, rollout)  # the length stages' order and values, before any run directory exists
        return self

    @model_validator(mode="after")
    def _episode_environments_apply(self) -> TrainConfig:
        """What the multi-turn environments (refine feedback, tool calls) cannot run, in one line each, and
        fields set for an environment the run does not use."""
        tools, refine = self.tools, self.refine
        if tools.enabled and refine.multi_turn:
            raise ValueError("tools.enabled=true and refine.max_turns > 1 are two environments; choose one")
        if not tools.enabled:
            unused = [f"tools.{key}={getattr(tools, key)!r}" for key, field in ToolsSection.model_fields.items()
                      if key != "enabled" and getattr(tools, key) != field.default]  # fmt: skip
            if unused:
                raise ValueError(
                    f"{', '.join(sorted(unused))}: used only with tools.enabled=true; set it or remove them"
                )
        if not refine.multi_turn:
            unused = [f"refine.{key}={getattr(refine, key)!r}" for key in ("feedback", "invalid_turn_penalty")
                      if getattr(refine, key) != RefineSection.model_fields[key].default]  # fmt: skip
            if unused:
                raise ValueError(
                    f"{', '.join(unused)}: used only by multi-turn refine RL; set refine.max_turns >= 2 "
                    "or remove them"
                )
        if (tools.enabled or refine.multi_turn) and (
            self.rollout.max_prompt_tokens or self.rollout.max_prompt_tokens_stages
        ):
            raise ValueError(
                "the prompt-length cap (rollout.max_prompt_tokens, max_prompt_tokens_stages) measures one-turn "
                "prompts; a multi-turn environment's first prompt carries its own tool block or grows with "
                "feedback, so it is not capped: remove the cap or use the one-turn environment"
            )
        return self

    @property
    def sequences_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt
