"""The rollout ``Engine`` interface and the registry of engine backends.

An engine turns prompt token ids and :class:`SamplingParams` into a :class:`RolloutBatch`. Built in: ``"hf"``,
the CPU reference (:class:`execrl.rollout.hf_engine.HFEngine`, shared-prompt decoding where the model allows
it), and ``"hf-generic"``, the same engine forced onto the model's own forward with a per-row prompt cache
(for models the shared decoder does not cover exactly, or to compare the two). ``"vllm"``: vLLM in a process
and a virtual environment of its own (:mod:`execrl.rollout.vllm_engine`, built by ``scripts/setup.sh
--vllm``); its factory here takes the default ``[vllm]`` settings (a run builds its own from the config in
``execrl.components.setup``). Other backends register a factory under a new name with
:func:`register_engine`; heavy backends must import their library inside the factory, so that choosing
``"hf"`` never imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from execrl.registry import Registry
from execrl.rollout.types import RolloutBatch, SamplingParams

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.rollout.prefix_cache import PrefixCache

__all__ = [
    "Engine",
    "EngineFactory",
    "PrefixReuse",
    "StepHook",
    "create_engine",
    "list_engines",
    "register_engine",
    "reusing_prefixes",
]


@runtime_checkable
class Engine(Protocol):
    """Samples ``params.samples_per_prompt`` completions per prompt; rows are prompt-major."""

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch: ...


# Called by engines that stream (``generate(..., on_step=hook)``) after every decode step, on the generating
# thread, with the output rows that got a token in that step and the tokens: (row ids [A], tokens [A]). It
# may return row ids to finish at once (a server whose client left, or that is stopping); None: go on.
StepHook = Callable[["torch.Tensor", "torch.Tensor"], "Collection[int] | None"]


@runtime_checkable
class PrefixReuse(Protocol):
    """An engine that can keep conversations' keys/values between calls (:mod:`execrl.rollout.prefix_cache`):
    ``prefix_cache`` is read and set; ``can_reuse_prefixes`` says whether the loaded model allows it."""

    prefix_cache: PrefixCache | None

    @property
    def can_reuse_prefixes(self) -> bool: ...


@contextmanager
def reusing_prefixes(
    engine: Engine, *, max_bytes: int, max_conversations: int = 256
) -> Iterator[PrefixCache | None]:
    """Reuse keys/values across the ``engine.generate`` calls inside the block, where the engine can (yields
    the cache, or None: an engine without reuse, a model that does not allow it, or ``max_bytes <= 0``).
    The engine's previous setting comes back afterwards and the block's entries are freed."""
    if max_bytes <= 0 or not isinstance(engine, PrefixReuse) or not engine.can_reuse_prefixes:
        yield None
        return
    from execrl.rollout.prefix_cache import PrefixCache

    previous = engine.prefix_cache
    cache = engine.prefix_cache = PrefixCache(max_bytes=max_bytes, max_conversations=max_conversations)
    try:
        yield cache
    finally:
        cache.clear()
        engine.prefix_cache = previous


EngineFactory = Callable[["PreTrainedModel", "PreTrainedTokenizerBase"], Engine]
_ENGINES: Registry[EngineFactory] = Registry("rollout engine", plural="engines", unknown_error=ValueError)


def register_engine(name: str) -> Callable[[EngineFactory], EngineFactory]:
    """Decorator: register ``factory(model, tokenizer) -> Engine`` under ``name``; a duplicate name raises."""
    return _ENGINES.register(name)


def list_engines() -> list[str]:
    return _ENGINES.names()


def create_engine(name: str, *, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    """Build the engine registered as ``name`` around ``model`` and ``tokenizer``. ``"vllm"`` without its
    environment raises ``vllm_engine.EngineUnavailable`` in one line: how to build it, or use ``hf``."""
    return _ENGINES.get(name)(model, tokenizer)  # an unknown name raises ValueError listing the known ones


@register_engine("hf")
def _hf_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    from execrl.rollout.hf_engine import HFEngine

    return HFEngine(model, tokenizer)


@register_engine("hf-generic")
def _hf_generic_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    from execrl.rollout.hf_engine import HFEngine

    return HFEngine(model, tokenizer, shared_prompt_decode=False)


@register_engine("vllm")
def _vllm_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    from execrl.rollout.vllm_engine import VLLMEngine, VLLMSettings

    return VLLMEngine.for_model(model, tokenizer, settings=VLLMSettings())
