"""``[lora]``: train low-rank adapters (LoRA, Hu et al. 2021, arXiv 2106.09685) instead of every weight.

    execrl train lora.enabled=true                       # rank 16 on every linear layer of each block
    execrl train lora.enabled=true lora.rank=64 optim.learning_rate=2e-4

The adapters come from the ``peft`` library (``execrl.trainer.lora``); the optimizer holds only them, and
the KL reference is the same model with its adapters switched off, so no second copy of the weights is
loaded. The defaults target every linear projection of a Llama-shaped block (attention and MLP), which
"LoRA Without Regret" (Schulman et al., Thinking Machines 2025) found necessary for LoRA to match full
fine-tuning in RL, and ``alpha = 2 * rank``. LoRA usually wants a learning rate about 10x full
fine-tuning's (same source); ``optim.learning_rate`` is not changed for you. Sampling runs on a copy with
the adapters folded into the weights (``fold_for_sampling``, ``execrl.trainer.lora_fold``).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from execrl.config.base import Section

# Every linear projection of a Llama/Mistral/Qwen2 decoder block (attention, then MLP).
LLAMA_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoraSection(Section):
    """Low-rank adapters on the policy (``execrl.trainer.lora``); off by default (full fine-tuning)."""

    enabled: bool = Field(False, description="train LoRA adapters only; false = full fine-tuning")
    rank: int = Field(16, ge=1, le=4096, description="rank r of each adapter (B is [out, r], A is [r, in])")
    alpha: int = Field(32, ge=1, description="scale: an adapter adds (alpha / rank) * B @ A to its weight")
    dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="dropout on each adapter's input in the update's gradient passes (never in sampling "
        "or in the old/reference log-probs); > 0 makes the PPO ratio differ from 1 on-policy",
    )
    fold_for_sampling: bool = Field(
        True,
        description="sample from a plain copy with each adapter folded into its weight (W + alpha/rank * B A, "
        "refolded after every update): decoding as fast as full fine-tuning's, for one more copy of the "
        "adapted layers' weights (~425 MB for SmolLM2-135M in float32); false = sample through peft's layers",
    )
    target_modules: list[str] = Field(
        default_factory=lambda: list(LLAMA_LINEAR_MODULES),
        min_length=1,
        description='module names (last dotted part) that get adapters; ["all-linear"] = every linear '
        "layer but the output head",
    )

    @field_validator("target_modules")
    @classmethod
    def _names_valid(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("an empty module name; list names such as q_proj, v_proj")
        if len(set(value)) != len(value):
            raise ValueError(f"a module is named twice in {value}")
        if "all-linear" in value and len(value) > 1:
            raise ValueError('"all-linear" already covers every linear layer; list it alone')
        return value
