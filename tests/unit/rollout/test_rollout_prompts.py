"""encode_prompts: chat template with the generation prompt, message validation."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerBase

from execrl.rollout import encode_prompts


def test_string_prompt_becomes_user_turn_with_generation_prompt(tokenizer: PreTrainedTokenizerBase) -> None:
    [ids] = encode_prompts(tokenizer, ["Add 2 and 3."])
    text = tokenizer.decode(ids)
    assert text.endswith("<|im_start|>user\nAdd 2 and 3.<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n")  # SmolLM2's template adds its default system turn
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3


def test_message_list_is_used_as_given(tokenizer: PreTrainedTokenizerBase) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    [ids] = encode_prompts(tokenizer, [messages])
    expected = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.decode(ids) == expected


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        ([], "empty message list"),
        ([{"role": "user"}], "keys 'role' and 'content'"),
        ([{"role": "robot", "content": "x"}], "role must be one of"),
    ],
)
def test_malformed_messages_are_rejected(
    tokenizer: PreTrainedTokenizerBase, prompt: list, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        encode_prompts(tokenizer, [prompt])
