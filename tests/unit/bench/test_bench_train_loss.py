"""``execrl bench train``'s loss agreement: execrl's update step vs TRL's ``GRPOTrainer.compute_loss``.

TRL's loss is computed by TRL itself (a ``RecordingGRPOTrainer`` around a tiny random Llama, its
``compute_loss`` called on a hand-built batch) and compared with execrl's ``prepare_batch`` +
``policy_update`` on a fresh copy of the same weights. The batch has left-padded prompts and completions of
different lengths, so token-mean and sequence-mean aggregations give different numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from execrl.bench._trl_side import (
    LOSS_TYPES,
    CapturedBatch,
    RecordingGRPOTrainer,
    TRLSettings,
    check_loss_agreement,
    execrl_loss_on_batch,
    execrl_trainer_config,
    grpo_config,
)
from execrl.rollout.models import default_tokenizer, tiny_model

GROUP = 4
VOCAB = 1024  # token ids below stay < 1000; a small vocabulary keeps the lm_head cheap
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.25]  # two prompts x four samples
LENGTHS = [8, 3, 5, 1, 6, 8, 2, 4]  # completion tokens per row (EOS included), width T = 8
PROMPT_LENGTHS = [5, 5, 5, 5, 3, 3, 3, 3]  # the second prompt is left-padded by two


def _const_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    return [0.0] * len(completions)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerBase:
    return default_tokenizer()


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    n, p, t = len(LENGTHS), max(PROMPT_LENGTHS), max(LENGTHS)
    prompt_mask = torch.tensor([[0] * (p - k) + [1] * k for k in PROMPT_LENGTHS])  # [N, P]
    prompt_ids = torch.where(prompt_mask > 0, torch.randint(3, 1000, (n, p), generator=gen), 2)
    completion_mask = torch.tensor([[1] * k + [0] * (t - k) for k in LENGTHS])  # [N, T]
    completion_ids = torch.where(completion_mask > 0, torch.randint(3, 1000, (n, t), generator=gen), 2)
    rewards = torch.tensor(REWARDS).view(-1, GROUP)  # [G, 4]
    # TRL's formula (grpo_trainer.py, scale_rewards="group"): (r - mean) / (unbiased std + 1e-4)
    advantages = (rewards - rewards.mean(dim=1, keepdim=True)) / (rewards.std(dim=1, keepdim=True) + 1e-4)
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages.reshape(-1),
        "num_items_in_batch": completion_mask.sum(),
    }


def _trl_trainer(tmp_path: Path, tokenizer: PreTrainedTokenizerBase, loss_type: str) -> RecordingGRPOTrainer:
    settings = TRLSettings(
        loss_type=loss_type,
        learning_rate=1e-6,
        prompts=2,
        samples_per_prompt=GROUP,
        max_new_tokens=max(LENGTHS),
        total_steps=1,
    )
    dataset = Dataset.from_list([{"prompt": "a"}, {"prompt": "b"}])
    return RecordingGRPOTrainer(
        model=tiny_model(VOCAB, seed=0),
        reward_funcs=[_const_reward],
        args=grpo_config(settings, tmp_path),
        train_dataset=dataset,
        processing_class=tokenizer,
    )


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_execrl_loss_matches_trl_compute_loss(
    tmp_path: Path, tokenizer: PreTrainedTokenizerBase, loss_type: str
) -> None:
    trainer = _trl_trainer(tmp_path, tokenizer, loss_type)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; one accumulation step
    batch = _batch()
    trainer.recorder.first = batch
    trainer.recorder.rewards = torch.tensor(REWARDS)
    order = torch.randperm(8, generator=torch.Generator().manual_seed(1))  # TRL shuffles the rows
    shuffled = {k: (v[order] if v.dim() else v) for k, v in batch.items()}
    loss = trainer.compute_loss(trainer.model, shuffled)
    loss.backward()
    params = [p for p in trainer.model.parameters() if p.grad is not None]
    trainer.recorder.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, math.inf))
    captured = trainer.captured(max(LENGTHS))

    checks = check_loss_agreement(tiny_model(VOCAB, seed=0), captured, learning_rate=1e-6)

    assert [c.loss_type for c in checks] == list(LOSS_TYPES)
    for check in checks:
        assert check.ok, check
        assert check.logprob_max_abs_diff < 1e-5
        assert check.advantage_max_abs_diff < 1e-5
    head = next(c for c in checks if c.loss_type == loss_type)
    assert head.grad_norm_trl is not None and head.grad_norm_trl > 0
    assert head.grad_norm_execrl == pytest.approx(head.grad_norm_trl, rel=1e-4)
    assert len({round(c.loss_trl, 6) for c in checks}) >= 3  # the aggregations really differ on this batch


def test_token_mean_loss_matches_hand_computed_value() -> None:
    """With one iteration the ratio is 1, so token-mean loss = -sum_i A_i * |o_i| / sum_i |o_i|."""
    batch = _batch()
    captured = CapturedBatch(
        **{
            k: batch[k]
            for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")
        },
        rewards=torch.tensor(REWARDS),
        logprobs=torch.zeros(8, 8),
        loss=0.0,
        losses_by_type={},
        grad_norm=math.nan,
        loss_type="dapo",
        samples_per_prompt=GROUP,
        max_completion_length=8,
    )
    # group 1: rewards [1, 0, 0, 1], mean 0.5, std sqrt(1/3); lengths [8, 3, 5, 1]: sum (r - mean) * len = 0.5
    a1 = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    # group 2: rewards [0.5, 0, 1, 0.25], mean 0.4375, var 0.546875 / 3; sum (r - mean) * len = -2.75
    a2 = -2.75 / (math.sqrt(0.546875 / 3) + 1e-4)
    expected = -(a1 + a2) / 37  # 37 completion tokens
    ours = execrl_loss_on_batch(tiny_model(VOCAB, seed=0), captured, "dapo")
    assert ours.loss == pytest.approx(expected, abs=1e-6)
    # dr_grpo: sum / (N * max_completion_length) = sum / (8 * 8)
    dr = execrl_loss_on_batch(tiny_model(VOCAB, seed=0), captured, "dr_grpo")
    assert dr.loss == pytest.approx(-(a1 + a2) / 64, abs=1e-6)


def test_trainer_config_maps_trl_loss_types() -> None:
    from execrl.bench import train

    assert train.LOSS_TYPES == LOSS_TYPES  # the CLI choices (train.py stays torch-free) match the mapping
    dr = execrl_trainer_config("dr_grpo", learning_rate=1e-6, max_new_tokens=64)
    assert (dr.loss_aggregation, dr.loss_sum_norm_length, dr.loss_sum_norm_by_sequences) == (
        "seq-mean-token-sum-norm",
        64,
        True,
    )
    grpo = execrl_trainer_config("grpo", learning_rate=1e-6, max_new_tokens=64)
    assert (grpo.loss_aggregation, grpo.advantage_std_eps, grpo.clip_ratio_c) == (
        "seq-mean-token-mean",
        1e-4,
        None,
    )
    with pytest.raises(ValueError, match="cispo"):
        execrl_trainer_config("cispo", learning_rate=1e-6, max_new_tokens=64)
