"""The vLLM engine (``rollout.engine=vllm``) on a tiny random Llama, for real: its own process and venv.

Generation and its log-probs against the HF model, stop tokens and strings, what a seed reproduces, many
concurrent ``submit`` calls, and the verified weight sync with each stale-state bug it exists to catch
(issue 37). One fp32 engine for the file (about 20 s to start).
"""

from __future__ import annotations

import dataclasses
import glob
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from vllm_fixtures import perturb, pytestmark_vllm, save_tiny, vllm_tiny_model

from execrl.rollout import SamplingParams, logprob_mismatch, teacher_forced_logprobs
from execrl.rollout.models import default_tokenizer
from execrl.rollout.vllm_engine import EngineUnavailable, VLLMEngine, VLLMSettings
from execrl.rollout.vllm_sync import SyncError

pytestmark = pytestmark_vllm


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return vllm_tiny_model()


@pytest.fixture(scope="module")
def engine(model: torch.nn.Module) -> Iterator[VLLMEngine]:
    settings = VLLMSettings(dtype="float32", bucket_mib=8)
    engine = VLLMEngine.for_model(model, default_tokenizer(), settings=settings)
    engine.sync_weights(model, 0)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    tokenizer = default_tokenizer()
    return [tokenizer.encode(text) for text in ("def fizzbuzz(n):", "Write a haiku about sandboxes.")]


def test_groups_come_back_prompt_major_with_the_models_log_probs(
    engine: VLLMEngine, model: torch.nn.Module, prompts: list[list[int]]
) -> None:
    params = SamplingParams(samples_per_prompt=4, max_new_tokens=12, temperature=1.0, ignore_eos=True)
    batch = engine.generate(prompts, params)
    assert batch.completion_ids.shape == (8, 12)
    assert batch.group_index.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert batch.finish_reasons == ("length",) * 8 and bool(batch.response_mask.all())
    assert len({tuple(r) for r in batch.completion_ids.tolist()}) > 1  # n samples, not one copy
    assert logprob_mismatch(model, batch) < 2e-3  # temperature-1 log-probs vs the HF model, fp32
    assert torch.equal(batch.logprobs, batch.sampling_logprobs)  # one distribution at temperature 1


def test_sampling_log_probs_follow_the_temperature(
    engine: VLLMEngine, model: torch.nn.Module, prompts: list[list[int]]
) -> None:
    """``sampling_logprobs`` are vLLM's processed log-probs: softmax(logits / T); the temperature-1 column is
    not computed at T != 1 (NaN on response tokens, never a stand-in)."""
    params = SamplingParams(samples_per_prompt=3, max_new_tokens=10, temperature=0.7, ignore_eos=True)
    batch = engine.generate(prompts, params)
    expected = teacher_forced_logprobs(model, batch, temperature=0.7)
    assert float((batch.sampling_logprobs - expected).abs().max()) < 2e-3
    assert bool(batch.logprobs[batch.response_mask].isnan().all())


def test_stop_token_and_stop_string_end_a_completion(engine: VLLMEngine, prompts: list[list[int]]) -> None:
    greedy = SamplingParams(samples_per_prompt=1, max_new_tokens=12, temperature=0.0, ignore_eos=True)
    free = engine.generate(prompts[:1], greedy).completion_token_ids(0)
    stop_id = free[3]
    first = free.index(stop_id)
    stopped = engine.generate(prompts[:1], dataclasses.replace(greedy, stop_token_ids=(stop_id,)))
    assert stopped.completion_token_ids(0) == free[: first + 1]  # the stop token is kept, then nothing
    assert stopped.finish_reasons == ("stop",)
    text = engine.generate(prompts[:1], greedy).texts[0]
    needle = text[len(text) // 2 : len(text) // 2 + 3]
    assert needle.strip(), text
    cut = engine.generate(prompts[:1], dataclasses.replace(greedy, stop_strings=(needle,)))
    assert needle in cut.texts[0] and cut.finish_reasons == ("stop",)
    assert len(cut.completion_token_ids(0)) < 12


def test_a_seeded_generate_reproduces_and_another_seed_differs(
    engine: VLLMEngine, prompts: list[list[int]]
) -> None:
    """What ``--resume`` on this engine relies on: a generate call run alone is a function of its seed and
    the weights (the engine reseeds its generator; vLLM's per-request seeds crash on CPU)."""
    params = SamplingParams(samples_per_prompt=4, max_new_tokens=16, temperature=1.0, ignore_eos=True, seed=7)
    one = engine.generate(prompts, params)
    engine.generate(prompts, dataclasses.replace(params, seed=99))  # the engine's RNG moves on in between
    two = engine.generate(prompts, params)
    other = engine.generate(prompts, dataclasses.replace(params, seed=8))
    assert torch.equal(one.completion_ids, two.completion_ids)
    assert torch.equal(one.sampling_logprobs, two.sampling_logprobs)
    assert not torch.equal(one.completion_ids, other.completion_ids)


def test_a_fresh_engine_reproduces_a_seeded_call(
    engine: VLLMEngine, model: torch.nn.Module, prompts: list[list[int]]
) -> None:
    """``--resume`` starts a new engine process and syncs the checkpoint's weights into it: a seeded call
    must then give the tokens the running engine gives (what makes a resumed run's rollouts the same)."""
    params = SamplingParams(samples_per_prompt=4, max_new_tokens=16, temperature=1.0, ignore_eos=True, seed=3)
    engine.sync_weights(model, 50)
    expected = engine.generate(prompts, params)
    fresh = VLLMEngine.for_model(model, default_tokenizer(), settings=engine.settings)
    try:
        fresh.sync_weights(model, 50)
        again = fresh.generate(prompts, params)
    finally:
        fresh.close()
    assert torch.equal(expected.completion_ids, again.completion_ids)
    assert torch.equal(expected.sampling_logprobs, again.sampling_logprobs)


def test_many_concurrent_single_sample_submits(engine: VLLMEngine) -> None:
    """Each episode's next turn, submitted as soon as it is ready: every call gets its own prompt's row."""
    tokenizer = default_tokenizer()
    turns = [tokenizer.encode(f"turn {i}: print({i} * {i})") for i in range(16)]
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=6, temperature=1.0, ignore_eos=True)
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = list(pool.map(lambda ids: engine.submit([ids], params), turns))
        batches = [f.result(timeout=120) for f in futures]
    for ids, batch in zip(turns, batches, strict=True):
        assert batch.prompt_token_ids == (tuple(ids),)
        assert batch.completion_ids.shape == (1, 6)


def test_a_sync_verifies_and_moves_the_engine(engine: VLLMEngine, model: torch.nn.Module) -> None:
    perturb(model, seed=1)
    report = engine.sync_weights(model, 1)
    total = sum(p.numel() * 4 for p in model.parameters())
    assert report.bytes == total and report.tensors == len(list(model.parameters()))
    assert report.buckets >= 2  # bucketed: a few flat buffers, not one call per tensor (nor one for all)
    assert report.probe_max_abs_diff < 2e-3 and report.probe_moved > 0.01
    assert set(report.metrics()) >= {"sync/s", "sync/verify_s", "sync/bytes"}


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("no_load", r"did not move although the weights sent changed: the sync moved nothing"),
        ("no_head_refresh", r"differ from the trainer's by .* stale or partial weights"),
        ("no_cache_reset", r"through the prefix cache .*: a stale prefix cache"),
    ],
)
def test_each_stale_engine_state_is_caught(
    engine: VLLMEngine, model: torch.nn.Module, fault: str, message: str
) -> None:
    """Regression guards for the bugs issue 37 names: a sync that moves nothing (vLLM's NCCL engine off
    CUDA, vllm#57022), the tied ``lm_head`` left stale by vLLM's CPU reload (0.12 off on SmolLM2), and the
    prefix cache still holding the old weights' keys/values. Each fault removes one fix in the engine; the
    sync must fail with one line, and the next sync without the fault must pass."""
    perturb(model, seed=10)
    engine.call("fault", names=[fault])
    try:
        with pytest.raises(SyncError, match=message) as caught:
            engine.sync_weights(model, 10)
        assert "\n" not in str(caught.value) and str(caught.value).startswith("sync v10")
    finally:
        engine.call("fault", names=[])
    assert engine.sync_weights(model, 11).probe_max_abs_diff < 2e-3


def test_a_partial_sync_is_caught(engine: VLLMEngine, model: torch.nn.Module) -> None:
    """A tensor that never reaches the engine: its old values stay, the probe shows it."""
    assert engine.sync is not None
    perturb(model, seed=20)
    engine.sync.drop_tensors = {"model.layers.1.mlp.down_proj.weight"}
    try:
        with pytest.raises(SyncError, match=r"sync v20 .* stale or partial weights"):
            engine.sync_weights(model, 20)
    finally:
        engine.sync.drop_tensors = set()
    engine.sync_weights(model, 21)


def test_a_bucket_changed_in_transit_is_named(engine: VLLMEngine, model: torch.nn.Module) -> None:
    assert engine.sync is not None
    perturb(model, seed=30)
    engine.sync.corrupt_bucket = 1
    try:
        with pytest.raises(
            SyncError, match=r"sync v30: bucket 1 \(.*\.\. .*\): checksum of the bytes received"
        ):
            engine.sync_weights(model, 30)
    finally:
        engine.sync.corrupt_bucket = None
    engine.sync_weights(model, 31)


def test_delta_sends_only_the_changed_engine_layers(engine: VLLMEngine, model: torch.nn.Module) -> None:
    engine.settings = dataclasses.replace(engine.settings, delta=True)
    try:
        engine.sync_weights(model, 40)  # the baseline the next ones compare with
        with torch.no_grad():
            model.model.layers[1].mlp.down_proj.weight.add_(0.05)
        report = engine.sync_weights(model, 41)
        assert (report.tensors, report.buckets) == (1, 1)
        assert report.skipped_tensors == len(list(model.parameters())) - 1
        with torch.no_grad():
            model.model.layers[0].self_attn.q_proj.weight.add_(0.05)
        assert engine.sync_weights(model, 42).tensors == 3  # q, k and v load into one fused qkv_proj
        unchanged = engine.sync_weights(model, 43)
        assert (unchanged.tensors, unchanged.bytes) == (0, 0)
    finally:
        engine.settings = dataclasses.replace(engine.settings, delta=False)


def test_a_failed_start_is_one_line_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Regression: a start the engine refuses left its working directory in /dev/shm. The error is one
    line that names the fix (``rollout.engine=hf``)."""
    model_dir = save_tiny(tmp_path / "tiny")
    before = set(glob.glob("/dev/shm/execrl-vllm-*"))
    settings = VLLMSettings(dtype="float32", max_model_len=1_000_000)  # beyond the model's context
    with pytest.raises(EngineUnavailable) as caught:
        VLLMEngine(
            model_dir, tokenizer=default_tokenizer(), eos_token_ids=[2], settings=settings, vocab_size=49152
        )
    assert "\n" not in str(caught.value) and "rollout.engine=hf" in str(caught.value)
    assert set(glob.glob("/dev/shm/execrl-vllm-*")) == before
