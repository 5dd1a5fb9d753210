"""Gradient-accumulation invariance: one batch and the same batch in micro-batches give the same gradient.

Guards against the TRL #3021 / TRL PR #3231 / ms-swift #10117 class of bugs, where each micro-batch was
normalised by its own token count (or the accumulation count), so the gradient depended on the split.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from execrl.trainer.config import TrainerConfig
from execrl.trainer.logprobs import ValueHead
from execrl.trainer.losses import aggregate_loss, loss_normaliser, ppo_loss
from execrl.trainer.step import accumulate_gradients, prepare_batch

F64 = torch.float64
MODES = [
    ("token-mean", False),
    ("seq-mean-token-mean", False),
    ("seq-mean-token-sum", False),
    ("seq-mean-token-sum-norm", False),
    ("seq-mean-token-sum-norm", True),
]


def _linear_policy_problem():
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(7, 6, 4, generator=gen, dtype=F64)  # [N, T, H]
    tokens = torch.randint(0, 5, (7, 6), generator=gen)  # [N, T]
    lengths = torch.tensor([6, 1, 3, 5, 2, 6, 4])
    mask = (torch.arange(6)[None, :] < lengths[:, None]).long()  # [N, T] ragged
    advantages = torch.randn(7, 1, generator=gen, dtype=F64).expand(7, 6)
    old = -torch.rand(7, 6, generator=gen, dtype=F64)
    return features, tokens, mask, advantages, old


def _grad(weight, rows_split, mode, by_sequences, *, global_normaliser=True):
    features, tokens, mask, advantages, old = _linear_policy_problem()
    weight.grad = None
    step_normaliser = loss_normaliser(mask)
    for rows in rows_split:
        logits = features[rows] @ weight  # [B, T, V]
        logp = torch.log_softmax(logits, -1).gather(-1, tokens[rows, :, None]).squeeze(-1)  # [B, T]
        per_token = ppo_loss(logp, old[rows], advantages[rows], mask[rows], TrainerConfig()).loss
        normaliser = step_normaliser if global_normaliser else None
        loss = aggregate_loss(per_token, mask[rows], mode, normaliser, sum_norm_by_sequences=by_sequences)
        loss.backward()
    return weight.grad.clone()


@pytest.mark.parametrize(("mode", "by_sequences"), MODES)
def test_every_aggregation_is_invariant_to_the_micro_batch_split(mode, by_sequences):
    weight = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=F64, requires_grad=True)
    whole = _grad(weight, [torch.arange(7)], mode, by_sequences)
    for split in ([[0, 1, 2], [3, 4, 5, 6]], [[i] for i in range(7)], [[6, 0], [3], [1, 2, 4, 5]]):
        parts = _grad(weight, [torch.tensor(rows) for rows in split], mode, by_sequences)
        torch.testing.assert_close(parts, whole, atol=1e-10, rtol=0)


def test_per_micro_batch_normalisation_would_break_invariance():
    """The check above can fail: naive per-micro-batch token-means (summed) do not match the full batch."""
    weight = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=F64, requires_grad=True)
    whole = _grad(weight, [torch.arange(7)], "token-mean", False)
    naive = _grad(
        weight,
        [torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5, 6])],
        "token-mean",
        False,
        global_normaliser=False,
    )
    assert (naive / 2 - whole).abs().max() > 1e-3


def _model_grads(model, value_head, batch, config):
    model.zero_grad(set_to_none=True)
    value_head.zero_grad(set_to_none=True)
    prepared = prepare_batch(model, batch, config, value_model=value_head)
    normaliser = loss_normaliser(prepared.response_mask)
    metrics = accumulate_gradients(model, prepared, normaliser, config, value_model=value_head)
    params = [*model.parameters(), *value_head.parameters()]
    return [p.grad.clone() for p in params], metrics


@pytest.mark.parametrize(
    ("mode", "by_sequences", "policy_loss"),
    [*[(mode, by_sequences, "ppo") for mode, by_sequences in MODES], ("seq-mean-token-mean", False, "gspo")],
)
def test_update_step_gradient_is_invariant_to_tokens_per_microbatch(
    tiny_lm, batch, mode, by_sequences, policy_loss
):
    """Whole model path: trimmed/padded micro-batches, KL and entropy terms, a value head on the trunk."""
    value_head = ValueHead(16).to(F64)
    gen = torch.Generator().manual_seed(3)
    batch = dataclasses.replace(
        batch,
        old_values=torch.randn(batch.input_ids.shape, generator=gen, dtype=F64),
        returns=torch.randn(batch.input_ids.shape, generator=gen, dtype=F64),
        valid=torch.tensor([True, True, True, False, True, True]),
    )
    common = dict(
        loss_aggregation=mode,
        loss_sum_norm_by_sequences=by_sequences,
        policy_loss=policy_loss,
        kl_coef=0.1,
        entropy_coef=0.01,
    )
    whole, whole_metrics = _model_grads(
        tiny_lm, value_head, batch, TrainerConfig(tokens_per_microbatch=10_000, **common)
    )
    split, split_metrics = _model_grads(
        tiny_lm, value_head, batch, TrainerConfig(tokens_per_microbatch=12, **common)
    )
    for a, b in zip(split, whole, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert whole_metrics.keys() == split_metrics.keys()
    for name, value in whole_metrics.items():
        assert split_metrics[name] == pytest.approx(value, abs=1e-9), name
