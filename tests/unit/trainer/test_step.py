"""policy_update, compute_logprobs, micro-batching, LR schedule and TrainerConfig validation."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import torch

from execrl.trainer.batching import microbatch_rows, minibatch_rows
from execrl.trainer.config import TrainerConfig, needs_reference
from execrl.trainer.logprobs import Critic, ValueHead, compute_logprobs, policy_forward
from execrl.trainer.losses import POLICY_LOSSES, PolicyLossOutput
from execrl.trainer.step import (
    TrainBatch,
    build_optimizer,
    build_scheduler,
    lr_factor,
    policy_update,
    prepare_batch,
)

F64 = torch.float64


def _reference_logprobs(model, input_ids):
    logits = model(input_ids).logits  # [N, S, V], no padding
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def test_compute_logprobs_matches_full_forward_chunked_and_left_padded(tiny_lm):
    ids = torch.randint(0, 32, (3, 7), generator=torch.Generator().manual_seed(0))
    expected = _reference_logprobs(tiny_lm, ids)
    with torch.no_grad():
        logp, entropy = compute_logprobs(tiny_lm, ids, torch.ones_like(ids), chunk_tokens=4)
        padded = torch.cat([torch.zeros(3, 2, dtype=torch.long), ids], dim=1)
        mask = torch.cat([torch.zeros(3, 2, dtype=torch.long), torch.ones_like(ids)], dim=1)
        logp_padded, _ = compute_logprobs(tiny_lm, padded, mask)
    torch.testing.assert_close(logp[:, 1:], expected.detach(), atol=1e-12, rtol=0)
    assert torch.equal(logp[:, 0], torch.zeros(3, dtype=F64))
    torch.testing.assert_close(logp_padded[:, 3:], logp[:, 1:], atol=1e-12, rtol=0)
    assert torch.equal(logp_padded[:, :3], torch.zeros(3, 3, dtype=F64))  # no context -> 0
    assert bool((entropy[:, 1:] > 0).all()) and bool((entropy[:, 1:] <= math.log(32) + 1e-9).all())


def test_compute_logprobs_temperature_and_full_logits_fallback(tiny_lm):
    ids = torch.randint(0, 32, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = tiny_lm(ids).logits / 0.7
        expected = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        split, _ = compute_logprobs(tiny_lm, ids, torch.ones_like(ids), temperature=0.7)
        tiny_lm.config.final_logit_softcapping = 30.0  # Llama ignores it; forces the full-logits path here
        fallback, _ = compute_logprobs(tiny_lm, ids, torch.ones_like(ids), temperature=0.7)
    torch.testing.assert_close(split[:, 1:], expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(fallback, split, atol=1e-12, rtol=0)


def test_microbatch_rows_respect_budget_and_cover_every_row(batch):
    groups = microbatch_rows(batch.attention_mask, tokens_per_microbatch=14)
    seen = sorted(row for rows, _ in groups for row in rows.tolist())
    assert seen == list(range(6))
    for rows, columns in groups:
        width = columns.stop - columns.start
        assert len(rows) == 1 or len(rows) * width <= 14
        assert bool(batch.attention_mask[rows][:, columns].sum() == batch.attention_mask[rows].sum())
    assert [r.tolist() for r in minibatch_rows(5, 2)] == [[0, 1, 2], [3, 4]]


def test_policy_update_changes_parameters_and_reports_metrics(tiny_lm, batch):
    config = TrainerConfig(
        learning_rate=1e-2, kl_coef=0.05, ppo_epochs=2, optimizer_steps_per_epoch=2, tokens_per_microbatch=20
    )
    optimizer = build_optimizer(tiny_lm, config)
    scheduler = build_scheduler(optimizer, config)
    before = [p.detach().clone() for p in tiny_lm.parameters()]
    metrics = policy_update(tiny_lm, optimizer, scheduler, batch, config)
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_lm.parameters(), strict=True))
    expected = {
        "loss/policy", "loss/kl", "loss/entropy", "kl/ref_mean", "entropy/mean", "train/clip_frac_high",
        "train/clip_frac_low", "train/dual_clip_frac", "train/ppo_kl", "train/grad_norm", "train/lr",
        "advantage/mean", "advantage/std", "advantage/min", "advantage/max", "perf/tokens_per_s",
        "train/optimizer_steps", "train/skipped_steps", "train/empty_steps",
    }  # fmt: skip
    assert expected <= metrics.keys()
    assert metrics["train/optimizer_steps"] == 4 and metrics["train/skipped_steps"] == 0
    assert metrics["train/lr"] == 1e-2 and all(math.isfinite(v) for v in metrics.values())
    assert metrics["advantage/max"] == 1.0 and metrics["advantage/min"] == -1.2


def test_on_policy_first_epoch_has_unit_ratio(tiny_lm, batch):
    config = TrainerConfig(learning_rate=1e-3)
    metrics = policy_update(
        tiny_lm, build_optimizer(tiny_lm, config), None, dataclasses.replace(batch, old_logprobs=None), config
    )
    assert metrics["train/ppo_kl"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["train/clip_frac_high"] == 0.0 and metrics["train/clip_frac_low"] == 0.0


def test_positive_advantage_raises_the_sequence_log_prob(tiny_lm, batch):
    config = TrainerConfig(learning_rate=1e-2)
    optimizer = build_optimizer(tiny_lm, config)
    batch = dataclasses.replace(batch, old_logprobs=None, ref_logprobs=None)
    with torch.no_grad():
        before, _ = compute_logprobs(
            tiny_lm, batch.input_ids, batch.attention_mask, token_mask=batch.response_mask
        )
    for _ in range(3):
        policy_update(tiny_lm, optimizer, None, batch, config)
    with torch.no_grad():
        after, _ = compute_logprobs(
            tiny_lm, batch.input_ids, batch.attention_mask, token_mask=batch.response_mask
        )
    change = (after - before).sum(-1)  # [N]
    assert bool((change[batch.advantages > 0] > 0).all()) and bool((change[batch.advantages < 0] < 0).all())


def test_non_finite_gradient_skips_the_step(tiny_lm, batch):
    config = TrainerConfig(learning_rate=1e-2)
    before = [p.detach().clone() for p in tiny_lm.parameters()]
    nan_batch = dataclasses.replace(batch, advantages=torch.full((6,), math.nan, dtype=F64))
    metrics = policy_update(tiny_lm, build_optimizer(tiny_lm, config), None, nan_batch, config)
    assert metrics["train/skipped_steps"] == 1 and metrics["train/optimizer_steps"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_lm.parameters(), strict=True))


def test_all_invalid_rows_take_no_step(tiny_lm, batch):
    config = TrainerConfig(learning_rate=1e-2)
    before = [p.detach().clone() for p in tiny_lm.parameters()]
    invalid = dataclasses.replace(batch, valid=torch.zeros(6, dtype=torch.bool))
    metrics = policy_update(tiny_lm, build_optimizer(tiny_lm, config), None, invalid, config)
    assert metrics["train/empty_steps"] == 1 and metrics["train/optimizer_steps"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_lm.parameters(), strict=True))


def test_kl_needs_reference_logprobs_or_model(tiny_lm, batch):
    config = TrainerConfig(kl_coef=0.1)
    no_ref = dataclasses.replace(batch, ref_logprobs=None)
    with pytest.raises(ValueError, match="set TrainBatch.ref_logprobs or pass ref_model"):
        policy_update(tiny_lm, build_optimizer(tiny_lm, config), None, no_ref, config)
    ref_model = type(tiny_lm)(tiny_lm.config).to(F64)
    metrics = policy_update(
        tiny_lm, build_optimizer(tiny_lm, config), None, no_ref, config, ref_model=ref_model
    )
    assert metrics["kl/ref_mean"] > 0 and "loss/kl" in metrics
    assert needs_reference(config) and not needs_reference(TrainerConfig())


def test_value_model_options(tiny_lm, batch):
    values = dataclasses.replace(
        batch, old_values=torch.zeros(6, 10, dtype=F64), returns=torch.ones(6, 10, dtype=F64)
    )
    config = TrainerConfig(learning_rate=1e-2)
    for value_model in (ValueHead(16).to(F64), Critic(type(tiny_lm)(tiny_lm.config).to(F64), 16).to(F64)):
        optimizer = build_optimizer(tiny_lm, config, extra_modules=(value_model,))
        metrics = policy_update(tiny_lm, optimizer, None, values, config, value_model=value_model)
        assert metrics["loss/value"] > 0 and 0 <= metrics["train/value_clip_frac"] <= 1
    with pytest.raises(ValueError, match="old_values / returns are missing"):
        policy_update(
            tiny_lm, build_optimizer(tiny_lm, config), None, batch, config, value_model=ValueHead(16)
        )


def test_lr_schedule_warmup_then_decay():
    linear = TrainerConfig(lr_schedule="linear", warmup_steps=2, total_steps=6, min_lr_ratio=0.1)
    assert [round(lr_factor(s, linear), 6) for s in range(8)] == [0.5, 1.0, 1.0, 0.775, 0.55, 0.325, 0.1, 0.1]
    cosine = TrainerConfig(lr_schedule="cosine", warmup_steps=0, total_steps=4)
    assert [round(lr_factor(s, cosine), 6) for s in range(5)] == [1.0, 0.853553, 0.5, 0.146447, 0.0]
    assert lr_factor(100, TrainerConfig()) == 1.0


def test_train_batch_shape_validation(batch):
    with pytest.raises(ValueError, match=r"TrainBatch.old_logprobs has shape \(6, 9\), expected \(6, 10\)"):
        dataclasses.replace(batch, old_logprobs=batch.old_logprobs[:, :9])
    with pytest.raises(ValueError, match="valid must be bool"):
        dataclasses.replace(batch, valid=torch.ones(6))
    assert isinstance(batch, TrainBatch)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"learning_rate": 0.0}, "learning_rate must be a finite number > 0"),
        ({"loss_aggregation": "mean"}, "loss_aggregation='mean' is not one of: token-mean"),
        ({"kl_estimator": "k4"}, "kl_estimator='k4' is not one of: k1, k2, k3"),
        ({"lr_schedule": "cosine"}, "set total_steps"),
        ({"warmup_steps": 5, "total_steps": 2}, "lower warmup_steps or raise total_steps"),
        ({"clip_ratio_c": 1.0}, "clip_ratio_c must be a finite number > 1"),
        ({"tokens_per_microbatch": 0}, "tokens_per_microbatch must be an integer >= 1"),
        ({"ppo_epochs": True}, "ppo_epochs must be an integer >= 1"),
    ],
)
def test_config_validation_says_what_to_set(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainerConfig(**kwargs)


def test_config_and_package_import_do_not_import_torch():
    code = "import sys, execrl.trainer as t; t.TrainerConfig(); assert 'torch' not in sys.modules; print(len(t.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) > 30


def test_exported_names_resolve():
    import execrl.trainer as trainer

    assert trainer.__all__ and all(getattr(trainer, name) is not None for name in trainer.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        trainer.nope  # noqa: B018


def test_kl_in_reward_needs_no_reference_in_the_update(tiny_lm, batch):
    config = TrainerConfig(kl_coef=0.1, kl_in_reward=True)
    metrics = policy_update(
        tiny_lm, build_optimizer(tiny_lm, config), None, dataclasses.replace(batch, ref_logprobs=None), config
    )
    assert "loss/kl" not in metrics and "kl/ref_mean" not in metrics and metrics["train/optimizer_steps"] == 1


def test_user_registered_policy_loss_is_used_by_the_update(tiny_lm, batch):
    name = "test_vanilla_policy_gradient"
    if name not in POLICY_LOSSES:

        @POLICY_LOSSES.register(name)
        def vanilla(logp, old_logp, advantages, mask, config):
            zeros = torch.zeros_like(mask, dtype=torch.bool)
            return PolicyLossOutput(
                loss=-advantages * logp, clipped_high=zeros, clipped_low=zeros, dual_clipped=zeros
            )

    config = TrainerConfig(policy_loss=name, learning_rate=1e-3)
    metrics = policy_update(tiny_lm, build_optimizer(tiny_lm, config), None, batch, config)
    prepared = prepare_batch(tiny_lm, batch, config)
    with torch.no_grad():
        logp, _ = compute_logprobs(
            tiny_lm, batch.input_ids, batch.attention_mask, token_mask=batch.response_mask
        )
    assert metrics["train/optimizer_steps"] == 1 and math.isfinite(metrics["loss/policy"])
    assert prepared.response_mask.sum() == batch.response_mask.sum() and logp.shape == batch.input_ids.shape
    with pytest.raises(KeyError, match="unknown policy loss 'nope'"):
        policy_update(
            tiny_lm, build_optimizer(tiny_lm, config), None, batch, TrainerConfig(policy_loss="nope")
        )


def test_entropy_enters_autograd_only_when_asked(tiny_lm):
    """Regression: an entropy kept in the graph but never back-propagated held every chunk's [K, V]
    tensors alive through backward (1.8 GB instead of 0.3 GB for 8 x 512 tokens, 49k vocab)."""
    ids = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(2))
    logp, entropy = compute_logprobs(tiny_lm, ids, torch.ones_like(ids), chunk_tokens=3)
    assert logp.requires_grad and not entropy.requires_grad
    _, entropy_with_grad, _ = policy_forward(
        tiny_lm, ids, torch.ones_like(ids), chunk_tokens=3, entropy_grad=True
    )
    assert entropy_with_grad.requires_grad
    torch.testing.assert_close(entropy_with_grad.detach(), entropy, atol=1e-12, rtol=0)


def test_microbatch_rows_keep_prompt_groups_together():
    # Six rows, three groups of two interleaved (0,3), (1,4), (2,5); lengths 2..7 so a length sort mixes them.
    mask = torch.zeros(6, 8, dtype=torch.long)
    for row, length in enumerate([2, 3, 4, 5, 6, 7]):
        mask[row, 8 - length :] = 1
    groups = torch.tensor([0, 1, 2, 0, 1, 2])
    by_length = microbatch_rows(mask, tokens_per_microbatch=16)
    by_group = microbatch_rows(mask, tokens_per_microbatch=16, groups=groups)

    def split_groups(parts):
        return sum(len({int(groups[r]) for r in rows}) for rows, _ in parts)

    assert sorted(r for rows, _ in by_group for r in rows.tolist()) == list(range(6))
    assert split_groups(by_group) == 3  # each group in exactly one micro-batch
    assert split_groups(by_length) > 3
    for rows, columns in by_group:
        assert len(rows) == 1 or len(rows) * (columns.stop - columns.start) <= 16


def test_microbatch_rows_split_a_group_larger_than_the_budget():
    mask = torch.ones(6, 4, dtype=torch.long)
    parts = microbatch_rows(mask, tokens_per_microbatch=8, groups=torch.zeros(6, dtype=torch.long))
    assert [rows.tolist() for rows, _ in parts] == [[0, 1], [2, 3], [4, 5]]


def test_old_logprob_gap_is_measured_on_the_first_step_before_any_update(tiny_lm, batch):
    with torch.no_grad():
        current, _ = compute_logprobs(
            tiny_lm, batch.input_ids, batch.attention_mask, token_mask=batch.response_mask
        )
    old = current.clone()
    old[2, 6] += 0.25  # a response token of row 2 (first mini-batch: rows 0-2)
    old[5, 4] += 0.75  # row 5 is in the second mini-batch, after the first update
    config = TrainerConfig(learning_rate=1e-2, optimizer_steps_per_epoch=2)
    optimizer = build_optimizer(tiny_lm, config)
    probe = dataclasses.replace(batch, old_logprobs=old, ref_logprobs=None)
    metrics = policy_update(tiny_lm, optimizer, None, probe, config)
    assert metrics["train/old_logprob_max_abs_diff"] == pytest.approx(0.25, abs=1e-9)


def test_a_microbatch_of_invalid_rows_does_not_stop_the_update(tiny_lm, batch):
    """Regression (found building the sharded trainer, issue 38): a micro-batch whose rows are all invalid
    (all-truncated rows under DAPO overlong filtering, an invalid group) has no scored token, so its loss
    had no gradient and ``backward`` raised "element 0 of tensors does not require grad"; the update
    must skip that backward and train on the other micro-batches."""
    config = TrainerConfig(learning_rate=1e-2, tokens_per_microbatch=8, share_prompt_forward=False)
    valid = torch.tensor([True, False, False, False, False, False])
    metrics = policy_update(
        tiny_lm, build_optimizer(tiny_lm, config), None, dataclasses.replace(batch, valid=valid), config
    )
    assert metrics["train/optimizer_steps"] == 1 and math.isfinite(metrics["loss/policy"])


def test_bf16_mixed_keeps_fp32_master_weights_and_follows_the_fp32_update():
    """``precision="bf16-mixed"`` (autocast in one process): the weights and their gradients stay float32,
    the loss and the gradient are the fp32 ones up to bf16 rounding, and ``fp32`` is the plain update."""
    from conftest import make_batch, make_tiny_lm

    grads = {}
    for precision in ("fp32", "bf16-mixed"):
        model, data = make_tiny_lm(dtype=torch.float32), make_batch(dtype=torch.float32)
        config = TrainerConfig(learning_rate=1e-3, precision=precision, max_grad_norm=math.inf)
        optimizer = build_optimizer(model, config)
        optimizer.register_step_pre_hook(
            lambda opt, _a, _k, p=precision: grads.__setitem__(
                p, torch.cat([q.grad.flatten() for q in opt.param_groups[0]["params"]])
            )
        )
        metrics = policy_update(model, optimizer, None, data, config)
        assert all(p.dtype == torch.float32 for p in model.parameters())
        grads[precision + "/loss"] = torch.tensor(metrics["loss/policy"])
    assert grads["bf16-mixed"].dtype == torch.float32
    cosine = torch.nn.functional.cosine_similarity(grads["fp32"], grads["bf16-mixed"], dim=0)
    assert cosine > 0.99 and not torch.equal(grads["fp32"], grads["bf16-mixed"])  # bf16 ran, close
    assert abs(float(grads["fp32/loss"] - grads["bf16-mixed/loss"])) < 1e-2
