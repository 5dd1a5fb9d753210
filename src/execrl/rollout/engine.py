"""The rollout ``Engine`` interface and the registry of engine backends.

An engine turns prompt token ids and :class:`SamplingParams` into a :class:`RolloutBatch`. Built in: ``"hf"``,
the CPU reference (:class:`execrl.rollout.hf_engine.HFEngine`, shared-prompt decoding where the model allows
it), and ``"hf-generic"``, the same engine forced onto the model's own forward with a per-row prompt cache
(for models the shared decoder does not cover exactly, or to compare the two). Other backends (a vLLM
server, say) register a factory under a new name with :func:`register_engine`; heavy backends must import
their library inside the factory, so that choosing ``"hf"`` never imports them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from execrl.registry import Registry
from execrl.rollout.types import RolloutBatch, SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["Engine", "EngineFactory", "create_engine", "list_engines", "register_engine"]


@runtime_checkable
class Engine(Protocol):
    """Samples ``params.samples_per_prompt`` completions per prompt; rows are prompt-major."""

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch: ...


EngineFactory = Callable[["PreTrainedModel", "PreTrainedTokenizerBase"], Engine]
_ENGINES: Registry[EngineFactory] = Registry("rollout engine", plural="engines", unknown_error=ValueError)


def register_engine(name: str) -> Callable[[EngineFactory], EngineFactory]:
    """Decorator: register ``factory(model, tokenizer) -> Engine`` under ``name``; a duplicate name raises."""
    return _ENGINES.register(name)


def list_engines() -> list[str]:
    return _ENGINES.names()


def create_engine(name: str, *, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    """Build the engine registered as ``name`` around ``model`` and ``tokenizer``."""
    if name == "vllm" and name not in _ENGINES:
        installed = importlib.util.find_spec("vllm") is not None
        reason = (
            "vLLM is installed, but execrl has no vLLM engine yet"
            if installed
            else "vLLM is not installed (it needs a CUDA GPU: `pip install vllm`), and execrl has no vLLM engine yet"
        )
        raise ValueError(
            f"rollout engine 'vllm' is not available: {reason}; use engine 'hf' "
            f"(known: {', '.join(list_engines())})"
        )
    return _ENGINES.get(name)(model, tokenizer)  # an unknown name raises ValueError listing the known ones


@register_engine("hf")
def _hf_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    from execrl.rollout.hf_engine import HFEngine

    return HFEngine(model, tokenizer)


@register_engine("hf-generic")
def _hf_generic_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Engine:
    from execrl.rollout.hf_engine import HFEngine

    return HFEngine(model, tokenizer, shared_prompt_decode=False)
