"""Rollout: group sampling of completions and model loading.

    from execrl.rollout import HFEngine, SamplingParams, encode_prompts, load_model_and_tokenizer
    model, tokenizer = load_model_and_tokenizer(default_model_dir())
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    batch = engine.generate(encode_prompts(tokenizer, ["Write fizzbuzz."]), SamplingParams(samples_per_prompt=8))
    mismatch = logprob_mismatch(model, batch)   # report as rollout/logprob_max_abs_diff

Importing this package imports torch and transformers.
"""

from execrl.rollout.engine import (
    Engine,
    PrefixReuse,
    create_engine,
    list_engines,
    register_engine,
    reusing_prefixes,
)
from execrl.rollout.hf_engine import HFEngine, resolve_eos_token_ids
from execrl.rollout.logprobs import logprob_mismatch, teacher_forced_inputs, teacher_forced_logprobs
from execrl.rollout.models import (
    ModelLoadError,
    default_model_dir,
    default_tokenizer,
    load_model_and_tokenizer,
    tiny_model,
)
from execrl.rollout.prefix_cache import PrefixCache
from execrl.rollout.prompts import encode_prompts
from execrl.rollout.types import FinishReason, RolloutBatch, RolloutStats, SamplingParams

__all__ = [
    "Engine",
    "FinishReason",
    "HFEngine",
    "ModelLoadError",
    "PrefixCache",
    "PrefixReuse",
    "RolloutBatch",
    "RolloutStats",
    "SamplingParams",
    "create_engine",
    "default_model_dir",
    "default_tokenizer",
    "encode_prompts",
    "list_engines",
    "load_model_and_tokenizer",
    "logprob_mismatch",
    "register_engine",
    "resolve_eos_token_ids",
    "reusing_prefixes",
    "teacher_forced_inputs",
    "teacher_forced_logprobs",
    "tiny_model",
]
