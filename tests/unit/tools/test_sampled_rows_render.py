"""Rejection sampling's rows render as their episodes: tool episodes sampled through the one rollout loop
(``run_episodes``, the ``tools`` environment, a scripted engine, a real sandbox session), the passing ones
selected by ``recipes/sample.py``, and each kept row rendered by ``execrl sft``'s renderer gives its episode's
ids and loss mask token for token; the failing and malformed samples are not kept."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_engine import ScriptedEngine

from execrl.episodes import LocalBackend, run_episodes
from execrl.recipes.sample import select_rows, tool_row_parts
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import SamplingParams
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks.schema import MathSpec, Task, TaskMetadata
from execrl.tools import ToolConfig, ToolEnvironment
from execrl.tools.calls import call_text, python_block_text
from execrl.tools.render import render_conversation


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def _script(call_format: str) -> Any:
    """Turn 0 cycles over: a good call, a wrong direct answer, a malformed call; then answers from what came
    back (the right answer after a tool answer with the value, or after the error)."""
    write = (lambda c: call_text("python", {"code": c})) if call_format == "hermes" else python_block_text
    bad = "<tool_call>\n{not json\n</tool_call>" if call_format == "hermes" else "```python\n\n```\n"
    first = itertools.cycle(["Let me compute.\n" + write("print(6 * 7 * 11)"), "The answer is 461.", bad])

    def script(turn: int, _context: str) -> str:
        return next(first) if turn == 0 else "The answer is 462."

    return script


@pytest.mark.parametrize("call_format", ["hermes", "python_block"])
def test_kept_rows_render_to_their_episodes_and_only_passing_ones_are_kept(sandbox, call_format) -> None:  # type: ignore[no-untyped-def]
    tokenizer = default_tokenizer()
    task = Task(id="t/0", domain="math", prompt="What is 6 * 7 * 11?", spec=MathSpec(answer="462"),
                metadata=TaskMetadata(family="tools", split="train"))  # fmt: skip
    config = ToolConfig(call_format=call_format)  # type: ignore[arg-type]
    environment = ToolEnvironment(sandbox, config)
    backend = LocalBackend(ScriptedEngine(tokenizer, _script(call_format)), tokenizer)
    result = run_episodes(environment, backend, [task], max_episode_tokens=config.max_episode_tokens,
                          params=SamplingParams(samples_per_prompt=6, max_new_tokens=128))  # fmt: skip
    episodes = list(result.episodes)
    assert [e.passed for e in episodes] == [True, False, True] * 2
    done = select_rows(episodes, [task], suite="s", **tool_row_parts(environment, backend, [task]))
    assert done.counts == {"t/0": {"samples": 6, "passed": 2, "kept": 1}}  # samples 0 and 3: one row
    [row] = done.rows
    assert row["metadata"]["sample"] == 0
    rendered = render_conversation(tokenizer, row["messages"], tools=row["tools"], call_format=call_format)
    assert rendered.token_ids == episodes[0].token_ids
    assert rendered.loss_mask == episodes[0].loss_mask
