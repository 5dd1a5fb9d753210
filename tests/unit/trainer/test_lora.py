"""LoRA adapters (``execrl.trainer.lora``, peft underneath): what is trained, the reference, the merge, and
that every forward path of execrl applies the adapters.

The path test guards the one place adapters could silently go missing: ``rollout/shared_decode.py``
re-implements the Llama decoder layer's forward for cascade attention, and the trainer's shared-prompt
forward runs the trunk in two parts; a path that reached past a LoRA layer to the base weights would
sample or score with the base model while training the adapters. Each path must give the merged model's
log-probs, and the base model's must differ (else the adapters were zero and the test proves nothing).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from execrl.rollout import HFEngine, SamplingParams, logprob_mismatch
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.rollout.prefix_cache import PrefixCache
from execrl.trainer import (
    LoraSettings,
    TrainBatch,
    TrainerConfig,
    build_optimizer,
    compute_logprobs,
    load_checkpoint,
    lora,
    policy_update,
    prepare_batch,
    save_checkpoint,
)
from execrl.trainer.kl import kl_per_token

SETTINGS = LoraSettings(rank=4, alpha=8)
PROMPTS = [[1, 40, 41, 42, 43, 44], [1, 50], [1, 9, 8, 7, 300, 301]]


def _lora_model(seed: int = 0, settings: LoraSettings = SETTINGS, b_std: float = 0.3) -> PreTrainedModel:
    """A peaked tiny Llama (tied embeddings) with adapters whose B is non-zero (so they change outputs)."""
    model = lora.add_adapters(tiny_model(seed=seed, init_std=0.5), settings)
    generator = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * b_std)
    return model


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerBase:
    return default_tokenizer()


@pytest.fixture(scope="module")
def models() -> tuple[PreTrainedModel, PreTrainedModel, PreTrainedModel]:
    """(LoRA model, its merged copy, the base model)."""
    model = _lora_model()
    return model, lora.merged_copy(model), tiny_model(seed=0, init_std=0.5)


def test_only_the_adapters_train_and_the_optimizer_holds_nothing_else() -> None:
    model = lora.add_adapters(tiny_model(seed=0), SETTINGS)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # per layer: q (64->64), k and v (64->32), o (64->64), gate/up (64->128), down (128->64); r (in + out)
    per_layer = 4 * ((64 + 64) + 2 * (64 + 32) + (64 + 64) + 2 * (64 + 128) + (128 + 64))
    assert lora.trainable_parameter_count(model) == 2 * per_layer
    optimizer = build_optimizer(model, TrainerConfig())
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for n, p in model.named_parameters() if n in trainable}


def test_fresh_adapters_compute_exactly_the_base_model() -> None:
    """B starts at zero: the adapted model's base evaluation is the base model's, bit for bit."""
    ids = torch.tensor([PROMPTS[0]])
    with torch.no_grad():
        adapted = lora.add_adapters(tiny_model(seed=3), SETTINGS)(ids).logits
        base = tiny_model(seed=3)(ids).logits
    assert torch.equal(adapted, base)


def _shared_prompt_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two prompts x three samples, left-padded prompts, right-padded completions: [6, 10] each."""
    ids = torch.tensor([[0, 0, 1, 40, 41, 7, 8, 9, 10, 11]] * 3 + [[1, 9, 8, 7, 300, 5, 6, 12, 0, 0]] * 3)
    ids[1, 6:] = torch.tensor([20, 21, 22, 23])
    ids[4, 7:] = torch.tensor([30, 0, 0])
    attention = torch.ones_like(ids)
    attention[:3, :2] = 0
    attention[3:, 8:] = 0
    attention[4, 7:] = torch.tensor([1, 0, 0])
    response = torch.zeros_like(ids)
    response[:, 5:] = 1
    return ids, attention, response * attention


@pytest.mark.parametrize("share_prompt", [False, True], ids=["plain-trunk", "shared-prompt-trunk"])
def test_trainer_log_probs_are_the_merged_models(models, share_prompt: bool) -> None:  # type: ignore[no-untyped-def]
    model, merged, base = models
    ids, attention, response = _shared_prompt_batch()
    kwargs = {"token_mask": response, "temperature": 0.7, "share_prompt": share_prompt}
    with torch.no_grad():
        ours, _ = compute_logprobs(model, ids, attention, **kwargs)
        theirs, _ = compute_logprobs(merged, ids, attention, **kwargs)
        plain, _ = compute_logprobs(base, ids, attention, **kwargs)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    assert (ours - plain).abs().max() > 1e-2


@pytest.mark.parametrize("shared", [True, False], ids=["cascade-attention-decode", "generic-decode"])
def test_rollout_samples_and_scores_with_the_adapters(models, tokenizer, shared: bool) -> None:  # type: ignore[no-untyped-def]
    """Greedy decoding picks the merged model's tokens; sampled completions carry the merged model's
    log-probs (sampling itself may flip a token where float rounding moves a CDF boundary)."""
    model, merged, base = models
    engine = HFEngine(model, tokenizer, shared_prompt_decode=None if shared else False)
    assert engine.shared_prompt_decode is shared  # a LoRA Llama still takes the cascade-attention path
    greedy = SamplingParams(samples_per_prompt=2, max_new_tokens=12, temperature=0.0)
    ours = engine.generate(PROMPTS, greedy)
    theirs = HFEngine(merged, tokenizer, shared_prompt_decode=shared).generate(PROMPTS, greedy)
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    torch.testing.assert_close(ours.logprobs, theirs.logprobs, atol=1e-4, rtol=1e-5)
    sampled = engine.generate(PROMPTS, SamplingParams(samples_per_prompt=3, max_new_tokens=12, seed=5))
    assert logprob_mismatch(merged, sampled) < 1e-4  # the rollout's log-probs are the merged model's
    assert logprob_mismatch(base, sampled) > 1e-2


@pytest.mark.parametrize("shared", [True, False], ids=["cascade-attention-decode", "generic-decode"])
def test_a_continued_conversation_reuses_adapted_keys_and_values(models, tokenizer, shared: bool) -> None:  # type: ignore[no-untyped-def]
    """The multi-turn prefix cache stores keys/values computed with the adapters: turn 2 reusing them
    equals the merged model's turn 2."""
    model, merged, _ = models
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=6, temperature=0.0)
    turns = []
    for net in (model, merged):
        engine = HFEngine(net, tokenizer, shared_prompt_decode=shared, prefix_cache=PrefixCache())
        first = engine.generate(PROMPTS, params)
        contexts = [p + first.completion_token_ids(r) + [1, 77] for r, p in enumerate(PROMPTS)]
        second = engine.generate(contexts, params)
        assert second.stats.reused_prompt_tokens > 0
        turns.append(second)
    assert torch.equal(turns[0].completion_ids, turns[1].completion_ids)
    torch.testing.assert_close(turns[0].logprobs, turns[1].logprobs, atol=1e-4, rtol=1e-5)


def test_the_reference_is_the_same_model_with_its_adapters_off(models) -> None:  # type: ignore[no-untyped-def]
    """No second copy: ``ref_model`` is the policy, and its reference log-probs are the base model's; the
    adapters' ``requires_grad`` comes back after, and the KL in the loss is the usual k3 on those."""
    model, _, base = models
    ids, attention, response = _shared_prompt_batch()
    config = TrainerConfig(kl_coef=0.1, logprob_temperature=0.7)
    batch = TrainBatch(ids, attention, response, None, torch.tensor([1.0, -1.0, 0.5, -0.5, 0.2, -0.2]))
    prepared = prepare_batch(model, batch, config, ref_model=model)
    with torch.no_grad():
        base_logp, _ = compute_logprobs(base, ids, attention, token_mask=response, temperature=0.7)
    assert prepared.ref_logprobs is not None and prepared.old_logprobs is not None
    torch.testing.assert_close(prepared.ref_logprobs, base_logp, atol=1e-6, rtol=1e-6)
    assert (prepared.old_logprobs - prepared.ref_logprobs).abs().max() > 1e-2
    assert all(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)
    trained = copy.deepcopy(model)
    metrics = policy_update(trained, build_optimizer(trained, config), None, prepared, config)
    mask = prepared.response_mask
    expected = kl_per_token(prepared.old_logprobs, prepared.ref_logprobs, "k3")[mask].mean()
    assert metrics["loss/kl"] == pytest.approx(float(expected), rel=1e-5)  # ratio 1: old == current


def test_dropout_acts_in_the_gradient_passes_only() -> None:
    model = lora.add_adapters(tiny_model(seed=0), LoraSettings(rank=4, alpha=8, dropout=0.5))
    ids = torch.tensor([PROMPTS[0]])
    dropouts = [
        m for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout) and "lora_dropout" in n
    ]
    assert dropouts and not any(m.training for m in dropouts)  # injected in the model's eval mode
    with lora.adapter_dropout(model):
        assert all(m.training for m in dropouts)
    assert not any(m.training for m in dropouts)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model(ids).logits)


def test_bad_targets_are_refused_naming_the_models_layers() -> None:
    with pytest.raises(ValueError, match=r"\['qkv'\] match no module .*'down_proj'"):
        lora.add_adapters(tiny_model(seed=0), LoraSettings(target_modules=("q_proj", "qkv")))
    with pytest.raises(ValueError, match="ties its input embedding to its output head"):
        lora.add_adapters(tiny_model(seed=0), LoraSettings(target_modules=("q_proj", "lm_head")))


def test_merge_folds_the_adapters_and_leaves_the_model_plain(models) -> None:  # type: ignore[no-untyped-def]
    model, merged, _ = models
    assert not lora.has_adapters(merged) and lora.has_adapters(model)
    assert not any(".lora_" in n for n, _ in merged.named_parameters())
    assert merged.lm_head.weight is merged.model.embed_tokens.weight  # the tie survives the merge
    assert set(merged.state_dict()) == set(tiny_model(seed=0).state_dict())


def test_a_behaviour_copy_shares_the_frozen_base_and_copies_the_adapters(models) -> None:  # type: ignore[no-untyped-def]
    model, _, _ = models
    clone = lora.frozen_sharing_copy(model)
    pairs = list(zip(model.parameters(), clone.parameters(), strict=True))
    assert all((a is b) == (not a.requires_grad) for a, b in pairs)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_checkpoints_hold_the_adapters_only_and_resume_them(models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A LoRA checkpoint is a PEFT adapter directory: peft loads it onto the base model, and
    ``load_checkpoint`` restores the adapters (and a behaviour copy's) exactly."""
    from peft import PeftModel

    model, _, _ = models
    behaviour = lora.frozen_sharing_copy(model)
    path = save_checkpoint(tmp_path, step=0, model=model, extra_modules={"behaviour_policy": behaviour})
    assert not (path / "model.safetensors").exists()
    assert {"adapter_config.json", "adapter_model.safetensors", "behaviour_policy.safetensors"} <= {
        p.name for p in path.iterdir()
    }
    size = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    assert size < 2 * 4 * sum(p.numel() for n, p in model.named_parameters() if "lora_" in n) + 100_000
    fresh = lora.add_adapters(tiny_model(seed=0, init_std=0.5), SETTINGS)
    fresh_behaviour = lora.frozen_sharing_copy(fresh)
    load_checkpoint(path, fresh, extra_modules={"behaviour_policy": fresh_behaviour})
    ours, theirs = lora.adapter_state_dict(model), lora.adapter_state_dict(fresh)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert all(
        torch.equal(a, b) for a, b in zip(behaviour.parameters(), fresh_behaviour.parameters(), strict=True)
    )
    peft_model = PeftModel.from_pretrained(tiny_model(seed=0, init_std=0.5), str(path))
    ids = torch.tensor([PROMPTS[0]])
    with torch.no_grad():
        assert torch.equal(peft_model(ids).logits, model(ids).logits)
    with pytest.raises(FileNotFoundError, match="holds LoRA adapters"):
        load_checkpoint(path, tiny_model(seed=0))


def test_adapter_weights_of_another_rank_are_refused(models) -> None:  # type: ignore[no-untyped-def]
    model, _, _ = models
    other = lora.add_adapters(tiny_model(seed=0), LoraSettings(rank=8, alpha=8))
    with pytest.raises(ValueError, match="another lora.rank"):
        lora.load_adapter_state_dict(other, lora.adapter_state_dict(model))
    with pytest.raises(ValueError, match="missing"):
        lora.load_adapter_state_dict(other, {})
