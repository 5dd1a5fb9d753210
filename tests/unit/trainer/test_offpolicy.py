"""Truncated importance weights of the one-step-off mode, hand-computed."""

from __future__ import annotations

import math

import pytest
import torch

from execrl.trainer.offpolicy import truncated_is_weights


def test_weights_are_the_ratio_truncated_at_the_cap_and_one_off_the_mask() -> None:
    prox = torch.tensor([[0.0, math.log(0.5), math.log(0.9)], [0.0, math.log(0.3), 0.0]])  # [N=2, S=3]
    mu = torch.tensor([[0.0, math.log(0.25), math.log(0.9)], [0.0, math.log(0.6), 0.0]])
    mask = torch.tensor([[False, True, True], [False, True, False]])
    weights, stats = truncated_is_weights(prox, mu, mask, cap=1.5)
    # ratios on the mask: 0.5/0.25 = 2 (truncated to 1.5), 0.9/0.9 = 1, 0.3/0.6 = 0.5
    assert torch.allclose(weights, torch.tensor([[1.0, 1.5, 1.0], [1.0, 0.5, 1.0]]))
    assert stats["train/offpolicy_ratio_mean"] == pytest.approx((2 + 1 + 0.5) / 3)
    assert stats["train/offpolicy_ratio_max"] == pytest.approx(2.0)
    assert stats["train/offpolicy_clipped_frac"] == pytest.approx(1 / 3)


def test_empty_mask_gives_unit_weights_and_no_stats() -> None:
    weights, stats = truncated_is_weights(
        torch.zeros(1, 2), torch.ones(1, 2), torch.zeros(1, 2, dtype=torch.bool), cap=2
    )
    assert weights.tolist() == [[1.0, 1.0]] and stats == {}


def test_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        truncated_is_weights(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool), cap=0.5
        )
