"""``TrainConfig``: the whole run config, one section per ``[table]``, and the checks across sections."""

from __future__ import annotations

from pydantic import Field, model_validator

from execrl.config.algorithm import AlgorithmSection, OptimSection, RefineSection, RolloutSection
from execrl.config.base import Section
from execrl.config.infra import ExecutorSection, TelemetrySection
from execrl.config.lora import LoraSection
from execrl.config.run import CheckpointSection, ModelSection, RunSection
from execrl.config.scoring import AuditSection, EvalSection, RewardSection, SandboxSection
from execrl.config.tasks import SchedulerSection, TaskSection
from execrl.config.tools import ToolsSection
from execrl.config.vllm import VLLMSection
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
    vllm: VLLMSection = Field(
        default_factory=VLLMSection, description="the vLLM engine (rollout.engine=vllm), its weight sync"
    )

    @model_validator(mode="after")
    def _vllm_settings_apply(self) -> TrainConfig:
        """``[vllm]`` only with ``rollout.engine=vllm``; the loops the vLLM engine does not run yet refused."""
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
        if self.algorithm.async_steps:
            raise ValueError(
                "rollout.engine=vllm does not run algorithm.async_steps=1 yet (the one-step-off loop samples "
                "from a behaviour copy in this process); use rollout.engine=hf or async_steps=0"
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
        if executor.kind == "ray" and self.refine.max_turns > 1:
            raise ValueError(
                "executor.kind=ray does not run the multi-turn refine recipe; use executor.kind=inprocess"
            )
        return self

    @model_validator(mode="after")
    def _length_curriculum_applies(self) -> TrainConfig:
        rollout = self.rollout
        rising = rollout.length_rise_factor > 1
        if rising and self.algorithm.async_steps:
            raise ValueError(
                "rollout.length_rise_factor > 1 needs algorithm.async_steps=0: the one-step-off loop starts "
                "the next rollout before this step's truncation is known (stages work: max_new_tokens_stages)"
            )
        if rising and rollout.length_rise_max_tokens < rollout.max_new_tokens:
            raise ValueError(
                f"rollout.length_rise_factor={rollout.length_rise_factor} needs rollout.length_rise_max_tokens "
                f">= rollout.max_new_tokens ({rollout.max_new_tokens}); got {rollout.length_rise_max_tokens}"
            )
        smallest = min([rollout.max_new_tokens, *(cap for _, cap in rollout.max_new_tokens_stages)])
        if self.algorithm.overlong_buffer_tokens > smallest:
            raise ValueError(
                f"algorithm.overlong_buffer_tokens={self.algorithm.overlong_buffer_tokens} exceeds the smallest "
                f"length cap of the run ({smallest} new tokens: rollout.max_new_tokens and its stages)"
            )
        PromptCapSettings(rollout.max_prompt_tokens, tuple(rollout.max_prompt_tokens_stages))  # stage checks
        if (rising or rollout.max_new_tokens_stages) and self.refine.multi_turn:
            raise ValueError(
                "the length curriculum (rollout.max_new_tokens_stages, length_rise_factor) is "
                "single-turn; remove it or set refine.max_turns=1"
            )
        return self

    def _episode_loop_features(self) -> dict[str, bool]:
        """The loop features the episode recipes (refine RL, tools) do not run: name -> switched on."""
        alg = self.algorithm
        return {
            "algorithm.advantage_estimator=gae (PPO's value head)": alg.learns_values,
            "algorithm.async_steps > 0": alg.async_steps > 0,
            "rollout.stream_scoring=true": self.rollout.stream_scoring,
            "algorithm.dynamic_sampling=true": alg.dynamic_sampling,
            "the prompt-length cap (rollout.max_prompt_tokens, max_prompt_tokens_stages)": bool(
                self.rollout.max_prompt_tokens or self.rollout.max_prompt_tokens_stages
            ),
        }

    @model_validator(mode="after")
    def _tool_settings_apply(self) -> TrainConfig:
        """Refuse what the tool recipe would ignore or cannot run, in one line each."""
        tools = self.tools
        if not tools.enabled:
            unused = [
                f"tools.{key}={getattr(tools, key)!r}"
                for key, field in ToolsSection.model_fields.items()
                if key != "enabled" and getattr(tools, key) != field.default
            ]
            if unused:
                raise ValueError(
                    f"{', '.join(sorted(unused))}: used only with tools.enabled=true; set it or remove them"
                )
            return self
        if self.executor.kind == "ray":
            raise ValueError(
                "tools.enabled=true does not run on executor.kind=ray yet (a tool episode must run next to the "
                "sandbox worker holding its session); use executor.kind=inprocess"
            )
        refused = {
            "refine.max_turns > 1": self.refine.multi_turn,
            "sandbox.urls (sessions need the in-process sandbox)": bool(self.sandbox.urls),
            "the length curriculum (rollout.max_new_tokens_stages, length_rise_factor)": bool(
                self.rollout.max_new_tokens_stages or self.rollout.length_rise_factor > 1
            ),
            "DAPO's overlong options (algorithm.overlong_buffer_tokens, overlong_filtering)": bool(
                self.algorithm.overlong_buffer_tokens or self.algorithm.overlong_filtering
            ),
            **self._episode_loop_features(),
        }
        bad = [what for what, on in refused.items() if on]
        if bad:
            raise ValueError(
                f"tools.enabled=true (tool-calling episodes) does not run {', '.join(bad)}; turn them off"
            )
        return self

    @property
    def sequences_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    @model_validator(mode="after")
    def _refine_settings_apply(self) -> TrainConfig:
        """Refuse what the multi-turn recipe would ignore; each message says what to set."""
        refine = self.refine
        if not refine.multi_turn:
            unused = [
                f"refine.{key}={value!r}"
                for key, value in (
                    ("feedback", refine.feedback),
                    ("invalid_turn_penalty", refine.invalid_turn_penalty),
                )
                if value != RefineSection.model_fields[key].default
            ]
            if unused:
                raise ValueError(
                    f"{', '.join(unused)}: used only by multi-turn refine RL; set refine.max_turns >= 2 "
                    "or remove them"
                )
            return self
        bad = [what for what, on in self._episode_loop_features().items() if on]
        if bad:
            raise ValueError(
                f"refine.max_turns={refine.max_turns} (multi-turn refine RL) does not run {', '.join(bad)}; "
                "turn them off, or set refine.max_turns=1 for the single-turn loop"
            )
        return self
