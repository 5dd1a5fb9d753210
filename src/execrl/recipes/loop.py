"""What every training recipe shares around its step: the session a run's steps run in (``session``: the
run from ``components.run.build_run``, telemetry, signals, the sandbox, the environment, the step sampler
and the executor, the base evaluation), the end of a step (log, alarms, stop reasons, checkpoint:
``run_steps``) and the end of a run (``finish_session``). The step itself (sample, score, advantages,
update) stays in the recipe (``grpo.py``, ``ppo.py``, ``pipeline.py``) so it reads top to bottom.

Stop reasons are typed (``StopReason``): the loop decides what a stop means (a wall-time stop still
evaluates, a signal exits 130) from the kind, never from the text of a message.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from execrl.components import setup
from execrl.components.run import PartBuilder, Run, Stop, StopReason, build_run
from execrl.config import TrainConfig, build
from execrl.distributed import Executor, build_executor
from execrl.episodes import StepEpisodes, truncation_rate
from execrl.recipes.evaluate import Evaluation
from execrl.rollout.engine import Engine, create_engine
from execrl.scheduler.report import write_domain_report
from execrl.telemetry import RunTelemetry, alarm_rules_from_config
from execrl.telemetry.webhook import WebhookConfig
from execrl.trainer import policy_update, save_checkpoint
from execrl.trainer.lora import has_adapters, merged_copy

if TYPE_CHECKING:
    from execrl.components.sampling import StepSampler
    from execrl.episodes import Environment
    from execrl.sandbox import Sandbox
    from execrl.sandbox.service.client import ServiceClient
    from execrl.trainer import TrainBatch

log = logging.getLogger("execrl.train")


@dataclass(frozen=True)
class TrainOutcome:
    run_dir: Path
    last_step: int  # the last step completed (-1 if none)
    stopped_early: Stop | None  # why training ended before total_steps, if it did


def sample_episodes(run: Run, step: int, sampler: StepSampler) -> tuple[dict[str, float], StepEpisodes]:
    """Draw the step's tasks, sample and judge their groups (DAPO refill if configured), and let the
    scheduler learn from every group, dropped ones too, and the length curriculum from the truncation.
    Returns the domain weights the draw used (logged) and the groups."""
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
    run.length.observe(step, truncation_rate(groups.episodes))  # may raise the next caps
    return weights, groups


def inject_nan_loss(run: Run, step: int, advantages: torch.Tensor) -> torch.Tensor:
    """``run.inject_nan_loss_at_step``: that step's advantages become NaN (fault injection for the alarm
    tests); any other step's pass through."""
    return advantages * float("nan") if step == run.config.run.inject_nan_loss_at_step else advantages


def update_policy(run: Run, batch: TrainBatch) -> dict[str, float]:
    """The step's update (``trainer.policy_update``): clipped policy loss (+ KL, + PPO's value loss), AdamW;
    in this process, or over the ranks with ``trainer.strategy=fsdp`` (the same update: the loss is
    normalised over the whole step's tokens, ``trainer/sharded_step.py``)."""
    if run.sharded is not None:
        return run.sharded.update(batch)
    return policy_update(
        run.model, run.optimizer, run.lr_scheduler, batch, run.tcfg, ref_model=run.ref_model,
        value_model=run.value_head,
    )  # fmt: skip


def publish_weights(run: Run, executor: Executor, step: int) -> dict[str, float]:
    """After step ``step``'s update: the weights go out as version ``step + 1`` (rollout workers load them
    by version) and the executor reports the step (``executor/*``: versions used, retries, replacements).
    Sharded, the ranks' weights reach rank 0's rollout copy ``run.model`` first, by bucket
    (``perf/weight_gather_s``)."""
    gathered = {}
    if run.sharded is not None:
        started = time.perf_counter()
        run.sharded.gather()
        gathered = {"perf/weight_gather_s": time.perf_counter() - started}
    executor.publish_weights(run.model, version=step + 1)
    return {**executor.step_metrics(step), **gathered}


@dataclass(frozen=True)
class Session:
    """What a recipe's steps run in (``session``)."""

    run: Run
    telemetry: RunTelemetry
    sandbox: Sandbox | ServiceClient
    environment: Environment  # what an episode is: one turn, refine feedback, tool calls, yours
    executor: Executor  # sampling: this process (default) or Ray actors (executor.kind="ray")
    evaluation: Evaluation  # the held-out evaluation of the base and trained models
    started: float  # time.monotonic() at the start, for run.max_wall_time_s


@contextmanager
def session(
    config: TrainConfig, resume_dir: Path | None, *, parts: Mapping[str, PartBuilder] | None = None
) -> Iterator[Session]:
    """Set up a run: the run (``build_run``: model, optimizer, scheduler, the recipe's ``parts``; restored
    on resume), telemetry, SIGINT/SIGTERM handling, the sandbox (sized for the sessions tool episodes
    hold), the environment, the step sampler and the executor it runs on (weights published as version
    ``start_step``), then the base model's evaluation (skipped when its file exists). Everything is closed
    on exit, the executor before the sandbox."""
    run = build_run(config, resume_dir, parts=parts)
    with stop_ranks(run):
        telemetry = run_telemetry(run, resuming=resume_dir is not None)
        started = time.monotonic()
        sandbox_cm = setup.build_sandbox(config, sessions=setup.sessions_held(config))
        with sandbox_cm as sandbox, telemetry, stop_on_signals(run):
            environment = setup.build_environment(config, sandbox)
            sampler = setup.step_sampler(config, environment, run.engine, run.tokenizer, run.length.cap)
            with closing(build_executor(config, sampler)) as executor, engine_closed(run.engine):
                executor.publish_weights(run.model, version=run.start_step)
                evaluation = Evaluation(config, sandbox, environment, run.tokenizer)
                if config.eval.enabled:
                    evaluation.run(run.run_dir, "base", run.engine)
                yield Session(run, telemetry, sandbox, environment, executor, evaluation, started)


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
        session.evaluation.run(run.run_dir, "trained", trained_engine(run, version=last_step + 1))
        session.evaluation.finish(run.run_dir)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


def trained_engine(run: Run, *, version: int) -> Engine:
    """The engine the trained model (weights ``version``) is evaluated with: the run's own, or with LoRA one
    over a merged copy of the policy (adapters folded into the weights), the dense model ``execrl export``
    writes and ``execrl eval``/``serve`` load, so the run's held-out score is the exported model's. With
    ``lora.fold_for_sampling`` the run's engine already samples such a copy (the same fold arithmetic), so
    no second one is made. An engine with weights of its own (vLLM) gets ``version`` first where no publish
    synced it (the one-step-off loop's engine holds the behaviour copy's; under Ray the driver's engine is
    not the workers'); it serves LoRA adapters itself."""
    if hasattr(run.engine, "sync_weights"):
        if getattr(run.engine, "version", None) != version:
            run.engine.sync_weights(run.model, version)
        return run.engine
    if not has_adapters(run.model) or run.config.lora.fold_for_sampling:
        return run.engine
    merged = merged_copy(run.model)
    return create_engine(run.config.rollout.engine, model=merged, tokenizer=run.tokenizer)


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
        save_run_checkpoint(run, step, {k: v for k, v in metrics.items() if isinstance(v, float)})


def save_run_checkpoint(run: Run, step: int, metrics: dict[str, float]) -> Path:
    """The checkpoint after step ``step``: written by this process, or by every rank (sharded)."""
    data_state = {
        "next_step": step + 1,
        "scheduler": run.tasks.state_dict(),
        "length": run.length.state_dict(),
    }
    keep_last = run.config.checkpoint.keep_last
    if run.sharded is not None:
        return run.sharded.save(
            run.run_dir, step=step, data_state=data_state, metrics=metrics, keep_last=keep_last
        )
    return save_checkpoint(
        run.run_dir, step=step, model=run.model, optimizer=run.optimizer, scheduler=run.lr_scheduler,
        data_state=data_state, metrics=metrics, keep_last=keep_last, extra_modules=run.extra_modules,
    )  # fmt: skip


@contextmanager
def stop_ranks(run: Run) -> Iterator[None]:
    """Sharded: when the run ends (or fails), the other trainer ranks leave their command loop."""
    try:
        yield
    finally:
        if run.sharded is not None:
            run.sharded.close()


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
