"""Shared by the vLLM engine tests: the skip when the engine's venv is missing, a tiny random Llama the
CPU engine can run (head_dim 64: vLLM's CPU attention has no kernel for the default tiny model's 16), and an
engine over it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from execrl.rollout.vllm_engine import REPO_VENV

pytestmark_vllm = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (REPO_VENV / "bin" / "python").exists(),
        reason="no vLLM engine environment (.venv-vllm): bash scripts/setup.sh --vllm builds it",
    ),
]


def vllm_tiny_model() -> torch.nn.Module:
    from execrl.rollout.models import tiny_model

    return tiny_model(seed=0, hidden_size=256, init_std=0.1)


def perturb(model: torch.nn.Module, scale: float = 0.02, seed: int = 0) -> None:
    """A stand-in for an update: every weight moves (as AdamW moves every weight)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * scale)


def save_tiny(path: Path) -> Path:
    from execrl.rollout.models import default_tokenizer

    vllm_tiny_model().save_pretrained(path)
    default_tokenizer().save_pretrained(path)
    return path
