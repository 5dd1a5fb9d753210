"""The folded LoRA sampler (``execrl.trainer.lora_fold``, ``lora.fold_for_sampling``): it samples what the peft
model computes, follows every update, and is a pure function of the policy's weights (bit-exact resume).

Tolerance: the rollout's log-probs against the peft model's teacher-forced ones within ``TOL`` = 3e-4.
Float32 only: ``(W + sBA) x`` and ``W x + s B (A x)`` round one sum in another order; on this peaked tiny
model (|logits| up to ~20) the gap measured 3e-5 to 1.4e-4, against 2e-5 for the peft engine itself. The
"follows" tests make a large update, so a skipped refresh samples the old adapters and misses by > 1e-2.
"""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from execrl.components.setup import sampling_engine
from execrl.rollout import HFEngine, SamplingParams, logprob_mismatch
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.trainer import LoraSettings, TrainerConfig, build_optimizer, lora
from execrl.trainer.lora_fold import FoldedPolicy

SETTINGS = LoraSettings(rank=4, alpha=8)
PROMPTS = [[1, 40, 41, 42, 43, 44], [1, 50], [1, 9, 8, 7, 300, 301]]
SAMPLED = SamplingParams(samples_per_prompt=3, max_new_tokens=12, seed=5)
TOL = 3e-4


def _lora_model(seed: int = 0) -> PreTrainedModel:
    """A peaked tiny Llama (tied embeddings) with non-zero adapters (so they change the outputs)."""
    model = lora.add_adapters(tiny_model(seed=seed, init_std=0.5), SETTINGS)
    generator = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return model


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerBase:
    return default_tokenizer()


def _folded_engine(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, shared: bool = True
) -> HFEngine:
    engine = sampling_engine(
        "hf" if shared else "hf-generic", model=model, tokenizer=tokenizer, fold_adapters=True
    )
    assert isinstance(engine, HFEngine) and engine.model is not model and not lora.has_adapters(engine.model)
    return engine


def _big_update(model: PreTrainedModel) -> None:
    """Three steps of execrl's own optimizer (fused AdamW, which does not bump version counters)."""
    optimizer = build_optimizer(model, TrainerConfig(learning_rate=0.05))
    ids = torch.tensor([PROMPTS[0]])
    for _ in range(3):
        optimizer.zero_grad()
        model(ids).logits.logsumexp(-1).sum().backward()
        optimizer.step()


@pytest.mark.parametrize("shared", [True, False], ids=["cascade-attention-decode", "generic-decode"])
def test_the_folded_sampler_scores_with_the_peft_models_log_probs(tokenizer, shared: bool) -> None:  # type: ignore[no-untyped-def]
    model = _lora_model()
    engine = _folded_engine(model, tokenizer, shared)
    sampled = engine.generate(PROMPTS, SAMPLED)
    assert logprob_mismatch(model, sampled) < TOL  # the peft model's teacher-forced log-probs
    with lora.adapters_disabled(model):
        assert logprob_mismatch(model, sampled) > 1e-2  # the adapters matter here
    greedy = SamplingParams(samples_per_prompt=2, max_new_tokens=12, temperature=0.0)
    peft_greedy = HFEngine(model, tokenizer, shared_prompt_decode=shared).generate(PROMPTS, greedy)
    assert torch.equal(engine.generate(PROMPTS, greedy).completion_ids, peft_greedy.completion_ids)


def test_the_folded_sampler_follows_an_optimizer_step(tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = _lora_model()
    engine = _folded_engine(model, tokenizer)
    stale = engine.generate(PROMPTS, SAMPLED)
    _big_update(model)
    assert logprob_mismatch(model, stale) > 1e-2  # the update moved the policy: a stale fold would show it
    fresh = engine.generate(PROMPTS, SAMPLED)
    assert logprob_mismatch(model, fresh) < TOL


def test_a_skipped_refresh_would_be_caught(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The check above can fail: without the engine's hook the copy keeps the old adapters."""
    model = _lora_model()
    engine = _folded_engine(model, tokenizer)
    engine.generate(PROMPTS, SAMPLED)
    engine.before_generate = None
    _big_update(model)
    assert logprob_mismatch(model, engine.generate(PROMPTS, SAMPLED)) > 1e-2


def test_the_fold_is_the_merged_model_bit_for_bit_and_refolds_only_on_change() -> None:
    """A pure function of the policy's weights: loading a checkpoint's adapters (resume, a Ray weight
    version) refolds to exactly ``merged_copy``'s weights; an unchanged policy is not refolded."""
    model = _lora_model()
    folded = FoldedPolicy(model)
    assert folded.refresh() and not folded.refresh() and folded.folds == 1
    trained = _lora_model(seed=1)
    lora.load_adapter_state_dict(model, {k: v.clone() for k, v in lora.adapter_state_dict(trained).items()})
    assert folded.refresh()
    merged = dict(lora.merged_copy(model).named_parameters())
    for name, param in folded.model.named_parameters():
        assert torch.equal(param, merged[name]), name


def test_the_copy_shares_what_no_adapter_touches_and_leaves_the_policy_alone() -> None:
    model = _lora_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    folded = FoldedPolicy(model)
    plain = folded.model
    assert plain.model.embed_tokens.weight is model.model.embed_tokens.weight  # shared
    assert plain.lm_head.weight is plain.model.embed_tokens.weight  # the tie survives the copy
    folded.refresh()
    q_plain, q_peft = plain.model.layers[0].self_attn.q_proj, model.model.layers[0].self_attn.q_proj
    assert type(q_plain) is torch.nn.Linear and q_plain.weight is not q_peft.get_base_layer().weight
    assert not any(p.requires_grad for p in plain.parameters()) and not plain.training
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_without_fold_or_adapters_the_engine_samples_the_model_itself(tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = _lora_model()
    peft_engine = sampling_engine("hf", model=model, tokenizer=tokenizer, fold_adapters=False)
    assert isinstance(peft_engine, HFEngine) and peft_engine.model is model
    plain = tiny_model(seed=0)
    plain_engine = sampling_engine("hf", model=plain, tokenizer=tokenizer, fold_adapters=True)
    assert isinstance(plain_engine, HFEngine) and plain_engine.model is plain


def test_a_model_without_adapters_is_refused() -> None:
    with pytest.raises(ValueError, match="add_adapters first"):
        FoldedPolicy(tiny_model(seed=0))
