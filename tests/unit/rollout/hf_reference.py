"""transformers' own greedy decoding of left-padded prompts: the reference the engines must equal."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from execrl.rollout import HFEngine
from execrl.rollout.hf_engine import left_pad


def hf_greedy(
    model: PreTrainedModel,
    engine: HFEngine,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_token_ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """``model.generate`` greedy completions ``[P, max_new_tokens]``, padded as ``engine`` pads.

    ``eos_token_ids=None``: no stop token, every row runs ``max_new_tokens`` (as ``ignore_eos``).
    """
    input_ids, attention_mask, _ = left_pad(prompts, engine.pad_token_id)
    stops = (
        {"eos_token_id": list(eos_token_ids)}
        if eos_token_ids is not None
        else {"min_new_tokens": max_new_tokens}
    )
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=engine.pad_token_id,
            **stops,
        )
    return out[:, input_ids.shape[1] :]
