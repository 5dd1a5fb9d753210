"""TRL's side of ``execrl bench train``: a recording ``GRPOTrainer``, step timing, and the loss agreement check.

``RecordingGRPOTrainer`` changes none of TRL's math. It only copies values TRL already computes:

* ``_calculate_rewards``: the rewards of the first generation batch (rows in generation order: the
  ``num_generations`` samples of one prompt are contiguous, before TRL shuffles the rows);
* ``_generate_and_score_completions``: that batch's prompt/completion ids and masks, TRL's advantages and
  ``num_items_in_batch``; and the generated-token count of every step;
* ``compute_loss``: the loss TRL returned for the first micro-batch (with ``gradient_accumulation_steps=1``
  and ``steps_per_generation=1`` that is the whole batch, not scaled), plus, under ``torch.no_grad``, TRL's
  per-token log-probs and TRL's loss for every supported ``loss_type`` on the unshuffled batch;
* ``_clip_grad_norm``: the pre-clip gradient norm of the first optimizer step.

The extra work happens in the first (warm-up) step only, which the benchmark does not time.

``check_loss_agreement`` then runs execrl's update step (``prepare_batch`` + ``policy_update``) on the
captured batch from the initial weights (see ``execrl.bench.train`` for the loss-type mapping and limits).
Imports TRL at module level: import this module only when the benchmark runs.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from torch import Tensor
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from execrl.trainer import (
    TrainBatch,
    TrainerConfig,
    build_optimizer,
    compute_advantages,
    policy_update,
    prepare_batch,
)

__all__ = [
    "LOSS_AGGREGATION_FOR_TRL",
    "LOSS_TYPES",
    "CapturedBatch",
    "ExecrlLoss",
    "LossCheck",
    "RecordingGRPOTrainer",
    "TRLResult",
    "TRLSettings",
    "check_loss_agreement",
    "execrl_loss_on_batch",
    "execrl_trainer_config",
    "grpo_config",
    "run_trl",
]

# TRL loss_type -> execrl loss_aggregation (dr_grpo also divides by sequences, with L = max_completion_length)
LOSS_AGGREGATION_FOR_TRL = {
    "dapo": "token-mean",
    "bnpo": "token-mean",
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
TRL_ADVANTAGE_STD_EPS = 1e-4  # TRL: advantages / (std_rewards + 1e-4)
LOSS_TOLERANCE = 1e-4
LOSS_TYPES = tuple(LOSS_AGGREGATION_FOR_TRL)
_BATCH_KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")

# A reward as both sides call it: (task index of each row, completion texts) -> one float per row.
RowReward = Callable[[Sequence[int], Sequence[str]], list[float]]


@dataclass(frozen=True)
class CapturedBatch:
    """TRL's first batch and what TRL computed on it, under the initial weights. Rows are prompt-major."""

    prompt_ids: Tensor  # [N, P] left-padded
    prompt_mask: Tensor  # [N, P]
    completion_ids: Tensor  # [N, T] right-padded
    completion_mask: Tensor  # [N, T] 1 up to and including EOS
    rewards: Tensor  # [N] float32
    advantages: Tensor  # [N] TRL's
    logprobs: Tensor  # [N, T] TRL's per-token log-probs (temperature 1)
    loss: float  # what compute_loss returned in the real step (configured loss_type)
    losses_by_type: dict[str, float]  # TRL's loss for each of LOSS_TYPES on the same batch
    grad_norm: float  # pre-clip gradient norm of TRL's first optimizer step (nan if none)
    loss_type: str
    samples_per_prompt: int
    max_completion_length: int


@dataclass(frozen=True)
class TRLSettings:
    loss_type: str
    learning_rate: float
    prompts: int
    samples_per_prompt: int
    max_new_tokens: int
    total_steps: int  # warm-up step included
    seed: int = 0
    activation_checkpointing: bool = False  # TRL's memory setting (bench long-context turns it on)

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type={self.loss_type!r} is not one of {', '.join(LOSS_TYPES)}")


@dataclass(frozen=True)
class TRLResult:
    step_times_s: tuple[float, ...]  # every optimizer step, warm-up included
    generated_tokens: tuple[int, ...]  # completion tokens (EOS included) of every step
    captured: CapturedBatch


@dataclass
class _Recorder:
    """Mutable scratch space of one training run (internal)."""

    rewards: Tensor | None = None
    first: dict[str, Any] | None = None
    logprobs: Tensor | None = None
    loss: float | None = None
    losses_by_type: dict[str, float] = field(default_factory=dict)
    grad_norm: float = float("nan")
    generated_tokens: list[int] = field(default_factory=list)


class RecordingGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that copies its first batch, loss and gradient norm into ``self.recorder``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = _Recorder()

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Tensor:
        rewards: Tensor = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.recorder.rewards is None:
            self.recorder.rewards = rewards.detach().sum(dim=1).cpu().clone()  # [N] (one reward function)
        return rewards

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        out: dict[str, Any] = super()._generate_and_score_completions(inputs)
        self.recorder.generated_tokens.append(int(out["completion_mask"].sum()))
        if self.recorder.first is None:
            self.recorder.first = {
                k: (v.detach().clone() if isinstance(v, Tensor) else v) for k, v in out.items()
            }
        return out

    def compute_loss(
        self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Tensor:
        first = self.recorder.loss is None
        if first:
            self._record_reference_values(model)
        loss: Tensor = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if first:
            self.recorder.loss = float(loss.detach())
        return loss

    def _record_reference_values(self, model: Any) -> None:
        """TRL's log-probs and its loss for every loss type on the unshuffled first batch (no grad)."""
        first = self.recorder.first
        assert first is not None
        with torch.no_grad():
            input_ids = torch.cat([first["prompt_ids"], first["completion_ids"]], dim=1)  # [N, P+T]
            attention = torch.cat([first["prompt_mask"], first["completion_mask"]], dim=1)  # [N, P+T]
            logps, _, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention, first["completion_ids"].shape[1]
            )
            self.recorder.logprobs = logps.detach().float().cpu()  # [N, T]
            configured = self.loss_type
            try:
                for loss_type in LOSS_TYPES:
                    self.loss_type = loss_type
                    self.recorder.losses_by_type[loss_type] = float(super().compute_loss(model, dict(first)))
            finally:
                self.loss_type = configured

    def _clip_grad_norm(self, model: Any) -> Any:
        norm = super()._clip_grad_norm(model)  # type: ignore[no-untyped-call]
        if math.isnan(self.recorder.grad_norm) and norm is not None:  # the first optimizer step only
            self.recorder.grad_norm = float(norm)
        return norm

    def captured(self, max_completion_length: int) -> CapturedBatch:
        rec = self.recorder
        if rec.first is None or rec.rewards is None or rec.logprobs is None or rec.loss is None:
            raise RuntimeError("the GRPOTrainer ran no training step, so no batch was captured")
        batch = {k: rec.first[k].cpu() for k in _BATCH_KEYS}
        assert self.num_generations is not None  # set from GRPOConfig.num_generations in training
        return CapturedBatch(
            **batch,
            rewards=rec.rewards,
            logprobs=rec.logprobs,
            loss=rec.loss,
            losses_by_type=dict(rec.losses_by_type),
            grad_norm=rec.grad_norm,
            loss_type=str(self.loss_type),
            samples_per_prompt=self.num_generations,
            max_completion_length=max_completion_length,
        )


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step: ``on_step_begin`` (before generation) to ``on_step_end``."""

    def __init__(self) -> None:
        self.times_s: list[float] = []
        self._started = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.times_s.append(time.perf_counter() - self._started)
        label = "warm-up" if len(self.times_s) == 1 else f"step {len(self.times_s) - 1}"
        print(f"[bench train] TRL {label}: {self.times_s[-1]:.2f} s", file=sys.stderr, flush=True)


def grpo_config(settings: TRLSettings, output_dir: Path) -> GRPOConfig:
    """TRL settings matching execrl's update: one optimizer step per batch, no KL, constant LR, float32.

    TRL's defaults changed here, and why: ``bf16`` off and ``gradient_checkpointing`` off unless
    ``settings.activation_checkpointing`` (``bench train``: execrl trains float32 without trunk checkpointing,
    and checkpointing would slow TRL down; ``bench long-context`` turns it on on both sides, for memory),
    ``lr_scheduler_type="constant"``
    (execrl's default; TRL's linear decay would lower the LR of later steps), no logging, saving or tqdm.
    """
    group = settings.samples_per_prompt
    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        activation_checkpointing=settings.activation_checkpointing,  # transformers 5 gradient_checkpointing
        per_device_train_batch_size=settings.prompts * group,
        num_generations=group,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_iterations=1,
        max_completion_length=settings.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        loss_type=settings.loss_type,
        scale_rewards="group",
        epsilon=0.2,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=settings.total_steps,
        seed=settings.seed,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_trl(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    reward: RowReward,
    settings: TRLSettings,
    output_dir: Path,
) -> TRLResult:
    """Train ``model`` with ``GRPOTrainer`` for ``settings.total_steps`` steps on ``prompts`` (one user message each).

    ``reward(task_indices, texts)`` scores the completions; the dataset carries each prompt's index in
    ``prompts`` so the reward can find its task. Every step draws all prompts (dataset size = prompts per step).
    """
    if len(prompts) != settings.prompts:
        raise ValueError(f"got {len(prompts)} prompts, settings.prompts={settings.prompts}")
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": p}], "task_index": i} for i, p in enumerate(prompts)]
    )

    def code_reward(completions: list[Any], task_index: list[int], **kwargs: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        return reward(task_index, texts)

    timer = StepTimer()
    trainer = RecordingGRPOTrainer(
        model=model,
        reward_funcs=[code_reward],
        args=grpo_config(settings, output_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.remove_callback(PrinterCallback)  # it prints the end-of-training metrics dict (disable_tqdm=True)
    trainer.train()
    return TRLResult(
        step_times_s=tuple(timer.times_s),
        generated_tokens=tuple(trainer.recorder.generated_tokens),
        captured=trainer.captured(settings.max_new_tokens),
    )


def execrl_trainer_config(loss_type: str, *, learning_rate: float, max_new_tokens: int) -> TrainerConfig:
    """execrl's ``TrainerConfig`` equivalent to a TRL ``GRPOConfig`` with ``loss_type`` (see module doc).

    No dual clip (TRL has none), symmetric clip 0.2, one epoch, one optimizer step, max grad norm 1, no KL.
    """
    if loss_type not in LOSS_AGGREGATION_FOR_TRL:
        raise ValueError(f"loss_type={loss_type!r} is not one of {', '.join(LOSS_AGGREGATION_FOR_TRL)}")
    dr_grpo = loss_type == "dr_grpo"
    return TrainerConfig(
        learning_rate=learning_rate,
        max_grad_norm=1.0,
        ppo_epochs=1,
        optimizer_steps_per_epoch=1,
        policy_loss="ppo",
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        clip_ratio_c=None,
        loss_aggregation=LOSS_AGGREGATION_FOR_TRL[loss_type],
        loss_sum_norm_length=max_new_tokens if dr_grpo else None,
        loss_sum_norm_by_sequences=dr_grpo,
        advantage_estimator="grpo",
        advantage_std_eps=TRL_ADVANTAGE_STD_EPS,
        kl_coef=0.0,
        logprob_temperature=1.0,
    )


@dataclass(frozen=True)
class ExecrlLoss:
    loss: float  # execrl's loss/policy on the batch
    grad_norm: float  # pre-clip gradient norm of its optimizer step
    logprobs: torch.Tensor  # [N, T] execrl's old log-probs of the completion tokens
    advantages: torch.Tensor  # [N]


def execrl_loss_on_batch(
    model: Any, captured: CapturedBatch, loss_type: str, *, learning_rate: float = 1e-6
) -> ExecrlLoss:
    """Run execrl's update step on TRL's captured batch; ``model`` must hold the weights TRL started from.

    The update mutates ``model`` (one AdamW step): pass a copy. Every row counts as valid (TRL has no
    invalid-reward notion here).
    """
    config = execrl_trainer_config(
        loss_type, learning_rate=learning_rate, max_new_tokens=captured.max_completion_length
    )
    advantages = compute_advantages(
        config.advantage_estimator,
        captured.rewards.double(),
        samples_per_prompt=captured.samples_per_prompt,
        eps=config.advantage_std_eps,
    )  # [N]
    completion_mask = captured.completion_mask.long()  # [N, T]
    batch = TrainBatch(
        input_ids=torch.cat([captured.prompt_ids, captured.completion_ids], dim=1),  # [N, P+T]
        attention_mask=torch.cat([captured.prompt_mask.long(), completion_mask], dim=1),
        response_mask=torch.cat([torch.zeros_like(captured.prompt_mask.long()), completion_mask], dim=1),
        old_logprobs=None,
        advantages=advantages.float(),
    )
    prepared = prepare_batch(model, batch, config)
    assert prepared.old_logprobs is not None
    width = captured.completion_ids.shape[1]
    metrics = policy_update(model, build_optimizer(model, config), None, prepared, config)
    return ExecrlLoss(
        loss=metrics["loss/policy"],
        grad_norm=metrics["train/grad_norm"],
        logprobs=prepared.old_logprobs[:, -width:].detach(),
        advantages=advantages.float(),
    )


@dataclass(frozen=True)
class LossCheck:
    loss_type: str
    execrl_aggregation: str
    loss_trl: float
    loss_execrl: float
    loss_abs_diff: float
    ok: bool  # loss_abs_diff <= tolerance
    grad_norm_trl: float | None  # only for the loss type TRL trained with (its real backward)
    grad_norm_execrl: float
    logprob_max_abs_diff: float  # over completion tokens, TRL vs execrl, initial weights
    advantage_max_abs_diff: float


def check_loss_agreement(
    initial_model: Any,
    captured: CapturedBatch,
    *,
    learning_rate: float,
    tolerance: float = LOSS_TOLERANCE,
) -> list[LossCheck]:
    """Compare TRL's loss on its first batch with execrl's, for every loss type TRL computed there.

    The configured type uses the loss TRL's real step returned (and its gradient norm); the others use the
    losses TRL computed on the same batch without gradient. ``initial_model`` is copied for each type.
    """
    checks = []
    mask = captured.completion_mask.bool()  # [N, T]
    for loss_type, trl_loss in captured.losses_by_type.items():
        configured = loss_type == captured.loss_type
        ours = execrl_loss_on_batch(
            copy.deepcopy(initial_model), captured, loss_type, learning_rate=learning_rate
        )
        loss_trl = captured.loss if configured else trl_loss
        diff = abs(loss_trl - ours.loss)
        logprob_diff = (ours.logprobs.float() - captured.logprobs.float()).abs()[mask]
        checks.append(
            LossCheck(
                loss_type=loss_type,
                execrl_aggregation=LOSS_AGGREGATION_FOR_TRL[loss_type],
                loss_trl=loss_trl,
                loss_execrl=ours.loss,
                loss_abs_diff=diff,
                ok=diff <= tolerance,
                grad_norm_trl=captured.grad_norm if configured else None,
                grad_norm_execrl=ours.grad_norm,
                logprob_max_abs_diff=float(logprob_diff.max()) if logprob_diff.numel() else 0.0,
                advantage_max_abs_diff=float((ours.advantages - captured.advantages.float()).abs().max()),
            )
        )
    return checks
