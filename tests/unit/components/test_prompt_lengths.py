"""The prompt-length cap's setup (``execrl.components.prompt_lengths``): prompts counted as the rollout
encodes them, the context bound next to the largest completion cap, the start log, and the config checks."""

from __future__ import annotations

import logging

import pytest

from execrl.components.prompt_lengths import (
    context_prompt_cap,
    largest_completion_cap,
    prompt_token_counts,
    run_prompt_stages,
)
from execrl.config import ConfigError, load_config
from execrl.rollout.models import default_tokenizer
from execrl.rollout.prompts import encode_prompts
from execrl.tasks.schema import ChatMessage, MathSpec, Task, TaskMetadata, prompt_for_chat


def _task(task_id: str, words: int) -> Task:
    return Task(
        id=task_id,
        domain="math",
        prompt=(ChatMessage(role="user", content="word " * words),),
        spec=MathSpec(answer="0"),
        metadata=TaskMetadata(family="f", split="train"),  # type: ignore[arg-type]
    )


def test_prompts_are_counted_as_the_rollout_encodes_them() -> None:
    tokenizer = default_tokenizer()
    tasks = [_task("a", 3), _task("b", 300)]
    counts = prompt_token_counts(tokenizer, {"s": tasks})
    expected = [len(ids) for ids in encode_prompts(tokenizer, [prompt_for_chat(t.prompt) for t in tasks])]
    assert [counts["a"], counts["b"]] == expected
    assert counts["b"] - counts["a"] == 297  # "word " is one token each; the chat template is the rest


def test_the_context_bound_leaves_room_for_the_largest_completion_cap() -> None:
    plain = load_config(None, ["rollout.max_new_tokens=96"])
    assert context_prompt_cap(plain, 8192) == 8096 and context_prompt_cap(plain, 0) == 0
    staged = load_config(None, ["rollout.max_new_tokens_stages=[[0, 96], [5, 1024]]"])
    assert largest_completion_cap(staged) == 1024
    rising = load_config(
        None,
        ["rollout.max_new_tokens=64", "rollout.length_rise_factor=2", "rollout.length_rise_max_tokens=4096"],
    )
    assert context_prompt_cap(rising, 8192) == 4096
    with pytest.raises(ValueError, match="leaves no room for a prompt in the model's context of 1024"):
        context_prompt_cap(staged, 1024)


def test_the_start_log_names_what_each_stage_leaves_out(caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = default_tokenizer()
    suites = {"s": [_task("a", 3), _task("b", 300), _task("c", 5)]}
    # tasks.suites is checked against the registry at load: put the in-memory suite in after loading
    base = load_config(None, ["rollout.max_prompt_tokens=100", "rollout.max_prompt_tokens_stages=[[4, 0]]"])
    config = base.model_copy(update={"tasks": base.tasks.model_copy(update={"suites": {"s": 1.0}})})
    with caplog.at_level(logging.INFO, logger="execrl.train"):
        stages = run_prompt_stages(config, suites, tokenizer, context_tokens=500)
    assert [(s.from_step, s.cap, dict(s.excluded)) for s in stages] == [
        (0, 100, {"s": 1}),
        (4, 404, {"s": 0}),
    ]
    lines = [r.getMessage() for r in caplog.records]
    assert (
        lines[0] == "prompt cap from step 0: 100 tokens (context bound 404); tasks over it, not drawn: s: 1/3"
    )
    assert caplog.records[0].levelno == logging.WARNING and caplog.records[1].levelno == logging.INFO


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["rollout.max_prompt_tokens_stages=[[3, 20], [3, 30]]"], "strictly increase"),
        (["rollout.max_prompt_tokens_stages=[[0, -2]]"], "max_prompt_tokens >= 0"),
        (["rollout.max_prompt_tokens=64", "refine.max_turns=2"], "prompt-length cap"),
        (["rollout.max_prompt_tokens_stages=[[0, 64]]", "tools.enabled=true"], "prompt-length cap"),
    ],
)
def test_prompt_cap_settings_are_checked_at_load(overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)
    config = load_config(None, ["rollout.max_prompt_tokens_stages=[[0, 2048], [10, 8192]]"])
    assert config.rollout.max_prompt_tokens_stages == [(0, 2048), (10, 8192)]
    assert load_config(None, ["scheduler.mode=adaptive", "rollout.max_prompt_tokens_stages=[[5, 64]]"])
