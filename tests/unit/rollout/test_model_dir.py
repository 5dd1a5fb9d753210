"""``rollout/model_dir.py``: what is checked about a model directory before its weights are allocated
(issue 24, class 4), on tiny models written here (``tokenizer`` is the session's SmolLM2 tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import safetensors.torch
import torch
from transformers import PreTrainedTokenizerBase

from execrl.rollout import model_dir
from execrl.rollout.models import ModelLoadError, load_model_and_tokenizer, tiny_model


@pytest.fixture()
def saved(tmp_path: Path, tokenizer: PreTrainedTokenizerBase) -> Path:
    tiny_model(seed=1).save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_the_plan_counts_weights_on_the_meta_device_and_groups_tied_names(saved: Path) -> None:
    plan = model_dir.plan_model(saved, dtype=torch.bfloat16)
    model = tiny_model(seed=1)
    assert plan.weight_bytes >= 2 * sum(p.numel() for p in model.parameters())
    assert frozenset({"lm_head.weight", "model.embed_tokens.weight"}) in plan.parameters
    assert len(plan.parameters) == len(list(model.parameters()))  # tied weights counted once


def test_a_config_past_the_memory_bound_is_refused_naming_its_size_fields(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXECRL_MAX_MODEL_MB", "1")  # the tiny model's 12 MB of weights is too much
    with pytest.raises(
        ModelLoadError, match=r"config.json: .*vocab_size=49152, hidden_size=64.*EXECRL_MAX_MODEL_MB"
    ):
        model_dir.plan_model(saved, dtype=torch.float32)
    monkeypatch.setenv("EXECRL_MAX_MODEL_MB", "lots")
    with pytest.raises(ModelLoadError, match="whole number"):
        model_dir.max_model_bytes()


def test_a_checkpoint_saved_without_tied_copies_passes_and_one_missing_a_tensor_does_not(
    saved: Path, tmp_path: Path
) -> None:
    """execrl's checkpoints (safetensors.torch.save_model) keep one name of a tied pair: that is complete.
    One without a layer's weight is refused before loading, naming the tensor (it loaded randomly)."""
    plan = model_dir.plan_model(saved, dtype=torch.float32)
    model = tiny_model(seed=2)
    safetensors.torch.save_model(model, str(tmp_path / "ckpt.safetensors"))
    found = model_dir.read_headers([tmp_path / "ckpt.safetensors"])
    model_dir.check_tensor_names(found, plan, "ckpt", strict=True)
    state = {k: v for k, v in model.state_dict().items() if k not in ("model.norm.weight", "lm_head.weight")}
    safetensors.torch.save_file(state, str(tmp_path / "partial.safetensors"))
    partial = model_dir.read_headers([tmp_path / "partial.safetensors"])
    with pytest.raises(
        ModelLoadError, match=r"partial: 1 of the model's 20 tensors are missing \(model.norm.weight\)"
    ):
        model_dir.check_tensor_names(partial, plan, "partial", strict=True)
    extra = {**found, "model.layers.9.mlp.up_proj.weight": ((1,), tmp_path)}
    with pytest.raises(ModelLoadError, match="tensors this model lacks"):
        model_dir.check_tensor_names(extra, plan, "extra", strict=True)
    model_dir.check_tensor_names(extra, plan, "extra", strict=False)  # names transformers may convert


def test_a_sharded_index_naming_a_missing_shard_or_a_path_is_refused(saved: Path) -> None:
    (saved / "model.safetensors").rename(saved / "model-00001-of-00002.safetensors")
    index = saved / "model.safetensors.index.json"
    index.write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "gone.safetensors"}})
    )
    with pytest.raises(ModelLoadError, match="gone.safetensors: missing"):
        model_dir.check_weight_files(model_dir.plan_model(saved, dtype=torch.float32))
    index.write_text(json.dumps({"weight_map": {"a": "../../etc/passwd"}}))
    with pytest.raises(ModelLoadError, match="a shard name is a path"):
        model_dir.check_weight_files(model_dir.plan_model(saved, dtype=torch.float32))


def test_loading_report_of_missing_tensors_is_an_error() -> None:
    with pytest.raises(ModelLoadError, match="randomly initialised .*model.norm.weight"):
        model_dir.check_loading_info({"missing_keys": ["model.norm.weight"]}, Path("m"))
    model_dir.check_loading_info({"missing_keys": [], "unexpected_keys": ["x"]}, Path("m"))


def test_a_good_directory_still_loads(saved: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(saved)
    assert torch.equal(model.lm_head.weight, tiny_model(seed=1).lm_head.weight)
    assert tokenizer.chat_template
