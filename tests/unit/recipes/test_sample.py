"""Rejection sampling's selection (``recipes/sample.py``): exactly the passing, well-formed, answered
episodes become rows, each once per task, in the format ``execrl sft`` reads; the counts per task add up."""

from __future__ import annotations

from typing import Any

from execrl.episodes.types import Episode, Turn, Verdict
from execrl.recipes.sample import episode_row, kept, select_rows
from execrl.tasks.schema import MathSpec, Task, TaskMetadata

TASKS = [
    Task(id=f"t/{i}", domain="math", prompt=f"What is {i} + 1?", spec=MathSpec(answer=str(i + 1)),
         metadata=TaskMetadata(family="t", split="train"))
    for i in range(2)
]  # fmt: skip
WRAP = ("<tool_response>\n", "\n</tool_response>")


def _episode(task: int, sample: int, text: str, *, passed: bool = True, valid: bool = True,
             stop: str = "answer", reward: float | None = None, tool: bool = False,
             truncated: bool = False, parse_errors: float = 0.0) -> Episode:  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "system", "content": "tools block"},
                                      {"role": "user", "content": f"What is {task} + 1?"}]  # fmt: skip
    if tool:
        messages += [{"role": "assistant", "content": "<tool_call>\n{...}\n</tool_call>"},
                     {"role": "tool", "content": f"{WRAP[0]}{task + 1}{WRAP[1]}"}]  # fmt: skip
    messages.append({"role": "assistant", "content": text})
    verdict = Verdict(
        float(passed) if reward is None else reward, valid, passed, "passed" if passed else "wrong"
    )
    return Episode(
        task_index=task, task_id=TASKS[task].id, sample=sample, token_ids=(), loss_mask=(), logprobs=(),
        sampling_logprobs=(), prompt_tokens=0, turns=(Turn(0, 1, "length" if truncated else "stop"),),
        messages=tuple(messages), text=text, stop=stop, verdict=verdict,
        info={"parse_errors": parse_errors} if parse_errors else {},
    )  # fmt: skip


def test_exactly_the_passing_answered_well_formed_episodes_are_kept_once_per_task() -> None:
    episodes = [
        _episode(0, 0, "1"),  # kept
        _episode(0, 1, "1"),  # the same turns again: counted as passed, written once
        _episode(0, 2, "one", passed=False),
        _episode(0, 3, "1", valid=False),  # an unknown reward is not a pass
        _episode(1, 0, "2", stop="max_tool_calls"),  # its last turn was not an answer of its own
        _episode(1, 1, "2", truncated=True),
        _episode(1, 2, "2", parse_errors=1.0, tool=True),
        _episode(1, 3, "The answer is 2.", tool=True),  # kept
    ]
    done = select_rows(episodes, TASKS, suite="s", wrapper=WRAP)
    assert [(r["metadata"]["task_id"], r["metadata"]["sample"]) for r in done.rows] == [
        ("t/0", 0),
        ("t/1", 3),
    ]
    assert done.counts == {"t/0": {"samples": 4, "passed": 2, "kept": 1},
                           "t/1": {"samples": 4, "passed": 1, "kept": 1}}  # fmt: skip
    assert [kept(e) for e in episodes] == [True, True, False, False, False, False, False, True]


def test_min_reward_keeps_by_the_reward_instead_of_the_pass() -> None:
    """A judge verifier combined by weight gives partial rewards: ``min_reward`` thresholds them."""
    low, high = _episode(0, 0, "a", passed=False, reward=0.4), _episode(0, 1, "b", passed=False, reward=0.8)
    assert [kept(e, 0.5) for e in (low, high)] == [False, True]
    assert not kept(_episode(0, 2, "c", passed=False, reward=0.9, valid=False), 0.5)


def test_a_row_is_the_task_prompt_then_the_model_turns_with_tool_answers_unwrapped() -> None:
    """The environment's system block (tools declared) is not in the row: ``execrl sft`` declares them again
    from ``tools``, so the row renders as the episode did."""
    tools = [{"type": "function", "function": {"name": "python"}}]
    row = episode_row(_episode(1, 3, "The answer is 2.", tool=True), TASKS[1], suite="s", tools=tools,
                      wrapper=WRAP)  # fmt: skip
    assert row["messages"] == [
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": "<tool_call>\n{...}\n</tool_call>"},
        {"role": "tool", "content": "2"},
        {"role": "assistant", "content": "The answer is 2."},
    ]
    assert row["tools"] == tools
    assert row["metadata"] == {"task_id": "t/1", "suite": "s", "source": "rejection_sampling", "sample": 3,
                               "reward": 1.0}  # fmt: skip
