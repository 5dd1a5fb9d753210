"""Tool episodes (the ``tools`` environment in the one rollout loop) on a scripted engine and a real sandbox
session: malformed calls answered and counted, tool output masked and cut by tokens, ids exact across
turns, budgets and the call cap."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import torch
from scripted_engine import ScriptedEngine

from execrl.episodes import LocalBackend, episodes_to_batch, run_episodes
from execrl.rollout.models import default_tokenizer
from execrl.rollout.prompts import render_chat
from execrl.rollout.types import SamplingParams
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks.schema import ChatMessage, MathSpec, SessionSpec, Task, TaskMetadata
from execrl.tools import ToolConfig, ToolEnvironment, tool_metrics


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return default_tokenizer()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


def _task(session: SessionSpec | None = None) -> Task:
    return Task(
        id="t/0", domain="math", prompt=(ChatMessage(role="user", content="What is 6 * 7 * 11?"),),
        spec=MathSpec(answer="462"), metadata=TaskMetadata(family="tools", split="test"), session=session,
    )  # fmt: skip


def _call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def _run(tokenizer, sandbox, turns: list[str], task: Task | None = None, samples: int = 1, **config):  # type: ignore[no-untyped-def]
    engine = ScriptedEngine(tokenizer, lambda turn, _context: turns[min(turn, len(turns) - 1)])
    tools = ToolConfig(**config)
    result = run_episodes(
        ToolEnvironment(sandbox, tools), LocalBackend(engine, tokenizer), [task or _task()],
        params=SamplingParams(samples_per_prompt=samples, max_new_tokens=tools.max_turn_tokens),
        max_episode_tokens=tools.max_episode_tokens,
    )  # fmt: skip
    return engine, list(result.episodes)


def _n(e, name: str) -> int:  # type: ignore[no-untyped-def]
    return int(e.info.get(name, 0))


def _tool_messages(episode) -> list[str]:  # type: ignore[no-untyped-def]
    return [m["content"] for m in episode.messages if m["role"] == "tool"]


def test_malformed_calls_are_answered_with_structured_errors_and_counted(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """Guards against verl's behaviour (#3070, #7177): a malformed call ended the episode silently."""
    turns = [
        "<tool_call>{not json</tool_call>",
        _call("shell", cmd="ls"),
        _call("python", cod="1"),
        _call("python", code="x = 6 * 7\nx * 11"),
        "The answer is 462.",
    ]
    _, [e] = _run(tokenizer, sandbox, turns, max_tool_calls=5)
    answers = _tool_messages(e)
    kinds = [json.loads(a.split("\n")[1])["error"]["type"] for a in answers[:3]]
    assert kinds == ["bad_json", "unknown_tool", "bad_arguments"]
    assert "available tools: python" in answers[1] and "missing required argument 'code'" in answers[2]
    assert "Out: 462" in answers[3]
    assert (_n(e, "tool_calls"), _n(e, "parse_errors"), e.stop, e.passed, e.reward) == (
        4,
        3,
        "answer",
        True,
        1.0,
    )
    assert tool_metrics([e], step_s=1.0)["tools/parse_error_rate"] == pytest.approx(3 / 4)


def test_parse_error_penalty_is_subtracted_per_malformed_call(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    _, [e] = _run(
        tokenizer, sandbox, ["<tool_call>[1]</tool_call>", "The answer is 462."], parse_error_penalty=0.25
    )
    assert (_n(e, "parse_errors"), e.passed, e.reward) == (1, True, 0.75)


def test_ids_are_exact_over_five_turns_and_tool_tokens_are_masked(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    """Guards against re-tokenisation drift (verl #3960, trl #5144): every context the engine is sent is
    the template's tokenisation of the whole conversation so far, the model's turns are kept as sampled,
    and only they are in the loss."""
    turns = [_call("python", code=f"v{i} = {i} * 7\nprint(v{i})") for i in range(4)] + ["The answer is 462."]
    engine, [e] = _run(tokenizer, sandbox, turns, max_tool_calls=4)
    assert len(e.turns) == 5 and _n(e, "tool_calls") == 4 and e.passed
    assert len(engine.prompts) == 5
    base = 2  # the system message (the Hermes tool block: SmolLM2's template renders no tools) and the user's
    assert e.messages[0]["role"] == "system" and "<tools>" in e.messages[0]["content"]
    for k, prompt in enumerate(engine.prompts):
        whole = render_chat(tokenizer, e.messages[: base + 2 * k], generation_prompt=True)
        assert prompt == list(tokenizer(whole, add_special_tokens=False)["input_ids"])
        assert list(e.token_ids[: len(prompt)]) == prompt
    # The mask is True exactly on the tokens the engine returned, nowhere in tool answers.
    sampled = sum(len(ids) for ids in _turn_ids(engine, e))
    assert sum(e.loss_mask) == sampled == e.model_tokens
    masked_text = tokenizer.decode([t for t, m in zip(e.token_ids, e.loss_mask, strict=True) if not m])
    assert masked_text.count("<tool_response>") == 4 and "print(v0)" not in masked_text
    batch = episodes_to_batch([e], torch.zeros(1), torch.ones(1, dtype=torch.bool), pad_token_id=0,
                              old_logprobs_from_rollout=False)  # fmt: skip
    assert int(batch.response_mask.sum()) == sampled


def _turn_ids(engine: ScriptedEngine, e) -> list[list[int]]:  # type: ignore[no-untyped-def]
    bounds = [len(p) for p in engine.prompts[1:]] + [len(e.token_ids)]
    out, start = [], len(engine.prompts[0])
    for k, end in enumerate(bounds):
        turn = [t for t, m in zip(e.token_ids[start:end], e.loss_mask[start:end], strict=True) if m]
        out.append(turn)
        start = bounds[k]
    return out


def test_tool_output_is_cut_by_tokens_with_a_marker(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    turns = [_call("python", code="print(' '.join(str(i) for i in range(500)))"), "The answer is 462."]
    _, [e] = _run(tokenizer, sandbox, turns, max_tool_output_tokens=20)
    [answer] = _tool_messages(e)
    assert _n(e, "truncated_outputs") == 1
    assert "tokens cut;" in answer and "tokens of the episode budget left]" in answer
    cut = int(answer.split("[... ")[1].split(" tokens cut")[0])
    assert cut > 400


def test_call_cap_and_episode_budget_end_the_episode(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    loop = [_call("python", code="1")]
    _, [capped] = _run(tokenizer, sandbox, loop, max_tool_calls=2)
    assert (_n(capped, "tool_calls"), len(capped.turns), capped.stop, capped.passed) == (
        2,
        3,
        "max_tool_calls",
        False,
    )
    _, [spent] = _run(tokenizer, sandbox, loop, max_tool_calls=50, max_episode_tokens=120)
    assert spent.stop == "episode_tokens"
    assert spent.tokens_after_prompt <= 120  # the budget holds, template tokens and cut markers included


def test_state_persists_within_an_episode_and_siblings_start_from_the_setup(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    spec = SessionSpec(tools=("python",), setup=("base = 6 * 7",), files={"n.txt": "11"})
    turns = [_call("python", code="y = base * int(open('n.txt').read())"), _call("python", code="y"),
             "The answer is 462."]  # fmt: skip
    _, episodes = _run(tokenizer, sandbox, turns, task=_task(spec), samples=3)
    assert [(_tool_messages(e)[1], e.passed) for e in episodes] == [
        ("<tool_response>\nOut: 462\n</tool_response>", True)
    ] * 3
    assert all(e.info["session_memory_mb"] > 0 for e in episodes)


def test_python_block_format_runs_blocks_in_the_session_and_answers_with_an_output_block(
    tokenizer, sandbox
) -> None:  # type: ignore[no-untyped-def]
    """``call_format='python_block'`` (ToRL's format): a turn ending with a closed ```python block is a
    call of the python tool, state persists between blocks, the answer is an ```output block in a tool
    message (masked), and a turn without a closed block is the final answer."""
    turns = [
        "Let me compute it.\n```python\nx = 6 * 7\nprint(x)\n```\n",
        "```python\nx * 11\n```\n",
        "The answer is 462.",
    ]
    engine, [e] = _run(tokenizer, sandbox, turns, call_format="python_block")
    answers = _tool_messages(e)
    assert answers[0].startswith("```output\n") and "42" in answers[0] and answers[0].endswith("\n```")
    assert "Out: 462" in answers[1]
    assert (_n(e, "tool_calls"), _n(e, "parse_errors"), e.stop, e.passed) == (2, 0, "answer", True)
    system = e.messages[0]["content"]
    assert "```python block" in system and "<tool_call>" not in system
    assert not any(e.loss_mask[i] for i in range(e.prompt_tokens))
    tool_text = tokenizer.decode([t for t, m in zip(e.token_ids, e.loss_mask, strict=True) if not m])
    assert "```output" in tool_text  # the tool answers are among the masked tokens


def test_python_block_format_refuses_a_task_without_the_python_tool(tokenizer, sandbox) -> None:  # type: ignore[no-untyped-def]
    task = _task(SessionSpec(tools=("run_tests",)))
    with pytest.raises(ValueError, match="can call only the python tool"):
        _run(tokenizer, sandbox, ["The answer is 462."], task=task, call_format="python_block")
