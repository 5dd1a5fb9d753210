"""Activation (gradient) checkpointing of a model's decoder layers, for the length of a ``with`` block.

Why: the backward pass needs every layer's activations, and for a long prompt those dominate memory (they grow
with tokens x layers). Checkpointing keeps only each layer's input and recomputes the layer's forward during
backward (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", arXiv 1604.06174): about one more
forward pass of compute for activations of one layer at a time.

Why not ``model.gradient_checkpointing_enable()``: Hugging Face's layers then drop the KV cache (so the shared
prompt pass of :mod:`execrl.trainer.prefix` could not run) and only checkpoint in ``train()`` mode, while the
recipes train in eval mode (no dropout). Here each decoder layer's ``forward`` is wrapped in
``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` for the ``with`` block and restored after it; the
cache object passes through untouched, and ``prefix.ContextCache`` is replay-safe, so the shared pass and
checkpointing combine. Non-reentrant checkpointing restores the RNG state on recompute, so dropout (if the
caller trains in ``train()`` mode) draws the same masks: the gradients equal the plain pass's up to float
rounding (``tests/unit/trainer/test_long_context.py``).

Limits: the decoder layers are found as ``transformers``' ``GradientCheckpointingLayer`` instances (every
Hugging Face decoder); a model without them raises ``ValueError``. Only forwards with gradients enabled are
checkpointed (no-grad log-prob passes are unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["activation_checkpointing", "decoder_layers"]


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The checkpointable decoder layers of ``model`` (``transformers``' ``GradientCheckpointingLayer``)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    return run


@contextmanager
def activation_checkpointing(model: nn.Module, *, enabled: bool = True) -> Iterator[None]:
    """Inside the block, every decoder layer of ``model`` recomputes its forward in backward (see module doc).

    ``enabled=False`` is a no-op, so a caller can write ``with activation_checkpointing(model, enabled=flag)``.
    The layers' own ``forward`` attributes are restored on exit, exceptions included.
    """
    if not enabled:
        yield
        return
    layers = decoder_layers(model)
    if not layers:
        raise ValueError(
            f"activation checkpointing needs a transformers model whose decoder layers are "
            f"GradientCheckpointingLayer; {type(model).__name__} has none (set gradient_checkpointing=False)"
        )
    saved = [(layer, layer.__dict__.get("forward")) for layer in layers]
    for layer in layers:
        layer.forward = _checkpointed(layer.forward)
    try:
        yield
    finally:
        for layer, own in saved:
            if own is None:
                del layer.forward
            else:
                layer.forward = own
