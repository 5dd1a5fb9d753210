"""One place builds a run: ``build_run(config, resume_dir) -> Run``.

    run = build_run(config, resume_dir, parts={"value_head": ppo_value_head})

Order (issue 35, class 12: a refusal at start leaves nothing behind): everything that can refuse the config
is built first (the policy and its adapters, the trainer's settings, the training suites, the prompt-length
stages, the recipe's parts); the run directory is created only then, and a resumed run's checkpoint is
restored into what was built. The pieces come from ``setup.py`` (config -> part builders); a recipe passes
its own parts (PPO's value head, the one-step-off loop's behaviour copy) as builders, so they are restored
from the checkpoint with the rest. ``bench train`` builds its run here too, with ``RunOverrides``.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from execrl.components import setup, sharding
from execrl.components.prompt_lengths import run_prompt_stages
from execrl.config import TrainConfig, build
from execrl.scheduler import AdaptiveSettings, Scheduler, build_scheduler
from execrl.scheduler.length import LengthCurriculum, LengthSettings
from execrl.scheduler.prompt_cap import PromptStage
from execrl.tasks.schema import Task

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.rollout.engine import Engine
    from execrl.trainer import TrainerConfig
    from execrl.trainer.ranks import ShardedTrainer

__all__ = [
    "Run",
    "RunOverrides",
    "Stop",
    "StopReason",
    "build_run",
    "length_curriculum",
    "rollout_logprobs_exact",
    "task_scheduler",
]

log = logging.getLogger("execrl.train")
PartBuilder = Callable[["PreTrainedModel"], "torch.nn.Module"]


class StopReason(enum.Enum):
    SIGNAL = "signal"  # SIGINT/SIGTERM: checkpoint, stop, exit 130; no final eval
    ALARM = "alarm"  # an alarm rule with action "stop" fired; no final eval
    WALL_TIME = "wall_time"  # run.max_wall_time_s reached; the final eval still runs


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    detail: str  # e.g. "SIGINT", "loss_nonfinite", "run.max_wall_time_s=660 reached"

    def __str__(self) -> str:
        if self.reason is StopReason.SIGNAL:
            return f"signal {self.detail}"
        if self.reason is StopReason.ALARM:
            return f"alarm: {self.detail}"
        return self.detail


@dataclass
class Run:
    """Everything a recipe's loop holds, built once by ``build_run`` (a resumed run restores it in place)."""

    config: TrainConfig
    run_dir: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    tcfg: TrainerConfig
    ref_model: PreTrainedModel | None  # the frozen reference when algorithm.kl_coef > 0 (LoRA: the policy)
    optimizer: torch.optim.Optimizer
    lr_scheduler: torch.optim.lr_scheduler.LRScheduler
    tasks: Scheduler  # which tasks each step draws (static mixture or adaptive)
    engine: Engine
    start_step: int
    old_logprobs_from_rollout: bool  # the update reuses the rollout's log-probs (see rollout_logprobs_exact)
    length: LengthCurriculum  # the turn-length cap of each step (stages, automatic rise)
    prompt_stages: tuple[PromptStage[Task], ...] = ()  # the prompt-length cap's stages (() = not computed)
    parts: dict[str, torch.nn.Module] = field(default_factory=dict)  # the recipe's own, checkpointed
    stop: Stop | None = None  # why the loop stops early, once a stop was requested
    # trainer.strategy=fsdp: the update over the ranks; ``model`` (and the parts) are then rank 0's whole
    # rollout copies, refreshed from the shards after each update (``ShardedTrainer.gather``)
    sharded: ShardedTrainer | None = None
    engine_correction: bool = False  # an engine apart from the trainer's forward (vLLM): recompute, TIS

    @property
    def value_head(self) -> torch.nn.Module | None:
        return self.parts.get("value_head")

    @property
    def behaviour_model(self) -> PreTrainedModel | None:
        return self.parts.get("behaviour_policy")  # type: ignore[return-value]

    @property
    def extra_modules(self) -> dict[str, torch.nn.Module] | None:
        return dict(self.parts) or None

    @property
    def pad_token_id(self) -> int:
        pad = getattr(self.engine, "pad_token_id", None)
        return int(pad if pad is not None else (self.tokenizer.pad_token_id or 0))

    def request_stop(self, reason: StopReason, detail: str) -> None:
        if self.stop is None:
            self.stop = Stop(reason, detail)


@dataclass(frozen=True)
class RunOverrides:
    """What a benchmark or a test supplies instead of the config's: a loaded model and tokenizer, the
    trainer's settings, the task scheduler, the run directory (used as is: no run files written)."""

    model: PreTrainedModel | None = None
    tokenizer: PreTrainedTokenizerBase | None = None
    trainer_config: TrainerConfig | None = None
    tasks: Scheduler | None = None
    run_dir: Path | None = None


def rollout_logprobs_exact(config: TrainConfig, tcfg: TrainerConfig) -> bool:
    """With one pass over each rollout the behaviour policy is the current one: reuse the rollout's
    log-probs instead of a second forward pass. They equal the trainer's only without top-k/top-p."""
    rollout = config.rollout
    return tcfg.ppo_epochs == 1 and rollout.top_k == 0 and rollout.top_p == 1.0


def length_curriculum(config: TrainConfig) -> LengthCurriculum:
    """The run's cap on each model turn per step: ``rollout.max_new_tokens`` (with tools:
    ``tools.max_turn_tokens``) before its stages and automatic rise."""
    settings = build(LengthSettings, config.rollout)
    if config.tools.enabled:
        settings = dataclasses.replace(settings, max_new_tokens=config.tools.max_turn_tokens)
    return LengthCurriculum(settings)


def task_scheduler(
    config: TrainConfig,
    *,
    suites: dict[str, list[Task]] | None = None,
    prompt_stages: tuple[PromptStage[Task], ...] = (),
) -> Scheduler:
    """The run's scheduler over the training suites (loaded here unless given), drawing each step from its
    prompt-cap stage's suites when ``prompt_stages`` are given."""
    sched = config.scheduler
    if suites is None:
        suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
    return build(
        build_scheduler, sched, suites=suites, weights=config.tasks.suites, seed=config.run.seed,
        settings=build(AdaptiveSettings, sched), rounds_per_step=config.algorithm.max_resample_rounds + 1,
        prompt_stages=prompt_stages,
    )  # fmt: skip


def _prompt_stages(
    config: TrainConfig,
    suites: dict[str, list[Task]],
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
) -> tuple[PromptStage[Task], ...]:
    """The prompt-length cap's stages (and the model's context bound), for the one-turn environment; the
    multi-turn environments render their prompts with tool blocks or feedback and get none (the config
    refuses a cap there)."""
    if config.refine.multi_turn or config.tools.enabled:
        return ()
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    return run_prompt_stages(config, suites, tokenizer, context_tokens=context)


def build_run(
    config: TrainConfig,
    resume_dir: Path | None = None,
    *,
    parts: Mapping[str, PartBuilder] | None = None,
    overrides: RunOverrides = RunOverrides(),
) -> Run:
    """The run of ``config`` (module docstring); ``resume_dir``: restore its newest checkpoint."""
    from execrl.trainer import build_optimizer
    from execrl.trainer import build_scheduler as build_lr_scheduler

    setup.check_engine(config)  # an engine without its environment refuses first, in one line
    setup.seed_everything(config.run.seed)
    setup.register_extra_verifiers(config)
    if overrides.model is not None and overrides.tokenizer is not None:
        model, tokenizer, model_path = overrides.model, overrides.tokenizer, None
    else:
        model, tokenizer, model_path = setup.load_policy(config)
    tcfg = overrides.trainer_config or setup.trainer_config(config)
    ref_model = setup.reference_model(config, model, model_path) if model_path is not None else None
    built = {name: make(model) for name, make in (parts or {}).items()}
    sharded = None
    if config.trainer.strategy == "fsdp":  # the one place the trainer is chosen; shards a copy of ``model``
        sharded = sharding.sharded_trainer(config, tcfg, model=model, parts=built, reference=ref_model)
        optimizer, lr_scheduler = sharded.optimizer, sharded.scheduler
    else:
        trainable = tuple(m for m in built.values() if any(p.requires_grad for p in m.parameters()))
        optimizer = build_optimizer(model, tcfg, extra_modules=trainable)
        lr_scheduler = build_lr_scheduler(optimizer, tcfg)
    stages: tuple[PromptStage[Task], ...] = ()
    if overrides.tasks is None:
        suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
        stages = _prompt_stages(config, suites, model, tokenizer)
    tasks = overrides.tasks or task_scheduler(config, suites=suites, prompt_stages=stages)
    engine = setup.rollout_engine(config, model, tokenizer)  # LoRA: over a folded copy; vLLM: its process
    external = hasattr(engine, "sync_weights")  # weights of its own (vLLM): not the trainer's forward
    run = Run(
        config=config, run_dir=Path(), model=model, tokenizer=tokenizer, tcfg=tcfg, ref_model=ref_model,
        optimizer=optimizer, lr_scheduler=lr_scheduler, tasks=tasks, engine=engine,
        start_step=0, old_logprobs_from_rollout=rollout_logprobs_exact(config, tcfg) and not external,
        length=length_curriculum(config), prompt_stages=stages, parts=built, sharded=sharded,
        engine_correction=external and config.algorithm.engine_correction,
    )  # fmt: skip
    run.run_dir = _run_dir(config, resume_dir, overrides)  # only now: everything above could refuse
    if resume_dir is not None:
        _restore(run)
    return run


def _run_dir(config: TrainConfig, resume_dir: Path | None, overrides: RunOverrides) -> Path:
    if overrides.run_dir is not None:
        return overrides.run_dir
    if resume_dir is not None:
        return resume_dir
    run_dir = setup.new_run_dir(config)
    setup.write_run_files(run_dir, config)
    return run_dir


def _restore(run: Run) -> None:
    """The newest checkpoint into the run: weights, optimizer, LR schedule, the recipe's parts, the task
    scheduler's and the length curriculum's state, and the step to continue from. Sharded: every rank
    reads its shards (written at any number of ranks) and rank 0's rollout copy gets the weights."""
    from execrl.trainer import check_resumable, latest_checkpoint, load_checkpoint
    from execrl.trainer.sharded_checkpoint import check_strategy

    checkpoint = latest_checkpoint(run.run_dir)
    if checkpoint is None:
        return
    if run.sharded is not None:
        check_strategy(checkpoint, sharded=True, data_keys=("next_step",))
        state = run.sharded.load(checkpoint)
        run.sharded.gather()
    else:
        check_strategy(checkpoint, sharded=False)
        check_resumable(checkpoint, run.model, extra_modules=run.extra_modules, data_keys=("next_step",))
        state = load_checkpoint(
            checkpoint, run.model, run.optimizer, run.lr_scheduler, extra_modules=run.extra_modules
        )
    run.start_step = int(state.data_state["next_step"])
    if "scheduler" in state.data_state:  # checkpoints written before the adaptive scheduler have none
        run.tasks.load_state_dict(state.data_state["scheduler"])
    if "length" in state.data_state:  # checkpoints written before the length curriculum have none
        run.length.load_state_dict(state.data_state["length"])
    log.info("resumed from %s at step %d", checkpoint, run.start_step)
