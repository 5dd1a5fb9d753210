"""Supervised fine-tuning on chat rows, one readable loop (``execrl sft``; issue 39: the stage before RL).

    execrl sft 'data.train_files=["tools-train.jsonl"]' tools.enabled=true 'tasks.eval_suites=["tools"]'
    execrl sft --resume runs/sft-smollm2-20261203-101500

ReTool, DeepSeek-R1 and DeepCoder cold-start RL with SFT on traces in the format RL will sample: here the
rows are rendered exactly as the training episodes render them (``tools/render.py``), so an assistant turn's
target is the ids the model would have sampled and only those ids carry loss (system, user, tool turns and
the template's markers are masked).

Setup reads and renders every row first, so a bad input stops before anything is written
(``recipes/sft_data.py``: bad rows named by file and line), then makes the run directory, the model
(full fine-tuning or LoRA), AdamW and the LR schedule, restored from the newest checkpoint on resume.
Each step: the step's packed rows (several conversations per row, no padding, attention kept inside each:
``trainer/packing.py``, ``trainer/sft.py``), the loss (mean cross-entropy over the step's assistant
tokens, one backward per row), the update (clip, AdamW, schedule), the log, the checkpoint.

Before the first step and after the last: the loss on the held-out rows (per conversation, so the report
gives a paired interval) and the held-out suite evaluation of ``execrl train`` (``recipes/evaluate.py``;
with ``tools.enabled`` the ``tools`` environment's episodes, ``Evaluation`` as ``execrl train`` runs it). The run directory, telemetry
(metrics.jsonl, TensorBoard, alarms), signals, the wall-time budget and the report are the main loop's.

Limits: one process, local run directories only (no ``s3://`` output), no Ray; the rows are re-read on
``--resume`` and must render to the same tokens (checked by a digest).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from execrl.components import setup
from execrl.components.run import Stop, StopReason
from execrl.config import ConfigError, SftConfig, build
from execrl.recipes.evaluate import Evaluation, compare_episode_evals, compare_evals, write_json_atomic
from execrl.recipes.loop import TrainOutcome, run_telemetry, stop_on_signals
from execrl.recipes.sft_data import RowSet, StepPlan, check_bad_share, read_rows, split_heldout
from execrl.rollout.engine import Engine, create_engine
from execrl.rollout.model_dir import load_tokenizer
from execrl.telemetry import RunTelemetry
from execrl.trainer import TrainerConfig, build_optimizer, latest_checkpoint, load_checkpoint, save_checkpoint
from execrl.trainer import build_scheduler as build_lr_scheduler
from execrl.trainer.checkpointing import activation_checkpointing
from execrl.trainer.lora import adapter_dropout, has_adapters, merged_copy
from execrl.trainer.sft import clipped_step, conversation_losses, packed_attention, token_losses

__all__ = ["SftData", "SftRun", "load_data", "train", "train_step"]

log = logging.getLogger("execrl.sft")


def train(config: SftConfig, *, resume_dir: Path | None = None, progress: bool = True) -> TrainOutcome:
    # ---- setup: rows (bad input stops here, nothing written), model, run directory, optimizer ----------
    data = load_data(config, load_tokenizer(setup.resolve_model_path(config.model.path)))
    model, tokenizer, _ = setup.load_policy(config)  # type: ignore[arg-type]  # reads [model], [lora]
    run = setup_run(config, data, model, tokenizer, resume_dir)
    telemetry = run_telemetry(run, resuming=resume_dir is not None)  # type: ignore[arg-type]
    started = time.monotonic()
    with evaluation_sandbox(config) as sandbox, telemetry, stop_on_signals(run):  # type: ignore[arg-type]
        # ---- before the first step: held-out loss and suites (kept on resume) ---------------------------
        engine = setup.sampling_engine(config.rollout.engine, model=model, tokenizer=tokenizer,
                                       fold_adapters=config.lora.fold_for_sampling)  # fmt: skip
        evaluate(run, "base", engine, sandbox)
        # ---- each step: batches, loss, update, log, checkpoint -----------------------------------------
        last_step = run_steps(run, telemetry, started=started, progress=progress)
        if run.stop is None or run.stop.reason is StopReason.WALL_TIME:  # not after a signal or an alarm
            evaluate(run, "trained", trained_engine(run, engine), sandbox)
            write_sft_report(run)
    return TrainOutcome(run_dir=run.run_dir, last_step=last_step, stopped_early=run.stop)


@dataclass(frozen=True)
class SftData:
    train: RowSet
    heldout: RowSet
    digest: str  # of the training conversations' ids and masks: a resumed run must train on the same rows


def load_data(config: SftConfig, tokenizer: Any) -> SftData:
    """Every row read and rendered; raises ``InputFileError`` (one line) for unreadable files or too many
    bad rows, ``ConfigError`` when there are no training rows to read."""
    data = config.data
    if not data.train_files:
        raise ConfigError('data.train_files is empty; set data.train_files=["rows.jsonl"]')
    read = partial(read_rows, tokenizer=tokenizer, call_format=config.tools.call_format,
                   max_tokens=config.optim.tokens_per_row)  # fmt: skip
    rows = read(data.train_files)
    check_bad_share(rows, data.max_bad_share, "training")
    if data.heldout_files:
        train, heldout = rows, read(data.heldout_files)
        check_bad_share(heldout, data.max_bad_share, "held-out")
    else:
        train, heldout = split_heldout(rows, data.heldout_share, config.run.seed)
    digest = hashlib.sha256()
    for c in train.conversations:
        digest.update(json.dumps([c.token_ids, c.loss_mask]).encode())
    return SftData(train, heldout, digest.hexdigest()[:16])


@dataclass
class SftRun:
    """Everything the loop holds (a resumed run restores the model, optimizer, schedule and position)."""

    config: SftConfig
    run_dir: Path
    model: torch.nn.Module
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    lr_scheduler: torch.optim.lr_scheduler.LRScheduler
    data: SftData
    plan: StepPlan
    total_steps: int
    start_step: int = 0
    stop: Stop | None = None

    def request_stop(self, reason: StopReason, detail: str) -> None:
        if self.stop is None:
            self.stop = Stop(reason, detail)


def setup_run(
    config: SftConfig, data: SftData, model: torch.nn.Module, tokenizer: Any, resume_dir: Path | None
) -> SftRun:
    optim = config.optim
    plan = StepPlan.build(data.train, tokens_per_row=optim.tokens_per_row, rows_per_step=optim.rows_per_step,
                          seed=config.run.seed, share_prefix_tokens=optim.share_prefix_tokens)  # fmt: skip
    total = config.run.total_steps or optim.epochs * plan.steps_per_epoch
    if optim.warmup_steps > total:
        raise ConfigError(
            f"optim.warmup_steps={optim.warmup_steps} exceeds the run's {total} steps; lower it"
        )
    tcfg = build(TrainerConfig, optim, total_steps=total, seed=config.run.seed, defaults=TRAINER_DEFAULTS)
    optimizer = build_optimizer(model, tcfg)
    run_dir = resume_dir if resume_dir is not None else setup.new_run_dir(config)  # type: ignore[arg-type]
    if resume_dir is None:
        setup.write_run_files(run_dir, config)  # type: ignore[arg-type]
        write_data_report(run_dir, data, plan, optim.tokens_per_row)
    setup.seed_everything(config.run.seed)
    setup.register_extra_verifiers(config)  # type: ignore[arg-type]  # reward.verifiers, for the evaluation
    run = SftRun(config, run_dir, model, tokenizer, optimizer, build_lr_scheduler(optimizer, tcfg), data, plan,
                 total)  # fmt: skip
    checkpoint = latest_checkpoint(run_dir) if resume_dir is not None else None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model, optimizer, run.lr_scheduler)
        if state.data_state.get("rows_digest") != data.digest:
            raise ConfigError(f"{checkpoint}: the training rows changed since the run started (digest "
                              f"{state.data_state.get('rows_digest')}, now {data.digest}); resume with the same rows")  # fmt: skip
        run.start_step = int(state.data_state["next_step"])
        log.info("resumed from %s at step %d", checkpoint, run.start_step)
    return run


# TrainerConfig fields SFT does not set (the policy-gradient knobs): their defaults, unused here.
TRAINER_DEFAULTS = (
    "adam_beta1", "adam_beta2", "adam_eps", "min_lr_ratio", "ppo_epochs", "optimizer_steps_per_epoch",
    "tokens_per_microbatch", "policy_loss", "clip_eps_low", "clip_eps_high", "clip_ratio_c", "loss_aggregation",
    "loss_sum_norm_length", "loss_sum_norm_by_sequences", "advantage_estimator", "advantage_std_eps", "gamma",
    "gae_lambda", "value_coef", "value_clip_eps", "kl_coef", "kl_estimator", "kl_in_reward", "entropy_coef",
    "logprob_temperature", "logprob_chunk_tokens", "share_prompt_forward",
    "precision",  # SFT updates in fp32 (trainer.precision is the RL trainer's)
)  # fmt: skip


def train_step(run: SftRun, step: int) -> dict[str, float]:
    """One step: the packed rows, the loss over their assistant tokens, the update, the metrics."""
    config, model = run.config, run.model
    t0 = time.perf_counter()
    # ---- batches: this step's packed rows (several conversations each, no padding) ----------------------
    rows = run.plan.rows(step)
    targets = sum(r.target_tokens for r in rows)
    # ---- loss: mean cross-entropy over the step's assistant tokens, one backward per row ---------------
    loss_sum = 0.0
    scale = float("nan") if step == config.run.inject_nan_loss_at_step else 1.0  # fault injection (alarms)
    with packed_attention(model), adapter_dropout(model), \
            activation_checkpointing(model, enabled=config.optim.gradient_checkpointing):  # fmt: skip
        for row in rows:
            losses = token_losses(model, row) * scale  # [K]
            (losses.sum() / targets).backward()
            loss_sum += float(losses.detach().sum())
    # ---- update: clip, AdamW, LR schedule -----------------------------------------------------------------
    lr = run.lr_scheduler.get_last_lr()[0]
    grad_norm, stepped = clipped_step(
        run.optimizer, run.lr_scheduler, max_grad_norm=config.optim.max_grad_norm
    )
    step_s = time.perf_counter() - t0
    tokens, computed = sum(r.conversation_tokens for r in rows), sum(r.tokens for r in rows)
    return {
        "loss/sft": loss_sum / targets,
        "train/grad_norm": grad_norm,
        "train/lr": lr,
        "train/skipped_steps": float(not stepped),
        "train/epoch": float(step // run.plan.steps_per_epoch),
        "train/packed_rows": float(len(rows)),
        "train/conversations": float(sum(r.conversations for r in rows)),
        "train/tokens": float(tokens),
        "train/computed_tokens": float(computed),  # a shared prefix once (optim.share_prefix_tokens)
        "train/target_tokens": float(targets),
        "train/bin_fill": tokens / (len(rows) * config.optim.tokens_per_row),
        "train/padding_share": 0.0,  # packed rows hold no padding (trainer/packing.py)
        "perf/step_s": step_s,
        "perf/step_tokens_per_s": tokens / step_s,
    }


def run_steps(run: SftRun, telemetry: RunTelemetry, *, started: float, progress: bool) -> int:
    """Steps ``start_step`` .. ``total_steps - 1``, each logged (alarms may stop the run), the wall-time
    budget checked, a checkpoint written when due. Returns the last step completed."""
    from tqdm import tqdm

    config, last_step = run.config, run.start_step - 1
    bar = tqdm(total=run.total_steps, initial=run.start_step, disable=not progress, unit="step")
    for step in range(run.start_step, run.total_steps):
        metrics = train_step(run, step)
        if step == 0:
            metrics.update(data_metrics(run.data))
        decision = telemetry.log(step, metrics)
        if decision.stop_requested:
            run.request_stop(StopReason.ALARM, ", ".join(e.rule for e in decision.fired))
        last = step + 1 == run.total_steps
        if time.monotonic() - started > config.run.max_wall_time_s and not last:
            run.request_stop(
                StopReason.WALL_TIME, f"run.max_wall_time_s={config.run.max_wall_time_s:.0f} reached"
            )
        if last or run.stop is not None or (step + 1) % config.checkpoint.every_steps == 0:
            save_checkpoint(run.run_dir, step=step, model=run.model, optimizer=run.optimizer,
                            scheduler=run.lr_scheduler, keep_last=config.checkpoint.keep_last,
                            data_state={"next_step": step + 1, "rows_digest": run.data.digest},
                            metrics={k: v for k, v in metrics.items() if isinstance(v, float)})  # fmt: skip
        last_step = step
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss/sft']:.4f}", tok_s=f"{metrics['perf/step_tokens_per_s']:.0f}")
        if run.stop is not None:
            log.warning("stopping after step %d: %s", step, run.stop)
            break
    bar.close()
    return last_step


def data_metrics(data: SftData) -> dict[str, float]:
    """What the rows were (logged with step 0): rows trained on, held out, bad (``data.json`` lists them)."""
    return {
        "train/rows": float(len(data.train.conversations)),
        "train/heldout_rows": float(len(data.heldout.conversations)),
        "train/bad_rows": float(len(data.train.bad) + len(data.heldout.bad)),
    }


def write_data_report(run_dir: Path, data: SftData, plan: StepPlan, tokens_per_row: int) -> None:
    """``data.json``: the row counts, every bad row (file:line: reason), the packing of the training rows."""
    conversations = data.train.conversations
    report = {
        "train_rows": len(conversations),
        "heldout_rows": len(data.heldout.conversations),
        "bad_rows": [str(b) for b in (*data.train.bad, *data.heldout.bad)],
        "tokens": sum(len(c.token_ids) for c in conversations),
        "target_tokens": sum(c.loss_tokens for c in conversations),
        "packed_rows": len(plan.bins),
        "bin_fill": plan.bin_fill(tokens_per_row),
        "steps_per_epoch": plan.steps_per_epoch,
        "rows_digest": data.digest,
    }
    write_json_atomic(run_dir / "data.json", report)


@contextlib.contextmanager
def evaluation_sandbox(config: SftConfig) -> Iterator[Any]:
    """The sandbox the suite evaluation scores in (none without ``eval.enabled``)."""
    if not config.eval.enabled:
        yield None
        return
    view = config.eval_view()
    with setup.build_sandbox(view, sessions=setup.sessions_held(view)) as sandbox:
        yield sandbox


def heldout_losses(run: SftRun) -> list[float]:
    """Each held-out conversation's mean loss over its assistant tokens, under the current weights."""
    optim = run.config.optim
    held = StepPlan.build(run.data.heldout, tokens_per_row=optim.tokens_per_row, rows_per_step=1,
                          seed=run.config.run.seed, share_prefix_tokens=optim.share_prefix_tokens)  # fmt: skip
    out = [0.0] * len(held.conversations)
    with torch.no_grad(), packed_attention(run.model):
        for bin_ in held.bins:
            row = held.packed(bin_)
            for i, (total, count) in zip(
                bin_, conversation_losses(row, token_losses(run.model, row)), strict=True
            ):
                out[i] = total / count
    return out


def evaluate(run: SftRun, label: str, engine: Engine, sandbox: Any) -> None:
    """Held-out loss (``eval/heldout_<label>.json``) and, with ``eval.enabled``, the suites (``execrl
    train``'s evaluation); each skipped when its file exists (a resumed run keeps its base evaluation)."""
    path = run.run_dir / "eval" / f"heldout_{label}.json"
    if run.data.heldout.conversations and not path.exists():
        losses = heldout_losses(run)
        write_json_atomic(path, {"label": label, "suites": {"heldout": {
            "task_ids": list(run.data.heldout.where), "loss": losses}}})  # fmt: skip
        log.info("held-out loss (%s): %.4f over %d rows", label, sum(losses) / len(losses), len(losses))
    if sandbox is None:
        return
    view = run.config.eval_view()
    environment = setup.build_environment(view, sandbox)
    Evaluation(view, sandbox, environment, run.tokenizer).run(run.run_dir, label, engine)


def trained_engine(run: SftRun, engine: Engine) -> Engine:
    """The run's engine, or with LoRA not folded for sampling one over a merged copy (what ``execrl export``
    writes), as ``execrl train`` evaluates its trained model."""
    if not has_adapters(run.model) or run.config.lora.fold_for_sampling:
        return engine
    return create_engine(run.config.rollout.engine, model=merged_copy(run.model), tokenizer=run.tokenizer)


def write_sft_report(run: SftRun) -> None:
    """The comparisons of base and trained (``eval/heldout_comparison.json``: held-out loss with a paired
    interval over conversations; ``eval/comparison.json`` or ``eval/tools_comparison.json``: the suites, as
    ``execrl train`` writes them) and ``report.md`` showing them all."""
    from execrl.telemetry.report import write_report

    config, eval_dir = run.config, run.run_dir / "eval"
    opts = {"resamples": config.eval.bootstrap_resamples, "seed": config.run.seed}
    shown: dict[str, Any] = {}
    for prefix, compare in (("heldout_", compare_episode_evals), ("", compare_evals),
                            ("tools_", compare_episode_evals)):  # fmt: skip
        base, trained = eval_dir / f"{prefix}base.json", eval_dir / f"{prefix}trained.json"
        if base.exists() and trained.exists():
            pair = [json.loads(path.read_text(encoding="utf-8")) for path in (base, trained)]
            comparison = compare(*pair, **opts)
            write_json_atomic(eval_dir / f"{prefix}comparison.json", comparison)
            shown.update(comparison)
    write_report(run.run_dir, shown or None)
