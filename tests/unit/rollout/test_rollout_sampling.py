"""Pure sampling functions: truncation, inverse-CDF draws, reported log-probabilities."""

from __future__ import annotations

import math

import pytest
import torch

from execrl.rollout.sampling import inverse_cdf_sample, sample_next_tokens, truncated_logits
from execrl.rollout.types import SamplingParams


def _logits_from_probs(probs: list[float]) -> torch.Tensor:
    return torch.tensor([probs]).log()


def test_top_k_keeps_the_k_largest_sorted() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    values, ids = truncated_logits(logits, SamplingParams(top_k=2))
    assert ids is not None
    assert ids.tolist() == [[1, 3]]
    assert values.tolist() == [[3.0, 2.0]]


def test_top_p_keeps_smallest_set_reaching_mass() -> None:
    # probs 0.5, 0.3, 0.15, 0.05: mass before each = 0, 0.5, 0.8, 0.95; top_p=0.8 keeps the first two
    logits = _logits_from_probs([0.15, 0.5, 0.05, 0.3])
    values, ids = truncated_logits(logits, SamplingParams(top_p=0.8))
    assert ids is not None
    assert ids[0, :2].tolist() == [1, 3]
    assert torch.isfinite(values[0, :2]).all()
    assert torch.isinf(values[0, 2:]).all()


def test_top_p_always_keeps_the_top_token() -> None:
    logits = _logits_from_probs([0.9, 0.1])
    values, _ = truncated_logits(logits, SamplingParams(top_p=0.01))
    assert torch.isfinite(values[0, 0]) and torch.isinf(values[0, 1])


def test_no_truncation_returns_logits_unchanged() -> None:
    logits = torch.randn(2, 5)
    values, ids = truncated_logits(logits, SamplingParams())
    assert ids is None and values is logits


def test_inverse_cdf_never_picks_zero_probability_and_matches_frequencies() -> None:
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75]]).expand(20000, 4)
    draws = inverse_cdf_sample(probs, torch.Generator().manual_seed(0)).squeeze(1)
    counts = torch.bincount(draws, minlength=4).tolist()
    assert counts[0] == 0 and counts[2] == 0
    assert abs(counts[1] / 20000 - 0.25) < 0.015  # binomial std is about 0.003


def test_greedy_picks_argmax_with_zero_sampling_logprob() -> None:
    logits = _logits_from_probs([0.2, 0.5, 0.3])
    out = sample_next_tokens(logits, SamplingParams(temperature=0.0), torch.Generator())
    assert out.tokens.tolist() == [1]
    assert out.sampling_logprobs.tolist() == [0.0]
    assert out.logprobs.item() == pytest.approx(math.log(0.5), abs=1e-6)


def test_logprobs_at_temperature_one_and_sampling_logprobs_after_truncation() -> None:
    # probs 0.6, 0.3, 0.1 and top_k=2: the sampler draws from {0: 2/3, 1: 1/3}
    logits = _logits_from_probs([0.6, 0.3, 0.1]).expand(400, 3)
    out = sample_next_tokens(logits, SamplingParams(top_k=2), torch.Generator().manual_seed(3))
    assert set(out.tokens.tolist()) == {0, 1}
    for token, model_lp, sampling_lp in zip(out.tokens, out.logprobs, out.sampling_logprobs, strict=True):
        expected_model = math.log([0.6, 0.3][int(token)])
        expected_sampling = math.log([2 / 3, 1 / 3][int(token)])
        assert model_lp.item() == pytest.approx(expected_model, abs=1e-5)
        assert sampling_lp.item() == pytest.approx(expected_sampling, abs=1e-5)


def test_temperature_scales_the_sampling_distribution_only() -> None:
    # probs 0.8, 0.2 at T=2: q ~ sqrt(p) -> 2/3, 1/3
    logits = _logits_from_probs([0.8, 0.2]).expand(200, 2)
    out = sample_next_tokens(logits, SamplingParams(temperature=2.0), torch.Generator().manual_seed(0))
    picked_second = out.tokens == 1
    assert out.sampling_logprobs[picked_second][0].item() == pytest.approx(math.log(1 / 3), abs=1e-5)
    assert out.logprobs[picked_second][0].item() == pytest.approx(math.log(0.2), abs=1e-5)


@pytest.mark.parametrize("width", [1024, 1000])  # whole blocks, and zero-padded to whole blocks
def test_two_level_inverse_cdf_matches_frequencies_and_skips_zeros(width: int) -> None:
    weights = torch.zeros(width)
    weights[255] = 1.0  # last entry of block 0
    weights[256] = 2.0  # first entry of block 1
    weights[width - 1] = 5.0  # the very last entry
    weights[700] = 2.0
    draws = inverse_cdf_sample(weights.expand(40000, width), torch.Generator().manual_seed(1)).squeeze(1)
    counts = torch.bincount(draws, minlength=width)
    assert set(torch.nonzero(counts).squeeze(1).tolist()) == {255, 256, 700, width - 1}
    for index, weight in ((255, 1.0), (256, 2.0), (700, 2.0), (width - 1, 5.0)):
        assert abs(int(counts[index]) / 40000 - weight / 10.0) < 0.012  # binomial std <= 0.0025


def test_sampled_logprobs_equal_log_softmax_at_the_drawn_tokens() -> None:
    logits = torch.randn(16, 2048, generator=torch.Generator().manual_seed(2)) * 3
    out = sample_next_tokens(logits, SamplingParams(temperature=0.7), torch.Generator().manual_seed(4))
    expected_model = torch.log_softmax(logits, dim=-1).gather(1, out.tokens[:, None]).squeeze(1)
    expected_sampling = torch.log_softmax(logits / 0.7, dim=-1).gather(1, out.tokens[:, None]).squeeze(1)
    torch.testing.assert_close(out.logprobs, expected_model, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.sampling_logprobs, expected_sampling, rtol=0, atol=1e-5)
