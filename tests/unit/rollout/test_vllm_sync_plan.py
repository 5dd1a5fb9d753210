"""The vLLM engine's pieces that need no engine: bucket layout, engine-layer grouping, the checksum both
sides share, the tolerance table, the config, and the one-line error when the engine's venv is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from execrl.config import ConfigError, build, load_config
from execrl.rollout.vllm_engine import EngineUnavailable, VLLMSettings, engine_python
from execrl.rollout.vllm_server import CHUNK_ALIGN, checksum
from execrl.rollout.vllm_sync import layer_key, plan_buckets, tolerance


def test_buckets_hold_whole_aligned_tensors_and_close_near_the_size() -> None:
    shapes = [("a", (10, 10)), ("b", (3,)), ("c", (40, 10)), ("d", (5, 5))]
    buckets = plan_buckets(shapes, element_size=4, bucket_bytes=1000)
    # a (400 B, padded to 448) + b (12 -> 64 B) fit; c (1,600 B) opens a bucket of its own; d a third.
    assert [[s.name for s in b.slots] for b in buckets] == [["a", "b"], ["c"], ["d"]]
    for bucket in buckets:
        assert bucket.nbytes % CHUNK_ALIGN == 0
        assert all(slot.offset % CHUNK_ALIGN == 0 for slot in bucket.slots)
    assert [b.offset for b in buckets] == [0, 512, 2112]  # contiguous in the file


def test_a_tensor_loads_into_its_fused_engine_layer() -> None:
    packed = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "up_proj": "gate_up_proj"}
    assert layer_key("model.layers.3.self_attn.k_proj.weight", packed) == "model.layers.3.self_attn.qkv_proj"
    assert layer_key("model.layers.3.mlp.up_proj.weight", packed) == "model.layers.3.mlp.gate_up_proj"
    assert layer_key("model.norm.weight", packed) == "model.norm"


def test_checksum_sees_a_zeroed_word_and_a_short_bucket() -> None:
    data = torch.arange(64, dtype=torch.int32).view(torch.uint8)
    reference = checksum(data)
    assert reference == sum(range(64))
    zeroed = data.clone()
    zeroed[8:12] = 0
    assert checksum(zeroed) != reference
    assert checksum(data[:-4]) != reference


def test_tolerance_follows_the_two_precisions() -> None:
    fp32 = tolerance("float32", torch.float32)
    assert fp32.max_abs <= 2e-3 and fp32.mean_abs <= 2e-4
    assert tolerance("bfloat16", torch.float32).max_abs > 0.5  # bf16 vs fp32: up to ~0.45 on SmolLM2
    assert tolerance("float32", torch.bfloat16) == tolerance("bfloat16", torch.float32)


def test_settings_are_built_from_the_vllm_section_by_name() -> None:
    config = load_config(None, ["rollout.engine=vllm", "vllm.dtype=float32", "vllm.delta=true"])
    settings = build(VLLMSettings, config.vllm, max_lora_rank=0, seed=config.run.seed)
    assert (settings.dtype, settings.delta, settings.seed) == ("float32", True, 0)


def test_vllm_keys_without_the_vllm_engine_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"vllm.delta: used only with rollout.engine=vllm"):
        load_config(None, ["vllm.delta=true"])
    config = load_config(None, ["rollout.engine=vllm", "algorithm.async_steps=1"])  # one-step-off: accepted
    assert (config.rollout.engine, config.algorithm.async_steps) == ("vllm", 1)


def test_a_missing_engine_environment_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable) as caught:
        engine_python(VLLMSettings(python=str(tmp_path / "nope" / "python")))
    message = str(caught.value)
    assert "\n" not in message
    assert "scripts/setup.sh --vllm" in message and "rollout.engine=hf" in message


def test_train_without_the_engine_environment_exits_2_with_that_line(tmp_path: Path) -> None:
    """``execrl train rollout.engine=vllm`` where no engine venv exists: ``error:`` and exit 2, no traceback,
    no run directory."""
    result = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--no-progress", "rollout.engine=vllm",
         f"vllm.python={tmp_path / 'missing-python'}", f"run.output_dir={tmp_path}", "eval.enabled=false"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: rollout engine 'vllm' needs")
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []
