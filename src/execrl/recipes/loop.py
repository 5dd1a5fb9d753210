"""What every training recipe shares around its step: the run's state (``Run``), the single-turn recipes'
setup and finish (``single_turn_session``, ``finish_session``), and the end of a step (log, alarms, stop
reasons, checkpoint: ``run_steps``). The step itself (sample, score, advantages, update) stays in the
recipe (``grpo.py``, ``ppo.py``, ``pipeline.py``, ``refine_rl.py``) so it reads top to bottom.

Stop reasons are typed (``StopReason``): the loop decides what a stop means (a wall-time stop still
evaluates, a signal exits 130) from the kind, never from the text of a message.
"""

from __future__ import annotations

import enum
import logging
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from execrl.components import setup
from execrl.components.prompt_lengths import run_prompt_stages
from execrl.components.sampling import GroupSampler, ScoredGroups, StreamingGroupSampler
from execrl.config import TrainConfig, build
from execrl.distributed import Executor, build_executor
from execrl.recipes.evaluate import evaluate_checkpoint_once, finish_report
from execrl.rollout.engine import Engine, create_engine
from execrl.scheduler import AdaptiveSettings, Scheduler, build_scheduler
from execrl.scheduler.length import LengthCurriculum, LengthSettings, truncation_rate
from execrl.scheduler.prompt_cap import PromptStage
from execrl.scheduler.report import write_domain_report
from execrl.tasks.schema import Task
from execrl.telemetry import RunTelemetry, alarm_rules_from_config
from execrl.telemetry.webhook import WebhookConfig
from execrl.trainer import (
    TrainerConfig,
    ValueHead,
    build_optimizer,
    latest_checkpoint,
    learns_values,
    load_checkpoint,
    save_checkpoint,
)
from execrl.trainer import (
    build_scheduler as build_lr_scheduler,
)
from execrl.trainer.lora import frozen_sharing_copy, has_adapters, merged_copy

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.sandbox import Sandbox
    from execrl.sandbox.service.client import ServiceClient

log = logging.getLogger("execrl.train")


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


@dataclass(frozen=True)
class TrainOutcome:
    run_dir: Path
    last_step: int  # the last step completed (-1 if none)
    stopped_early: Stop | None  # why training ended before total_steps, if it did


@dataclass
class Run:
    """Everything the loop holds, built once by ``setup_run`` (a resumed run restores it in place)."""

    config: TrainConfig
    run_dir: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    tcfg: TrainerConfig
    ref_model: PreTrainedModel | None  # the frozen reference when algorithm.kl_coef > 0 (LoRA: the policy)
    value_head: ValueHead | None  # PPO's learned value head; None for the GRPO family
    optimizer: torch.optim.Optimizer
    lr_scheduler: torch.optim.lr_scheduler.LRScheduler
    tasks: Scheduler  # which tasks each step draws (static mixture or adaptive)
    engine: Engine
    start_step: int
    old_logprobs_from_rollout: bool  # the update reuses the rollout's log-probs (see rollout_logprobs_exact)
    length: LengthCurriculum  # the completion-length cap of each step (stages, automatic rise)
    prompt_stages: tuple[PromptStage[Task], ...] = ()  # the prompt-length cap's stages (() = not computed)
    stop: Stop | None = None
    behaviour_model: PreTrainedModel | None = None  # async: the weights the in-flight rollout samples with
    engine_correction: bool = False  # an engine apart from the trainer's forward (vLLM): recompute, TIS

    @property
    def extra_modules(self) -> dict[str, torch.nn.Module] | None:
        extra = {"value_head": self.value_head, "behaviour_policy": self.behaviour_model}
        kept = {name: module for name, module in extra.items() if module is not None}
        return kept or None

    def request_stop(self, reason: StopReason, detail: str) -> None:
        if self.stop is None:
            self.stop = Stop(reason, detail)


def rollout_logprobs_exact(config: TrainConfig, tcfg: TrainerConfig) -> bool:
    """With one pass over each rollout the behaviour policy is the current one: reuse the rollout's
    log-probs instead of a second forward pass. They equal the trainer's only without top-k/top-p."""
    rollout = config.rollout
    return tcfg.ppo_epochs == 1 and rollout.top_k == 0 and rollout.top_p == 1.0


def setup_run(config: TrainConfig, resume_dir: Path | None) -> Run:
    setup.check_engine(config)  # an engine that cannot start fails here, before a run directory is made
    run_dir = resume_dir if resume_dir is not None else setup.new_run_dir(config)
    if resume_dir is None:
        setup.write_run_files(run_dir, config)
    setup.seed_everything(config.run.seed)
    setup.register_extra_verifiers(config)
    model, tokenizer, model_path = setup.load_policy(config)
    tcfg = setup.trainer_config(config)
    ref_model = setup.reference_model(config, model, model_path)  # with LoRA: the policy, adapters off
    # PPO learns a value head on the policy's hidden states; the GRPO family needs none.
    value_head = ValueHead(model.config.hidden_size) if learns_values(tcfg.advantage_estimator) else None
    optimizer = build_optimizer(model, tcfg, extra_modules=(value_head,) if value_head is not None else ())
    suites = setup.load_suites(config.tasks.suites, "train", config.tasks.max_difficulty)
    stages = training_prompt_stages(config, suites, model, tokenizer)
    engine = setup.rollout_engine(config, model, tokenizer)  # LoRA: over a folded copy (lora_fold.py)
    external = hasattr(engine, "sync_weights")  # weights of its own (vLLM): not the trainer's forward
    run = Run(
        config=config,
        run_dir=run_dir,
        model=model,
        tokenizer=tokenizer,
        tcfg=tcfg,
        ref_model=ref_model,
        value_head=value_head,
        optimizer=optimizer,
        lr_scheduler=build_lr_scheduler(optimizer, tcfg),
        tasks=task_scheduler(config, suites=suites, prompt_stages=stages),
        engine=engine,
        start_step=0,
        old_logprobs_from_rollout=rollout_logprobs_exact(config, tcfg) and not external,
        engine_correction=external and config.algorithm.engine_correction,
        length=length_curriculum(config),
        prompt_stages=stages,
        behaviour_model=behaviour_copy(model) if config.algorithm.async_steps else None,
    )
    checkpoint = latest_checkpoint(run_dir) if resume_dir is not None else None
    if checkpoint is not None:
        state = load_checkpoint(
            checkpoint, model, run.optimizer, run.lr_scheduler, extra_modules=run.extra_modules
        )
        run.start_step = int(state.data_state["next_step"])
        if "scheduler" in state.data_state:  # checkpoints written before the adaptive scheduler have none
            run.tasks.load_state_dict(state.data_state["scheduler"])
        if "length" in state.data_state:  # checkpoints written before the length curriculum have none
            run.length.load_state_dict(state.data_state["length"])
        log.info("resumed from %s at step %d", checkpoint, run.start_step)
    return run


def length_curriculum(config: TrainConfig) -> LengthCurriculum:
    """The run's length cap per step (``rollout.max_new_tokens``, its stages and automatic rise)."""
    return LengthCurriculum(build(LengthSettings, config.rollout))


def behaviour_copy(model: PreTrainedModel) -> PreTrainedModel:
    """A frozen copy of the policy for the background rollout of async mode (checkpointed). Parameters the
    policy never trains (LoRA's base weights) are shared, not copied: the copy costs the adapters only."""
    clone = frozen_sharing_copy(model)
    clone.eval()
    clone.requires_grad_(False)
    return clone


def sample_and_score(run: Run, step: int, sampler: GroupSampler) -> tuple[dict[str, float], ScoredGroups]:
    """Draw the step's tasks, generate and score their groups (DAPO refill if configured), and let the
    scheduler learn from every group, dropped ones too. Returns the domain weights the draw used (logged)
    and the groups."""
    weights = run.tasks.domain_weights()
    algorithm = run.config.algorithm
    groups = sampler.sample_step(
        step,
        run.tasks,
        prompts_per_step=run.config.rollout.prompts_per_step,
        dynamic=algorithm.dynamic_sampling,
        max_resample_rounds=algorithm.max_resample_rounds,
    )
    run.tasks.observe(step, groups.outcomes)
    run.length.observe(step, truncation_rate(groups.rollout.finish_reasons))  # may raise the next caps
    return weights, groups


def inject_nan_loss(run: Run, step: int, advantages: torch.Tensor) -> torch.Tensor:
    """``run.inject_nan_loss_at_step``: that step's advantages become NaN (fault injection for the alarm
    tests); any other step's pass through."""
    return advantages * float("nan") if step == run.config.run.inject_nan_loss_at_step else advantages


def publish_weights(run: Run, executor: Executor, step: int) -> dict[str, float]:
    """After step ``step``'s update: the weights go out as version ``step + 1`` (rollout workers load them
    by version) and the executor reports the step (``executor/*``: versions used, retries, replacements)."""
    executor.publish_weights(run.model, version=step + 1)
    return executor.step_metrics(step)


@dataclass(frozen=True)
class Session:
    """What a single-turn recipe's steps run in (``single_turn_session``)."""

    run: Run
    telemetry: RunTelemetry
    sandbox: Sandbox | ServiceClient
    executor: Executor  # generate-and-score: this process (default) or Ray actors (executor.kind="ray")
    started: float  # time.monotonic() at the start, for run.max_wall_time_s


@contextmanager
def single_turn_session(config: TrainConfig, resume_dir: Path | None) -> Iterator[Session]:
    """Set up a GRPO/PPO/async run: the run (model, optimizer, scheduler; restored on resume), telemetry,
    SIGINT/SIGTERM handling, the sandbox, the group sampler and the executor it runs on (weights published
    as version ``start_step``), then the base model's evaluation (skipped when ``eval/base.json`` exists).
    Everything is closed on exit, the executor before the sandbox."""
    run = setup_run(config, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)
    started = time.monotonic()
    with setup.build_sandbox(config) as sandbox, telemetry, stop_on_signals(run):
        sampler = (StreamingGroupSampler if config.rollout.stream_scoring else GroupSampler)(
            run.engine, run.tokenizer, sandbox, setup.reward_config(config), setup.sampling_params(config),
            seed=config.run.seed, length_cap=run.length.cap,
        )  # fmt: skip
        with closing(build_executor(config, sampler)) as executor, engine_closed(run.engine):
            executor.publish_weights(run.model, version=run.start_step)
            if config.eval.enabled:
                evaluate_checkpoint_once(run.run_dir, "base", run.engine, config, sandbox)
            yield Session(run, telemetry, sandbox, executor, started)


@contextmanager
def engine_closed(engine: Engine) -> Iterator[None]:
    """Stop an engine that runs apart from this process (``rollout.engine=vllm``) when the session ends."""
    try:
        yield
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def finish_session(session: Session, last_step: int) -> TrainOutcome:
    """After the last step: ``domains.md`` and its plot, then (unless a signal or an alarm stopped the run)
    the trained model's evaluation and the run's report."""
    run = session.run
    write_domain_report(run.run_dir)  # domains.md + plots/domain_weights.png
    if final_eval_due(run):
        evaluate_checkpoint_once(run.run_dir, "trained", trained_engine(run), run.config, session.sandbox)
        finish_report(run.run_dir, run.config)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


def trained_engine(run: Run) -> Engine:
    """The engine the trained model is evaluated with: the run's own, or with LoRA one over a merged copy
    of the policy (adapters folded into the weights), the dense model ``execrl export`` writes and
    ``execrl eval``/``serve`` load, so the run's held-out score is the exported model's. With
    ``lora.fold_for_sampling`` the run's engine already samples such a copy (the same fold arithmetic), so
    no second one is made."""
    if not has_adapters(run.model) or run.config.lora.fold_for_sampling:
        return run.engine
    if getattr(run.engine, "serves_adapters", False):  # vLLM serves the synced adapter itself
        return run.engine
    merged = merged_copy(run.model)
    return create_engine(run.config.rollout.engine, model=merged, tokenizer=run.tokenizer)


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


def training_prompt_stages(
    config: TrainConfig,
    suites: dict[str, list[Task]],
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
) -> tuple[PromptStage[Task], ...]:
    """The prompt-length cap's stages (and the model's context bound) for the single-turn recipes; the
    episode recipes (refine RL, tools) render their prompts otherwise and get none (the config refuses a
    cap there)."""
    if config.refine.multi_turn or config.tools.enabled:
        return ()
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    return run_prompt_stages(config, suites, tokenizer, context_tokens=context)


def finish_step(
    run: Run, telemetry: RunTelemetry, step: int, metrics: dict[str, float], started: float
) -> None:
    """Log the step (alarms may ask to stop), check the wall-time budget, checkpoint when due."""
    config = run.config
    decision = telemetry.log(step, metrics)
    if decision.stop_requested:
        run.request_stop(StopReason.ALARM, ", ".join(e.rule for e in decision.fired))
    last = step + 1 == config.run.total_steps
    if time.monotonic() - started > config.run.max_wall_time_s and not last:
        run.request_stop(
            StopReason.WALL_TIME, f"run.max_wall_time_s={config.run.max_wall_time_s:.0f} reached"
        )
    if last or run.stop is not None or (step + 1) % config.checkpoint.every_steps == 0:
        save_checkpoint(
            run.run_dir,
            step=step,
            model=run.model,
            optimizer=run.optimizer,
            scheduler=run.lr_scheduler,
            data_state={
                "next_step": step + 1,
                "scheduler": run.tasks.state_dict(),
                "length": run.length.state_dict(),
            },
            metrics={k: v for k, v in metrics.items() if isinstance(v, float)},
            keep_last=config.checkpoint.keep_last,
            extra_modules=run.extra_modules,
        )


def run_steps(
    run: Run,
    telemetry: RunTelemetry,
    step_fn: Callable[[int], dict[str, float]],
    *,
    started: float,
    progress: bool,
) -> int:
    """Steps ``run.start_step`` .. ``total_steps - 1``: ``step_fn(step)`` (the recipe's step, returning its
    metrics), then ``finish_step``; stops early when a stop was requested. Returns the last step completed
    (``run.start_step - 1`` if none)."""
    config = run.config
    last_step = run.start_step - 1
    bar = Progress(config.run.total_steps, run.start_step, enabled=progress)
    for step in range(run.start_step, config.run.total_steps):
        metrics = step_fn(step)
        finish_step(run, telemetry, step, metrics, started)  # log, alarms, stop reasons, checkpoint
        last_step = step
        bar.update(metrics)
        if run.stop is not None:
            log.warning("stopping after step %d: %s", step, run.stop)
            break
    bar.close()
    return last_step


def step_timings(t0: float, t1: float, t2: float, *, model_tokens: int) -> dict[str, float]:
    """The episode recipes' step timings from ``perf_counter`` stamps: start, after rollout and reward, after
    the update; ``model_tokens`` the tokens the model sampled in the step."""
    return {
        "perf/rollout_and_reward_s": t1 - t0,
        "perf/update_s": t2 - t1,
        "perf/step_s": t2 - t0,
        "perf/step_tokens_per_s": model_tokens / (t2 - t0),
    }


def final_eval_due(run: Run) -> bool:
    """A wall-time stop still evaluates (the budget was spent training); a signal or an alarm does not."""
    return run.config.eval.enabled and (run.stop is None or run.stop.reason is StopReason.WALL_TIME)


def run_telemetry(run: Run, *, resuming: bool) -> RunTelemetry:
    tel = run.config.telemetry
    rules = alarm_rules_from_config([a.model_dump() for a in tel.alarms], include_defaults=tel.default_alarms)
    return build(
        RunTelemetry, tel, run_dir=run.run_dir, rules=rules,
        webhook=WebhookConfig(url=tel.webhook_url) if tel.webhook_url else None,
        resume_from_step=run.start_step - 1 if resuming else None, run_name=run.config.run.name,
    )  # fmt: skip


@contextmanager
def stop_on_signals(run: Run) -> Iterator[None]:
    """SIGINT/SIGTERM ask the loop to checkpoint and stop after the current step; a second one aborts."""

    def handler(signum: int, _frame: object) -> None:
        if run.stop is not None and run.stop.reason is StopReason.SIGNAL:
            raise KeyboardInterrupt
        run.request_stop(StopReason.SIGNAL, signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Progress:
    """The progress bar: step, reward, pass rate, KL, tokens/s and ETA (tqdm computes the ETA)."""

    def __init__(self, total: int, start: int, *, enabled: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=start, disable=not enabled, unit="step", dynamic_ncols=True)

    def update(self, metrics: dict[str, float]) -> None:
        self.bar.update(1)
        self.bar.set_postfix(
            reward=f"{metrics.get('reward/mean', float('nan')):.3f}",
            pass_rate=f"{metrics.get('reward/pass_rate', float('nan')):.2f}",
            kl=f"{metrics.get('kl/ref_mean', 0.0):.4f}",
            tok_s=f"{metrics.get('perf/step_tokens_per_s', 0.0):.0f}",
        )

    def close(self) -> None:
        self.bar.close()
