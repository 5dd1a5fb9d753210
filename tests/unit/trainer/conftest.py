"""Tiny randomly initialised causal LM and a synthetic rollout batch for trainer tests (offline, CPU, fp64)."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from execrl.trainer.step import TrainBatch

VOCAB = 32


def make_tiny_lm(seed: int = 0, dtype: torch.dtype = torch.float64) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).to(dtype)


def make_batch(seed: int = 1, dtype: torch.dtype = torch.float64) -> TrainBatch:
    """6 rows: left-padded prompts (2-4 tokens) + right-padded responses (1-6 tokens), width 10."""
    gen = torch.Generator().manual_seed(seed)
    prompt_lengths, response_lengths = [2, 4, 3, 4, 2, 3], [5, 1, 6, 3, 6, 2]
    width = 10
    input_ids = torch.randint(1, VOCAB, (6, width), generator=gen)
    attention = torch.zeros(6, width, dtype=torch.long)
    response = torch.zeros(6, width, dtype=torch.long)
    for row, (p, r) in enumerate(zip(prompt_lengths, response_lengths, strict=True)):
        start = 4 - p  # prompts end at column 4
        attention[row, start : 4 + r] = 1
        response[row, 4 : 4 + r] = 1
    input_ids = input_ids * attention
    old = -torch.rand(6, width, generator=gen, dtype=dtype) * response
    ref = -torch.rand(6, width, generator=gen, dtype=dtype) * response
    advantages = torch.tensor([1.0, -0.5, 0.3, -1.2, 0.8, -0.4], dtype=dtype)
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response,
        old_logprobs=old,
        advantages=advantages,
        ref_logprobs=ref,
    )


@pytest.fixture
def tiny_lm() -> LlamaForCausalLM:
    return make_tiny_lm()


@pytest.fixture
def batch() -> TrainBatch:
    return make_batch()
