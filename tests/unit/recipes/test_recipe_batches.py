"""``recipes.batch``: a scored rollout -> ``TrainBatch`` (left-padded prompts), and the generation/training
log-prob gap."""

from __future__ import annotations

import torch
from fakes import PAD, _rollout

from execrl.recipes.batch import to_train_batch, trainer_logprob_gap


def test_train_batch_left_pads_prompts_and_aligns_completions() -> None:
    rollout = _rollout([[5, 6, 7], [8]], [[11, 12], [13], [14, 15], [16]], samples=2)
    batch = to_train_batch(
        rollout,
        torch.tensor([1.0, -1.0, 0.5, -0.5]),
        torch.ones(4, dtype=torch.bool),
        old_logprobs_from_rollout=True,
    )
    assert batch.input_ids.tolist() == [
        [5, 6, 7, 11, 12],
        [5, 6, 7, 13, PAD],
        [PAD, PAD, 8, 14, 15],
        [PAD, PAD, 8, 16, PAD],
    ]
    assert batch.attention_mask.tolist() == [
        [1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
        [0, 0, 1, 1, 0],
    ]
    assert batch.response_mask.tolist() == [
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 0],
    ]
    assert batch.old_logprobs is not None and batch.old_logprobs[0, 3:].tolist() == [-0.5, -1.0]


def test_trainer_and_rollout_log_probs_agree_and_a_changed_model_shows() -> None:
    """Generation (KV cache, left padding) and the trainer's teacher-forced pass must give one log-prob."""
    from execrl.rollout import SamplingParams, create_engine, encode_prompts
    from execrl.rollout.models import default_tokenizer, tiny_model

    model, tokenizer = tiny_model(seed=3, init_std=0.3), default_tokenizer()
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    for temperature in (1.0, 0.7):
        rollout = engine.generate(
            encode_prompts(tokenizer, ["Hi", "A longer prompt, with more tokens."]),
            SamplingParams(samples_per_prompt=3, max_new_tokens=6, temperature=temperature),
        )
        batch = to_train_batch(
            rollout, torch.zeros(6), torch.ones(6, dtype=torch.bool), old_logprobs_from_rollout=True
        )
        assert trainer_logprob_gap(model, batch, rollout, rows=6, temperature=temperature) < 1e-4
    other = tiny_model(seed=4, init_std=0.3)
    assert trainer_logprob_gap(other, batch, rollout, rows=6, temperature=0.7) > 1e-2
