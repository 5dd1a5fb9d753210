"""Policy/KL/value losses and aggregation: golden values from rl_frameworks.md 7.5 (fp64, 1e-6)."""

from __future__ import annotations

import pytest
import torch

from execrl.trainer.config import TrainerConfig
from execrl.trainer.kl import kl_penalised_rewards, kl_per_token, token_level_rewards
from execrl.trainer.losses import (
    POLICY_LOSSES,
    aggregate_loss,
    clipped_value_loss,
    gspo_loss,
    loss_normaliser,
    ppo_loss,
)

F64 = torch.float64
LOGP = torch.tensor([[-1.0, -0.5, -2.0, 0, 0], [-0.3, -1.2, -0.8, -0.1, -2.5]], dtype=F64)
OLD = torch.tensor([[-1.1, -0.5, -1.5, 0, 0], [-0.3, -1.0, -1.0, -0.4, -2.4]], dtype=F64)
REF = torch.tensor([[-1.2, -0.7, -1.8, 0, 0], [-0.5, -1.1, -0.9, -0.2, -2.0]], dtype=F64)
MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
ADV = torch.tensor([[1.5] * 5, [-0.5] * 5], dtype=F64)
CONFIG = TrainerConfig(clip_eps_low=0.2, clip_eps_high=0.2)


def _close(actual, expected):
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=F64), atol=1e-6, rtol=0)


def test_ppo_per_token_golden_values():
    out = ppo_loss(LOGP, OLD, ADV, MASK, CONFIG)
    _close(out.loss[0, :3], [-1.657756, -1.5, -0.909796])
    _close(out.loss[1], [0.5, 0.409365, 0.610701, 0.674929, 0.452419])


@pytest.mark.parametrize(
    ("mode", "by_sequences", "expected"),
    [
        ("token-mean", False, -0.177517),
        ("seq-mean-token-mean", False, -0.413184),
        ("seq-mean-token-sum", False, -0.710069),
        ("seq-mean-token-sum-norm", False, -0.284027),  # verl: / L_max = 5
        ("seq-mean-token-sum-norm", True, -0.142014),  # TRL dr_grpo: / (2 * 5)
    ],
)
def test_aggregation_golden_values(mode, by_sequences, expected):
    per_token = ppo_loss(LOGP, OLD, ADV, MASK, CONFIG).loss
    _close(aggregate_loss(per_token, MASK, mode, sum_norm_by_sequences=by_sequences), expected)


def test_k3_golden_values_and_token_mean_with_kl():
    k3 = kl_per_token(LOGP, REF, "k3")
    _close(k3[0, :3], [0.018731, 0.018731, 0.021403])
    _close(k3[1], [0.018731, 0.005171, 0.004837, 0.004837, 0.148721])
    policy = aggregate_loss(ppo_loss(LOGP, OLD, ADV, MASK, CONFIG).loss, MASK, "token-mean")
    _close(policy + 0.001 * aggregate_loss(k3, MASK, "token-mean"), -0.177487)


def test_k1_k2_and_k3_clamps():
    logp = torch.tensor([[-1.0, 0.0]], dtype=F64)
    ref = torch.tensor([[-1.5, -50.0]], dtype=F64)
    _close(kl_per_token(logp, ref, "k1"), [[0.5, 50.0]])
    _close(kl_per_token(logp, ref, "k2"), [[0.125, 1250.0]])
    # k3 at d = -50: d clamps to -20 -> exp(-20) + 20 - 1 = 19.0000..., then the result clamps to 10
    _close(kl_per_token(logp, ref, "k3")[0, 1], 10.0)
    with pytest.raises(ValueError, match="known: k1, k2, k3"):
        kl_per_token(logp, ref, "k4")


def test_kl_in_reward_helpers():
    rewards = torch.tensor([1.0, 0.0], dtype=F64)
    penalised = kl_penalised_rewards(rewards, LOGP, REF, MASK, kl_coef=0.1, estimator="k1")
    # k1 = logp - ref: row 0 sums 0.2 + 0.2 - 0.2 = 0.2; row 1 sums 0.2 - 0.1 + 0.1 + 0.1 - 0.5 = -0.2
    _close(penalised, [1.0 - 0.02, 0.0 + 0.02])
    tokens = token_level_rewards(rewards, MASK, kl_penalty=kl_per_token(LOGP, REF, "k1"), kl_coef=0.1)
    _close(tokens[0], [-0.02, -0.02, 1.0 + 0.02, 0.0, 0.0])
    _close(tokens[1], [-0.02, 0.01, -0.01, -0.01, 0.05])


def test_clip_metrics_and_dual_clip():
    logp = torch.tensor([[0.5, -0.5, 2.0, 0.0]], dtype=F64)
    old = torch.zeros(1, 4, dtype=F64)
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]], dtype=F64)
    out = ppo_loss(
        logp,
        old,
        adv,
        torch.ones(1, 4),
        TrainerConfig(clip_eps_low=0.2, clip_eps_high=0.28, clip_ratio_c=3.0),
    )
    assert out.clipped_high.tolist() == [[True, False, False, False]]  # ratio 1.65 > 1.28, A > 0
    assert out.clipped_low.tolist() == [[False, True, False, False]]  # ratio 0.61 < 0.8, A < 0
    assert out.dual_clipped.tolist() == [[False, False, True, False]]  # ratio e^2 = 7.39 > 3, A < 0
    _close(out.loss, [[-1.28, 0.8, 3.0, -1.0]])


def test_gradient_is_minus_advantage_times_grad_logp_over_normaliser():
    """With old = logp.detach() the ratio is 1 and d loss / d logp = -A * M / normaliser (7.5 test 4)."""
    for mode, normaliser in [
        ("token-mean", 8.0),
        ("seq-mean-token-sum", 2.0),
        ("seq-mean-token-sum-norm", 5.0),
    ]:
        logp = LOGP.clone().requires_grad_(True)
        out = ppo_loss(logp, logp.detach(), ADV, MASK, CONFIG)
        aggregate_loss(out.loss, MASK, mode).backward()
        _close(logp.grad, -ADV * MASK / normaliser)
    logp = LOGP.clone().requires_grad_(True)
    aggregate_loss(
        ppo_loss(logp, logp.detach(), ADV, MASK, CONFIG).loss, MASK, "seq-mean-token-mean"
    ).backward()
    _close(logp.grad, -ADV * MASK / MASK.sum(-1, keepdim=True) / 2)


def test_gspo_sequence_ratio_and_straight_through_gradient():
    logp = LOGP.clone().requires_grad_(True)
    config = TrainerConfig(clip_eps_low=0.5, clip_eps_high=10.0)  # wide clip: no clipping here
    out = gspo_loss(logp, OLD, ADV, MASK, config)
    seq_ratio = torch.exp(((LOGP - OLD) * MASK).sum(-1) / MASK.sum(-1))  # [2]
    _close(out.loss[0, :3], -1.5 * seq_ratio[0].expand(3))
    _close(out.loss[1], 0.5 * seq_ratio[1].expand(5))
    aggregate_loss(out.loss, MASK, "seq-mean-token-mean").backward()
    # d/dlogp_t of -A_i * s_i averaged over sequences: -A_i * s_i / |y_i| / 2
    expected = -ADV * seq_ratio[:, None] * MASK / MASK.sum(-1, keepdim=True) / 2
    _close(logp.grad, expected)


def test_value_loss_clipping():
    values = torch.tensor([[1.0, 0.0, 0.5]], dtype=F64)
    old = torch.tensor([[0.5, 0.5, 0.5]], dtype=F64)
    returns = torch.tensor([[2.0, -1.0, 0.4]], dtype=F64)
    loss, clipped = clipped_value_loss(values, old, returns, clip_eps=0.2)
    # t0: v clipped to 0.7 -> max((1-2)^2, (0.7-2)^2) = 1.69; t1: clipped to 0.3 -> max(1, 1.69) = 1.69; t2: 0.01
    _close(loss, [[0.845, 0.845, 0.005]])
    assert clipped.tolist() == [[True, True, False]]


def test_aggregation_ignores_nan_outside_mask_and_rejects_unknown_mode():
    per_token = torch.tensor([[1.0, float("nan")]], dtype=F64)
    _close(aggregate_loss(per_token, torch.tensor([[1, 0]]), "token-mean"), 1.0)
    with pytest.raises(ValueError, match="known: token-mean"):
        aggregate_loss(per_token, torch.tensor([[1, 0]]), "sum")


def test_loss_normaliser_counts_step_denominators():
    norm = loss_normaliser(torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]]))
    assert (norm.total_tokens, norm.num_sequences, norm.sum_norm_length) == (5.0, 2, 3)
    assert loss_normaliser(MASK, sum_norm_length=1024).sum_norm_length == 1024


def test_policy_loss_registry():
    assert {"gspo", "ppo"} <= set(POLICY_LOSSES.names())
    with pytest.raises(KeyError, match="unknown policy loss 'cispo'; known: gspo, ppo"):
        POLICY_LOSSES.get("cispo")
