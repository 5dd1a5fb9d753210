"""The shared-prompt decoder (cascade attention over one prompt cache per group) against the generic path."""

from __future__ import annotations

import pytest
import torch
from hf_reference import hf_greedy
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerBase,
)

from execrl.rollout import HFEngine, SamplingParams, logprob_mismatch
from execrl.rollout.models import tiny_model
from execrl.rollout.shared_decode import supports_shared_decode

# Left-padded prompts of different lengths; a 64-token vocabulary with frequent stop tokens makes rows
# finish at many different steps, so the decoder drops rows (and whole prompts' rows) mid-call.
PROMPTS = [[1, 40, 41, 42, 43, 44], [1, 50], [1, 9, 8, 7], [1, 30, 31, 32, 33, 34, 35, 36, 37]]
STOPS = (5, 6, 7, 8, 9)


def _both(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, params: SamplingParams):  # type: ignore[no-untyped-def]
    shared = HFEngine(model, tokenizer, shared_prompt_decode=True).generate(PROMPTS, params)
    generic = HFEngine(model, tokenizer, shared_prompt_decode=False).generate(PROMPTS, params)
    return shared, generic


def test_shared_and_generic_paths_agree_with_rows_finishing_early(tokenizer: PreTrainedTokenizerBase) -> None:
    model = tiny_model(vocab_size=64, seed=4, init_std=0.5)
    params = SamplingParams(samples_per_prompt=5, max_new_tokens=24, stop_token_ids=STOPS, seed=11)
    shared, generic = _both(model, tokenizer, params)
    assert len(set(shared.completion_lengths.tolist())) >= 5  # rows really finished at different steps
    assert torch.equal(shared.completion_ids, generic.completion_ids)
    assert torch.equal(shared.response_mask, generic.response_mask)
    assert shared.finish_reasons == generic.finish_reasons
    torch.testing.assert_close(shared.logprobs, generic.logprobs, rtol=1e-5, atol=1e-5)
    assert logprob_mismatch(model, shared) < 1e-4


def test_shared_greedy_equals_generic_greedy_on_long_completions(tokenizer: PreTrainedTokenizerBase) -> None:
    model = tiny_model(seed=2, init_std=0.5)
    params = SamplingParams(samples_per_prompt=3, max_new_tokens=40, temperature=0.0, ignore_eos=True)
    shared, generic = _both(model, tokenizer, params)
    assert torch.equal(shared.completion_ids, generic.completion_ids)
    torch.testing.assert_close(shared.logprobs, generic.logprobs, rtol=1e-5, atol=1e-5)


def test_shared_decoder_matches_the_stock_transformers_forward(tokenizer: PreTrainedTokenizerBase) -> None:
    """Regression guard for transformers upgrades: the decoder re-implements the Llama layer forward
    (pyproject caps ``transformers`` for this reason), so its greedy tokens must equal ``model.generate``
    and its log-probs the stock teacher-forced forward, with the shared path really taken."""
    model = tiny_model(seed=2, init_std=0.5)
    engine = HFEngine(model, tokenizer, shared_prompt_decode=True)
    samples_per_prompt, max_new_tokens = 2, 16
    params = SamplingParams(
        samples_per_prompt=samples_per_prompt, max_new_tokens=max_new_tokens, temperature=0.0, ignore_eos=True
    )
    batch = engine.generate(PROMPTS, params)
    reference = hf_greedy(model, engine, PROMPTS, max_new_tokens=max_new_tokens)
    assert engine.shared_prompt_decode is True
    for row in range(len(PROMPTS) * samples_per_prompt):
        assert batch.completion_token_ids(row) == reference[row // samples_per_prompt].tolist()
    assert logprob_mismatch(model, batch) < 1e-4


def test_llama_is_supported_and_default() -> None:
    model = tiny_model(vocab_size=64)
    assert supports_shared_decode(model)


def _gpt2() -> torch.nn.Module:
    config = GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64)
    return GPT2LMHeadModel(config)


def _sliding_mistral() -> torch.nn.Module:
    config = MistralConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=16,
    )
    return MistralForCausalLM(config)


@pytest.mark.parametrize("build", [_gpt2, _sliding_mistral], ids=["gpt2", "mistral-sliding-window"])
def test_other_architectures_fall_back(build, tokenizer: PreTrainedTokenizerBase) -> None:  # type: ignore[no-untyped-def]
    model = build()
    assert not supports_shared_decode(model)
    assert HFEngine(model, tokenizer).shared_prompt_decode is False
    with pytest.raises(ValueError, match="not a Llama-shaped"):
        HFEngine(model, tokenizer, shared_prompt_decode=True)
