"""Advantage estimators: golden values from rl_frameworks.md 7.5, loop references, invalid/degenerate cases."""

from __future__ import annotations

import pytest
import torch

from execrl.trainer.advantages import (
    ADVANTAGE_ESTIMATORS,
    broadcast_to_tokens,
    compute_advantages,
    dr_grpo_advantages,
    filter_zero_variance_groups,
    gae,
    group_ids_from_size,
    grpo_advantages,
    masked_whiten,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
)

F64 = torch.float64
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0], dtype=F64)  # two groups of G=4
GROUPS = group_ids_from_size(8, 4)
ALL_VALID = torch.ones(8, dtype=torch.bool)


def test_grpo_golden_values_verl_eps():
    adv = grpo_advantages(REWARDS, GROUPS, ALL_VALID, eps=1e-6)
    # mean 0.5, unbiased std sqrt(1/3) = 0.57735; 0.5 / (0.57735 + 1e-6) = 0.866024; second group has zero variance
    expected = torch.tensor([0.866024, -0.866024, -0.866024, 0.866024, 0, 0, 0, 0], dtype=F64)
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)
    assert torch.equal(adv[4:], torch.zeros(4, dtype=F64))


def test_grpo_golden_values_trl_eps():
    adv = grpo_advantages(REWARDS[:4], GROUPS[:4], ALL_VALID[:4], eps=1e-4)
    torch.testing.assert_close(
        adv, torch.tensor([0.865875, -0.865875, -0.865875, 0.865875], dtype=F64), atol=1e-6, rtol=0
    )


def test_grpo_eight_samples_three_correct():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0, 0, 0, 0, 0], dtype=F64)
    adv = grpo_advantages(rewards, torch.zeros(8, dtype=torch.long), ALL_VALID)
    torch.testing.assert_close(adv[0], torch.tensor(1.207612, dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(adv[3], torch.tensor(-0.724567, dtype=F64), atol=1e-6, rtol=0)


def test_dr_grpo_and_rloo_golden_values():
    dr = dr_grpo_advantages(REWARDS, GROUPS, ALL_VALID)
    rloo = rloo_advantages(REWARDS, GROUPS, ALL_VALID)
    torch.testing.assert_close(dr[:4], torch.tensor([0.5, -0.5, -0.5, 0.5], dtype=F64))
    torch.testing.assert_close(rloo[:4], torch.tensor([2, -2, -2, 2], dtype=F64) / 3)  # 1 - 1/3 = 0.666667
    assert torch.equal(dr[4:], torch.zeros(4, dtype=F64)) and torch.equal(rloo[4:], torch.zeros(4, dtype=F64))


def _loop_reference(rewards, group_ids, valid, estimator, eps=1e-6):
    """Plain-python version of the documented conventions, one group at a time."""
    out = [0.0] * len(rewards)
    for group in set(group_ids):
        members = [i for i, g in enumerate(group_ids) if g == group and valid[i]]
        values = [rewards[i] for i in members]
        n = len(values)
        if n < 2 or max(values) == min(values):
            continue
        mean = sum(values) / n
        std = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
        for i in members:
            if estimator == "grpo":
                out[i] = (rewards[i] - mean) / (std + eps)
            elif estimator == "dr_grpo":
                out[i] = rewards[i] - mean
            else:  # rloo
                out[i] = rewards[i] - (sum(values) - rewards[i]) / (n - 1)
    return out


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_vectorised_equals_loop_reference(name):
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(60, generator=gen, dtype=F64).round(decimals=1)
    group_ids = torch.randint(0, 9, (60,), generator=gen) * 7 - 5  # non-contiguous, unsorted, negative ids
    valid = torch.rand(60, generator=gen) > 0.2
    rewards[~valid] = float("nan")  # invalid rewards must be ignored entirely
    got = ADVANTAGE_ESTIMATORS.get(name)(rewards, group_ids, valid, eps=1e-6)
    expected = _loop_reference(rewards.tolist(), group_ids.tolist(), valid.tolist(), name)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), atol=1e-12, rtol=0)


def test_invalid_rewards_excluded_from_group_statistics():
    rewards = torch.tensor([1.0, 0.0, float("nan"), 0.0], dtype=F64)
    valid = torch.tensor([True, True, False, True])
    adv = grpo_advantages(rewards, torch.zeros(4, dtype=torch.long), valid)
    # valid rewards [1, 0, 0]: mean 1/3, unbiased std sqrt(1/3) = 0.57735
    std = (1 / 3) ** 0.5
    expected = torch.tensor(
        [(2 / 3) / (std + 1e-6), (-1 / 3) / (std + 1e-6), 0.0, (-1 / 3) / (std + 1e-6)], dtype=F64
    )
    torch.testing.assert_close(adv, expected)


def test_group_with_one_valid_sample_gets_zero():
    rewards = torch.tensor([1.0, 0.0, 1.0], dtype=F64)
    valid = torch.tensor([True, False, True])
    assert len(ADVANTAGE_ESTIMATORS.names()) >= 5
    for name in ADVANTAGE_ESTIMATORS.names():
        adv = ADVANTAGE_ESTIMATORS.get(name)(rewards, torch.tensor([0, 0, 1]), valid, eps=1e-6)
        assert torch.equal(adv, torch.zeros(3, dtype=F64)), name


def test_zero_variance_is_exactly_zero_even_with_rounding():
    rewards = torch.full((3,), 0.1, dtype=F64)  # 0.1 * 3 / 3 != 0.1 in floating point
    assert len(ADVANTAGE_ESTIMATORS.names()) >= 5
    for name in ADVANTAGE_ESTIMATORS.names():
        adv = ADVANTAGE_ESTIMATORS.get(name)(
            rewards, torch.zeros(3, dtype=torch.long), torch.ones(3, dtype=torch.bool), eps=1e-6
        )
        assert torch.equal(adv, torch.zeros(3, dtype=F64)), name


def test_reinforce_pp_whitens_over_the_batch():
    adv = reinforce_pp_advantages(REWARDS, GROUPS, ALL_VALID)
    mean, std = 0.75, REWARDS.std().item()  # 6 ones, 2 zeros over the whole batch
    torch.testing.assert_close(adv, (REWARDS - mean) / (std + 1e-6))


def test_reinforce_pp_baseline_scales_group_centred_values():
    adv = reinforce_pp_baseline_advantages(REWARDS, GROUPS, ALL_VALID)
    centred = torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0], dtype=F64)
    std = (centred.pow(2).sum() / 7).sqrt()
    torch.testing.assert_close(adv, centred / (std + 1e-6))


def test_compute_advantages_by_name_and_group_size():
    adv = compute_advantages("dr_grpo", REWARDS, samples_per_prompt=4)
    torch.testing.assert_close(adv[:4], torch.tensor([0.5, -0.5, -0.5, 0.5], dtype=F64))
    with pytest.raises(KeyError, match="known: dr_grpo, grpo, reinforce_pp"):
        compute_advantages("grpo_typo", REWARDS, samples_per_prompt=4)
    with pytest.raises(ValueError, match="exactly one of"):
        compute_advantages("grpo", REWARDS)
    with pytest.raises(ValueError, match="not a multiple"):
        compute_advantages("grpo", REWARDS, samples_per_prompt=3)


def test_registry_rejects_duplicates_and_accepts_new_estimators():
    with pytest.raises(ValueError, match="already registered"):
        ADVANTAGE_ESTIMATORS.register("grpo")(grpo_advantages)
    assert "grpo" in ADVANTAGE_ESTIMATORS


def test_filter_zero_variance_groups_keeps_informative_groups_whole():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, float("nan"), 1.0, 0.0], dtype=F64)
    group_ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    valid = torch.tensor([True, True, True, True, True, False, True, True])
    keep = filter_zero_variance_groups(rewards, group_ids, valid)
    assert keep.tolist() == [True, True, False, False, False, False, True, True]


def test_gae_matches_hand_computation():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=F64)
    values = torch.tensor([[0.5, 0.4, 0.3, 9.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0]])
    adv, ret = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t=2: delta = 1 - 0.3 = 0.7; t=1: delta = 0.9*0.3 - 0.4 = -0.13, A = -0.13 + 0.72*0.7 = 0.374
    # t=0: delta = 0.9*0.4 - 0.5 = -0.14, A = -0.14 + 0.72*0.374 = 0.12928
    torch.testing.assert_close(adv, torch.tensor([[0.12928, 0.374, 0.7, 0.0]], dtype=F64))
    torch.testing.assert_close(ret, torch.tensor([[0.62928, 0.774, 1.0, 0.0]], dtype=F64))


def test_gae_skips_masked_positions_inside_the_response():
    rewards = torch.tensor([[0.0, 5.0, 0.0, 1.0]], dtype=F64)
    values = torch.tensor([[0.5, 7.0, 0.2, 0.1]], dtype=F64)
    adv, _ = gae(rewards, values, torch.tensor([[1, 0, 1, 1]]), gamma=1.0, lam=1.0)
    # gamma = lam = 1: A_t = sum of rewards from t on (valid positions only) - V_t
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.0, 0.8, 0.9]], dtype=F64))


def test_masked_whiten_and_broadcast():
    values = torch.tensor([[1.0, 2.0, 3.0, 100.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0]])
    white = masked_whiten(values, mask)
    torch.testing.assert_close(white, torch.tensor([[-1.0, 0.0, 1.0, 0.0]], dtype=F64), atol=1e-7, rtol=0)
    tokens = broadcast_to_tokens(torch.tensor([1.5, -0.5], dtype=F64), torch.tensor([[1, 1, 0], [0, 1, 1]]))
    assert tokens.tolist() == [[1.5, 1.5, 0.0], [0.0, -0.5, -0.5]]
