"""HFEngine correctness on tiny random Llamas: equivalence with transformers, log-probs, groups, stopping."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hf_reference import hf_greedy
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from execrl.rollout import (
    HFEngine,
    SamplingParams,
    create_engine,
    logprob_mismatch,
    register_engine,
    teacher_forced_logprobs,
)
from execrl.rollout.models import tiny_model

# Different lengths so the batch is left-padded; ids are plain vocabulary tokens.
PROMPTS = [[1, 504, 2330, 17, 905], [1, 3300], [1, 88, 7123, 4410, 61, 9, 1250, 33], [1, 640, 12]]


def _engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> HFEngine:
    return HFEngine(model, tokenizer)


def test_greedy_matches_transformers_generate_token_for_token(
    peaked_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(peaked_model, tokenizer)
    batch = engine.generate(PROMPTS, SamplingParams(samples_per_prompt=1, max_new_tokens=12, temperature=0.0))
    reference = hf_greedy(
        peaked_model, engine, PROMPTS, max_new_tokens=12, eos_token_ids=engine.eos_token_ids
    )
    for row in range(len(PROMPTS)):
        ours = batch.completion_token_ids(row)
        assert ours == reference[row, : len(ours)].tolist()
        assert len(ours) == 12 or ours[-1] in engine.eos_token_ids


def test_padding_does_not_change_a_prompts_completion(
    peaked_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(peaked_model, tokenizer)
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=8, temperature=0.0)
    together = engine.generate(PROMPTS, params)
    alone = engine.generate([PROMPTS[1]], params)
    assert together.completion_token_ids(1) == alone.completion_token_ids(0)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(samples_per_prompt=4, max_new_tokens=10, seed=5),
        SamplingParams(samples_per_prompt=3, max_new_tokens=10, temperature=0.7, top_k=50, top_p=0.9, seed=6),
    ],
)
def test_rollout_logprobs_match_teacher_forced_forward(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, params: SamplingParams
) -> None:
    batch = _engine(flat_model, tokenizer).generate(PROMPTS, params)
    assert logprob_mismatch(flat_model, batch) < 1e-4


def test_sampling_logprobs_match_tempered_teacher_forcing_without_truncation(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    params = SamplingParams(samples_per_prompt=2, max_new_tokens=6, temperature=0.6, seed=8)
    batch = HFEngine(flat_model, tokenizer).generate(PROMPTS, params)
    tempered = teacher_forced_logprobs(flat_model, batch, temperature=0.6)
    assert (tempered - batch.sampling_logprobs).abs().max() < 1e-4
    assert (tempered - batch.logprobs).abs().max() > 1e-3  # the two columns really differ at T != 1


def test_logprob_mismatch_detects_a_changed_model(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = _engine(flat_model, tokenizer).generate(
        PROMPTS, SamplingParams(samples_per_prompt=2, max_new_tokens=6)
    )
    assert logprob_mismatch(tiny_model(seed=7, init_std=0.3), batch) > 1e-2


# A 64-token vocabulary makes stop tokens frequent, so rows finish at many different steps and the
# engine drops them from the batch and the KV cache while the others continue.
SMALL_PROMPTS = [[1, 40, 41, 42, 43, 44], [1, 50], [1, 9, 8, 7], [1, 30, 31, 32, 33, 34, 35, 36, 37]]
FREQUENT_STOPS = (5, 6, 7, 8, 9)


def test_rows_finishing_at_different_steps_keep_exact_logprobs(tokenizer: PreTrainedTokenizerBase) -> None:
    model = tiny_model(vocab_size=64, seed=3, init_std=0.1)
    batch = HFEngine(model, tokenizer).generate(
        SMALL_PROMPTS, SamplingParams(samples_per_prompt=6, max_new_tokens=24, stop_token_ids=FREQUENT_STOPS)
    )
    lengths = batch.completion_lengths.tolist()
    assert len(set(lengths)) >= 5, lengths  # many distinct finishing steps
    assert logprob_mismatch(model, batch) < 1e-4


def test_greedy_with_early_stops_matches_transformers_generate(tokenizer: PreTrainedTokenizerBase) -> None:
    model = tiny_model(vocab_size=64, seed=4, init_std=0.5)
    engine = HFEngine(model, tokenizer)
    stops = list(FREQUENT_STOPS)
    batch = engine.generate(
        SMALL_PROMPTS,
        SamplingParams(
            samples_per_prompt=1, max_new_tokens=20, temperature=0.0, stop_token_ids=FREQUENT_STOPS
        ),
    )
    eos = sorted(set(engine.eos_token_ids) | set(stops))
    reference = hf_greedy(model, engine, SMALL_PROMPTS, max_new_tokens=20, eos_token_ids=eos)
    assert "stop" in batch.finish_reasons
    for row in range(len(SMALL_PROMPTS)):
        ours = batch.completion_token_ids(row)
        assert ours == reference[row, : len(ours)].tolist()


def test_group_samples_do_not_all_share_the_first_token(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Regression guard: a shared-prefix-cache bug makes every sample of a group copy one draw."""
    batch = _engine(flat_model, tokenizer).generate(
        PROMPTS, SamplingParams(samples_per_prompt=8, max_new_tokens=2)
    )
    first = batch.completion_ids[:, 0].view(len(PROMPTS), 8)  # [P, G]
    for group in first.tolist():
        assert len(set(group)) > 1


def test_same_seed_reproduces_and_other_seed_differs(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(flat_model, tokenizer)
    first = engine.generate(PROMPTS, SamplingParams(samples_per_prompt=2, max_new_tokens=8, seed=11))
    again = engine.generate(PROMPTS, SamplingParams(samples_per_prompt=2, max_new_tokens=8, seed=11))
    other = engine.generate(PROMPTS, SamplingParams(samples_per_prompt=2, max_new_tokens=8, seed=12))
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert torch.equal(first.logprobs, again.logprobs)
    assert not torch.equal(first.completion_ids, other.completion_ids)


def test_max_new_tokens_gives_length_finish_and_full_masks(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = _engine(flat_model, tokenizer).generate(
        PROMPTS, SamplingParams(samples_per_prompt=2, max_new_tokens=5, ignore_eos=True)
    )
    assert batch.completion_ids.shape == (8, 5)
    assert batch.finish_reasons == ("length",) * 8
    assert batch.response_mask.all()
    assert batch.group_index.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert batch.stats.generated_tokens == 40 and batch.stats.decode_steps == 5


def test_stop_token_ends_only_that_row_and_is_kept(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(flat_model, tokenizer)
    free = engine.generate([PROMPTS[0]], SamplingParams(samples_per_prompt=1, max_new_tokens=8, seed=2))
    stop_token = free.completion_token_ids(0)[3]
    stopped = engine.generate(
        [PROMPTS[0]],
        SamplingParams(samples_per_prompt=1, max_new_tokens=8, seed=2, stop_token_ids=(stop_token,)),
    )
    tokens = stopped.completion_token_ids(0)
    assert tokens == free.completion_token_ids(0)[: tokens.index(stop_token) + 1]
    assert tokens[-1] == stop_token and stopped.finish_reasons == ("stop",)


def test_finished_rows_are_padded_and_masked(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(flat_model, tokenizer)
    params = SamplingParams(samples_per_prompt=4, max_new_tokens=6, seed=4)
    free = engine.generate([PROMPTS[2]], params)
    stop_token = free.completion_ids[0, 1].item()  # row 0 stops at step 1; others may run on
    batch = engine.generate(
        [PROMPTS[2]], SamplingParams(**{**params.__dict__, "stop_token_ids": (stop_token,)})
    )
    assert batch.finish_reasons[0] == "stop"
    assert batch.response_mask[0].tolist()[:2] == [True, True]
    assert batch.response_mask[0, 2:].sum() == 0
    assert (batch.completion_ids[0, 2:] == engine.pad_token_id).all()
    assert (batch.logprobs[0, 2:] == 0).all()
    assert logprob_mismatch(flat_model, batch) < 1e-4


def test_stop_string_ends_the_completion(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    engine = _engine(flat_model, tokenizer)
    params = SamplingParams(samples_per_prompt=1, max_new_tokens=10, seed=9)
    free = engine.generate([PROMPTS[3]], params)
    tokens = free.completion_token_ids(0)
    stop = tokenizer.decode(tokens[4:6]).strip()[:4] or tokenizer.decode(tokens[5:6])
    assert stop, "the random model produced only whitespace; pick another seed"
    stopped = engine.generate([PROMPTS[3]], SamplingParams(**{**params.__dict__, "stop_strings": (stop,)}))
    kept = stopped.completion_token_ids(0)
    assert kept == tokens[: len(kept)]
    assert stop in tokenizer.decode(kept) and stop not in tokenizer.decode(kept[:-1])
    assert stopped.finish_reasons == ("stop",)


def test_texts_are_decoded_completions(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    batch = _engine(flat_model, tokenizer).generate(
        PROMPTS[:1], SamplingParams(samples_per_prompt=2, max_new_tokens=4)
    )
    assert batch.texts[1] == tokenizer.decode(batch.completion_token_ids(1), skip_special_tokens=True)


def test_generate_restores_training_mode(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    flat_model.train()
    try:
        _engine(flat_model, tokenizer).generate(
            PROMPTS[:1], SamplingParams(samples_per_prompt=1, max_new_tokens=2)
        )
        assert flat_model.training
    finally:
        flat_model.eval()


def test_eos_ids_include_im_end(flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in _engine(flat_model, tokenizer).eos_token_ids


@pytest.mark.parametrize(
    ("prompts", "error"),
    [
        ([], "non-empty list"),
        ([[]], "prompt 0 is empty"),
        (["text"], "encode it first"),
        ([[1, 10**9]], "outside"),
    ],
)
def test_bad_prompts_are_rejected(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: list, error: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        _engine(flat_model, tokenizer).generate(prompts, SamplingParams())


def test_engine_registry(
    flat_model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from execrl.rollout.vllm_engine import EngineUnavailable

    assert isinstance(create_engine("hf", model=flat_model, tokenizer=tokenizer), HFEngine)
    generic = create_engine("hf-generic", model=flat_model, tokenizer=tokenizer)
    assert isinstance(generic, HFEngine) and generic.shared_prompt_decode is False
    with pytest.raises(
        ValueError, match=r"unknown rollout engine 'nope'; known engines: hf, hf-generic, vllm"
    ):
        create_engine("nope", model=flat_model, tokenizer=tokenizer)
    monkeypatch.setenv("EXECRL_VLLM_PYTHON", str(tmp_path / "no-venv" / "python"))
    with pytest.raises(EngineUnavailable, match=r"scripts/setup.sh --vllm.*or use rollout.engine=hf"):
        create_engine("vllm", model=flat_model, tokenizer=tokenizer)  # no engine venv: one line, how to fix
    with pytest.raises(ValueError, match="already registered"):
        register_engine("hf")(lambda model, tokenizer: HFEngine(model, tokenizer))


def test_batch_tensors_are_usable_in_autograd(
    flat_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Regression guard: tensors created under torch.inference_mode cannot be saved for backward."""
    batch = HFEngine(flat_model, tokenizer).generate(
        PROMPTS[:2], SamplingParams(samples_per_prompt=2, max_new_tokens=3)
    )
    for tensor in (batch.completion_ids, batch.logprobs, batch.sampling_logprobs, batch.response_mask):
        assert not tensor.is_inference()
    weight = torch.ones(1, requires_grad=True)
    (torch.exp(weight * batch.logprobs) * batch.logprobs).sum().backward()
    assert weight.grad is not None
