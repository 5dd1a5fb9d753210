"""Multi-turn token ids: turn-by-turn equals whole-conversation tokenisation (verl #3960), the model's
sampled ids are kept as sampled, and the training batch masks everything but the model's tokens."""

from __future__ import annotations

import pytest
import torch
from execrl.refine.multiturn import Episode, episodes_to_train_batch, feedback_ids, turn_content

from execrl.rollout.models import default_tokenizer


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return default_tokenizer()


def _whole(tokenizer, messages):  # type: ignore[no-untyped-def]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_turn_by_turn_equals_whole_conversation(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Guards against token drift between turns (verl #3960): the context after each feedback message is
    exactly the template's tokenisation of the whole conversation so far."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns = [
        "```python\ndef f(x):\n    return x + 1\n```",
        "Fixed:\n```python\ndef f(x):\n    return 2*x\n```",
    ]
    feedback = ["Your code failed 1 of 1 tests:\n- example_0:\n    got: 3", "Still wrong: got 4 for f(2)."]
    messages = [{"role": "user", "content": "Write f(x) = 2x."}]
    ids = _whole(tokenizer, messages)
    for answer, note in zip(turns, feedback, strict=True):
        sampled = list(tokenizer(answer, add_special_tokens=False)["input_ids"]) + [end]  # as the model emits
        ids += sampled
        messages.append({"role": "assistant", "content": answer})
        ids += feedback_ids(tokenizer, ids, messages, note)
        messages.append({"role": "user", "content": note})
        assert ids == _whole(tokenizer, messages)


def test_truncated_turn_without_eos_is_closed_by_the_template(tokenizer) -> None:  # type: ignore[no-untyped-def]
    messages = [{"role": "user", "content": "Write f."}]
    ids = _whole(tokenizer, messages) + list(
        tokenizer("def f(x):\n    return", add_special_tokens=False)["input_ids"]
    )
    messages.append({"role": "assistant", "content": "def f(x):\n    return"})
    ids += feedback_ids(tokenizer, ids, messages, "No code block was found.")
    messages.append({"role": "user", "content": "No code block was found."})
    assert ids == _whole(tokenizer, messages)


def test_sampled_ids_are_kept_even_when_not_canonical(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A model may emit 'ab' as two tokens where the tokenizer would use one; the context keeps them."""
    messages = [{"role": "user", "content": "Say hello."}]
    prompt = _whole(tokenizer, messages)
    pieces = [tokenizer.convert_tokens_to_ids(c) for c in ("h", "e", "l", "l", "o")]
    assert pieces != list(tokenizer("hello", add_special_tokens=False)["input_ids"])  # really non-canonical
    ids = prompt + pieces + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    messages.append({"role": "assistant", "content": "hello"})
    extra = feedback_ids(tokenizer, ids, messages, "again")
    assert (ids + extra)[: len(ids)] == ids
    assert tokenizer.decode(ids + extra) == tokenizer.apply_chat_template(
        [*messages, {"role": "user", "content": "again"}], tokenize=False, add_generation_prompt=True
    )


@pytest.mark.parametrize("closed", [True, False])
def test_turn_with_a_special_token_mid_turn_still_extends_the_context(tokenizer, closed: bool) -> None:  # type: ignore[no-untyped-def]
    """Regression: the multi-turn recipe crashed ("the chat template does not extend the conversation")
    when a trained tiny model emitted ``<|endoftext|>`` mid-turn: the assistant message was the engine's
    text, which drops special tokens, so it rendered shorter than the context. ``turn_content`` keeps
    them (and leaves out only the closing end-of-turn token, which the template writes)."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    special = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    messages = [{"role": "user", "content": "Write some words."}]
    ids = _whole(tokenizer, messages)
    sampled = [*tokenizer(" Newman", add_special_tokens=False)["input_ids"], special,
               *tokenizer(" stresses", add_special_tokens=False)["input_ids"], *([end] if closed else [])]  # fmt: skip
    content = turn_content(tokenizer, sampled)
    assert content == " Newman<|endoftext|> stresses"
    ids += sampled
    messages.append({"role": "assistant", "content": content})
    ids += feedback_ids(tokenizer, ids, messages, "Try again.")
    messages.append({"role": "user", "content": "Try again."})
    assert ids == _whole(tokenizer, messages)


def test_train_batch_loss_mask_covers_only_model_tokens() -> None:
    a = Episode(0, [], [5, 6, 7, 8, 9, 10], [False, False, True, False, True, True])
    b = Episode(0, [], [5, 6, 7], [False, True, True], valid=False)
    batch = episodes_to_train_batch([a, b], torch.tensor([1.0, -1.0]), pad_token_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9, 10], [0, 0, 0, 5, 6, 7]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]]
    assert batch.response_mask.tolist() == [[0, 0, 1, 0, 1, 1], [0, 0, 0, 0, 1, 1]]
    assert batch.valid is not None and batch.valid.tolist() == [True, False]
    assert batch.old_logprobs is None  # recomputed by the trainer (on-policy)
