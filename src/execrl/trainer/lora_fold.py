"""A plain copy of a LoRA policy with its adapters folded into the weights, for sampling (``lora.fold_for_sampling``).

Why: a peft LoRA layer runs ``base(x) + scale * B(A(dropout(x)))``, four more small kernels per
projection. Decoding is one token per row per step, so those kernels (and their Python dispatch) cost
about as much as the base matmul itself: sampling through the peft model was slower than full-model
sampling. ``FoldedPolicy.model`` is the policy with each adapted layer replaced by an ordinary layer whose
weight is ``W + (alpha / r) * B @ A`` (peft's own ``get_delta_weight``, the arithmetic ``merge_adapters`` and
``execrl export`` use), so a decode step costs what the full model's does. The trainer keeps the peft
model for log-probs and gradients.

Refresh: ``refresh()`` refolds when the adapters differ from the ones of the last fold (compared by
value against a snapshot: fused AdamW, execrl's optimizer, writes the parameters without bumping their
in-place version counters, measured on torch 2.13 CPU) or when any parameter of the policy was written
(version counter) or replaced (storage address) since. The engine calls it at the start of every
``generate``, so the copy is a pure function of the policy's current weights (bit-exact ``--resume``: the
resumed run folds the same loaded adapters). A fold writes the targeted weights in place, so the copy never
reallocates. The check costs one comparison of the adapters (4.9 M values at rank 16 on SmolLM2-135M).

Memory: every parameter no adapter touches (embeddings, norms, output head) is shared with the policy; the
adapted layers' weights get their own storage at the first fold (about 106 M of SmolLM2-135M's 135 M
parameters: ~425 MB in float32), and the snapshot holds one more copy of the adapters. Before the first
``refresh`` the copy costs nothing.

Numerics (measured, ``tests/unit/trainer/test_lora_fold.py``): ``(W + sBA) x`` and ``W x + s B (A x)`` are
the same sum rounded in another order, so log-probs differ at float32 rounding (~1e-5), the size of the gap
already between the engine's cascade-attention decode and the trainer's forward. In bfloat16 the folded
weight is rounded to bfloat16 once (as the exported model is): an adapter update far below a weight's
bfloat16 step is lost in the copy while the peft forward keeps it, a larger gap between the rollout's and
the trainer's log-probs (``rollout/logprob_max_abs_diff`` shows it); ``lora.fold_for_sampling=false``
samples through peft instead.
"""

from __future__ import annotations

import copy
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from execrl.trainer.lora import has_adapters

__all__ = ["FoldedPolicy", "parameter_versions"]

M = TypeVar("M", bound=nn.Module)


def parameter_versions(model: nn.Module) -> tuple[tuple[int, int], ...]:
    """(storage address, in-place version counter) of every parameter: changes when any is written or
    replaced."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


class FoldedPolicy(Generic[M]):
    """``model``: a plain (peft-free) copy of ``policy`` that ``refresh()`` keeps equal to the policy's
    folded weights. Frozen, eval mode, no gradients; the policy itself is never modified. Before the first
    ``refresh`` it is the base model (adapters off), sharing every weight."""

    def __init__(self, policy: M) -> None:
        from peft.tuners.tuners_utils import BaseTunerLayer

        if not has_adapters(policy):
            raise ValueError("FoldedPolicy needs a model with LoRA adapters (add_adapters first)")
        self.policy = policy
        shared: dict[int, Any] = {id(p): p for p in policy.parameters()}  # until the first fold: the base
        plain = copy.deepcopy(policy, shared)
        self._pairs: list[tuple[Any, nn.Module]] = []  # (policy's tuner layer, the copy's plain layer)
        tuners = {name: m for name, m in policy.named_modules() if isinstance(m, BaseTunerLayer)}
        for name, copied in list(plain.named_modules()):
            if name in tuners:
                base = copied.get_base_layer()
                parent, _, child = name.rpartition(".")
                setattr(plain.get_submodule(parent), child, base)
                self._pairs.append((tuners[name], base))
        del plain.peft_config
        plain.train(False)
        plain.requires_grad_(False)
        self.model: M = plain
        self._adapters = [p for tuner, _ in self._pairs for p in _adapter_parameters(tuner)]
        self._snapshot: list[torch.Tensor] = []  # the adapters' values at the last fold
        self._seen: tuple[tuple[int, int], ...] | None = None  # parameter_versions at the last fold
        self._owned = False  # whether the folded weights have their own storage yet
        self.folds = 0  # how many times refresh() refolded (tests read it)

    def stale(self) -> bool:
        """Whether the policy's weights differ from the ones last folded."""
        if self._seen is None or parameter_versions(self.policy) != self._seen:
            return True
        return not all(torch.equal(p, s) for p, s in zip(self._adapters, self._snapshot, strict=True))

    def refresh(self) -> bool:
        """Refold if the policy's weights changed since the last fold; returns whether it refolded."""
        if not self.stale():
            return False
        with torch.no_grad():
            for tuner, plain in self._pairs:
                self._fold(tuner, plain)
            if self._snapshot:
                for saved, param in zip(self._snapshot, self._adapters, strict=True):
                    saved.copy_(param)
            else:
                self._snapshot = [p.detach().clone() for p in self._adapters]
        self._owned = True
        self._seen = parameter_versions(self.policy)
        self.folds += 1
        return True

    def _fold(self, tuner: Any, plain: nn.Module) -> None:
        """``plain.weight = W + delta`` for the tuner's one active adapter, in place once owned."""
        (adapter,) = tuner.active_adapters  # add_adapters and load_adapter_dir inject exactly one
        base_weight = tuner.get_base_layer().weight
        delta = tuner.get_delta_weight(adapter)
        if delta.shape != base_weight.shape:
            raise ValueError(
                f"{type(tuner).__name__}: adapter delta {tuple(delta.shape)} does not fit weight "
                f"{tuple(base_weight.shape)}; set lora.fold_for_sampling=false for this model"
            )
        if not self._owned:
            plain.weight = nn.Parameter(torch.empty_like(base_weight), requires_grad=False)
        weight = plain.weight
        assert isinstance(weight, torch.Tensor)
        torch.add(base_weight, delta, out=weight)


def _adapter_parameters(tuner: Any) -> list[nn.Parameter]:
    """The tuner layer's adapter parameters (its own, not the base layer's)."""
    base = {id(p) for p in tuner.get_base_layer().parameters()}
    return [p for p in tuner.parameters() if id(p) not in base]
