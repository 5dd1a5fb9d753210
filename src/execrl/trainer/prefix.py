"""Shared-prompt forward for training: each distinct prompt runs through the trunk once per micro-batch.

A GRPO batch holds ``samples_per_prompt`` rows per prompt, and on code tasks the prompt is usually longer
than the completion (the main job: about 200 prompt tokens, at most 96 completion tokens). A plain
teacher-forced pass computes every prompt ``samples_per_prompt`` times, forward and backward. Here the
columns before the first scored token (the *context*, ``[0, c)``) are computed once per distinct context;
its keys/values are then indexed out to the rows that share it, and only the columns ``[c, S)`` run per row,
attending to that cache. Causal attention makes this exact: no position before ``c`` can see anything after
it, so the context's hidden states and keys/values are the same in every row that has the same context.
Gradients flow back through the index (``index_select``'s backward sums the rows' contributions), so the
gradient equals the plain pass's up to float rounding (checked in float64 by the unit tests). On CPU that sum
runs in row order whatever the thread count, so a step's gradient is bit-reproducible (the SIGKILL-resume
tests compare weights bit for bit); an advanced index (``hidden[inverse]``) is not: its backward adds with
atomics across threads once a context spans both threads' rows (``test_prefix.py`` checks this).

Measured on SmolLM2-135M, float32, 2 CPU cores, the ``execrl bench train`` batch (4 prompts x 4 samples,
115-130 prompt tokens + up to 64 completion tokens): ``policy_update`` took 13.3-17.3 s per step with the plain
pass and 7.3-8.4 s with the shared one (three steps each, same session). The saving grows with the prompt's
share of the tokens and with ``samples_per_prompt``.

The context's keys/values live in a ``ContextCache``: one copy per distinct context (``[U, kv_heads, c, d]``
per layer), handed to the rows inside each layer of the rest of the pass (an ``expand`` when the micro-batch
holds one group, an index otherwise), never stored per row. The cache is *replay-safe*: the context pass
records each layer's keys/values once and a second call (the recompute of activation checkpointing,
:mod:`execrl.trainer.checkpointing`) returns its inputs untouched, and the rows' pass never writes to it. So the
shared pass also runs under activation checkpointing: a long prompt then costs one hidden state per layer
plus its keys/values instead of every layer's activations.

Limits: the context is ``[0, c)`` with ``c`` the first column any row scores, so it only helps with the
layout ``execrl.episodes.episodes_to_batch`` builds (prompts left-padded to one width, completions after them); rows whose
context differs in any token or padding do not share. Decoders that take no KV cache, models with sliding or
non-full attention layers, and forwards under Hugging Face's own gradient checkpointing
(``model.gradient_checkpointing_enable()``: its layers drop the cache) use the plain pass instead; a decoder
that accepts a cache but leaves it unfilled raises rather than computing without the context. On CUDA
``index_select``'s backward also adds with atomics: bit-reproducible gradients there need
``torch.use_deterministic_algorithms(True)``, which this module does not set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class SharedPrefix:
    """Which rows share their first ``width`` columns: ``unique_rows`` [U] representatives, ``inverse`` [N]."""

    width: int  # c: every scored position is >= c, so columns [0, c) are pure context
    unique_rows: Tensor  # [U] int64, one row per distinct context
    inverse: Tensor  # [N] int64, index into unique_rows for every row


def find_shared_prefix(input_ids: Tensor, attention_mask: Tensor, token_mask: Tensor) -> SharedPrefix | None:
    """The shared context of a batch, or None when no two rows share one (nothing to save).

    ``token_mask`` [N, S] marks the positions whose log-prob is wanted; the context ends at the first such
    column over all rows. Two rows share a context when their ids AND attention masks agree on it (a pad id
    may equal a real token id, so the ids alone are not enough).
    """
    scored = (token_mask > 0) & (attention_mask > 0)  # [N, S]
    if not bool(scored.any()):
        return None
    columns = torch.arange(input_ids.shape[1], device=input_ids.device)
    width = int(torch.where(scored, columns, input_ids.shape[1]).amin())
    if width < 1:
        return None
    key = torch.cat([input_ids[:, :width], attention_mask[:, :width].to(input_ids.dtype)], dim=1)  # [N, 2c]
    unique, inverse = torch.unique(key, dim=0, return_inverse=True)
    if unique.shape[0] == input_ids.shape[0]:
        return None
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    first = torch.full((unique.shape[0],), input_ids.shape[0], dtype=torch.long, device=input_ids.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")  # [U] first row of each context
    return SharedPrefix(width=width, unique_rows=first, inverse=inverse)


def computed_positions(attention_mask: Tensor, shared: SharedPrefix | None) -> tuple[int, int]:
    """(padded, computed) positions of the trunk's pass over ``attention_mask`` [N, S]: every row's every
    column for the plain pass; with ``shared``, each distinct context's columns once plus every row's columns
    from the context's end on. Padded ones are those with mask 0 (``train/padding_share`` = their ratio)."""
    if shared is None:
        return int((attention_mask == 0).sum()), int(attention_mask.numel())
    context = attention_mask[shared.unique_rows, : shared.width]  # [U, c]
    rest = attention_mask[:, shared.width :]  # [N, S - c]
    return int((context == 0).sum() + (rest == 0).sum()), int(context.numel() + rest.numel())


def _checkpointing(decoder: nn.Module) -> bool:
    """Whether a training forward will run under Hugging Face's own activation checkpointing, which makes its
    layers drop the KV cache (``GradientCheckpointingLayer``): the shared pass cannot be used then."""
    if not (decoder.training and torch.is_grad_enabled()):
        return False
    return any(getattr(module, "gradient_checkpointing", False) for module in decoder.modules())


def _full_attention(config: Any) -> bool:
    text = config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
    layer_types = getattr(text, "layer_types", None)
    return layer_types is None or all(t == "full_attention" for t in layer_types)


def can_share(decoder: nn.Module) -> bool:
    """Whether ``forward_shared`` can run on ``decoder``: it takes a KV cache, has a config, only full
    attention layers, and is not under Hugging Face's gradient checkpointing."""
    from execrl.rollout.kv_cache import cache_argument_name

    config = getattr(decoder, "config", None)
    return (
        cache_argument_name(decoder) is not None
        and config is not None
        and _full_attention(config)
        and not _checkpointing(decoder)
    )


def _context_caches(num_layers: int, inverse: Tensor, groups: int) -> tuple[Any, Any]:
    """Two ``Cache`` objects over the same per-layer context keys/values (``ContextCache`` in the module doc):
    the context pass's, which records each layer once (a replay returns its inputs), and the rows' pass's,
    which reads them and never writes. Separate objects because a checkpointed layer's recompute calls the
    cache it was first given: the context pass's recompute must record (not read), whenever it runs."""
    from transformers.cache_utils import Cache, DynamicLayer

    class Recorder(DynamicLayer):  # type: ignore[no-untyped-call]
        def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
            self.device = key_states.device
            self.is_initialized = True

        def update(
            self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object
        ) -> tuple[Tensor, Tensor]:
            if self.keys is None:  # [U, kv, c, d]
                self.lazy_initialization(key_states, value_states)
                self.keys, self.values = key_states, value_states
            return key_states, value_states

        def get_seq_length(self) -> int:
            return 0 if self.keys is None else int(self.keys.shape[-2])

    class Reader(DynamicLayer):  # type: ignore[no-untyped-call]
        def __init__(self, context: Recorder) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.context = context
            self.is_initialized = True

        def update(
            self, key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object
        ) -> tuple[Tensor, Tensor]:
            keys, values = self.context.keys, self.context.values
            assert keys is not None and values is not None
            if groups == 1:  # [1, kv, c, d] -> [N, kv, c, d] as a view
                keys = keys.expand(key_states.shape[0], -1, -1, -1)
                values = values.expand(value_states.shape[0], -1, -1, -1)
            else:
                keys, values = keys.index_select(0, inverse), values.index_select(0, inverse)
            return torch.cat([keys, key_states], dim=-2), torch.cat([values, value_states], dim=-2)

        def get_seq_length(self) -> int:
            return self.context.get_seq_length()

    recorders = [Recorder() for _ in range(num_layers)]  # type: ignore[no-untyped-call]
    return Cache(layers=list(recorders)), Cache(layers=[Reader(r) for r in recorders])


def forward_shared(
    decoder: nn.Module, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor, shared: SharedPrefix
) -> Tensor | None:
    """Trunk hidden states [N, S, H] computing each distinct context once; None if the decoder can't.

    The context runs for the ``U`` representatives, filling a ``ContextCache``; the rest of each row then runs
    on top of it with the full ``[N, S]`` attention mask, so padding in the context stays masked.
    """
    from execrl.rollout.kv_cache import cache_argument_name

    if not can_share(decoder):
        return None
    kwarg = cache_argument_name(decoder)
    assert kwarg is not None
    loose: Any = decoder  # Hugging Face API, untyped for nn.Module
    text_config = loose.config.get_text_config() if hasattr(loose.config, "get_text_config") else loose.config
    c, reps = shared.width, shared.unique_rows
    cache, reader = _context_caches(int(text_config.num_hidden_layers), shared.inverse, int(reps.numel()))
    head = loose(
        input_ids=input_ids[reps, :c],
        attention_mask=attention_mask[reps, :c],
        position_ids=position_ids[reps, :c],
        use_cache=True,
        **{kwarg: cache},
    )
    if cache.get_seq_length() != c:  # a decoder that skips its cache would silently drop the context
        raise RuntimeError(
            f"the decoder filled {cache.get_seq_length()} of {c} context positions of the KV cache in the "
            "shared-prompt forward; set TrainerConfig.share_prompt_forward=False for this model"
        )
    tail = loose(
        input_ids=input_ids[:, c:],
        attention_mask=attention_mask,
        position_ids=position_ids[:, c:],
        use_cache=True,
        **{kwarg: reader},
    )
    head_hidden: Tensor = head.last_hidden_state  # [U, c, H]
    tail_hidden: Tensor = tail.last_hidden_state  # [N, S - c, H]
    # index_select, not head_hidden[inverse]: both sum the rows' gradients into their context in backward, but
    # the indexing's CPU kernel (index_put_ with accumulate) splits the rows between threads and adds with
    # atomics, in whichever order the threads run; index_select's (index_add_) adds them in row order.
    rows_context = head_hidden.index_select(0, shared.inverse)  # [N, c, H]
    return torch.cat([rows_context, tail_hidden], dim=1)
