"""A preallocated KV cache for group sampling: write in place, expand once, drop finished rows.

transformers' ``DynamicLayer`` grows by ``torch.cat`` on every decode step, i.e. it copies the whole cache
of every layer per generated token (O(T^2) memory traffic per sequence). Here each layer owns one buffer of
shape ``[rows, kv_heads, capacity, head_dim]`` sized for prompt + ``max_new_tokens`` up front; a decode step
writes one slot and hands attention a view of the filled prefix.

The two group-sampling operations:

- :meth:`PreallocatedLayer.batch_repeat_interleave`: after ONE prefill per prompt, copy each prompt's
  keys/values to its ``samples_per_prompt`` rows. Each row gets its own storage, so later writes never
  alias across a group (the shared-prefix bug where samples overwrite one another cannot occur).
- :meth:`PreallocatedLayer.batch_select_indices`: keep only unfinished rows, so finished sequences stop
  costing compute.

Limits: full-attention layers only (no sliding window); the capacity is fixed at creation and exceeding it
raises.
"""

from __future__ import annotations

import inspect

import torch
from transformers.cache_utils import Cache, DynamicLayer

__all__ = ["PreallocatedLayer", "cache_argument_name", "preallocated_cache"]


def cache_argument_name(module: torch.nn.Module) -> str | None:
    """The name under which ``module.forward`` takes a KV cache: ``cache`` (transformers >= 5 layers and
    models), ``past_key_values`` (older ones), or None if it takes neither."""
    parameters = inspect.signature(module.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in parameters), None)


class PreallocatedLayer(DynamicLayer):  # type: ignore[no-untyped-call]
    """One layer's keys/values in a fixed-capacity buffer; behaves like ``DynamicLayer`` towards the model."""

    def __init__(self, capacity_tokens: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capacity_tokens = capacity_tokens
        self.length = 0
        self._key_buffer: torch.Tensor | None = None  # [rows, kv_heads, capacity, head_dim]
        self._value_buffer: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        rows, heads, _, head_dim = key_states.shape
        shape = (rows, heads, self.capacity_tokens, head_dim)
        self._key_buffer = key_states.new_empty(shape)
        self._value_buffer = value_states.new_empty(
            (rows, heads, self.capacity_tokens, value_states.shape[-1])
        )
        self.device = key_states.device
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self._key_buffer is not None and self._value_buffer is not None
        new_tokens = key_states.shape[-2]
        end = self.length + new_tokens
        if end > self.capacity_tokens:
            raise RuntimeError(
                f"KV cache capacity {self.capacity_tokens} exceeded ({end} tokens); "
                "the engine sizes it as prompt length + max_new_tokens"
            )
        self._key_buffer[:, :, self.length : end] = key_states
        self._value_buffer[:, :, self.length : end] = value_states
        self.length = end
        self.keys = self._key_buffer[:, :, :end]
        self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def seed(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Start from earlier keys/values ``[rows, kv_heads, W, head_dim]`` (a prefix cache's reused part)."""
        self.lazy_initialization(keys, values)
        self.length = 0
        self.update(keys, values)

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.capacity_tokens

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._key_buffer is None or self._value_buffer is None:
            return
        self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
        self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
        self._refresh_views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._key_buffer is None or self._value_buffer is None:
            return
        self._key_buffer = _select_rows(self._key_buffer, indices, self.length)
        self._value_buffer = _select_rows(self._value_buffer, indices, self.length)
        self._refresh_views()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.batch_select_indices(beam_idx)

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("PreallocatedLayer does not support cropping (not needed for sampling)")

    def reset(self) -> None:
        self.length = 0
        self._key_buffer = self._value_buffer = None
        super().reset()

    def _refresh_views(self) -> None:
        assert self._key_buffer is not None and self._value_buffer is not None
        self.keys = self._key_buffer[:, :, : self.length]
        self.values = self._value_buffer[:, :, : self.length]


def _select_rows(buffer: torch.Tensor, indices: torch.Tensor, length: int) -> torch.Tensor:
    """Copy only the filled prefix of the kept rows into a fresh buffer of the same capacity."""
    out = buffer.new_empty((indices.numel(), *buffer.shape[1:]))
    out[:, :, :length] = buffer[indices, :, :length]
    return out


def preallocated_cache(num_layers: int, capacity_tokens: int) -> Cache:
    """A ``Cache`` of ``num_layers`` :class:`PreallocatedLayer` for one ``generate`` call."""
    return Cache(layers=[PreallocatedLayer(capacity_tokens) for _ in range(num_layers)])
