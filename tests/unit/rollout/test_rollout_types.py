"""SamplingParams validation and RolloutBatch helpers."""

from __future__ import annotations

import dataclasses

import pytest

from execrl.rollout.types import SamplingParams


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("samples_per_prompt", 0, "samples_per_prompt must be >= 1"),
        ("max_new_tokens", 0, "max_new_tokens must be >= 1"),
        ("temperature", -0.1, "temperature must be >= 0"),
        ("temperature", float("nan"), "temperature must be >= 0"),
        ("top_p", 0.0, "top_p must be in"),
        ("top_p", 1.5, "top_p must be in"),
        ("top_k", -1, "top_k must be >= 0"),
        ("stop_strings", "abc", "stop_strings must be a tuple"),
        ("stop_strings", ("",), "stop_strings must be a tuple"),
        ("stop_token_ids", (-1,), "stop_token_ids must be non-negative"),
    ],
)
def test_invalid_sampling_params_name_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(**{field: value})  # type: ignore[arg-type]


def test_sampling_params_are_frozen_and_greedy_flag() -> None:
    params = SamplingParams(temperature=0.0)
    assert params.greedy
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.temperature = 1.0  # type: ignore[misc]


def test_package_exports_exactly_the_public_api() -> None:
    import execrl.rollout as rollout

    assert sorted(rollout.__all__) == sorted(
        [
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
    )
    assert all(hasattr(rollout, name) for name in rollout.__all__)
