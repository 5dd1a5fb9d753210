"""The update's precision: ``fp32`` or ``bf16-mixed`` (bf16 compute, fp32 master weights and reductions).

One process (``trainer.strategy=single``): the forward passes of the update run under ``torch.autocast``
with bf16, so matrix products run in bf16 while the weights, their gradients and Adam's moments stay
float32 (autocast casts a weight to bf16 for the product; its gradient comes back to the float32
weight). The log-probs are taken from float32 logits (``logprobs._logp_entropy`` promotes them), the
losses and their reductions are float32. FSDP2 (``trainer.strategy=fsdp``): ``MixedPrecisionPolicy``
with bf16 parameters for compute and float32 gradient reduction (``sharded.shard_policy``); the
sharded master weights and the optimizer stay float32.

Why: on a CPU with AVX-512 BF16 a bf16 matrix product runs about 2.6x a float32 one (SmolLM2's MLP
shape, 2 cores, measured with torch 2.13); ``execrl bench train --precision fp32,bf16-mixed`` measures
the whole update. Limits: the rollout engine samples with ``model.dtype`` (float32 by default), so with
bf16-mixed the update's log-probs differ from the rollout's by bf16 rounding (the importance ratio is
not exactly 1 on-policy; ``rollout/logprob_max_abs_diff`` reports it). With ``fp32`` the context is a
no-op and the update is bit-identical to the code without it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from execrl.trainer.config import PRECISIONS

__all__ = ["PRECISIONS", "autocast", "compute_dtype"]


def compute_dtype(precision: str) -> torch.dtype | None:
    """The dtype the update computes in (None: the weights' own)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not one of: {', '.join(PRECISIONS)}")
    return torch.bfloat16 if precision == "bf16-mixed" else None


def autocast(
    precision: str, device_type: str = "cpu", *, enabled: bool = True
) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to bf16 for ``bf16-mixed`` (``enabled=False``: suspended inside an outer one, e.g.
    for ``backward``, keeping its cast cache); a no-op for ``fp32``."""
    dtype = compute_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype, enabled=enabled)
