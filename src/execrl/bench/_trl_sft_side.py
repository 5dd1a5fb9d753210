"""TRL's side of ``execrl bench sft``: ``SFTTrainer`` on execrl's rendered rows, recording what it trained.

``RecordingSFTTrainer`` changes none of TRL's math; ``compute_loss`` copies what TRL already has: the first
micro-batch (``input_ids``, ``position_ids``, ``labels``), its ``num_items_in_batch`` (the step's label
tokens, TRL's normaliser) and the loss TRL returned on it, and the token count of every micro-batch. A
callback times each optimizer step (``on_step_begin`` to ``on_step_end``).

The rows go in pre-tokenised (``input_ids`` and ``assistant_masks``: execrl's ids and loss mask), so both
sides train on the same tokens with the same targets; TRL builds ``labels`` from the mask itself.
Imports TRL at module level: import this module only when the benchmark runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from torch import Tensor
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback
from trl import SFTConfig, SFTTrainer

__all__ = ["TRLSftResult", "TRLSftSettings", "run_trl_sft", "trl_sft_config"]


@dataclass(frozen=True)
class TRLSftSettings:
    max_length: int  # TRL's packed sequence length = execrl's tokens_per_row
    rows_per_step: int  # gradient accumulation steps of one packed sequence each = execrl's rows_per_step
    learning_rate: float
    total_steps: int  # the warm-up step included
    seed: int = 0


@dataclass(frozen=True)
class TRLSftResult:
    step_times_s: tuple[float, ...]  # every optimizer step, warm-up included
    step_tokens: tuple[int, ...]  # tokens of every optimizer step
    microbatch_tokens: tuple[int, ...]  # tokens of every micro-batch (one packed sequence each)
    first_input_ids: Tensor  # [1, T] the first micro-batch
    first_position_ids: Tensor  # [1, T]
    first_labels: Tensor  # [1, T] -100 off the targets
    first_num_items: int  # TRL's normaliser of the first step (its label tokens)
    first_loss: float  # the loss TRL returned on the first micro-batch
    packed_sequences: int  # rows of TRL's packed dataset


@dataclass
class _Recorder:
    first: dict[str, Any] | None = None
    microbatch_tokens: list[int] = field(default_factory=list)
    step_tokens: list[int] = field(default_factory=list)
    step_times_s: list[float] = field(default_factory=list)
    step_started: float = 0.0
    pending_tokens: int = 0


class RecordingSFTTrainer(SFTTrainer):
    """``SFTTrainer`` that copies its first micro-batch and loss, and every micro-batch's size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = _Recorder()

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:  # fmt: skip
        rec = self.recorder
        first = rec.first is None
        if first:
            rec.first = {k: inputs[k].detach().cpu().clone() for k in ("input_ids", "position_ids", "labels")}
            rec.first["num_items"] = int(num_items_in_batch)
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if first:
            assert rec.first is not None
            rec.first["loss"] = float(loss.detach())
        tokens = int(inputs["input_ids"].shape[1])
        rec.microbatch_tokens.append(tokens)
        rec.pending_tokens += tokens
        return loss


class _StepTimer(TrainerCallback):
    def __init__(self, recorder: _Recorder) -> None:
        self.rec = recorder

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.rec.step_started = time.perf_counter()
        self.rec.pending_tokens = 0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.rec.step_times_s.append(time.perf_counter() - self.rec.step_started)
        self.rec.step_tokens.append(self.rec.pending_tokens)


def trl_sft_config(settings: TRLSftSettings, out_dir: Path) -> SFTConfig:
    """TRL's settings for the benchmark: packing on (best-fit decreasing, padding-free: each micro-batch is
    one packed sequence of at most ``max_length`` tokens with per-sequence position ids), the model's own
    ``sdpa`` attention, float32 on CPU, constant LR, AdamW (transformers' default, fused on torch >= 2.8)."""
    return SFTConfig(
        output_dir=str(out_dir),
        max_length=settings.max_length,
        packing=True,
        packing_strategy="bfd",
        padding_free=True,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=settings.rows_per_step,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=settings.total_steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        fp16=False,
        seed=settings.seed,
        data_seed=settings.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def run_trl_sft(
    model: Any, tokenizer: Any, rows: Sequence[tuple[Sequence[int], Sequence[bool]]], settings: TRLSftSettings,
    out_dir: Path,
) -> TRLSftResult:  # fmt: skip
    """Train ``settings.total_steps`` optimizer steps with TRL on ``rows`` (ids, loss mask)."""
    dataset = Dataset.from_dict({"input_ids": [list(ids) for ids, _ in rows],
                                 "assistant_masks": [[int(m) for m in mask] for _, mask in rows]})  # fmt: skip
    trainer = RecordingSFTTrainer(
        model=model, args=trl_sft_config(settings, out_dir), train_dataset=dataset, processing_class=tokenizer
    )
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(_StepTimer(trainer.recorder))
    trainer.train()
    rec = trainer.recorder
    if rec.first is None:
        raise RuntimeError("TRL trained no micro-batch")
    return TRLSftResult(
        step_times_s=tuple(rec.step_times_s), step_tokens=tuple(rec.step_tokens),
        microbatch_tokens=tuple(rec.microbatch_tokens), first_input_ids=rec.first["input_ids"],
        first_position_ids=rec.first["position_ids"], first_labels=rec.first["labels"],
        first_num_items=rec.first["num_items"], first_loss=rec.first["loss"],
        packed_sequences=len(trainer.train_dataset),
    )  # fmt: skip


def execrl_loss_on_first_batch(model: Any, result: TRLSftResult, *, share_prefix_tokens: int) -> float:
    """execrl's loss (``trainer/sft.py``: attention per conversation, shared prefixes computed once, the
    targets' cross-entropy) on TRL's first micro-batch, split back into its conversations, over TRL's
    normaliser: what TRL's ``compute_loss`` returned, computed execrl's way."""
    from execrl.trainer.packing import packed_row
    from execrl.trainer.sft import packed_attention, token_losses

    ids, targets = result.first_input_ids[0].tolist(), (result.first_labels[0] != -100).tolist()
    starts = [int(i) for i in (result.first_position_ids[0] == 0).nonzero().flatten()] + [len(ids)]
    conversations = [(ids[s:e], targets[s:e]) for s, e in zip(starts[:-1], starts[1:], strict=True)]
    row = packed_row(conversations, share_prefix_tokens=share_prefix_tokens)
    with torch.no_grad(), packed_attention(model):
        return float(token_losses(model, row).sum()) / result.first_num_items
